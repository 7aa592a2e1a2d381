//! `bench-shards` (issue 20, scale out): raw events/s of 1 and 2 materializer shards draining
//! the same fleet at once on one PostgreSQL catalog, each shard in its own thread with its own
//! DuckDB instance (as separate Lambda environments would be), production window and span
//! sizes. Beside each run: the window commits DuckLake refused because another shard's commit
//! landed first (each then ran again), and the CPU this process used per second of wall time,
//! which tells whether the run was bound by the cores or by the commit races.

use std::time::{Duration, Instant};

use anyhow::ensure;
use dq_lake::testing::{Backend, TestLake};
use dq_materialize::{Counts, Materializer, Shard};
use serde_json::json;

use crate::materializer::per_sec;
use crate::{dataset, materializer, report};

/// Options of the shards case.
#[derive(clap::Args)]
pub struct Args {
    /// About this many raw events (200 vehicles; the days are sized to reach it).
    #[arg(long, default_value_t = 300_000)]
    events: u64,
    /// Shard counts to run, each on its own freshly seeded lake.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    shards: Vec<u32>,
    /// Print the results but leave BENCHMARKS.md and BENCHMARKS.json alone (smoke runs).
    #[arg(long)]
    no_write: bool,
}

struct Run {
    shards: u32,
    raw_rows: u64,
    wall: Duration,
    cpu: Duration,
    counts: Counts,
    per_shard: Vec<(Shard, u64, Duration)>,
}

/// CPU time (user + system) of this process so far, from `/proc/self/stat` (Linux clock ticks
/// of 10 ms); zero where that file does not exist.
fn process_cpu() -> Duration {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return Duration::ZERO;
    };
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|v| v.parse::<u64>().ok()))
        .sum();
    Duration::from_millis(ticks * 10)
}

/// Runs every shard count and rewrites the `bench-shards` section.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let fleet = materializer::fleet_for(args.events)?;
    let mut runs = Vec::new();
    for &count in &args.shards {
        runs.push(measure(&fleet, count)?);
    }
    let base = runs
        .iter()
        .find(|r| r.shards == 1)
        .map(|r| per_sec(r.raw_rows, r.wall));
    let mut table = String::from(
        "| shards | raw events | wall s | events/s | vs 1 shard | windows | commits refused and re-run | \
         process CPU / wall | per shard: events, s |\n|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for r in &runs {
        let rate = per_sec(r.raw_rows, r.wall);
        let per_shard = r
            .per_shard
            .iter()
            .map(|(s, rows, took)| format!("{}: {rows}, {:.1}", s.index(), took.as_secs_f64()))
            .collect::<Vec<_>>()
            .join("; ");
        table.push_str(&format!(
            "| {} | {} | {:.1} | {:.0} | {} | {} | {} | {:.2} | {per_shard} |\n",
            r.shards,
            r.raw_rows,
            r.wall.as_secs_f64(),
            rate,
            base.map_or("—".into(), |b| format!("{:.2}×", rate / b)),
            r.counts.windows,
            r.counts.conflicts,
            r.cpu.as_secs_f64() / r.wall.as_secs_f64().max(1e-9),
        ));
    }
    let body = format!(
        "## Materializer shards\n\n`make bench-shards`: a {}-vehicle × {}-day fleet seeded by the din simulator \
         into a fresh PostgreSQL-catalog lake per run, drained by 1 and 2 shards at once \
         (`MATERIALIZER_SHARD_INDEX` / `_COUNT`; each shard a thread with its own DuckDB instance, \
         production defaults). \"Commits refused\" are window commits DuckLake 1.5.4 aborted because \
         another shard's commit landed during the transaction (a transaction that deletes from a table \
         conflicts with any concurrent insert into it, and every window rewrites its progress row and \
         rollup rows); each was run again on the new snapshot. \"Process CPU / wall\" counts this \
         process only (PostgreSQL's work is outside it). Measured on {}.\n\n{table}",
        fleet.vehicles,
        fleet.days,
        report::machine(),
    );
    let figures: Vec<_> = runs
        .iter()
        .map(|r| {
            json!({
                "shards": r.shards,
                "raw_events": r.raw_rows,
                "wall_seconds": r.wall.as_secs_f64(),
                "events_per_second": per_sec(r.raw_rows, r.wall),
                "windows": r.counts.windows,
                "commits_refused": r.counts.conflicts,
                "process_cpu_per_wall": r.cpu.as_secs_f64() / r.wall.as_secs_f64().max(1e-9),
            })
        })
        .collect();
    report::publish(
        "bench-shards",
        &body,
        args.no_write,
        json!({ "materializer_shards": figures }),
    )
}

fn measure(fleet: &dq_fleet::FleetConfig, count: u32) -> anyhow::Result<Run> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut t = TestLake::new(Backend::Postgres);
    // All cores and DuckDB's own memory default, as in production.
    t.config.threads = None;
    t.config.memory_limit = None;
    eprintln!(
        "[{count} shard(s)] seeding {} vehicles × {} days …",
        fleet.vehicles, fleet.days
    );
    let seeded = dataset::seed(&rt, &t, fleet, |_| {})?;
    // Every shard's materializer is built (tables, cursor rows) before the clock starts.
    let shards: Vec<Materializer> = (0..count)
        .map(|i| {
            Ok(Materializer::builder(t.open()?)
                .shard(Shard::new(i, count).map_err(anyhow::Error::msg)?)
                .emf(false)
                .build()?)
        })
        .collect::<anyhow::Result<_>>()?;
    eprintln!("[{count} shard(s)] draining {} raw rows …", seeded.rows);
    let cpu0 = process_cpu();
    let started = Instant::now();
    let workers: Vec<_> = shards
        .into_iter()
        .map(|m| {
            std::thread::spawn(move || -> anyhow::Result<(Shard, Counts, Duration)> {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                let began = Instant::now();
                let mut counts = Counts::default();
                loop {
                    let run = rt.block_on(m.drain(None, None))?;
                    counts.add(&run.counts);
                    if run.caught_up {
                        return Ok((m.shard(), counts, began.elapsed()));
                    }
                }
            })
        })
        .collect();
    let mut counts = Counts::default();
    let mut per_shard = Vec::new();
    for w in workers {
        let (shard, c, took) = w
            .join()
            .map_err(|_| anyhow::anyhow!("a shard thread panicked"))??;
        eprintln!(
            "[{count} shard(s)] {shard}: {} raw rows in {:.1}s, {} windows, {} commits refused",
            c.raw_rows,
            took.as_secs_f64(),
            c.windows,
            c.conflicts
        );
        per_shard.push((shard, c.raw_rows, took));
        counts.add(&c);
    }
    let wall = started.elapsed();
    let cpu = process_cpu().saturating_sub(cpu0);
    ensure!(
        counts.raw_rows == seeded.rows,
        "the shards read {} raw rows, the simulator wrote {}",
        counts.raw_rows,
        seeded.rows
    );
    Ok(Run {
        shards: count,
        raw_rows: counts.raw_rows,
        wall,
        cpu,
        counts,
        per_shard,
    })
}
