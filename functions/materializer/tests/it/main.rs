//! Acceptance 8: every materializer sample event in `events/` goes through [`handler`] (no
//! runtime involved), on a file catalog and a PostgreSQL catalog. New handler tests go here;
//! `chaos.rs` kills the real binary (acceptance 3); `faults.rs` restarts PostgreSQL, invokes a
//! tick twice and hits the deadline (issue 10); `maintenance.rs` waits for the lease (issue 22).
// Integration-test helpers fail their test by panicking, like the #[test] bodies clippy.toml exempts.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::panic, clippy::indexing_slicing)]

mod chaos;
mod faults;
mod maintenance;

use dq_fn_materializer::{handler, Context, LocalArgs};
use dq_lake::backend_tests;
use dq_lake::testing::Backend;
use dq_materialize::Materializer;
use raw_fixture::status_row;
use serde_json::{json, Value};
use std::path::PathBuf;

backend_tests!(every_sample_event_runs);

const EVENTS: [(&str, &str); 5] = [
    (
        "scheduled",
        include_str!("../../../../events/materializer-scheduled.json"),
    ),
    (
        "backfill",
        include_str!("../../../../events/materializer-backfill.json"),
    ),
    (
        "prune",
        include_str!("../../../../events/materializer-prune.json"),
    ),
    (
        "rebuild-rollups",
        include_str!("../../../../events/materializer-rebuild-rollups.json"),
    ),
    (
        "audit",
        include_str!("../../../../events/materializer-audit.json"),
    ),
];

