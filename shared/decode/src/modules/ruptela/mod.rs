//! Ruptela (and Kaufmann, the same protocol under another source): status `r/v0/s`, location
//! `r/v0/loc`, DTC `r/v0/dtc` and the behaviour/engine-block events.
//!
//! Status values are hex strings keyed by OID under `signals`; each catalog signal tries its
//! sources in priority order and the first success wins. All lookups are gjson-style (first
//! duplicate key wins), which the `ruptela_full_status` vector depends on.

mod oid;

use crate::error::DecodeError;
use crate::model::{Decoded, Event, Signal, SignalValue};
use crate::util::{payload, unix_secs};
use chrono::{DateTime, Utc};
use dq_cloudevent::json::Value;
use dq_cloudevent::time::parse_rfc3339;
use dq_cloudevent::{gojson, types, Erc721Did, RawEvent};
use dq_signals::events as ev;
use dq_signals::names as n;
use oid::{Oid, OidFailure};

/// `dataversion` of a status message.
pub const DS_STATUS: &str = "r/v0/s";
/// `dataversion` of a location batch.
pub const DS_LOCATION: &str = "r/v0/loc";
/// `dataversion` of a DTC report.
pub const DS_DTC: &str = "r/v0/dtc";
/// `dataversion` of device-level rows (never decoded).
pub const DS_DEVICE: &str = "r/v0/dev";
/// `dataversion` of battery rows (never decoded).
pub const DS_BATTERY: &str = "r/v0/batt";
/// `dataversion` of command acknowledgements (events only).
pub const DS_COMMAND: &str = "r/v0/cmd";

/// Why one source of a signal produced nothing.
enum Failure {
    /// Absent value, sentinel, or gated out: silent unless nothing else explains the absence.
    NotFound,
    /// A real problem (type mismatch, bad hex).
    Error(DecodeError),
}

/// Post-processing applied to a converted OID value.
#[derive(Debug, Clone, Copy)]
enum Rule {
    Plain,
    IgnoreZero,
    /// `ignoreZero` only while `signals.409 == "0"` (ignition off).
    IgnoreZeroIfIgnitionOff,
    /// 0 → 0, 1..=3 → 1, else not found.
    CanStatus,
    /// Bit n of a byte; values outside 0..=254 are not found.
    Bit(u32),
    /// 0 → 0, 1 → 1, else not found.
    ZeroOne,
    /// 0 → 1, anything else → 0.
    Inverted,
    /// 0 → 0, 5 → 1, else not found.
    PtoActive,
    /// psi → kPa, then `ignoreZero`.
    TirePressure,
    /// Not found when unplugged (`signals.985 == "1"`), `ignoreZero`, mV → V.
    LowVoltage,
    /// `ignoreZero`, then ÷1000.
    IgnoreZeroDiv1000,
    Div1000,
    /// Minutes → seconds.
    Times60,
    /// OBD PID 51 fuel type name.
    FuelTypeName,
    /// Fuel type → COMBUSTION / ELECTRIC / HYBRID.
    PowertrainType,
    /// Retarder torque mode name.
    TorqueMode,
    /// Percentage → oil level name.
    OilLevel,
    /// Gear from OID 1232's packed bytes.
    ActualGear,
    /// Gear ratio from OID 1232's packed bytes.
    ActualGearRatio,
}

/// Where a signal's value comes from.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// `signals.<oid>`, a hex string.
    Oid(u16, Rule),
    /// `pos.alt`: 32768 not found, ÷10.
    Altitude,
    /// `pos.dir`: outside 0..=36000 not found, ÷100.
    Heading,
    /// `pos.spd`: 65535 not found.
    PosSpeed,
    /// `dtc_codes`: array of `{code}` objects.
    DtcCodes,
}

use Rule::*;
use Source::{Altitude, DtcCodes, Heading, Oid as S, PosSpeed};

