use crate::{all_events, small_config};
use dq_fleet::vendor::{self, Vendor};
use dq_fleet::{Fleet, FleetConfig, VendorMix};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

const KM_PER_MI: f64 = 1.609344;

/// The odometer (km) a status payload reports, per vendor shape.
fn odometer_km(source: &str, data_version: &str, data: &Value) -> Option<f64> {
    match (source, data_version) {
        (vendor::RUPTELA_SOURCE | vendor::KAUFMANN_SOURCE, "r/v0/s") => {
            let signals = &data["signals"];
            if let Some(km) = signals["645"].as_str() {
                return u64::from_str_radix(km, 16).ok().map(|v| v as f64);
            }
            signals["114"]
                .as_str()
                .and_then(|m| u64::from_str_radix(m, 16).ok())
                .map(|v| v as f64 * 5.0 / 1000.0)
        }
        (vendor::AUTOPI_SOURCE | vendor::HASHDOG_SOURCE, _) => data["vehicle"]["signals"]
            .as_array()?
            .iter()
            .find(|s| s["name"] == "odometer")
            .and_then(|s| s["value"].as_f64()),
        (vendor::TESLA_SOURCE, vendor::TESLA_API_DATA_VERSION) => data["vehicle_state"]["odometer"]
            .as_f64()
            .map(|mi| mi * KM_PER_MI),
        (vendor::DEFAULT_ORACLE_SOURCE, _) => {
            default_signal(data, "powertrainTransmissionTravelledDistance").and_then(|v| v.as_f64())
        }
        _ => None,
    }
}

fn default_signal<'a>(data: &'a Value, name: &str) -> Option<&'a Value> {
    data["signals"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == name)
        .map(|s| &s["value"])
}

#[test]
fn odometer_never_decreases() {
    let fleet = Fleet::new(small_config(16, 4)).unwrap();
    let mut last: BTreeMap<String, f64> = BTreeMap::new();
    let mut checked = 0;
    for chunk in fleet.chunks(Duration::from_secs(6 * 3600)) {
        for e in chunk.iter().filter(|e| {
            e.header.subject != e.header.producer && e.header.event_type == "dimo.status"
        }) {
            let data: Value = serde_json::from_str(e.data.as_deref().unwrap()).unwrap();
            if let Some(km) = odometer_km(&e.header.source, &e.header.data_version, &data) {
                let prev = last.insert(e.header.subject.clone(), km);
                if let Some(prev) = prev {
                    assert!(km >= prev, "{}: odometer {prev} -> {km}", e.header.subject);
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 2000, "only {checked} odometer pairs");
}

fn haversine_m(a: (f64, f64), b: (f64, f64)) -> f64 {
    let (p1, p2) = (a.0.to_radians(), b.0.to_radians());
    let dl = (b.1 - a.1).to_radians();
    let h = ((p2 - p1) / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (dl / 2.0).sin().powi(2);
    2.0 * 6_371_000.0 * h.sqrt().asin()
}

struct Fix {
    t_ms: i64,
    ignition: bool,
    speed_ms: f64,
    odo_m: f64,
    pos: (f64, f64),
}

#[test]
fn gps_steps_match_speed_and_odometer() {
    let cfg = FleetConfig {
        vendor_mix: VendorMix::only(Vendor::Default),
        ..small_config(6, 3)
    };
    let fleet = Fleet::new(cfg).unwrap();
    let mut tracks: BTreeMap<String, Vec<Fix>> = BTreeMap::new();
    for e in all_events(&fleet, Duration::from_secs(86_400))
        .iter()
        .filter(|e| e.header.event_type == "dimo.status")
    {
        let data: Value = serde_json::from_str(e.data.as_deref().unwrap()).unwrap();
        let num = |name: &str| {
            default_signal(&data, name)
                .and_then(|v| v.as_f64())
                .unwrap()
        };
        let loc = default_signal(&data, "currentLocationCoordinates").unwrap();
        tracks
            .entry(e.header.subject.clone())
            .or_default()
            .push(Fix {
                t_ms: e.header.time.timestamp_millis(),
                ignition: num("isIgnitionOn") == 1.0,
                speed_ms: num("speed") / 3.6,
                odo_m: num("powertrainTransmissionTravelledDistance") * 1000.0,
                pos: (
                    loc["latitude"].as_f64().unwrap(),
                    loc["longitude"].as_f64().unwrap(),
                ),
            });
    }
    // Hardest manoeuvre is extreme braking at 7.5 m/s²; trapezoid error ≤ a·dt²/4.
    const MAX_ACCEL: f64 = 8.0;
    let mut checked = 0;
    for track in tracks.values() {
        for w in track.windows(2) {
            let (a, b) = (&w[0], &w[1]);
            let dt = (b.t_ms - a.t_ms) as f64 / 1000.0;
            if !a.ignition || dt > 15.0 {
                continue;
            }
            let gps = haversine_m(a.pos, b.pos);
            let odo = b.odo_m - a.odo_m;
            let by_speed = (a.speed_ms + b.speed_ms) / 2.0 * dt;
            let slack = MAX_ACCEL * dt * dt / 4.0 + 15.0;
            assert!(
                (odo - by_speed).abs() <= slack,
                "odometer {odo} m vs speed {by_speed} m over {dt} s"
            );
            // Noise ±2 m per fix and 0.01 km odometer rounding; turns shorten the chord.
            assert!(gps <= odo + 20.0, "gps {gps} m > odometer {odo} m");
            assert!(gps >= odo * 0.5 - 20.0, "gps {gps} m << odometer {odo} m");
            checked += 1;
        }
    }
    assert!(checked > 500, "only {checked} steps checked");
}

#[test]
fn energy_drains_while_driving_and_recovers_at_stops() {
    let fleet = Fleet::new(small_config(40, 14)).unwrap();
    let mut refuels = 0;
    let mut charges = 0;
    for info in fleet.vehicles() {
        let plan = fleet.vehicle_plan(info.index).unwrap();
        for trip in &plan.trips {
            assert!(
                trip.end_energy_pct <= trip.start_energy_pct + 1e-9,
                "energy grew on a trip"
            );
        }
        for stop in &plan.energy_stops {
            assert!(stop.end_level_pct > stop.start_level_pct);
            assert!(stop.end_level_pct <= 100.0 + 1e-9);
            assert!(stop.end > stop.start);
            match stop.kind {
                dq_fleet::EnergyStopKind::Refuel => refuels += 1,
                _ => charges += 1,
            }
            assert_eq!(
                stop.kind == dq_fleet::EnergyStopKind::Refuel,
                !info.powertrain.is_electric()
            );
        }
    }
    assert!(
        refuels > 0 && charges > 0,
        "refuels {refuels}, charges {charges}"
    );
}
