//! The six detectors, one module per mechanism, and [`detect`] dispatching on
//! [`Mechanism`]. Each detector reads a [`Detection`] through its [`SignalSource`] and returns
//! segments sorted by start with strictly increasing starts.

pub mod changepoint;
pub mod frequency;
pub mod idling;
pub mod ignition;
pub mod recharge;
pub mod refuel;

use crate::config::{BaseConfig, SegmentConfig};
use crate::error::Result;
use crate::model::{Mechanism, Segment, Ts};
use crate::ranges::minus_secs;
use crate::source::SignalSource;

/// One detection: what every detector reads, over which range, and the config it resolves to.
/// `from`/`to` are the request's ORIGINAL range (after the `to` clamp); `config` is `None` when
/// the request had no `config` object; `now` decides the near-real-time "ongoing" rule of the
/// windowed detectors.
pub struct Detection<'a, S: ?Sized> {
    /// The detector [`detect`] runs.
    pub mechanism: Mechanism,
    /// The reads.
    pub source: &'a S,
    /// The vehicle.
    pub subject: &'a str,
    /// Start of the requested range.
    pub from: Ts,
    /// End of the requested range.
    pub to: Ts,
    /// The request's `config`, for the fields only one detector reads.
    pub config: Option<&'a SegmentConfig>,
    /// The time of the request.
    pub now: Ts,
    /// `maxGapSeconds` / `minSegmentDurationSeconds` under `mechanism`'s defaults, resolved once
    /// here so every detector reads the same rule.
    pub base: BaseConfig,
}

impl<'a, S: ?Sized> Detection<'a, S> {
    /// A detection by `mechanism` of `subject` over `[from, to]` at `now`.
    pub fn new(
        mechanism: Mechanism,
        source: &'a S,
        subject: &'a str,
        from: Ts,
        to: Ts,
        config: Option<&'a SegmentConfig>,
        now: Ts,
    ) -> Self {
        Detection {
            mechanism,
            source,
            subject,
            from,
            to,
            config,
            now,
            base: BaseConfig::resolve(mechanism, config),
        }
    }

    /// Start of the windowed and idle reads, `from − maxGap`: a run already under way at `from`
    /// is read whole, so it is merged or clipped rather than cut.
    pub fn read_from(&self) -> Ts {
        minus_secs(self.from, self.base.max_gap_seconds)
    }
}

/// Runs the detector of `d.mechanism`.
pub fn detect<S: SignalSource + ?Sized>(d: &Detection<'_, S>) -> Result<Vec<Segment>> {
    match d.mechanism {
        Mechanism::IgnitionDetection => ignition::detect(d),
        Mechanism::FrequencyAnalysis => frequency::detect(d),
        Mechanism::ChangePointDetection => changepoint::detect(d),
        Mechanism::Idling => idling::detect(d),
        Mechanism::Refuel => refuel::detect(d),
        Mechanism::Recharge => recharge::detect(d),
    }
}
