//! Every vendor's generated payloads decode through `dq-decode` with zero module errors.

use crate::small_config;
use dq_cloudevent::did::parse_address;
use dq_decode::{decode_event, EventModule, Route, SignalModule, VehicleGate};
use dq_fleet::{Fleet, Vendor};
use std::collections::BTreeMap;
use std::time::Duration;

#[test]
fn every_vendor_decodes_without_errors() {
    let fleet = Fleet::new(small_config(14, 3)).unwrap();
    let cfg = fleet.config();
    let gate = VehicleGate {
        chain_id: cfg.chain_id,
        vehicle_contract: parse_address(&cfg.vehicle_contract).unwrap(),
    };
    // Decode "later", so nothing counts as a future timestamp.
    let now = fleet.end() + chrono::TimeDelta::days(1);
    let vendor_of: BTreeMap<&str, Vendor> = fleet
        .vehicles()
        .iter()
        .map(|v| (v.subject.as_str(), v.vendor))
        .collect();
    let mut signals: BTreeMap<Vendor, usize> = BTreeMap::new();
    let mut events: BTreeMap<Vendor, usize> = BTreeMap::new();
    let mut names: BTreeMap<Vendor, std::collections::BTreeSet<String>> = BTreeMap::new();
    let mut gated = 0;
    for chunk in fleet.chunks(Duration::from_secs(6 * 3600)) {
        for raw in &chunk {
            let out = decode_event(raw, &gate, now);
            assert!(
                out.errors.is_empty() && out.warnings.is_empty(),
                "{} {} {}: errors {:?} warnings {:?}\n{}",
                raw.header.source,
                raw.header.data_version,
                raw.header.event_type,
                out.errors,
                out.warnings,
                raw.data.as_deref().unwrap_or_default()
            );
            match out.route {
                Route::Gated(_) => {
                    // Only the AutoPi/HashDog device-level copies are not about a vehicle.
                    assert_eq!(raw.header.subject, raw.header.producer);
                    gated += 1;
                }
                Route::Signals(module) => {
                    let vendor = vendor_of[raw.header.subject.as_str()];
                    let expected = match vendor {
                        Vendor::Default => SignalModule::Default,
                        Vendor::Ruptela | Vendor::Kaufmann => SignalModule::Ruptela,
                        Vendor::AutoPi => SignalModule::AutoPi,
                        Vendor::HashDog => SignalModule::HashDog,
                        Vendor::TeslaApi | Vendor::TeslaTelemetry => SignalModule::Tesla,
                    };
                    assert_eq!(module, expected);
                    assert!(
                        !out.signals.is_empty(),
                        "no signals from {vendor:?}: {}",
                        raw.data.as_deref().unwrap_or_default()
                    );
                    *signals.entry(vendor).or_default() += out.signals.len();
                    names
                        .entry(vendor)
                        .or_default()
                        .extend(out.signals.iter().map(|s| s.name.to_string()));
                }
                Route::Events(module) => {
                    let vendor = vendor_of[raw.header.subject.as_str()];
                    let expected = if vendor == Vendor::Default {
                        EventModule::Default
                    } else {
                        EventModule::Ruptela
                    };
                    assert_eq!(module, expected);
                    *events.entry(vendor).or_default() += out.events.len();
                }
                Route::Skipped => {}
            }
        }
    }
    assert!(gated > 0);
    for vendor in Vendor::ALL {
        assert!(
            signals.get(&vendor).copied().unwrap_or(0) > 100,
            "{vendor:?}: {signals:?}"
        );
        let got = &names[&vendor];
        for core in ["speed", "currentLocationCoordinates"] {
            assert!(
                got.contains(core),
                "{vendor:?} never reports {core}: {got:?}"
            );
        }
        if vendor != Vendor::TeslaTelemetry {
            assert!(
                got.contains("powertrainTransmissionTravelledDistance"),
                "{vendor:?} has no odometer"
            );
        }
    }
    assert!(
        events.values().sum::<usize>() > 0,
        "no behaviour events decoded"
    );
}

/// Ruptela-protocol events (behaviour counters and Kaufmann engine block commands) decode to
/// exactly what the plan says happened.
#[test]
fn kaufmann_events_decode_to_the_plan() {
    let cfg = dq_fleet::FleetConfig {
        vendor_mix: dq_fleet::VendorMix::only(Vendor::Kaufmann),
        ..small_config(8, 21)
    };
    let fleet = Fleet::new(cfg).unwrap();
    let now = fleet.end() + chrono::TimeDelta::days(1);
    let mut planned: BTreeMap<&str, u64> = BTreeMap::new();
    for info in fleet.vehicles() {
        for event in fleet.vehicle_plan(info.index).unwrap().events {
            *planned.entry(event.kind.name()).or_default() += 1;
        }
    }
    let mut decoded: BTreeMap<&str, u64> = BTreeMap::new();
    for raw in fleet.chunks(Duration::from_secs(86_400)).flatten() {
        if raw.header.event_type != "dimo.events" {
            continue;
        }
        let out = decode_event(&raw, &VehicleGate::DISABLED, now);
        assert!(out.errors.is_empty(), "{:?}", out.errors);
        for event in out.events {
            // Counters arrive as {"counterValue":n}; block/unblock carry no metadata.
            let n = serde_json::from_str::<serde_json::Value>(&event.metadata)
                .ok()
                .and_then(|m| m["counterValue"].as_u64())
                .unwrap_or(1);
            *decoded.entry(event.name).or_default() += n;
        }
    }
    assert!(
        planned.contains_key("security.engineBlock"),
        "no engine block in the plan: {planned:?}"
    );
    assert_eq!(
        planned.get("security.engineBlock"),
        planned.get("security.engineUnblock")
    );
    assert_eq!(planned, decoded);
}
