//! GraphQL error shapes (dq-query.md §6.3): validation → `invalid argument: …` with
//! `BAD_REQUEST`, database → `failed to query db`, timeouts → `SERVICE_UNAVAILABLE`; directive
//! and auth errors carry their dialect's text and (almost always) no code.

use crate::dialect::Dialect;
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

/// A request that hit its deadline, in the dialect's shape (dialects.md §5.3): dq answers
/// `SERVICE_UNAVAILABLE`, telemetry-api `BAD_REQUEST`, fetch-api the backend's bare text.
pub fn timeout(dialect: Dialect) -> Error {
    match dialect {
        Dialect::Dq => coded(
            TIMEOUT_MESSAGE,
            "SERVICE_UNAVAILABLE",
            "Service Unavailable",
        ),
        Dialect::Telemetry => coded(TIMEOUT_MESSAGE, "BAD_REQUEST", "Internal Server Error"),
        Dialect::Fetch => Error::new("context deadline exceeded"),
    }
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
        query::Error::Database { .. } => backend(fetch::error::DB_FAILURE, &e),
    }
}

/// A backend failure (lake, blob store) as the dq and telemetry dialects answer it: the
/// generic `message` with INTERNAL_SERVER_ERROR; the cause goes to the log only.
pub fn backend(message: impl Into<String>, cause: &dyn std::fmt::Display) -> Error {
    tracing::error!(error = %cause, "backend failure");
    coded(message, "INTERNAL_SERVER_ERROR", "Internal Server Error")
}

/// An auth rule's failure in the dialect's text; no extensions except where the dialect's
/// original attached a code (telemetry's `invalid claims`, dialects.md §2.5).
pub fn from_auth(dialect: Dialect, e: &auth::AuthError) -> Error {
    let surface = dialect.surface();
    match e.graphql_extension_code(surface) {
        Some(code) => coded(e.message(surface), code, "Internal Server Error"),
        None => Error::new(e.message(surface)),
    }
}

/// telemetry's backend failure of `attestations` / `vinVCLatest` (dialects.md §2.5, §2.6);
/// the cause goes to the log only.
pub fn internal(cause: &dyn std::fmt::Display) -> Error {
    backend("internal error", cause)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(e: Error) -> serde_json::Value {
        serde_json::to_value(e.into_server_error(async_graphql::Pos::default())).unwrap()
    }

    #[test]
    fn timeouts_in_each_dialect() {
        let dq = shape(timeout(Dialect::Dq));
        assert_eq!(dq["message"], TIMEOUT_MESSAGE);
        assert_eq!(dq["extensions"]["code"], "SERVICE_UNAVAILABLE");
        let telemetry = shape(timeout(Dialect::Telemetry));
        assert_eq!(telemetry["message"], TIMEOUT_MESSAGE);
        assert_eq!(telemetry["extensions"]["code"], "BAD_REQUEST");
        assert_eq!(telemetry["extensions"]["reason"], "Internal Server Error");
        let fetch = shape(timeout(Dialect::Fetch));
        assert_eq!(fetch["message"], "context deadline exceeded");
        assert!(fetch.get("extensions").is_none(), "{fetch}");
    }

    #[test]
    fn grant_denials_carry_telemetry_code_only_there() {
        let telemetry = shape(from_auth(Dialect::Telemetry, &auth::AuthError::GrantDenied));
        assert_eq!(telemetry["message"], "invalid claims");
        assert_eq!(telemetry["extensions"]["code"], "UNAUTHORIZED");
        let dq = shape(from_auth(Dialect::Dq, &auth::AuthError::SubjectMismatch));
        assert!(dq.get("extensions").is_none(), "{dq}");
    }
}
