//! AutoPi and HashDog (Macaron) "V2" payloads: one name-dispatch table,
//! two flavours that differ in a few conversion rules.
//!
//! Payload: `{"vehicle":{"signals":[{"name","timestamp"(unix ms),"value"}]}}`, read with gjson
//! semantics (first duplicate wins, `timestamp` coerced like gjson `Int()`).
//!
//! **Deviation (HashDog):** model-garage's HashDog build panics on `charging`, `oil` and
//! `oilLife` (generated `panic("not implemented")` stubs), which makes Go dq drop the whole
//! event. Here each of those yields a [`DecodeError::NotImplemented`] for its element (an `oil`
//! element then yields neither of its two signals, as any failed element does upstream) and the
//! rest of the event is kept.

use crate::error::DecodeError;
use crate::model::{Decoded, Signal};
use crate::util::{payload, unix_millis};
use dq_cloudevent::gojson;
use dq_cloudevent::json::Value;
use dq_cloudevent::{Erc721Did, RawEvent};
use dq_signals::names as n;

/// Vendor-only names the V2 decoders emit (not in the default catalog); merged or stored by dq.
pub mod vendor_names {
    /// Consumed by the coordinate merge.
    pub const CURRENT_LOCATION_LATITUDE: &str = "currentLocationLatitude";
    /// Consumed by the coordinate merge.
    pub const CURRENT_LOCATION_LONGITUDE: &str = "currentLocationLongitude";
    /// Consumed by the coordinate merge.
    pub const DIMO_AFTERMARKET_HDOP: &str = "dimoAftermarketHDOP";
    /// Stored as-is although it is not in the catalog.
    pub const CURRENT_LOCATION_IS_REDACTED: &str = "currentLocationIsRedacted";
}
use vendor_names as vn;

/// Which vendor's rule set applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// AutoPi (`0x5e31…1897`).
    AutoPi,
    /// HashDog / Macaron (`0x4c67…6Bc2`).
    HashDog,
}

/// A conversion rule; the JSON type it needs is part of the rule.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Rule {
    /// Number, unchanged.
    AsIs,
    /// Number times a constant.
    Times(f64),
    /// Bool → 1/0.
    Bool,
    /// String, unchanged.
    Str,
    /// String: Gasoline→GASOLINE, Ethanol→E85, Diesel→DIESEL, LPG→LPG, else OTHER.
    SupportedFuelType,
    /// String: "Electric"→ELECTRIC, else COMBUSTION.
    PowertrainType,
    /// String split on "," into a JSON array string.
    DtcList,
    /// Number: values above 999999 are metres, `round(v/1000)`.
    Odometer,
    /// Number fraction → oil level enum.
    OilLevel,
    /// Number → model-garage stub that panics (HashDog).
    NumberNotImplemented,
    /// Bool → model-garage stub that panics (HashDog).
    BoolNotImplemented,
}

