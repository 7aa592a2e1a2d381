//! dq-query integration tests on a seeded fleet (sim → raw_events → materializer): the engine's
//! answers equal values computed here in Rust from the stored rows (dedup done in Rust), and
//! the rollup path equals the base-scan recompute.
// Integration-test helpers fail their test by panicking, like the #[test] bodies clippy.toml exempts.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::panic, clippy::indexing_slicing)]

mod activity;
mod direct;
mod snapshot;

use chrono::{DateTime, Duration, Utc};
use dq_lake::testing::{Backend, TestLake};
use dq_query::aggregate::{AggregateRequest, FloatAgg, FloatRequest, StringAgg, StringRequest};
use dq_query::Engine;
use std::collections::BTreeMap;

/// Every float aggregation whose answer is a function of the rows (all but `RAND`), in the
/// order `aggregations_and_latest_match_the_stored_rows` indexes them.
pub(crate) const DETERMINISTIC_FLOATS: [FloatAgg; 6] = [
    FloatAgg::Avg,
    FloatAgg::Max,
    FloatAgg::Min,
    FloatAgg::First,
    FloatAgg::Last,
    FloatAgg::Med,
];

struct Row {
    subject: String,
    name: String,
    ts: DateTime<Utc>,
    source: String,
    v: f64,
    s: String,
}

/// Seeds a 3-vehicle fleet of `days` days (every `duplicate_every`-th bundle redelivered) and
/// materializes it until caught up.
pub(crate) async fn seed(t: &TestLake, days: u32, duplicate_every: u32) {
    let lake = dq_dinsim::testing::open_din_lake(t);
    let m = dq_materialize::Materializer::builder(lake)
        .emf(false)
        .build()
        .unwrap();
    let writer = dq_dinsim::Writer::new(m.lake(), None);
    let opts = dq_dinsim::SeedOptions {
        fleet: dq_fleet::FleetConfig {
            vehicles: 3,
            days,
            ..dq_fleet::FleetConfig::default()
        },
        duplicate_every,
        ..dq_dinsim::SeedOptions::default()
    };
    dq_dinsim::seed(&writer, &opts, |_| {}).await.unwrap();
    dq_materialize::testing::drain_until_caught_up(&m).await;
}

/// A 3-vehicle, 1-day fleet with redelivered bundles, materialized; returns the engine and the
/// stored rows after R1 dedup (lowest cloud_event_id per subject, name, timestamp).
async fn seeded() -> (TestLake, Engine, Vec<Row>) {
    let t = TestLake::new(Backend::File);
    seed(&t, 1, 3).await;
    let lake = t.open().unwrap();
    let mut best: BTreeMap<(String, String, DateTime<Utc>), (String, Row)> = BTreeMap::new();
    for r in dq_materialize::testing::stored_signals(&lake) {
        let key = (r.subject.to_string(), r.name.to_string(), r.timestamp);
        let row = Row {
            subject: r.subject.to_string(),
            name: r.name.into_owned(),
            ts: r.timestamp,
            source: r.source.to_string(),
            v: r.value_number,
            s: r.value_string,
        };
        match best.get(&key) {
            Some((id, _)) if **id <= *r.cloud_event_id => {}
            _ => {
                best.insert(key, (r.cloud_event_id.to_string(), row));
            }
        }
    }
    let rows = best.into_values().map(|(_, r)| r).collect();
    (t, Engine::new(lake), rows)
}

