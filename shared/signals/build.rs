//! Generates the catalog tables from `data/signals.json`, the single source of truth shared with
//! any other generator (for example a GraphQL schema). The data is validated here so a bad edit
//! fails the build instead of shipping an inconsistent catalog.
// A build script: invalid catalog data must fail the build, which is what a panic here does.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use serde::Deserialize;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Catalog {
    source: String,
    events: Vec<String>,
    signals: Vec<Signal>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Signal {
    name: String,
    vss: String,
    datatype: String,
    kind: String,
    unit: Option<String>,
    min: Option<f64>,
    max: Option<f64>,
    privileges: Vec<String>,
    allowed: Option<Vec<String>>,
}

const NUMBER_TYPES: [&str; 11] = [
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64", "float", "double",
    "boolean",
];
const PRIVILEGES: [(&str, &str); 5] = [
    ("VEHICLE_NON_LOCATION_DATA", "VehicleNonLocationData"),
    ("VEHICLE_COMMANDS", "VehicleCommands"),
    ("VEHICLE_CURRENT_LOCATION", "VehicleCurrentLocation"),
    ("VEHICLE_ALL_TIME_LOCATION", "VehicleAllTimeLocation"),
    ("VEHICLE_VIN_CREDENTIAL", "VehicleVinCredential"),
];

/// model-garage `VSSToJSONName`.
fn json_name(vss: &str) -> String {
    let clean = |s: &str| {
        s.chars()
            .filter(char::is_ascii_alphanumeric)
            .collect::<String>()
    };
    let parts: Vec<&str> = vss.split('.').collect();
    if parts.len() == 1 {
        return clean(parts[0]);
    }
    let first = clean(parts[1]);
    let rest = clean(&parts[2..].concat());
    let mut out = String::new();
    let mut leading = true;
    for (i, c) in first.chars().enumerate() {
        if leading && (i == 0 || c.is_ascii_uppercase()) {
            out.push(c.to_ascii_lowercase());
        } else {
            leading = false;
            out.push(c);
        }
    }
    out + &rest
}

/// Kind implied by the VSS datatype (model-garage `schema.go`).
fn kind_of(datatype: &str) -> &'static str {
    if NUMBER_TYPES.contains(&datatype) {
        "Number"
    } else if datatype == "Types.DIMO.Coordinates" {
        "Location"
    } else {
        "String"
    }
}

