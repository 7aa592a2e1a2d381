//! Direct reads (the engine reads a bucket's files itself, listed once per snapshot) answer
//! exactly as the DuckLake scan, on both catalogs: on a clean lake, after a commit moved the
//! snapshot, with inlined rows, with delete files, and after din's maintenance merged and
//! removed files; listings after a commit are refreshed, not reloaded. Deleted rows (delete
//! files and the deletes DuckLake keeps in the catalog) are applied by the direct reads, which
//! are asserted taken at every stage but the one with inlined rows. Covered: the `signals`
//! aggregation (by its statement and in Rust), every statement of `segments` and
//! `dailyActivity` (signals and events), latest values from `signals_latest` and from the
//! recompute over `signals`, and event summaries from `events_latest`.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use dq_lake::testing::{Backend, TestLake};
use dq_lake::{backend_tests, SharedLake};
use dq_query::activity::{DailyActivityQuery, SegmentsQuery, Summary};
use dq_query::aggregate::{
    AggregateRequest, Bucket, FloatRequest, LocationAgg, LocationRequest, StringAgg, StringRequest,
};
use dq_query::segments::signals::{FloatAggregation, SignalRequest};
use dq_query::segments::{DailyActivityRequest, Mechanism, SegmentsRequest};
use dq_query::{Engine, ListingSource};

backend_tests!(direct_reads_answer_as_the_lake_scan);

const HOUR_US: i64 = 3_600_000_000;

struct Fixture {
    shared: Arc<SharedLake>,
    direct: Engine,
    scan: Engine,
    subjects: Vec<String>,
    /// A source address of the fleet's signals.
    source: String,
    last: DateTime<Utc>,
}

/// Two engines over one fresh instance of the lake: direct reads on and off.
fn fixture(t: &TestLake) -> Fixture {
    let shared = Arc::new(SharedLake::new(t.open().unwrap()));
    let (subjects, source, last): (Vec<String>, String, DateTime<Utc>) = {
        let (conn, _) = shared.connect().unwrap();
        let mut stmt = conn
            .prepare("SELECT DISTINCT subject FROM lake.signals ORDER BY 1")
            .unwrap();
        let subjects = stmt
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let last = conn
            .query_row("SELECT max(\"timestamp\") FROM lake.signals", [], |r| {
                r.get(0)
            })
            .unwrap();
        let source = conn
            .query_row("SELECT min(source) FROM lake.signals", [], |r| r.get(0))
            .unwrap();
        (subjects, source, last)
    };
    assert_eq!(subjects.len(), 3);
    let direct = Engine::on(Arc::clone(&shared));
    // The engine asks once whether the rollups exist, outside any read: asked here, so the
    // stages count reads only.
    direct.latest_rows(&subjects[0], None, None).unwrap();
    direct.event_summaries(&subjects[0]).unwrap();
    Fixture {
        direct,
        scan: Engine::on(Arc::clone(&shared)).direct_file_reads(false),
        shared,
        subjects,
        source,
        last,
    }
}

