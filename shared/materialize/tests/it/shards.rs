//! Issue 20, scale out: `MATERIALIZER_SHARD_INDEX` / `_COUNT` split the subject buckets between
//! materializers, each with its own cursor row and consumer name. A shard writes only its
//! buckets; a new layout starts at the lowest cursor of the old one; shards running at once on
//! one PostgreSQL catalog, their window commits racing, together equal the single writer.

use chrono::TimeDelta;
use dq_cloudevent::subject_bucket;
use dq_dinsim::{SeedOptions, Writer};
use dq_fleet::FleetConfig;
use dq_lake::testing::{Backend, TestLake};
use dq_lake::Lake;
use dq_materialize::{Materializer, Shard};
use dq_tables::schema::CURSOR_PARTITION;

use crate::*;

fn shard_materializer(t: &TestLake, shard: Shard) -> Materializer {
    Materializer::builder(t.open().unwrap())
        .shard(shard)
        .window(1_000, 1 << 20)
        .chunk_rows(256)
        .max_snapshot_span(8)
        .emf(false)
        .build()
        .unwrap()
}

fn stored_cursor(lake: &Lake, partition: &str) -> Option<i64> {
    lake.conn()
        .query_row(
            "SELECT cursor::BIGINT FROM lake.ingest_progress WHERE partition = ?",
            [partition],
            |r| r.get(0),
        )
        .ok()
}

