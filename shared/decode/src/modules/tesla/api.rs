//! Fleet API `vehicle_data` JSON: gjson paths, each signal stamped with its
//! endpoint's `<endpoint>.timestamp` (Unix ms).

use super::MILES_TO_KM;
use crate::error::DecodeError;
use crate::model::{Decoded, Signal, SignalValue};
use crate::util::{payload, unix_millis};
use chrono::{DateTime, Utc};
use dq_cloudevent::json::Value;
use dq_cloudevent::RawEvent;
use dq_signals::names as n;

#[derive(Clone, Copy)]
enum Rule {
    Times(f64),
    /// kW → W with the sign flipped so that charging is positive; −0 becomes 0.
    NegatedKilowatts,
    /// `Starting`/`Charging` → 1, any other string → 0.
    ChargingState,
}

/// Path → signal for the numeric/string mappings (location is handled separately).
const MAPPINGS: [(&str, &str, Rule); 13] = [
    (
        "vehicle_state.tpms_pressure_fl",
        n::CHASSIS_AXLE_ROW1_WHEEL_LEFT_TIRE_PRESSURE,
        Rule::Times(100.0),
    ),
    (
        "vehicle_state.tpms_pressure_fr",
        n::CHASSIS_AXLE_ROW1_WHEEL_RIGHT_TIRE_PRESSURE,
        Rule::Times(100.0),
    ),
    (
        "vehicle_state.tpms_pressure_rl",
        n::CHASSIS_AXLE_ROW2_WHEEL_LEFT_TIRE_PRESSURE,
        Rule::Times(100.0),
    ),
    (
        "vehicle_state.tpms_pressure_rr",
        n::CHASSIS_AXLE_ROW2_WHEEL_RIGHT_TIRE_PRESSURE,
        Rule::Times(100.0),
    ),
    (
        "climate_state.outside_temp",
        n::EXTERIOR_AIR_TEMPERATURE,
        Rule::Times(1.0),
    ),
    (
        "charge_state.battery_range",
        n::POWERTRAIN_RANGE,
        Rule::Times(MILES_TO_KM),
    ),
    (
        "charge_state.charge_energy_added",
        n::POWERTRAIN_TRACTION_BATTERY_CHARGING_ADDED_ENERGY,
        Rule::Times(1.0),
    ),
    (
        "charge_state.charge_limit_soc",
        n::POWERTRAIN_TRACTION_BATTERY_CHARGING_CHARGE_LIMIT,
        Rule::Times(1.0),
    ),
    (
        "charge_state.charging_state",
        n::POWERTRAIN_TRACTION_BATTERY_CHARGING_IS_CHARGING,
        Rule::ChargingState,
    ),
    (
        "drive_state.power",
        n::POWERTRAIN_TRACTION_BATTERY_CURRENT_POWER,
        Rule::NegatedKilowatts,
    ),
    (
        "charge_state.battery_level",
        n::POWERTRAIN_TRACTION_BATTERY_STATE_OF_CHARGE_CURRENT,
        Rule::Times(1.0),
    ),
    (
        "vehicle_state.odometer",
        n::POWERTRAIN_TRANSMISSION_TRAVELLED_DISTANCE,
        Rule::Times(MILES_TO_KM),
    ),
    ("drive_state.speed", n::SPEED, Rule::Times(MILES_TO_KM)),
];

