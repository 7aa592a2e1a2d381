//! Plain data shared by the source, the detectors and the callers.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A UTC instant. Sources return µs precision (DuckDB `TIMESTAMPTZ`).
pub type Ts = DateTime<Utc>;

/// The GraphQL `DetectionMechanism` enum (dq-query.md §1.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Mechanism {
    /// `IGNITION_DETECTION`: `isIgnitionOn` transitions, debounced (§3.3.1).
    IgnitionDetection,
    /// `FREQUENCY_ANALYSIS`: busy 60 s windows merged into segments (§3.3.2).
    FrequencyAnalysis,
    /// `CHANGE_POINT_DETECTION`: CUSUM over the busy windows (§3.3.2).
    ChangePointDetection,
    /// `IDLING`: runs of idle engine speed (§3.3.3).
    Idling,
    /// `REFUEL`: fuel level rises (§3.3.4).
    Refuel,
    /// `RECHARGE`: state-of-charge rises while stationary (§3.3.5).
    Recharge,
}

impl Mechanism {
    /// Every mechanism, in SDL order.
    pub const ALL: [Mechanism; 6] = [
        Mechanism::IgnitionDetection,
        Mechanism::FrequencyAnalysis,
        Mechanism::ChangePointDetection,
        Mechanism::Idling,
        Mechanism::Refuel,
        Mechanism::Recharge,
    ];

    /// The GraphQL enum value name.
    pub fn as_str(self) -> &'static str {
        match self {
            Mechanism::IgnitionDetection => "IGNITION_DETECTION",
            Mechanism::FrequencyAnalysis => "FREQUENCY_ANALYSIS",
            Mechanism::ChangePointDetection => "CHANGE_POINT_DETECTION",
            Mechanism::Idling => "IDLING",
            Mechanism::Refuel => "REFUEL",
            Mechanism::Recharge => "RECHARGE",
        }
    }

    /// Whether `dailyActivity` accepts this mechanism (§3.5 step 1).
    pub fn allowed_for_daily_activity(self) -> bool {
        matches!(
            self,
            Mechanism::IgnitionDetection
                | Mechanism::FrequencyAnalysis
                | Mechanism::ChangePointDetection
        )
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Error of [`Mechanism::from_str`]: the name is not a `DetectionMechanism` value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown detection mechanism `{0}`")]
pub struct UnknownMechanism(pub String);

impl FromStr for Mechanism {
    type Err = UnknownMechanism;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mechanism::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| UnknownMechanism(s.to_owned()))
    }
}

/// A detected segment: time bounds only. Locations, signals and event counts are added by the
/// caller from SQL summaries (§3.1 steps 7–8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Segment {
    /// `start.timestamp`: clipped to `from` for the windowed/run detectors, never for ignition.
    pub start: Ts,
    /// `end.timestamp`; `None` iff [`Segment::is_ongoing`].
    pub end: Option<Ts>,
    /// Whole seconds (truncated): `end − start`, or `to − start` when ongoing.
    pub duration_seconds: i64,
    /// No end yet: the segment runs to the (clamped) `to` of the request.
    pub is_ongoing: bool,
    /// The segment began at or before the requested range (rule differs per detector, §3.2/§3.3.1).
    pub started_before_range: bool,
}

/// A closed `[start, end]` interval of sample times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeRange {
    /// First instant.
    pub start: Ts,
    /// Last instant.
    pub end: Ts,
}

impl TimeRange {
    /// Builds a range.
    pub fn new(start: Ts, end: Ts) -> Self {
        TimeRange { start, end }
    }
}

/// One numeric reading of a signal (rpm, fuel %, SoC %, odometer km, ignition 0/1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LevelSample {
    /// Reading time.
    pub ts: Ts,
    /// `value_number`.
    pub value: f64,
}

impl LevelSample {
    /// Builds a sample.
    pub fn new(ts: Ts, value: f64) -> Self {
        LevelSample { ts, value }
    }
}

/// A transition of `isIgnitionOn`: the new value and the value it replaced.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StateChange {
    /// Time of the first reading with the new value.
    pub ts: Ts,
    /// New value (1 = on, 0 = off).
    pub new_state: f64,
    /// Previous value (0 when nothing was read before).
    pub prev_state: f64,
}

/// One epoch-aligned window of signal activity that passed the count thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActiveWindow {
    /// `floor(ts_µs / window_µs) · window_µs`.
    pub start: Ts,
    /// `start + window`.
    pub end: Ts,
    /// Deduplicated rows of any signal name in the window.
    pub signal_count: u64,
    /// Distinct signal names in the window.
    pub distinct_signal_count: u64,
}
