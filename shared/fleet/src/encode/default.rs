//! Default-module oracle payloads: `{"signals":[{name,timestamp,value}],
//! "events":[...], "vin": ...}` with RFC 3339 timestamps. Its ingest module emits
//! `dimo.fingerprint` when `vin` is present, `dimo.status` for signals and `dimo.events` for
//! events, all copies of one header with one id.

use super::{fan_out, Emitter};
use crate::jsonw::{self, round};
use crate::life::{DtcReport, Sample, SampleKind};
use dq_cloudevent::types::{EVENTS, FINGERPRINT, STATUS};
use dq_cloudevent::RawEvent;

/// Writes one `{"name":..,"timestamp":..,"value":<number>}` element.
struct Signals<'a> {
    items: jsonw::Elements<'a>,
    ts: &'a str,
}

impl Signals<'_> {
    /// Starts an element up to its value.
    fn open(&mut self, name: &str) -> &mut String {
        let out = self.items.next();
        out.push_str("{\"name\":\"");
        out.push_str(name);
        out.push_str("\",\"timestamp\":\"");
        out.push_str(self.ts);
        out.push_str("\",\"value\":");
        out
    }

    fn num(&mut self, name: &str, v: f64) {
        let out = self.open(name);
        jsonw::num(out, v);
        out.push('}');
    }

    fn text(&mut self, name: &str, v: &str) {
        let out = self.open(name);
        jsonw::string(out, v);
        out.push('}');
    }

    fn location(&mut self, lat: f64, lon: f64, hdop: f64) {
        let out = self.open("currentLocationCoordinates");
        out.push_str("{\"latitude\":");
        jsonw::num(out, lat);
        out.push_str(",\"longitude\":");
        jsonw::num(out, lon);
        out.push_str(",\"hdop\":");
        jsonw::num(out, hdop);
        out.push_str("}}");
    }
}

pub(super) fn encode(e: &mut Emitter<'_>, s: &Sample<'_>, out: &mut Vec<RawEvent>) {
    if matches!(s.kind, SampleKind::Fix | SampleKind::Command(_)) {
        return;
    }
    let mut ts = String::with_capacity(24);
    jsonw::rfc3339_ms(&mut ts, s.time_ms);
    let (dn, de) = e.gps_noise(s.lat);
    let hdop = round(e.traits.hdop + e.rand_unit() * 0.3, 1);
    let electric = e.info.powertrain.is_electric();
    let mut data = String::with_capacity(1600);
    data.push_str("{\"signals\":[");
    let mut sig = Signals {
        items: jsonw::Elements::new(&mut data),
        ts: &ts,
    };
    sig.num("isIgnitionOn", if s.ignition { 1.0 } else { 0.0 });
    sig.num("speed", round(s.speed_kmh, 1));
    sig.num(
        "powertrainTransmissionTravelledDistance",
        round(s.odometer_km, 2),
    );
    sig.location(round(s.lat + dn, 7), round(s.lon + de, 7), hdop);
    sig.num("lowVoltageBatteryCurrentVoltage", round(s.battery_v, 2));
    sig.num("exteriorAirTemperature", round(s.ambient_c, 1));
    sig.num("powertrainRange", s.range_km.round());
    if s.ignition {
        sig.num("currentLocationHeading", round(s.heading_deg, 1));
        sig.num("currentLocationAltitude", round(s.alt_m, 1));
    }
    if electric {
        sig.num(
            "powertrainTractionBatteryStateOfChargeCurrent",
            round(s.energy_pct, 1),
        );
        let charging = s.charge.is_some_and(|c| c.active);
        sig.num(
            "powertrainTractionBatteryChargingIsCharging",
            if charging { 1.0 } else { 0.0 },
        );
        if let Some(c) = s.charge {
            sig.num(
                "powertrainTractionBatteryChargingPower",
                round(c.power_kw, 2),
            );
            sig.num(
                "powertrainTractionBatteryChargingAddedEnergy",
                round(c.added_kwh, 2),
            );
            sig.num(
                "powertrainTractionBatteryChargingChargeLimit",
                s.charge_limit_pct,
            );
            // VSS: positive while energy flows into the battery.
            sig.num(
                "powertrainTractionBatteryCurrentPower",
                round(c.power_kw * 1000.0, 0),
            );
        } else if s.ignition {
            sig.num(
                "powertrainTractionBatteryCurrentPower",
                round(-s.rate * 1000.0, 0),
            );
        }
    } else {
        sig.num("powertrainFuelSystemRelativeLevel", round(s.energy_pct, 1));
        sig.num("powertrainFuelSystemAbsoluteLevel", round(s.energy_abs, 1));
        if s.engine_on {
            sig.num("powertrainCombustionEngineSpeed", s.rpm.round());
            sig.num("powertrainCombustionEngineECT", s.coolant_c.round());
            sig.num("obdEngineLoad", round(s.engine_load_pct, 1));
            sig.num("powertrainCombustionEngineTPS", s.throttle_pct.round());
            sig.num("obdRunTime", s.run_time_s);
        }
    }
    if s.kind == SampleKind::IgnitionOn {
        sig.text(
            "powertrainType",
            if electric { "ELECTRIC" } else { "COMBUSTION" },
        );
        let names = [
            "chassisAxleRow1WheelLeftTirePressure",
            "chassisAxleRow1WheelRightTirePressure",
            "chassisAxleRow2WheelLeftTirePressure",
            "chassisAxleRow2WheelRightTirePressure",
        ];
        for (name, kpa) in names.iter().zip(s.tire_kpa) {
            sig.num(name, kpa.round());
        }
        match s.dtc_report {
            DtcReport::Active => {
                // A string[] signal travels as the JSON text of the array.
                let list = format!(
                    "[{}]",
                    s.dtcs
                        .iter()
                        .map(|c| format!("\"{c}\""))
                        .collect::<Vec<_>>()
                        .join(",")
                );
                sig.text("obdDTCList", &list);
                sig.num("obdStatusDTCCount", s.dtcs.len() as f64);
            }
            DtcReport::Cleared => {
                sig.text("obdDTCList", "[]");
                sig.num("obdStatusDTCCount", 0.0);
            }
            DtcReport::None => {}
        }
    }
    data.push(']');
    let has_events = !s.events.is_empty();
    if has_events {
        data.push_str(",\"events\":[");
        for (i, ev) in s.events.iter().enumerate() {
            if i > 0 {
                data.push(',');
            }
            data.push_str("{\"name\":\"");
            data.push_str(ev.kind.name());
            data.push_str("\",\"timestamp\":\"");
            jsonw::rfc3339_ms(&mut data, ev.time.timestamp_millis());
            data.push_str("\",\"durationNs\":0,\"metadata\":");
            jsonw::string(
                &mut data,
                &format!("{{\"speedKmh\":{}}}", round(ev.speed_kmh, 1)),
            );
            data.push_str(",\"tags\":[]}");
        }
        data.push(']');
    }
    let has_vin = s.kind == SampleKind::IgnitionOn;
    if has_vin {
        data.push_str(",\"vin\":");
        jsonw::string(&mut data, &e.info.vin);
    }
    data.push('}');

    let id = e.ksuid(s.time_ms);
    let subject = e.info.subject.as_str();
    let mut headers = Vec::with_capacity(3);
    if has_vin {
        headers.push(e.header(FINGERPRINT, id.clone(), s.time_ms, "", subject, ""));
    }
    headers.push(e.header(STATUS, id.clone(), s.time_ms, "", subject, ""));
    if has_events {
        headers.push(e.header(EVENTS, id, s.time_ms, "", subject, ""));
    }
    fan_out(out, headers, data);
}
