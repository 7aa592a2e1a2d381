//! Materializer integration tests. Lake-touching bodies run on a file catalog AND a throwaway
//! PostgreSQL catalog through `dq_lake::backend_tests!`.
//!
//! Where new tests go:
//! - `e2e.rs`: whole-pipeline behaviour (acceptance 1) and schema setup.
//! - `poison.rs`: poison classification and transient aborts (acceptance 6).
//! - `expiry.rs`: expired change feed and backfill (acceptance 5).
//! - `rollups.rs`: rollups equal the recompute (acceptance 7, property test).
//! - `parallel.rs`: concurrent materializers on PostgreSQL (acceptance 2).
//! - `renewal.rs`: lease renewal around slow windows.
//! - `resume.rs`: spans cut short by the deadline resume after their committed windows.
//! - `maintenance.rs`: the drain yielding to a waiting maintenance run; chunked prune/backfill.
//! - `metrics.rs`: the EMF lines of a drain (stage/function dimensions).
//! - `own_writer.rs`: new signal rows as registered Parquet files (issue 20).
//! - `read_ahead.rs`: the next window read while this one is written; spans stretched to a window.
// Integration-test helpers fail their test by panicking, like the #[test] bodies clippy.toml exempts.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::panic, clippy::indexing_slicing)]

mod e2e;
mod expiry;
mod maintenance;
mod metrics;
mod own_writer;
mod parallel;
mod poison;
mod read_ahead;
mod renewal;
mod resume;
mod rollups;
mod shards;

use std::sync::Arc;

use base64::Engine;
use chrono::{DateTime, TimeZone, Utc};
use dq_blob::{BlobConfig, BlobStore};
use dq_cloudevent::event::RawEvent;
use dq_cloudevent::RawRow;
use dq_lake::testing::{Backend, TestLake};
use dq_lake::Lake;
pub use dq_materialize::testing::{
    count, expected, sorted_events, sorted_signals, stored_events, stored_signals,
};
use dq_materialize::Materializer;

pub use dq_dinsim::testing::VEHICLE;
pub const DEFAULT_SOURCE: &str = "0x0Ac7C7A6d1E85f5e9B2B63C9D2E7D8f0c1b2A395";

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

pub fn at(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_750_000_000 + secs, 0).unwrap()
}

pub use dq_dinsim::testing::open_din_lake as din_lake;

pub fn local_blobs(t: &TestLake) -> Arc<BlobStore> {
    Arc::new(
        runtime()
            .block_on(BlobStore::open(&BlobConfig::local(t.path("blobs"))))
            .unwrap(),
    )
}

/// A blob store on a fresh moto bucket reached through `proxy` (prefix `blobs/`, no sealing).
pub fn moto_store(rt: &tokio::runtime::Runtime, proxy: &dq_testkit::FaultProxy) -> Arc<BlobStore> {
    let moto = dq_testkit::shared_moto();
    let bucket = dq_testkit::unique_name("blobs");
    moto.create_bucket(&bucket).unwrap();
    Arc::new(
        rt.block_on(BlobStore::open(&BlobConfig {
            bucket,
            prefix: "blobs/".into(),
            s3: moto.s3_config_via(&proxy.endpoint()),
            ..BlobConfig::default()
        }))
        .unwrap(),
    )
}

/// A fault proxy in front of the shared moto server.
pub fn moto_proxy() -> dq_testkit::FaultProxy {
    let port = dq_testkit::shared_moto().port();
    dq_testkit::FaultProxy::start(std::net::SocketAddr::from(([127, 0, 0, 1], port))).unwrap()
}

/// A test materializer: small windows and chunks so spans take several windows.
pub fn materializer(lake: Lake, blobs: Option<Arc<BlobStore>>) -> Materializer {
    Materializer::builder(lake)
        .blobs(blobs)
        .window(300, 1 << 20)
        .chunk_rows(64)
        .max_snapshot_span(4)
        .emf(false)
        .build()
        .unwrap()
}

/// A default-module status event.
pub fn status(token: u32, id: &str, time: DateTime<Utc>, signals: &[(&str, f64)]) -> RawEvent {
    let items: Vec<String> = signals
        .iter()
        .map(|(name, v)| {
            format!(
                r#"{{"name":"{name}","timestamp":"{}","value":{v}}}"#,
                time.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            )
        })
        .collect();
    dq_dinsim::testing::EventBuilder::new(format!("{VEHICLE}:{token}"), id, "dimo.status", time)
        .source(DEFAULT_SOURCE)
        .producer(format!(
            "did:erc721:137:0x4804e8D1661cd1a1e5dDdE1ff458A7f878c0aC6D:{token}"
        ))
        .data(format!(r#"{{"signals":[{}]}}"#, items.join(",")))
}

/// Stores the payload of vehicle 1's status at `time` (speed 7) at `key` in `store`, as din
/// externalizes one; [`blob_row`] points a row at it.
pub fn put_payload(
    rt: &tokio::runtime::Runtime,
    store: &BlobStore,
    key: &str,
    time: DateTime<Utc>,
) {
    let payload = status(1, "x", time, &[("speed", 7.0)]).data.unwrap();
    rt.block_on(store.put(key, payload.as_bytes())).unwrap();
}

/// A row of vehicle 1's status `id` whose payload is the blob at `key`.
pub fn blob_row(id: &str, key: &str) -> RawRow {
    let mut row = RawRow::from_event(&status(1, id, at(1), &[("speed", 1.0)]));
    row.data = None;
    row.data_index_key = Some(key.into());
    row
}

/// The same event with its payload as `data_base64`.
pub fn as_base64(mut e: RawEvent) -> RawEvent {
    let data = e.data.take().unwrap();
    e.data_base64 = Some(base64::engine::general_purpose::STANDARD.encode(data));
    e
}

/// The decoded tables equal the oracle over the raw rows, and the audit is clean.
pub fn assert_decoded_everything(rt: &tokio::runtime::Runtime, m: &Materializer) {
    let (signals, events) = expected(rt, m.lake(), None);
    assert_eq!(stored_signals(m.lake()), signals);
    assert_eq!(stored_events(m.lake()), events);
    assert!(m.audit().unwrap().clean);
}

/// Drains until caught up; returns the total raw rows read.
pub fn drain(rt: &tokio::runtime::Runtime, m: &Materializer) -> dq_materialize::RunSummary {
    let mut total = dq_materialize::RunSummary::default();
    for _ in 0..200 {
        let run = rt.block_on(m.drain(None, None)).unwrap();
        let caught_up = run.caught_up;
        total.counts.add(&run.counts);
        total.cursor_resets += run.cursor_resets;
        total.skipped_snapshots += run.skipped_snapshots;
        total.batches += run.batches;
        total.to = run.to;
        if caught_up {
            total.caught_up = true;
            return total;
        }
    }
    panic!("materializer did not catch up");
}

#[allow(dead_code)]
pub fn backend_name(b: Backend) -> &'static str {
    match b {
        Backend::File => "file",
        Backend::Postgres => "postgres",
    }
}
