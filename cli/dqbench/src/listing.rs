//! `dq-bench listing` (issue 19): the direct reads' file listing on a catalog of production's
//! size. 256 buckets × 400 days × a few tables is 10⁵–10⁶ data files; a read must not pay for
//! all of them after every commit.
//!
//! A fresh lake gets `lake.signals` with a few real files, then `--files` more data-file rows
//! registered straight in the catalog (copies of a real file's rows, one bucket-day each). The
//! listing reads catalog rows only, never the files, so these rows cost it what real files would;
//! a DuckLake scan of the table would fail on them, and none is run. Then, per sample, one real
//! commit (a new file) lands and the engine brings its listing forward, as the next read after a
//! commit does. Timed beside the whole load the listing replaced, DuckLake's own per-statement
//! listing (`ducklake_list_files`) at the same size, and what a new instance reads: the
//! table's head (its init) and then one bucket's files (its first request), or one day's files
//! of every bucket (a first cloud-event search without a type).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use dq_lake::files::{TableFiles, TableSpec};
use dq_lake::testing::{Backend, TestLake};
use dq_lake::{Newest, SharedLake, METADATA};
use dq_query::{Engine, ListingSource};
use serde_json::json;

use crate::query::{ms, percentile};
use crate::{dataset, report};

/// Options of `dq-bench listing`.
#[derive(clap::Args)]
pub struct Args {
    /// Catalogs to run on.
    #[arg(long, value_delimiter = ',', default_value = "postgres,file")]
    catalogs: Vec<String>,
    /// Data files registered in the catalog.
    #[arg(long, default_value_t = 100_000)]
    files: u64,
    /// Commits, each followed by a timed refresh.
    #[arg(long, default_value_t = 30)]
    commits: usize,
    /// Whole loads timed (each on a new engine).
    #[arg(long, default_value_t = 3)]
    loads: usize,
    /// Print the results but leave BENCHMARKS.md and BENCHMARKS.json alone (smoke runs).
    #[arg(long)]
    no_write: bool,
}

/// The goal of a refresh after one commit on PostgreSQL (issue 19).
const GOAL_MS: f64 = 5.0;

/// The figures of one catalog.
struct Figures {
    catalog: &'static str,
    files: usize,
    refresh: Vec<Duration>,
    load: Vec<Duration>,
    ducklake: Vec<Duration>,
    head: Vec<Duration>,
    bucket: Vec<Duration>,
    bucket_files: usize,
    day: Vec<Duration>,
    day_files: usize,
}

/// The bucket a new instance's first request reads: one of the 256 the registered files spread
/// over (~400 files each at 10⁵).
const BUCKET: &str = "7";

/// Runs the case on every catalog asked and writes the `listing` sections.
pub fn run(args: &Args) -> anyhow::Result<()> {
    ensure!(
        args.commits >= 1 && args.loads >= 1,
        "--commits and --loads must be at least 1"
    );
    let mut all = Vec::new();
    for name in &args.catalogs {
        all.push(measure(dataset::backend(name)?, args)?);
    }
    let figures = json!(all
        .iter()
        .map(|f| json!({
            "catalog": f.catalog,
            "data_files": f.files,
            "refresh_ms_p50": percentile(&f.refresh, 50.0),
            "refresh_ms_p95": percentile(&f.refresh, 95.0),
            "refresh_samples": f.refresh.len(),
            "load_ms_p50": percentile(&f.load, 50.0),
            "ducklake_list_files_ms_p50": percentile(&f.ducklake, 50.0),
            "head_ms_p50": percentile(&f.head, 50.0),
            "one_bucket_ms_p50": percentile(&f.bucket, 50.0),
            "one_bucket_files": f.bucket_files,
            "one_day_every_bucket_ms_p50": percentile(&f.day, 50.0),
            "one_day_every_bucket_files": f.day_files,
            "goal_ms": GOAL_MS,
            "machine": report::machine(),
        }))
        .collect::<Vec<_>>());
    report::publish(
        "listing",
        &render(&all),
        args.no_write,
        json!({ "listing": figures }),
    )
}

