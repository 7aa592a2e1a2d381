//! Issue 20, the own writer: a window's new signal rows go in as Parquet files dq writes into
//! `lake.signals`' partition directories and registers with `ducklake_add_data_files`, in the
//! window's transaction. The decoded rows equal the oracle either way, every file written is
//! registered (a window that loses its commit removes its files), and the rows read the same
//! after din's maintenance merged the files.

use chrono::TimeDelta;
use dq_dinsim::{SeedOptions, Writer};
use dq_fleet::FleetConfig;
use dq_lake::testing::{Backend, TestLake};
use dq_lake::{backend_tests, Lake};
use dq_materialize::{Config, Materializer, Outcome};

use crate::*;

backend_tests!(
    the_own_writer_registers_every_file_it_writes,
    insert_and_own_writer_write_the_same_rows
);

/// Two days of a 6-vehicle fleet (redeliveries and tombstones included) in din's raw table.
fn seeded(t: &TestLake, rt: &tokio::runtime::Runtime) -> Lake {
    let lake = din_lake(t);
    dq_tables::schema::ensure(&lake).unwrap();
    let fleet = FleetConfig {
        vehicles: 6,
        days: 2,
        signals_per_minute: 1,
        ..FleetConfig::default()
    };
    let opts = SeedOptions {
        fleet,
        bundle_window: std::time::Duration::from_secs(3600),
        duplicate_every: 4,
        tombstone_every: 30,
        ..SeedOptions::default()
    };
    let writer = Writer::new(&lake, None).with_threshold(usize::MAX);
    rt.block_on(dq_dinsim::seed(&writer, &opts, |_| {}))
        .unwrap();
    lake
}

fn with_writer(lake: Lake, own_writer: bool) -> Materializer {
    Materializer::builder(lake)
        .config(Config {
            own_writer,
            ..Config::default()
        })
        .window(2_000, 1 << 20)
        .chunk_rows(256)
        .max_snapshot_span(4)
        .emf(false)
        .build()
        .unwrap()
}

/// The own writer's files of `lake.signals` by name: those the catalog has a row of (live, or
/// ended by a void that deleted every row of one), and those on disk under the table's
/// directory, each sorted.
fn own_files(lake: &Lake) -> (Vec<String>, Vec<String>) {
    let conn = lake.conn();
    let postgres = lake.config().catalog.is_postgres();
    let dir = dq_lake::files::table_path(conn, postgres, "signals")
        .unwrap()
        .unwrap();
    let own = |path: &str| -> Option<String> {
        let name = path.rsplit('/').next()?;
        let uuid = name.strip_prefix("dq-")?.strip_suffix(".parquet")?;
        uuid::Uuid::parse_str(uuid).ok().map(|_| name.to_owned())
    };
    let mut stmt = conn
        .prepare(&format!(
            "SELECT path FROM {}.ducklake_data_file",
            dq_lake::METADATA
        ))
        .unwrap();
    let mut registered: Vec<String> = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .filter_map(|p| own(&p.unwrap()))
        .collect();
    registered.sort();
    let mut on_disk = Vec::new();
    let mut dirs = vec![std::path::PathBuf::from(&dir)];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if let Some(name) = own(&path.to_string_lossy()) {
                on_disk.push(name);
            }
        }
    }
    on_disk.sort();
    (registered, on_disk)
}

