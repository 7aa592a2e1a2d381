//! Payload resolution: indexes → events with their payloads.
//!
//! A search read with its payload columns ([`crate::Reader::search_rows`]) goes
//! straight to [`Payloads::events`]. An index alone (a client's, or a search's without payloads)
//! is only validated by the caller; resolution re-reads `raw_events` by
//! `(subject, id)` in batches (125 ids per query, 8 rows per id), matches each index to its row by
//! the full header key (falling back to the newest row of that `(subject, id)`), and returns the
//! events in input order. Inline payloads come from the row; externalized ones from the blob
//! store (8 GETs at a time, DBE1 opened when sealed), all within a 256 MiB per-call budget.

use crate::db::Db;
use crate::error::{FetchError, Result};
use crate::filter::Voiding;
use crate::search::{Event, Index, StoredRow, IDS_PER_QUERY};
use dq_blob::{BlobError, BlobStore, MAX_OBJECT_SIZE};
use dq_cloudevent::event::CloudEventHeader;
use futures::{StreamExt, TryStreamExt};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Total payload bytes one call may return.
pub const PAYLOAD_BUDGET: u64 = 256 << 20;
/// Blob GETs in flight per call.
pub const BLOB_CONCURRENCY: usize = 8;

/// Resolves payloads; cheap to clone and share.
#[derive(Debug, Clone)]
pub struct Payloads {
    store: Option<Arc<BlobStore>>,
    prefix: String,
    budget: u64,
}

impl Payloads {
    /// Resolution with `store` (`None`: no `BLOB_BUCKET`, so externalized payloads fail).
    pub fn new(store: Option<Arc<BlobStore>>) -> Payloads {
        let prefix = store
            .as_ref()
            .map_or(dq_blob::DEFAULT_PREFIX, |s| s.prefix())
            .to_string();
        Payloads {
            store,
            prefix,
            budget: PAYLOAD_BUDGET,
        }
    }

    /// Overrides the per-call budget (tests).
    pub fn with_budget(mut self, bytes: u64) -> Payloads {
        self.budget = bytes;
        self
    }

