//! The default DIMO signal catalog: the 116 signals the default module accepts and the API
//! exposes, plus the default event names.
//!
//! The catalog is DATA (`data/signals.json`); `build.rs` validates it and generates the tables
//! below, and other generators (the GraphQL schema) read the same file. This crate holds no
//! decoding rules and no transport types: vendor-only names such as
//! `currentLocationLatitude` belong to the decoders that emit them.
//!
//! # Layout
//! - [`SIGNALS`] / [`signal`] — every [`SignalDef`], sorted by JSON name.
//! - [`EVENT_NAMES`] / [`is_event_name`] — the accepted event names.
//! - [`names`] / [`events`] — the same names as constants.
//! - [`ValueKind`] / [`Location`] — how a value is stored, and the location value itself.
#![warn(missing_docs)]

/// How a signal's value is stored (model-garage `schema.go` type mapping).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueKind {
    /// Every numeric and boolean VSS type; booleans are 0/1. Stored in `value_number`.
    Number,
    /// `string` and `string[]` (arrays JSON-encoded into the string). Stored in `value_string`.
    String,
    /// `Types.DIMO.Coordinates`. Stored in the `loc_*` columns.
    Location,
}

/// The value of a [`ValueKind::Location`] signal: what decoders emit, the `loc_*` columns
/// store and readers aggregate.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Location {
    /// Degrees.
    pub latitude: f64,
    /// Degrees.
    pub longitude: f64,
    /// Horizontal dilution of precision.
    pub hdop: f64,
    /// Degrees. No module sets it today and the dq dialect never exposes it, but it has its own
    /// column.
    pub heading: f64,
}

/// A privilege of the GraphQL `Privilege` enum: what a caller needs to read a signal (the catalog
/// uses the first five) or another field. dq-auth maps each to the permission it checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Privilege {
    /// `VEHICLE_NON_LOCATION_DATA`
    VehicleNonLocationData,
    /// `VEHICLE_COMMANDS`
    VehicleCommands,
    /// `VEHICLE_CURRENT_LOCATION`
    VehicleCurrentLocation,
    /// `VEHICLE_ALL_TIME_LOCATION`
    VehicleAllTimeLocation,
    /// `VEHICLE_VIN_CREDENTIAL`
    VehicleVinCredential,
    /// `VEHICLE_APPROXIMATE_LOCATION`
    VehicleApproximateLocation,
    /// `VEHICLE_RAW_DATA`
    VehicleRawData,
}

impl Privilege {
    /// Every value, in SDL order.
    pub const ALL: [Privilege; 7] = [
        Privilege::VehicleNonLocationData,
        Privilege::VehicleCommands,
        Privilege::VehicleCurrentLocation,
        Privilege::VehicleAllTimeLocation,
        Privilege::VehicleVinCredential,
        Privilege::VehicleApproximateLocation,
        Privilege::VehicleRawData,
    ];

    /// The SDL enum value, e.g. `VEHICLE_NON_LOCATION_DATA`.
    pub fn as_str(self) -> &'static str {
        match self {
            Privilege::VehicleNonLocationData => "VEHICLE_NON_LOCATION_DATA",
            Privilege::VehicleCommands => "VEHICLE_COMMANDS",
            Privilege::VehicleCurrentLocation => "VEHICLE_CURRENT_LOCATION",
            Privilege::VehicleAllTimeLocation => "VEHICLE_ALL_TIME_LOCATION",
            Privilege::VehicleVinCredential => "VEHICLE_VIN_CREDENTIAL",
            Privilege::VehicleApproximateLocation => "VEHICLE_APPROXIMATE_LOCATION",
            Privilege::VehicleRawData => "VEHICLE_RAW_DATA",
        }
    }

    /// Parses an SDL enum value (case-sensitive).
    pub fn parse(s: &str) -> Option<Privilege> {
        Privilege::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

/// One catalog signal.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SignalDef {
    /// JSON name, e.g. `speed`.
    pub name: &'static str,
    /// VSS path, e.g. `Vehicle.Speed`.
    pub vss_path: &'static str,
    /// VSS datatype, e.g. `float`, `string[]`, `Types.DIMO.Coordinates`.
    pub vss_datatype: &'static str,
    /// Storage kind derived from the datatype.
    pub kind: ValueKind,
    /// Unit, e.g. `km/h`.
    pub unit: Option<&'static str>,
    /// Documented minimum (informational; decoders do not enforce it).
    pub min: Option<f64>,
    /// Documented maximum (informational; decoders do not enforce it).
    pub max: Option<f64>,
    /// Privileges required to read it.
    pub privileges: &'static [Privilege],
    /// Allowed values of string signals (empty when unrestricted).
    pub allowed: &'static [&'static str],
}

