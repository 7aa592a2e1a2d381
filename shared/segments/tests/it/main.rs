//! Integration tests of `dq-segments`: whole requests through the pipeline over
//! [`dq_segments::memory::MemorySource`] loaded with raw signal rows.
//!
//! Where tests go: `detectors.rs` — one section per mechanism (worked examples of
//! each detector, ongoing and started-before-range cases); `pagination.rs` — cursor/limit
//! properties; `daily.rs` — dailyActivity day bucketing; `errors.rs` — source failures; `robustness.rs` — no panics on hostile input.

mod daily;
mod detectors;
mod errors;
mod pagination;
mod robustness;

use chrono::{DateTime, TimeDelta, TimeZone, Utc};

/// 2025-01-01T10:00:00Z plus `i` minutes.
pub fn m(i: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 1, 1, 10, 0, 0).unwrap() + TimeDelta::minutes(i)
}
