//! Fleet Telemetry: `{"payloads":["<base64 protobuf Payload>", ...]}`.
//! Every datum takes the payload's `created_at`; unmapped fields are ignored.

use super::proto::{field, value::Kind, Payload};
use super::MILES_TO_KM;
use crate::error::DecodeError;
use crate::model::{Decoded, Signal};
use crate::util::{go_parse_float, payload};
use base64::Engine as _;
use chrono::{DateTime, TimeDelta, Utc};
use dq_cloudevent::json::Value;
use dq_cloudevent::RawEvent;
use dq_signals::names as n;
use prost::Message as _;

/// Standard atmosphere in kPa.
const ATM_TO_KPA: f64 = 101.325;

/// Fields that carry one number: (field, signal, factor to the signal's unit). A double, or a
/// string Go parses as a float64; anything else is an unexpected value kind.
const SCALED: [(i32, &str, f64); 15] = [
    (
        field::AC_CHARGING_POWER,
        n::POWERTRAIN_TRACTION_BATTERY_CURRENT_POWER,
        1000.0,
    ),
    (
        field::DC_CHARGING_POWER,
        n::POWERTRAIN_TRACTION_BATTERY_CURRENT_POWER,
        1000.0,
    ),
    (
        field::DC_CHARGING_ENERGY_IN,
        n::POWERTRAIN_TRACTION_BATTERY_CHARGING_ADDED_ENERGY,
        1.0,
    ),
    (
        field::ENERGY_REMAINING,
        n::POWERTRAIN_TRACTION_BATTERY_STATE_OF_CHARGE_CURRENT_ENERGY,
        1.0,
    ),
    (
        field::SOC,
        n::POWERTRAIN_TRACTION_BATTERY_STATE_OF_CHARGE_CURRENT,
        1.0,
    ),
    (
        field::TPMS_PRESSURE_FL,
        n::CHASSIS_AXLE_ROW1_WHEEL_LEFT_TIRE_PRESSURE,
        ATM_TO_KPA,
    ),
    (
        field::TPMS_PRESSURE_FR,
        n::CHASSIS_AXLE_ROW1_WHEEL_RIGHT_TIRE_PRESSURE,
        ATM_TO_KPA,
    ),
    (
        field::TPMS_PRESSURE_RL,
        n::CHASSIS_AXLE_ROW2_WHEEL_LEFT_TIRE_PRESSURE,
        ATM_TO_KPA,
    ),
    (
        field::TPMS_PRESSURE_RR,
        n::CHASSIS_AXLE_ROW2_WHEEL_RIGHT_TIRE_PRESSURE,
        ATM_TO_KPA,
    ),
    (field::OUTSIDE_TEMP, n::EXTERIOR_AIR_TEMPERATURE, 1.0),
    (field::EST_BATTERY_RANGE, n::POWERTRAIN_RANGE, MILES_TO_KM),
    (
        field::ODOMETER,
        n::POWERTRAIN_TRANSMISSION_TRAVELLED_DISTANCE,
        MILES_TO_KM,
    ),
    (field::VEHICLE_SPEED, n::SPEED, MILES_TO_KM),
    (
        field::CHARGE_AMPS,
        n::POWERTRAIN_TRACTION_BATTERY_CHARGING_CHARGE_CURRENT_AC,
        1.0,
    ),
    (
        field::CHARGER_VOLTAGE,
        n::POWERTRAIN_TRACTION_BATTERY_CHARGING_CHARGE_VOLTAGE_UNKNOWN_TYPE,
        1.0,
    ),
];

pub(super) fn convert_signals(event: &RawEvent) -> Decoded<Signal> {
    let doc = match payload(event) {
        Ok(doc) => doc,
        Err(e) => return Decoded::failed(e),
    };
    let blobs = match wrapper(&doc) {
        Ok(blobs) => blobs,
        Err(e) => return Decoded::failed(e),
    };
    let mut out = Decoded::default();
    for (index, blob) in blobs.iter().enumerate() {
        match Payload::decode(blob.as_slice()) {
            Ok(p) => decode_payload(&p, index, &mut out),
            Err(e) => out.errors.push(DecodeError::Protobuf {
                index,
                detail: e.to_string(),
            }),
        }
    }
    out
}

