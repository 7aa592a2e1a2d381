//! The data every case starts from: a fleet seeded by the din simulator into a fresh lake,
//! drained by the materializer with its production defaults, then one cycle of din's maintainer
//! (which in production runs every 15 minutes over dq's tables too: merged files, expired
//! snapshots), each phase timed.

use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use dq_dinsim::{SeedOptions, Writer};
use dq_fleet::{Fleet, FleetConfig};
use dq_lake::testing::{Backend, TestLake};
use dq_lake::Lake;
use dq_materialize::Materializer;

/// A seeded and materialized lake.
pub struct Dataset {
    /// `file` or `postgres`.
    pub catalog: &'static str,
    /// The lake (dropped with the dataset).
    pub lake: TestLake,
    /// Raw rows the simulator wrote (and the materializer read).
    pub raw_rows: u64,
    /// Decoded rows written.
    pub signal_rows: u64,
    /// Decoded event rows written.
    pub event_rows: u64,
    /// Time to seed.
    pub seed: Duration,
    /// Time to drain: first feed read to last cursor commit.
    pub materialize: Duration,
    /// Where the drain's time went.
    pub phases: dq_materialize::Phases,
    /// Data files of `lake.signals` the drain wrote, counted before din's maintenance.
    pub signal_files: u64,
    /// The process's peak resident memory during the drain (bytes; `None` off Linux): what a
    /// materializer's window needs, DuckDB's buffers included.
    pub drain_peak_rss: Option<u64>,
    /// Time of din's maintenance cycle after the drain.
    pub maintain: Duration,
}

/// The catalog name of `backend` as the reports print it.
pub fn catalog_name(backend: Backend) -> &'static str {
    match backend {
        Backend::File => "file",
        Backend::Postgres => "postgres",
    }
}

/// The backend a `--catalog(s)` name stands for.
pub fn backend(name: &str) -> anyhow::Result<Backend> {
    match name {
        "file" => Ok(Backend::File),
        "postgres" => Ok(Backend::Postgres),
        other => bail!("unknown catalog `{other}` (file, postgres)"),
    }
}

/// The fleet options of the query and all-cases runs.
#[derive(clap::Args)]
pub struct FleetArgs {
    /// Vehicles in the fleet.
    #[arg(long, default_value_t = 200)]
    vehicles: u32,
    /// Days of fleet time (the "month" query spans all of them).
    #[arg(long, default_value_t = 30)]
    days: u32,
    /// Status payloads per minute while a vehicle drives.
    #[arg(long, default_value_t = 3)]
    signals_per_minute: u32,
}

impl FleetArgs {
    /// The fleet they describe (the simulator's fixed seed and start).
    pub fn config(&self) -> FleetConfig {
        FleetConfig {
            vehicles: self.vehicles,
            days: self.days,
            signals_per_minute: self.signals_per_minute,
            ..FleetConfig::default()
        }
    }
}

/// Creates din's tables on `t` and writes `fleet` into them with the din simulator in 1-hour
/// bundles; `progress` hears the events written so far.
pub fn seed(
    rt: &tokio::runtime::Runtime,
    t: &TestLake,
    fleet: &FleetConfig,
    progress: impl FnMut(u64),
) -> anyhow::Result<dq_dinsim::SeedReport> {
    let lake = t.open()?;
    dq_lake::raw::ensure(&lake)?;
    dq_lake::progress::ensure(&lake)?;
    let opts = SeedOptions {
        fleet: fleet.clone(),
        ..SeedOptions::default()
    };
    Ok(rt.block_on(dq_dinsim::seed(&Writer::new(&lake, None), &opts, progress))?)
}

/// A fresh lake on `backend` opened with all cores and DuckDB's own memory default, as in
/// production.
fn production_lake(backend: Backend) -> TestLake {
    let mut t = TestLake::new(backend);
    t.config.threads = None;
    t.config.memory_limit = None;
    t
}