fn consumers(lake: &Lake) -> Vec<String> {
    let conn = lake.conn();
    let mut stmt = conn
        .prepare("SELECT consumer FROM meta.din_consumer_progress ORDER BY consumer")
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn seed(rt: &tokio::runtime::Runtime, writer: &Writer<'_>, day: i64) {
    let fleet = FleetConfig {
        vehicles: 8,
        days: 1,
        signals_per_minute: 1,
        ..FleetConfig::default()
    };
    let opts = SeedOptions {
        fleet: FleetConfig {
            start: fleet.start + TimeDelta::days(day),
            ..fleet
        },
        bundle_window: std::time::Duration::from_secs(3600),
        duplicate_every: 4,
        tombstone_every: 30,
        ..SeedOptions::default()
    };
    rt.block_on(dq_dinsim::seed(writer, &opts, |_| {})).unwrap();
}

/// A file-catalog lake with dq's tables and one day of the small fleet in din's raw table.
fn one_day_lake() -> (TestLake, tokio::runtime::Runtime) {
    let t = TestLake::new(Backend::File);
    let rt = runtime();
    let lake = din_lake(&t);
    dq_tables::schema::ensure(&lake).unwrap();
    seed(&rt, &Writer::new(&lake, None).with_threshold(usize::MAX), 0);
    (t, rt)
}

#[test]
fn shards_write_their_buckets_and_together_equal_the_single_writer() {
    let t = TestLake::new(Backend::Postgres);
    let rt = runtime();
    let seed_lake = din_lake(&t);
    dq_tables::schema::ensure(&seed_lake).unwrap();
    let writer = Writer::new(&seed_lake, None).with_threshold(usize::MAX);
    seed(&rt, &writer, 0);

    // The single writer decodes the first day; then the layout changes to two shards.
    let single = materializer(t.open().unwrap(), None);
    drain(&rt, &single);
    let first = single.cursor().unwrap();
    drop(single);
    seed(&rt, &writer, 1);

    let halves = [Shard::new(0, 2).unwrap(), Shard::new(1, 2).unwrap()];
    let low = shard_materializer(&t, halves[0]);
    assert_eq!(
        stored_cursor(low.lake(), &halves[0].cursor_partition()),
        Some(first),
        "a new shard starts at the lowest cursor of the layout before it"
    );
    // Shard 0 alone: only its buckets are written, only its cursor moves.
    let run = drain(&rt, &low);
    assert!(run.counts.signal_rows > 0, "{run:?}");
    let second_day = (FleetConfig::default().start + TimeDelta::days(1)).to_rfc3339();
    let (lo_bucket, hi_bucket): (i32, i32) = low
        .lake()
        .conn()
        .query_row(
            "SELECT min(subject_bucket), max(subject_bucket) FROM lake.signals \
             WHERE \"timestamp\" >= ?::TIMESTAMPTZ",
            [&second_day],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert!(
        halves[0].buckets().contains(&lo_bucket) && halves[0].buckets().contains(&hi_bucket),
        "shard 0 wrote buckets {lo_bucket}..={hi_bucket}"
    );
    let head = dq_lake::progress::head(low.lake()).unwrap();
    assert!(stored_cursor(low.lake(), &halves[0].cursor_partition()).unwrap() > first);
    assert_eq!(stored_cursor(low.lake(), CURSOR_PARTITION), Some(first));
    let high = shard_materializer(&t, halves[1]);
    assert_eq!(
        stored_cursor(high.lake(), &halves[1].cursor_partition()),
        Some(first)
    );
    // The second day's rows of shard 1's subjects are not decoded yet.
    let (want_signals, want_events) = expected(&rt, high.lake(), None);
    assert!(stored_signals(high.lake()).len() < want_signals.len());
    assert!(
        want_signals
            .iter()
            .any(|r| halves[1].buckets().contains(&subject_bucket(&r.subject))),
        "the fleet has subjects in shard 1"
    );
    drain(&rt, &high);
    assert_eq!(stored_signals(high.lake()), want_signals);
    assert_eq!(stored_events(high.lake()), want_events);
    assert!(head <= dq_lake::progress::head(high.lake()).unwrap());
    assert_eq!(
        consumers(high.lake()),
        ["dq", "dq/shard-0-of-2", "dq/shard-1-of-2"],
        "each shard reports its own consumer name to din's floor"
    );
    drop((low, high));

    // Four shards at once over a third day, each in its own thread and DuckDB instance: their
    // window commits race (DuckLake refuses the later of two that touch the progress table or
    // a rollup), and the losers run their window again. The single writer runs too, over the
    // same buckets (a deploy that changes the layout while the old one still runs): the same
    // refusals keep it from committing over rows it has not seen.
    seed(&rt, &writer, 2);
    let mut layouts: Vec<Shard> = (0..4).map(|i| Shard::new(i, 4).unwrap()).collect();
    layouts.push(Shard::ALL);
    let workers: Vec<_> = layouts
        .into_iter()
        .map(|shard| {
            let m = shard_materializer(&t, shard);
            std::thread::spawn(move || {
                let rt = runtime();
                let run = drain(&rt, &m);
                (shard, run.counts)
            })
        })
        .collect();
    let mut conflicts = 0;
    for w in workers {
        let (shard, counts) = w.join().expect("shard thread");
        eprintln!("{shard}: {counts:?}");
        conflicts += counts.conflicts;
    }
    eprintln!(
        "four shards and the single writer: {conflicts} window commits lost a race and ran again"
    );
    drop(seed_lake);
    let m = materializer(t.open().unwrap(), None);
    let (want_signals, want_events) = expected(&rt, m.lake(), None);
    assert_eq!(stored_signals(m.lake()), want_signals);
    assert_eq!(stored_events(m.lake()), want_events);
    let audit = m.audit().unwrap();
    assert!(audit.clean, "{audit:?}");
    let head = dq_lake::progress::head(m.lake()).unwrap();
    for i in 0..4 {
        let shard = Shard::new(i, 4).unwrap();
        let cursor = stored_cursor(m.lake(), &shard.cursor_partition()).unwrap();
        assert!(cursor > first && cursor <= head, "{shard} at {cursor}");
    }
}

/// A deployment sharded from its first start on a catalog whose single-writer row sits at 0
/// (older builds seeded it with the tables). A later layout, and the single writer if its row
/// is lost, start where every one of their buckets is decoded: at the shards' cursors, not at 0
/// (which would re-decode the whole feed, and past din's retention find it expired).
#[test]
fn a_new_layout_starts_at_the_cursors_that_cover_its_buckets() {
    let (t, rt) = one_day_lake();
    let seed_lake = t.open().unwrap();
    seed_lake
        .exec(
            "seed the single writer's row as older builds did",
            &format!(
                "INSERT INTO lake.ingest_progress (partition, cursor) VALUES ('{CURSOR_PARTITION}', '0')"
            ),
        )
        .unwrap();

    let halves = [Shard::new(0, 2).unwrap(), Shard::new(1, 2).unwrap()];
    let mut cursors = Vec::new();
    for half in halves {
        let m = shard_materializer(&t, half);
        assert_eq!(stored_cursor(m.lake(), &half.cursor_partition()), Some(0));
        drain(&rt, &m);
        cursors.push(m.cursor().unwrap());
    }
    assert!(cursors.iter().all(|c| *c > 0), "{cursors:?}");
    assert_eq!(stored_cursor(&seed_lake, CURSOR_PARTITION), Some(0));

    // Four shards: each starts at the cursor of the half holding its buckets, and finds nothing
    // left to decode.
    let mut quarters = Vec::new();
    for index in 0..4 {
        let quarter = Shard::new(index, 4).unwrap();
        let m = shard_materializer(&t, quarter);
        let covering = cursors[usize::try_from(index / 2).unwrap()];
        assert_eq!(
            stored_cursor(m.lake(), &quarter.cursor_partition()),
            Some(covering),
            "{quarter}"
        );
        assert_eq!(
            drain(&rt, &m).counts.raw_rows,
            0,
            "{quarter} re-decoded rows"
        );
        quarters.push(m.cursor().unwrap());
    }

    // The single writer's lost row comes back where every bucket is decoded: the lowest of
    // the newest layout's cursors (each bucket's highest covering cursor is its quarter's).
    let lake = t.open().unwrap();
    lake.exec(
        "drop the single writer's row",
        &format!("DELETE FROM lake.ingest_progress WHERE partition = '{CURSOR_PARTITION}'"),
    )
    .unwrap();
    assert_eq!(stored_cursor(&lake, CURSOR_PARTITION), None);
    let single = materializer(lake, None);
    assert_eq!(single.cursor().unwrap(), *quarters.iter().min().unwrap());
}

/// `rebuild-rollups` under a shard's lease recomputes that shard's buckets only: the other
/// shards' rollup rows are left to their own rebuild (and their windows never race it).
#[test]
fn a_shard_rebuilds_the_rollups_of_its_buckets_only() {
    let (t, rt) = one_day_lake();
    let single = shard_materializer(&t, Shard::ALL);
    drain(&rt, &single);
    let rollup_rows = |lake: &Lake, shard: Shard| -> i64 {
        lake.conn()
            .query_row(
                &format!(
                    "SELECT count(*) FROM lake.signals_latest WHERE {}",
                    shard.bucket_predicate(None)
                ),
                [],
                |r| r.get(0),
            )
            .unwrap()
    };
    let halves = [Shard::new(0, 2).unwrap(), Shard::new(1, 2).unwrap()];
    let before = halves.map(|h| rollup_rows(single.lake(), h));
    assert!(before.iter().all(|n| *n > 0), "{before:?}");
    // Drift in both halves.
    single
        .lake()
        .exec("lose the rollups", "DELETE FROM lake.signals_latest")
        .unwrap();

    let low = shard_materializer(&t, halves[0]);
    let summary = low.rebuild_rollups().unwrap();
    assert_eq!(summary.signal_keys, before[0]);
    assert!(summary.buckets > 0);
    assert_eq!(rollup_rows(low.lake(), halves[0]), before[0]);
    assert_eq!(
        rollup_rows(low.lake(), halves[1]),
        0,
        "shard 1's buckets untouched"
    );

    let high = shard_materializer(&t, halves[1]);
    high.rebuild_rollups().unwrap();
    assert_eq!(rollup_rows(high.lake(), halves[1]), before[1]);
    assert!(high.audit().unwrap().clean);
}

/// Two writers of one shard seeding its cursor row at once both commit (concurrent inserts do
/// not conflict in DuckLake): the next read keeps one row at the lowest cursor, instead of
/// every window's compare-and-swap updating two rows and counting as lost forever.
#[test]
fn duplicate_cursor_rows_merge_into_one() {
    let (t, rt) = one_day_lake();
    let m = shard_materializer(&t, Shard::ALL);
    m.lake()
        .exec(
            "a second seeder's row",
            &format!(
                "INSERT INTO lake.ingest_progress (partition, cursor) VALUES ('{CURSOR_PARTITION}', '0')"
            ),
        )
        .unwrap();
    let run = drain(&rt, &m);
    assert!(run.caught_up && run.counts.signal_rows > 0, "{run:?}");
    let rows: i64 = m
        .lake()
        .conn()
        .query_row(
            "SELECT count(*) FROM lake.ingest_progress WHERE partition = ?",
            [CURSOR_PARTITION],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(rows, 1);
    assert!(m.audit().unwrap().clean);
}
