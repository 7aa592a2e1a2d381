//! Acceptance 1: mixed-vendor sim traffic with duplicates, tombstones, blobs and base64 payloads
//! decodes to exactly the decoder's output for non-duplicate, non-voided events; schema setup.

use std::time::Duration;

use dq_dinsim::{SeedOptions, Writer};
use dq_fleet::FleetConfig;
use dq_lake::backend_tests;
use dq_lake::testing::{Backend, TestLake};
use dq_materialize::Outcome;
use pretty_assertions_free::assert_rows_eq;

use crate::*;

backend_tests!(
    end_to_end,
    schema_setup_is_idempotent,
    an_older_progress_table_gets_its_fence_column,
    keyset_never_skips_shared_keys
);

/// Tiny local stand-in for pretty_assertions: report the first differing row.
mod pretty_assertions_free {
    macro_rules! assert_rows_eq {
        ($left:expr, $right:expr, $what:expr) => {{
            let (l, r) = (&$left, &$right);
            if l != r {
                let i = l.iter().zip(r.iter()).position(|(a, b)| a != b).unwrap_or(l.len().min(r.len()));
                panic!(
                    "{}: {} stored vs {} expected; first difference at {i}:\n stored:   {:?}\n expected: {:?}",
                    $what,
                    l.len(),
                    r.len(),
                    l.get(i),
                    r.get(i)
                );
            }
        }};
    }
    pub(crate) use assert_rows_eq;
}

fn end_to_end(backend: Backend) {
    let t = TestLake::new(backend);
    let rt = runtime();
    let blobs = local_blobs(&t);
    let m = materializer(din_lake(&t), Some(blobs.clone()));
    let writer = Writer::new(m.lake(), Some(&blobs)).with_threshold(1536);
    let opts = SeedOptions {
        fleet: FleetConfig {
            vehicles: 3,
            days: 1,
            ..FleetConfig::default()
        },
        bundle_window: Duration::from_secs(3 * 3600),
        duplicate_every: 3,
        tombstone_every: 20,
        split_every: 5,
        late_every: 17,
    };
    let report = rt
        .block_on(dq_dinsim::seed(&writer, &opts, |_| {}))
        .unwrap();
    assert!(
        report.duplicate_bundles > 0 && report.tombstones > 0 && report.externalized > 0,
        "{report:?}"
    );
    // base64 payloads, one of them big enough for the blob store, and a redelivery of one.
    let big: Vec<(&str, f64)> = (0..40).map(|_| ("speed", 12.5)).collect();
    let b64 = vec![
        as_base64(status(
            1,
            "b64-small",
            at(10),
            &[("speed", 42.0), ("powertrainRange", 100.0)],
        )),
        as_base64(status(2, "b64-big", at(20), &big)),
    ];
    let mut events_event = status(1, "ev-1", at(30), &[]);
    events_event.header.event_type = "dimo.events".into();
    events_event.data = Some(format!(
        r#"{{"events":[{{"name":"safety.collision","timestamp":"{}","tags":[]}}]}}"#,
        at(30).to_rfc3339()
    ));
    let mut b64 = b64;
    b64.push(events_event.clone());
    events_event.header.id = "ev-2".into();
    b64.push(as_base64(events_event));
    rt.block_on(writer.write_bundle(&b64)).unwrap();
    rt.block_on(writer.write_bundle(&b64[..1])).unwrap();

    let first = drain(&rt, &m);
    assert!(first.caught_up);
    assert!(first.counts.voided > 0, "{first:?}");

    let (signals, events) = expected(&rt, m.lake(), Some(&blobs));
    assert!(signals
        .iter()
        .any(|r| &*r.cloud_event_id == "b64-small" && r.value_number == 42.0));
    assert!(signals.iter().any(|r| &*r.cloud_event_id == "b64-big"));
    assert!(
        events.iter().any(|r| r.cloud_event_id == "ev-2"),
        "base64 events decode"
    );
    assert_rows_eq!(stored_signals(m.lake()), signals, "signals");
    assert_rows_eq!(stored_events(m.lake()), events, "events");

    let again = rt.block_on(m.run_span(None)).unwrap();
    assert_eq!(again.outcome, Outcome::CaughtUp);
    assert_eq!(again.counts.raw_rows, 0);
    let audit = m.audit().unwrap();
    assert!(audit.clean, "{audit:?}");
    // Consumer floor reported at the cursor.
    let floor = dq_lake::progress::floor(m.lake(), chrono::Duration::hours(1)).unwrap();
    assert_eq!(floor, Some(m.cursor().unwrap()));

    // A rebuild leaves the rollups exactly as they were.
    let before = count(m.lake(), "SELECT count(*) FROM lake.signals_latest");
    m.rebuild_rollups().unwrap();
    assert_eq!(
        count(m.lake(), "SELECT count(*) FROM lake.signals_latest"),
        before
    );
    assert!(m.audit().unwrap().clean);

    // A raw row that breaks din's invariant (voids_id on a type other than dimo.tombstone),
    // which both voiding rules rely on, is reported.
    let stray = "type = 'dimo.status' AND id = 'b64-small'";
    let n = count(
        m.lake(),
        &format!("SELECT count(*) FROM lake.raw_events WHERE {stray}"),
    );
    assert!(n > 0);
    m.lake()
        .conn()
        .execute_batch(&format!(
            "UPDATE lake.raw_events SET voids_id = 'x' WHERE {stray}"
        ))
        .unwrap();
    let audit = m.audit().unwrap();
    assert_eq!(audit.stray_voids_rows, n, "{audit:?}");
    assert!(!audit.clean);
}