/// Seeds `fleet` into a fresh lake on `backend` (progress on stderr) and materializes it.
pub fn build(
    rt: &tokio::runtime::Runtime,
    backend: Backend,
    fleet: &FleetConfig,
) -> anyhow::Result<Dataset> {
    let catalog = catalog_name(backend);
    let t = production_lake(backend);

    let total = Fleet::new(fleet.clone())?.estimated_events();
    eprintln!(
        "[{catalog}] seeding {} vehicles × {} days × {}/min (~{total} events) …",
        fleet.vehicles, fleet.days, fleet.signals_per_minute
    );
    let started = Instant::now();
    let mut next_report = 0u64;
    let seeded = seed(rt, &t, fleet, |done| {
        if done >= next_report {
            eprintln!("[{catalog}]   {done} / ~{total} events");
            next_report = done + total / 10;
        }
    })?;
    let seed = started.elapsed();
    eprintln!(
        "[{catalog}] seeded {} raw rows in {:.1}s; materializing …",
        seeded.rows,
        seed.as_secs_f64()
    );

    reset_peak_rss();
    let started = Instant::now();
    let (mut raw_rows, mut signal_rows, mut event_rows) = (0, 0, 0);
    let mut phases = dq_materialize::Phases::default();
    {
        let m = Materializer::builder(t.open()?).emf(false).build()?;
        loop {
            let run = rt.block_on(m.drain(None, None))?;
            raw_rows += run.counts.raw_rows;
            signal_rows += run.counts.signal_rows;
            event_rows += run.counts.event_rows;
            phases.add(&run.counts.phases);
            if run.caught_up {
                break;
            }
        }
    }
    let materialize = started.elapsed();
    let drain_peak_rss = peak_rss();
    let signal_files = data_files(&t.open()?, "signals")?;
    ensure!(
        raw_rows == seeded.rows,
        "materializer read {raw_rows} raw rows, the simulator wrote {}",
        seeded.rows
    );
    eprintln!(
        "[{catalog}] materialized {raw_rows} raw rows → {signal_rows} signal rows in {:.1}s; \
         din maintenance cycle …",
        materialize.as_secs_f64()
    );
    let started = Instant::now();
    let maintained =
        dq_dinsim::maintain::cycle(&t.open()?, dq_dinsim::maintain::Retention::default())?;
    let maintain = started.elapsed();
    eprintln!(
        "[{catalog}] din maintenance: {} merge calls, {} merged groups in {:.1}s",
        maintained.merge_calls,
        maintained.merged,
        maintain.as_secs_f64()
    );
    Ok(Dataset {
        catalog,
        lake: t,
        raw_rows,
        signal_rows,
        event_rows,
        seed,
        materialize,
        phases,
        signal_files,
        drain_peak_rss,
        maintain,
    })
}

/// Resets the process's peak resident set (Linux: `5` into `clear_refs`), so [`peak_rss`]
/// reports the peak of what runs after it rather than of the seeding before.
fn reset_peak_rss() {
    if let Err(e) = std::fs::write("/proc/self/clear_refs", "5") {
        eprintln!("cannot reset the peak resident set ({e}); the drain's peak includes the seed's");
    }
}

/// The process's peak resident set since start or the last [`reset_peak_rss`] (`VmHWM`).
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(kib * 1024)
}

/// The data files of `lake.<table>` at the newest snapshot.
pub fn data_files(lake: &Lake, table: &str) -> anyhow::Result<u64> {
    let n: i64 = lake
        .conn()
        .query_row(
            "SELECT count(*) FROM ducklake_list_files('lake', ?)",
            [table],
            |r| r.get(0),
        )
        .with_context(|| format!("count the data files of lake.{table}"))?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Only din's `raw_events`, with Parquet row groups of `row_group_rows` rows: `fleet` seeded by
/// the din simulator into a fresh lake on `backend` after the table-scoped DuckLake option
/// `parquet_row_group_size` is set (din leaves DuckLake's 122,880 today; the option is din's to
/// set), then one cycle of din's maintainer, whose merges honour it too. Nothing is
/// materialized: the cloud-event reads need only `raw_events`. Returns the lake and the time
/// seeding and maintenance took.
pub fn raw_with_row_groups(
    rt: &tokio::runtime::Runtime,
    backend: Backend,
    fleet: &FleetConfig,
    row_group_rows: u32,
) -> anyhow::Result<(TestLake, Duration)> {
    let t = production_lake(backend);
    let started = Instant::now();
    {
        let lake = t.open()?;
        dq_lake::raw::ensure(&lake)?;
        // A u32 rendered by Rust: no parameter binding in CALL.
        lake.connect()?.execute_batch(&format!(
            "CALL lake.set_option('parquet_row_group_size', {row_group_rows}, \
             table_name => 'raw_events')"
        ))?;
    }
    seed(rt, &t, fleet, |_| {})?;
    dq_dinsim::maintain::cycle(&t.open()?, dq_dinsim::maintain::Retention::default())?;
    Ok((t, started.elapsed()))
}