/// Every deterministic aggregation kind, over windows that start and end inside days, on day
/// boundaries, across the whole fleet time, and before any data.
fn requests(f: &Fixture) -> Vec<AggregateRequest> {
    let end = (f.last + Duration::hours(1)).timestamp_micros();
    let day = 24 * HOUR_US;
    let windows = [
        (end - 3 * day, end, HOUR_US),
        (end - day - 7 * HOUR_US, end - 5 * HOUR_US, 3 * HOUR_US),
        (
            (end / day - 1) * day, // a UTC midnight
            (end / day) * day,
            day,
        ),
        (end - 40 * day, end - 30 * day, day),
    ];
    let floats = crate::DETERMINISTIC_FLOATS;
    let mut out = Vec::new();
    for subject in &f.subjects {
        for (from_us, to_us, interval_us) in windows {
            let request = AggregateRequest {
                subject: subject.clone(),
                source: None,
                interval_us,
                from_us,
                to_us,
                floats: floats
                    .iter()
                    .map(|agg| FloatRequest {
                        name: "speed".into(),
                        agg: *agg,
                        filter: None,
                    })
                    .collect(),
                strings: [StringAgg::Unique, StringAgg::First, StringAgg::Last]
                    .iter()
                    .map(|agg| StringRequest {
                        name: "powertrainType".into(),
                        agg: *agg,
                    })
                    .collect(),
                locations: [LocationAgg::Avg, LocationAgg::First, LocationAgg::Last]
                    .iter()
                    .map(|agg| LocationRequest {
                        name: "currentLocationCoordinates".into(),
                        agg: *agg,
                        filter: None,
                    })
                    .collect(),
            };
            // Without string aliases the engine answers in Rust over one read of the rows
            // (module `fold`); with them, by the one statement.
            out.push(AggregateRequest {
                strings: Vec::new(),
                ..request.clone()
            });
            out.push(request);
        }
    }
    out
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// Equal buckets; floats (sums in another order) to 1e-9.
fn assert_same(direct: &[Bucket], scan: &[Bucket], what: &str) {
    assert_eq!(direct.len(), scan.len(), "{what}: bucket count");
    for (d, s) in direct.iter().zip(scan) {
        assert_eq!(d.timestamp_us, s.timestamp_us, "{what}");
        assert_eq!(d.strings, s.strings, "{what}");
        assert_eq!(d.floats.len(), s.floats.len(), "{what}");
        for (k, v) in &d.floats {
            assert!(
                close(*v, s.floats[k]),
                "{what}: float {k} {v} vs {}",
                s.floats[k]
            );
        }
        assert_eq!(d.locations.len(), s.locations.len(), "{what}");
        for (k, v) in &d.locations {
            let w = s.locations[k];
            assert!(
                close(v.latitude, w.latitude) && close(v.longitude, w.longitude),
                "{what}: location {k} {v:?} vs {w:?}"
            );
        }
    }
}

/// Asks every request of both engines; returns how many buckets they held.
fn compare(f: &Fixture, stage: &str) -> usize {
    let mut buckets = 0;
    for (i, req) in requests(f).iter().enumerate() {
        let direct = f.direct.aggregate(req).unwrap();
        let scan = f.scan.aggregate(req).unwrap();
        assert_same(&direct, &scan, &format!("{stage}, request {i}"));
        buckets += direct.len();
    }
    buckets
}

/// The summaries' signal values, taken out (left 0) so the rest compares exactly while the
/// values, sums whose order may differ, compare with [`close`].
fn take_values<'a>(summaries: impl Iterator<Item = &'a mut Summary>) -> Vec<f64> {
    summaries
        .flat_map(|s| s.signals.iter_mut().map(|v| std::mem::take(&mut v.value)))
        .collect()
}

fn assert_close_all(direct: &[f64], scan: &[f64], what: &str) {
    assert_eq!(direct.len(), scan.len(), "{what}");
    for (d, s) in direct.iter().zip(scan) {
        assert!(close(*d, *s), "{what}: {d} vs {s}");
    }
}

/// `segments` and `dailyActivity` of every subject over the fleet's last two days, with signal
/// and event summaries: direct equals scan. Returns how many segments there were.
fn compare_activity(f: &Fixture, stage: &str) -> usize {
    let now = f.last + Duration::hours(1);
    let from = now - Duration::days(2);
    let signal_requests = vec![
        SignalRequest::new("speed", FloatAggregation::Avg),
        SignalRequest::new("speed", FloatAggregation::Max),
    ];
    let event_names: Vec<String> = vec![
        "behavior.harshBraking".into(),
        "behavior.harshAcceleration".into(),
    ];
    let mut segments = 0;
    for subject in &f.subjects {
        let q = SegmentsQuery {
            request: SegmentsRequest::new(subject, from, now, Mechanism::IgnitionDetection),
            signal_requests: signal_requests.clone(),
            event_names: event_names.clone(),
        };
        let what = format!("{stage}: segments of {subject}");
        let (mut direct, mut scan) = (
            f.direct.segments(&q, now).unwrap(),
            f.scan.segments(&q, now).unwrap(),
        );
        let values = take_values(direct.iter_mut().map(|s| &mut s.summary));
        assert_close_all(
            &values,
            &take_values(scan.iter_mut().map(|s| &mut s.summary)),
            &what,
        );
        assert_eq!(direct, scan, "{what}");
        segments += direct.len();
        let q = DailyActivityQuery {
            request: DailyActivityRequest::new(subject, from, now, Mechanism::IgnitionDetection),
            signal_requests: signal_requests.clone(),
            event_names: event_names.clone(),
        };
        let what = format!("{stage}: dailyActivity of {subject}");
        let (mut direct, mut scan) = (
            f.direct.daily_activity(&q, now).unwrap(),
            f.scan.daily_activity(&q, now).unwrap(),
        );
        let values = take_values(direct.iter_mut().map(|d| &mut d.summary));
        assert_close_all(
            &values,
            &take_values(scan.iter_mut().map(|d| &mut d.summary)),
            &what,
        );
        assert_eq!(direct, scan, "{what}");
    }
    segments
}

