//! Acceptance 7: after random duplicate, out-of-order and replayed batches, the rollups equal
//! the full recompute from the deduplicated base; prune keeps them equal.

use dq_dinsim::Writer;
use dq_lake::testing::{Backend, TestLake};
use proptest::prelude::*;

use crate::*;

const NAMES: [&str; 3] = [
    "speed",
    "powertrainRange",
    "powertrainTransmissionTravelledDistance",
];

#[derive(Debug, Clone)]
struct Ev {
    token: u32,
    id: u8,
    secs: i64,
    signals: Vec<(usize, i32)>,
}

fn ev() -> impl Strategy<Value = Ev> {
    (
        0u32..3,
        0u8..12,
        0i64..6,
        prop::collection::vec((0usize..3, -5i32..5), 1..3),
    )
        .prop_map(|(token, id, secs, signals)| Ev {
            token,
            id,
            secs,
            signals,
        })
}

fn to_event(e: &Ev) -> dq_cloudevent::RawEvent {
    let sigs: Vec<(&str, f64)> = e
        .signals
        .iter()
        .map(|(n, v)| (NAMES[*n], f64::from(*v)))
        .collect();
    // The same id at another time or with other values is a collision the keys must absorb.
    status(e.token, &format!("id{}", e.id), at(e.secs * 3600), &sigs)
}

fn run(batches: Vec<Vec<Ev>>, replay: Vec<usize>, drain_every: usize) {
    let t = TestLake::new(Backend::File);
    let rt = runtime();
    let m = materializer(din_lake(&t), None);
    let writer = Writer::new(m.lake(), None);
    let mut committed: Vec<Vec<dq_cloudevent::RawEvent>> = Vec::new();
    for (i, batch) in batches.iter().enumerate() {
        let events: Vec<_> = batch.iter().map(to_event).collect();
        rt.block_on(writer.write_bundle(&events)).unwrap();
        committed.push(events);
        if let Some(&r) = replay.get(i) {
            let again = committed[r % committed.len()].clone();
            rt.block_on(writer.write_bundle(&again)).unwrap();
        }
        if drain_every > 0 && i % drain_every == 0 {
            drain(&rt, &m);
            let a = m.audit().unwrap();
            assert_eq!(
                (a.signals_latest_diff, a.events_latest_diff),
                (0, 0),
                "{a:?}"
            );
        }
    }
    drain(&rt, &m);
    let a = m.audit().unwrap();
    assert!(a.clean, "{a:?}");
    let pruned = rt
        .block_on(m.prune(std::time::Duration::from_secs(0), None, None))
        .unwrap();
    assert!(pruned.signal_rows_deleted > 0);
    assert!(m.audit().unwrap().clean);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4, max_shrink_iters: 8, ..ProptestConfig::default() })]
    #[test]
    fn rollups_equal_recompute(
        batches in prop::collection::vec(prop::collection::vec(ev(), 1..6), 2..6),
        replay in prop::collection::vec(0usize..6, 0..4),
        drain_every in 0usize..3,
    ) {
        run(batches, replay, drain_every);
    }
}

/// Two events of one vehicle with a speed at one time, in one window of rows new to the lake
/// (nothing at rest to collide with): the rollup keeps one row for them, as the read dedup does
/// (the lowest `cloud_event_id` wins), so the merge must deduplicate that subject's new rows.
#[test]
fn a_window_with_two_rows_of_one_read_key_folds_them_into_one() {
    let t = TestLake::new(Backend::File);
    let rt = runtime();
    // One span over every snapshot: the rows meet in one window.
    let m = dq_materialize::Materializer::builder(din_lake(&t))
        .max_snapshot_span(1_000)
        .emf(false)
        .build()
        .unwrap();
    let writer = Writer::new(m.lake(), None);
    rt.block_on(writer.write_bundle(&[
        status(1, "id-b", at(3600), &[("speed", 2.0)]),
        status(
            1,
            "id-a",
            at(3600),
            &[("speed", 1.0), ("powertrainRange", 5.0)],
        ),
        status(2, "id-c", at(3600), &[("speed", 3.0)]),
    ]))
    .unwrap();
    let run = drain(&rt, &m);
    assert_eq!(run.counts.windows, 1, "one window: {run:?}");
    let a = m.audit().unwrap();
    assert!(a.clean, "{a:?}");
    let speeds: Vec<(i64, f64)> = {
        let conn = m.lake().conn();
        let mut stmt = conn
            .prepare(
                "SELECT \"count\", value_number FROM lake.signals_latest \
                 WHERE name = 'speed' ORDER BY subject",
            )
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    assert_eq!(speeds, [(1, 1.0), (1, 3.0)]);
}