/// `obdDTCList` → `OBD_DTC_LIST`, `obdO2WRSensor1Voltage` → `OBD_O2WR_SENSOR1_VOLTAGE`,
/// `behavior.harshBraking` → `BEHAVIOR_HARSH_BRAKING`.
fn const_name(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c == '.' {
            out.push('_');
            continue;
        }
        let prev = i
            .checked_sub(1)
            .and_then(|p| chars.get(p))
            .copied()
            .unwrap_or('.');
        let next_lower = chars.get(i + 1).is_some_and(char::is_ascii_lowercase);
        let word_start = prev.is_ascii_lowercase()
            || ((prev.is_ascii_uppercase() || prev.is_ascii_digit()) && next_lower);
        if c.is_ascii_uppercase() && word_start {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

fn main() {
    let manifest =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let data_path = manifest.join("data/signals.json");
    println!("cargo:rerun-if-changed={}", data_path.display());
    let text = std::fs::read_to_string(&data_path).expect("read data/signals.json");
    let mut catalog: Catalog = serde_json::from_str(&text).expect("parse data/signals.json");
    catalog.signals.sort_by(|a, b| a.name.cmp(&b.name));

    let mut seen = BTreeSet::new();
    for s in &catalog.signals {
        assert!(
            seen.insert(s.name.clone()),
            "duplicate signal name {}",
            s.name
        );
        assert_eq!(
            json_name(&s.vss),
            s.name,
            "name does not derive from VSS path {}",
            s.vss
        );
        let kind = kind_of(&s.datatype);
        assert_eq!(
            kind.to_ascii_lowercase(),
            s.kind,
            "kind of {} does not match datatype {}",
            s.name,
            s.datatype
        );
        assert!(!s.privileges.is_empty(), "{} has no privilege", s.name);
        for p in &s.privileges {
            assert!(
                PRIVILEGES.iter().any(|(k, _)| k == p),
                "{} has unknown privilege {p}",
                s.name
            );
        }
        if s.allowed.is_some() {
            assert_eq!(
                kind, "String",
                "{} lists allowed values but is not a string signal",
                s.name
            );
        }
    }
    let mut seen_events = BTreeSet::new();
    for e in &catalog.events {
        let valid = e.chars().all(|c| c.is_ascii_alphabetic() || c == '.')
            && e.chars().next().is_some_and(|c| c.is_ascii_lowercase());
        assert!(valid, "event name {e} must match ^[a-z][a-zA-Z.]*$");
        assert!(seen_events.insert(e.clone()), "duplicate event name {e}");
    }

    let mut out = format!(
        "// @generated by build.rs from data/signals.json; do not edit.\n// Data source: {}\n\n",
        catalog.source
    );
    let opt_str = |v: &Option<String>| {
        v.as_ref()
            .map_or("None".to_string(), |s| format!("Some({s:?})"))
    };
    let opt_f64 = |v: Option<f64>| v.map_or("None".to_string(), |f| format!("Some({f:?})"));
    writeln!(out, "/// Every default signal, sorted by JSON name.").unwrap();
    writeln!(
        out,
        "pub static SIGNALS: [SignalDef; {}] = [",
        catalog.signals.len()
    )
    .unwrap();
    for s in &catalog.signals {
        let privileges: Vec<String> = s
            .privileges
            .iter()
            .map(|p| {
                format!(
                    "Privilege::{}",
                    PRIVILEGES
                        .iter()
                        .find(|(k, _)| k == p)
                        .map_or("", |(_, v)| v)
                )
            })
            .collect();
        let allowed: Vec<String> = s
            .allowed
            .iter()
            .flatten()
            .map(|a| format!("{a:?}"))
            .collect();
        writeln!(
            out,
            "    SignalDef {{ name: {:?}, vss_path: {:?}, vss_datatype: {:?}, kind: ValueKind::{}, unit: {}, min: {}, max: {}, privileges: &[{}], allowed: &[{}] }},",
            s.name,
            s.vss,
            s.datatype,
            kind_of(&s.datatype),
            opt_str(&s.unit),
            opt_f64(s.min),
            opt_f64(s.max),
            privileges.join(", "),
            allowed.join(", ")
        )
        .unwrap();
    }
    writeln!(out, "];\n").unwrap();
    writeln!(out, "/// Every default event name, in definition order.").unwrap();
    let events: Vec<String> = catalog.events.iter().map(|e| format!("{e:?}")).collect();
    writeln!(
        out,
        "pub static EVENT_NAMES: [&str; {}] = [{}];\n",
        events.len(),
        events.join(", ")
    )
    .unwrap();
    writeln!(out, "/// JSON signal names as constants.\npub mod names {{").unwrap();
    for s in &catalog.signals {
        writeln!(
            out,
            "    /// `{}`\n    pub const {}: &str = {:?};",
            s.vss,
            const_name(&s.name),
            s.name
        )
        .unwrap();
    }
    writeln!(
        out,
        "}}\n\n/// Event names as constants.\npub mod events {{"
    )
    .unwrap();
    for e in &catalog.events {
        writeln!(
            out,
            "    /// `{e}`\n    pub const {}: &str = {e:?};",
            const_name(e)
        )
        .unwrap();
    }
    writeln!(out, "}}").unwrap();

    let out_path =
        PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("catalog.rs");
    std::fs::write(out_path, out).expect("write catalog.rs");
}
