//! Test fixtures (feature `testing`): the worked examples' clock and readings, shared by this
//! crate's unit and integration tests and by the DuckDB source's tests in dq-query, so each
//! worked example is written once and pins the same golden result on every source.
#![allow(
    clippy::unwrap_used,
    reason = "fixtures stop on a broken invariant of their own data"
)]

use chrono::{TimeDelta, TimeZone, Utc};

use crate::config::SegmentConfig;
use crate::detect::Detection;
use crate::memory::MemorySource;
use crate::model::{LevelSample, Mechanism, Ts};
use crate::source::{ODOMETER_SIGNAL, SOC_SIGNAL};

/// 2025-01-01T10:00:00Z plus `i` minutes: the worked examples' clock.
pub fn m(i: i64) -> Ts {
    Utc.with_ymd_and_hms(2025, 1, 1, 10, 0, 0).unwrap() + TimeDelta::minutes(i)
}

/// Samples at `(minute, value)` points.
pub fn samples(points: &[(i64, f64)]) -> Vec<LevelSample> {
    points
        .iter()
        .map(|&(i, v)| LevelSample::new(m(i), v))
        .collect()
}

/// An in-memory source holding each signal's `(minute, value)` points.
pub fn source<P: AsRef<[(i64, f64)]>>(series: &[(&str, P)]) -> MemorySource {
    let mut src = MemorySource::new();
    for (signal, points) in series {
        src.push_samples(signal, samples(points.as_ref()));
    }
    src
}

/// A `mechanism` detection of subject `s` over minutes `[from, to]`, at `to`.
pub fn over<'a, S: ?Sized>(
    mechanism: Mechanism,
    source: &'a S,
    from: i64,
    to: i64,
    config: Option<&'a SegmentConfig>,
) -> Detection<'a, S> {
    Detection::new(mechanism, source, "s", m(from), m(to), config, m(to))
}

/// REFUEL's worked example, fuel level: down to a trough of 20 at minute 3, up to 80 by
/// minute 6, then flat. Over minutes `[0, 60]` it is one 420 s refuel, minutes 0 → 7.
pub const FUEL_BASIC_RISE: [(i64, f64); 9] = [
    (0, 50.0),
    (1, 40.0),
    (2, 25.0),
    (3, 20.0),
    (4, 60.0),
    (5, 75.0),
    (6, 80.0),
    (7, 80.0),
    (60, 80.0),
];

/// REFUEL with the trough (minute 8) before a range starting at minute 10, the peak at 14 and
/// flat to 16: over minutes `[10, 60]` one refuel clamped to start at 10, ending at 16.
pub const FUEL_TROUGH_BEFORE_RANGE: [(i64, f64); 7] = [
    (0, 30.0),
    (8, 20.0),
    (11, 40.0),
    (12, 60.0),
    (14, 80.0),
    (16, 80.0),
    (60, 79.5),
];

/// REFUEL rising 80 → 100 (+25 %, 20 points): below the detector's default 30 %, above the SDL
/// default 15 %, where it is one refuel, minutes 0 → 6.
pub const FUEL_RISE_OF_25_PERCENT: [(i64, f64); 4] =
    [(0, 80.0), (3, 80.0), (6, 100.0), (60, 100.0)];

/// RECHARGE's worked example: SoC rising 3 points a minute over minutes 0–20 while the odometer
/// advances `odometer_km_per_minute` from 1000 km. Standing still it is one 600 s recharge,
/// minutes 5 → 15; moving 1 km a minute, none.
pub fn charging(odometer_km_per_minute: f64) -> [(&'static str, Vec<(i64, f64)>); 2] {
    let minutes = 0..=20;
    [
        (
            SOC_SIGNAL,
            minutes
                .clone()
                .map(|i| (i, 20.0 + 3.0 * i as f64))
                .collect(),
        ),
        (
            ODOMETER_SIGNAL,
            minutes
                .map(|i| (i, 1000.0 + odometer_km_per_minute * i as f64))
                .collect(),
        ),
    ]
}
