//! End-to-end flows across crates. One module per flow:
//! - `raw_contract`: what the din simulator stores is what the decoders accept.
// Integration-test helpers fail their test by panicking, like the #[test] bodies clippy.toml exempts.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::panic, clippy::indexing_slicing)]

mod raw_contract;
