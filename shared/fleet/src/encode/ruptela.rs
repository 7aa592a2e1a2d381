//! Ruptela / Kaufmann device messages: hex-string OID status records
//! (`r/v0/s`), GPS fix batches (`r/v0/loc`), trouble codes (`r/v0/dtc`) and remote commands
//! (`r/v0/cmd`). Status and fingerprint headers share one KSUID; the events header gets its own.

use super::{fan_out, Emitter};
use crate::jsonw;
use crate::life::{DtcReport, Sample, SampleKind};
use crate::plan::VehicleEventKind;
use crate::vehicle::{Fuel, Powertrain};
use crate::vendor::{RUPTELA_CMD_DS, RUPTELA_DTC_DS, RUPTELA_LOCATION_DS, RUPTELA_STATUS_DS};
use dq_cloudevent::types::{EVENTS, FINGERPRINT, STATUS};
use dq_cloudevent::RawEvent;

/// Fixes accumulate for this long before a location batch goes out.
const LOC_BATCH_MS: i64 = 60_000;
/// psi per kPa.
const PSI_PER_KPA: f64 = 1.0 / 6.89476;
/// Record trigger codes: periodic, ignition change, harsh event.
const TRIGGER_PERIODIC: u32 = 7;
const TRIGGER_IGNITION: u32 = 409;
const TRIGGER_EVENT: u32 = 135;

/// One GPS fix in device units.
#[derive(Debug, Clone, Copy)]
pub(super) struct Fix {
    ts_s: i64,
    lat: i64,
    lon: i64,
    alt: i64,
    dir: i64,
    hdop: i64,
    sat: i64,
    spd: i64,
}

impl Fix {
    fn write(&self, out: &mut String) {
        let fields = [
            ("alt", self.alt),
            ("dir", self.dir),
            ("hdop", self.hdop),
            ("lat", self.lat),
            ("lon", self.lon),
            ("sat", self.sat),
            ("spd", self.spd),
        ];
        for (i, (key, value)) in fields.into_iter().enumerate() {
            out.push_str(if i == 0 { "{\"" } else { ",\"" });
            out.push_str(key);
            out.push_str("\":");
            jsonw::int(out, value);
        }
    }
}

fn fix_of(e: &mut Emitter<'_>, s: &Sample<'_>) -> Fix {
    let (dn, de) = e.gps_noise(s.lat);
    let hdop = ((e.traits.hdop + e.rand_unit() * 0.3) * 10.0)
        .round()
        .clamp(5.0, 40.0) as i64;
    Fix {
        ts_s: s.time_ms.div_euclid(1000),
        lat: ((s.lat + dn) * 1e7).round() as i64,
        lon: ((s.lon + de) * 1e7).round() as i64,
        alt: (s.alt_m * 10.0).round().clamp(-10_000.0, 32_000.0) as i64,
        dir: (s.heading_deg * 100.0).round().clamp(0.0, 36_000.0) as i64,
        hdop,
        sat: 14 - hdop / 5,
        spd: s.speed_kmh.round().clamp(0.0, 254.0) as i64,
    }
}

/// Writes `"oid":"HEX"` members.
struct Oids<'a>(jsonw::Elements<'a>);

impl Oids<'_> {
    /// Starts a member up to its value's opening quote.
    fn open(&mut self, oid: &str) -> &mut String {
        let out = self.0.next();
        out.push('"');
        out.push_str(oid);
        out.push_str("\":\"");
        out
    }

    fn hex(&mut self, oid: &str, raw: f64) {
        let out = self.open(oid);
        jsonw::hex(out, raw.round().max(0.0) as u64);
        out.push('"');
    }

    fn text(&mut self, oid: &str, value: &str) {
        let out = self.open(oid);
        out.push_str(value);
        out.push('"');
    }
}

