//! Issue 20: the next window is read, decoded and prepared while the current one is written (the same
//! span's next window, and in a drain the next span's first), and a span of small snapshots
//! stretches past `MATERIALIZER_MAX_SNAPSHOT_SPAN` while their raw rows fit one window.

use dq_dinsim::Writer;
use dq_lake::backend_tests;
use dq_lake::testing::{Backend, TestLake};
use dq_materialize::{Materializer, Outcome};

use crate::*;

backend_tests!(
    a_drain_reads_every_window_ahead_once,
    spans_of_small_snapshots_stretch_to_one_window,
    a_window_reads_up_to_its_byte_budget_in_one_statement
);

/// One bundle (one snapshot) of `rows` status events, ids prefixed by `tag`.
fn write_bundle(rt: &tokio::runtime::Runtime, m: &Materializer, tag: &str, rows: u32) {
    let events: Vec<_> = (0..rows)
        .map(|i| {
            status(
                i % 7,
                &format!("{tag}-{i}"),
                at(i64::from(i)),
                &[("speed", f64::from(i)), ("odometer", f64::from(i) * 2.0)],
            )
        })
        .collect();
    rt.block_on(Writer::new(m.lake(), None).write_bundle(&events))
        .unwrap();
}

fn a_drain_reads_every_window_ahead_once(backend: Backend) {
    let t = TestLake::new(backend);
    let rt = runtime();
    // 300-row windows, spans of 4 snapshots: 1,000-row bundles never stretch a span, so the
    // drain runs several spans of several windows each.
    let m = materializer(din_lake(&t), None);
    drain(&rt, &m);
    for tag in ["a", "b", "c", "d", "e", "f"] {
        write_bundle(&rt, &m, tag, 1_000);
    }
    let run = drain(&rt, &m);
    assert!(run.counts.windows >= 21, "{run:?}");
    // Every window but the drain's first was read while the one before it was written, the
    // first of each later span across the span boundary.
    assert_eq!(run.counts.read_ahead, run.counts.windows - 1, "{run:?}");
    // And its rows were prepared for writing (dedup, rollup delta, files) on that thread too.
    assert_eq!(run.counts.prepared_ahead, run.counts.read_ahead, "{run:?}");
    assert_eq!(
        run.counts.raw_rows, 6_000,
        "no window was read twice or skipped"
    );
    assert_decoded_everything(&rt, &m);

    // Caught up: the read-ahead of the snapshots dq itself committed is not taken for a span.
    let again = rt.block_on(m.run_span(None)).unwrap();
    assert_eq!(again.outcome, Outcome::CaughtUp, "{again:?}");
}

fn spans_of_small_snapshots_stretch_to_one_window(backend: Backend) {
    let t = TestLake::new(backend);
    let rt = runtime();
    let m = Materializer::builder(din_lake(&t))
        .window(350, 1 << 20)
        .chunk_rows(64)
        .max_snapshot_span(2)
        .emf(false)
        .build()
        .unwrap();
    drain(&rt, &m);
    for i in 0..8 {
        write_bundle(&rt, &m, &format!("b{i}"), 100);
    }
    // Two snapshots hold 200 rows; a third still fits the 350-row window, a fourth would not.
    let first = rt.block_on(m.run_span(None)).unwrap();
    assert_eq!(first.outcome, Outcome::Committed, "{first:?}");
    assert_eq!(
        (first.counts.windows, first.counts.raw_rows),
        (1, 300),
        "{first:?}"
    );
    // A snapshot larger than a window does not shorten a span below the snapshot bound.
    write_bundle(&rt, &m, "big", 1_000);
    let spans: Vec<_> = (0..3)
        .map(|_| rt.block_on(m.run_span(None)).unwrap().counts.raw_rows)
        .collect();
    assert_eq!(spans, [300, 200, 1_000]);
    assert_decoded_everything(&rt, &m);
}

fn a_window_reads_up_to_its_byte_budget_in_one_statement(backend: Backend) {
    let t = TestLake::new(backend);
    let rt = runtime();
    // Ten rows of one vehicle with payloads of one length, every other one a fingerprint (read
    // and counted, never decoded: its payload is not among the resolved bytes).
    let rows: Vec<_> = (0..10)
        .map(|i| {
            let mut e = status(1, &format!("r{i}"), at(i64::from(i)), &[("speed", 1.0)]);
            if i % 2 == 1 {
                e.header.event_type = dq_cloudevent::types::FINGERPRINT.into();
            }
            e
        })
        .collect();
    let len = rows[0].data.as_ref().unwrap().len();
    assert!(rows.iter().all(|e| e.data.as_ref().unwrap().len() == len));
    // A budget of three payloads: each window reads until its statuses' payloads reach it,
    // in one statement (rows 0–4, then the five left). Counting the fingerprints' payloads too
    // cut each read short of the budget the resolved statuses leave, and each window took three
    // statements, each a scan of the span.
    let m = Materializer::builder(din_lake(&t))
        .window(300, 3 * len)
        .chunk_rows(64)
        .emf(false)
        .build()
        .unwrap();
    drain(&rt, &m);
    rt.block_on(Writer::new(m.lake(), None).write_bundle(&rows))
        .unwrap();
    let run = drain(&rt, &m);
    // Two windows of one statement each, and the read ahead of the next span (the snapshots
    // the two windows committed), which finds no rows.
    assert_eq!(
        (
            run.counts.windows,
            run.counts.raw_rows,
            run.counts.feed_reads
        ),
        (2, 10, 3),
        "{run:?}"
    );
    assert_decoded_everything(&rt, &m);
}
