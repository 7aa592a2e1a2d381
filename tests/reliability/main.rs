//! Reliability across crates (issue 10). The per-crate fault and hostile-input tests live beside
//! their crates (`functions/materializer/tests/it/faults.rs`, `shared/graphql/tests/it/{faults,
//! hostile}.rs`, `shared/fetch/tests/it/hostile.rs`); this binary holds what needs the whole
//! stack at once:
//! - `load`: GraphQL and FetchService under concurrent clients while din writes and the
//!   materializer drains, on one PostgreSQL-catalog lake.
// Integration-test helpers fail their test by panicking, like the #[test] bodies clippy.toml exempts.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::panic, clippy::indexing_slicing)]

mod load;
