//! AutoPi and HashDog (Macaron) V2 payloads: `{"device":{..},"timestamp":ms,
//! "vehicle":{"signals":[{name,timestamp(ms),value}]}}`. Their ingest modules add a device-level
//! `dimo.status` copy (subject = producer) and give every header its own KSUID.

use super::{fan_out, Emitter};
use crate::jsonw::{self, round};
use crate::life::{DtcReport, Sample, SampleKind};
use crate::vehicle::{Fuel, Powertrain};
use crate::vendor::V2_DATA_VERSION;
use dq_cloudevent::event::CloudEventHeader;
use dq_cloudevent::types::{FINGERPRINT, STATUS};
use dq_cloudevent::RawEvent;
use rand::Rng;

/// Writes `{"name":..,"timestamp":<ms>,"value":..}` elements.
struct Signals<'a>(jsonw::Elements<'a>);

impl Signals<'_> {
    /// Starts an element up to its value.
    fn open(&mut self, name: &str, ts: i64) -> &mut String {
        let out = self.0.next();
        out.push_str("{\"name\":\"");
        out.push_str(name);
        out.push_str("\",\"timestamp\":");
        jsonw::int(out, ts);
        out.push_str(",\"value\":");
        out
    }

    fn num(&mut self, name: &str, ts: i64, v: f64) {
        let out = self.open(name, ts);
        jsonw::num(out, v);
        out.push('}');
    }

    fn text(&mut self, name: &str, ts: i64, v: &str) {
        let out = self.open(name, ts);
        jsonw::string(out, v);
        out.push('}');
    }

    fn flag(&mut self, name: &str, ts: i64, v: bool) {
        self.open(name, ts)
            .push_str(if v { "true}" } else { "false}" });
    }
}

/// The OBD and GPS readings both V2 devices send. Each reading gets its own timestamp a little
/// before the send time, as a polling device would; latitude, longitude and hdop share one
/// timestamp so dq's coordinate merge pairs them.
fn write_signals(e: &mut Emitter<'_>, s: &Sample<'_>, sig: &mut Signals<'_>, hashdog: bool) {
    let t = s.time_ms;
    let (dn, de) = e.gps_noise(s.lat);
    let gps_t = t - e.rng.gen_range(0..200);
    sig.num("latitude", gps_t, round(s.lat + dn, 7));
    sig.num("longitude", gps_t, round(s.lon + de, 7));
    sig.num("hdop", gps_t, round(e.traits.hdop + e.rand_unit() * 0.3, 1));
    sig.num("nsat", gps_t, f64::from(e.rng.gen_range(7..14)));
    sig.num("altitude", gps_t, round(s.alt_m, 1));
    if !hashdog {
        sig.flag("isRedacted", gps_t, false);
    }
    // Each reading is up to `max_age_ms` older than the send time, drawn in this order.
    let mut polled = |e: &mut Emitter<'_>, readings: &[(&str, i64, f64)]| {
        for &(name, max_age_ms, value) in readings {
            sig.num(name, t - e.rng.gen_range(0..max_age_ms), value);
        }
    };
    polled(e, &[("batteryVoltage", 900, round(s.battery_v, 2))]);
    if !s.ignition && s.kind != SampleKind::IgnitionOff {
        // Asleep: the OBD port is silent, only the device's own sensors report.
        return;
    }
    polled(
        e,
        &[
            ("speed", 300, s.speed_kmh.round()),
            ("odometer", 900, round(s.odometer_km, 1)),
            ("fuelLevel", 900, round(s.energy_pct, 1)),
            ("rpm", 300, s.rpm.round()),
            ("coolantTemp", 900, s.coolant_c.round()),
        ],
    );
    if hashdog {
        return;
    }
    polled(
        e,
        &[
            ("engineLoad", 900, round(s.engine_load_pct, 2)),
            ("throttlePosition", 900, round(s.throttle_pct, 2)),
            ("intakeTemp", 900, s.intake_c.round()),
            ("ambientAirTemp", 900, s.ambient_c.round()),
            ("maf", 900, round(s.maf_gs, 2)),
            ("runTime", 900, s.run_time_s),
            ("fuelLevelLiters", 900, round(s.energy_abs, 1)),
        ],
    );
}

fn vehicle_open(e: &Emitter<'_>, data: &mut String) {
    data.push_str("\"vehicle\":{\"make\":");
    jsonw::string(data, e.info.make);
    data.push_str(",\"model\":");
    jsonw::string(data, e.info.model);
    data.push_str(",\"year\":");
    jsonw::int(data, i64::from(e.info.year));
    data.push_str(",\"signals\":[");
}

