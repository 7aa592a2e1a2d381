//! The query error type: argument validation (→ BAD_REQUEST) versus database failures
//! (→ "failed to query db", dq-query.md §6.3).

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a read failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The request is invalid; the text is the reason without the `invalid argument: ` prefix.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A segments / dailyActivity request is invalid: the text is the client's message as is
    /// (no `invalid argument: ` prefix, dq-query.md §3.1).
    #[error("{0}")]
    BadRequest(String),
    /// DuckDB / DuckLake failed; the text (already redacted) is for logs, not clients.
    #[error("{context}: {message}")]
    Database {
        /// What was being read.
        context: String,
        /// The redacted driver message.
        message: String,
    },
}

impl Error {
    pub(crate) fn invalid(reason: impl Into<String>) -> Error {
        Error::InvalidArgument(reason.into())
    }
}

impl From<lake::Error> for Error {
    fn from(e: lake::Error) -> Self {
        Error::Database {
            context: "lake".into(),
            message: e.to_string(),
        }
    }
}