/// The V2 name table: original name → (signal, rule) per flavour; unknown names map to nothing.
fn targets(name: &str, flavour: Flavour) -> &'static [(&'static str, Rule)] {
    use Flavour::{AutoPi, HashDog};
    use Rule::*;
    match (name, flavour) {
        ("altitude", _) => &[(n::CURRENT_LOCATION_ALTITUDE, AsIs)],
        ("ambientAirTemp" | "ambientTemp", _) => &[(n::EXTERIOR_AIR_TEMPERATURE, AsIs)],
        ("atfTemperature", _) => &[(n::POWERTRAIN_TRANSMISSION_TEMPERATURE, AsIs)],
        ("barometricPressure", _) => &[(n::OBD_BAROMETRIC_PRESSURE, AsIs)],
        ("batteryCapacity", _) => &[(n::POWERTRAIN_TRACTION_BATTERY_GROSS_CAPACITY, AsIs)],
        ("batteryVoltage", _) => &[(n::LOW_VOLTAGE_BATTERY_CURRENT_VOLTAGE, AsIs)],
        ("chargeLimit", AutoPi) => &[(
            n::POWERTRAIN_TRACTION_BATTERY_CHARGING_CHARGE_LIMIT,
            Times(100.0),
        )],
        ("chargeLimit", HashDog) => &[(n::POWERTRAIN_TRACTION_BATTERY_CHARGING_CHARGE_LIMIT, AsIs)],
        ("charger.power", AutoPi) => {
            &[(n::POWERTRAIN_TRACTION_BATTERY_CURRENT_POWER, Times(1000.0))]
        }
        ("charger.power", HashDog) => &[(n::POWERTRAIN_TRACTION_BATTERY_CURRENT_POWER, AsIs)],
        ("charging", AutoPi) => &[(n::POWERTRAIN_TRACTION_BATTERY_CHARGING_IS_CHARGING, Bool)],
        ("charging", HashDog) => &[(
            n::POWERTRAIN_TRACTION_BATTERY_CHARGING_IS_CHARGING,
            BoolNotImplemented,
        )],
        ("commandedEgr", _) => &[(n::OBD_COMMANDED_EGR, AsIs)],
        ("coolantTemp", _) => &[(n::POWERTRAIN_COMBUSTION_ENGINE_ECT, AsIs)],
        ("distanceSinceDtcClear", _) => &[(n::OBD_DISTANCE_SINCE_DTC_CLEAR, AsIs)],
        ("distanceWMil", _) => &[(n::OBD_DISTANCE_WITH_MIL, AsIs)],
        ("engineLoad", _) => &[(n::OBD_ENGINE_LOAD, AsIs)],
        ("engineSpeed" | "rpm", _) => &[(n::POWERTRAIN_COMBUSTION_ENGINE_SPEED, AsIs)],
        ("engineTorque", _) => &[(n::POWERTRAIN_COMBUSTION_ENGINE_TORQUE, AsIs)],
        ("evap", _) => &[(n::OBD_COMMANDED_EVAP, AsIs)],
        ("frontRightWheelSpeed", _) => &[(n::CHASSIS_AXLE_ROW1_WHEEL_RIGHT_SPEED, AsIs)],
        ("frontlLeftWheelSpeed", _) => &[(n::CHASSIS_AXLE_ROW1_WHEEL_LEFT_SPEED, AsIs)],
        // fuelPercentRemaining shares the signal's first (identity) rule: not ×100.
        ("fuelLevel" | "fuelPercentRemaining", _) => {
            &[(n::POWERTRAIN_FUEL_SYSTEM_RELATIVE_LEVEL, AsIs)]
        }
        ("fuelLevelLiters", _) => &[(n::POWERTRAIN_FUEL_SYSTEM_ABSOLUTE_LEVEL, AsIs)],
        ("fuelTankPressure", _) => &[(n::OBD_FUEL_PRESSURE, AsIs)],
        ("fuelType", AutoPi) => &[
            (
                n::POWERTRAIN_FUEL_SYSTEM_SUPPORTED_FUEL_TYPES,
                SupportedFuelType,
            ),
            (n::POWERTRAIN_TYPE, PowertrainType),
        ],
        ("fuelType", HashDog) => &[
            (n::POWERTRAIN_FUEL_SYSTEM_SUPPORTED_FUEL_TYPES, Str),
            (n::POWERTRAIN_TYPE, Str),
        ],
        ("gearSelection", _) => &[(n::POWERTRAIN_TRANSMISSION_CURRENT_GEAR, AsIs)],
        ("hdop", _) => &[(vn::DIMO_AFTERMARKET_HDOP, AsIs)],
        ("hvBatteryCoolantTemperature", _) => {
            &[(n::POWERTRAIN_TRACTION_BATTERY_TEMPERATURE_AVERAGE, AsIs)]
        }
        ("hvBatteryVoltage", _) => &[(n::POWERTRAIN_TRACTION_BATTERY_CURRENT_VOLTAGE, AsIs)],
        ("intakePressure", _) => &[(n::OBD_MAP, AsIs)],
        ("intakeTemp", _) => &[(n::OBD_INTAKE_TEMP, AsIs)],
        ("isRedacted", _) => &[(vn::CURRENT_LOCATION_IS_REDACTED, Bool)],
        ("latitude", _) => &[(vn::CURRENT_LOCATION_LATITUDE, AsIs)],
        ("longTermFuelTrim1", _) => &[(n::OBD_LONG_TERM_FUEL_TRIM1, AsIs)],
        ("longitude", _) => &[(vn::CURRENT_LOCATION_LONGITUDE, AsIs)],
        ("maf", _) => &[(n::POWERTRAIN_COMBUSTION_ENGINE_MAF, AsIs)],
        ("obdDTCList", _) => &[(n::OBD_DTC_LIST, DtcList)],
        ("odometer", AutoPi) => &[(n::POWERTRAIN_TRANSMISSION_TRAVELLED_DISTANCE, Odometer)],
        ("odometer", HashDog) => &[(n::POWERTRAIN_TRANSMISSION_TRAVELLED_DISTANCE, AsIs)],
        ("oil", AutoPi) => &[
            (n::POWERTRAIN_COMBUSTION_ENGINE_ENGINE_OIL_LEVEL, OilLevel),
            (
                n::POWERTRAIN_COMBUSTION_ENGINE_ENGINE_OIL_RELATIVE_LEVEL,
                Times(100.0),
            ),
        ],
        ("oil", HashDog) => &[
            (
                n::POWERTRAIN_COMBUSTION_ENGINE_ENGINE_OIL_LEVEL,
                NumberNotImplemented,
            ),
            (
                n::POWERTRAIN_COMBUSTION_ENGINE_ENGINE_OIL_RELATIVE_LEVEL,
                AsIs,
            ),
        ],
        // AutoPi oilLife shares the signal's first rule, the `oil` thresholds.
        ("oilLife", AutoPi) => &[(n::POWERTRAIN_COMBUSTION_ENGINE_ENGINE_OIL_LEVEL, OilLevel)],
        ("oilLife", HashDog) => &[(
            n::POWERTRAIN_COMBUSTION_ENGINE_ENGINE_OIL_LEVEL,
            NumberNotImplemented,
        )],
        ("oxygenSensor1", _) => &[(n::OBD_O2WR_SENSOR1_VOLTAGE, AsIs)],
        ("oxygenSensor2", _) => &[(n::OBD_O2WR_SENSOR2_VOLTAGE, AsIs)],
        ("range", _) => &[(n::POWERTRAIN_RANGE, AsIs)],
        ("runTime", _) => &[(n::OBD_RUN_TIME, AsIs)],
        ("serviceInterval", _) => &[(n::SERVICE_DISTANCE_TO_SERVICE, AsIs)],
        ("shortTermFuelTrim1", _) => &[(n::OBD_SHORT_TERM_FUEL_TRIM1, AsIs)],
        ("soc", _) => &[(n::POWERTRAIN_TRACTION_BATTERY_STATE_OF_CHARGE_CURRENT, AsIs)],
        ("speed" | "vehicleSpeed", _) => &[(n::SPEED, AsIs)],
        ("throttlePosition", _) => &[(n::POWERTRAIN_COMBUSTION_ENGINE_TPS, AsIs)],
        ("tires.backLeft" | "tiresBackLeft", _) => {
            &[(n::CHASSIS_AXLE_ROW2_WHEEL_LEFT_TIRE_PRESSURE, AsIs)]
        }
        ("tires.backRight" | "tiresBackRight", _) => {
            &[(n::CHASSIS_AXLE_ROW2_WHEEL_RIGHT_TIRE_PRESSURE, AsIs)]
        }
        ("tires.frontLeft" | "tiresFrontLeft", _) => {
            &[(n::CHASSIS_AXLE_ROW1_WHEEL_LEFT_TIRE_PRESSURE, AsIs)]
        }
        ("tires.frontRight" | "tiresFrontRight", _) => {
            &[(n::CHASSIS_AXLE_ROW1_WHEEL_RIGHT_TIRE_PRESSURE, AsIs)]
        }
        ("warmupsSinceDtcClear", _) => &[(n::OBD_WARMUPS_SINCE_DTC_CLEAR, AsIs)],
        ("yawRate", _) => &[(n::ANGULAR_VELOCITY_YAW, AsIs)],
        ("obdStatusDTCCount", HashDog) => &[(n::OBD_STATUS_DTC_COUNT, AsIs)],
        _ => &[],
    }
}

