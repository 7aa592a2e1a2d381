//! `bench-materializer` (issue 4, acceptance 9): raw events/s end to end — change feed → decode →
//! Arrow write → commit with the cursor CAS — for a ~1M-event fleet, on the file catalog and on
//! PostgreSQL, beside two engine floors measured in the same run on the same lake:
//! - raw floor: `INSERT INTO … SELECT * FROM lake.raw_events` (DuckDB copying the same raw rows,
//!   no decoding), the most a writer of these rows could reach;
//! - decoded floor: `INSERT INTO … SELECT * FROM lake.signals` (writing the decoded rows alone);
//! - own-writer floor: the same decoded rows encoded by the materializer's own writer
//!   (`dq_materialize::own_writer`: split by partition, sorted by the table's sort key, Parquet
//!   by arrow-rs on every core) and written to local files, no DuckDB and no catalog — the
//!   windows' write before its registration;
//! - registration floor: those files (in hive paths, as the table's partitioning requires)
//!   registered with one `ducklake_add_data_files` call in one transaction into an empty copy of
//!   `lake.signals`, as a list of paths and as one glob, per file; with the number of files the
//!   drain wrote, what the registration would add to the own writer;
//!
//! and the decode-only rate of the same events (one thread, no I/O).

use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::Utc;
use dq_fleet::{Fleet, FleetConfig};
use dq_lake::testing::Backend;
use dq_lake::Lake;

use crate::{dataset, report};

/// Options of the materializer case.
#[derive(clap::Args)]
pub struct Args {
    /// About this many raw events (the fleet's days are sized to reach it).
    #[arg(long, default_value_t = 1_000_000)]
    events: u64,
    /// Catalogs to run on: file, postgres.
    #[arg(long, value_delimiter = ',', default_value = "file,postgres")]
    catalogs: Vec<String>,
}

struct Figures {
    catalog: &'static str,
    raw_rows: u64,
    seed: Duration,
    materialize: Duration,
    signal_rows: u64,
    event_rows: u64,
    raw_floor: Duration,
    decoded_floor: Duration,
    own_writer: OwnWriter,
    /// Data files of `lake.signals` the drain wrote (before din's maintenance merged them).
    signal_files: u64,
    /// The process's peak resident memory during the drain.
    drain_peak_rss: Option<u64>,
    decode_only: Duration,
    phases: dq_materialize::Phases,
}

/// Rows written in a time.
#[derive(Clone, Copy)]
struct Rate {
    rows: u64,
    took: Duration,
}

/// The own-writer floor: the write, and the registration of what it wrote.
struct OwnWriter {
    write: Rate,
    /// Files written (one per bucket and day of the rows).
    files: u64,
    /// One `ducklake_add_data_files` of the files as a list of paths, and its COMMIT.
    register_list: Registration,
    /// The same with one glob matching exactly those files.
    register_glob: Registration,
}

/// One registration, timed in two parts.
#[derive(Clone, Copy, Default)]
struct Registration {
    /// The `ducklake_add_data_files` call (it reads each file's footer for its statistics).
    call: Duration,
    /// Its COMMIT: the catalog rows of the files, which a window's COMMIT writes for the files
    /// of its INSERT too.
    commit: Duration,
}

impl OwnWriter {
    /// Per file: the call with a list of paths, the call with a glob, the list's COMMIT (ms).
    fn per_file_ms(&self) -> (f64, f64, f64) {
        let n = self.files.max(1) as f64;
        let ms = |d: Duration| d.as_secs_f64() * 1e3 / n;
        (
            ms(self.register_list.call),
            ms(self.register_glob.call),
            ms(self.register_list.commit),
        )
    }
}

/// `n` per second of `d`.
pub(crate) fn per_sec(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64().max(1e-9)
}

/// 200 vehicles (the production-shaped fleet), with as many days as reach `events`.
pub(crate) fn fleet_for(events: u64) -> anyhow::Result<FleetConfig> {
    let one_day = FleetConfig {
        vehicles: 200,
        days: 1,
        ..FleetConfig::default()
    };
    let per_day = Fleet::new(one_day.clone())?.estimated_events().max(1);
    let days = events.div_ceil(per_day).clamp(1, 366) as u32;
    Ok(FleetConfig { days, ..one_day })
}

