//! One request, one snapshot: every statement a request runs inside `dq_lake::interruptible`
//! reads the snapshot its first statement saw, although commits land between its statements;
//! the next request sees them.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use dq_lake::testing::{Backend, TestLake};
use dq_lake::{backend_tests, SharedLake};
use dq_query::activity::{DailyActivityQuery, SegmentsQuery};
use dq_query::aggregate::{AggregateRequest, FloatAgg, FloatRequest};
use dq_query::events::EventsRequest;
use dq_query::segments::{DailyActivityRequest, Mechanism, SegmentsRequest};
use dq_query::Engine;

backend_tests!(a_request_reads_one_snapshot_while_commits_land);

/// Everything one request answers: the `signals` aggregation, the latest rows (rollup), the
/// events list, event summaries, `segments` and `dailyActivity`.
#[derive(Debug, PartialEq)]
struct Answers(String);

fn answers(e: &Engine, subject: &str, now: DateTime<Utc>) -> Answers {
    let from = now - Duration::days(2);
    let aggregate = e
        .aggregate(&AggregateRequest {
            subject: subject.into(),
            from_us: from.timestamp_micros(),
            to_us: now.timestamp_micros(),
            interval_us: 3_600_000_000,
            floats: vec![FloatRequest {
                name: "speed".into(),
                agg: FloatAgg::Max,
                filter: None,
            }],
            ..AggregateRequest::default()
        })
        .unwrap();
    let latest = e.latest_rows(subject, None, None).unwrap();
    let events = e
        .events(&EventsRequest {
            subject: subject.into(),
            from_us: from.timestamp_micros(),
            to_us: now.timestamp_micros(),
            ..EventsRequest::default()
        })
        .unwrap();
    let summaries = e.event_summaries(subject).unwrap();
    let segments = e
        .segments(
            &SegmentsQuery {
                request: SegmentsRequest::new(subject, from, now, Mechanism::IgnitionDetection),
                signal_requests: vec![],
                event_names: vec!["behavior.harshBraking".into()],
            },
            now,
        )
        .unwrap();
    let days = e
        .daily_activity(
            &DailyActivityQuery {
                request: DailyActivityRequest::new(
                    subject,
                    from,
                    now,
                    Mechanism::IgnitionDetection,
                ),
                signal_requests: vec![],
                event_names: vec!["behavior.harshBraking".into()],
            },
            now,
        )
        .unwrap();
    Answers(format!(
        "{aggregate:?}\n{latest:?}\n{events:?}\n{summaries:?}\n{segments:?}\n{days:?}"
    ))
}

/// One commit changing every answer of [`answers`]: a faster speed (signals and the rollup),
/// an ignition on/off pair (a new trip, or the end of one under way), and one more harsh
/// braking event (the events list, and the rollup the summaries read).
fn commit_changes(shared: &SharedLake, subject: &str, at: DateTime<Utc>) {
    let bucket = dq_cloudevent::subject_bucket(subject);
    let (conn, _) = shared.connect().unwrap();
    let ts = |d: Duration| format!("'{}'::TIMESTAMPTZ", (at + d).to_rfc3339());
    let signal = |name: &str, d: Duration, v: f64, id: &str| {
        format!(
            "('{subject}', {bucket}, '{name}', {}, '0xsource', 'p', '{id}', {v}, '', 0, 0, 0, 0)",
            ts(d)
        )
    };
    conn.execute_batch(&format!(
        "BEGIN;\n\
         INSERT INTO lake.signals (subject, subject_bucket, name, \"timestamp\", source, producer, \
           cloud_event_id, value_number, value_string, loc_lat, loc_lon, loc_hdop, loc_heading) \
         VALUES {}, {}, {};\n\
         UPDATE lake.signals_latest SET value_number = 99999.0 \
           WHERE subject = '{subject}' AND name = 'speed';\n\
         UPDATE lake.events_latest SET \"count\" = \"count\" + 1000 WHERE subject = '{subject}';\n\
         INSERT INTO lake.events (subject, subject_bucket, source, producer, cloud_event_id, name, \
           \"timestamp\", duration_ns, metadata, tags) \
         VALUES ('{subject}', {bucket}, '0xsource', 'p', 'late-event', 'behavior.harshBraking', \
           {}, 0, '', CAST([] AS VARCHAR[]));\n\
         COMMIT;",
        signal("speed", -Duration::minutes(30), 99999.0, "late-speed"),
        signal("isIgnitionOn", -Duration::hours(3), 1.0, "late-on"),
        signal("isIgnitionOn", -Duration::minutes(150), 0.0, "late-off"),
        ts(-Duration::minutes(20)),
    ))
    .unwrap();
}

fn a_request_reads_one_snapshot_while_commits_land(backend: Backend) {
    let t = TestLake::new(backend);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(crate::seed(&t, 2, 4));
    let shared = Arc::new(SharedLake::new(t.open().unwrap()));
    let engine = Arc::new(Engine::on(Arc::clone(&shared)));
    let (subject, last): (String, DateTime<Utc>) = {
        let (conn, _) = shared.connect().unwrap();
        conn.query_row(
            "SELECT subject, max(\"timestamp\") FROM lake.signals GROUP BY subject \
             ORDER BY count(*) FILTER (WHERE name = 'isIgnitionOn') DESC, 1 LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
    };
    let now = last + Duration::hours(1);

    let (e, s, l) = (Arc::clone(&engine), Arc::clone(&shared), subject.clone());
    let (first, second) = rt
        .block_on(dq_lake::interruptible(move || {
            let first = answers(&e, &l, now);
            commit_changes(&s, &l, last);
            (first, answers(&e, &l, now))
        }))
        .unwrap();
    assert_eq!(
        first, second,
        "a commit between a request's statements is not seen by it"
    );

    let next = rt
        .block_on(dq_lake::interruptible({
            let e = Arc::clone(&engine);
            move || answers(&e, &subject, now)
        }))
        .unwrap();
    for (what, before, after) in
        first
            .0
            .lines()
            .zip(next.0.lines())
            .enumerate()
            .map(|(i, (b, a))| {
                let what = [
                    "signals",
                    "latest",
                    "events",
                    "event summaries",
                    "segments",
                    "dailyActivity",
                ][i];
                (what, b.to_owned(), a.to_owned())
            })
    {
        assert_ne!(before, after, "the next request sees the commit in {what}");
    }
    // On PostgreSQL both requests asked over the lake's own catalog connection.
    let own = shared.newest().answered_by_own_connection();
    match backend {
        Backend::Postgres => assert!(own >= 2, "{own} asks answered by the own connection"),
        Backend::File => assert_eq!(own, 0),
    }
}