/// Decodes a V2 status payload.
pub fn convert_signals(event: &RawEvent, flavour: Flavour) -> Decoded<Signal> {
    // The device-level copy of each status row (subject == producer) is skipped by design.
    if event.header.producer == event.header.subject {
        return Decoded::default();
    }
    // model-garage decodes the subject DID first and gives up on any other subject.
    if event.header.subject.parse::<Erc721Did>().is_err() {
        return Decoded::failed(DecodeError::invalid(
            "subject",
            event.header.subject.clone(),
            "subject is not a did:erc721",
        ));
    }
    let doc = match payload(event) {
        Ok(doc) => doc,
        Err(e) => return Decoded::failed(e),
    };
    let items = match doc.get_path("vehicle.signals") {
        None => return Decoded::failed(DecodeError::missing("vehicle.signals")),
        Some(Value::Null) => return Decoded::default(),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Decoded::failed(DecodeError::structure("vehicle.signals", "array", other))
        }
    };
    let mut out = Decoded {
        items: Vec::with_capacity(items.len()),
        errors: Vec::new(),
    };
    for (i, item) in items.iter().enumerate() {
        let path = |key: &str| format!("vehicle.signals.{i}.{key}");
        let Some(name) = item.get("name") else {
            out.errors.push(DecodeError::missing(path("name")));
            continue;
        };
        let Some(ts) = item.get("timestamp") else {
            out.errors.push(DecodeError::missing(path("timestamp")));
            continue;
        };
        let Some(timestamp) = unix_millis(ts.gjson_int()) else {
            out.errors.push(DecodeError::TimestampOutOfRange {
                field: path("timestamp"),
            });
            continue;
        };
        let Some(value) = item.get("value") else {
            out.errors.push(DecodeError::missing(path("value")));
            continue;
        };
        // Only a JSON string can equal a table name (gjson `String()` of anything else is a
        // literal such as `true` or `12`, which no entry matches).
        let name = name.as_str().unwrap_or_default();
        // One element is all or nothing: model-garage drops every signal of an element when
        // any of its conversions fails (only multi-signal names such as `oil` can tell).
        let mut converted = Vec::new();
        let mut failed = false;
        for &(signal, rule) in targets(name, flavour) {
            match apply(rule, value, &path("value"), signal) {
                Ok(v) => converted.push(Signal {
                    name: signal,
                    timestamp,
                    value: v,
                }),
                Err(e) => {
                    out.errors.push(e);
                    failed = true;
                }
            }
        }
        if !failed {
            out.items.extend(converted);
        }
    }
    out
}