/// Runs the case on every requested catalog and rewrites the `bench-materializer` section.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let fleet = fleet_for(args.events)?;
    let mut figures = Vec::new();
    for name in &args.catalogs {
        let backend = dataset::backend(name)?;
        figures.push(case(backend, &fleet)?);
    }
    let mut table = String::from(
        "| catalog | raw events | din simulator write events/s | materializer events/s | raw floor rows/s | vs raw floor | decoded rows | decoded-rows floor rows/s | own-writer floor rows/s (arrow-rs, all cores) | its registration ms per file: call with a list; with a glob; COMMIT | decode-only events/s (1 thread) | drain's peak resident memory |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|\n",
    );
    for f in &figures {
        let ours = per_sec(f.raw_rows, f.materialize);
        let floor = per_sec(f.raw_rows, f.raw_floor);
        let (list, glob, commit) = f.own_writer.per_file_ms();
        table.push_str(&format!(
            "| {} | {} | {:.0} | {:.0} | {:.0} | {:.2}× | {} | {:.0} | {:.0} | {:.2}; {:.2}; {:.2} | {:.0} | {} |\n",
            f.catalog,
            f.raw_rows,
            per_sec(f.raw_rows, f.seed),
            ours,
            floor,
            ours / floor,
            f.signal_rows + f.event_rows,
            per_sec(f.signal_rows, f.decoded_floor),
            per_sec(f.own_writer.write.rows, f.own_writer.write.took),
            list,
            glob,
            commit,
            per_sec(f.raw_rows, f.decode_only),
            f.drain_peak_rss
                .map_or_else(|| "—".to_string(), |b| format!("{} MiB", b >> 20)),
        ));
    }
    let mut breakdown = String::from(
        "| catalog | phase | seconds | share of the drain | events/s if it were the only phase | its floor in this run |\n|---|---|---:|---:|---:|---|\n",
    );
    for f in &figures {
        for (phase, us) in f.phases.named() {
            let secs = us as f64 / 1e6;
            let floor = match phase {
                "feed_read" => format!(
                    "raw floor (read and rewrite the raw rows) {:.1} s",
                    f.raw_floor.as_secs_f64()
                ),
                "decode" => format!(
                    "decode-only (1 thread) {:.1} s",
                    f.decode_only.as_secs_f64()
                ),
                "prepare" => format!(
                    "own-writer floor (arrow-rs Parquet, encoded and written) {:.1} s at its rate",
                    f.signal_rows as f64
                        / per_sec(f.own_writer.write.rows, f.own_writer.write.took).max(1e-9),
                ),
                "write" => {
                    let (list, glob, commit) = f.own_writer.per_file_ms();
                    let files = f.signal_files as f64 / 1e3;
                    format!(
                        "decoded-rows floor (one INSERT of the signal rows) {:.1} s; \
                         registration calls for the drain's {} signal files {:.1} s (as lists \
                         of paths; {:.1} s as globs) at the own-writer floor's cost per file, \
                         whose COMMIT ({:.1} s at that cost) stands for the catalog rows the \
                         windows' commits write for their files already",
                        f.decoded_floor.as_secs_f64(),
                        f.signal_files,
                        list * files,
                        glob * files,
                        commit * files,
                    )
                }
                _ => "—".into(),
            };
            // A phase that took no time shown to a tenth of a second has no meaningful rate.
            let alone = if secs < 0.05 {
                "—".to_string()
            } else {
                format!("{:.0}", f.raw_rows as f64 / secs)
            };
            breakdown.push_str(&format!(
                "| {} | {phase} | {secs:.1} | {:.0} % | {alone} | {floor} |\n",
                f.catalog,
                100.0 * secs / f.materialize.as_secs_f64().max(1e-9),
            ));
        }
    }
    let config = dq_materialize::Config::default();
    let defaults = format!(
        "spans of {} snapshots stretched while their raw rows fit one window, windows of {} raw rows \
         or {} MiB of payload, the next window read and decoded while the current one is written",
        config.max_snapshot_span,
        config.window_rows,
        config.window_bytes >> 20
    );
    let body = format!(
        "## Materializer throughput\n\n`make bench-materializer`: a {}-vehicle × {}-day fleet (about {} events, seeded by \
         the din simulator in 1-hour bundles), drained by the materializer with its production defaults ({defaults}), timed wall-clock from the first read of the change feed to the last cursor commit. \
         The floors run on the same lake in the same run: the raw floor copies the same raw rows with one \
         `INSERT … SELECT`, the decoded-rows floor writes the decoded signal rows with one `INSERT … SELECT`, \
         the own-writer floor writes up to {OWN_WRITER_ROWS} of them (read back first, untimed) with the \
         materializer's own writer (`dq_materialize::own_writer`: arrow-rs Parquet split by bucket and day, \
         sorted by subject and time, snappy, one file per partition, partitions spread over every core; the \
         drain's windows write their new signal rows this way and register them), and the registration floor registers \
         those files (in hive paths `subject_bucket=…/year=…/month=…/day=…/`, which DuckLake requires of a file \
         added to a partitioned table) into an empty copy of `lake.signals` with one `ducklake_add_data_files` \
         call and its COMMIT, once as a list of the paths and once as one glob matching exactly them, each part \
         timed; the call's cost per file, times the number of `lake.signals` files the drain wrote (counted \
         before din's maintenance), is what registration adds to the own writer (the COMMIT writes the catalog \
         rows of the files, which the windows' commits already write for the files of their INSERTs). \
         Goal: ≥ 40,000 events/s on 2 cores (issue 20). Measured on {}.\n\n{table}\n\
         Where the drain's time went (wall time per phase, summed over windows; \"of which rollup\" is \
         part of \"write\". A window read ahead is read, resolved, decoded and prepared (the write-key dedup, the rollup \
         delta, its Parquet files encoded) on a thread of its own while the window before it is \
         written, so those five phases overlap stage, write and commit, and \
         \"read_wait\" is what the drain waited for them; the rest of the drain is outside the windows: each \
         span's position and cursor reads, consumer-progress reports, connections):\n\n{breakdown}",
        fleet.vehicles,
        fleet.days,
        args.events,
        report::machine(),
    );
    print!("{body}");
    report::update_section(&report::benchmarks_md(), "bench-materializer", &body)?;
    println!("updated {}", report::benchmarks_md().display());
    Ok(())
}

