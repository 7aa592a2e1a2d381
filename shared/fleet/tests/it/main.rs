//! Integration tests for `dq-fleet`, one module per area:
//! - `decode`: every vendor's payloads decode through `dq-decode` without errors.
//! - `determinism`: same config ⇒ identical events, whatever the chunking.
//! - `headers`: din-canonical headers and per-vendor fan-out.
//! - `physics`: odometer, GPS and energy behave like a car.
//! - `plan`: ground truth is consistent and matches the events.
//!
//! Add a module here for a new area rather than a new test binary.
// Integration-test helpers fail their test by panicking, like the #[test] bodies clippy.toml exempts.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::panic, clippy::indexing_slicing)]

mod decode;
mod determinism;
mod headers;
mod physics;
mod plan;

use chrono::{TimeZone, Utc};
use dq_fleet::{Fleet, FleetConfig, VendorMix};
use std::time::Duration;

/// A small mixed fleet over a few days (covers every vendor).
pub fn small_config(vehicles: u32, days: u32) -> FleetConfig {
    FleetConfig {
        vehicles,
        days,
        seed: 7,
        start: Utc.with_ymd_and_hms(2025, 3, 3, 0, 0, 0).single().unwrap(),
        vendor_mix: VendorMix::default(),
        ..FleetConfig::default()
    }
}

/// Every event of `fleet`, in stream order.
pub fn all_events(fleet: &Fleet, chunk: Duration) -> Vec<dq_cloudevent::RawEvent> {
    fleet.chunks(chunk).flatten().collect()
}
