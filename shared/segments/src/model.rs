//! Plain data shared by the source, the detectors and the callers.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A UTC instant. Sources return µs precision (DuckDB `TIMESTAMPTZ`).
pub type Ts = DateTime<Utc>;

/// The GraphQL `DetectionMechanism` enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Mechanism {
    /// `IGNITION_DETECTION`: `isIgnitionOn` transitions, debounced.
    IgnitionDetection,
    /// `FREQUENCY_ANALYSIS`: busy 60 s windows merged into segments.
    FrequencyAnalysis,
    /// `CHANGE_POINT_DETECTION`: CUSUM over the busy windows.
    ChangePointDetection,
    /// `IDLING`: runs of idle engine speed.
    Idling,
    /// `REFUEL`: fuel level rises.
    Refuel,
    /// `RECHARGE`: state-of-charge rises while stationary.
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

    /// Whether `dailyActivity` accepts this mechanism.
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
/// caller from SQL summaries.
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
    /// The segment began at or before the requested range (rule differs per detector).
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

impl StateChange {
    /// The one change reported when the window holds no transition and its latest reading is
    /// on: ON at the window's earliest reading `ts`, from 0.
    pub fn synthetic_on(ts: Ts) -> Self {
        StateChange {
            ts,
            new_state: 1.0,
            prev_state: 0.0,
        }
    }
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

/// `isIgnitionOn`, the ignition signal read by IGNITION_DETECTION.
pub const IGNITION_SIGNAL: &str = "isIgnitionOn";
/// Engine speed, read by IDLING.
pub const ENGINE_SPEED_SIGNAL: &str = "powertrainCombustionEngineSpeed";
/// Fuel level %, read by REFUEL.
pub const FUEL_LEVEL_SIGNAL: &str = "powertrainFuelSystemRelativeLevel";
/// Traction battery state of charge %, read by RECHARGE.
pub const SOC_SIGNAL: &str = "powertrainTractionBatteryStateOfChargeCurrent";
/// Odometer km, read by RECHARGE.
pub const ODOMETER_SIGNAL: &str = "powertrainTransmissionTravelledDistance";
/// How far back IGNITION_DETECTION reads readings before `from`.
pub const IGNITION_LOOKBACK_DAYS: i64 = 30;

/// Window size and thresholds of [`crate::SignalSource::windowed_signal_counts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSpec {
    /// Window width in seconds (60 for both windowed detectors).
    pub window_seconds: i64,
    /// Minimum rows in a window (`HAVING count(*) >= ?`).
    pub min_signal_count: u64,
    /// Minimum distinct names in a window (`HAVING count(DISTINCT name) >= ?`).
    pub min_distinct_signals: u64,
}
