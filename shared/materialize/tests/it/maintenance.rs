//! Maintenance beside the drain (issues 20 and 22): prune and backfill run in chunks, stop at
//! their deadline and resume, with the result of one unbounded run.

use std::time::{Duration, Instant};

use chrono::{DateTime, TimeZone, Utc};
use dq_cloudevent::RawEvent;
use dq_dinsim::Writer;
use dq_lake::backend_tests;
use dq_lake::testing::{Backend, TestLake};
use dq_lake::Lake;
use dq_materialize::Materializer;

use crate::*;

backend_tests!(
    prune_stopped_at_its_deadline_resumes,
    chunked_backfill_equals_unchunked
);

const DAY: Duration = Duration::from_secs(86_400);

/// Both rollups, one text line per row, sorted: what two lakes must agree on.
fn rollups(lake: &Lake) -> Vec<String> {
    let conn = lake.connect().unwrap();
    let mut out = Vec::new();
    for table in ["signals_latest", "events_latest"] {
        let mut stmt = conn
            .prepare(&format!(
                "SELECT CAST(t AS VARCHAR) AS r FROM lake.{table} t ORDER BY r"
            ))
            .unwrap();
        let rows = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        out.extend(rows.into_iter().map(|r| format!("{table}: {r}")));
    }
    out
}

fn day(d: u32, hour: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 6, 1 + d, hour, 0, 0).unwrap()
}

/// Three old days of two vehicles (speed and an odometer only those days report) and a recent
/// speed row per vehicle that a 30-day retention keeps.
fn old_and_recent_events() -> Vec<RawEvent> {
    let mut events = Vec::new();
    for d in 0..3u32 {
        for token in 1..=2u32 {
            for hour in [8, 12, 16] {
                let v = f64::from(d * 100 + hour);
                events.push(status(
                    token,
                    &format!("d{d}-{token}-{hour}"),
                    day(d, hour),
                    &[("speed", v), ("powertrainRange", v)],
                ));
            }
        }
    }
    // One instant per process: the lakes a test compares are seeded at different times.
    static RECENT: std::sync::OnceLock<DateTime<Utc>> = std::sync::OnceLock::new();
    let recent = *RECENT.get_or_init(|| Utc::now() - chrono::Duration::hours(1));
    for token in 1..=2u32 {
        events.push(status(
            token,
            &format!("recent-{token}"),
            recent,
            &[("speed", 1.0)],
        ));
    }
    events
}

/// A fresh lake holding [`old_and_recent_events`] as raw rows, not decoded yet.
fn seeded(rt: &tokio::runtime::Runtime, backend: Backend) -> (TestLake, Materializer) {
    let t = TestLake::new(backend);
    let m = materializer(din_lake(&t), None);
    rt.block_on(Writer::new(m.lake(), None).write_bundle(&old_and_recent_events()))
        .unwrap();
    (t, m)
}

