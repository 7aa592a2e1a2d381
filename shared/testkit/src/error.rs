//! The crate's error type.

use std::path::PathBuf;

/// Result alias used by every fallible testkit function.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a testkit service or helper could not do its job.
///
/// Messages name what is missing and how to get it; they never contain a password.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The PostgreSQL server binaries are not where testkit looks for them.
    #[error(
        "postgresql binary `{binary}` not found in {}: run `apt-get install -y postgresql` \
         (or point {} at the directory holding initdb and pg_ctl)",
        dir.display(),
        crate::postgres::PG_BIN_ENV
    )]
    PgBinMissing {
        /// Directory that was searched.
        dir: PathBuf,
        /// The binary that is missing there.
        binary: &'static str,
    },

    /// The unprivileged user that runs PostgreSQL when the tests run as root does not exist.
    #[error(
        "user `{user}` (used to run postgresql because initdb refuses root) not found: \
         set {} to an existing non-root user",
        crate::postgres::PG_USER_ENV
    )]
    PgUserMissing {
        /// The user name that was looked up.
        user: String,
    },

    /// The moto server executable is missing from the virtualenv.
    #[error(
        "moto_server not found at {}: run `make venv` (scripts/venv.sh), or point {} at a venv \
         with moto[server] installed",
        path.display(),
        crate::moto::VENV_ENV
    )]
    MotoMissing {
        /// The path that was checked.
        path: PathBuf,
    },

    /// A name that testkit would put into SQL or a URL is not acceptable.
    #[error("invalid {kind} name `{name}`: {reason}")]
    InvalidName {
        /// What the name is for (`database`, `bucket`, ...).
        kind: &'static str,
        /// The rejected name.
        name: String,
        /// Which rule it breaks.
        reason: &'static str,
    },

    /// A file-system or socket operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What testkit was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// An external command ran but did not succeed.
    #[error("{what} failed ({status}):\n{output}")]
    Command {
        /// Which step ran the command (`initdb`, `pg_ctl start`, ...).
        what: String,
        /// Exit status as printed by the OS.
        status: String,
        /// Its captured output, or the tail of the service log.
        output: String,
    },

    /// A service did not become ready in time.
    #[error("timed out after {seconds}s waiting for {what}:\n{details}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long testkit waited.
        seconds: u64,
        /// Diagnostics, usually the tail of the service log.
        details: String,
    },

    /// An HTTP exchange with a test service failed or returned an unexpected status.
    #[error("{method} {url}: {reason}")]
    Http {
        /// Request method.
        method: String,
        /// Request URL.
        url: String,
        /// What went wrong (I/O error, malformed response, status and body).
        reason: String,
    },
}

impl Error {
    /// Wraps an I/O error with what testkit was doing at the time.
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}
