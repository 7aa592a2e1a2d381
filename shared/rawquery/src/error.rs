//! What can go wrong in a cloud-event read. The texts are the Go FetchService's. Each error
//! names its [`ReadErrorCode`] ([`FetchError::code`]), which FetchService (`dq-fetch`) and the
//! GraphQL fields (`dq-graphql`) each map once. A client sees
//! [`FetchError::client_message`]: lake and blob-store failures name the catalog's host,
//! database and user, or the bucket and key, so clients get a generic text and the detail
//! goes to the log.

pub use dq_lake::{ReadErrorCode, DB_FAILURE};

/// Largest number of index keys one `ListCloudEventsFromIndex` call may carry.
pub const MAX_INDEXES: usize = 1000;

/// Errors of the search and payload paths.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// Nothing matched a search or a latest lookup.
    #[error("cloud event not found: sql: no rows in result set")]
    NotFound,
    /// An index to resolve has no visible row (a bad key, or voided since its search): the
    /// caller's index is stale, not "no match", so it is INTERNAL in every RPC, with
    /// [`FetchError::NotFound`]'s text as the Go FetchService answers it.
    #[error("cloud event not found: sql: no rows in result set")]
    MissingRow,
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
    Blob(#[from] dq_blob::BlobError),
    /// A DuckDB query failed; the message is already redacted.
    #[error(transparent)]
    Lake(#[from] dq_lake::Error),
    /// The request deadline passed.
    #[error("deadline exceeded after {0:?}")]
    Deadline(std::time::Duration),
    /// A worker task failed (panicked or was cancelled).
    #[error("internal error: {0}")]
    Internal(String),
}

impl FetchError {
    /// The stable code every transport maps.
    pub fn code(&self) -> ReadErrorCode {
        match self {
            FetchError::NotFound => ReadErrorCode::NotFound,
            FetchError::InvalidFilter(_)
            | FetchError::TooManyIndexes(_)
            | FetchError::InvalidIndexKey => ReadErrorCode::InvalidArgument,
            FetchError::BudgetExceeded => ReadErrorCode::ResourceExhausted,
            FetchError::Deadline(_) => ReadErrorCode::DeadlineExceeded,
            FetchError::MissingRow
            | FetchError::NoBlobStore { .. }
            | FetchError::Blob(_)
            | FetchError::Lake(_)
            | FetchError::Internal(_) => ReadErrorCode::Internal,
        }
    }

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

fn blob_client_message(e: &dq_blob::BlobError) -> String {
    use dq_blob::BlobError;
    let code = |failure: Option<&dq_blob::S3Failure>| {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A search miss and a stale index read the same, but only the miss is NOT_FOUND.
    #[test]
    fn every_error_has_one_code() {
        let cases = [
            (FetchError::NotFound, ReadErrorCode::NotFound),
            (FetchError::MissingRow, ReadErrorCode::Internal),
            (
                FetchError::InvalidFilter("x".into()),
                ReadErrorCode::InvalidArgument,
            ),
            (
                FetchError::TooManyIndexes(1001),
                ReadErrorCode::InvalidArgument,
            ),
            (FetchError::InvalidIndexKey, ReadErrorCode::InvalidArgument),
            (FetchError::BudgetExceeded, ReadErrorCode::ResourceExhausted),
            (
                FetchError::Deadline(std::time::Duration::from_secs(1)),
                ReadErrorCode::DeadlineExceeded,
            ),
            (
                FetchError::NoBlobStore { key: "k".into() },
                ReadErrorCode::Internal,
            ),
            (FetchError::Internal("x".into()), ReadErrorCode::Internal),
        ];
        for (e, code) in cases {
            assert_eq!(e.code(), code, "{e:?}");
        }
        assert_eq!(
            FetchError::MissingRow.client_message(),
            FetchError::NotFound.client_message()
        );
    }
}
