//! The query error type: argument validation versus database failures.
//! Transports map [`Error::code`] and show [`Error::client_message`]; neither looks at variants.

use dq_lake::ReadErrorCode;

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a read failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The request is invalid; the text is the reason without the `invalid argument: ` prefix.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A segments / dailyActivity request is invalid: the text is the client's message as is
    /// (no `invalid argument: ` prefix, as the Go service answers it).
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

    /// The stable code every transport maps.
    pub fn code(&self) -> ReadErrorCode {
        match self {
            Error::InvalidArgument(_) | Error::BadRequest(_) => ReadErrorCode::InvalidArgument,
            Error::Database { .. } => ReadErrorCode::Internal,
        }
    }

    /// The text a client may see: the reason of an invalid request, [`dq_lake::DB_FAILURE`] for
    /// a database failure (whose detail is for the log).
    pub fn client_message(&self) -> String {
        match self {
            Error::Database { .. } => dq_lake::DB_FAILURE.to_string(),
            e => e.to_string(),
        }
    }
}

impl From<dq_lake::Error> for Error {
    fn from(e: dq_lake::Error) -> Self {
        Error::Database {
            context: "lake".into(),
            message: e.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_have_one_code_and_client_text() {
        let cases = [
            (
                Error::invalid("`limit` must be positive"),
                ReadErrorCode::InvalidArgument,
                "invalid argument: `limit` must be positive",
            ),
            (
                Error::BadRequest("date range too large".into()),
                ReadErrorCode::InvalidArgument,
                "date range too large",
            ),
            (
                Error::from(dq_lake::Error::Duckdb {
                    context: "signals".into(),
                    message: "IO Error: host=db.internal".into(),
                }),
                ReadErrorCode::Internal,
                "failed to query db",
            ),
        ];
        for (e, code, text) in cases {
            assert_eq!(
                (e.code(), e.client_message().as_str()),
                (code, text),
                "{e:?}"
            );
        }
    }
}