fn case(backend: Backend, fleet: &FleetConfig) -> anyhow::Result<Figures> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let data = dataset::build(&rt, backend, fleet)?;
    let catalog = data.catalog;
    let lake = data.lake.open()?;
    eprintln!("[{catalog}] floors …");
    let raw_floor = copy_time(&lake, "raw_events", "bench_floor_raw")?;
    let decoded_floor = copy_time(&lake, "signals", "bench_floor_signals")?;
    let own_writer = own_writer_time(&lake)?;
    let decode_only = decode_time(&rt, &lake)?;
    eprintln!(
        "[{catalog}] materializer {:.0} events/s, raw floor {:.0} rows/s",
        per_sec(data.raw_rows, data.materialize),
        per_sec(data.raw_rows, raw_floor)
    );
    Ok(Figures {
        catalog,
        raw_rows: data.raw_rows,
        seed: data.seed,
        materialize: data.materialize,
        signal_rows: data.signal_rows,
        event_rows: data.event_rows,
        raw_floor,
        decoded_floor,
        own_writer,
        signal_files: data.signal_files,
        drain_peak_rss: data.drain_peak_rss,
        decode_only,
        phases: data.phases,
    })
}

/// Decoded rows the own-writer floor writes (its rate is the floor; bounded for memory).
const OWN_WRITER_ROWS: u64 = 3_000_000;

/// The own-writer floor (module docs): the first [`OWN_WRITER_ROWS`] rows of `lake.signals` read
/// back as decoded rows (untimed), then timed: encoded by the materializer's own writer
/// (`dq_materialize::own_writer::encode`: one snappy Parquet file per `subject_bucket` and UTC
/// day, sorted by `subject, "timestamp"`, on every core) and written into their hive paths.
/// Then, timed apart, the registration of those files ([`register_time`]).
fn own_writer_time(lake: &Lake) -> anyhow::Result<OwnWriter> {
    let rows = signal_rows(lake)?;
    let dir = tempfile::tempdir()?;
    let started = Instant::now();
    let all: Vec<u32> = (0..rows.len() as u32).collect();
    let encoded = dq_materialize::own_writer::encode(&rows, &all)?;
    let mut paths = Vec::with_capacity(encoded.len());
    for file in encoded {
        let path = dir.path().join(&file.relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, &file.bytes)?;
        paths.push(path.to_string_lossy().into_owned());
    }
    let write = Rate {
        rows: rows.len() as u64,
        took: started.elapsed(),
    };
    let files = paths.len() as u64;
    let (register_list, register_glob) = register_time(lake, dir.path(), &paths, write.rows)?;
    Ok(OwnWriter {
        write,
        files,
        register_list,
        register_glob,
    })
}

