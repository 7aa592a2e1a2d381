//! The detectors of dq-query.md §3.3, one module per mechanism, and [`detect`] dispatching on
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
    match mechanism {
        Mechanism::IgnitionDetection => ignition::detect(source, subject, from, to, config),
        Mechanism::FrequencyAnalysis => frequency::detect(source, subject, from, to, config, now),
        Mechanism::ChangePointDetection => {
            changepoint::detect(source, subject, from, to, config, now)
        }
        Mechanism::Idling => idling::detect(source, subject, from, to, config),
        Mechanism::Refuel => refuel::detect(source, subject, from, to, config),
        Mechanism::Recharge => recharge::detect(source, subject, from, to, config),
    }
}