/// The committed cursor as an observer reads it (0 before the first pass created the row);
/// unlike `Materializer::cursor` it never re-seeds a missing row.
fn cursor(lake: &dq_lake::Lake) -> i64 {
    lake.conn()
        .query_row(
            "SELECT cursor FROM lake.ingest_progress WHERE partition = ?",
            [dq_tables::schema::CURSOR_PARTITION],
            |r| r.get::<_, String>(0),
        )
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// A multi-threaded runtime of two workers, on which every handler call of these tests runs.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The lease of `backend`: `dynamodb` on a fresh table of the shared moto server, anything else
/// the lock file `file`.
fn lease_of(rt: &tokio::runtime::Runtime, backend: &str, file: PathBuf) -> dq_lease::Lease {
    if backend != "dynamodb" {
        return dq_lease::Lease::local(file);
    }
    let moto = dq_testkit::shared_moto();
    let cfg = dq_lease::LeaseConfig {
        table: Some(dq_testkit::unique_name("lease")),
        endpoint: Some(moto.endpoint()),
        region: moto.region().to_owned(),
        access_key_id: Some(moto.access_key().to_owned()),
        secret_access_key: Some(moto.secret_key().to_owned()),
        ..dq_lease::LeaseConfig::default()
    };
    let lease = rt
        .block_on(dq_lease::Lease::from_config(
            &cfg,
            "/nonexistent/unused.lease",
        ))
        .unwrap();
    rt.block_on(lease.create_table_if_missing()).unwrap();
    lease
}

/// A raw status row committed the way din does, without the simulator.
mod raw_fixture {
    pub fn status_row(lake: &dq_lake::Lake, id: &str, time: &str) {
        let data = format!(r#"{{"signals":[{{"name":"speed","timestamp":"{time}","value":12}}]}}"#);
        lake.conn()
            .execute(
                "INSERT INTO lake.raw_events VALUES (?, ?::TIMESTAMPTZ, 'dimo.status', ?, 'src', '', \
                 'application/json', 'default/v1.0', '{}', ?, NULL, NULL, NULL)",
                [
                    "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:1",
                    time,
                    id,
                    &data,
                ],
            )
            .unwrap();
    }
}

fn every_sample_event_runs(backend: Backend) {
    let (t, lake) = dq_dinsim::testing::din_lake(backend);
    status_row(&lake, "a", "2025-06-02T10:00:00Z");
    status_row(&lake, "b", "2025-06-02T11:00:00Z");
    let m = Materializer::builder(lake).emf(false).build().unwrap();
    let ctx = Context::new(m, dq_lease::Lease::local(t.path("materializer.lease")));
    let rt = runtime();
    let mut pruned = 0;
    for (name, text) in EVENTS {
        let event: Value = serde_json::from_str(text).unwrap();
        let out = rt
            .block_on(handler(event, &ctx, name, None, true))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        match name {
            "scheduled" => {
                assert_eq!(out["action"], "materialize");
                assert_eq!(out["caught_up"], true, "{out}");
                assert_eq!(out["signal_rows"], 2, "{out}");
                assert_eq!(
                    out["lease"]["backend"]
                        .as_str()
                        .map(|b| b.starts_with("file:")),
                    Some(true)
                );
            }
            "backfill" => assert_eq!(
                (out["raw_rows"].as_u64(), out["signal_rows"].as_u64()),
                (Some(2), Some(0)),
                "{out}"
            ),
            "prune" => {
                // Retention is relative to now; the two rows are at fixed dates.
                let cutoff = out["cutoff"].as_str().unwrap();
                let older = ["2025-06-02T10:00:00Z", "2025-06-02T11:00:00Z"]
                    .iter()
                    .filter(|t| **t < cutoff)
                    .count();
                assert_eq!(out["signal_rows_deleted"], older, "{out}");
                pruned = older;
            }
            "rebuild-rollups" => {
                assert_eq!(out["signal_keys"], usize::from(pruned < 2), "{out}")
            }
            "audit" => assert_eq!(out["clean"], true, "{out}"),
            _ => unreachable!(),
        }
    }
    // One span only when not draining (the scheduled path in Lambda).
    let out = rt
        .block_on(handler(
            serde_json::from_str(EVENTS[0].1).unwrap(),
            &ctx,
            "tick",
            None,
            false,
        ))
        .unwrap();
    assert_eq!(out["spans"], 1);
    // A bad payload is a classed error.
    let err = rt
        .block_on(handler(json!({"action": "bogus"}), &ctx, "x", None, false))
        .unwrap_err();
    assert_eq!(err.class, "request");
}

/// One function serves every shard: each request's `"shard"` picks the buckets, the cursor row
/// and the lease item (here lock files); a request naming none runs as the configured shard,
/// whatever the environment served last.
#[test]
fn each_request_runs_as_its_shard() {
    let (t, lake) = dq_dinsim::testing::din_lake(Backend::File);
    // Subjects 1 and 2 of the fixture's contract: buckets 219 and 110, shards 1 and 0 of 2.
    status_row(&lake, "a", "2025-06-02T10:00:00Z");
    let m = Materializer::builder(lake)
        .shard(dq_materialize::Shard::new(0, 2).unwrap())
        .emf(false)
        .build()
        .unwrap();
    let ctx = Context::new(m, dq_lease::Lease::local(t.path("materializer.lease")));
    let rt = runtime();
    let run = |payload: Value| {
        rt.block_on(handler(payload, &ctx, "shard-test", None, true))
            .unwrap()
    };
    let one = run(json!({"action": "materialize", "shard": 1}));
    assert_eq!(one["shard"], "shard-1-of-2", "{one}");
    assert_eq!(one["signal_rows"], 1, "bucket 219 is shard 1's: {one}");
    assert!(
        one["lease"]["backend"]
            .as_str()
            .is_some_and(|b| b.ends_with("materializer-shard-1-of-2.lease")),
        "{one}"
    );
    let zero = run(json!({"action": "materialize"}));
    assert_eq!(
        zero["shard"], "shard-0-of-2",
        "the configured shard: {zero}"
    );
    assert_eq!(zero["signal_rows"], 0, "{zero}");
    let err = rt
        .block_on(handler(
            json!({"action": "materialize", "shard": 2}),
            &ctx,
            "shard-test",
            None,
            true,
        ))
        .unwrap_err();
    assert_eq!(err.class, "request", "{err}");
}

#[test]
fn local_args() {
    let a = LocalArgs::parse(["--once".to_owned()]).unwrap();
    assert_eq!(a.payload(), Some(json!({"action": "materialize"})));
    let a = LocalArgs::parse(
        [
            "--action",
            "backfill",
            "--from",
            "2025-01-01T00:00:00Z",
            "--to",
            "2025-01-02T00:00:00Z",
        ]
        .map(String::from),
    )
    .unwrap();
    assert_eq!(a.payload().unwrap()["from"], "2025-01-01T00:00:00Z");
    assert_eq!(LocalArgs::parse([]).unwrap().payload(), None);
    assert!(LocalArgs::parse(["stray".to_owned()]).is_err());
}
