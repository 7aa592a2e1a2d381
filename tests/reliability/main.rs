//! Reliability across crates (issue 10). The per-crate fault and hostile-input tests live beside
//! their crates (`functions/materializer/tests/it/faults.rs`, `shared/graphql/tests/it/{faults,
//! hostile}.rs`, `shared/fetch/tests/it/hostile.rs`); this binary holds what needs the whole
//! stack at once:
//! - `load`: GraphQL and FetchService under concurrent clients while din writes and the
//!   materializer drains, on one PostgreSQL-catalog lake.

mod load;
