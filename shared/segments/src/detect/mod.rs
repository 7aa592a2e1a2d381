//! The six detectors, one module per mechanism, and [`detect`] dispatching on
//! [`Mechanism`]. Each detector reads through a [`SignalSource`] and returns segments sorted by
//! start with strictly increasing starts; `from`/`to` are the request's ORIGINAL range (after
//! the `to` clamp), `config` is `None` when the request had no `config` object.

pub mod changepoint;
pub mod frequency;
pub mod idling;
pub mod ignition;
pub mod recharge;
pub mod refuel;

use crate::config::SegmentConfig;
use crate::error::Result;
use crate::model::{Mechanism, Segment, Ts};
use crate::source::SignalSource;

/// One detection: what every detector reads, and over which range. `from`/`to` are the
/// request's ORIGINAL range (after the `to` clamp); `config` is `None` when the request had no
/// `config` object; `now` decides the near-real-time "ongoing" rule of the windowed detectors.
pub struct Detection<'a, S: ?Sized> {
    /// The reads.
    pub source: &'a S,
    /// The vehicle.
    pub subject: &'a str,
    /// Start of the requested range.
    pub from: Ts,
    /// End of the requested range.
    pub to: Ts,
    /// The request's `config`.
    pub config: Option<&'a SegmentConfig>,
    /// The time of the request.
    pub now: Ts,
}

/// Runs the detector of `mechanism` over `[from, to]`. `now` decides the near-real-time
/// "ongoing" rule of the windowed detectors.
pub fn detect<S: SignalSource + ?Sized>(
    source: &S,
    mechanism: Mechanism,
    subject: &str,
    from: Ts,
    to: Ts,
    config: Option<&SegmentConfig>,
    now: Ts,
) -> Result<Vec<Segment>> {
    let d = Detection {
        source,
        subject,
        from,
        to,
        config,
        now,
    };
    match mechanism {
        Mechanism::IgnitionDetection => ignition::detect(&d),
        Mechanism::FrequencyAnalysis => frequency::detect(&d),
        Mechanism::ChangePointDetection => changepoint::detect(&d),
        Mechanism::Idling => idling::detect(&d),
        Mechanism::Refuel => refuel::detect(&d),
        Mechanism::Recharge => recharge::detect(&d),
    }
}

/// Test data shared by the detectors' tests.
#[cfg(test)]
pub(crate) mod testing {
    use super::Detection;
    use crate::config::SegmentConfig;
    use crate::model::{LevelSample, Ts};
    use chrono::{TimeDelta, TimeZone, Utc};

    /// `i` minutes after the tests' epoch, 2025-01-01T10:00Z.
    pub fn m(i: i64) -> Ts {
        Utc.with_ymd_and_hms(2025, 1, 1, 10, 0, 0).unwrap() + TimeDelta::minutes(i)
    }

    /// Samples at `(minute, value)` points.
    pub fn s(points: &[(i64, f64)]) -> Vec<LevelSample> {
        points
            .iter()
            .map(|&(i, v)| LevelSample::new(m(i), v))
            .collect()
    }

    /// A detection of subject `s` over minutes `[from, to]`, at `to`.
    pub fn over<'a, S: ?Sized>(
        source: &'a S,
        from: i64,
        to: i64,
        config: Option<&'a SegmentConfig>,
    ) -> Detection<'a, S> {
        Detection {
            source,
            subject: "s",
            from: m(from),
            to: m(to),
            config,
            now: m(to),
        }
    }
}
