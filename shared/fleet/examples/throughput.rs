//! Measures generation speed: `cargo run --release -p dq-fleet --example throughput [vehicles] [days]`.

use dq_fleet::{Fleet, FleetConfig, Vendor};
use std::time::{Duration, Instant};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let vehicles = args.next().map(|s| s.parse()).transpose()?.unwrap_or(200);
    let days = args.next().map(|s| s.parse()).transpose()?.unwrap_or(7);
    let fleet = Fleet::new(FleetConfig {
        vehicles,
        days,
        ..FleetConfig::default()
    })?;
    let estimate = fleet.estimated_events();
    let started = Instant::now();
    let mut events = 0u64;
    let mut bytes = 0u64;
    let mut by_source: Vec<(&str, u64)> = Vendor::ALL.iter().map(|v| (v.source(), 0)).collect();
    by_source.dedup();
    for chunk in fleet.chunks(Duration::from_secs(3600)) {
        events += chunk.len() as u64;
        for e in &chunk {
            bytes += e.data.as_ref().map_or(0, |d| d.len() as u64);
            if let Some(slot) = by_source.iter_mut().find(|(s, _)| *s == e.header.source) {
                slot.1 += 1;
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!("{vehicles} vehicles x {days} days: {events} events (estimate {estimate}), {bytes} payload bytes");
    println!("{secs:.2} s, {:.0} events/s", events as f64 / secs);
    for (source, n) in by_source {
        println!("  {source}: {n}");
    }
    Ok(())
}