/// The V1 status map: signal → sources in priority order.
#[rustfmt::skip]
static STATUS_SIGNALS: &[(&str, &[Source])] = &[
    (n::BODY_LIGHTS_IS_AIRBAG_WARNING_ON, &[S(347, CanStatus)]),
    (n::BODY_LOCK_IS_LOCKED, &[S(538, Plain)]),
    (n::BODY_TRUNK_FRONT_IS_OPEN, &[S(518, Bit(6))]),
    (n::BODY_TRUNK_REAR_IS_OPEN, &[S(518, Bit(5))]),
    (n::CABIN_DOOR_ROW1_DRIVER_SIDE_IS_OPEN, &[S(518, Bit(0))]),
    (n::CABIN_DOOR_ROW1_PASSENGER_SIDE_IS_OPEN, &[S(518, Bit(1))]),
    (n::CABIN_DOOR_ROW2_DRIVER_SIDE_IS_OPEN, &[S(518, Bit(2))]),
    (n::CABIN_DOOR_ROW2_PASSENGER_SIDE_IS_OPEN, &[S(518, Bit(3))]),
    (n::CABIN_SEAT_ROW1_DRIVER_SIDE_IS_BELTED, &[S(109, Bit(0))]),
    (n::CABIN_SEAT_ROW1_PASSENGER_SIDE_IS_BELTED, &[S(109, Bit(1))]),
    (n::CABIN_SEAT_ROW2_DRIVER_SIDE_IS_BELTED, &[S(109, Bit(2))]),
    (n::CABIN_SEAT_ROW2_MIDDLE_IS_BELTED, &[S(109, Bit(4))]),
    (n::CABIN_SEAT_ROW2_PASSENGER_SIDE_IS_BELTED, &[S(109, Bit(3))]),
    (n::CABIN_SEAT_ROW3_DRIVER_SIDE_IS_BELTED, &[S(109, Bit(5))]),
    (n::CABIN_SEAT_ROW3_PASSENGER_SIDE_IS_BELTED, &[S(109, Bit(6))]),
    (n::CHASSIS_AXLE_ROW1_WHEEL_LEFT_TIRE_PRESSURE, &[S(960, TirePressure), S(965, TirePressure)]),
    (n::CHASSIS_AXLE_ROW1_WHEEL_RIGHT_TIRE_PRESSURE, &[S(961, TirePressure), S(966, TirePressure)]),
    (n::CHASSIS_AXLE_ROW2_WHEEL_LEFT_TIRE_PRESSURE, &[S(962, TirePressure), S(967, TirePressure)]),
    (n::CHASSIS_AXLE_ROW2_WHEEL_RIGHT_TIRE_PRESSURE, &[S(963, TirePressure), S(968, TirePressure)]),
    (n::CHASSIS_AXLE_ROW3_WEIGHT, &[S(53, Plain)]),
    (n::CHASSIS_AXLE_ROW4_WEIGHT, &[S(54, Plain)]),
    (n::CHASSIS_AXLE_ROW5_WEIGHT, &[S(55, Plain)]),
    (n::CHASSIS_BRAKE_ABS_IS_WARNING_ON, &[S(313, CanStatus)]),
    (n::CHASSIS_BRAKE_CIRCUIT1_PRESSURE_PRIMARY, &[S(355, Plain)]),
    (n::CHASSIS_BRAKE_CIRCUIT2_PRESSURE_PRIMARY, &[S(356, Plain)]),
    (n::CHASSIS_BRAKE_IS_PEDAL_PRESSED, &[S(36, ZeroOne)]),
    (n::CHASSIS_BRAKE_PEDAL_POSITION, &[S(482, Plain)]),
    (n::CHASSIS_PARKING_BRAKE_IS_ENGAGED, &[S(362, ZeroOne)]),
    (n::CHASSIS_TIRE_SYSTEM_IS_WARNING_ON, &[S(316, ZeroOne)]),
    (n::CONNECTIVITY_CELLULAR_IS_JAMMING_DETECTED, &[S(88, Plain)]),
    (n::CURRENT_LOCATION_ALTITUDE, &[Altitude]),
    (n::CURRENT_LOCATION_HEADING, &[Heading]),
    (n::EXTERIOR_AIR_TEMPERATURE, &[S(97, Plain), S(89, Plain)]),
    (n::IS_IGNITION_ON, &[S(409, Plain), S(522, Plain)]),
    (n::LOW_VOLTAGE_BATTERY_CURRENT_VOLTAGE, &[S(29, LowVoltage)]),
    (n::OBD_BAROMETRIC_PRESSURE, &[S(1229, Plain)]),
    (n::OBD_DTC_LIST, &[DtcCodes]),
    (n::OBD_DISTANCE_WITH_MIL, &[S(102, Plain)]),
    (n::OBD_ENGINE_LOAD, &[S(39, Plain), S(1221, Plain)]),
    (n::OBD_ETHANOL_PERCENT, &[S(1230, Plain)]),
    (n::OBD_FUEL_RAIL_PRESSURE, &[S(1228, Plain)]),
    (n::OBD_FUEL_RATE, &[S(116, Plain), S(100, Plain)]),
    (n::OBD_FUEL_TYPE_NAME, &[S(99, FuelTypeName)]),
    (n::OBD_INTAKE_TEMP, &[S(1225, Plain)]),
    (n::OBD_IS_ENGINE_BLOCKED, &[S(405, Inverted)]),
    (n::OBD_IS_PTO_ACTIVE, &[S(38, PtoActive)]),
    (n::OBD_IS_PLUGGED_IN, &[S(985, Inverted)]),
    (n::OBD_LONG_TERM_FUEL_TRIM1, &[S(1222, Plain)]),
    (n::OBD_LONG_TERM_FUEL_TRIM2, &[S(1223, Plain)]),
    (n::OBD_MAP, &[S(1224, Plain)]),
    (n::OBD_MAX_MAF, &[S(1226, Plain)]),
    (n::OBD_OIL_TEMPERATURE, &[S(727, Plain), S(1231, Plain)]),
    (n::OBD_RUN_TIME, &[S(107, IgnoreZero)]),
    (n::OBD_STATUS_DTC_COUNT, &[S(108, Plain)]),
    (n::OBD_THROTTLE_POSITION, &[S(1227, Plain)]),
    (n::POWERTRAIN_COMBUSTION_ENGINE_DIESEL_EXHAUST_FLUID_CAPACITY, &[S(1148, Plain), S(1149, IgnoreZero)]),
    (n::POWERTRAIN_COMBUSTION_ENGINE_DIESEL_EXHAUST_FLUID_LEVEL, &[S(1150, Plain), S(201, Plain), S(357, Plain)]),
    (n::POWERTRAIN_COMBUSTION_ENGINE_ECT, &[S(96, Plain), S(115, Plain)]),
    (n::POWERTRAIN_COMBUSTION_ENGINE_EOP, &[S(728, Plain)]),
    (n::POWERTRAIN_COMBUSTION_ENGINE_ENGINE_OIL_LEVEL, &[S(964, OilLevel), S(1187, OilLevel)]),
    (n::POWERTRAIN_COMBUSTION_ENGINE_ENGINE_OIL_RELATIVE_LEVEL, &[S(964, IgnoreZero), S(1187, IgnoreZero)]),
    (n::POWERTRAIN_COMBUSTION_ENGINE_SPEED, &[S(94, IgnoreZero), S(197, Plain)]),
    (n::POWERTRAIN_COMBUSTION_ENGINE_TPS, &[S(103, IgnoreZeroIfIgnitionOff), S(206, IgnoreZeroIfIgnitionOff)]),
    (n::POWERTRAIN_COMBUSTION_ENGINE_TORQUE_PERCENT, &[S(519, Plain), S(101, Plain)]),
    (n::POWERTRAIN_FUEL_SYSTEM_ABSOLUTE_LEVEL, &[S(642, Plain), S(205, IgnoreZero)]),
    (n::POWERTRAIN_FUEL_SYSTEM_ACCUMULATED_CONSUMPTION, &[S(208, Plain), S(92, Plain)]),
    (n::POWERTRAIN_FUEL_SYSTEM_RELATIVE_LEVEL, &[S(98, IgnoreZero), S(207, IgnoreZero)]),
    (n::POWERTRAIN_TRACTION_BATTERY_CHARGING_IS_CHARGING, &[S(517, Plain)]),
    (n::POWERTRAIN_TRACTION_BATTERY_CHARGING_IS_CHARGING_CABLE_CONNECTED, &[S(1191, Plain)]),
    (n::POWERTRAIN_TRACTION_BATTERY_CHARGING_POWER, &[S(1190, IgnoreZero)]),
    (n::POWERTRAIN_TRACTION_BATTERY_RANGE, &[S(723, Div1000), S(516, Plain)]),
    (n::POWERTRAIN_TRACTION_BATTERY_STATE_OF_CHARGE_CURRENT, &[S(722, Plain), S(515, Plain), S(720, Plain)]),
    (n::POWERTRAIN_TRACTION_BATTERY_STATE_OF_HEALTH, &[S(950, IgnoreZero)]),
    (n::POWERTRAIN_TRANSMISSION_ACTUAL_GEAR, &[S(1232, ActualGear)]),
    (n::POWERTRAIN_TRANSMISSION_ACTUAL_GEAR_RATIO, &[S(1232, ActualGearRatio)]),
    (n::POWERTRAIN_TRANSMISSION_CURRENT_GEAR, &[S(367, Plain)]),
    (n::POWERTRAIN_TRANSMISSION_IS_CLUTCH_SWITCH_OPERATED, &[S(35, ZeroOne)]),
    (n::POWERTRAIN_TRANSMISSION_RETARDER_ACTUAL_TORQUE, &[S(360, Plain)]),
    (n::POWERTRAIN_TRANSMISSION_RETARDER_TORQUE_MODE, &[S(359, TorqueMode)]),
    (n::POWERTRAIN_TRANSMISSION_SELECTED_GEAR, &[S(366, Plain)]),
    (n::POWERTRAIN_TRANSMISSION_TRAVELLED_DISTANCE, &[S(645, Plain), S(114, IgnoreZeroDiv1000)]),
    (n::POWERTRAIN_TYPE, &[S(99, PowertrainType), S(483, PowertrainType)]),
    (n::SERVICE_TIME_TO_SERVICE, &[S(520, Times60)]),
    (n::SPEED, &[S(95, IgnoreZeroIfIgnitionOff), PosSpeed, S(210, IgnoreZeroIfIgnitionOff)]),
];

