//! Cloud-event reads from `raw_events`' files directly answer exactly as the DuckLake scan, on
//! both catalogs: on a lake with duplicates, late arrivals, tombstones and small bundles
//! inlined in the catalog (their types take the scan), after din's flush, after a tombstone
//! commit of one row (inlined again), and after din's maintenance merged, flushed and expired.
//! Every search, latest look-up and type summary of the flushed and the maintained lake reads
//! its rows, and its tombstones when voiding, from the files directly.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::panic, clippy::indexing_slicing)]

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use dq_lake::files::ListingSource;
use dq_lake::testing::{Backend, TestLake};
use dq_lake::{backend_tests, SharedLake};
use dq_rawquery::{Db, Filter, Order, StoredRow, StringFilter, Voiding};

backend_tests!(direct_reads_answer_as_the_lake_scan);

struct Fixture {
    direct: Arc<Db>,
    scan: Arc<Db>,
    subjects: Vec<String>,
    last: DateTime<Utc>,
}

fn fixture(t: &TestLake) -> Fixture {
    let shared = Arc::new(SharedLake::new(t.open().unwrap()));
    let (conn, _) = shared.connect().unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT DISTINCT subject FROM lake.raw_events WHERE type = 'dimo.status' ORDER BY 1",
        )
        .unwrap();
    let subjects: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let last = conn
        .query_row("SELECT max(\"time\") FROM lake.raw_events", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(subjects.len() >= 3, "{subjects:?}");
    Fixture {
        direct: Arc::new(Db::on(Arc::clone(&shared))),
        scan: Arc::new(Db::on(shared).direct_file_reads(false)),
        subjects,
        last,
    }
}

/// The filters asked of every subject: all rows both ways, one type, a day's window, the three
/// voiding policies.
fn filters(f: &Fixture, subject: &str) -> Vec<Filter> {
    let base = Filter {
        subject: StringFilter::eq(subject),
        ..Filter::default()
    };
    vec![
        base.clone(),
        Filter {
            order: Order::Ascending,
            ..base.clone()
        },
        Filter {
            event_type: StringFilter::eq("dimo.status"),
            ..base.clone()
        },
        Filter {
            after: Some(f.last - Duration::hours(30)),
            before: Some(f.last - Duration::hours(6)),
            ..base.clone()
        },
        Filter {
            voiding: Voiding::SourceMatched,
            ..base.clone()
        },
        Filter {
            voiding: Voiding::None,
            ..base
        },
    ]
}