/// The JSON wrapper, decoded strictly like Go's `json.Unmarshal` into `[][]byte`: any shape
/// or base64 problem fails the whole event.
fn wrapper(doc: &Value<'_>) -> Result<Vec<Vec<u8>>, DecodeError> {
    let payloads = match doc {
        Value::Null => return Ok(Vec::new()),
        Value::Object(_) => doc.get_field("payloads"),
        other => return Err(DecodeError::structure("", "object", other)),
    };
    let items = match payloads {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(other) => return Err(DecodeError::structure("payloads", "array", other)),
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::Null => Ok(Vec::new()),
            Value::String(s) => base64::engine::general_purpose::STANDARD
                .decode(s.as_bytes())
                .map_err(|_| {
                    DecodeError::invalid(format!("payloads.{i}"), s.as_ref(), "not standard base64")
                }),
            other => Err(DecodeError::structure(
                format!("payloads.{i}"),
                "base64 string",
                other,
            )),
        })
        .collect()
}

/// `created_at` like Go's `AsTime()`: nanos are normalised, a missing timestamp is the epoch.
fn created_at(p: &Payload, index: usize) -> Result<DateTime<Utc>, DecodeError> {
    let (seconds, nanos) = p
        .created_at
        .as_ref()
        .map_or((0, 0), |t| (t.seconds, t.nanos));
    DateTime::from_timestamp(seconds, 0)
        .and_then(|t| t.checked_add_signed(TimeDelta::nanoseconds(i64::from(nanos))))
        .ok_or(DecodeError::TimestampOutOfRange {
            field: format!("payloads.{index}.created_at"),
        })
}