fn us(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

#[tokio::test]
async fn aggregations_and_latest_match_the_stored_rows() {
    let (_t, engine, rows) = seeded().await;
    let subjects: Vec<String> = {
        let mut s: Vec<String> = rows.iter().map(|r| r.subject.clone()).collect();
        s.sort();
        s.dedup();
        s
    };
    assert!(!subjects.is_empty());
    let speeds = rows.iter().filter(|r| r.name == "speed").count();
    assert!(speeds > 100, "the fleet drives ({speeds} speed rows)");

    for subject in &subjects {
        let mine: Vec<&Row> = rows.iter().filter(|r| &r.subject == subject).collect();
        let Some(first) = mine.iter().map(|r| r.ts).min() else {
            continue;
        };
        // An origin that is not on a wall-clock boundary: buckets align to it.
        let from = first - Duration::seconds(17);
        let to = from + Duration::hours(24);
        let interval = Duration::minutes(90);
        let req = AggregateRequest {
            subject: subject.clone(),
            interval_us: interval.num_microseconds().unwrap(),
            from_us: us(from),
            to_us: us(to),
            floats: DETERMINISTIC_FLOATS
                .into_iter()
                .map(|agg| FloatRequest {
                    name: "speed".into(),
                    agg,
                    filter: None,
                })
                .collect(),
            strings: vec![StringRequest {
                name: "powertrainType".into(),
                agg: StringAgg::Unique,
            }],
            ..AggregateRequest::default()
        };
        let buckets = engine.aggregate(&req).unwrap();

        // Expected, bucket by bucket, from the deduped rows.
        let mut speed: BTreeMap<i64, Vec<(DateTime<Utc>, f64)>> = BTreeMap::new();
        let mut types: BTreeMap<i64, Vec<String>> = BTreeMap::new();
        for r in mine.iter().filter(|r| r.ts >= from && r.ts < to) {
            let b = (us(r.ts) - us(from)) / req.interval_us * req.interval_us + us(from);
            match r.name.as_str() {
                "speed" => speed.entry(b).or_default().push((r.ts, r.v)),
                "powertrainType" => types.entry(b).or_default().push(r.s.clone()),
                _ => {}
            }
        }
        let mut expected_buckets: Vec<i64> = speed.keys().chain(types.keys()).copied().collect();
        expected_buckets.sort();
        expected_buckets.dedup();
        let got: Vec<i64> = buckets.iter().map(|b| b.timestamp_us).collect();
        assert_eq!(got, expected_buckets, "{subject}: sparse ascending buckets");
        for b in &buckets {
            if let Some(vals) = speed.get(&b.timestamp_us) {
                let mut sorted: Vec<f64> = vals.iter().map(|(_, v)| *v).collect();
                sorted.sort_by(f64::total_cmp);
                let n = sorted.len();
                let avg = sorted.iter().sum::<f64>() / n as f64;
                let med = if n % 2 == 1 {
                    sorted[n / 2]
                } else {
                    (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
                };
                let first = vals.iter().min_by_key(|(t, _)| *t).unwrap().1;
                let last = vals.iter().max_by_key(|(t, _)| *t).unwrap().1;
                let f = &b.floats;
                assert!((f[&0] - avg).abs() <= 1e-9 * avg.abs().max(1.0), "avg");
                assert_eq!(f[&1], sorted[n - 1], "max");
                assert_eq!(f[&2], sorted[0], "min");
                assert_eq!(f[&3], first, "first");
                assert_eq!(f[&4], last, "last");
                assert!((f[&5] - med).abs() <= 1e-9 * med.abs().max(1.0), "median");
            } else {
                assert!(b.floats.is_empty());
            }
            if let Some(ts) = types.get(&b.timestamp_us) {
                let mut u = ts.clone();
                u.sort();
                u.dedup();
                assert_eq!(b.strings[&0], u.join(","), "unique");
            }
        }

        // Latest: the rollup equals the base-scan recompute (source-filtered with the only
        // source each name has) and the newest deduped row.
        let rollup = engine.latest_rows(subject, None, None).unwrap();
        assert!(!rollup.is_empty());
        for row in &rollup {
            let newest = mine
                .iter()
                .filter(|r| r.name == row.name)
                .max_by_key(|r| r.ts)
                .unwrap();
            assert_eq!(row.timestamp_us, us(newest.ts), "{}", row.name);
            let count = mine.iter().filter(|r| r.name == row.name).count();
            assert_eq!(row.count, count as i64, "{}: deduped count", row.name);
            let sources: Vec<&str> = {
                let mut s: Vec<&str> = mine
                    .iter()
                    .filter(|r| r.name == row.name)
                    .map(|r| r.source.as_str())
                    .collect();
                s.sort();
                s.dedup();
                s
            };
            if let [only] = sources.as_slice() {
                let scanned = engine
                    .latest_rows(subject, Some(only), Some(std::slice::from_ref(&row.name)))
                    .unwrap();
                assert_eq!(
                    scanned.as_slice(),
                    std::slice::from_ref(row),
                    "{}",
                    row.name
                );
            }
        }
        assert_eq!(
            dq_query::latest::last_seen(&rollup),
            mine.iter().map(|r| us(r.ts)).max()
        );
    }
}

#[tokio::test]
async fn validation_texts() {
    let (_t, engine, _) = seeded_empty();
    let base = AggregateRequest {
        subject: "did:x".into(),
        interval_us: 1,
        from_us: 1_000_000,
        to_us: 1_000_000 + 100_000 * 2,
        floats: vec![FloatRequest {
            name: "speed".into(),
            agg: FloatAgg::Avg,
            filter: None,
        }],
        ..AggregateRequest::default()
    };
    let err = |r: &AggregateRequest| engine.aggregate(r).unwrap_err().to_string();
    assert_eq!(
        err(&base),
        "invalid argument: interval too small for the requested window (exceeds the aggregation bucket limit)"
    );
    let ok = AggregateRequest {
        interval_us: 2,
        ..base.clone()
    };
    assert_eq!(engine.aggregate(&ok).unwrap(), vec![]);
    let reversed = AggregateRequest {
        from_us: 5_000_000,
        to_us: 1_000_000,
        interval_us: 1_000_000,
        ..base.clone()
    };
    assert!(err(&reversed).starts_with("invalid argument: "));
}

fn seeded_empty() -> (TestLake, Engine, ()) {
    let t = TestLake::new(Backend::File);
    let lake = t.open().unwrap();
    dq_tables::schema::ensure(&lake).unwrap();
    (t, Engine::new(lake), ())
}

/// A reopened instance (what a DuckDB invalidation triggers) serves the same answers, and the
/// connections pooled from the replaced instance are never handed out again.
#[tokio::test]
async fn a_reopened_lake_serves_the_same_answers() {
    let (t, _, rows) = seeded().await;
    let shared = std::sync::Arc::new(dq_lake::SharedLake::new(t.open().unwrap()));
    let engine = Engine::on(std::sync::Arc::clone(&shared));
    let subject = rows[0].subject.clone();
    let before = engine.latest_rows(&subject, None, None).unwrap();
    assert!(!before.is_empty());
    shared.recover(0).unwrap();
    assert_eq!(shared.generation(), 1);
    // A stale generation is a no-op: a second reader seeing the same failure reopens nothing.
    shared.recover(0).unwrap();
    assert_eq!(shared.generation(), 1);
    let after = engine.latest_rows(&subject, None, None).unwrap();
    assert_eq!(format!("{after:?}"), format!("{before:?}"));
}