pub(super) fn convert_signals(event: &RawEvent) -> Decoded<Signal> {
    let doc = match payload(event) {
        Ok(doc) => doc,
        Err(e) => return Decoded::failed(e),
    };
    let mut out = Decoded::default();
    let mut emit = |path: &str, name: &'static str, value: Result<SignalValue, DecodeError>| {
        let result = value.and_then(|value| {
            Ok(Signal {
                name,
                timestamp: endpoint_timestamp(&doc, path)?,
                value,
            })
        });
        match result {
            Ok(signal) => out.items.push(signal),
            Err(e) => out.errors.push(e),
        }
    };
    for (path, name, rule) in MAPPINGS {
        let Some(value) = lookup(&doc, path) else {
            continue;
        };
        let converted = match rule {
            Rule::ChargingState => value
                .as_str()
                .map(|s| {
                    SignalValue::Number(if matches!(s, "Starting" | "Charging") {
                        1.0
                    } else {
                        0.0
                    })
                })
                .ok_or_else(|| DecodeError::type_mismatch(path, "string", value)),
            Rule::Times(k) => number(value, path).map(|v| SignalValue::Number(v * k)),
            Rule::NegatedKilowatts => {
                number(value, path).map(|v| SignalValue::Number(-1000.0 * v + 0.0))
            }
        };
        emit(path, name, converted);
    }
    if let Some(lat) = lookup(&doc, "drive_state.latitude") {
        let location = number(lat, "drive_state.latitude").and_then(|lat| {
            let lon = lookup(&doc, "drive_state.longitude")
                .ok_or_else(|| DecodeError::missing("drive_state.longitude"))?;
            let lon = number(lon, "drive_state.longitude")?;
            Ok(Signal::location(DateTime::<Utc>::UNIX_EPOCH, lat, lon, 0.0).value)
        });
        emit(
            "drive_state.latitude",
            n::CURRENT_LOCATION_COORDINATES,
            location,
        );
    }
    out
}

/// A present, non-null value (absent is not-found, silent).
fn lookup<'d, 'a>(doc: &'d Value<'a>, path: &str) -> Option<&'d Value<'a>> {
    doc.get_path(path).filter(|v| !v.is_null())
}

fn number(value: &Value<'_>, path: &str) -> Result<f64, DecodeError> {
    value
        .as_f64()
        .ok_or_else(|| DecodeError::type_mismatch(path, "number", value))
}

/// `<first segment>.timestamp`, a JSON number of Unix milliseconds; missing is an error.
fn endpoint_timestamp(doc: &Value<'_>, path: &str) -> Result<DateTime<Utc>, DecodeError> {
    let endpoint = path.split('.').next().unwrap_or_default();
    let field = format!("{endpoint}.timestamp");
    match doc.get_path(&field) {
        Some(ts @ Value::Number(_)) => {
            unix_millis(ts.gjson_int()).ok_or(DecodeError::TimestampOutOfRange { field })
        }
        Some(other) => Err(DecodeError::type_mismatch(field, "number", other)),
        None => Err(DecodeError::missing(field)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(data: &str) -> Decoded<Signal> {
        convert_signals(&RawEvent {
            data: Some(data.to_string()),
            ..RawEvent::default()
        })
    }

    #[test]
    fn power_sign_flip_and_zero() {
        let d = decode(r#"{"drive_state":{"power":-7,"timestamp":1000}}"#);
        assert_eq!(d.items[0].value, SignalValue::Number(7000.0));
        let d = decode(r#"{"drive_state":{"power":0,"timestamp":1000}}"#);
        assert_eq!(
            d.items[0].as_number().map(f64::is_sign_negative),
            Some(false)
        );
    }

    #[test]
    fn missing_endpoint_timestamp_is_an_error() {
        let d = decode(r#"{"climate_state":{"outside_temp":19}}"#);
        assert!(d.items.is_empty());
        assert_eq!(d.errors[0].reason(), "missing_field");
    }

    #[test]
    fn type_and_location_errors() {
        let d = decode(
            r#"{"charge_state":{"charging_state":1,"battery_level":"5","timestamp":1},"drive_state":{"latitude":1,"timestamp":1}}"#,
        );
        let reasons: Vec<_> = d.errors.iter().map(DecodeError::reason).collect();
        assert_eq!(reasons, ["type_mismatch", "type_mismatch", "missing_field"]);
        let d = decode(r#"{"charge_state":{"charging_state":"Disconnected","timestamp":1}}"#);
        assert_eq!(d.items[0].value, SignalValue::Number(0.0));
    }
}