fn decode_payload(p: &Payload, index: usize, out: &mut Decoded<Signal>) {
    let timestamp = match created_at(p, index) {
        Ok(ts) => ts,
        Err(e) => {
            out.errors.push(e);
            return;
        }
    };
    for (d, datum) in p.data.iter().enumerate() {
        let kind = datum.value.as_ref().and_then(|v| v.kind.as_ref());
        if matches!(kind, Some(Kind::Invalid(_))) {
            continue;
        }
        let path = || format!("payloads.{index}.data.{d}");
        let unexpected = || DecodeError::InvalidValue {
            field: path(),
            value: format!("field {}", datum.key),
            why: "unexpected value kind",
        };
        let number = |k: f64| -> Result<f64, DecodeError> {
            match kind {
                Some(Kind::DoubleValue(v)) => Ok(v * k),
                Some(Kind::StringValue(s)) => go_parse_float(s)
                    .map(|v| v * k)
                    .ok_or_else(|| DecodeError::invalid(path(), s.as_str(), "not a float64")),
                _ => Err(unexpected()),
            }
        };
        match datum.key {
            field::LOCATION => match kind {
                Some(Kind::LocationValue(l)) => {
                    out.items
                        .push(Signal::location(timestamp, l.latitude, l.longitude, 0.0))
                }
                _ => out.errors.push(unexpected()),
            },
            field::DETAILED_CHARGE_STATE => match kind {
                Some(Kind::DetailedChargeStateValue(state)) => {
                    // Unknown0 Disconnected1 NoPower2 Starting3 Charging4 Complete5 Stopped6.
                    push(
                        out,
                        timestamp,
                        n::POWERTRAIN_TRACTION_BATTERY_CHARGING_IS_CHARGING,
                        Ok(bool01(matches!(state, 3 | 4))),
                    );
                    push(
                        out,
                        timestamp,
                        n::POWERTRAIN_TRACTION_BATTERY_CHARGING_IS_CHARGING_CABLE_CONNECTED,
                        Ok(bool01(*state != 1)),
                    );
                }
                _ => out.errors.push(unexpected()),
            },
            field::CHARGE_LIMIT_SOC => {
                let limit = match kind {
                    Some(Kind::IntValue(v)) => Ok(f64::from(*v)),
                    Some(Kind::StringValue(s)) => s.parse::<i32>().map(f64::from).map_err(|_| {
                        DecodeError::invalid(path(), s.as_str(), "not a base-10 int32")
                    }),
                    _ => Err(unexpected()),
                };
                push(
                    out,
                    timestamp,
                    n::POWERTRAIN_TRACTION_BATTERY_CHARGING_CHARGE_LIMIT,
                    limit,
                );
            }
            field::DOOR_STATE => {
                let doors = match kind {
                    Some(Kind::DoorValue(doors)) => Ok([
                        doors.driver_front,
                        doors.passenger_front,
                        doors.driver_rear,
                        doors.passenger_rear,
                    ]),
                    Some(Kind::StringValue(s)) => {
                        let open = |door: &str| s.split('|').any(|t| t == door);
                        Ok([
                            open("DriverFront"),
                            open("PassengerFront"),
                            open("DriverRear"),
                            open("PassengerRear"),
                        ])
                    }
                    _ => Err(unexpected()),
                };
                match doors {
                    Ok(open) => {
                        let names = [
                            n::CABIN_DOOR_ROW1_DRIVER_SIDE_IS_OPEN,
                            n::CABIN_DOOR_ROW1_PASSENGER_SIDE_IS_OPEN,
                            n::CABIN_DOOR_ROW2_DRIVER_SIDE_IS_OPEN,
                            n::CABIN_DOOR_ROW2_PASSENGER_SIDE_IS_OPEN,
                        ];
                        for (name, is_open) in names.into_iter().zip(open) {
                            push(out, timestamp, name, Ok(bool01(is_open)));
                        }
                    }
                    Err(e) => out.errors.push(e),
                }
            }
            field::FD_WINDOW | field::FP_WINDOW | field::RD_WINDOW | field::RP_WINDOW => {
                let name = match datum.key {
                    field::FD_WINDOW => n::CABIN_DOOR_ROW1_DRIVER_SIDE_WINDOW_IS_OPEN,
                    field::FP_WINDOW => n::CABIN_DOOR_ROW1_PASSENGER_SIDE_WINDOW_IS_OPEN,
                    field::RD_WINDOW => n::CABIN_DOOR_ROW2_DRIVER_SIDE_WINDOW_IS_OPEN,
                    _ => n::CABIN_DOOR_ROW2_PASSENGER_SIDE_WINDOW_IS_OPEN,
                };
                // Unknown0 Closed1 PartiallyOpen2 Opened3; unrecognised strings are Unknown.
                let state = match kind {
                    Some(Kind::WindowStateValue(v)) => Ok(*v),
                    Some(Kind::StringValue(s)) => Ok(match s.as_str() {
                        "Closed" => 1,
                        "PartiallyOpen" => 2,
                        "Opened" => 3,
                        _ => 0,
                    }),
                    _ => Err(unexpected()),
                };
                let value = state.and_then(|s| match s {
                    1 => Ok(0.0),
                    2 | 3 => Ok(1.0),
                    other => Err(DecodeError::invalid(
                        path(),
                        format!("window state {other}"),
                        "unknown window state",
                    )),
                });
                push(out, timestamp, name, value);
            }
            key => {
                if let Some((_, name, factor)) = SCALED.iter().find(|(f, ..)| *f == key) {
                    push(out, timestamp, name, number(*factor));
                }
            }
        }
    }
}

fn push(
    out: &mut Decoded<Signal>,
    timestamp: DateTime<Utc>,
    name: &'static str,
    value: Result<f64, DecodeError>,
) {
    match value {
        Ok(v) => out.items.push(Signal::number(name, timestamp, v)),
        Err(e) => out.errors.push(e),
    }
}