/// Latest values (the rollup, and the recompute a source filter takes) and event summaries of
/// every subject: direct equals scan. Returns how many rows there were.
fn compare_latest(f: &Fixture, stage: &str) -> usize {
    let mut rows = 0;
    for subject in &f.subjects {
        let what = format!("{stage}: latest of {subject}");
        let direct = f.direct.latest_rows(subject, None, None).unwrap();
        assert_eq!(
            direct,
            f.scan.latest_rows(subject, None, None).unwrap(),
            "{what}"
        );
        rows += direct.len();
        let source = Some(f.source.as_str());
        assert_eq!(
            f.direct.latest_rows(subject, source, None).unwrap(),
            f.scan.latest_rows(subject, source, None).unwrap(),
            "{what}, source {source:?}"
        );
        assert_eq!(
            f.direct.event_summaries(subject).unwrap(),
            f.scan.event_summaries(subject).unwrap(),
            "{stage}: event summaries of {subject}"
        );
    }
    rows
}

/// Every comparison of a stage; asserts every read of the direct engine took the files when
/// `direct` (false: a stage whose reads may fall back).
fn compare_all(f: &Fixture, stage: &str, direct: bool) {
    let (statements, reads) = (f.direct.reads(), f.direct.direct_reads());
    compare(f, stage);
    compare_activity(f, stage);
    assert!(compare_latest(f, stage) > 0, "{stage}: latest rows");
    if direct {
        assert_eq!(
            f.direct.direct_reads() - reads,
            f.direct.reads() - statements,
            "{stage}: every read took the files directly"
        );
    }
}

/// After a commit, every listing moves forward from the cached one instead of loading whole,
/// and holds the files of the buckets read, not of every bucket.
fn assert_refreshed(f: &Fixture, stage: &str) {
    let reports = f.direct.list_files(Some(&[])).unwrap();
    assert_eq!(reports.len(), 4, "{stage}");
    for r in reports {
        assert_eq!(r.source, ListingSource::Refreshed, "{stage}: {r:?}");
        assert!(r.usable && !r.complete, "{stage}: {r:?}");
    }
    assert!(f.scan.list_files(Some(&[])).unwrap().is_empty());
}

fn exec(f: &Fixture, sql: &str) {
    let (conn, _) = f.shared.connect().unwrap();
    conn.execute_batch(sql).unwrap();
}

