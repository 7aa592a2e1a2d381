//! From raw rows to decodable events: extras restored, blob payloads fetched (a missing or
//! unreadable object is poison, a store outage transient), `data_base64` decoded, tombstones
//! collected. Poison is data: counted by reason and the row skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use base64::Engine;
use dq_blob::{BlobStore, MAX_OBJECT_SIZE};
use dq_cloudevent::{types, RawEvent, RawRow};

use crate::{Error, Result};

/// Blob fetches in flight at once (Go `blobFetchConcurrency`).
pub const BLOB_CONCURRENCY: usize = 16;

/// A (subject, event id) pair voided by a tombstone.
pub type Voided = (String, String);

/// The decodable part of a chunk of raw rows.
#[derive(Debug, Default)]
pub struct Resolved {
    /// Events of decodable types with their payload inline, in input order.
    pub events: Vec<RawEvent>,
    /// Tombstone targets found in the rows.
    pub voided: BTreeSet<Voided>,
    /// Rows skipped (or kept with a defect) per reason.
    pub poison: BTreeMap<String, u64>,
    /// Raw payload bytes resident after resolution (the window byte budget).
    pub bytes: usize,
}

impl Resolved {
    fn count(&mut self, reason: &str) {
        *self.poison.entry(reason.to_owned()).or_default() += 1;
    }
}

pub(crate) fn decodable(event_type: &str) -> bool {
    event_type == types::STATUS || event_type == types::EVENTS
}

/// First pause before retrying a blob S3 refused; doubled per attempt up to [`ACCESS_BACKOFF_MAX`].
const ACCESS_BACKOFF: std::time::Duration = std::time::Duration::from_millis(200);
/// Longest pause between attempts at a refused blob.
const ACCESS_BACKOFF_MAX: std::time::Duration = std::time::Duration::from_secs(5);

