//! Crate errors. [`ValidationError`] messages are the exact BAD_REQUEST texts of `segments` and
//! `dailyActivity`.

use std::fmt;

use crate::model::Mechanism;

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A segments or dailyActivity request the Go service rejects with BAD_REQUEST (raw message,
/// no `invalid argument:` prefix).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    /// Empty `subject`.
    #[error("subject is required")]
    SubjectRequired,
    /// `from > to` (after the `to` clamp).
    #[error("from time must be before to time")]
    FromAfterTo,
    /// `from == to`.
    #[error("from and to times cannot be equal")]
    FromEqualsTo,
    /// `to − from > 32 d + 1 s`.
    #[error("date range exceeds maximum of 32 days")]
    RangeTooLong,
    /// A config field outside its range.
    #[error("{field} must be between {min} and {max}")]
    OutOfRange {
        /// GraphQL field name.
        field: &'static str,
        /// Lowest accepted value.
        min: i32,
        /// Highest accepted value.
        max: i32,
    },
    /// `limit` outside `1..=200`.
    #[error("limit must be between 1 and 200")]
    Limit,
    /// `dailyActivity` with IDLING/REFUEL/RECHARGE.
    #[error("dailyActivity does not accept mechanism {0}; use IGNITION_DETECTION, FREQUENCY_ANALYSIS, or CHANGE_POINT_DETECTION")]
    DailyActivityMechanism(Mechanism),
    /// An unknown or malformed IANA zone name.
    #[error("invalid timezone {}: {reason}", GoQuoted(.name))]
    InvalidTimezone {
        /// The name as sent.
        name: String,
        /// Go's `time.LoadLocation` error text.
        reason: String,
    },
    /// Local midnight of `from` is after local midnight of `to`.
    #[error("from date must be before to date")]
    FromDateAfterToDate,
    /// Local midnight of `to` is after now.
    #[error("to date cannot be in the future")]
    ToDateInFuture,
}

/// Crate error: a rejected request or a failed read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is invalid (BAD_REQUEST); raised before any read.
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// A [`crate::SignalSource`] read failed (INTERNAL).
    #[error("failed to query {read}")]
    Source {
        /// Which read failed, e.g. `ignition state changes`.
        read: &'static str,
        /// The source's own error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}

impl Error {
    /// The validation error, when this is a BAD_REQUEST.
    pub fn as_validation(&self) -> Option<&ValidationError> {
        match self {
            Error::Invalid(v) => Some(v),
            Error::Source { .. } => None,
        }
    }

    pub(crate) fn source<E>(read: &'static str) -> impl FnOnce(E) -> Error
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        move |e| Error::Source {
            read,
            source: Box::new(e),
        }
    }
}

/// Go `%q` for the printable-ASCII names a client realistically sends; other characters use
/// Rust's escapes (close to, not byte-identical with, Go's).
struct GoQuoted<'a>(&'a str);

impl fmt::Display for GoQuoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}
