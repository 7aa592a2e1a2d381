//! A faithful din simulator: what din's sink and maintainer do to the lake, so dq
//! can be developed and tested without din. Writes bundles of CloudEvents into `lake.raw_events`
//! (one transaction, one bulk append, one snapshot), externalizes large payloads to the blob store
//! (optionally DBE1-sealed), makes tombstones, and runs din's expiry step.
//!
//! Not here: generating realistic traffic (the `fleet` crate) or reading the lake back (the
//! materializer).
//!
//! # Layout
//! - [`writer`]: bundles → rows → one snapshot.
//! - [`maintain`]: snapshot expiry with the consumer floor.
//! - [`tombstone`]: the attestation that voids an earlier event.
//! - [`seed`]: a synthetic fleet streamed in as bundles, with redelivery and tombstones.
//! - `testing` (feature): the test fleet's DIDs, a `RawEvent` builder and a fresh din lake.
#![warn(missing_docs)]

pub mod maintain;
pub mod seed;
#[cfg(feature = "testing")]
#[allow(clippy::unwrap_used)] // Test fixtures: a din lake that cannot be set up fails the test.
pub mod testing;
pub mod writer;

use chrono::{DateTime, Utc};
use dq_cloudevent::event::{CloudEventHeader, RawEvent};
use dq_cloudevent::types;

pub use seed::{seed, SeedOptions, SeedReport};
pub use writer::{BundleReport, Writer};

/// Simulator errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A lake operation failed.
    #[error(transparent)]
    Lake(#[from] dq_lake::Error),
    /// A blob write failed.
    #[error(transparent)]
    Blob(#[from] dq_blob::BlobError),
    /// A payload needs externalizing but no blob store is configured.
    #[error(
        "event `{id}` is over the size threshold but no blob store is configured (BLOB_BUCKET)"
    )]
    NoBlobStore {
        /// The event id.
        id: String,
    },
    /// A `data_base64` payload is not base64.
    #[error("event `{id}` has a data_base64 payload that is not base64")]
    InvalidBase64 {
        /// The event id.
        id: String,
    },
    /// The fleet configuration is invalid.
    #[error(transparent)]
    Fleet(#[from] dq_fleet::Error),
    /// Building the Arrow batch failed.
    #[error("build arrow batch: {0}")]
    Arrow(String),
}

/// Result alias for the simulator.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A `dimo.tombstone` attestation voiding `target`: same subject, `data`
/// `{"voidsId":…,"reason":…}`; the row's `voids_id` column is derived from it.
pub fn tombstone(
    target: &RawEvent,
    attester: &str,
    id: &str,
    time: DateTime<Utc>,
    reason: &str,
) -> RawEvent {
    let data = serde_json::json!({ "voidsId": target.header.id, "reason": reason }).to_string();
    RawEvent {
        header: CloudEventHeader {
            spec_version: "1.0".into(),
            event_type: types::TOMBSTONE.into(),
            source: attester.into(),
            subject: target.header.subject.clone(),
            id: id.into(),
            time,
            data_content_type: "application/json".into(),
            // Attestations always carry a signature; din checked it before the row existed.
            signature: format!("0x{}", "ab".repeat(65)),
            ..Default::default()
        },
        data: Some(data),
        data_base64: None,
    }
}
