//! The lake crate's error type. DuckDB messages are stored already redacted (see
//! [`crate::redact`]), so an `Error` can be logged or returned to a caller as it is.
//!
//! Also the [`ReadErrorCode`] of every failed read: it lives here, the lowest crate both read
//! engines (`dq-query`, `dq-rawquery`) share, so neither depends on the other and each
//! transport (gRPC in `dq-fetch`, GraphQL in `dq-graphql`) maps one code, once.

/// Stable machine code of a failed read. Each read error type names its code in one method;
/// transports map the code, never the error's variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReadErrorCode {
    /// Nothing matched the request.
    NotFound,
    /// The request itself is invalid; its text says why.
    InvalidArgument,
    /// The request asks for more than one call may take (the payload budget).
    ResourceExhausted,
    /// The request's deadline passed.
    DeadlineExceeded,
    /// The lake, the blob store or the service failed; never the caller's fault.
    Internal,
}

/// What a client is told about a failed lake query; the redacted detail
/// goes to the log.
pub const DB_FAILURE: &str = "failed to query db";

/// Errors from opening and using the lake.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting is missing or malformed.
    #[error("invalid lake configuration: {0}")]
    Config(String),
    /// A pinned extension file is not in the extension directory.
    #[error(
        "duckdb extension `{name}` is not installed in `{dir}`; run `make extensions` \
         (or point DUCKDB_EXTENSION_DIR at a directory it filled)"
    )]
    MissingExtension {
        /// Extension name, e.g. `ducklake`.
        name: String,
        /// The directory that was searched.
        dir: String,
    },
    /// The catalog's DuckLake format version is not the one din and dq share.
    #[error(
        "catalog format version `{found}` is not supported: dq attaches only DuckLake format \
         `{expected}` and never migrates a catalog (din shares it)"
    )]
    CatalogVersion {
        /// What the catalog records.
        found: String,
        /// What this build supports.
        expected: &'static str,
    },
    /// `LAKE_ENCRYPTION_ENABLED` disagrees with how the catalog was created.
    #[error("catalog encryption mismatch: the catalog says encrypted={catalog}, LAKE_ENCRYPTION_ENABLED={configured}")]
    EncryptionMismatch {
        /// The catalog's `encrypted` metadata value.
        catalog: String,
        /// The configured flag.
        configured: bool,
    },
    /// A DuckDB statement failed; `message` is redacted.
    #[error("{context}: {message}")]
    Duckdb {
        /// What was being done.
        context: String,
        /// DuckDB's message with secrets masked.
        message: String,
    },
    /// The catalog DSN could not be read from Secrets Manager.
    #[error("catalog DSN secret: {0}")]
    Secret(#[source] dq_secrets::Error),
    /// The request was given up (its deadline passed or its caller went away) before this read
    /// started; see [`crate::interruptible`].
    #[error("read not started: the request was given up (deadline passed or caller gone)")]
    Interrupted,
    /// A filesystem operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl Error {
    /// True when the catalog refused the credentials ([`is_auth_failure`]).
    pub fn is_auth_failure(&self) -> bool {
        matches!(self, Error::Duckdb { message, .. } if is_auth_failure(message))
    }

    /// True when the error is a DuckLake commit conflict, which a retry may resolve: din's
    /// classification (the text mentions `conflict` or a TransactionContext error), except on
    /// an invalidated instance ([`crate::is_invalidated`]), which no retry on it can fix: that
    /// must surface so the lake is reopened.
    pub fn is_commit_conflict(&self) -> bool {
        match self {
            Error::Duckdb { message, .. } => {
                let m = message.to_ascii_lowercase();
                (m.contains("conflict") || m.contains("transactioncontext error"))
                    && !crate::is_invalidated(message)
            }
            _ => false,
        }
    }
}

/// Whether an error text says the PostgreSQL catalog refused the credentials: SQLSTATE `28P01`
/// (invalid password) or `28000` (invalid authorization), or libpq's wording of them, which is
/// all DuckDB passes on.
pub fn is_auth_failure(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    lower.contains("password authentication failed")
        || lower.contains("pam authentication failed")
        || lower
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|word| word == "28p01" || word == "28000")
}

/// Result alias for the lake crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognizes_authentication_failures() {
        assert!(is_auth_failure(
            "IO Error: Unable to connect to Postgres at \"host=h password=***\": connection to \
             server at \"127.0.0.1\", port 5432 failed: FATAL:  password authentication failed \
             for user \"dq\""
        ));
        assert!(is_auth_failure("ERROR: 28P01: invalid password"));
        assert!(is_auth_failure("SQLSTATE 28000"));
        assert!(!is_auth_failure("wrote 128000 rows"));
        assert!(!is_auth_failure(
            "FATAL: too many connections for role \"dq\""
        ));
    }

    fn duckdb(message: &str) -> Error {
        Error::Duckdb {
            context: "commit".into(),
            message: message.into(),
        }
    }

    #[test]
    fn commit_conflicts_are_retryable_unless_the_instance_is_invalidated() {
        for conflict in [
            "TransactionContext Error: Failed to commit: write-write conflict",
            "Transaction conflict: cannot update a table that has been altered",
            "TransactionContext Error: Failed to commit DuckLake transaction",
        ] {
            assert!(duckdb(conflict).is_commit_conflict(), "{conflict}");
        }
        for other in [
            "FATAL Error: Failed: database has been invalidated because of a previous fatal \
             error. TransactionContext Error: Failed to commit: write-write conflict",
            "IO Error: Connection refused",
        ] {
            assert!(!duckdb(other).is_commit_conflict(), "{other}");
        }
        assert!(!Error::Config("conflict".into()).is_commit_conflict());
    }
}