/// Decodes a `dimo.status` row by `dataversion`.
pub fn convert_signals(event: &RawEvent) -> Decoded<Signal> {
    let h = &event.header;
    if h.event_type != types::STATUS || h.data_version == DS_DEVICE || h.data_version == DS_BATTERY
    {
        return Decoded::default();
    }
    match h.data_version.as_str() {
        DS_STATUS => status(event),
        DS_LOCATION => location(event),
        DS_DTC => dtc(event),
        other => Decoded::failed(DecodeError::UnsupportedDataVersion {
            data_version: other.to_string(),
        }),
    }
}

/// Context shared by every conversion of one payload.
struct Doc<'d, 'a> {
    root: &'d Value<'a>,
    /// The `signals` member (first occurrence).
    signals: Option<&'d Value<'a>>,
    /// `signals` members keyed by canonical decimal OID, first occurrence only: a status
    /// message is probed ~130 times, so a sorted index beats a linear key scan.
    index: Vec<(u16, &'d Value<'a>)>,
}

impl<'d, 'a> Doc<'d, 'a> {
    fn new(root: &'d Value<'a>) -> Self {
        let signals = root.get("signals");
        let mut index = Vec::new();
        if let Some(Value::Object(members)) = signals {
            index.reserve(members.len());
            for (key, value) in members {
                // Only canonical decimals can equal a gjson lookup key such as "95".
                let canonical =
                    !key.is_empty() && key.len() <= 5 && !(key.len() > 1 && key.starts_with('0'));
                if let Some(oid) = key
                    .parse::<u16>()
                    .ok()
                    .filter(|_| canonical && key.bytes().all(|b| b.is_ascii_digit()))
                {
                    index.push((oid, value));
                }
            }
            // Stable sort + dedup keeps the first occurrence of a duplicated key.
            index.sort_by_key(|(oid, _)| *oid);
            index.dedup_by_key(|(oid, _)| *oid);
        }
        Doc {
            root,
            signals,
            index,
        }
    }

