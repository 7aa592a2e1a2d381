//! Test oracles (feature `testing`): what the decoded tables must hold for the raw rows in a lake,
//! computed by decoding every raw row directly (not by the pass), and readers of what they do
//! hold. Shared by this crate's suite and the materializer function's chaos test.

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};
use dq_blob::BlobStore;
use dq_cloudevent::event::RawEvent;
use dq_decode::rows::{EventRow, SignalRow};
use dq_decode::{decode_batch, VehicleGate};
use dq_lake::Lake;

use crate::feed::{read_chunk, Source};

/// Every raw row of the lake, read in keyset order and resolved (extras, blobs, base64).
pub fn all_raw_rows(
    rt: &tokio::runtime::Runtime,
    lake: &Lake,
    blobs: Option<&Arc<BlobStore>>,
) -> crate::resolve::Resolved {
    let conn = lake.connect().unwrap();
    let rows = read_chunk(
        lake.redactor(),
        &conn,
        Source::Range {
            from: Utc.timestamp_opt(0, 0).unwrap(),
            to: Utc.timestamp_opt(4_000_000_000, 0).unwrap(),
        },
        None,
        100_000_000,
        usize::MAX,
    )
    .unwrap();
    rt.block_on(crate::resolve::resolve(
        // Rows lacking a header key are poison, as in the pass.
        rows.rows
            .into_iter()
            .filter(|r| r.missing.is_none())
            .map(|r| r.row)
            .collect(),
        blobs,
        crate::config::Config::default().blob_access_attempts,
    ))
    .unwrap()
}

/// What the decoded tables must hold: every raw row resolved, non-voided, `Key()`-deduplicated,
/// decoded, then one row per write key.
pub fn expected(
    rt: &tokio::runtime::Runtime,
    lake: &Lake,
    blobs: Option<&Arc<BlobStore>>,
) -> (Vec<SignalRow>, Vec<EventRow>) {
    let resolved = all_raw_rows(rt, lake, blobs);
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
    (
        sorted_signals(first_per_write_key(out.signal_rows)),
        sorted_events(first_per_write_key(out.event_rows)),
    )
}

/// What the oracle orders and deduplicates a decoded row by; signal and event rows share it.
trait DecodedRow {
    /// (subject, name, timestamp, cloud_event_id, subject_bucket): the canonical order (the
    /// bucket follows from the subject) and, without the subject, the W1 write key.
    fn identity(&self) -> (&str, &str, DateTime<Utc>, &str, i32);
}

// Both row types name the identity columns alike; one body serves them.
macro_rules! decoded_row {
    ($($row:ty),*) => {$(
        impl DecodedRow for $row {
            fn identity(&self) -> (&str, &str, DateTime<Utc>, &str, i32) {
                (
                    &self.subject,
                    &self.name,
                    self.timestamp,
                    &self.cloud_event_id,
                    self.subject_bucket,
                )
            }
        }
    )*};
}

decoded_row!(SignalRow, EventRow);

/// The first row of each write key, as the idempotent insert keeps it.
fn first_per_write_key<R: DecodedRow>(rows: Vec<R>) -> Vec<R> {
    let mut seen = BTreeSet::new();
    rows.into_iter()
        .filter(|r| {
            let (_, name, timestamp, id, bucket) = r.identity();
            seen.insert((bucket, id.to_owned(), name.to_owned(), timestamp))
        })
        .collect()
}

/// Rows in the canonical order (subject, name, timestamp, event id).
fn sorted<R: DecodedRow>(mut v: Vec<R>) -> Vec<R> {
    v.sort_by(|a, b| a.identity().cmp(&b.identity()));
    v
}

/// Signal rows in a canonical order (subject, name, timestamp, event id).
pub fn sorted_signals(v: Vec<SignalRow>) -> Vec<SignalRow> {
    sorted(v)
}

/// Event rows in a canonical order (subject, name, timestamp, event id).
pub fn sorted_events(v: Vec<EventRow>) -> Vec<EventRow> {
    sorted(v)
}

/// Everything in `lake.signals`.
pub fn stored_signals(lake: &Lake) -> Vec<SignalRow> {
    let conn = lake.connect().unwrap();
    let mut stmt = conn.prepare("SELECT * FROM lake.signals").unwrap();
    let rows = stmt
        .query_map([], |r| {
            let text = |i: usize| r.get::<_, String>(i);
            Ok(SignalRow {
                subject: text(0)?.into(),
                subject_bucket: r.get(1)?,
                name: text(2)?.into(),
                timestamp: r.get(3)?,
                source: text(4)?.into(),
                producer: text(5)?.into(),
                cloud_event_id: text(6)?.into(),
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

/// The single BIGINT a query returns.
pub fn count(lake: &Lake, sql: &str) -> i64 {
    lake.conn().query_row(sql, [], |r| r.get(0)).unwrap()
}

/// Runs one span as a writer with fencing token `fence` and no lease at all (a second stack, a
/// local run, a takeover after expiry): only the progress-row fence keeps it from duplicating
/// rows of a concurrent writer.
pub async fn run_span_bypassing_lease(
    m: &crate::Materializer,
    fence: i64,
) -> crate::Result<crate::SpanSummary> {
    m.run_span_as(crate::pass::Writer::bypassing_lease(fence), None, false)
        .await
}

/// Drains `m` until it has caught up with the raw table; fails the test if 100 runs do not get
/// there (each run reads at most its window budget, so a small fixture needs a few).
pub async fn drain_until_caught_up(m: &crate::Materializer) {
    for _ in 0..100 {
        if m.drain(None, None).await.unwrap().caught_up {
            return;
        }
    }
    panic!("the materializer did not catch up in 100 runs");
}