/// Reads `key`, retrying an access refusal (403, KMS) with backoff until `attempts` were made.
/// The attempts are made here, within one window, rather than counted across invocations: no
/// per-row state is kept, and a refusal that outlasts them is given up as poison by the caller.
async fn get_blob(store: &BlobStore, key: &str, attempts: usize) -> dq_blob::Result<Vec<u8>> {
    let mut pause = ACCESS_BACKOFF;
    let mut attempt = 1;
    loop {
        match store.get(key, MAX_OBJECT_SIZE).await {
            Err(e) if e.is_access_denied() && attempt < attempts => {
                tracing::warn!(attempt, error = %e, "blob access denied, retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(ACCESS_BACKOFF_MAX);
                attempt += 1;
            }
            got => return got,
        }
    }
}

/// Resolves `rows`. A transient blob failure (or a blob reference without a configured store)
/// aborts with an error so the same delta is retried; nothing is skipped on a guess. A blob S3
/// still refuses after `access_attempts` attempts is poison `blob_access_denied`: one unreadable
/// object must not hold the cursor forever.
pub async fn resolve(
    rows: Vec<RawRow>,
    blobs: Option<&Arc<BlobStore>>,
    access_attempts: usize,
) -> Result<Resolved> {
    let mut out = Resolved::default();
    let mut pending: Vec<(usize, String)> = Vec::new();
    let mut slots: Vec<Option<RawEvent>> = Vec::with_capacity(rows.len());
    for row in rows {
        if row.event_type == types::TOMBSTONE {
            if let Some(target) = row.voids_id.as_deref().filter(|v| !v.is_empty()) {
                out.voided.insert((row.subject.clone(), target.to_owned()));
            }
            continue;
        }
        if !decodable(&row.event_type) {
            continue;
        }
        let (mut event, extras) = row.to_event_checked();
        if extras.is_error() {
            out.count("malformed_extras");
        }
        let inline = event.data.as_deref().is_some_and(|d| !d.is_empty())
            || event.data_base64.as_deref().is_some_and(|d| !d.is_empty());
        if !inline {
            if let Some(key) = row.data_index_key.as_deref().filter(|k| !k.is_empty()) {
                match blobs {
                    Some(store) if key.starts_with(store.prefix()) => {
                        pending.push((slots.len(), key.to_owned()));
                    }
                    Some(_) => {
                        tracing::warn!(cloud_event_id = %event.header.id, "blob key outside the blob prefix, decoded as empty");
                        out.count("blob_prefix_anomaly");
                    }
                    None => {
                        return Err(Error::NoBlobStore {
                            id: event.header.id.clone(),
                        })
                    }
                }
            }
        } else if let Some(text) = event.data_base64.take() {
            // dq decodes data_base64 payloads (the Go system handed modules an empty payload).
            match base64::engine::general_purpose::STANDARD.decode(text.trim()) {
                Ok(bytes) => event.data = Some(String::from_utf8_lossy(&bytes).into_owned()),
                Err(_) => {
                    tracing::warn!(cloud_event_id = %event.header.id, "data_base64 is not base64, row skipped");
                    out.count("invalid_base64");
                    continue;
                }
            }
        }
        slots.push(Some(event));
    }
    if let Some(store) = blobs {
        for batch in pending.chunks(BLOB_CONCURRENCY) {
            let mut set = tokio::task::JoinSet::new();
            for (slot, key) in batch {
                let store = Arc::clone(store);
                let (slot, key) = (*slot, key.clone());
                set.spawn(async move { (slot, get_blob(&store, &key, access_attempts).await) });
            }
            while let Some(joined) = set.join_next().await {
                let (slot, got) = joined.map_err(|e| {
                    Error::TransientBlob(dq_blob::BlobError::Transient {
                        key: String::new(),
                        message: e.to_string(),
                    })
                })?;
                // Every pending slot was pushed above; a missing one has nothing to fill.
                let Some(entry) = slots.get_mut(slot) else {
                    continue;
                };
                match got {
                    Ok(bytes) => {
                        if let Some(event) = entry.as_mut() {
                            event.data = Some(String::from_utf8_lossy(&bytes).into_owned());
                        }
                    }
                    Err(e) if e.is_poison() || e.is_access_denied() => {
                        let id = entry.as_ref().map(|ev| ev.header.id.clone());
                        tracing::warn!(cloud_event_id = ?id, reason = e.reason(), error = %e, "blob poison, row skipped");
                        out.count(&format!("blob_{}", e.reason()));
                        *entry = None;
                    }
                    Err(e) => return Err(Error::TransientBlob(e)),
                }
            }
        }
    }
    for event in slots.into_iter().flatten() {
        out.bytes += event.data.as_ref().map_or(0, String::len);
        out.events.push(event);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn row(event_type: &str, id: &str) -> RawRow {
        RawRow {
            subject: "s".into(),
            time: Utc::now(),
            event_type: event_type.into(),
            id: id.into(),
            source: String::new(),
            producer: String::new(),
            data_content_type: String::new(),
            data_version: String::new(),
            extras: "{}".into(),
            data: Some("{}".into()),
            data_base64: None,
            data_index_key: None,
            voids_id: None,
        }
    }

    #[tokio::test]
    async fn base64_tombstones_and_poison() {
        let mut b64 = row(types::STATUS, "b");
        b64.data = None;
        b64.data_base64 = Some(b"eyJhIjoxfQ==".to_vec());
        let mut bad = row(types::STATUS, "x");
        bad.data = None;
        bad.data_base64 = Some(b"***".to_vec());
        let mut tomb = row(types::TOMBSTONE, "t");
        tomb.voids_id = Some("b".into());
        let mut extras = row(types::EVENTS, "e");
        extras.extras = "not json".into();
        let out = resolve(
            vec![b64, bad, tomb, extras, row("dimo.fingerprint", "f")],
            None,
            1,
        )
        .await
        .unwrap();
        assert_eq!(out.events.len(), 2);
        assert_eq!(out.events[0].data.as_deref(), Some(r#"{"a":1}"#));
        assert_eq!(out.poison.get("invalid_base64"), Some(&1));
        assert_eq!(out.poison.get("malformed_extras"), Some(&1));
        assert!(out.voided.contains(&("s".to_owned(), "b".to_owned())));
    }

    #[tokio::test]
    async fn blob_reference_without_store_aborts() {
        let mut r = row(types::STATUS, "k");
        r.data = None;
        r.data_index_key = Some("cloudevent/blobs/s/x".into());
        assert!(matches!(
            resolve(vec![r], None, 1).await,
            Err(Error::NoBlobStore { .. })
        ));
    }
}