fn the_own_writer_registers_every_file_it_writes(backend: Backend) {
    let t = TestLake::new(backend);
    let rt = runtime();
    let _din = seeded(&t, &rt);
    let m = with_writer(t.open().unwrap(), true);
    let run = drain(&rt, &m);
    assert!(run.counts.signal_rows > 0, "{run:?}");
    let (want_signals, want_events) = expected(&rt, m.lake(), None);
    assert_eq!(stored_signals(m.lake()), want_signals);
    assert_eq!(stored_events(m.lake()), want_events);
    let (listed, on_disk) = own_files(m.lake());
    assert!(!listed.is_empty(), "the windows wrote their rows as files");
    assert_eq!(listed, on_disk, "every file written is registered");
    assert!(m.audit().unwrap().clean);

    // A redelivery of rows already decoded (din re-commits a bundle after a lost ack): its rows
    // are at or before their keys' newest time at rest, one is at rest, and the window runs
    // again with every row staged; the anti-join keeps them out and their files go away.
    m.lake()
        .conn()
        .execute_batch(
            "INSERT INTO lake.raw_events SELECT * FROM lake.raw_events \
             WHERE id IN (SELECT DISTINCT cloud_event_id FROM lake.signals LIMIT 40)",
        )
        .unwrap();
    let replay = drain(&rt, &m);
    assert!(replay.counts.restaged > 0, "{replay:?}");
    assert_eq!(replay.counts.signal_rows, 0, "{replay:?}");
    assert_eq!(stored_signals(m.lake()), want_signals);
    let (listed, on_disk) = own_files(m.lake());
    assert_eq!(listed, on_disk, "the replay's files were removed");
    assert!(m.audit().unwrap().clean);

    if backend == Backend::File {
        return;
    }
    // A window that does not commit removes its files: two materializers over the next day's
    // snapshots race (PostgreSQL: two DuckDB instances write one catalog), the loser's windows
    // conflict or find the cursor moved.
    let fleet = FleetConfig::default();
    let writer = Writer::new(&_din, None).with_threshold(usize::MAX);
    let opts = SeedOptions {
        fleet: FleetConfig {
            vehicles: 6,
            days: 1,
            signals_per_minute: 1,
            start: fleet.start + TimeDelta::days(2),
            ..fleet
        },
        bundle_window: std::time::Duration::from_secs(3600),
        ..SeedOptions::default()
    };
    rt.block_on(dq_dinsim::seed(&writer, &opts, |_| {}))
        .unwrap();
    // Two writers with their own fencing tokens (two stacks, a takeover), span by span.
    let racers: Vec<_> = [1_001, 2_002]
        .into_iter()
        .map(|fence| {
            let m = with_writer(t.open().unwrap(), true);
            std::thread::spawn(move || {
                let rt = runtime();
                for _ in 0..200 {
                    let span = rt
                        .block_on(dq_materialize::testing::run_span_bypassing_lease(&m, fence))
                        .unwrap();
                    if span.outcome == Outcome::CaughtUp {
                        return;
                    }
                }
                panic!("writer {fence} did not catch up");
            })
        })
        .collect();
    for r in racers {
        r.join().unwrap();
    }
    let (want_signals, _) = expected(&rt, m.lake(), None);
    assert_eq!(stored_signals(m.lake()), want_signals);
    let (listed, on_disk) = own_files(m.lake());
    assert_eq!(
        listed, on_disk,
        "a window that lost its race left no file behind"
    );

    // din's maintenance merges the registered files like its own.
    m.lake()
        .conn()
        .execute_batch(
            "CALL ducklake_flush_inlined_data('lake'); \
             CALL ducklake_merge_adjacent_files('lake');",
        )
        .unwrap();
    assert_eq!(stored_signals(m.lake()), want_signals);
    assert!(m.audit().unwrap().clean);
}

/// With the data path on S3 (moto) the files go there through the S3 API and read back the
/// same.
#[test]
fn the_own_writer_writes_to_s3() {
    let moto = dq_testkit::shared_moto();
    let bucket = moto.create_unique_bucket("lake").unwrap();
    let mut t = TestLake::new(Backend::File);
    t.config.data_path = Some(format!("s3://{bucket}/lake/"));
    t.config.s3 = moto.s3_config();
    let rt = runtime();
    let _din = seeded(&t, &rt);
    let m = with_writer(t.open().unwrap(), true);
    drain(&rt, &m);
    let (want_signals, _) = expected(&rt, m.lake(), None);
    assert_eq!(stored_signals(m.lake()), want_signals);
    let own: i64 = m
        .lake()
        .conn()
        .query_row(
            "SELECT count(*) FROM ducklake_list_files('lake', 'signals') \
             WHERE data_file LIKE 's3://%/lake/main/signals/subject_bucket=%/dq-%.parquet'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(own > 0, "the windows' files are on S3");
}

fn insert_and_own_writer_write_the_same_rows(backend: Backend) {
    let rt = runtime();
    let stored = [true, false].map(|own| {
        let t = TestLake::new(backend);
        let _din = seeded(&t, &rt);
        let m = with_writer(t.open().unwrap(), own);
        drain(&rt, &m);
        let (listed, _) = own_files(m.lake());
        assert_eq!(
            !listed.is_empty(),
            own,
            "own writer {own}: {} files",
            listed.len()
        );
        (stored_signals(m.lake()), stored_events(m.lake()))
    });
    assert!(!stored[0].0.is_empty());
    assert_eq!(stored[0], stored[1]);
}