fn prune_stopped_at_its_deadline_resumes(backend: Backend) {
    let rt = runtime();
    let retention = 30 * DAY;
    let (_ta, chunked) = seeded(&rt, backend);
    let (_tb, whole) = seeded(&rt, backend);
    drain(&rt, &chunked);
    drain(&rt, &whole);

    // A deadline already past allows one day: every run makes progress, then stops.
    let first = rt
        .block_on(chunked.prune(retention, Some(Instant::now()), None))
        .unwrap();
    assert!(!first.complete, "{first:?}");
    assert_eq!(first.chunks, 1, "{first:?}");
    assert_eq!(first.pruned_before, day(1, 0), "{first:?}");
    // Day 0: two vehicles, three events, two signals each.
    assert_eq!(first.signal_rows_deleted, 12, "{first:?}");
    let midway = chunked.audit().unwrap();
    assert!(
        midway.clean,
        "rollups stay right between chunks: {midway:?}"
    );
    assert_eq!(
        count(chunked.lake(), "SELECT count(*) FROM lake.signals"),
        26
    );

    let second = rt.block_on(chunked.prune(retention, None, None)).unwrap();
    assert!(second.complete, "{second:?}");
    assert_eq!(second.chunks, 2, "{second:?}");
    assert_eq!(second.pruned_before, second.cutoff, "{second:?}");

    let unbounded = rt.block_on(whole.prune(retention, None, None)).unwrap();
    assert!(unbounded.complete, "{unbounded:?}");
    assert_eq!(unbounded.chunks, 3, "{unbounded:?}");
    assert_eq!(unbounded.signal_rows_deleted, 36, "{unbounded:?}");
    assert_eq!(
        first.signal_rows_deleted + second.signal_rows_deleted,
        unbounded.signal_rows_deleted
    );

    let kept = stored_signals(chunked.lake());
    assert_eq!(kept.len(), 2, "only the recent rows are left");
    assert!(kept == stored_signals(whole.lake()), "decoded rows differ");
    assert_eq!(rollups(chunked.lake()), rollups(whole.lake()));
    assert!(
        rollups(chunked.lake())
            .iter()
            .all(|r| !r.contains("powertrainRange")),
        "the rollup rows of pruned-only signals are gone"
    );
    for m in [&chunked, &whole] {
        let audit = m.audit().unwrap();
        assert!(audit.clean, "{audit:?}");
    }

    // Nothing left: complete at once, nothing done.
    let again = rt.block_on(chunked.prune(retention, None, None)).unwrap();
    assert!(again.complete && again.chunks == 0, "{again:?}");
    assert_eq!(again.signal_rows_deleted, 0);
}

fn chunked_backfill_equals_unchunked(backend: Backend) {
    let rt = runtime();
    let (_ta, chunked) = seeded(&rt, backend);
    let (_tb, whole) = seeded(&rt, backend);
    // From mid-morning of day 0: the first chunk ends at the next UTC midnight.
    let (from, to) = (day(0, 6), day(3, 0));

    let first = rt
        .block_on(chunked.backfill_chunked(from, to, Some(DAY), Some(Instant::now()), None))
        .unwrap();
    assert!(!first.complete, "{first:?}");
    assert_eq!(first.chunks, 1, "{first:?}");
    assert_eq!(first.next_from, Some(day(1, 0)), "{first:?}");
    assert_eq!(first.counts.signal_rows, 12, "{first:?}");
    let midway = chunked.audit().unwrap();
    assert_eq!(
        (midway.signals_latest_diff, midway.duplicate_signal_rows),
        (0, 0),
        "{midway:?}"
    );

    let rest = rt
        .block_on(chunked.backfill_chunked(first.next_from.unwrap(), to, Some(DAY), None, None))
        .unwrap();
    assert!(rest.complete, "{rest:?}");
    assert_eq!((rest.chunks, rest.next_from), (2, None), "{rest:?}");

    let unchunked = rt.block_on(whole.backfill(from, to, None)).unwrap();
    assert!(unchunked.complete, "{unchunked:?}");
    assert_eq!(unchunked.chunks, 1, "{unchunked:?}");
    assert_eq!(unchunked.counts.signal_rows, 36, "{unchunked:?}");
    assert_eq!(
        first.counts.signal_rows + rest.counts.signal_rows,
        unchunked.counts.signal_rows
    );
    assert!(
        stored_signals(chunked.lake()) == stored_signals(whole.lake()),
        "decoded rows differ"
    );
    assert_eq!(rollups(chunked.lake()), rollups(whole.lake()));

    // The drain then adds only what the backfill did not cover, once.
    let (a, b) = (drain(&rt, &chunked), drain(&rt, &whole));
    assert_eq!(a.counts.signal_rows, 2, "{a:?}");
    assert_eq!(b.counts.signal_rows, 2, "{b:?}");
    assert!(
        stored_signals(chunked.lake()) == stored_signals(whole.lake()),
        "decoded rows differ after the drain"
    );
    assert_eq!(rollups(chunked.lake()), rollups(whole.lake()));
    let (want, _) = expected(&rt, chunked.lake(), None);
    assert!(
        stored_signals(chunked.lake()) == want,
        "rows differ from the oracle"
    );
    for m in [&chunked, &whole] {
        let audit = m.audit().unwrap();
        assert!(audit.clean, "{audit:?}");
    }
}