include!(concat!(env!("OUT_DIR"), "/catalog.rs"));

/// Looks a signal up by JSON name (exact, case-sensitive).
pub fn signal(name: &str) -> Option<&'static SignalDef> {
    SIGNALS
        .binary_search_by(|s| s.name.cmp(name))
        .ok()
        .and_then(|i| SIGNALS.get(i))
}

/// True when `name` is a default event name.
pub fn is_event_name(name: &str) -> bool {
    EVENT_NAMES.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn exactly_116_unique_signals() {
        assert_eq!(SIGNALS.len(), 116);
        let unique: HashSet<_> = SIGNALS.iter().map(|s| s.name).collect();
        assert_eq!(unique.len(), 116);
    }

    #[test]
    fn lookup_finds_every_signal_and_nothing_else() {
        for s in &SIGNALS {
            assert_eq!(signal(s.name).map(|d| d.vss_path), Some(s.vss_path));
        }
        for vendor_only in [
            "currentLocationLatitude",
            "dimoAftermarketHDOP",
            "currentLocationIsRedacted",
            "Speed",
            "",
        ] {
            assert!(signal(vendor_only).is_none(), "{vendor_only}");
        }
    }

    #[test]
    fn kinds_and_details_follow_the_spec() {
        let coords = signal(names::CURRENT_LOCATION_COORDINATES).unwrap();
        assert_eq!(coords.kind, ValueKind::Location);
        assert_eq!(coords.privileges, [Privilege::VehicleAllTimeLocation]);
        let speed = signal(names::SPEED).unwrap();
        assert_eq!((speed.kind, speed.unit), (ValueKind::Number, Some("km/h")));
        let dtc = signal(names::OBD_DTC_LIST).unwrap();
        assert_eq!(
            (dtc.kind, dtc.vss_datatype),
            (ValueKind::String, "string[]")
        );
        let ptype = signal(names::POWERTRAIN_TYPE).unwrap();
        assert_eq!(ptype.allowed, ["COMBUSTION", "HYBRID", "ELECTRIC"]);
        let heading = signal(names::CURRENT_LOCATION_HEADING).unwrap();
        assert_eq!((heading.min, heading.max), (Some(0.0), Some(360.0)));
        let tps = signal(names::POWERTRAIN_COMBUSTION_ENGINE_TPS).unwrap();
        assert_eq!((tps.min, tps.max), (None, Some(100.0)));
        assert_eq!(
            SIGNALS
                .iter()
                .filter(|s| s.kind == ValueKind::Location)
                .count(),
            1
        );
        assert_eq!(
            Privilege::VehicleNonLocationData.as_str(),
            "VEHICLE_NON_LOCATION_DATA"
        );
    }

    #[test]
    fn event_names() {
        assert_eq!(EVENT_NAMES.len(), 7);
        assert!(is_event_name(events::BEHAVIOR_HARSH_BRAKING));
        assert_eq!(events::SECURITY_ENGINE_UNBLOCK, "security.engineUnblock");
        assert!(!is_event_name("harsh_braking"));
    }
}
