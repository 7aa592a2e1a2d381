//! Integration tests of `dq-segments`: whole requests through the pipeline over
//! [`dq_segments::memory::MemorySource`] loaded with raw signal rows.
//!
//! Where tests go: `detectors.rs` — one section per mechanism (worked examples of
//! each detector, ongoing and started-before-range cases); `pagination.rs` — cursor/limit
//! properties; `daily.rs` — dailyActivity day bucketing; `errors.rs` — source failures; `robustness.rs` — no panics on hostile input.
// Integration-test helpers fail their test by panicking, like the #[test] bodies clippy.toml exempts.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::panic, clippy::indexing_slicing)]

mod daily;
mod detectors;
mod errors;
mod pagination;
mod robustness;

pub use dq_segments::testing::m;
