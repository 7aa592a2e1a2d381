//! Acceptance 3: the real `materializer` binary is SIGKILLed at random points, at least 25 times,
//! while the din simulator keeps writing (duplicates, bisected bundles, late arrivals, tombstones,
//! blobs). After draining, `audit` is clean and the decoded tables hold exactly the decoder's
//! output for every decodable event — nothing lost, nothing twice.
//!
//! PostgreSQL catalog only: a file catalog cannot be opened by two processes at once, so din and
//! the materializer could not run side by side on it.
//!
//! `DQ_CHAOS_KILLS` (default 25) and `DQ_CHAOS_SEED` (default: time-based, printed) tune the run;
//! `make chaos` runs a long variant.
//!
//! Issue 20: the same chaos on 1, 2 and 4 shards (`MATERIALIZER_SHARD_INDEX` / `_COUNT`) running
//! at once on one catalog, a random shard killed and restarted each time: together they equal
//! the single-writer oracle. Both tests report their figures (`dq_testkit::report_figures`,
//! RELIABILITY.md).

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dq_blob::{BlobConfig, BlobStore};
use dq_dinsim::{SeedOptions, Writer};
use dq_fleet::FleetConfig;
use dq_lake::testing::{Backend, TestLake};
use dq_materialize::testing::{expected, stored_events, stored_signals};
use rand::{Rng, SeedableRng};
use serde_json::Value;

use crate::cursor;

const BIN: &str = env!("CARGO_BIN_EXE_materializer");

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The binary's environment for this lake: small windows and spans so a pass has many commit
/// points to die at.
fn command(t: &TestLake, blob_dir: &std::path::Path, args: &[&str]) -> Command {
    shard_command(t, blob_dir, args, None)
}

/// [`command`] for shard `index` of `count`, when given.
fn shard_command(
    t: &TestLake,
    blob_dir: &std::path::Path,
    args: &[&str],
    shard: Option<(u32, u32)>,
) -> Command {
    let mut cmd = Command::new(BIN);
    if let Some((index, count)) = shard {
        cmd.env("MATERIALIZER_SHARD_INDEX", index.to_string())
            .env("MATERIALIZER_SHARD_COUNT", count.to_string());
    }
    cmd.args(args)
        .env("DUCKLAKE_CATALOG_DSN", t.config.catalog.uri())
        .env(
            "DUCKLAKE_DATA_PATH",
            t.config.data_path.as_deref().expect("test lake data path"),
        )
        .env("DUCKDB_EXTENSION_DIR", &t.config.extension_dir)
        .env("DUCKDB_THREADS", "1")
        .env("BLOB_BUCKET", blob_dir)
        .env("MATERIALIZER_MAX_SNAPSHOT_SPAN", "3")
        .env("MATERIALIZER_WINDOW_ROWS", "150")
        .env("MATERIALIZER_POLL_INTERVAL", "20ms")
        .env("MATERIALIZER_EMF", "false")
        .env("RUST_LOG", "warn")
        .env_remove("AWS_LAMBDA_RUNTIME_API")
        .env_remove("MATERIALIZER_LEASE_TABLE")
        .stdin(Stdio::null());
    cmd
}