pub(super) fn encode(e: &mut Emitter<'_>, s: &Sample<'_>, out: &mut Vec<RawEvent>) {
    match s.kind {
        SampleKind::Fix => {
            let fix = fix_of(e, s);
            e.fixes.push(fix);
        }
        SampleKind::Command(kind) => command(e, s, kind, out),
        _ => {
            let batch_due = e
                .fixes
                .first()
                .is_some_and(|f| s.time_ms - f.ts_s * 1000 >= LOC_BATCH_MS);
            if batch_due || (s.kind == SampleKind::IgnitionOff && !e.fixes.is_empty()) {
                location_batch(e, s.time_ms, out);
            }
            if s.kind == SampleKind::IgnitionOn && s.dtc_report == DtcReport::Active {
                dtc(e, s, out);
            }
            status(e, s, out);
        }
    }
}

fn location_batch(e: &mut Emitter<'_>, time_ms: i64, out: &mut Vec<RawEvent>) {
    let mut data = String::with_capacity(64 + e.fixes.len() * 110);
    data.push_str("{\"location\":[");
    for (i, fix) in e.fixes.iter().enumerate() {
        if i > 0 {
            data.push(',');
        }
        fix.write(&mut data);
        data.push_str(",\"ts\":");
        jsonw::int(&mut data, fix.ts_s);
        data.push('}');
    }
    data.push_str("]}");
    e.fixes.clear();
    let t = time_ms;
    let id = e.ksuid(t);
    let sig = e.signature();
    let header = e.header(STATUS, id, t, RUPTELA_LOCATION_DS, &e.info.subject, &sig);
    fan_out(out, vec![header], data);
}

fn dtc(e: &mut Emitter<'_>, s: &Sample<'_>, out: &mut Vec<RawEvent>) {
    let mut data = String::from("{\"dtc_codes\":[");
    for (i, code) in s.dtcs.iter().enumerate() {
        if i > 0 {
            data.push(',');
        }
        data.push_str("{\"id\":\"7E8\",\"code\":");
        jsonw::string(&mut data, code);
        data.push('}');
    }
    data.push_str("]}");
    let t = s.time_ms;
    let id = e.ksuid(t);
    let sig = e.signature();
    let header = e.header(STATUS, id, t, RUPTELA_DTC_DS, &e.info.subject, &sig);
    fan_out(out, vec![header], data);
}

fn command(e: &mut Emitter<'_>, s: &Sample<'_>, kind: VehicleEventKind, out: &mut Vec<RawEvent>) {
    let value = if kind == VehicleEventKind::EngineBlock {
        "1"
    } else {
        "0"
    };
    let data = format!("{{\"signals\":{{\"405\":\"{value}\"}}}}");
    let t = s.time_ms;
    let id = e.ksuid(t);
    let sig = e.signature();
    let header = e.header(EVENTS, id, t, RUPTELA_CMD_DS, &e.info.subject, &sig);
    fan_out(out, vec![header], data);
}