fn same_rows(a: &[StoredRow], b: &[StoredRow], what: &str) {
    let key = |rows: &[StoredRow]| {
        rows.iter()
            .map(|r| (r.event.clone(), r.data_index_key.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(key(a), key(b), "{what}");
}

/// Every read of every subject, and of `extra` filters, both engines; returns how many reads
/// ran.
async fn compare(f: &Fixture, stage: &str, extra: &[Filter]) -> u64 {
    let mut reads = 0;
    let asked = f
        .subjects
        .iter()
        .flat_map(|subject| filters(f, subject))
        .chain(extra.iter().cloned());
    {
        for (i, filter) in asked.enumerate() {
            let what = format!("{stage}: filter {i} {filter:?}");
            same_search(f, &filter, &what).await;
            same_latest(f, &filter, &format!("{what}: latest")).await;
            let (a, b) = (filter.clone(), filter);
            let direct = f.direct.read(move |r| r.type_summaries(&a)).await.unwrap();
            let scan = f.scan.read(move |r| r.type_summaries(&b)).await.unwrap();
            assert_eq!(direct, scan, "{what}: type summaries");
            reads += 3;
        }
    }
    reads
}

/// The reads that need no whole listing, both engines: searches of every type over a bounded
/// window only (each subject's day window and `extra`), and each subject's latest row of one
/// type; returns how many ran.
async fn windowed(f: &Fixture, extra: &Filter) -> u64 {
    let mut reads = 0;
    let asked = f
        .subjects
        .iter()
        .map(|subject| filters(f, subject).swap_remove(3))
        .chain([extra.clone()]);
    for (i, filter) in asked.enumerate() {
        assert!(filter.event_type.is_empty() && filter.before.is_some());
        same_search(f, &filter, &format!("windowed {i}: {filter:?}")).await;
        reads += 1;
    }
    for subject in &f.subjects {
        let filter = filters(f, subject).swap_remove(2);
        assert!(filter.event_type.confined_to().is_some() && filter.before.is_none());
        same_latest(f, &filter, &format!("typed latest: {filter:?}")).await;
        reads += 1;
    }
    reads
}

/// The latest row of `filter`, payload included, the same both ways.
async fn same_latest(f: &Fixture, filter: &Filter, what: &str) {
    let (a, b) = (filter.clone(), filter.clone());
    let direct = f
        .direct
        .read(move |r| r.latest_row(&a, true))
        .await
        .unwrap();
    let scan = f.scan.read(move |r| r.latest_row(&b, true)).await.unwrap();
    same_rows(&[direct], &[scan], what);
}

/// The search of `filter`, payloads included, finds rows, the same both ways.
async fn same_search(f: &Fixture, filter: &Filter, what: &str) {
    let (a, b) = (filter.clone(), filter.clone());
    let direct = f
        .direct
        .read(move |r| r.search_rows(&a, 1000, true))
        .await
        .unwrap();
    let scan = f
        .scan
        .read(move |r| r.search_rows(&b, 1000, true))
        .await
        .unwrap();
    assert!(!direct.is_empty(), "{what}: rows");
    same_rows(&direct, &scan, what);
}

async fn seed(t: &TestLake) {
    let lake = dq_dinsim::testing::open_din_lake(t);
    let writer = dq_dinsim::Writer::new(&lake, None);
    let opts = dq_dinsim::SeedOptions {
        fleet: dq_fleet::FleetConfig {
            vehicles: 3,
            days: 2,
            ..dq_fleet::FleetConfig::default()
        },
        duplicate_every: 4,
        late_every: 50,
        tombstone_every: 40,
        ..dq_dinsim::SeedOptions::default()
    };
    dq_dinsim::seed(&writer, &opts, |_| {}).await.unwrap();
}

async fn direct_reads(backend: Backend) {
    let t = TestLake::new(backend);
    seed(&t).await;
    // A tombstone two days after the row it voids, signed by the row's source (so every
    // voiding policy hides the row): a search window around the row excludes the tombstone's
    // day, whose files the probe must read anyway.
    let voided = {
        let f = fixture(&t);
        let filter = Filter {
            subject: StringFilter::eq(f.subjects[0].as_str()),
            event_type: StringFilter::eq("dimo.status"),
            before: Some(f.last - Duration::days(1)),
            ..Filter::default()
        };
        f.scan
            .read(move |r| r.latest_row(&filter, true))
            .await
            .unwrap()
    };
    {
        let lake = t.open().unwrap();
        let writer = dq_dinsim::Writer::new(&lake, None);
        let tombstone = dq_dinsim::tombstone(
            &voided.event,
            &voided.event.header.source,
            "tombstone-direct-1",
            voided.event.header.time + Duration::days(2),
            "test",
        );
        writer.write_bundle(&[tombstone]).await.unwrap();
    }
    let around = || {
        let at = voided.event.header.time;
        Filter {
            subject: StringFilter::eq(voided.event.header.subject.as_str()),
            after: Some(at - Duration::hours(2)),
            before: Some(at + Duration::seconds(1)),
            ..Filter::default()
        }
    };
    let hides = |f: &Fixture| {
        let (filter, db) = (around(), Arc::clone(&f.direct));
        let id = voided.event.header.id.clone();
        async move {
            let rows = db
                .read(move |r| r.search_rows(&filter, 1000, false))
                .await
                .unwrap();
            assert!(!rows.is_empty(), "the window holds rows");
            assert!(
                rows.iter().all(|r| r.event.header.id != id),
                "the tombstone voids its row"
            );
        }
    };

    // The seed's small bundles and the tombstone were inlined in the catalog (din inlines
    // ≤ 10 rows): reads of their types take the scan, every read without a type filter too.
    let f = fixture(&t);
    // The init's preload loads the listing (on PostgreSQL its head, no type's files yet; on the
    // file catalog whole), and the first read finds it.
    let loaded = f.direct.preload_listing().expect("preloaded");
    let postgres = backend == Backend::Postgres;
    assert_eq!(
        (loaded.source, loaded.complete, loaded.files > 0),
        (ListingSource::Loaded, !postgres, !postgres)
    );
    let again = f.direct.preload_listing().expect("preloaded");
    assert_eq!(again.source, ListingSource::Cached);
    assert!(f.scan.preload_listing().is_none());
    let reads = compare(&f, "inlined bundles", &[around()]).await;
    assert!(reads > 0);
    hides(&f).await;
    drop(f);

    // din's flush writes them to files: every read is direct. Written by another instance,
    // as din does; on the file catalog an open instance does not see another's commits, so
    // the readers reopen.
    t.open()
        .unwrap()
        .conn()
        .execute_batch("CALL ducklake_flush_inlined_data('lake')")
        .unwrap();
    let f = fixture(&t);
    // A search of every type over a day or two reads those days' files into the listing, and
    // a latest row of one type that type's files, not the whole table's: on PostgreSQL the
    // listing the preload then finds is still partial.
    let before = f.direct.direct_reads();
    let windowed = windowed(&f, &around()).await;
    assert!(f.direct.direct_reads() - before >= windowed);
    let listed = f.direct.preload_listing().expect("listed");
    if postgres {
        assert_eq!(
            (listed.source, listed.complete, listed.files > 0),
            (ListingSource::Cached, false, true),
            "{listed:?}"
        );
    } else {
        assert!(listed.complete, "{listed:?}");
    }
    let before = f.direct.direct_reads();
    let reads = compare(&f, "flushed lake", &[around()]).await;
    assert!(
        f.direct.direct_reads() - before >= reads,
        "every read took the files: {} direct relations for {reads} reads",
        f.direct.direct_reads() - before
    );
    assert_eq!(f.scan.direct_reads(), 0);
    hides(&f).await;

    // din's maintenance in its own process: flush, rewrite, merge, expiry.
    drop(f);
    let lake = t.open().unwrap();
    dq_dinsim::maintain::cycle(&lake, dq_dinsim::testing::tiny_retention()).unwrap();
    drop(lake);
    let f = fixture(&t);
    let before = f.direct.direct_reads();
    let reads = compare(&f, "after maintenance", &[around()]).await;
    assert!(f.direct.direct_reads() - before >= reads);
    hides(&f).await;
}

fn direct_reads_answer_as_the_lake_scan(backend: Backend) {
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(direct_reads(backend));
}
