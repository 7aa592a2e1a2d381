use crate::{all_events, small_config};
use dq_cloudevent::did::{eip55, parse_address};
use dq_cloudevent::types::{EVENTS, FINGERPRINT, STATUS};
use dq_cloudevent::{Erc721Did, RawEvent};
use dq_fleet::vendor::{self, Vendor};
use dq_fleet::Fleet;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

fn is_eip55(address: &str) -> bool {
    parse_address(address)
        .map(|b| eip55(&b) == address)
        .unwrap_or(false)
}

fn assert_canonical_did(did: &str, chain: u64, contract: &str) {
    let parsed: Erc721Did = did.parse().unwrap_or_else(|e| panic!("{did}: {e}"));
    assert_eq!(parsed.to_string(), did, "not canonical");
    assert_eq!(parsed.chain_id, chain);
    assert_eq!(eip55(&parsed.contract), contract);
}

#[test]
fn every_vendor_appears_in_a_mixed_fleet_of_twelve() {
    let fleet = Fleet::new(small_config(12, 2)).unwrap();
    let vendors: BTreeSet<Vendor> = fleet.vehicles().iter().map(|v| v.vendor).collect();
    assert_eq!(vendors, Vendor::ALL.into_iter().collect());
    // And each one actually reports.
    let events = all_events(&fleet, Duration::from_secs(86_400));
    let sources: BTreeSet<&str> = events.iter().map(|e| e.header.source.as_str()).collect();
    for v in Vendor::ALL {
        assert!(sources.contains(v.source()), "{v:?} sent nothing");
    }
    let versions: BTreeSet<&str> = events
        .iter()
        .map(|e| e.header.data_version.as_str())
        .collect();
    for dv in [
        "",
        "r/v0/s",
        "r/v0/loc",
        "v2",
        vendor::TESLA_API_DATA_VERSION,
        vendor::TESLA_TELEMETRY_DATA_VERSION,
    ] {
        assert!(versions.contains(dv), "no {dv:?} payloads");
    }
}

#[test]
fn headers_are_din_canonical() {
    let fleet = Fleet::new(small_config(14, 2)).unwrap();
    let cfg = fleet.config().clone();
    let events = all_events(&fleet, Duration::from_secs(6 * 3600));
    let by_subject: BTreeMap<&str, &dq_fleet::VehicleInfo> = fleet
        .vehicles()
        .iter()
        .map(|v| (v.subject.as_str(), v))
        .collect();
    let by_producer: BTreeMap<&str, &dq_fleet::VehicleInfo> = fleet
        .vehicles()
        .iter()
        .map(|v| (v.producer.as_str(), v))
        .collect();
    for e in &events {
        let h = &e.header;
        assert_eq!(h.spec_version, "1.0");
        assert!(is_eip55(&h.source), "source {}", h.source);
        assert!(
            [STATUS, FINGERPRINT, EVENTS].contains(&h.event_type.as_str()),
            "{}",
            h.event_type
        );
        assert_eq!(h.id.len(), 27, "id {}", h.id);
        assert!(h.id.bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_eq!(
            h.time.timestamp_subsec_nanos() % 1_000_000,
            0,
            "time not ms-aligned: {}",
            h.time
        );
        assert_eq!(h.data_content_type, "application/json");
        assert!(e.data_base64.is_none());
        let data = e.data.as_deref().expect("inline data");
        serde_json::from_str::<serde_json::Value>(data)
            .unwrap_or_else(|err| panic!("invalid json {err}: {data}"));
        // Subject: the vehicle (or, for device rows, the producer itself).
        let vehicle = by_producer[h.producer.as_str()];
        assert_eq!(h.source, vehicle.source);
        if h.subject == h.producer {
            assert!(matches!(vehicle.vendor, Vendor::AutoPi | Vendor::HashDog));
            assert_eq!(h.event_type, STATUS);
        } else {
            assert_eq!(by_subject[h.subject.as_str()].index, vehicle.index);
            assert_canonical_did(&h.subject, cfg.chain_id, &cfg.vehicle_contract);
        }
        let device_contract = match vehicle.vendor.device_kind() {
            vendor::DeviceKind::Aftermarket => &cfg.aftermarket_contract,
            vendor::DeviceKind::Synthetic => &cfg.synthetic_contract,
        };
        assert_canonical_did(&h.producer, cfg.chain_id, device_contract);
        assert!(h.extras.is_empty());
        assert!(
            h.signature.is_empty() || (h.signature.len() == 132 && h.signature.starts_with("0x"))
        );
    }
}

/// Fan-out groups: rows that share an id and time must share the data and differ in type.
#[test]
fn fan_out_matches_each_ingest_module() {
    let fleet = Fleet::new(small_config(14, 2)).unwrap();
    let events = all_events(&fleet, Duration::from_secs(86_400));
    let mut groups: BTreeMap<(&str, &str), Vec<&RawEvent>> = BTreeMap::new();
    for e in &events {
        groups
            .entry((e.header.id.as_str(), e.header.source.as_str()))
            .or_default()
            .push(e);
    }
    for rows in groups.values() {
        let first = rows[0];
        let types: Vec<&str> = rows.iter().map(|r| r.header.event_type.as_str()).collect();
        for r in rows {
            assert_eq!(r.data, first.data);
            assert_eq!(r.header.time, first.header.time);
        }
        let unique: BTreeSet<&str> = types.iter().copied().collect();
        assert_eq!(
            unique.len(),
            types.len(),
            "duplicate type in one fan-out: {types:?}"
        );
        match first.header.source.as_str() {
            // AutoPi and HashDog mint one KSUID per header.
            vendor::AUTOPI_SOURCE | vendor::HASHDOG_SOURCE => assert_eq!(rows.len(), 1),
            // Ruptela: status (+ fingerprint) share an id; events have their own.
            vendor::RUPTELA_SOURCE | vendor::KAUFMANN_SOURCE => {
                assert!(
                    types == [STATUS] || types == [STATUS, FINGERPRINT] || types == [EVENTS],
                    "{types:?}"
                )
            }
            vendor::TESLA_SOURCE => assert_eq!(types, [STATUS, FINGERPRINT]),
            _ => assert!(types.contains(&STATUS)),
        }
    }
    // The AutoPi device copy exists for every vehicle row.
    let autopi: Vec<&RawEvent> = events
        .iter()
        .filter(|e| e.header.source == vendor::AUTOPI_SOURCE)
        .collect();
    let device_rows = autopi
        .iter()
        .filter(|e| e.header.subject == e.header.producer)
        .count();
    assert_eq!(device_rows * 2, autopi.len());
}