fn bool01(b: bool) -> f64 {
    if b {
        1.0
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::super::proto::{Datum, Doors, Timestamp, Value as PValue};
    use super::*;

    fn event(payloads: &[Payload]) -> RawEvent {
        let encoded: Vec<String> = payloads
            .iter()
            .map(|p| {
                format!(
                    "\"{}\"",
                    base64::engine::general_purpose::STANDARD.encode(p.encode_to_vec())
                )
            })
            .collect();
        RawEvent {
            data: Some(format!(r#"{{"payloads":[{}]}}"#, encoded.join(","))),
            ..RawEvent::default()
        }
    }

    fn payload(data: Vec<(i32, Kind)>) -> Payload {
        Payload {
            data: data
                .into_iter()
                .map(|(key, kind)| Datum {
                    key,
                    value: Some(PValue { kind: Some(kind) }),
                })
                .collect(),
            created_at: Some(Timestamp {
                seconds: 1_741_040_579,
                nanos: 138_863_102,
            }),
            vin: "VIN".into(),
            is_resend: false,
        }
    }

    #[test]
    fn typed_and_string_values() {
        let d = convert_signals(&event(&[payload(vec![
            (field::VEHICLE_SPEED, Kind::DoubleValue(25.0)),
            (field::SOC, Kind::StringValue("55.5".into())),
            (field::CHARGE_LIMIT_SOC, Kind::StringValue("80".into())),
            (
                field::DETAILED_CHARGE_STATE,
                Kind::DetailedChargeStateValue(0),
            ),
            (
                field::DOOR_STATE,
                Kind::StringValue("DriverFront|Bogus".into()),
            ),
            (field::FD_WINDOW, Kind::StringValue("PartiallyOpen".into())),
            (field::TPMS_PRESSURE_FL, Kind::DoubleValue(3.0)),
            (field::ODOMETER, Kind::Invalid(true)),
            (999, Kind::DoubleValue(1.0)),
        ])]));
        let got: Vec<_> = d.items.iter().map(|s| (s.name, s.as_number())).collect();
        assert_eq!(
            got,
            [
                (n::SPEED, Some(25.0 * MILES_TO_KM)),
                (
                    n::POWERTRAIN_TRACTION_BATTERY_STATE_OF_CHARGE_CURRENT,
                    Some(55.5)
                ),
                (
                    n::POWERTRAIN_TRACTION_BATTERY_CHARGING_CHARGE_LIMIT,
                    Some(80.0)
                ),
                (
                    n::POWERTRAIN_TRACTION_BATTERY_CHARGING_IS_CHARGING,
                    Some(0.0)
                ),
                (
                    n::POWERTRAIN_TRACTION_BATTERY_CHARGING_IS_CHARGING_CABLE_CONNECTED,
                    Some(1.0)
                ),
                (n::CABIN_DOOR_ROW1_DRIVER_SIDE_IS_OPEN, Some(1.0)),
                (n::CABIN_DOOR_ROW1_PASSENGER_SIDE_IS_OPEN, Some(0.0)),
                (n::CABIN_DOOR_ROW2_DRIVER_SIDE_IS_OPEN, Some(0.0)),
                (n::CABIN_DOOR_ROW2_PASSENGER_SIDE_IS_OPEN, Some(0.0)),
                (n::CABIN_DOOR_ROW1_DRIVER_SIDE_WINDOW_IS_OPEN, Some(1.0)),
                (
                    n::CHASSIS_AXLE_ROW1_WHEEL_LEFT_TIRE_PRESSURE,
                    Some(3.0 * ATM_TO_KPA)
                ),
            ]
        );
        assert!(d.errors.is_empty());
        assert!(d
            .items
            .iter()
            .all(|s| s.timestamp.timestamp_subsec_nanos() == 138_863_102));
    }

    #[test]
    fn per_datum_errors() {
        let d = convert_signals(&event(&[payload(vec![
            (field::FD_WINDOW, Kind::WindowStateValue(0)),
            (field::SOC, Kind::IntValue(3)),
            (field::LOCATION, Kind::DoubleValue(1.0)),
            (
                field::DOOR_STATE,
                Kind::DoorValue(Doors {
                    passenger_rear: true,
                    ..Doors::default()
                }),
            ),
            (field::SOC, Kind::StringValue("x".into())),
        ])]));
        assert_eq!(d.items.len(), 4);
        assert_eq!(d.items[3].as_number(), Some(1.0), "passenger rear open");
        let reasons: Vec<_> = d.errors.iter().map(DecodeError::reason).collect();
        assert_eq!(reasons, ["invalid_value"; 4]);
    }

    #[test]
    fn wrapper_and_protobuf_errors() {
        let mut ev = event(&[]);
        ev.data = Some(r#"{"payloads":["!!"]}"#.into());
        assert_eq!(convert_signals(&ev).errors[0].reason(), "invalid_value");
        ev.data = Some(r#"{"payloads":"x"}"#.into());
        assert_eq!(convert_signals(&ev).errors[0].reason(), "bad_structure");
        ev.data = Some(r#"{"payloads":["/w==","CgA="]}"#.into());
        let d = convert_signals(&ev);
        assert_eq!(d.errors[0].reason(), "invalid_protobuf");
        assert_eq!(d.errors.len(), 1, "the second payload still decodes");
    }
}
