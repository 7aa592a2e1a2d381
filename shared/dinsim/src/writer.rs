//! The sink side of din: one bundle = blob externalization first, then ONE transaction with ONE
//! bulk append into `lake.raw_events` = exactly one snapshot.

use std::sync::Arc;

use base64::Engine;
use chrono::{DateTime, Utc};
use dq_blob::BlobStore;
use dq_cloudevent::event::RawEvent;
use dq_cloudevent::row::RawRow;
use dq_lake::duckdb::arrow::array::{
    ArrayRef, BinaryBuilder, StringBuilder, TimestampMicrosecondBuilder,
};
use dq_lake::duckdb::arrow::record_batch::RecordBatch;
use dq_lake::{progress, raw, retry, Lake};

use crate::{Error, Result};

/// din's externalization threshold: payloads strictly larger than this go to the blob store.
pub const DEFAULT_DOCUMENT_SIZE_THRESHOLD: usize = 1 << 20;

/// Writes bundles the way din's sink does.
pub struct Writer<'a> {
    lake: &'a Lake,
    blobs: Option<&'a BlobStore>,
    threshold: usize,
    now: fn() -> DateTime<Utc>,
}

/// What one committed bundle did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BundleReport {
    /// Rows appended.
    pub rows: usize,
    /// Payloads moved to the blob store.
    pub externalized: usize,
    /// The catalog head right after the commit (`None` for an empty bundle, which commits nothing).
    pub snapshot: Option<i64>,
}

impl<'a> Writer<'a> {
    /// A writer on `lake`; without a blob store, payloads over the threshold are an error.
    pub fn new(lake: &'a Lake, blobs: Option<&'a BlobStore>) -> Self {
        Self {
            lake,
            blobs,
            threshold: DEFAULT_DOCUMENT_SIZE_THRESHOLD,
            now: Utc::now,
        }
    }

    /// Sets `DOCUMENT_SIZE_THRESHOLD` (≤ 0 means the default, as in din).
    pub fn with_threshold(mut self, threshold: usize) -> Self {
        self.threshold = if threshold == 0 {
            DEFAULT_DOCUMENT_SIZE_THRESHOLD
        } else {
            threshold
        };
        self
    }

    /// Turns events into rows, writing each oversized payload to the blob store first (a crash
    /// after this leaves an orphan blob, never a row without its blob).
    pub async fn prepare(&self, events: &[RawEvent]) -> Result<(Vec<RawRow>, usize)> {
        let mut rows = Vec::with_capacity(events.len());
        let mut externalized = 0;
        for event in events {
            let mut row = RawRow::from_event(event);
            if payload_size(event) > self.threshold {
                let store = self.blobs.ok_or(Error::NoBlobStore {
                    id: event.header.id.clone(),
                })?;
                let key = store.new_key(&event.header.subject, (self.now)());
                let body = blob_body(event)?;
                store.put(&key, &body).await?;
                row.data = None;
                row.data_base64 = None;
                row.data_index_key = Some(key);
                externalized += 1;
            }
            rows.push(row);
        }
        Ok((rows, externalized))
    }

    /// Externalizes and commits `events` as one bundle.
    pub async fn write_bundle(&self, events: &[RawEvent]) -> Result<BundleReport> {
        let (rows, externalized) = self.prepare(events).await?;
        let snapshot = self.commit(&rows)?;
        Ok(BundleReport {
            rows: rows.len(),
            externalized,
            snapshot,
        })
    }

    /// Commits prepared rows in one transaction with one bulk append; retried on a commit
    /// conflict like din (3 attempts). An empty slice commits nothing and mints no snapshot.
    pub fn commit(&self, rows: &[RawRow]) -> Result<Option<i64>> {
        if rows.is_empty() {
            return Ok(None);
        }
        let batch = to_record_batch(rows)?;
        retry::on_conflict("commit bundle", || {
            let mut conn = self.lake.connect()?;
            let tx = conn
                .transaction()
                .map_err(|e| self.lake.error("begin bundle", e))?;
            {
                let mut app = tx
                    .appender_to_catalog_and_db(raw::TABLE, dq_lake::LAKE, "main")
                    .map_err(|e| self.lake.error("open raw_events appender", e))?;
                app.append_record_batch(batch.clone())
                    .map_err(|e| self.lake.error("append bundle", e))?;
                app.flush()
                    .map_err(|e| self.lake.error("flush bundle", e))?;
            }
            tx.commit().map_err(|e| self.lake.error("commit bundle", e))
        })?;
        Ok(Some(progress::head(self.lake)?))
    }
}

/// The payload size din compares with the threshold: `data` bytes, or for base64 the decoded
/// length estimate `len * 3 / 4` (padding not subtracted).
pub fn payload_size(event: &RawEvent) -> usize {
    match (&event.data_base64, &event.data) {
        (Some(b64), _) if !b64.is_empty() => b64.len() * 3 / 4,
        (_, Some(data)) => data.len(),
        _ => 0,
    }
}

/// The bytes stored in a blob: the JSON text, or the decoded binary of a base64 payload.
fn blob_body(event: &RawEvent) -> Result<Vec<u8>> {
    match (&event.data_base64, &event.data) {
        (Some(b64), _) if !b64.is_empty() => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|_| Error::InvalidBase64 {
                id: event.header.id.clone(),
            }),
        (_, Some(data)) => Ok(data.as_bytes().to_vec()),
        _ => Ok(Vec::new()),
    }
}

/// Rows as an Arrow batch in `raw_events` column order.
pub fn to_record_batch(rows: &[RawRow]) -> Result<RecordBatch> {
    let n = rows.len();
    let mut strings: Vec<StringBuilder> = (0..8)
        .map(|_| StringBuilder::with_capacity(n, n * 32))
        .collect();
    let mut time = TimestampMicrosecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut data = StringBuilder::with_capacity(n, n * 256);
    let mut data_base64 = BinaryBuilder::with_capacity(n, 0);
    let mut index_key = StringBuilder::with_capacity(n, 0);
    let mut voids = StringBuilder::with_capacity(n, 0);
    for r in rows {
        // Columns 1..8 except time, and extras: never NULL.
        for (b, v) in strings.iter_mut().zip([
            &r.subject,
            &r.event_type,
            &r.id,
            &r.source,
            &r.producer,
            &r.data_content_type,
            &r.data_version,
            &r.extras,
        ]) {
            b.append_value(v);
        }
        time.append_value(r.time.timestamp_micros());
        data.append_option(r.data.as_deref());
        data_base64.append_option(r.data_base64.as_deref());
        index_key.append_option(r.data_index_key.as_deref());
        voids.append_option(r.voids_id.as_deref());
    }
    let mut s: Vec<ArrayRef> = strings
        .iter_mut()
        .map(|b| Arc::new(b.finish()) as ArrayRef)
        .collect();
    let columns: Vec<ArrayRef> = vec![
        s.remove(0),             // subject
        Arc::new(time.finish()), // time
        s.remove(0),             // type
        s.remove(0),             // id
        s.remove(0),             // source
        s.remove(0),             // producer
        s.remove(0),             // data_content_type
        s.remove(0),             // data_version
        s.remove(0),             // extras
        Arc::new(data.finish()),
        Arc::new(data_base64.finish()),
        Arc::new(index_key.finish()),
        Arc::new(voids.finish()),
    ];
    RecordBatch::try_new(raw::arrow_schema(), columns).map_err(|e| Error::Arrow(e.to_string()))
}
