use crate::{all_events, small_config};
use dq_fleet::{Fleet, FleetConfig};
use std::time::Duration;

#[test]
fn same_seed_gives_identical_events() {
    let a = all_events(
        &Fleet::new(small_config(10, 3)).unwrap(),
        Duration::from_secs(3600),
    );
    let b = all_events(
        &Fleet::new(small_config(10, 3)).unwrap(),
        Duration::from_secs(3600),
    );
    assert!(a.len() > 1000, "only {} events", a.len());
    assert_eq!(a, b);
    let bytes = |events: &[dq_cloudevent::RawEvent]| -> Vec<u8> {
        events
            .iter()
            .flat_map(|e| format!("{:?}\n", e).into_bytes())
            .collect()
    };
    assert_eq!(bytes(&a), bytes(&b));
}

#[test]
fn chunk_size_does_not_change_the_stream() {
    let fleet = Fleet::new(small_config(8, 2)).unwrap();
    let hourly = all_events(&fleet, Duration::from_secs(3600));
    let odd = all_events(&fleet, Duration::from_millis(7 * 60_000 + 123));
    let whole = all_events(&fleet, Duration::from_secs(10 * 86_400));
    assert_eq!(hourly, odd);
    assert_eq!(hourly, whole);
}

#[test]
fn another_seed_gives_other_events() {
    let a = all_events(
        &Fleet::new(small_config(4, 1)).unwrap(),
        Duration::from_secs(86_400),
    );
    let b = all_events(
        &Fleet::new(FleetConfig {
            seed: 8,
            ..small_config(4, 1)
        })
        .unwrap(),
        Duration::from_secs(86_400),
    );
    assert_ne!(a, b);
}

#[test]
fn a_vehicle_does_not_depend_on_fleet_size() {
    let small = Fleet::new(small_config(9, 3)).unwrap();
    let large = Fleet::new(small_config(30, 3)).unwrap();
    assert_eq!(small.vehicles()[..], large.vehicles()[..9]);
    assert_eq!(small.vehicle_plan(5), large.vehicle_plan(5));
}

#[test]
fn chunks_are_time_ordered_windows() {
    let fleet = Fleet::new(small_config(12, 2)).unwrap();
    let step = Duration::from_secs(2 * 3600);
    let chunks = fleet.chunks(step);
    assert_eq!(chunks.len(), 24);
    let start = fleet.start();
    for (k, chunk) in chunks.enumerate() {
        let lo = start + chrono::TimeDelta::hours(2 * k as i64);
        let hi = lo + chrono::TimeDelta::hours(2);
        for w in chunk.windows(2) {
            assert!(w[0].header.time <= w[1].header.time);
        }
        for e in &chunk {
            assert!(
                e.header.time >= lo && e.header.time < hi,
                "{} outside [{lo}, {hi})",
                e.header.time
            );
        }
    }
}

#[test]
fn estimate_is_close() {
    let fleet = Fleet::new(small_config(20, 14)).unwrap();
    let actual = fleet
        .chunks(Duration::from_secs(86_400))
        .map(|c| c.len() as u64)
        .sum::<u64>() as f64;
    let estimate = fleet.estimated_events() as f64;
    let error = (estimate - actual).abs() / actual;
    assert!(error < 0.15, "estimate {estimate} vs actual {actual}");
}