fn status(e: &mut Emitter<'_>, s: &Sample<'_>, out: &mut Vec<RawEvent>) {
    let fix = fix_of(e, s);
    let t = s.time_ms;
    let mut data = String::with_capacity(900);
    data.push_str("{\"pos\":");
    fix.write(&mut data);
    data.push_str("},\"prt\":0,\"signals\":{");
    let mut sig = Oids(jsonw::Elements::new(&mut data));
    sig.text("409", if s.ignition { "1" } else { "0" });
    sig.hex("29", s.battery_v * 1000.0);
    sig.text("985", "0");
    sig.text("88", "0");
    let fuel_code = match e.info.powertrain {
        Powertrain::Combustion {
            fuel: Fuel::Diesel, ..
        } => 4.0,
        _ => 1.0,
    };
    sig.hex("99", fuel_code);
    sig.hex("108", s.dtcs.len() as f64);
    let ambient = (s.ambient_c + 40.0).clamp(0.0, 254.0);
    let pct = s.energy_pct.clamp(0.0, 100.0);
    let coolant = (s.coolant_c + 40.0).clamp(0.0, 250.0);
    if e.traits.can_bus {
        // CAN-bus (FMS) records: wheel speed, engine speed ×0.125, fuel ×0.4, odometer in km.
        sig.hex("210", s.speed_kmh * 256.0);
        sig.hex("197", s.rpm * 8.0);
        sig.hex("115", coolant);
        sig.hex("207", (pct / 0.4).clamp(1.0, 250.0));
        sig.hex("645", s.odometer_km.floor());
        sig.hex("206", (s.throttle_pct / 0.4).min(250.0));
        sig.hex("1221", (s.engine_load_pct * 2.55).min(254.0));
        sig.hex(
            "1231",
            if s.engine_on {
                (s.coolant_c - 4.0 + 40.0).clamp(0.0, 254.0)
            } else {
                ambient
            },
        );
        sig.hex("116", (s.rate / 0.05).min(64_255.0));
        for (oid, kpa) in ["965", "966", "967", "968"].iter().zip(s.tire_kpa) {
            sig.hex(oid, kpa * PSI_PER_KPA);
        }
    } else {
        // OBD records: speed km/h, engine speed ×0.25, fuel ×100/255, virtual odometer in 5 m.
        sig.hex("95", s.speed_kmh.min(254.0));
        sig.hex("94", s.rpm * 4.0);
        sig.hex("96", coolant);
        sig.hex("98", (pct * 2.55).clamp(1.0, 254.0));
        sig.hex("114", s.odometer_km * 200.0);
        sig.hex("103", (s.throttle_pct * 2.55).min(254.0));
        sig.hex("39", s.engine_load_pct.min(125.0));
        sig.hex("100", (s.rate / 0.05).min(64_255.0));
        sig.hex("1226", (s.maf_gs * 100.0).min(65_534.0));
        for (oid, kpa) in ["960", "961", "962", "963"].iter().zip(s.tire_kpa) {
            sig.hex(oid, kpa * PSI_PER_KPA / 0.05);
        }
    }
    sig.hex("97", ambient);
    sig.hex("205", s.energy_abs.max(1.0));
    sig.hex("107", s.run_time_s.min(65_534.0));
    sig.hex("1225", (s.intake_c + 40.0).clamp(0.0, 254.0));
    sig.hex(
        "1229",
        (101.3 * (-s.alt_m / 8434.0).exp()).clamp(50.0, 110.0),
    );
    // Behaviour counters: 135 low nibble harsh braking, high nibble extreme braking; 136
    // acceleration; 143 cornering.
    let count =
        |k: VehicleEventKind| s.events.iter().filter(|ev| ev.kind == k).count().min(15) as f64;
    let braking =
        count(VehicleEventKind::HarshBraking) + 16.0 * count(VehicleEventKind::ExtremeBraking);
    let accel = count(VehicleEventKind::HarshAcceleration);
    let corner = count(VehicleEventKind::HarshCornering);
    sig.hex("135", braking);
    sig.hex("136", accel);
    if corner > 0.0 {
        sig.hex("143", corner);
    }
    let with_vin = s.kind == SampleKind::IgnitionOn;
    if with_vin {
        // VIN in three 8-byte hex parts, NUL padded.
        let mut vin = [0u8; 24];
        for (slot, b) in vin.iter_mut().zip(e.info.vin.bytes()) {
            *slot = b;
        }
        sig.text("104", &crate::ids::hex_upper(&vin[0..8]));
        sig.text("105", &crate::ids::hex_upper(&vin[8..16]));
        sig.text("106", &crate::ids::hex_upper(&vin[16..24]));
    }
    let trigger = match s.kind {
        SampleKind::IgnitionOn | SampleKind::IgnitionOff => TRIGGER_IGNITION,
        _ if braking + accel + corner > 0.0 => TRIGGER_EVENT,
        _ => TRIGGER_PERIODIC,
    };
    data.push_str("},\"trigger\":");
    jsonw::int(&mut data, i64::from(trigger));
    data.push('}');

    let sig = e.signature();
    let id = e.ksuid(t);
    let subject = e.info.subject.as_str();
    let mut headers = Vec::with_capacity(3);
    headers.push(e.header(STATUS, id.clone(), t, RUPTELA_STATUS_DS, subject, &sig));
    if with_vin {
        headers.push(e.header(FINGERPRINT, id, t, RUPTELA_STATUS_DS, subject, &sig));
    }
    if braking + accel + corner > 0.0 {
        let events_id = e.ksuid(t);
        headers.push(e.header(EVENTS, events_id, t, RUPTELA_STATUS_DS, subject, &sig));
    }
    fan_out(out, headers, data);
}
