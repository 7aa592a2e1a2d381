//! GraphQL error shapes (dq-query.md §6.3): validation → `invalid argument: …` with
//! `BAD_REQUEST`, database → `failed to query db`, timeouts → `SERVICE_UNAVAILABLE`; directive
//! and auth errors carry their raw text and no code.

use async_graphql::{Error, ErrorExtensions};

/// `extensions {code, reason}`.
fn coded(message: impl Into<String>, code: &'static str, reason: &'static str) -> Error {
    Error::new(message).extend_with(|_, e| {
        e.set("code", code);
        e.set("reason", reason);
    })
}

/// The text shown for timeouts and cancellations.
pub const TIMEOUT_MESSAGE: &str =
    "request exceeded or is estimated to exceed the maximum execution time";

/// A request that hit its deadline.
pub fn timeout() -> Error {
    coded(
        TIMEOUT_MESSAGE,
        "SERVICE_UNAVAILABLE",
        "Service Unavailable",
    )
}

/// A BAD_REQUEST with `message` verbatim.
pub fn bad_request(message: impl Into<String>) -> Error {
    coded(message, "BAD_REQUEST", "Internal Server Error")
}

/// A query-engine error as the client sees it; database details go to the log only.
pub fn from_query(e: query::Error) -> Error {
    match e {
        query::Error::InvalidArgument(_) | query::Error::BadRequest(_) => {
            bad_request(e.to_string())
        }
        query::Error::Database { .. } => {
            tracing::error!(error = %e, "lake read failed");
            coded(
                "failed to query db",
                "INTERNAL_SERVER_ERROR",
                "Internal Server Error",
            )
        }
    }
}

/// An auth rule's failure: the dq text, no extensions.
pub fn from_auth(e: &auth::AuthError) -> Error {
    Error::new(e.message(auth::Surface::Dq))
}