    /// `signals.<oid>` (first occurrence).
    fn signal(&self, oid: u16) -> Option<&'d Value<'a>> {
        match self.signals? {
            Value::Object(_) => self
                .index
                .binary_search_by_key(&oid, |(k, _)| *k)
                .ok()
                .and_then(|i| self.index.get(i))
                .map(|(_, v)| *v),
            other => {
                let mut buf = [0u8; 5];
                other.get(oid_key(oid, &mut buf))
            }
        }
    }

    /// Ignition off: `signals.409 == "0"`.
    fn ignition_off(&self) -> bool {
        self.signal(409).and_then(Value::as_str) == Some("0")
    }

    /// Unplugged: `signals.985 == "1"`.
    fn unplugged(&self) -> bool {
        self.signal(985).and_then(Value::as_str) == Some("1")
    }
}

/// Formats an OID as its decimal key without allocating.
fn oid_key(oid: u16, buf: &mut [u8; 5]) -> &str {
    // Digits right to left into the buffer's tail; five hold every u16.
    let mut len = 0;
    let mut v = oid;
    for slot in buf.iter_mut().rev() {
        *slot = b'0' + (v % 10) as u8;
        len += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let digits = buf.get(buf.len() - len..).unwrap_or_default();
    std::str::from_utf8(digits).unwrap_or_default()
}

fn status(event: &RawEvent) -> Decoded<Signal> {
    let root = match payload(event) {
        Ok(root) => root,
        Err(e) => return Decoded::failed(e),
    };
    let doc = Doc::new(&root);
    let timestamp = event.header.time;
    let mut out = Decoded {
        items: Vec::with_capacity(STATUS_SIGNALS.len()),
        errors: Vec::new(),
    };
    for &(name, sources) in STATUS_SIGNALS {
        let mut errors = Vec::new();
        let mut saw_not_found = false;
        let mut value = None;
        for source in sources {
            match evaluate(&doc, source) {
                Some(Ok(v)) => {
                    value = Some(v);
                    break;
                }
                Some(Err(Failure::NotFound)) => saw_not_found = true,
                Some(Err(Failure::Error(e))) => errors.push(e),
                None => {}
            }
        }
        match value {
            Some(v) => out.items.push(Signal {
                name,
                timestamp,
                value: v,
            }),
            // model-garage joins every source's failure and checks `errors.Is(NotFound)`, so one
            // not-found source silences parse errors from the others.
            None if !saw_not_found => out.errors.extend(errors),
            None => {}
        }
    }
    if let Some(pos) = root.get("pos") {
        match pos_to_location(pos, "pos") {
            Ok(Some(loc)) => out.items.push(Signal { timestamp, ..loc }),
            Ok(None) => {}
            Err(e) => out.errors.push(e),
        }
    }
    out
}

/// One source of one signal: `None` when the path is absent or null (skipped, not a failure).
fn evaluate(doc: &Doc<'_, '_>, source: &Source) -> Option<Result<SignalValue, Failure>> {
    let value = match source {
        Source::Oid(oid, _) => doc.signal(*oid)?,
        Altitude | Heading | PosSpeed => doc.root.get("pos")?.get(&pos_path(source)[4..])?,
        DtcCodes => doc.root.get("dtc_codes")?,
    };
    if value.is_null() {
        return None;
    }
    Some(match *source {
        Source::Oid(oid, rule) => match value.as_str() {
            Some(hex) => apply_oid(doc, oid, rule, hex),
            None => Err(Failure::Error(DecodeError::type_mismatch(
                format!("signals.{oid}"),
                "string",
                value,
            ))),
        },
        Altitude | Heading | PosSpeed => match value.as_f64() {
            Some(v) => pos_rule(source, v).map(SignalValue::Number),
            None => Err(Failure::Error(DecodeError::type_mismatch(
                pos_path(source),
                "number",
                value,
            ))),
        },
        DtcCodes => dtc_codes(value).map(SignalValue::String),
    })
}

fn pos_path(source: &Source) -> &'static str {
    match source {
        Altitude => "pos.alt",
        Heading => "pos.dir",
        _ => "pos.spd",
    }
}

