//! Tesla payloads: Fleet API `vehicle_data` JSON (miles, mph, bar) and Fleet
//! Telemetry protobuf `Payload`s (`ft:protos/vehicle_data.proto`) wrapped as
//! `{"payloads":["<base64>"]}`. The ingest module keeps the header as sent and adds a
//! `dimo.fingerprint` copy with the same id when a VIN is present.

use super::{fan_out, Emitter};
use crate::jsonw::{self, round};
use crate::life::{Sample, SampleKind};
use crate::vendor::{TESLA_API_DATA_VERSION, TESLA_TELEMETRY_DATA_VERSION};
use base64::Engine as _;
use dq_cloudevent::types::{FINGERPRINT, STATUS};
use dq_cloudevent::RawEvent;

const KM_PER_MI: f64 = 1.609344;
const KPA_PER_BAR: f64 = 100.0;
const KPA_PER_ATM: f64 = 101.325;

fn charging_state(s: &Sample<'_>) -> &'static str {
    match s.charge {
        Some(c) if c.active => "Charging",
        Some(_) => "Complete",
        None => "Disconnected",
    }
}

pub(super) fn encode_api(e: &mut Emitter<'_>, s: &Sample<'_>, out: &mut Vec<RawEvent>) {
    if matches!(s.kind, SampleKind::Fix | SampleKind::Command(_)) {
        return;
    }
    let t = s.time_ms;
    let (dn, de) = e.gps_noise(s.lat);
    let mut d = String::with_capacity(1100);
    d.push_str("{\"id\":");
    jsonw::int(&mut d, 1_492_931_000_000_000 + i64::from(e.info.index));
    d.push_str(",\"user_id\":");
    jsonw::int(&mut d, 32_400_000 + i64::from(e.info.index));
    d.push_str(",\"vehicle_id\":");
    jsonw::int(&mut d, 1_200_000_000 + i64::from(e.info.index));
    d.push_str(",\"vin\":");
    jsonw::string(&mut d, &e.info.vin);
    d.push_str(",\"state\":\"online\",\"charge_state\":{\"battery_level\":");
    jsonw::num(&mut d, s.energy_pct.round());
    d.push_str(",\"battery_range\":");
    jsonw::num(&mut d, round(s.range_km / KM_PER_MI, 2));
    d.push_str(",\"charge_energy_added\":");
    jsonw::num(&mut d, round(s.charge.map_or(0.0, |c| c.added_kwh), 2));
    d.push_str(",\"charge_limit_soc\":");
    jsonw::num(&mut d, s.charge_limit_pct);
    d.push_str(",\"charger_power\":");
    jsonw::num(&mut d, s.charge.map_or(0.0, |c| c.power_kw.round()));
    d.push_str(",\"charging_state\":");
    jsonw::string(&mut d, charging_state(s));
    d.push_str(",\"timestamp\":");
    jsonw::int(&mut d, t);
    d.push_str("},\"climate_state\":{\"inside_temp\":");
    jsonw::num(
        &mut d,
        round(if s.ignition { 21.0 } else { s.ambient_c + 3.0 }, 1),
    );
    d.push_str(",\"outside_temp\":");
    jsonw::num(&mut d, round(s.ambient_c, 1));
    d.push_str(",\"timestamp\":");
    jsonw::int(&mut d, t);
    d.push_str("},\"drive_state\":{\"heading\":");
    jsonw::num(&mut d, s.heading_deg.round());
    d.push_str(",\"latitude\":");
    jsonw::num(&mut d, round(s.lat + dn, 6));
    d.push_str(",\"longitude\":");
    jsonw::num(&mut d, round(s.lon + de, 6));
    // kW, negative while charging (the decoder flips the sign).
    let power = match s.charge {
        Some(c) if c.active => -c.power_kw,
        _ => s.rate,
    };
    d.push_str(",\"power\":");
    jsonw::num(&mut d, power.round());
    d.push_str(",\"shift_state\":");
    d.push_str(if s.ignition { "\"D\"" } else { "\"P\"" });
    d.push_str(",\"speed\":");
    jsonw::num(&mut d, (s.speed_kmh / KM_PER_MI).round());
    d.push_str(",\"timestamp\":");
    jsonw::int(&mut d, t);
    d.push_str("},\"vehicle_state\":{\"locked\":");
    d.push_str(if s.ignition { "false" } else { "true" });
    d.push_str(",\"odometer\":");
    jsonw::num(&mut d, round(s.odometer_km / KM_PER_MI, 3));
    for (key, kpa) in [
        "tpms_pressure_fl",
        "tpms_pressure_fr",
        "tpms_pressure_rl",
        "tpms_pressure_rr",
    ]
    .iter()
    .zip(s.tire_kpa)
    {
        d.push_str(",\"");
        d.push_str(key);
        d.push_str("\":");
        jsonw::num(&mut d, round(kpa / KPA_PER_BAR, 2));
    }
    d.push_str(",\"timestamp\":");
    jsonw::int(&mut d, t);
    d.push_str("}}");
    push_with_fingerprint(e, t, TESLA_API_DATA_VERSION, d, out);
}

fn push_with_fingerprint(
    e: &mut Emitter<'_>,
    t: i64,
    data_version: &str,
    data: String,
    out: &mut Vec<RawEvent>,
) {
    let id = e.ksuid(t);
    let sig = e.signature();
    let subject = e.info.subject.as_str();
    let headers = vec![
        e.header(STATUS, id.clone(), t, data_version, subject, &sig),
        e.header(FINGERPRINT, id, t, data_version, subject, &sig),
    ];
    fan_out(out, headers, data);
}

// ---- protobuf ----------------------------------------------------------------------------

const WIRE_VARINT: u64 = 0;
const WIRE_FIXED64: u64 = 1;
const WIRE_LEN: u64 = 2;

fn varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

fn key(buf: &mut Vec<u8>, field: u64, wire: u64) {
    varint(buf, (field << 3) | wire);
}

fn len_field(buf: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    key(buf, field, WIRE_LEN);
    varint(buf, bytes.len() as u64);
    buf.extend_from_slice(bytes);
}

/// `Field` enum numbers used here (fleet-telemetry `vehicle_data.proto`).
mod field {
    pub const VEHICLE_SPEED: u64 = 4;
    pub const ODOMETER: u64 = 5;
    pub const SOC: u64 = 8;
    pub const LOCATION: u64 = 21;
    pub const DC_CHARGING_ENERGY_IN: u64 = 34;
    pub const DC_CHARGING_POWER: u64 = 35;
    pub const AC_CHARGING_POWER: u64 = 37;
    pub const CHARGE_LIMIT_SOC: u64 = 38;
    pub const EST_BATTERY_RANGE: u64 = 40;
    pub const CHARGE_AMPS: u64 = 49;
    pub const DOOR_STATE: u64 = 58;
    pub const FD_WINDOW: u64 = 60;
    pub const RP_WINDOW: u64 = 63;
    pub const TPMS_PRESSURE_FL: u64 = 69;
    pub const OUTSIDE_TEMP: u64 = 86;
    pub const ENERGY_REMAINING: u64 = 158;
    pub const DETAILED_CHARGE_STATE: u64 = 179;
    pub const CHARGER_VOLTAGE: u64 = 184;
}

/// `Value` oneof members used here.
enum Value<'a> {
    String(&'a str),
    Int(i64),
    Double(f64),
    Location(f64, f64),
    /// `Doors` with every door closed (an empty message).
    DoorsClosed,
    /// `WindowState` enum (Closed = 1).
    Window(u64),
    /// `DetailedChargeStateValue` enum.
    ChargeState(u64),
}

const CHARGE_DISCONNECTED: u64 = 1;
const CHARGE_CHARGING: u64 = 4;
const CHARGE_COMPLETE: u64 = 5;
const WINDOW_CLOSED: u64 = 1;

fn varint_len(v: u64) -> u64 {
    let bits = 64 - u64::from(v.max(1).leading_zeros());
    bits.div_ceil(7)
}

/// Appends one `Datum{key, value}` to `payload`; `scratch` holds the `Value` message.
fn datum(payload: &mut Vec<u8>, scratch: &mut Vec<u8>, field_no: u64, value: Value<'_>) {
    scratch.clear();
    match value {
        Value::String(s) => len_field(scratch, 1, s.as_bytes()),
        Value::Int(i) => {
            key(scratch, 2, WIRE_VARINT);
            varint(scratch, i as u64);
        }
        Value::Double(d) => {
            key(scratch, 5, WIRE_FIXED64);
            scratch.extend_from_slice(&d.to_le_bytes());
        }
        Value::Location(lat, lon) => {
            // LocationValue{latitude(1) double, longitude(2) double}: always 18 bytes.
            key(scratch, 7, WIRE_LEN);
            varint(scratch, 18);
            key(scratch, 1, WIRE_FIXED64);
            scratch.extend_from_slice(&lat.to_le_bytes());
            key(scratch, 2, WIRE_FIXED64);
            scratch.extend_from_slice(&lon.to_le_bytes());
        }
        Value::DoorsClosed => len_field(scratch, 21, &[]),
        Value::Window(state) => {
            key(scratch, 24, WIRE_VARINT);
            varint(scratch, state);
        }
        Value::ChargeState(state) => {
            key(scratch, 32, WIRE_VARINT);
            varint(scratch, state);
        }
    }
    let value_len = scratch.len() as u64;
    let datum_len = 1 + varint_len(field_no) + 1 + varint_len(value_len) + value_len;
    key(payload, 1, WIRE_LEN);
    varint(payload, datum_len);
    key(payload, 1, WIRE_VARINT);
    varint(payload, field_no);
    key(payload, 2, WIRE_LEN);
    varint(payload, value_len);
    payload.extend_from_slice(scratch);
}

pub(super) fn encode_telemetry(e: &mut Emitter<'_>, s: &Sample<'_>, out: &mut Vec<RawEvent>) {
    if matches!(s.kind, SampleKind::Fix | SampleKind::Command(_)) {
        return;
    }
    let t = s.time_ms;
    let (dn, de) = e.gps_noise(s.lat);
    let mut p = std::mem::take(&mut e.proto);
    let mut inner = std::mem::take(&mut e.proto_inner);
    p.clear();
    datum(
        &mut p,
        &mut inner,
        field::LOCATION,
        Value::Location(s.lat + dn, s.lon + de),
    );
    datum(
        &mut p,
        &mut inner,
        field::SOC,
        Value::Double(round(s.energy_pct, 2)),
    );
    datum(
        &mut p,
        &mut inner,
        field::EST_BATTERY_RANGE,
        Value::Double(round(s.range_km / KM_PER_MI, 2)),
    );
    if s.ignition || s.kind == SampleKind::IgnitionOff {
        datum(
            &mut p,
            &mut inner,
            field::VEHICLE_SPEED,
            Value::Double(round(s.speed_kmh / KM_PER_MI, 1)),
        );
        // Older firmware streams the odometer as a string.
        let odo = format!("{:.3}", s.odometer_km / KM_PER_MI);
        datum(&mut p, &mut inner, field::ODOMETER, Value::String(&odo));
    }
    let milestone = matches!(
        s.kind,
        SampleKind::IgnitionOn | SampleKind::IgnitionOff | SampleKind::Parked
    );
    if milestone {
        datum(
            &mut p,
            &mut inner,
            field::OUTSIDE_TEMP,
            Value::Double(round(s.ambient_c, 1)),
        );
        datum(
            &mut p,
            &mut inner,
            field::ENERGY_REMAINING,
            Value::Double(round(s.energy_abs, 2)),
        );
        datum(
            &mut p,
            &mut inner,
            field::CHARGE_LIMIT_SOC,
            Value::Int(s.charge_limit_pct as i64),
        );
        datum(
            &mut p,
            &mut inner,
            field::DETAILED_CHARGE_STATE,
            Value::ChargeState(CHARGE_DISCONNECTED),
        );
    }
    if matches!(s.kind, SampleKind::IgnitionOn | SampleKind::IgnitionOff) {
        for (i, kpa) in s.tire_kpa.iter().enumerate() {
            datum(
                &mut p,
                &mut inner,
                field::TPMS_PRESSURE_FL + i as u64,
                Value::Double(round(kpa / KPA_PER_ATM, 3)),
            );
        }
        datum(&mut p, &mut inner, field::DOOR_STATE, Value::DoorsClosed);
        for window in field::FD_WINDOW..=field::RP_WINDOW {
            datum(&mut p, &mut inner, window, Value::Window(WINDOW_CLOSED));
        }
    }
    if let Some(c) = s.charge {
        let state = if c.active {
            CHARGE_CHARGING
        } else {
            CHARGE_COMPLETE
        };
        datum(
            &mut p,
            &mut inner,
            field::DETAILED_CHARGE_STATE,
            Value::ChargeState(state),
        );
        let (power_field, volts) = if c.dc {
            (field::DC_CHARGING_POWER, 400.0)
        } else {
            (field::AC_CHARGING_POWER, 240.0)
        };
        datum(
            &mut p,
            &mut inner,
            power_field,
            Value::Double(round(c.power_kw, 2)),
        );
        datum(
            &mut p,
            &mut inner,
            field::CHARGE_AMPS,
            Value::Double((c.power_kw * 1000.0 / volts).round()),
        );
        datum(
            &mut p,
            &mut inner,
            field::CHARGER_VOLTAGE,
            Value::Double(if c.active { volts } else { 0.0 }),
        );
        if c.dc {
            datum(
                &mut p,
                &mut inner,
                field::DC_CHARGING_ENERGY_IN,
                Value::Double(round(c.added_kwh, 2)),
            );
        }
        datum(
            &mut p,
            &mut inner,
            field::ENERGY_REMAINING,
            Value::Double(round(s.energy_abs, 2)),
        );
    }
    // created_at: google.protobuf.Timestamp{seconds, nanos}.
    inner.clear();
    key(&mut inner, 1, WIRE_VARINT);
    varint(&mut inner, t.div_euclid(1000) as u64);
    let nanos = t.rem_euclid(1000) as u64 * 1_000_000;
    if nanos > 0 {
        key(&mut inner, 2, WIRE_VARINT);
        varint(&mut inner, nanos);
    }
    len_field(&mut p, 2, &inner);
    len_field(&mut p, 3, e.info.vin.as_bytes());

    let mut data = String::with_capacity(20 + p.len() * 4 / 3 + 4);
    data.push_str("{\"payloads\":[\"");
    base64::engine::general_purpose::STANDARD.encode_string(&p, &mut data);
    data.push_str("\"]}");
    e.proto = p;
    e.proto_inner = inner;
    push_with_fingerprint(e, t, TESLA_TELEMETRY_DATA_VERSION, data, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn location_datum_matches_fleet_telemetry_bytes() {
        // The first payload of vectors/tesla_telemetry_location.json, rebuilt field by field.
        let expected = base64::engine::general_purpose::STANDARD
            .decode(
                "ChgIFRIUOhIJLEfIQJ4jSkARxeOiWkQU7b8SCwjD15i+BhD+w5tCGhFYUDdZSENFUjNTQjU4MjUwNg==",
            )
            .unwrap();
        let lat = f64::from_le_bytes(expected[9..17].try_into().unwrap());
        let lon = f64::from_le_bytes(expected[18..26].try_into().unwrap());
        let mut p = Vec::new();
        let mut inner = Vec::new();
        datum(
            &mut p,
            &mut inner,
            field::LOCATION,
            Value::Location(lat, lon),
        );
        assert_eq!(p, expected[..26]);
    }
}