fn schema_setup_is_idempotent(backend: Backend) {
    let t = TestLake::new(backend);
    let lake = din_lake(&t);
    let report = dq_tables::schema::ensure(&lake).unwrap();
    assert_eq!(report.created.len(), 4);
    let head = dq_lake::progress::head(&lake).unwrap();
    let again = dq_tables::schema::ensure(&lake).unwrap();
    assert!(again.created.is_empty() && again.layout_statements == 0);
    assert_eq!(
        dq_lake::progress::head(&lake).unwrap(),
        head,
        "a reboot mints no snapshot"
    );
    assert_eq!(
        count(&lake, "SELECT count(*) FROM lake.ingest_progress"),
        0,
        "the materializer seeds its own cursor row"
    );
    let layout = dq_lake::raw::table_layout(&lake, "signals").unwrap();
    assert_eq!(layout.partition.len(), 4);
    assert_eq!(layout.sort.len(), 2);
    let cols: Vec<String> = layout.columns.iter().map(|c| c.0.clone()).collect();
    assert_eq!(
        cols[..4],
        ["subject", "subject_bucket", "name", "timestamp"]
    );
    // Self-heal: a lost cursor row is re-seeded.
    lake.exec("drop cursor", "DELETE FROM lake.ingest_progress")
        .unwrap();
    let m = materializer(lake, None);
    assert_eq!(m.cursor().unwrap(), 0);
    assert_eq!(
        count(m.lake(), "SELECT count(*) FROM lake.ingest_progress"),
        1
    );
}

/// A catalog whose `lake.ingest_progress` predates the fence (an older build, Go dq) gets the
/// fence and resume columns once, keeps its rows (the cursor and Go dq's daily watermark), and the cursor columns
/// read as before; every window then writes the writer's token into the cursor row.
fn an_older_progress_table_gets_its_fence_column(backend: Backend) {
    let t = TestLake::new(backend);
    let rt = runtime();
    let lake = din_lake(&t);
    lake.exec(
        "an older progress table",
        "CREATE TABLE lake.ingest_progress (partition VARCHAR, cursor VARCHAR);\n\
         INSERT INTO lake.ingest_progress VALUES ('lake.raw_events#snapshot', '0'), \
           ('lake.signals_latest#daily_watermark', '2026-08-01T00:00:00Z');",
    )
    .unwrap();
    let report = dq_tables::schema::ensure(&lake).unwrap();
    assert_eq!(
        report.columns_added,
        ["ingest_progress.fence", "ingest_progress.span_resume"]
    );
    assert!(dq_tables::schema::has_column(&lake, "ingest_progress", "fence").unwrap());
    assert!(dq_tables::schema::has_column(&lake, "ingest_progress", "span_resume").unwrap());
    let head = dq_lake::progress::head(&lake).unwrap();
    let again = dq_tables::schema::ensure(&lake).unwrap();
    assert!(again.columns_added.is_empty(), "{again:?}");
    assert_eq!(
        dq_lake::progress::head(&lake).unwrap(),
        head,
        "a reboot mints no snapshot"
    );
    assert_eq!(count(&lake, "SELECT count(*) FROM lake.ingest_progress"), 2);
    assert_eq!(
        count(
            &lake,
            "SELECT count(*) FROM lake.ingest_progress WHERE fence IS NULL"
        ),
        2
    );

    let m = materializer(lake, None);
    let writer = Writer::new(m.lake(), None);
    rt.block_on(writer.write_bundle(&[status(1, "a", at(0), &[("speed", 1.0)])]))
        .unwrap();
    let run = drain(&rt, &m);
    assert_eq!(run.counts.raw_rows, 1);
    let (cursor, fence): (String, Option<i64>) = m
        .lake()
        .conn()
        .query_row(
            "SELECT cursor, fence FROM lake.ingest_progress WHERE partition = 'lake.raw_events#snapshot'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(cursor, m.cursor().unwrap().to_string());
    assert!(m.cursor().unwrap() > 0);
    assert_eq!(fence, Some(0), "an unleased writer's token is 0");
    assert_eq!(
        count(
            m.lake(),
            "SELECT count(*) FROM lake.ingest_progress WHERE partition = 'lake.signals_latest#daily_watermark' \
             AND cursor = '2026-08-01T00:00:00Z' AND fence IS NULL"
        ),
        1,
        "other progress rows are left alone"
    );
}

/// Rows sharing (subject, time, id) but differing otherwise straddle a window edge; none is lost
/// (the Go keyset skipped the second one).
fn keyset_never_skips_shared_keys(backend: Backend) {
    let t = TestLake::new(backend);
    let rt = runtime();
    let lake = din_lake(&t);
    let m = Materializer::builder(lake)
        .window(1, 1 << 20)
        .chunk_rows(1)
        .emf(false)
        .build()
        .unwrap();
    let writer = Writer::new(m.lake(), None);
    let a = status(1, "same", at(0), &[("speed", 1.0)]);
    let mut b = status(1, "same", at(0), &[("powertrainRange", 2.0)]);
    b.header.source = "0x1111111111111111111111111111111111111111".into();
    rt.block_on(writer.write_bundle(&[a, b])).unwrap();
    let run = drain(&rt, &m);
    assert_eq!(run.counts.raw_rows, 2);
    let names: Vec<String> = stored_signals(m.lake())
        .into_iter()
        .map(|r| r.name.into_owned())
        .collect();
    assert_eq!(names, ["powertrainRange", "speed"]);
}
