//! Default segment signal sets and the merge with client requests (defaults first, a repeated
//! `(name, agg)` kept once). The caller aggregates them with SQL.

use std::collections::HashSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::Mechanism;
use crate::source::{FUEL_LEVEL_SIGNAL, ODOMETER_SIGNAL, SOC_SIGNAL};

/// `speed`, whose MAX drives the IDLING speed filter.
pub const SPEED_SIGNAL: &str = "speed";
/// The location signal whose FIRST/LAST give segment and day start/end locations.
pub const LOCATION_SIGNAL: &str = "currentLocationCoordinates";

/// The GraphQL `FloatAggregation` enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum FloatAggregation {
    /// `AVG`
    Avg,
    /// `MED`
    Med,
    /// `MAX`
    Max,
    /// `MIN`
    Min,
    /// `RAND`
    Rand,
    /// `FIRST`
    First,
    /// `LAST`
    Last,
}

impl FloatAggregation {
    /// The enum value name, as reported in `SignalAggregationValue.agg`.
    pub fn as_str(self) -> &'static str {
        match self {
            FloatAggregation::Avg => "AVG",
            FloatAggregation::Med => "MED",
            FloatAggregation::Max => "MAX",
            FloatAggregation::Min => "MIN",
            FloatAggregation::Rand => "RAND",
            FloatAggregation::First => "FIRST",
            FloatAggregation::Last => "LAST",
        }
    }

    /// The aggregation an enum value name ([`FloatAggregation::as_str`]) names.
    pub fn from_name(name: &str) -> Option<FloatAggregation> {
        use FloatAggregation::*;
        [Avg, Med, Max, Min, Rand, First, Last]
            .into_iter()
            .find(|a| a.as_str() == name)
    }
}

impl fmt::Display for FloatAggregation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `SegmentSignalRequest`: one float aggregation of one signal name (not validated).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SignalRequest {
    /// Stored signal name.
    pub name: String,
    /// Aggregation.
    pub agg: FloatAggregation,
}

impl SignalRequest {
    /// Builds a request.
    pub fn new(name: impl Into<String>, agg: FloatAggregation) -> Self {
        SignalRequest {
            name: name.into(),
            agg,
        }
    }
}

use FloatAggregation::{First, Last, Max};

/// Defaults of IGNITION_DETECTION, FREQUENCY_ANALYSIS and CHANGE_POINT_DETECTION.
pub const BASE_SIGNAL_SET: &[(&str, FloatAggregation)] = &[
    (SPEED_SIGNAL, Max),
    (FUEL_LEVEL_SIGNAL, First),
    (FUEL_LEVEL_SIGNAL, Last),
    (SOC_SIGNAL, First),
    (SOC_SIGNAL, Last),
    (ODOMETER_SIGNAL, First),
    (ODOMETER_SIGNAL, Last),
];

/// Defaults of IDLING and REFUEL.
pub const FUEL_SIGNAL_SET: &[(&str, FloatAggregation)] = &[
    (SPEED_SIGNAL, Max),
    (FUEL_LEVEL_SIGNAL, First),
    (FUEL_LEVEL_SIGNAL, Last),
    (ODOMETER_SIGNAL, First),
    (ODOMETER_SIGNAL, Last),
];

/// Defaults of RECHARGE.
pub const RECHARGE_SIGNAL_SET: &[(&str, FloatAggregation)] = &[
    (SPEED_SIGNAL, Max),
    (SOC_SIGNAL, First),
    (SOC_SIGNAL, Last),
    (ODOMETER_SIGNAL, First),
    (ODOMETER_SIGNAL, Last),
];

/// The default signal set of `mechanism`.
pub fn default_signal_set(mechanism: Mechanism) -> &'static [(&'static str, FloatAggregation)] {
    match mechanism {
        Mechanism::Idling | Mechanism::Refuel => FUEL_SIGNAL_SET,
        Mechanism::Recharge => RECHARGE_SIGNAL_SET,
        Mechanism::IgnitionDetection
        | Mechanism::FrequencyAnalysis
        | Mechanism::ChangePointDetection => BASE_SIGNAL_SET,
    }
}

/// The mechanism's defaults followed by the client's requests, de-duplicated on
/// `(name, agg)`, first occurrence wins (defaults first).
pub fn merge_signal_requests(mechanism: Mechanism, client: &[SignalRequest]) -> Vec<SignalRequest> {
    let mut seen = HashSet::new();
    default_signal_set(mechanism)
        .iter()
        .map(|&(name, agg)| SignalRequest::new(name, agg))
        .chain(client.iter().cloned())
        .filter(|r| seen.insert((r.name.clone(), r.agg)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_keeps_defaults_first_and_dedups() {
        let client = [
            SignalRequest::new("speed", Max),
            SignalRequest::new("speed", FloatAggregation::Avg),
            SignalRequest::new("speed", FloatAggregation::Avg),
        ];
        let merged = merge_signal_requests(Mechanism::Recharge, &client);
        assert_eq!(merged.len(), RECHARGE_SIGNAL_SET.len() + 1);
        assert_eq!(merged[0], SignalRequest::new("speed", Max));
        assert_eq!(
            merged.last().unwrap(),
            &SignalRequest::new("speed", FloatAggregation::Avg)
        );
    }

    #[test]
    fn sets_per_mechanism() {
        assert_eq!(default_signal_set(Mechanism::FrequencyAnalysis).len(), 7);
        assert_eq!(default_signal_set(Mechanism::Idling), FUEL_SIGNAL_SET);
        assert_eq!(default_signal_set(Mechanism::Refuel), FUEL_SIGNAL_SET);
        assert!(default_signal_set(Mechanism::Recharge).contains(&(SOC_SIGNAL, First)));
    }
}
