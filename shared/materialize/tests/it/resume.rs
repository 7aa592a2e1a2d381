//! Issue 20 ("never stuck"): a span longer than one invocation. The deadline is checked between
//! windows, and a span cut short resumes after the windows it committed (their keyset position
//! is in the progress row), so a span longer than the Lambda timeout finishes in a few runs
//! instead of being redone from its start forever.

use std::time::Instant;

use dq_dinsim::Writer;
use dq_lake::backend_tests;
use dq_lake::testing::{Backend, TestLake};
use dq_materialize::{Materializer, Outcome, SpanSummary};

use crate::*;

backend_tests!(
    a_span_cut_short_resumes_after_its_committed_windows,
    a_takeover_resumes_where_the_previous_writer_stopped,
    an_unreadable_position_starts_the_span_over
);

/// Rows per bundle: with the test materializer's 300-row windows a span over one bundle takes 4.
const ROWS: u32 = 1_000;

/// A caught-up materializer on a fresh din lake.
fn caught_up(rt: &tokio::runtime::Runtime, t: &TestLake) -> Materializer {
    let m = materializer(din_lake(t), None);
    drain(rt, &m);
    m
}

/// One bundle (one snapshot) of `ROWS` status events, ids prefixed by `tag`; returns the
/// snapshot it committed.
fn write_bundle(rt: &tokio::runtime::Runtime, m: &Materializer, tag: &str) -> i64 {
    let events: Vec<_> = (0..ROWS)
        .map(|i| {
            status(
                i % 5,
                &format!("{tag}-{i}"),
                at(i64::from(i)),
                &[("speed", f64::from(i))],
            )
        })
        .collect();
    rt.block_on(Writer::new(m.lake(), None).write_bundle(&events))
        .unwrap()
        .snapshot
        .unwrap()
}

/// One span whose deadline has already passed: it runs exactly one window.
fn cut_short(rt: &tokio::runtime::Runtime, m: &Materializer) -> SpanSummary {
    rt.block_on(m.run_span_until(None, Some(Instant::now())))
        .unwrap()
}

fn a_span_cut_short_resumes_after_its_committed_windows(backend: Backend) {
    let t = TestLake::new(backend);
    let rt = runtime();
    let m = caught_up(&rt, &t);
    let cursor = m.cursor().unwrap();
    let span_end = write_bundle(&rt, &m, "a");

    let first = cut_short(&rt, &m);
    assert_eq!(first.outcome, Outcome::Paused, "{first:?}");
    assert!(!first.resumed);
    assert_eq!((first.counts.windows, first.counts.raw_rows), (1, 300));
    assert_eq!(
        m.cursor().unwrap(),
        cursor,
        "a paused span leaves the cursor"
    );

    // A commit landing meanwhile does not widen the span: its rows would sort before the
    // position. They are the next span's.
    write_bundle(&rt, &m, "b");
    let mut read = first.counts.raw_rows;
    let mut spans = vec![first];
    loop {
        let s = cut_short(&rt, &m);
        read += s.counts.raw_rows;
        let done = s.outcome == Outcome::Committed;
        spans.push(s);
        if done {
            break;
        }
        assert!(spans.len() < 10, "the span never finished: {spans:?}");
    }
    assert_eq!(
        spans.iter().map(|s| s.outcome).collect::<Vec<_>>(),
        [
            Outcome::Paused,
            Outcome::Paused,
            Outcome::Paused,
            Outcome::Committed
        ]
    );
    assert!(spans[1..].iter().all(|s| s.resumed), "{spans:?}");
    assert_eq!(read, u64::from(ROWS), "no committed window was read twice");
    assert_eq!(m.cursor().unwrap(), span_end, "the span kept its end");

    // The next span covers the later bundle from its start.
    let next = cut_short(&rt, &m);
    assert!(!next.resumed);
    assert_eq!(next.counts.raw_rows, 300);
    let run = drain(&rt, &m);
    assert_eq!(
        next.counts.raw_rows + run.counts.raw_rows,
        u64::from(ROWS),
        "{run:?}"
    );
    assert_decoded_everything(&rt, &m);
}

fn a_takeover_resumes_where_the_previous_writer_stopped(backend: Backend) {
    let t = TestLake::new(backend);
    let rt = runtime();
    let m = caught_up(&rt, &t);
    write_bundle(&rt, &m, "a");
    let first = cut_short(&rt, &m);
    assert_eq!(first.outcome, Outcome::Paused);
    // Another writer (a new lease holder, its own fencing token) finishes the span.
    let rest = rt
        .block_on(dq_materialize::testing::run_span_bypassing_lease(&m, 7))
        .unwrap();
    assert_eq!(rest.outcome, Outcome::Committed, "{rest:?}");
    assert!(rest.resumed);
    assert_eq!(rest.counts.raw_rows, u64::from(ROWS) - 300);
    assert_decoded_everything(&rt, &m);
}

fn an_unreadable_position_starts_the_span_over(backend: Backend) {
    let t = TestLake::new(backend);
    let rt = runtime();
    let m = caught_up(&rt, &t);
    write_bundle(&rt, &m, "a");
    assert_eq!(cut_short(&rt, &m).outcome, Outcome::Paused);
    m.lake()
        .exec(
            "garble the span position",
            "UPDATE lake.ingest_progress SET span_resume = 'not a position' \
             WHERE partition = 'lake.raw_events#snapshot'",
        )
        .unwrap();
    let again = rt.block_on(m.run_span(None)).unwrap();
    assert_eq!(again.outcome, Outcome::Committed);
    assert!(!again.resumed);
    assert_eq!(
        again.counts.raw_rows,
        u64::from(ROWS),
        "the whole span is read again"
    );
    assert_eq!(
        again.counts.signal_rows,
        u64::from(ROWS) - 300,
        "the committed window's rows are not written twice"
    );
    assert_decoded_everything(&rt, &m);
}