/// `DQ_CHAOS_SEED`, or the time (printed by the tests' figures, so a run can be replayed).
fn chaos_seed() -> u64 {
    env_or(
        "DQ_CHAOS_SEED",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
}

/// Starts `cmd` with its output discarded.
fn spawn_quiet(mut cmd: Command) -> Child {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn materializer")
}

fn kill9(child: &mut Child) {
    // SIGKILL: no destructor, no rollback, no lease release runs.
    child.kill().expect("SIGKILL materializer");
    child.wait().expect("reap materializer");
}

/// The pause after each of din's bundles that keeps it writing through `kills` kills
/// `mean_interval_ms` apart: the simulated day is about 50 bundles, so 40 pauses cover the kill
/// phase with room to spare whatever the kill count (`make chaos` runs 200).
fn din_pace(kills: usize, mean_interval_ms: u64) -> Duration {
    let kills = u64::try_from(kills).unwrap_or(u64::MAX);
    Duration::from_millis((kills.saturating_mul(mean_interval_ms) / 40).max(150))
}

/// din's simulator in its own thread, sleeping `pace` after every bundle: `done` turns true
/// when it has written everything.
fn start_din(
    t: &TestLake,
    blob_dir: &std::path::Path,
    vehicles: u32,
    pace: Duration,
) -> (
    Arc<AtomicBool>,
    std::thread::JoinHandle<dq_dinsim::SeedReport>,
) {
    let done = Arc::new(AtomicBool::new(false));
    let config = t.config.clone();
    let blob_dir = blob_dir.to_path_buf();
    let finished = Arc::clone(&done);
    let writer = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let lake = dq_lake::Lake::open(config).unwrap();
        let blobs = rt
            .block_on(BlobStore::open(&BlobConfig::local(&blob_dir)))
            .unwrap();
        let writer = Writer::new(&lake, Some(&blobs)).with_threshold(1536);
        let opts = SeedOptions {
            fleet: FleetConfig {
                vehicles,
                days: 1,
                ..FleetConfig::default()
            },
            bundle_window: Duration::from_secs(1800),
            duplicate_every: 4,
            split_every: 5,
            late_every: 13,
            tombstone_every: 25,
        };
        let report = rt
            .block_on(dq_dinsim::seed(&writer, &opts, |_| {
                std::thread::sleep(pace)
            }))
            .unwrap();
        finished.store(true, Ordering::SeqCst);
        report
    });
    (done, writer)
}

/// Rows of `want` missing from `got` and rows of `got` beyond `want`, as multisets.
fn lost_and_duplicated<T: std::fmt::Debug>(want: &[T], got: &[T]) -> (u64, u64) {
    let mut count: std::collections::HashMap<String, i64> = std::collections::HashMap::new();
    for r in want {
        *count.entry(format!("{r:?}")).or_default() += 1;
    }
    for r in got {
        *count.entry(format!("{r:?}")).or_default() -= 1;
    }
    count.values().fold((0, 0), |(lost, dup), &c| {
        (
            lost + c.max(0).unsigned_abs(),
            dup + c.min(0).unsigned_abs(),
        )
    })
}

/// Drains with the binary (`--once` for `shard`), audits, and compares the decoded tables
/// with the decoder's output for every decodable event. Returns the rows lost and duplicated
/// (both zero, or the assertions fail) and the audit's verdict.
fn assert_drained_equal_oracle(
    t: &TestLake,
    blob_dir: &std::path::Path,
    shards: &[Option<(u32, u32)>],
) -> (u64, u64, bool) {
    for shard in shards {
        let drained = run_json(shard_command(t, blob_dir, &["--once"], *shard), "drain");
        assert_eq!(drained["caught_up"], true, "{shard:?}: {drained}");
    }
    let audit = run_json(command(t, blob_dir, &["--action", "audit"]), "audit");
    assert_eq!(audit["clean"], true, "{audit}");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let lake = t.open().unwrap();
    let blobs = Arc::new(
        rt.block_on(BlobStore::open(&BlobConfig::local(blob_dir)))
            .unwrap(),
    );
    let (want_signals, want_events) = expected(&rt, &lake, Some(&blobs));
    let (got_signals, got_events) = (stored_signals(&lake), stored_events(&lake));
    let (lost_signals, dup_signals) = lost_and_duplicated(&want_signals, &got_signals);
    let (lost_events, dup_events) = lost_and_duplicated(&want_events, &got_events);
    assert!(!want_signals.is_empty());
    assert_eq!(got_signals.len(), want_signals.len(), "signal rows");
    assert!(got_signals == want_signals, "signal rows differ");
    assert_eq!(got_events.len(), want_events.len(), "event rows");
    assert!(got_events == want_events, "event rows differ");
    (
        lost_signals + lost_events,
        dup_signals + dup_events,
        audit["clean"] == true,
    )
}