fn pos_rule(source: &Source, v: f64) -> Result<f64, Failure> {
    match source {
        Altitude if v == 32768.0 => Err(Failure::NotFound),
        Altitude => Ok(v / 10.0),
        Heading if !(0.0..=36000.0).contains(&v) => Err(Failure::NotFound),
        Heading => Ok(v / 100.0),
        _ if v == 65535.0 => Err(Failure::NotFound),
        _ => Ok(v),
    }
}

fn apply_oid(doc: &Doc<'_, '_>, oid: u16, rule: Rule, hex: &str) -> Result<SignalValue, Failure> {
    let Some(def) = Oid::get(oid) else {
        return Err(Failure::NotFound);
    };
    if matches!(rule, LowVoltage) && doc.unplugged() {
        return Err(Failure::NotFound);
    }
    let v = def.convert(hex).map_err(|f| match f {
        OidFailure::NotFound => Failure::NotFound,
        OidFailure::Parse => Failure::Error(DecodeError::invalid(
            format!("signals.{oid}"),
            hex,
            "not a hex number",
        )),
    })?;
    let nf = Err(Failure::NotFound);
    let ignore_zero = |v: f64| {
        if v == 0.0 {
            Err(Failure::NotFound)
        } else {
            Ok(v)
        }
    };
    let num = |r: Result<f64, Failure>| r.map(SignalValue::Number);
    let text = |s: Option<&'static str>| {
        s.map(|s| SignalValue::String(s.to_string()))
            .ok_or(Failure::NotFound)
    };
    match rule {
        Plain => num(Ok(v)),
        IgnoreZero => num(ignore_zero(v)),
        IgnoreZeroIfIgnitionOff if doc.ignition_off() => num(ignore_zero(v)),
        IgnoreZeroIfIgnitionOff => num(Ok(v)),
        CanStatus if v == 0.0 => num(Ok(0.0)),
        CanStatus if (1.0..=3.0).contains(&v) => num(Ok(1.0)),
        CanStatus => nf,
        Bit(bit) => {
            // Go: int(value), then NF outside 0..255 or at 255.
            let i = v.trunc();
            if !(0.0..255.0).contains(&i) {
                return nf;
            }
            num(Ok(f64::from((i as u8 >> bit) & 1)))
        }
        ZeroOne if v == 0.0 || v == 1.0 => num(Ok(v)),
        ZeroOne => nf,
        Inverted => num(Ok(if v == 0.0 { 1.0 } else { 0.0 })),
        PtoActive if v == 0.0 => num(Ok(0.0)),
        PtoActive if v == 5.0 => num(Ok(1.0)),
        PtoActive => nf,
        TirePressure => num(ignore_zero(v * 6.89476)),
        LowVoltage | IgnoreZeroDiv1000 => num(ignore_zero(v).map(|v| v / 1000.0)),
        Div1000 => num(Ok(v / 1000.0)),
        Times60 => num(Ok(v * 60.0)),
        FuelTypeName => text(fuel_type_name(v)),
        PowertrainType => text(powertrain_type(v)),
        TorqueMode => text(torque_mode(v)),
        OilLevel => text(Some(oil_level(v))),
        ActualGear | ActualGearRatio => {
            // The gate keeps v within 0..=4294966294, so the cast is exact.
            let packed = v as u32;
            let [a, b, c, d] = packed.to_be_bytes();
            if a & 1 != 1 || b & 0x0F != 0 {
                return nf;
            }
            if matches!(rule, ActualGear) {
                num(Ok(f64::from(b >> 4)))
            } else {
                num(Ok(f64::from(u32::from(c) * 256 + u32::from(d)) / 1000.0))
            }
        }
    }
}