fn measure(backend: Backend, args: &Args) -> anyhow::Result<Figures> {
    let catalog = dataset::catalog_name(backend);
    let t = TestLake::new(backend);
    let lake = t.open()?;
    dq_tables::schema::ensure(&lake)?;
    commit(&lake, 0)?;
    eprintln!(
        "[{catalog}] registering {} data files in the catalog …",
        args.files
    );
    let started = Instant::now();
    register(&lake, backend, args.files)?;
    eprintln!("[{catalog}]   took {:.1}s", started.elapsed().as_secs_f64());
    let shared = Arc::new(SharedLake::new(lake));

    let mut load = Vec::new();
    let mut files = 0;
    for _ in 0..args.loads {
        let engine = Engine::on(Arc::clone(&shared));
        let report = signals(&engine, None)?;
        ensure!(
            report.source == ListingSource::Loaded && report.usable && report.complete,
            "{report:?}"
        );
        files = report.files;
        load.push(report.took);
    }
    let (mut head, mut bucket, mut bucket_files) = (Vec::new(), Vec::new(), 0);
    for _ in 0..args.loads {
        let engine = Engine::on(Arc::clone(&shared));
        let report = signals(&engine, Some(&[]))?;
        ensure!(
            report.source == ListingSource::Loaded && report.usable && !report.complete,
            "{report:?}"
        );
        head.push(report.took);
        let report = signals(&engine, Some(&[BUCKET.to_owned()]))?;
        ensure!(
            report.source == ListingSource::Extended && report.usable,
            "{report:?}"
        );
        bucket_files = report.files;
        bucket.push(report.took);
    }
    ensure!(
        bucket_files as u64 >= args.files / 256,
        "one bucket's listing holds {bucket_files} files"
    );
    let (day, day_files) = one_day(&shared, backend, args.loads)?;
    ensure!(
        day_files >= 256,
        "one day's listing holds {day_files} files"
    );
    ensure!(
        files as u64 > args.files,
        "the listing holds {files} files, {} were registered",
        args.files
    );

    let mut ducklake = Vec::new();
    {
        let (conn, _) = shared.connect()?;
        for _ in 0..args.loads {
            let started = Instant::now();
            let n: i64 = conn.query_row(
                "SELECT count(*) FROM ducklake_list_files('lake', 'signals', schema => 'main')",
                [],
                |r| r.get(0),
            )?;
            ducklake.push(started.elapsed());
            ensure!(
                n as usize == files,
                "DuckLake lists {n} files, the listing {files}"
            );
        }
    }

    eprintln!(
        "[{catalog}] {} commits, each followed by a refresh …",
        args.commits
    );
    let engine = Engine::on(Arc::clone(&shared));
    signals(&engine, None)?;
    let mut refresh = Vec::new();
    for i in 1..=args.commits {
        {
            let (conn, _) = shared.connect()?;
            commit_on(&conn, i)?;
        }
        let report = signals(&engine, None)?;
        ensure!(
            report.source == ListingSource::Refreshed && report.usable,
            "commit {i}: {report:?}"
        );
        ensure!(
            report.files == files + i,
            "commit {i}: {} files",
            report.files
        );
        refresh.push(report.took);
    }
    Ok(Figures {
        catalog,
        files,
        refresh,
        load,
        ducklake,
        head,
        bucket,
        bucket_files,
        day,
        day_files,
    })
}

/// The day of [`one_day`]: every bucket has a registered file of it.
const DAY: &str = "2024-06-01";

/// A read of every key over one day after the init's head, on a new listing each time: what a
/// cloud-event search without a type costs a new instance (timed on `lake.signals`, whose
/// registered files have every bucket on each day); the times and the files held.
fn one_day(
    shared: &Arc<SharedLake>,
    backend: Backend,
    loads: usize,
) -> anyhow::Result<(Vec<Duration>, usize)> {
    let postgres = backend == Backend::Postgres;
    let from = chrono::NaiveDate::parse_from_str(DAY, "%Y-%m-%d")?
        .and_hms_opt(0, 0, 0)
        .context("midnight")?
        .and_utc()
        .timestamp_micros();
    let window = (from, from + 86_400_000_000);
    let spec = TableSpec {
        name: "signals",
        partition: dq_tables::schema::TIME_PARTITION,
        columns: &dq_tables::schema::SIGNAL_COLUMNS,
    };
    let (conn, _) = shared.connect()?;
    let (mut took, mut files) = (Vec::new(), 0);
    for _ in 0..loads {
        let listings = TableFiles::new(spec, postgres);
        let snapshot = dq_lake::request_snapshot(&conn, &Newest::through_duckdb(postgres))?;
        listings.listing(&conn, snapshot, Some(&[]))?;
        let report = listings.listing_of_window(&conn, snapshot, window)?;
        ensure!(
            report.source == ListingSource::Extended && report.usable && !report.complete,
            "{report:?}"
        );
        files = report.files;
        took.push(report.took);
    }
    Ok((took, files))
}