fn apply(
    rule: Rule,
    value: &Value<'_>,
    field: &str,
    signal: &'static str,
) -> Result<crate::model::SignalValue, DecodeError> {
    use crate::model::SignalValue::{Number, String as Text};
    let number = || {
        value
            .as_f64()
            .ok_or_else(|| DecodeError::type_mismatch(field, "number", value))
    };
    let string = || {
        value
            .as_str()
            .ok_or_else(|| DecodeError::type_mismatch(field, "string", value))
    };
    let boolean = || match value {
        Value::Bool(b) => Ok(*b),
        other => Err(DecodeError::type_mismatch(field, "bool", other)),
    };
    Ok(match rule {
        Rule::AsIs => Number(number()?),
        Rule::Times(k) => Number(number()? * k),
        Rule::Bool => Number(if boolean()? { 1.0 } else { 0.0 }),
        Rule::Str => Text(string()?.to_string()),
        Rule::SupportedFuelType => Text(
            match string()? {
                "Gasoline" => "GASOLINE",
                "Ethanol" => "E85",
                "Diesel" => "DIESEL",
                "LPG" => "LPG",
                _ => "OTHER",
            }
            .to_string(),
        ),
        Rule::PowertrainType => Text(
            if string()? == "Electric" {
                "ELECTRIC"
            } else {
                "COMBUSTION"
            }
            .to_string(),
        ),
        Rule::DtcList => {
            let mut out = String::from("[");
            for (i, code) in string()?.split(',').enumerate() {
                if i > 0 {
                    out.push(',');
                }
                gojson::write_string(&mut out, code);
            }
            out.push(']');
            Text(out)
        }
        Rule::Odometer => {
            let v = number()?;
            Number(if v > 999_999.0 {
                (v / 1000.0).round()
            } else {
                v
            })
        }
        Rule::OilLevel => Text(oil_level(number()?).to_string()),
        Rule::NumberNotImplemented => {
            number()?;
            return Err(DecodeError::NotImplemented {
                field: field.to_string(),
                signal,
            });
        }
        Rule::BoolNotImplemented => {
            boolean()?;
            return Err(DecodeError::NotImplemented {
                field: field.to_string(),
                signal,
            });
        }
    })
}