fn run_json(mut cmd: Command, what: &str) -> Value {
    let out = cmd.output().expect("run materializer");
    assert!(
        out.status.success(),
        "{what} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{what}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn sigkill_at_random_points_loses_and_duplicates_nothing() {
    let kills: usize = env_or("DQ_CHAOS_KILLS", 25);
    let seed = chaos_seed();
    eprintln!("chaos: {kills} kills, DQ_CHAOS_SEED={seed}");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);

    let t = TestLake::new(Backend::Postgres);
    let blob_dir = t.path("blobs");
    dq_dinsim::testing::open_din_lake(&t);

    // din: paced so that it keeps writing through the whole kill phase.
    let (done, writer) = start_din(&t, &blob_dir, 4, din_pace(kills, 1_400));

    let observer = t.open().unwrap();
    let started = Instant::now();
    let mut kills_during_writes = 0;
    let mut cursors = vec![cursor(&observer)];
    for _ in 0..kills {
        let mut child = spawn_quiet(command(&t, &blob_dir, &[]));
        std::thread::sleep(Duration::from_millis(rng.gen_range(300..2500)));
        if !done.load(Ordering::SeqCst) {
            kills_during_writes += 1;
        }
        kill9(&mut child);
        cursors.push(cursor(&observer));
    }
    let report = writer.join().expect("din simulator thread");
    finish_chaos(
        &t,
        &blob_dir,
        Chaos {
            figure: "materializer-chaos",
            catalog: "postgres",
            kills,
            landed: (
                "kills_during_din_writes",
                "while din was writing",
                kills_during_writes,
            ),
            cursors,
            seed,
            started,
            report,
        },
    );
}

/// One chaos run's outcome, checked and reported by [`finish_chaos`].
struct Chaos {
    figure: &'static str,
    catalog: &'static str,
    kills: usize,
    /// The figure's name, the words and the count of the kills that hit a busy moment.
    landed: (&'static str, &'static str, usize),
    cursors: Vec<i64>,
    seed: u64,
    started: Instant,
    report: dq_dinsim::SeedReport,
}

/// Checks that the kills hit running passes, drains, compares with the oracle and reports the
/// run's figures (RELIABILITY.md).
fn finish_chaos(t: &TestLake, blob_dir: &std::path::Path, mut run: Chaos) {
    let (name, words, landed) = run.landed;
    let kills = run.kills;
    run.cursors.dedup();
    eprintln!(
        "{}: {kills} kills in {:.1}s ({landed} {words}); cursor positions between kills {:?}; \
         din wrote {:?}",
        run.figure,
        run.started.elapsed().as_secs_f64(),
        run.cursors,
        run.report
    );
    // Killed processes still made progress between kills, so kills also hit running passes, not
    // only process start-up.
    assert!(
        run.cursors.len() > 2,
        "the cursor barely moved: {:?}",
        run.cursors
    );
    assert!(
        landed * 2 >= kills,
        "most kills must land {words} ({landed}/{kills})"
    );
    let (lost, duplicated, clean) = assert_drained_equal_oracle(t, blob_dir, &[None]);
    let mut figures = serde_json::json!({
        "catalog": run.catalog, "kills": kills,
        "lost_rows": lost, "duplicated_rows": duplicated, "audit_clean": clean, "seed": run.seed,
        "din_events": run.report.events, "din_commits": run.report.commits,
    });
    figures[name] = landed.into();
    dq_testkit::report_figures(run.figure, &figures.to_string());
}