pub(super) fn encode_autopi(e: &mut Emitter<'_>, s: &Sample<'_>, out: &mut Vec<RawEvent>) {
    if matches!(s.kind, SampleKind::Fix | SampleKind::Command(_)) {
        return;
    }
    e.frames += 1;
    if s.kind == SampleKind::IgnitionOn {
        fingerprint_autopi(e, s, out);
    }
    let mut data = String::with_capacity(1400);
    data.push_str("{\"device\":{\"rpiUptimeSecs\":");
    jsonw::int(&mut data, (e.frames * 37 % 86_400) as i64);
    data.push_str(",\"batteryVoltage\":");
    jsonw::num(&mut data, round(s.battery_v, 2));
    data.push_str(",\"softwareVersion\":\"v1.23.5\"},\"timestamp\":");
    jsonw::int(&mut data, s.time_ms);
    data.push(',');
    vehicle_open(e, &mut data);
    let mut sig = Signals(jsonw::Elements::new(&mut data));
    write_signals(e, s, &mut sig, false);
    if s.kind == SampleKind::IgnitionOn {
        let fuel = match e.info.powertrain {
            Powertrain::Combustion {
                fuel: Fuel::Diesel, ..
            } => "Diesel",
            Powertrain::Combustion { .. } => "Gasoline",
            Powertrain::Electric { .. } => "Electric",
        };
        sig.text("fuelType", s.time_ms, fuel);
        if s.dtc_report == DtcReport::Active {
            sig.text("obdDTCList", s.time_ms, &s.dtcs.join(","));
        }
    }
    data.push_str("]}}");
    let sig = e.signature();
    let mut headers = Vec::with_capacity(2);
    push_vehicle_and_device(e, s, STATUS, &sig, &mut headers);
    fan_out(out, headers, data);
}

/// The two messages an aftermarket device sends for one reading: `event_type` about the vehicle
/// and a status copy about the device itself, ids drawn in that order.
fn push_vehicle_and_device(
    e: &mut Emitter<'_>,
    s: &Sample<'_>,
    event_type: &str,
    sig: &str,
    headers: &mut Vec<CloudEventHeader>,
) {
    let vehicle_id = e.ksuid(s.time_ms);
    let device_id = e.ksuid(s.time_ms);
    headers.push(header(e, s, event_type, vehicle_id, &e.info.subject, sig));
    headers.push(header(e, s, STATUS, device_id, &e.info.producer, sig));
}

/// A V2 message header: the V2 data version, at the sample's time.
fn header(
    e: &Emitter<'_>,
    s: &Sample<'_>,
    event_type: &str,
    id: String,
    subject: &str,
    sig: &str,
) -> CloudEventHeader {
    e.header(event_type, id, s.time_ms, V2_DATA_VERSION, subject, sig)
}

/// AutoPi sends the VIN as its own `zone.dimo.aftermarket.device.fingerprint` message when the
/// ignition comes on; it also fans out to a device-level status copy.
fn fingerprint_autopi(e: &mut Emitter<'_>, s: &Sample<'_>, out: &mut Vec<RawEvent>) {
    let mut data = String::with_capacity(96);
    data.push_str("{\"timestamp\":");
    jsonw::int(&mut data, s.time_ms);
    data.push_str(",\"vin\":");
    jsonw::string(&mut data, &e.info.vin);
    data.push_str(",\"protocol\":\"6\"}");
    let sig = e.signature();
    let mut headers = Vec::with_capacity(2);
    push_vehicle_and_device(e, s, FINGERPRINT, &sig, &mut headers);
    fan_out(out, headers, data);
}

pub(super) fn encode_hashdog(e: &mut Emitter<'_>, s: &Sample<'_>, out: &mut Vec<RawEvent>) {
    if matches!(s.kind, SampleKind::Fix | SampleKind::Command(_)) {
        return;
    }
    e.frames += 1;
    // Frame header 1 carries the VIN (decoded payload) and fans out to a fingerprint.
    let vin_frame = s.kind == SampleKind::IgnitionOn;
    let mut data = String::with_capacity(900);
    data.push_str("{\"header\":");
    data.push_str(if vin_frame { "1" } else { "2" });
    data.push_str(",\"device\":{\"id\":");
    jsonw::string(&mut data, &e.traits.device_serial);
    data.push_str(",\"name\":");
    jsonw::string(&mut data, &e.device_address);
    data.push_str(",\"protocol\":\"lora_helium\",\"nonce\":");
    jsonw::int(&mut data, (e.frames % 65_536) as i64);
    data.push_str("},\"timestamp\":");
    jsonw::int(&mut data, s.time_ms);
    if vin_frame {
        data.push_str(",\"decodedPayload\":{\"vin\":");
        jsonw::string(&mut data, &e.info.vin);
        data.push('}');
    }
    data.push(',');
    vehicle_open(e, &mut data);
    let mut sig = Signals(jsonw::Elements::new(&mut data));
    write_signals(e, s, &mut sig, true);
    if s.kind == SampleKind::IgnitionOn {
        sig.num("obdStatusDTCCount", s.time_ms, s.dtcs.len() as f64);
    }
    data.push_str("]}}");
    let sig = e.signature();
    let mut headers = Vec::with_capacity(3);
    if vin_frame {
        let id = e.ksuid(s.time_ms);
        headers.push(header(e, s, FINGERPRINT, id, &e.info.subject, &sig));
    }
    push_vehicle_and_device(e, s, STATUS, &sig, &mut headers);
    fan_out(out, headers, data);
}
