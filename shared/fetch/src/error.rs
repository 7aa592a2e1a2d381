//! What can go wrong in a cloud-event read. The texts are the ones dq-query.md §4.3–4.5 lists;
//! [`crate::service`] maps each to its gRPC status once. A client sees
//! [`FetchError::client_message`]: lake and blob-store failures name the catalog's host,
//! database and user, or the bucket and key, so clients get a generic text and the detail
//! goes to the log.

/// Largest number of index keys one `ListCloudEventsFromIndex` call may carry (§4.6).
pub const MAX_INDEXES: usize = 1000;

/// Errors of the search and payload paths.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// Nothing matched (a search, a latest lookup, or an index with no row).
    #[error("cloud event not found: sql: no rows in result set")]
    NotFound,
    /// Advanced search options the service does not serve (`or` nested too deep).
    #[error("invalid advanced search options: {0}")]
    InvalidFilter(String),
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

/// What a client is told about a failed lake query (the signal fields' text, dq-query.md §6.3).
pub const DB_FAILURE: &str = "failed to query db";

impl FetchError {
    /// True when the error is a failure of the lake, the blob store or the service itself:
    /// its detail is for the log, and the client gets [`FetchError::client_message`].
    pub fn is_internal(&self) -> bool {
        matches!(
            self,
            FetchError::Lake(_)
                | FetchError::Blob(_)
                | FetchError::NoBlobStore { .. }
                | FetchError::Internal(_)
        )
    }

    /// The text a client may see: the error itself when it is about the request, a generic
    /// text for an internal failure. A blob-store failure keeps S3's error code, which
    /// clients match on (e.g. `NoSuchKey`, `AccessDenied`, `SlowDown`), and nothing else of
    /// S3's answer.
    pub fn client_message(&self) -> String {
        match self {
            FetchError::Lake(_) => DB_FAILURE.to_string(),
            FetchError::Blob(e) => blob_client_message(e),
            FetchError::NoBlobStore { .. } => {
                "cloud event payload is in the blob store but no blob store is configured".into()
            }
            FetchError::Internal(_) => "internal error".into(),
            other => other.to_string(),
        }
    }
}

fn blob_client_message(e: &blob::BlobError) -> String {
    use blob::BlobError;
    let code = |failure: Option<&blob::S3Failure>| {
        failure
            .and_then(|f| f.code.clone())
            .unwrap_or_else(|| "unavailable".into())
    };
    match e {
        BlobError::NotFound { s3, .. } => format!("blob not found: {}", code(s3.as_deref())),
        BlobError::S3 { failure, .. } => {
            format!("blob store error: {}", code(Some(failure.as_ref())))
        }
        BlobError::Oversize { size, limit, .. } => {
            format!("cloud event payload is {size} bytes, over the {limit}-byte limit")
        }
        BlobError::SealedNoKey { .. } | BlobError::Decrypt { .. } => {
            "cloud event payload could not be decrypted".into()
        }
        BlobError::InvalidKey { .. } => "invalid blob key".into(),
        BlobError::Transient { .. } | BlobError::Config(_) => {
            "blob store error: unavailable".into()
        }
    }
}

/// Result alias for this crate.
pub type Result<T, E = FetchError> = std::result::Result<T, E>;