/// The same chaos on the file catalog. A file catalog is one process's at a time (DuckDB locks
/// the catalog file), so din writes first and every materializer run is then SIGKILLed
/// mid-drain: windows killed between writing their files and committing, spans resumed from
/// their committed windows, on the own writer's path as on PostgreSQL.
#[test]
fn sigkill_at_random_points_on_the_file_catalog() {
    let kills: usize = env_or("DQ_CHAOS_KILLS", 25);
    let seed = chaos_seed();
    eprintln!("chaos (file catalog): {kills} kills, DQ_CHAOS_SEED={seed}");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);

    let t = TestLake::new(Backend::File);
    let blob_dir = t.path("blobs");
    dq_dinsim::testing::open_din_lake(&t);
    // Enough raw rows that most kills land while the drain still has windows to write: a run
    // lives for 0.3–1.5 s and commits a few hundred events of its drain (4 vehicles drained in
    // about 9 runs).
    let vehicles = u32::try_from(kills * 12 / 25)
        .unwrap_or(u32::MAX)
        .clamp(12, 96);
    let (_, writer) = start_din(&t, &blob_dir, vehicles, Duration::ZERO);
    let report = writer.join().expect("din simulator thread");
    let head = {
        let lake = t.open().unwrap();
        dq_lake::progress::head(&lake).unwrap()
    };

    let started = Instant::now();
    let mut kills_mid_drain = 0;
    let mut cursors = vec![0];
    for _ in 0..kills {
        let mut child = spawn_quiet(command(&t, &blob_dir, &[]));
        std::thread::sleep(Duration::from_millis(rng.gen_range(300..1500)));
        kill9(&mut child);
        // Opened only between runs: the materializer cannot attach a catalog file held open.
        let at = cursor(&t.open().unwrap());
        if at < head {
            kills_mid_drain += 1;
        }
        cursors.push(at);
    }
    finish_chaos(
        &t,
        &blob_dir,
        Chaos {
            figure: "materializer-chaos-file",
            catalog: "file",
            kills,
            landed: (
                "kills_mid_drain",
                "before the drain caught up",
                kills_mid_drain,
            ),
            cursors,
            seed,
            started,
            report,
        },
    );
}

/// Kills per layout in [`sharded_sigkill_at_random_points_equal_the_single_writer`]
/// (`DQ_SHARD_CHAOS_KILLS`).
const SHARD_KILLS: usize = 8;

#[test]
fn counts_lost_and_duplicated_rows() {
    assert_eq!(lost_and_duplicated(&[1, 2, 2, 3], &[1, 2, 2, 3]), (0, 0));
    assert_eq!(lost_and_duplicated(&[1, 2, 3], &[1, 1, 3]), (1, 1));
    assert_eq!(lost_and_duplicated(&[1, 2], &[]), (2, 0));
}

#[test]
fn sharded_sigkill_at_random_points_equal_the_single_writer() {
    let kills: usize = env_or("DQ_SHARD_CHAOS_KILLS", SHARD_KILLS);
    let seed = chaos_seed();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut layouts = Vec::new();
    for count in [1u32, 2, 4] {
        let t = TestLake::new(Backend::Postgres);
        let blob_dir = t.path("blobs");
        dq_dinsim::testing::open_din_lake(&t);
        let (done, writer) = start_din(&t, &blob_dir, 8, din_pace(kills, 850));
        let spawn =
            |index: u32| spawn_quiet(shard_command(&t, &blob_dir, &[], Some((index, count))));
        let mut running: Vec<Child> = (0..count).map(spawn).collect();
        let started = Instant::now();
        let mut during_writes = 0;
        for _ in 0..kills {
            std::thread::sleep(Duration::from_millis(rng.gen_range(200..1500)));
            if !done.load(Ordering::SeqCst) {
                during_writes += 1;
            }
            let victim = rng.gen_range(0..count);
            let slot = &mut running[victim as usize];
            kill9(slot);
            *slot = spawn(victim);
        }
        for child in &mut running {
            kill9(child);
        }
        let report = writer.join().expect("din simulator thread");
        assert!(
            during_writes * 2 >= kills,
            "most kills must land while din writes ({during_writes}/{kills})"
        );
        let shards: Vec<_> = (0..count).map(|i| Some((i, count))).collect();
        let (lost, duplicated, clean) = assert_drained_equal_oracle(&t, &blob_dir, &shards);
        layouts.push(serde_json::json!({
            "shards": count, "kills": kills, "kills_during_din_writes": during_writes,
            "lost_rows": lost, "duplicated_rows": duplicated, "audit_clean": clean,
            "din_events": report.events, "seconds": started.elapsed().as_secs(),
        }));
    }
    dq_testkit::report_figures(
        "materializer-chaos-shards",
        &serde_json::json!({ "catalog": "postgres", "seed": seed, "layouts": layouts }).to_string(),
    );
}