/// The first [`OWN_WRITER_ROWS`] rows of `lake.signals` as decoded rows, their repeated strings
/// shared as decode shares them.
fn signal_rows(lake: &Lake) -> anyhow::Result<Vec<dq_decode::rows::SignalRow>> {
    use duckdb::arrow::array::{Array, AsArray, Float64Array, Int32Array};
    use duckdb::arrow::datatypes::TimestampMicrosecondType;
    use std::collections::HashMap;
    use std::sync::Arc;

    let conn = lake.connect()?;
    let mut stmt = conn.prepare(&format!(
        "SELECT * FROM lake.signals LIMIT {OWN_WRITER_ROWS}"
    ))?;
    let mut shared: HashMap<String, Arc<str>> = HashMap::new();
    let mut intern = |s: &str| -> Arc<str> {
        shared
            .entry(s.to_owned())
            .or_insert_with(|| Arc::from(s))
            .clone()
    };
    let mut rows = Vec::new();
    for batch in stmt.query_arrow([])? {
        let col = |name: &str| {
            batch
                .column_by_name(name)
                .cloned()
                .with_context(|| format!("lake.signals has no {name}"))
        };
        let text = |name: &str| -> anyhow::Result<Vec<String>> {
            Ok(col(name)?
                .as_string_opt::<i32>()
                .with_context(|| format!("{name} is not a string column"))?
                .iter()
                .map(|v| v.unwrap_or_default().to_owned())
                .collect())
        };
        let float = |name: &str| -> anyhow::Result<Float64Array> {
            col(name)?
                .as_any()
                .downcast_ref::<Float64Array>()
                .cloned()
                .with_context(|| format!("{name} is not a DOUBLE column"))
        };
        let (subject, name, source, producer, ceid, string) = (
            text("subject")?,
            text("name")?,
            text("source")?,
            text("producer")?,
            text("cloud_event_id")?,
            text("value_string")?,
        );
        let bucket = col("subject_bucket")?;
        let bucket = bucket
            .as_any()
            .downcast_ref::<Int32Array>()
            .context("subject_bucket is not an INTEGER column")?;
        let ts = col("timestamp")?;
        let ts = ts
            .as_primitive_opt::<TimestampMicrosecondType>()
            .context("timestamp is not a µs timestamp column")?;
        let (num, lat, lon, hdop, heading) = (
            float("value_number")?,
            float("loc_lat")?,
            float("loc_lon")?,
            float("loc_hdop")?,
            float("loc_heading")?,
        );
        for i in 0..batch.num_rows() {
            rows.push(dq_decode::rows::SignalRow {
                subject: intern(&subject[i]),
                subject_bucket: bucket.value(i),
                name: name[i].clone().into(),
                timestamp: chrono::DateTime::from_timestamp_micros(ts.value(i))
                    .context("timestamp out of range")?,
                source: intern(&source[i]),
                producer: intern(&producer[i]),
                cloud_event_id: intern(&ceid[i]),
                value_number: num.value(i),
                value_string: string[i].clone(),
                loc_lat: lat.value(i),
                loc_lon: lon.value(i),
                loc_hdop: hdop.value(i),
                loc_heading: heading.value(i),
            });
        }
    }
    Ok(rows)
}