/// The `signals` listing the engine holds after bringing it to the newest snapshot with the
/// files of `keys` (`None`: every bucket).
fn signals(engine: &Engine, keys: Option<&[String]>) -> anyhow::Result<dq_query::ListingReport> {
    engine
        .list_files(keys)?
        .into_iter()
        .find(|r| r.table == "signals")
        .context("no signals listing")
}

/// One commit of one new file: 100 rows of one vehicle (more than DuckLake inlines).
fn commit(lake: &dq_lake::Lake, i: usize) -> anyhow::Result<()> {
    commit_on(lake.conn(), i)
}

fn commit_on(conn: &duckdb::Connection, i: usize) -> anyhow::Result<()> {
    let subject = "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:1";
    let bucket = dq_cloudevent::subject_bucket(subject);
    conn.execute_batch(&format!(
        "INSERT INTO lake.signals (subject, subject_bucket, name, \"timestamp\", source, \
           producer, cloud_event_id, value_number, value_string, loc_lat, loc_lon, loc_hdop, \
           loc_heading) \
         SELECT '{subject}', {bucket}, 'speed', \
           '2026-01-01'::TIMESTAMPTZ + to_minutes({i}) + to_seconds(r), '0xs', 'p', \
           'bench-{i}-' || r, r, '', 0, 0, 0, 0 FROM range(100) t(r)"
    ))
    .with_context(|| format!("commit {i}"))
}

