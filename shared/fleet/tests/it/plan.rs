use crate::{all_events, small_config};
use chrono::TimeDelta;
use dq_fleet::{Fleet, VehicleEventKind};
use std::collections::BTreeMap;
use std::time::Duration;

#[test]
fn trips_are_ordered_and_continuous() {
    let fleet = Fleet::new(small_config(20, 10)).unwrap();
    assert!(fleet.vehicle_plan(20).is_none());
    let mut total_trips = 0;
    for info in fleet.vehicles() {
        let plan = fleet.vehicle_plan(info.index).unwrap();
        assert_eq!(plan.index, info.index);
        for trip in &plan.trips {
            assert!(trip.start >= fleet.start() && trip.end <= fleet.end());
            assert!(trip.end - trip.start >= TimeDelta::minutes(2));
            assert!(
                trip.distance_km > 0.0 && trip.max_speed_kmh > 5.0 && trip.max_speed_kmh < 165.0
            );
            assert!(
                (trip.end_odometer_km - trip.start_odometer_km - trip.distance_km).abs() < 1e-6
            );
        }
        for w in plan.trips.windows(2) {
            assert!(w[1].start >= w[0].end + TimeDelta::minutes(20));
            assert_eq!(w[1].start_odometer_km, w[0].end_odometer_km);
            assert_eq!(w[1].start_location, w[0].end_location);
        }
        for stop in &plan.energy_stops {
            let during_trip = plan
                .trips
                .iter()
                .any(|t| stop.start < t.end && t.start < stop.end);
            assert!(!during_trip, "energy stop overlaps a trip");
        }
        for ep in &plan.dtc_episodes {
            assert!(!ep.codes.is_empty());
            assert!(ep.end.is_none_or(|end| end > ep.start));
        }
        total_trips += plan.trips.len();
    }
    assert!(total_trips > 20 * 10, "{total_trips} trips");
}

#[test]
fn default_events_match_the_plan() {
    let cfg = dq_fleet::FleetConfig {
        vendor_mix: dq_fleet::VendorMix::only(dq_fleet::Vendor::Default),
        ..small_config(12, 7)
    };
    let fleet = Fleet::new(cfg).unwrap();
    let mut planned: BTreeMap<String, Vec<(String, i64)>> = BTreeMap::new();
    for info in fleet.vehicles() {
        let plan = fleet.vehicle_plan(info.index).unwrap();
        let list = plan
            .events
            .iter()
            .filter(|e| {
                e.kind != VehicleEventKind::EngineBlock && e.kind != VehicleEventKind::EngineUnblock
            })
            .map(|e| (e.kind.name().to_string(), e.time.timestamp_millis()))
            .collect();
        planned.insert(info.subject.clone(), list);
    }
    let mut sent: BTreeMap<String, Vec<(String, i64)>> = BTreeMap::new();
    for e in all_events(&fleet, Duration::from_secs(86_400))
        .iter()
        .filter(|e| e.header.event_type == "dimo.events")
    {
        let data: serde_json::Value = serde_json::from_str(e.data.as_deref().unwrap()).unwrap();
        for ev in data["events"].as_array().unwrap() {
            let t =
                chrono::DateTime::parse_from_rfc3339(ev["timestamp"].as_str().unwrap()).unwrap();
            let name = ev["name"].as_str().unwrap().to_string();
            sent.entry(e.header.subject.clone())
                .or_default()
                .push((name, t.timestamp_millis()));
        }
    }
    let total: usize = planned.values().map(Vec::len).sum();
    assert!(total > 5, "too few events to compare: {total}");
    for (subject, list) in &planned {
        assert_eq!(
            sent.get(subject).cloned().unwrap_or_default(),
            *list,
            "{subject}"
        );
    }
}