/// With the data path on S3 (moto), the direct reads answer as the DuckLake scan, and a file
/// read once is not asked for again: DuckLake never changes a file, so a repeated read of the
/// same files sends no HTTP request (before: a HEAD per file per statement).
#[test]
fn direct_reads_on_s3_ask_for_a_file_once() {
    let moto = dq_testkit::shared_moto();
    let bucket = moto.create_unique_bucket("lake").unwrap();
    let mut t = TestLake::new(Backend::File);
    t.config.data_path = Some(format!("s3://{bucket}/lake/"));
    t.config.s3 = moto.s3_config();
    let f = seeded_and_compared(&t, "data on S3");

    exec(&f, "CALL enable_logging('HTTP')");
    let before = f.direct.direct_reads();
    let asked = requests(&f).len() as u64;
    for req in requests(&f) {
        f.direct.aggregate(&req).unwrap();
    }
    assert_eq!(f.direct.direct_reads() - before, asked, "direct reads");
    let (conn, _) = f.shared.connect().unwrap();
    let requests_sent: i64 = conn
        .query_row(
            "SELECT count(*) FROM duckdb_logs WHERE type = 'HTTP'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(requests_sent, 0, "HTTP requests of the repeated reads");
}

/// A 3-vehicle, 2-day fleet seeded into `t` and materialized, its [`fixture`], and the
/// `signals` aggregations compared on it: every one took the files directly (a window without
/// files reads an empty relation).
fn seeded_and_compared(t: &TestLake, stage: &str) -> Fixture {
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(crate::seed(t, 2, 4));
    let f = fixture(t);
    let asked = requests(&f).len() as u64;
    let before = f.direct.direct_reads();
    let buckets = compare(&f, stage);
    assert!(buckets > 100, "the windows hold data: {buckets} buckets");
    assert_eq!(
        f.direct.direct_reads() - before,
        asked,
        "{stage}: direct reads"
    );
    f
}

fn direct_reads_answer_as_the_lake_scan(backend: Backend) {
    let t = TestLake::new(backend);
    let f = seeded_and_compared(&t, "clean lake");
    let (statements, reads) = (f.direct.reads(), f.direct.direct_reads());
    let segments = compare_activity(&f, "clean lake");
    assert!(segments > 0, "the fleet drove");
    assert_eq!(
        f.direct.direct_reads() - reads,
        f.direct.reads() - statements,
        "every segments and dailyActivity statement read the files directly"
    );
    assert!(compare_latest(&f, "clean lake") > 0, "latest rows");
    assert_eq!(
        f.direct.direct_reads() - reads,
        f.direct.reads() - statements,
        "every statement, latest reads included, read the files directly"
    );
    assert_eq!(f.scan.direct_reads(), 0);

    // A new commit of a few rows: inlined in the catalog (DuckLake inlines ≤ 10 rows), so the
    // subject's bucket takes the scan, which must see them.
    let subject = &f.subjects[0];
    let at = f.last + Duration::minutes(1);
    exec(
        &f,
        &format!(
            "INSERT INTO lake.signals (subject, subject_bucket, name, \"timestamp\", source, \
               producer, cloud_event_id, value_number, value_string, loc_lat, loc_lon, loc_hdop, \
               loc_heading) \
             VALUES ('{subject}', {}, 'speed', '{}'::TIMESTAMPTZ, '0xsource', 'p', 'inlined-1', \
               12345.0, '', 0, 0, 0, 0)",
            dq_cloudevent::subject_bucket(subject),
            at.to_rfc3339()
        ),
    );
    assert_refreshed(&f, "inlined rows");
    let req = &requests(&f)[0];
    let direct = f.direct.aggregate(req).unwrap();
    let max = crate::DETERMINISTIC_FLOATS
        .iter()
        .position(|&agg| agg == FloatAggregation::Max)
        .unwrap();
    assert!(
        direct.iter().any(|b| b.floats[&max] == 12345.0),
        "the inlined row is read (max speed)"
    );
    compare_all(&f, "inlined rows", false);

    // Deletes: most of every subject's speed rows go, leaving delete files, and the inlined row
    // (no bucket has inlined rows left: every read is direct again).
    exec(
        &f,
        &format!(
            "DELETE FROM lake.signals WHERE name = 'speed' AND \
               (\"timestamp\" < '{}'::TIMESTAMPTZ OR cloud_event_id = 'inlined-1')",
            (f.last - Duration::hours(20)).to_rfc3339()
        ),
    );
    assert_refreshed(&f, "delete files");
    compare_all(&f, "delete files", true);

    // Deletes of a few rows, which DuckLake keeps in the catalog: a row of each table, each
    // rollup included (a void and a rollup rewrite delete this way).
    for subject in &f.subjects {
        exec(
            &f,
            &format!(
                "DELETE FROM lake.signals WHERE subject = '{subject}' AND \"timestamp\" = \
                   (SELECT max(\"timestamp\") FROM lake.signals WHERE subject = '{subject}'); \
                 DELETE FROM lake.signals_latest WHERE subject = '{subject}' AND \
                   name = (SELECT min(name) FROM lake.signals_latest WHERE subject = '{subject}'); \
                 DELETE FROM lake.events WHERE subject = '{subject}' AND \"timestamp\" = \
                   (SELECT max(\"timestamp\") FROM lake.events WHERE subject = '{subject}'); \
                 DELETE FROM lake.events_latest WHERE subject = '{subject}' AND \
                   name = (SELECT min(name) FROM lake.events_latest WHERE subject = '{subject}');"
            ),
        );
    }
    assert_refreshed(&f, "inlined deletes");
    compare_all(&f, "inlined deletes", true);

    // din's maintenance (its own process: this one's instance is closed first): inlined rows
    // flushed, delete-heavy files rewritten, adjacent files merged, every older snapshot
    // expired and its files removed.
    drop(f);
    let lake = t.open().unwrap();
    dq_dinsim::maintain::cycle(&lake, dq_dinsim::testing::tiny_retention()).unwrap();
    drop(lake);
    let f = fixture(&t);
    compare_all(&f, "after maintenance", true);
}