/// An integral enum code, or `None` for fractions and out-of-range values.
fn code(v: f64) -> Option<u8> {
    (v.fract() == 0.0 && (0.0..=255.0).contains(&v)).then_some(v as u8)
}

fn fuel_type_name(v: f64) -> Option<&'static str> {
    const NAMES: [&str; 23] = [
        "GASOLINE",
        "METHANOL",
        "ETHANOL",
        "DIESEL",
        "LPG",
        "CNG",
        "PROPANE",
        "ELECTRIC",
        "BIFUEL RUNNING GASOLINE",
        "BIFUEL RUNNING METHANOL",
        "BIFUEL RUNNING ETHANOL",
        "BIFUEL RUNNING LPG",
        "BIFUEL RUNNING CNG",
        "BIFUEL RUNNING PROPANE",
        "BIFUEL RUNNING ELECTRICITY",
        "BIFUEL RUNNING ELECTRIC AND COMBUSTION ENGINE",
        "HYBRID GASOLINE",
        "HYBRID ETHANOL",
        "HYBRID DIESEL",
        "HYBRID ELECTRIC",
        "HYBRID RUNNING ELECTRIC AND COMBUSTION ENGINE",
        "HYBRID REGENERATIVE",
        "BIFUEL RUNNING DIESEL",
    ];
    let c = usize::from(code(v)?);
    c.checked_sub(1).and_then(|i| NAMES.get(i)).copied()
}

fn powertrain_type(v: f64) -> Option<&'static str> {
    match code(v)? {
        1..=7 | 9..=14 | 23..=32 => Some("COMBUSTION"),
        8 | 15 => Some("ELECTRIC"),
        16..=22 => Some("HYBRID"),
        _ => None,
    }
}

fn torque_mode(v: f64) -> Option<&'static str> {
    const MODES: [&str; 16] = [
        "LOW IDLE GOVERNOR/NO REQUEST",
        "ACCELERATOR PEDAL/OPERATOR SELECTION",
        "CRUISE CONTROL",
        "PTO GOVERNOR",
        "ROAD SPEED GOVERNOR",
        "ASR CONTROL",
        "TRANSMISSION CONTROL",
        "ABS CONTROL",
        "TORQUE LIMITING",
        "HIGH SPEED GOVERNOR",
        "BRAKING SYSTEM",
        "REMOTE ACCELERATOR",
        "SERVICE PROCEDURE",
        "NOT DEFINED",
        "OTHER",
        "NOT AVAILABLE",
    ];
    MODES.get(usize::from(code(v)?)).copied()
}

fn oil_level(v: f64) -> &'static str {
    if v < 25.0 {
        "CRITICALLY_LOW"
    } else if v < 50.0 {
        "LOW"
    } else if v < 75.0 {
        "NORMAL"
    } else if v < 99.0 {
        "HIGH"
    } else {
        "CRITICALLY_HIGH"
    }
}

/// `dtc_codes` → JSON array string of the elements' string `code`s (Go map semantics: the last
/// duplicate `code` wins). Not an array, a non-object element, or no codes → not found.
fn dtc_codes(value: &Value<'_>) -> Result<String, Failure> {
    let Value::Array(items) = value else {
        return Err(Failure::NotFound);
    };
    let mut codes = Vec::new();
    for item in items {
        let Value::Object(members) = item else {
            return Err(Failure::NotFound);
        };
        if let Some(Value::String(code)) = members
            .iter()
            .rev()
            .find(|(k, _)| k == "code")
            .map(|(_, v)| v)
        {
            codes.push(code.as_ref());
        }
    }
    if codes.is_empty() {
        return Err(Failure::NotFound);
    }
    let mut out = String::from("[");
    for (i, code) in codes.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        gojson::write_string(&mut out, code);
    }
    out.push(']');
    Ok(out)
}

/// `posToLocation`: `Ok(None)` is not-found. The returned signal's
/// timestamp is a placeholder the caller replaces.
fn pos_to_location(pos: &Value<'_>, path: &str) -> Result<Option<Signal>, DecodeError> {
    let lat = pos.get("lat").filter(|v| !v.is_null());
    let lon = pos.get("lon").filter(|v| !v.is_null());
    let (Some(lat), Some(lon)) = (lat, lon) else {
        return Ok(None);
    };
    let lat = lat
        .as_f64()
        .ok_or_else(|| DecodeError::type_mismatch(format!("{path}.lat"), "number", lat))?;
    let lon = lon
        .as_f64()
        .ok_or_else(|| DecodeError::type_mismatch(format!("{path}.lon"), "number", lon))?;
    const SENTINEL: f64 = -2_147_483_648.0;
    if lat == SENTINEL || lon == SENTINEL {
        return Ok(None);
    }
    let hdop = match pos.get("hdop").filter(|v| !v.is_null()) {
        None => 0.0,
        Some(h) => match h.as_f64() {
            Some(255.0) => 0.0,
            Some(h) => h / 10.0,
            None => {
                return Err(DecodeError::type_mismatch(
                    format!("{path}.hdop"),
                    "number",
                    h,
                ))
            }
        },
    };
    Ok(Some(Signal::location(
        DateTime::<Utc>::UNIX_EPOCH,
        lat / 10_000_000.0,
        lon / 10_000_000.0,
        hdop,
    )))
}

