//! din simulator tests: bundles become snapshots with din's column contract (`bundles.rs`),
//! payloads move to the blob store (`blobs.rs`), expiry honours the consumer floor (`expiry.rs`).
//! Lake-touching bodies run against both catalog backends via `dq_lake::backend_tests!`.
// Integration-test helpers fail their test by panicking, like the #[test] bodies clippy.toml exempts.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::panic, clippy::indexing_slicing)]

mod blobs;
mod bundles;
mod expiry;

use chrono::{DateTime, TimeZone, Utc};
use dq_cloudevent::event::RawEvent;
pub use dq_dinsim::testing::din_lake;

/// A status event of vehicle `token` at `time` with a small JSON payload.
pub fn status(token: u32, id: &str, time: DateTime<Utc>, data: &str) -> RawEvent {
    dq_dinsim::testing::event(token, id, "dimo.status", time, data)
}

pub fn at(secs: i64, micros: u32) -> DateTime<Utc> {
    Utc.timestamp_opt(1_780_000_000 + secs, micros * 1000)
        .unwrap()
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}
