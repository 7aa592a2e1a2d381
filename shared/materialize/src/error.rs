//! The materializer's error type: one enum, structured fields, no secrets (DuckDB messages are
//! redacted by the lake crate before they get here).

/// Errors from a materializer operation. Poison rows are never errors: they are counted in the
/// summary. Only infrastructure faults (and a lost lease) fail an operation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A lake (DuckDB/DuckLake) operation failed; the message is redacted.
    #[error(transparent)]
    Lake(#[from] dq_lake::Error),
    /// A blob fetch failed in a way a retry may clear; the pass aborts so the same delta is retried.
    #[error("transient blob store failure, pass aborted: {0}")]
    TransientBlob(#[source] dq_blob::BlobError),
    /// Writing or removing a Parquet file of the own writer failed; the window did not commit.
    #[error("own writer's data file: {0}")]
    DataFile(#[source] dq_blob::BlobError),
    /// A row references a blob but no blob store is configured (`BLOB_BUCKET`).
    #[error("row `{id}` references a blob but BLOB_BUCKET is not set")]
    NoBlobStore {
        /// Raw event id.
        id: String,
    },
    /// The lease was lost or could not be renewed; nothing was committed.
    #[error("materializer lease lost: {0}")]
    Lease(#[from] dq_lease::LeaseError),
    /// Building an Arrow batch failed.
    #[error("build arrow batch for `{table}`: {message}")]
    Arrow {
        /// Target table.
        table: &'static str,
        /// What failed.
        message: String,
    },
    /// The cursor row holds something that is not a snapshot id.
    #[error("cursor `{partition}` holds `{value}`, not a snapshot id")]
    BadCursor {
        /// The `ingest_progress` partition.
        partition: String,
        /// The stored value.
        value: String,
    },
    /// A setting is missing or malformed (env-var names only, never values of secrets).
    #[error("invalid materializer configuration: {0}")]
    Config(String),
    /// An action was called with bad arguments.
    #[error("invalid {action} request: {reason}")]
    InvalidRequest {
        /// The action.
        action: &'static str,
        /// Why.
        reason: String,
    },
}

impl Error {
    /// A stable class for Lambda diagnostics (`config`, `catalog`, `transient`, `lease`, `request`).
    pub fn class(&self) -> &'static str {
        match self {
            Error::Config(_) | Error::NoBlobStore { .. } => "config",
            Error::Lake(_) | Error::Arrow { .. } | Error::BadCursor { .. } => "catalog",
            Error::TransientBlob(_) | Error::DataFile(_) => "transient",
            Error::Lease(_) => "lease",
            Error::InvalidRequest { .. } => "request",
        }
    }
}

/// Result alias for the materialize crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