    /// The hook for presigned URLs (GraphQL `dataUrl`): the blob key of `index` when its
    /// payload is externalized AND blobs are not sealed (a sealed blob must be served inline,
    /// decrypted). `None` means "resolve the payload with [`Payloads::resolve`]".
    pub fn presign_key<'a>(&self, index: &'a Index) -> Option<&'a str> {
        let sealed = self.store.as_ref().is_some_and(|s| s.seals());
        (!sealed && index.key.starts_with(&self.prefix)).then_some(index.key.as_str())
    }

    /// The events of `indexes`, in input order, under dq's voiding
    /// ([`Voiding::HideTombstones`]); see [`Payloads::resolve_with`].
    ///
    /// # Errors
    /// As [`Payloads::resolve_with`].
    pub async fn resolve(&self, db: &Arc<Db>, indexes: &[Index]) -> Result<Vec<Event>> {
        self.resolve_with(db, indexes, Voiding::HideTombstones)
            .await
    }

    /// The events of `indexes`, in input order, re-read under `voiding` — the policy the
    /// indexes were listed with, so a row that policy shows can be resolved.
    ///
    /// # Errors
    /// [`FetchError::MissingRow`] when any index has no row visible under `voiding`;
    /// [`FetchError::BudgetExceeded`]; [`FetchError::NoBlobStore`]; [`FetchError::Blob`] for
    /// store failures other than a missing object; [`FetchError::Lake`].
    pub async fn resolve_with(
        &self,
        db: &Arc<Db>,
        indexes: &[Index],
        voiding: Voiding,
    ) -> Result<Vec<Event>> {
        let rows = fetch_rows(db, indexes, voiding).await?;
        let mut by_id: HashMap<(&str, &str), Vec<&StoredRow>> = HashMap::new();
        for row in &rows {
            let h = &row.event.header;
            by_id
                .entry((h.subject.as_str(), h.id.as_str()))
                .or_default()
                .push(row);
        }
        let matched = indexes
            .iter()
            .map(|index| {
                let h = &index.header;
                by_id
                    .get(&(h.subject.as_str(), h.id.as_str()))
                    .and_then(|candidates| match_row(candidates, h))
                    .cloned()
                    .ok_or(FetchError::MissingRow)
            })
            .collect::<Result<Vec<StoredRow>>>()?;
        self.events(matched).await
    }

    /// The events of `rows` (read with their payload columns), in order: inline payloads from
    /// the row, externalized ones from the blob store, within the per-call budget.
    ///
    /// # Errors
    /// [`FetchError::BudgetExceeded`]; [`FetchError::NoBlobStore`]; [`FetchError::Blob`] for
    /// store failures other than a missing object.
    pub async fn events(&self, rows: Vec<StoredRow>) -> Result<Vec<Event>> {
        // Owned futures (rows, a shared counter): the RPC futures must be Send for any lifetime.
        let spent = Arc::new(AtomicU64::new(0));
        let work: Vec<_> = rows
            .into_iter()
            .map(|row| {
                let this = self.clone();
                let spent = Arc::clone(&spent);
                async move { this.payload(&row, &spent).await }
            })
            .collect();
        futures::stream::iter(work)
            .buffered(BLOB_CONCURRENCY)
            .try_collect()
            .await
    }

    async fn payload(&self, row: &StoredRow, spent: &AtomicU64) -> Result<Event> {
        let mut event = Event {
            header: row.event.header.clone(),
            ..Event::default()
        };
        if let Some(b64) = row.event.data_base64.as_ref().filter(|s| !s.is_empty()) {
            event.data_base64 = b64.clone();
        } else if let Some(data) = &row.event.data {
            event.data = data.as_bytes().to_vec();
        } else if let Some(key) = &row.data_index_key {
            event.data = self.blob(key).await?;
        }
        let size = (event.data.len() + event.data_base64.len()) as u64;
        let total = spent.fetch_add(size, Ordering::Relaxed) + size;
        if total > self.budget {
            return Err(FetchError::BudgetExceeded);
        }
        Ok(event)
    }

    async fn blob(&self, key: &str) -> Result<Vec<u8>> {
        if !key.starts_with(&self.prefix) {
            // Not a key din writes: served without payload rather than read from anywhere.
            tracing::warn!(
                key,
                "data_index_key without the blob prefix; payload left empty"
            );
            return Ok(Vec::new());
        }
        let store = self.store.as_ref().ok_or_else(|| FetchError::NoBlobStore {
            key: key.to_string(),
        })?;
        match store.get(key, MAX_OBJECT_SIZE).await {
            Ok(bytes) => Ok(bytes),
            Err(e @ BlobError::NotFound { .. }) => {
                // One line: the key, and S3's code and request id when it answered.
                tracing::warn!(error = %e, "blob missing; payload left empty");
                Ok(Vec::new())
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// Rows for every distinct `(subject, id)` of `indexes` visible under `voiding`, grouped per
/// subject, 125 ids a query.
async fn fetch_rows(db: &Arc<Db>, indexes: &[Index], voiding: Voiding) -> Result<Vec<StoredRow>> {
    let mut per_subject: HashMap<String, Vec<String>> = HashMap::new();
    let mut seen: HashSet<(&str, &str)> = HashSet::new();
    for index in indexes {
        let (subject, id) = (&index.header.subject, &index.header.id);
        if seen.insert((subject, id)) {
            per_subject
                .entry(subject.clone())
                .or_default()
                .push(id.clone());
        }
    }
    db.read(move |reader| {
        let mut rows = Vec::new();
        for (subject, ids) in &per_subject {
            for chunk in ids.chunks(IDS_PER_QUERY) {
                let chunk: Vec<&str> = chunk.iter().map(String::as_str).collect();
                rows.extend(reader.by_ids(subject, &chunk, voiding)?);
            }
        }
        Ok(rows)
    })
    .await
}

/// Among the rows of one `(subject, id)` (newest first), the one whose header key equals the
/// index's, else the newest (an index may carry only subject and id).
fn match_row<'a>(candidates: &[&'a StoredRow], header: &CloudEventHeader) -> Option<&'a StoredRow> {
    let key = header.key();
    candidates
        .iter()
        .find(|r| r.event.header.key() == key)
        .or_else(|| candidates.first())
        .copied()
}

/// Index keys a caller may send: non-empty, without `..` (never dereferenced, only checked).
pub fn valid_index_key(key: &str) -> bool {
    !key.is_empty() && !key.contains("..")
}