/// `n` more data-file rows in the catalog, copies of the newest real file's rows: file k in
/// bucket k mod 256, day k / 256 from 2024-01-01 (so ~400 days), under its hive path.
fn register(lake: &dq_lake::Lake, backend: Backend, n: u64) -> anyhow::Result<()> {
    let conn = lake.conn();
    let (template, table): (i64, i64) = conn.query_row(
        &format!(
            "SELECT max(f.data_file_id), any_value(f.table_id) FROM {METADATA}.ducklake_data_file f \
             JOIN {METADATA}.ducklake_table t USING (table_id) WHERE t.table_name = 'signals'"
        ),
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    // Ids from the newest snapshot's next_file_id on, which is then moved past them: DuckLake
    // hands out the ids after them, and a listing refresh, which takes every id at or above its
    // base snapshot's next_file_id as new, sees these rows as old.
    let (newest, base): (i64, i64) = conn.query_row(
        &format!(
            "SELECT snapshot_id, next_file_id FROM {METADATA}.ducklake_snapshot \
             ORDER BY snapshot_id DESC LIMIT 1"
        ),
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    match backend {
        Backend::Postgres => {
            let sql = format!(
                "INSERT INTO ducklake_data_file \
                   SELECT (jsonb_populate_record(f, jsonb_build_object( \
                     'data_file_id', {base} + g, \
                     'path', format('subject_bucket=%s/year=%s/month=%s/day=%s/bench-%s.parquet', \
                        g % 256, extract(year FROM d), extract(month FROM d), extract(day FROM d), g)))).* \
                   FROM ducklake_data_file f, generate_series(0, {n} - 1) g, \
                     LATERAL (SELECT DATE '2024-01-01' + (g / 256)::int AS d) dd \
                   WHERE f.data_file_id = {template}; \
                 INSERT INTO ducklake_file_partition_value \
                   SELECT (jsonb_populate_record(p, jsonb_build_object( \
                     'data_file_id', {base} + g, \
                     'partition_value', CASE p.partition_key_index \
                        WHEN 0 THEN (g % 256)::text \
                        WHEN 1 THEN extract(year FROM d)::text \
                        WHEN 2 THEN extract(month FROM d)::text \
                        ELSE extract(day FROM d)::text END))).* \
                   FROM ducklake_file_partition_value p, generate_series(0, {n} - 1) g, \
                     LATERAL (SELECT DATE '2024-01-01' + (g / 256)::int AS d) dd \
                   WHERE p.data_file_id = {template}; \
                 UPDATE ducklake_snapshot SET next_file_id = {base} + {n} \
                   WHERE snapshot_id = {newest}; \
                 ANALYZE ducklake_data_file; ANALYZE ducklake_file_partition_value; \
                 ANALYZE ducklake_delete_file"
            );
            conn.execute_batch(&format!(
                "CALL postgres_execute('{METADATA}', {})",
                dq_lake::quote(&sql)
            ))
            .context("register data files in the PostgreSQL catalog")?;
        }
        Backend::File => {
            conn.execute_batch(&format!(
                "INSERT INTO {METADATA}.ducklake_data_file \
                   SELECT f.* REPLACE ( \
                     {base} + g AS data_file_id, \
                     format('subject_bucket={{}}/year={{}}/month={{}}/day={{}}/bench-{{}}.parquet', \
                       g % 256, year(d), month(d), day(d), g) AS path) \
                   FROM {METADATA}.ducklake_data_file f, range({n}) t(g), \
                     LATERAL (SELECT DATE '2024-01-01' + (g // 256)::INTEGER AS d) dd \
                   WHERE f.data_file_id = {template}; \
                 INSERT INTO {METADATA}.ducklake_file_partition_value \
                   SELECT p.* REPLACE ( \
                     {base} + g AS data_file_id, \
                     CASE partition_key_index WHEN 0 THEN (g % 256)::VARCHAR \
                       WHEN 1 THEN year(d)::VARCHAR WHEN 2 THEN month(d)::VARCHAR \
                       ELSE day(d)::VARCHAR END AS partition_value) \
                   FROM {METADATA}.ducklake_file_partition_value p, range({n}) t(g), \
                     LATERAL (SELECT DATE '2024-01-01' + (g // 256)::INTEGER AS d) dd \
                   WHERE p.data_file_id = {template}; \
                 UPDATE {METADATA}.ducklake_snapshot SET next_file_id = {base} + {n} \
                   WHERE snapshot_id = {newest}"
            ))
            .context("register data files in the file catalog")?;
        }
    }
    let registered: i64 = conn.query_row(
        &format!(
            "SELECT count(*) FROM {METADATA}.ducklake_data_file \
             WHERE table_id = {table} AND data_file_id >= {base}"
        ),
        [],
        |r| r.get(0),
    )?;
    ensure!(
        registered as u64 == n,
        "registered {registered} of {n} data files"
    );
    Ok(())
}

fn render(all: &[Figures]) -> String {
    let mut out = String::from(
        "## File listing on a catalog of production's size\n\n\
         `make bench` (`dq-bench listing`): `lake.signals` with 100,000 more data files registered \
         in the catalog (one per bucket-day: 256 buckets × ~400 days; catalog rows only — the \
         listing reads no file; PostgreSQL's tables then analyzed, as autovacuum keeps a \
         production catalog). Then one real commit (a new file), and the next read's listing \
         is timed: **refresh** moves the cached listing forward by the catalog rows that changed \
         between its snapshot and the new one (on PostgreSQL in one statement run inside the \
         catalog; timed with every bucket's files held, the most a listing holds); **whole \
         load** reads every file row of the table; **DuckLake's own listing** \
         (`ducklake_list_files`) is the part of it DuckLake does for each statement it scans. A \
         new instance reads neither whole: its init reads the table's **head** (ids, paths, \
         partition specs, inlined rows' keys, files without the table's partition values) and \
         its first request **one bucket's files** (the vehicle's), each timed on a new \
         engine; a read of every key over a few days (a cloud-event search without a type) \
         reads **one day's files of every bucket** after the head instead of the whole table's, \
         timed the same way.\n\n\
         | catalog | data files | refresh after one commit p50 ms | p95 ms | samples | goal | \
         whole load p50 ms | DuckLake's own listing p50 ms | head p50 ms | one bucket p50 ms \
         (files) | one day of every bucket p50 ms (files) |\n\
         |---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|\n",
    );
    for f in all {
        let goal = if f.catalog == "postgres" {
            let met = percentile(&f.refresh, 50.0) <= GOAL_MS;
            format!("≤ {GOAL_MS} ms: {}", if met { "met" } else { "not met" })
        } else {
            "—".into()
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {goal} | {} | {} | {} | {} ({}) | {} ({}) |\n",
            f.catalog,
            f.files,
            ms(percentile(&f.refresh, 50.0)),
            ms(percentile(&f.refresh, 95.0)),
            f.refresh.len(),
            ms(percentile(&f.load, 50.0)),
            ms(percentile(&f.ducklake, 50.0)),
            ms(percentile(&f.head, 50.0)),
            ms(percentile(&f.bucket, 50.0)),
            f.bucket_files,
            ms(percentile(&f.day, 50.0)),
            f.day_files,
        ));
    }
    out.push_str(&format!("\nMeasured on {}.\n", report::machine()));
    out
}