/// `r/v0/loc`. Unlike status, not-found values are reported as errors.
fn location(event: &RawEvent) -> Decoded<Signal> {
    if let Err(e) = event.header.subject.parse::<Erc721Did>() {
        return Decoded::failed(DecodeError::invalid(
            "subject",
            event.header.subject.clone(),
            did_reason(&e),
        ));
    }
    let root = match payload(event) {
        Ok(root) => root,
        Err(e) => return Decoded::failed(e),
    };
    let doc = Doc::new(&root);
    let items = match root.get("location") {
        None => return Decoded::failed(DecodeError::missing("location")),
        Some(Value::Null) => return Decoded::default(),
        Some(Value::Array(items)) => items,
        Some(other) => return Decoded::failed(DecodeError::structure("location", "array", other)),
    };
    let mut out = Decoded::default();
    for (i, item) in items.iter().enumerate() {
        let path = format!("location.{i}");
        let Value::Object(members) = item else {
            out.errors
                .push(DecodeError::structure(path, "object", item));
            continue;
        };
        let timestamp = match location_ts(item.get("ts"), &path) {
            Ok(ts) => ts,
            Err(e) => {
                out.errors.push(e);
                continue;
            }
        };
        for (key, value) in members {
            let (name, sources): (&'static str, &[Source]) = match key.as_ref() {
                "alt" => (n::CURRENT_LOCATION_ALTITUDE, &[Altitude]),
                "dir" => (n::CURRENT_LOCATION_HEADING, &[Heading]),
                "spd" => (
                    n::SPEED,
                    &[
                        S(95, IgnoreZeroIfIgnitionOff),
                        PosSpeed,
                        S(210, IgnoreZeroIfIgnitionOff),
                    ],
                ),
                _ => continue,
            };
            match location_value(&doc, value, sources, &format!("{path}.{key}")) {
                Ok(v) => out.items.push(Signal {
                    name,
                    timestamp,
                    value: v,
                }),
                Err(e) => out.errors.push(e),
            }
        }
        match pos_to_location(item, &path) {
            Ok(Some(loc)) => out.items.push(Signal { timestamp, ..loc }),
            Ok(None) => {}
            Err(e) => out.errors.push(e),
        }
    }
    out
}

/// Tries a location element value against each source whose JSON type matches, like the
/// generated `SpeedFromLocationData`; not-found is an error on this path.
fn location_value(
    doc: &Doc<'_, '_>,
    value: &Value<'_>,
    sources: &[Source],
    field: &str,
) -> Result<SignalValue, DecodeError> {
    let mut error = None;
    let mut tried = false;
    for source in sources {
        let attempt = match (*source, value) {
            (Source::Oid(oid, rule), Value::String(hex)) => apply_oid(doc, oid, rule, hex),
            (Altitude | Heading | PosSpeed, Value::Number(_)) => {
                pos_rule(source, value.as_f64().unwrap_or_default()).map(SignalValue::Number)
            }
            _ => continue,
        };
        tried = true;
        match attempt {
            Ok(v) => return Ok(v),
            Err(Failure::Error(e)) => error = error.or(Some(e)),
            Err(Failure::NotFound) => {}
        }
    }
    let expected = if sources.iter().any(|s| matches!(s, Source::Oid(..))) {
        "number or string"
    } else {
        "number"
    };
    Err(match (tried, error) {
        (false, _) => DecodeError::type_mismatch(field, expected, value),
        (true, Some(e)) => e,
        (true, None) => DecodeError::NotAvailable {
            field: field.to_string(),
        },
    })
}

/// `ts`: a number is Unix seconds (gjson `Int()`), a string is RFC 3339.
fn location_ts(ts: Option<&Value<'_>>, path: &str) -> Result<DateTime<Utc>, DecodeError> {
    let field = || format!("{path}.ts");
    match ts {
        None => Err(DecodeError::missing(field())),
        Some(v @ Value::Number(_)) => unix_secs(v.gjson_int())
            .ok_or_else(|| DecodeError::TimestampOutOfRange { field: field() }),
        Some(Value::String(s)) => parse_rfc3339(s)
            .ok_or_else(|| DecodeError::invalid(field(), s.as_ref(), "not an rfc 3339 time")),
        Some(other) => Err(DecodeError::type_mismatch(
            field(),
            "number or string",
            other,
        )),
    }
}

fn did_reason(e: &dq_cloudevent::did::DidError) -> &'static str {
    match e {
        dq_cloudevent::did::DidError::Address(_) => "subject contract is not an address",
        _ => "subject is not a did:erc721",
    }
}

