//! What can go wrong in a cloud-event read. The texts are the ones dq-query.md §4.3–4.5 lists;
//! [`crate::service`] maps each to its gRPC status once.

/// Largest number of index keys one `ListCloudEventsFromIndex` call may carry (§4.6).
pub const MAX_INDEXES: usize = 1000;

/// Errors of the search and payload paths.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// Nothing matched (a search, a latest lookup, or an index with no row).
    #[error("cloud event not found: sql: no rows in result set")]
    NotFound,
    /// An `or` clause somewhere in the advanced options (§4.4).
    #[error("lake fetch: Or clauses in advanced filter are not yet supported")]
    OrUnsupported,
    /// More than [`MAX_INDEXES`] indexes in one call.
    #[error("too many indexes: {0} (max {MAX_INDEXES})")]
    TooManyIndexes(usize),
    /// An index key that is empty or contains `..`.
    #[error("invalid index key")]
    InvalidIndexKey,
    /// The resolved payloads of one call add up to more than the per-call budget.
    #[error(
        "total payload size exceeds the 256 MiB per-call budget: request fewer indexes per call"
    )]
    BudgetExceeded,
    /// A row names a blob but no blob store is configured (`BLOB_BUCKET`).
    #[error("cloud event payload is in blob {key:?} but no blob store is configured")]
    NoBlobStore {
        /// The row's `data_index_key`.
        key: String,
    },
    /// The blob store failed (anything but a missing object, which yields an empty payload).
    #[error(transparent)]
    Blob(#[from] blob::BlobError),
    /// A DuckDB query failed; the message is already redacted.
    #[error(transparent)]
    Lake(#[from] lake::Error),
    /// The request deadline passed.
    #[error("deadline exceeded after {0:?}")]
    Deadline(std::time::Duration),
    /// A worker task failed (panicked or was cancelled).
    #[error("internal error: {0}")]
    Internal(String),
}

/// Result alias for this crate.
pub type Result<T, E = FetchError> = std::result::Result<T, E>;