/// Oil level from a 0..1 fraction.
fn oil_level(v: f64) -> &'static str {
    if v < 0.25 {
        "CRITICALLY_LOW"
    } else if v < 0.5 {
        "LOW"
    } else if v < 0.75 {
        "NORMAL"
    } else if v < 0.99 {
        "HIGH"
    } else {
        "CRITICALLY_HIGH"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SignalValue;

    fn event(signals: &str) -> RawEvent {
        let mut ev = RawEvent::default();
        ev.header.subject = "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:1".into();
        ev.header.producer = "did:erc721:137:0x9c94C395cBcBDe662235E0A9d3bB87Ad708561BA:2".into();
        ev.data = Some(format!(r#"{{"vehicle":{{"signals":{signals}}}}}"#));
        ev
    }

    fn one(name: &str, value: &str, flavour: Flavour) -> Decoded<Signal> {
        convert_signals(
            &event(&format!(
                r#"[{{"name":"{name}","timestamp":1713460846435,"value":{value}}}]"#
            )),
            flavour,
        )
    }

    fn values(d: &Decoded<Signal>) -> Vec<(&'static str, SignalValue)> {
        d.items.iter().map(|s| (s.name, s.value.clone())).collect()
    }

    #[test]
    fn autopi_rules() {
        let num = |v: f64| SignalValue::Number(v);
        let text = |v: &str| SignalValue::String(v.to_string());
        assert_eq!(
            values(&one("chargeLimit", "0.8", Flavour::AutoPi)),
            [(
                n::POWERTRAIN_TRACTION_BATTERY_CHARGING_CHARGE_LIMIT,
                num(80.0)
            )]
        );
        assert_eq!(
            values(&one("charger.power", "7.5", Flavour::AutoPi))[0].1,
            num(7500.0)
        );
        assert_eq!(
            values(&one("charging", "true", Flavour::AutoPi))[0].1,
            num(1.0)
        );
        assert_eq!(
            values(&one("odometer", "1234567", Flavour::AutoPi))[0].1,
            num(1235.0)
        );
        assert_eq!(
            values(&one("odometer", "1234500", Flavour::AutoPi))[0].1,
            num(1235.0),
            "half away from zero"
        );
        assert_eq!(
            values(&one("odometer", "999999", Flavour::AutoPi))[0].1,
            num(999999.0)
        );
        assert_eq!(
            values(&one("fuelType", "\"Ethanol\"", Flavour::AutoPi)),
            [
                (n::POWERTRAIN_FUEL_SYSTEM_SUPPORTED_FUEL_TYPES, text("E85")),
                (n::POWERTRAIN_TYPE, text("COMBUSTION"))
            ]
        );
        assert_eq!(
            values(&one("fuelType", "\"Electric\"", Flavour::AutoPi))[1].1,
            text("ELECTRIC")
        );
        assert_eq!(
            values(&one("oil", "0.5", Flavour::AutoPi)),
            [
                (
                    n::POWERTRAIN_COMBUSTION_ENGINE_ENGINE_OIL_LEVEL,
                    text("NORMAL")
                ),
                (
                    n::POWERTRAIN_COMBUSTION_ENGINE_ENGINE_OIL_RELATIVE_LEVEL,
                    num(50.0)
                )
            ]
        );
        assert_eq!(
            values(&one("oilLife", "0.99", Flavour::AutoPi))[0].1,
            text("CRITICALLY_HIGH")
        );
        assert_eq!(
            values(&one("fuelPercentRemaining", "0.5", Flavour::AutoPi))[0].1,
            num(0.5)
        );
        assert_eq!(
            values(&one("obdDTCList", "\"P01,<x>\"", Flavour::AutoPi))[0].1,
            text(r#"["P01","\u003cx\u003e"]"#)
        );
        assert_eq!(
            values(&one("obdDTCList", "\"\"", Flavour::AutoPi))[0].1,
            text(r#"[""]"#)
        );
        assert!(one("obdStatusDTCCount", "1", Flavour::AutoPi)
            .items
            .is_empty());
    }

    #[test]
    fn hashdog_differences_and_stubs() {
        assert_eq!(
            values(&one("chargeLimit", "0.8", Flavour::HashDog))[0].1,
            SignalValue::Number(0.8)
        );
        assert_eq!(
            values(&one("fuelType", "\"Ethanol\"", Flavour::HashDog))[1].1,
            SignalValue::String("Ethanol".into())
        );
        assert_eq!(
            values(&one("obdStatusDTCCount", "3", Flavour::HashDog))[0].1,
            SignalValue::Number(3.0)
        );
        let oil = one("oil", "0.5", Flavour::HashDog);
        assert!(
            oil.items.is_empty(),
            "a failed element yields none of its signals"
        );
        assert_eq!(oil.errors[0].reason(), "not_implemented");
        let rest = convert_signals(
            &event(
                r#"[{"name":"oil","timestamp":1,"value":0.5},{"name":"speed","timestamp":1,"value":9}]"#,
            ),
            Flavour::HashDog,
        );
        assert_eq!(
            values(&rest),
            [(n::SPEED, SignalValue::Number(9.0))],
            "the rest of the event is kept"
        );
        assert_eq!(
            one("charging", "true", Flavour::HashDog).errors[0].reason(),
            "not_implemented"
        );
        assert_eq!(
            one("charging", "1", Flavour::HashDog).errors[0].reason(),
            "type_mismatch"
        );
    }

    #[test]
    fn element_errors_and_skips() {
        let d = convert_signals(
            &event(
                r#"[{"timestamp":1,"value":1},{"name":"speed","value":1},{"name":"speed","timestamp":1},
                    {"name":"speed","timestamp":"1000","value":null},{"name":"nsat","timestamp":1,"value":9},
                    {"name":"speed","timestamp":"2000","value":3},{"name":"speed","timestamp":1.9,"value":4}]"#,
            ),
            Flavour::AutoPi,
        );
        let reasons: Vec<_> = d.errors.iter().map(DecodeError::reason).collect();
        assert_eq!(
            reasons,
            [
                "missing_field",
                "missing_field",
                "missing_field",
                "type_mismatch"
            ]
        );
        assert_eq!(d.items.len(), 2);
        assert_eq!(d.items[0].timestamp.timestamp_millis(), 2000);
        assert_eq!(d.items[1].timestamp.timestamp_millis(), 1);
    }

    #[test]
    fn payload_level_rules() {
        let mut ev = event("null");
        assert_eq!(convert_signals(&ev, Flavour::AutoPi), Decoded::default());
        ev.data = Some(r#"{"vehicle":{}}"#.into());
        assert_eq!(
            convert_signals(&ev, Flavour::AutoPi).errors[0].reason(),
            "missing_field"
        );
        ev.data = Some(r#"{"vehicle":{"signals":{}}}"#.into());
        assert_eq!(
            convert_signals(&ev, Flavour::AutoPi).errors[0].reason(),
            "bad_structure"
        );
        let mut not_a_did = event("[]");
        not_a_did.header.subject = "vehicle".into();
        assert_eq!(
            convert_signals(&not_a_did, Flavour::AutoPi).errors[0].reason(),
            "invalid_value"
        );
        let mut device_row = event(r#"[{"name":"speed","timestamp":1,"value":1}]"#);
        device_row.header.producer = device_row.header.subject.clone();
        assert_eq!(
            convert_signals(&device_row, Flavour::HashDog),
            Decoded::default()
        );
    }

    #[test]
    fn duplicate_keys_first_wins() {
        let mut ev = event("[]");
        ev.data = Some(r#"{"vehicle":{"signals":[{"name":"speed","name":"rpm","timestamp":1,"value":5}]},"vehicle":{}}"#.into());
        assert_eq!(
            convert_signals(&ev, Flavour::AutoPi).items[0].name,
            n::SPEED
        );
    }
}