/// Registers the Parquet files at `paths`, all under `dir` and `rows` rows in all, into empty
/// copies of `lake.signals`, one `ducklake_add_data_files` call and COMMIT each: the paths as a
/// list, then one glob of `dir`. Each copy must then hold every row, or the floor did not
/// register what it wrote.
fn register_time(
    lake: &Lake,
    dir: &std::path::Path,
    paths: &[String],
    rows: u64,
) -> anyhow::Result<(Registration, Registration)> {
    let conn = lake.connect()?;
    let mut took = Vec::new();
    for (table, target) in [
        ("bench_floor_add_list", None),
        (
            "bench_floor_add_glob",
            Some(format!("{}/**/*.parquet", dir.display())),
        ),
    ] {
        create_like(lake, &conn, "signals", table)?;
        // duckdb-rs binds no list parameter: the paths (the floor's own) are quoted literals.
        let files = match &target {
            Some(glob) => dq_lake::quote(glob),
            None => format!(
                "[{}]",
                paths
                    .iter()
                    .map(|p| dq_lake::quote(p))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        conn.execute_batch("BEGIN")?;
        let started = Instant::now();
        conn.execute_batch(&format!(
            "CALL ducklake_add_data_files('lake', '{table}', {files})"
        ))
        .with_context(|| format!("register the own writer's files into lake.{table}"))?;
        let call = started.elapsed();
        let started = Instant::now();
        conn.execute_batch("COMMIT")?;
        took.push(Registration {
            call,
            commit: started.elapsed(),
        });
        let n: i64 = conn.query_row(&format!("SELECT count(*) FROM lake.{table}"), [], |r| {
            r.get(0)
        })?;
        anyhow::ensure!(
            u64::try_from(n).ok() == Some(rows),
            "lake.{table} holds {n} rows after the registration, the own writer wrote {rows}"
        );
        conn.execute_batch(&format!("DROP TABLE lake.{table}"))?;
    }
    Ok((took[0], took[1]))
}

/// Times one `INSERT INTO lake.<to> SELECT * FROM lake.<from>` into an empty copy of `from` with
/// the same partitioning and sort order (read back from the catalog), so the floor writes the
/// same files the real path writes.
pub(crate) fn copy_time(lake: &Lake, from: &str, to: &str) -> anyhow::Result<Duration> {
    let conn = lake.connect()?;
    create_like(lake, &conn, from, to)?;
    let started = Instant::now();
    conn.execute_batch(&format!("INSERT INTO lake.{to} SELECT * FROM lake.{from}"))
        .with_context(|| format!("copy lake.{from}"))?;
    let took = started.elapsed();
    conn.execute_batch(&format!("DROP TABLE lake.{to}"))?;
    Ok(took)
}

/// Creates `lake.<to>`, empty, with the columns, partitioning and sort order of `lake.<from>`
/// (read back from the catalog).
fn create_like(lake: &Lake, conn: &duckdb::Connection, from: &str, to: &str) -> anyhow::Result<()> {
    let layout = dq_lake::raw::table_layout(lake, from)?;
    let mut ddl = vec![format!(
        "CREATE TABLE lake.{to} AS SELECT * FROM lake.{from} LIMIT 0"
    )];
    if !layout.partition.is_empty() {
        let keys: Vec<String> = layout
            .partition
            .iter()
            .map(|(col, transform)| match transform.as_str() {
                "identity" => format!("\"{col}\""),
                t => format!("{t}(\"{col}\")"),
            })
            .collect();
        ddl.push(format!(
            "ALTER TABLE lake.{to} SET PARTITIONED BY ({})",
            keys.join(", ")
        ));
    }
    if !layout.sort.is_empty() {
        let keys: Vec<String> = layout
            .sort
            .iter()
            .map(|(e, d)| format!("{e} {d}"))
            .collect();
        ddl.push(format!(
            "ALTER TABLE lake.{to} SET SORTED BY ({})",
            keys.join(", ")
        ));
    }
    conn.execute_batch(&ddl.join(";\n"))
        .with_context(|| format!("create lake.{to} like lake.{from}"))?;
    Ok(())
}

/// Decodes every raw row once, timing only the decoder (the rows are read and resolved first).
/// Decoded in chunks whose output is dropped at once: a 2M-event fleet decodes to ~40M rows,
/// more than the memory of the machine if kept.
pub(crate) fn decode_time(rt: &tokio::runtime::Runtime, lake: &Lake) -> anyhow::Result<Duration> {
    const CHUNK: usize = 50_000;
    let resolved = dq_materialize::testing::all_raw_rows(rt, lake, None);
    let now = Utc::now();
    let mut took = Duration::ZERO;
    for chunk in resolved.events.chunks(CHUNK) {
        let started = Instant::now();
        let out = dq_decode::decode_batch_on(chunk, &dq_decode::VehicleGate::DISABLED, now, 1);
        took += started.elapsed();
        std::hint::black_box(out);
    }
    Ok(took)
}
