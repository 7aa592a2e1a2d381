//! Materializer integration tests. Lake-touching bodies run on a file catalog AND a throwaway
//! PostgreSQL catalog through `lake::backend_tests!`.
//!
//! Where new tests go:
//! - `e2e.rs`: whole-pipeline behaviour (acceptance 1) and schema setup.
//! - `poison.rs`: poison classification and transient aborts (acceptance 6).
//! - `expiry.rs`: expired change feed and backfill (acceptance 5).
//! - `rollups.rs`: rollups equal the recompute (acceptance 7, property test).
//! - `parallel.rs`: concurrent materializers on PostgreSQL (acceptance 2).

mod e2e;
mod expiry;
mod parallel;
mod poison;
mod rollups;

use std::collections::BTreeSet;
use std::sync::Arc;

use base64::Engine;
use blob::{BlobConfig, BlobStore};
use chrono::{DateTime, TimeZone, Utc};
use dq_cloudevent::event::{CloudEventHeader, RawEvent};
use dq_decode::rows::{EventRow, SignalRow};
use dq_decode::{decode_batch, VehicleGate};
use lake::testing::{Backend, TestLake};
use lake::Lake;
use materialize::feed::{read_chunk, Source};
use materialize::Materializer;

pub const VEHICLE: &str = "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF";
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

/// A lake as din leaves it after first boot (raw_events + consumer table).
pub fn din_lake(t: &TestLake) -> Lake {
    let lake = t.open().unwrap();
    lake::raw::ensure(&lake).unwrap();
    lake::progress::ensure(&lake).unwrap();
    lake
}

pub fn local_blobs(t: &TestLake) -> Arc<BlobStore> {
    Arc::new(
        runtime()
            .block_on(BlobStore::open(&BlobConfig::local(t.path("blobs"))))
            .unwrap(),
    )
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
    RawEvent {
        header: CloudEventHeader {
            spec_version: "1.0".into(),
            event_type: "dimo.status".into(),
            source: DEFAULT_SOURCE.into(),
            subject: format!("{VEHICLE}:{token}"),
            id: id.into(),
            time,
            data_content_type: "application/json".into(),
            data_version: "default/v1.0".into(),
            producer: format!("did:erc721:137:0x4804e8D1661cd1a1e5dDdE1ff458A7f878c0aC6D:{token}"),
            ..Default::default()
        },
        data: Some(format!(r#"{{"signals":[{}]}}"#, items.join(","))),
        data_base64: None,
    }
}

/// The same event with its payload as `data_base64`.
pub fn as_base64(mut e: RawEvent) -> RawEvent {
    let data = e.data.take().unwrap();
    e.data_base64 = Some(base64::engine::general_purpose::STANDARD.encode(data));
    e
}

/// Drains until caught up; returns the total raw rows read.
pub fn drain(rt: &tokio::runtime::Runtime, m: &Materializer) -> materialize::RunSummary {
    let mut total = materialize::RunSummary::default();
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

/// What the decoded tables must hold: every raw row resolved, non-voided, `Key()`-deduplicated,
/// decoded, then one row per write key.
pub fn expected(
    rt: &tokio::runtime::Runtime,
    lake: &Lake,
    blobs: Option<&Arc<BlobStore>>,
) -> (Vec<SignalRow>, Vec<EventRow>) {
    let conn = lake.connect().unwrap();
    let rows = read_chunk(
        lake,
        &conn,
        Source::Range {
            from: Utc.timestamp_opt(0, 0).unwrap(),
            to: Utc.timestamp_opt(4_000_000_000, 0).unwrap(),
        },
        None,
        10_000_000,
    )
    .unwrap();
    let resolved = rt
        .block_on(materialize::resolve::resolve(
            rows.into_iter().map(|r| r.row).collect(),
            blobs,
        ))
        .unwrap();
    let events: Vec<RawEvent> = resolved
        .events
        .into_iter()
        .filter(|e| {
            !resolved
                .voided
                .contains(&(e.header.subject.clone(), e.header.id.clone()))
        })
        .collect();
    let out = decode_batch(&events, &VehicleGate::DISABLED, Utc::now());
    let mut seen = BTreeSet::new();
    let signals = out
        .signal_rows
        .into_iter()
        .filter(|r| {
            seen.insert((
                r.subject_bucket,
                r.cloud_event_id.clone(),
                r.name.clone(),
                r.timestamp,
            ))
        })
        .collect();
    let mut seen = BTreeSet::new();
    let events = out
        .event_rows
        .into_iter()
        .filter(|r| {
            seen.insert((
                r.subject_bucket,
                r.cloud_event_id.clone(),
                r.name.clone(),
                r.timestamp,
            ))
        })
        .collect();
    (sorted_signals(signals), sorted_events(events))
}

pub fn sorted_signals(mut v: Vec<SignalRow>) -> Vec<SignalRow> {
    v.sort_by(|a, b| {
        (&a.subject, &a.name, a.timestamp, &a.cloud_event_id).cmp(&(
            &b.subject,
            &b.name,
            b.timestamp,
            &b.cloud_event_id,
        ))
    });
    v
}

pub fn sorted_events(mut v: Vec<EventRow>) -> Vec<EventRow> {
    v.sort_by(|a, b| {
        (&a.subject, &a.name, a.timestamp, &a.cloud_event_id).cmp(&(
            &b.subject,
            &b.name,
            b.timestamp,
            &b.cloud_event_id,
        ))
    });
    v
}

/// Everything in `lake.signals`.
pub fn stored_signals(lake: &Lake) -> Vec<SignalRow> {
    let conn = lake.connect().unwrap();
    let mut stmt = conn.prepare("SELECT * FROM lake.signals").unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok(SignalRow {
                subject: r.get(0)?,
                subject_bucket: r.get(1)?,
                name: r.get(2)?,
                timestamp: r.get(3)?,
                source: r.get(4)?,
                producer: r.get(5)?,
                cloud_event_id: r.get(6)?,
                value_number: r.get(7)?,
                value_string: r.get(8)?,
                loc_lat: r.get(9)?,
                loc_lon: r.get(10)?,
                loc_hdop: r.get(11)?,
                loc_heading: r.get(12)?,
            })
        })
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    sorted_signals(rows)
}

/// Everything in `lake.events` (tags read as JSON text).
pub fn stored_events(lake: &Lake) -> Vec<EventRow> {
    let conn = lake.connect().unwrap();
    let mut stmt = conn
        .prepare("SELECT subject, subject_bucket, source, producer, cloud_event_id, type, data_version, name, \"timestamp\", duration_ns, metadata, to_json(tags)::VARCHAR FROM lake.events")
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            let tags: String = r.get(11)?;
            Ok(EventRow {
                subject: r.get(0)?,
                subject_bucket: r.get(1)?,
                source: r.get(2)?,
                producer: r.get(3)?,
                cloud_event_id: r.get(4)?,
                event_type: r.get(5)?,
                data_version: r.get(6)?,
                name: r.get(7)?,
                timestamp: r.get(8)?,
                duration_ns: r.get(9)?,
                metadata: r.get(10)?,
                tags: serde_json::from_str(&tags).unwrap(),
            })
        })
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    sorted_events(rows)
}

pub fn count(lake: &Lake, sql: &str) -> i64 {
    lake.conn().query_row(sql, [], |r| r.get(0)).unwrap()
}

#[allow(dead_code)]
pub fn backend_name(b: Backend) -> &'static str {
    match b {
        Backend::File => "file",
        Backend::Postgres => "postgres",
    }
}