/// `r/v0/dtc`. Reproduces the upstream quirk: an absent or empty code
/// list still yields an `obdDTCList` signal with value `""`, alongside the error.
fn dtc(event: &RawEvent) -> Decoded<Signal> {
    if let Err(e) = event.header.subject.parse::<Erc721Did>() {
        return Decoded::failed(DecodeError::invalid(
            "subject",
            event.header.subject.clone(),
            did_reason(&e),
        ));
    }
    let root = payload(event).unwrap_or(Value::Null);
    let doc = Doc::new(&root);
    let timestamp = event.header.time;
    match evaluate(&doc, &DtcCodes) {
        Some(Ok(value)) => Decoded {
            items: vec![Signal {
                name: n::OBD_DTC_LIST,
                timestamp,
                value,
            }],
            errors: Vec::new(),
        },
        Some(Err(Failure::Error(e))) => Decoded {
            items: vec![Signal::string(n::OBD_DTC_LIST, timestamp, "")],
            errors: vec![e],
        },
        Some(Err(Failure::NotFound)) | None => Decoded {
            items: vec![Signal::string(n::OBD_DTC_LIST, timestamp, "")],
            errors: vec![DecodeError::NotAvailable {
                field: "dtc_codes".to_string(),
            }],
        },
    }
}

/// Decodes `dimo.events` rows: harsh braking/acceleration/cornering
/// counters and, for `r/v0/cmd`, engine block/unblock.
pub fn convert_events(event: &RawEvent) -> Decoded<Event> {
    let root = match payload(event) {
        Ok(root) => root,
        Err(e) => return Decoded::failed(e),
    };
    // Strict struct decode: last duplicate wins, every listed field must be a string.
    let signals = match &root {
        Value::Null => None,
        Value::Object(_) => root.get_field("signals").filter(|v| !v.is_null()),
        other => return Decoded::failed(DecodeError::structure("", "object", other)),
    };
    let mut fields = [""; 4];
    if let Some(signals) = signals {
        if !matches!(signals, Value::Object(_)) {
            return Decoded::failed(DecodeError::structure("signals", "object", signals));
        }
        for (slot, key) in fields.iter_mut().zip(["135", "136", "143", "405"]) {
            match signals.get_field(key) {
                None | Some(Value::Null) => {}
                Some(Value::String(s)) => *slot = s,
                Some(other) => {
                    return Decoded::failed(DecodeError::structure(
                        format!("signals.{key}"),
                        "string",
                        other,
                    ))
                }
            }
        }
    }
    let [braking, acceleration, cornering, engine] = fields;
    let timestamp = event.header.time;
    let mut out = Decoded::default();
    let counter = |name: &'static str, n: u64| Event {
        name,
        timestamp,
        duration_ns: 0,
        metadata: format!("{{\"counterValue\":{n}}}"),
        tags: Vec::new(),
    };
    let hex = |key: &str, s: &str| -> Result<u64, DecodeError> {
        if !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(DecodeError::invalid(
                format!("signals.{key}"),
                s,
                "not a hex number",
            ));
        }
        u64::from_str_radix(s, 16)
            .map_err(|_| DecodeError::invalid(format!("signals.{key}"), s, "not a hex number"))
    };
    if !braking.is_empty() && braking != "0" {
        match hex("135", braking) {
            Ok(v) if v > 0xFF => out.errors.push(DecodeError::invalid(
                "signals.135",
                braking,
                "braking counter above 0xFF",
            )),
            Ok(v) => {
                if v & 0x0F != 0 {
                    out.items
                        .push(counter(ev::BEHAVIOR_HARSH_BRAKING, v & 0x0F));
                }
                if v >> 4 != 0 {
                    out.items
                        .push(counter(ev::BEHAVIOR_EXTREME_BRAKING, v >> 4));
                }
            }
            Err(e) => out.errors.push(e),
        }
    }
    for (key, value, name) in [
        ("136", acceleration, ev::BEHAVIOR_HARSH_ACCELERATION),
        ("143", cornering, ev::BEHAVIOR_HARSH_CORNERING),
    ] {
        if value.is_empty() || value == "0" {
            continue;
        }
        match hex(key, value) {
            Ok(0) => {}
            Ok(v) => out.items.push(counter(name, v)),
            Err(e) => out.errors.push(e),
        }
    }
    if event.header.data_version == DS_COMMAND && !engine.is_empty() {
        match hex("405", engine) {
            Ok(v) => out.items.push(Event {
                name: if v != 0 {
                    ev::SECURITY_ENGINE_BLOCK
                } else {
                    ev::SECURITY_ENGINE_UNBLOCK
                },
                timestamp,
                duration_ns: 0,
                metadata: String::new(),
                tags: Vec::new(),
            }),
            Err(e) => out.errors.push(e),
        }
    }
    out
}

#[cfg(test)]
mod tests;
