//! GraphQL error shapes: validation → `invalid argument: …` with
//! `BAD_REQUEST`, database → `failed to query db`, timeouts → `SERVICE_UNAVAILABLE`; directive
//! and auth errors carry their dialect's text and (almost always) no code. A failed read of
//! either engine (`dq-query`, `dq-rawquery`) is shaped by its code alone, in [`read_error`].

use crate::dialect::{Dialect, DialectExt};
use async_graphql::{Error, ErrorExtensions};
use dq_lake::ReadErrorCode;
use std::fmt::Display;

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

/// A request that hit its deadline, in the dialect's shape: dq answers
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

/// The one GraphQL mapping of a failed read: `message` (the error's client text) with the
/// extensions its `code` gets in `dialect` — BAD_REQUEST for an invalid request and
/// INTERNAL_SERVER_ERROR for a backend failure where the dialect codes errors, bare otherwise —
/// and the dialect's timeout shape for a deadline. An internal `cause` goes to the log only.
pub fn read_error(
    dialect: Dialect,
    code: ReadErrorCode,
    message: String,
    cause: &dyn Display,
) -> Error {
    match code {
        ReadErrorCode::DeadlineExceeded => timeout(dialect),
        ReadErrorCode::Internal if dialect.codes_errors() => backend(message, cause),
        ReadErrorCode::Internal => {
            tracing::error!(error = %cause, "backend failure");
            Error::new(message)
        }
        ReadErrorCode::InvalidArgument if dialect.codes_errors() => bad_request(message),
        ReadErrorCode::InvalidArgument
        | ReadErrorCode::NotFound
        | ReadErrorCode::ResourceExhausted => Error::new(message),
    }
}

/// A query-engine error as the client sees it. Signal reads are served by the dq and telemetry
/// dialects only, which shape read errors alike.
pub fn from_query(e: dq_query::Error) -> Error {
    read_error(Dialect::Dq, e.code(), e.client_message(), &e)
}

/// A cloud-event read error as `dialect` answers it.
pub fn from_fetch(dialect: Dialect, e: dq_rawquery::FetchError) -> Error {
    read_error(dialect, e.code(), e.client_message(), &e)
}

/// A backend failure (lake, blob store) as the dq and telemetry dialects answer it: the
/// generic `message` with INTERNAL_SERVER_ERROR; the cause goes to the log only.
pub fn backend(message: impl Into<String>, cause: &dyn Display) -> Error {
    tracing::error!(error = %cause, "backend failure");
    coded(message, "INTERNAL_SERVER_ERROR", "Internal Server Error")
}

/// An auth rule's failure in the dialect's text; no extensions except where the dialect's
/// original attached a code (telemetry's `invalid claims`).
pub fn from_auth(dialect: Dialect, e: &dq_auth::AuthError) -> Error {
    let surface = dialect.surface();
    match e.graphql_extension_code(surface) {
        Some(code) => coded(e.message(surface), code, "Internal Server Error"),
        None => Error::new(e.message(surface)),
    }
}

/// telemetry's backend failure of `attestations` / `vinVCLatest`;
/// the cause goes to the log only.
pub fn internal(cause: &dyn Display) -> Error {
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
    fn read_errors_are_shaped_by_their_code() {
        let code = |e: Error| shape(e)["extensions"]["code"].clone();
        let invalid = || dq_query::Error::BadRequest("date range too large".into());
        assert_eq!(
            shape(from_query(invalid()))["message"],
            "date range too large"
        );
        assert_eq!(code(from_query(invalid())), "BAD_REQUEST");
        let db = || {
            dq_query::Error::from(dq_lake::Error::Duckdb {
                context: "signals".into(),
                message: "host=db.internal".into(),
            })
        };
        assert_eq!(shape(from_query(db()))["message"], "failed to query db");
        assert_eq!(code(from_query(db())), "INTERNAL_SERVER_ERROR");
        use dq_rawquery::FetchError;
        for dialect in [Dialect::Dq, Dialect::Telemetry] {
            assert_eq!(
                code(from_fetch(dialect, FetchError::InvalidIndexKey)),
                "BAD_REQUEST"
            );
            assert_eq!(
                code(from_fetch(dialect, FetchError::MissingRow)),
                "INTERNAL_SERVER_ERROR"
            );
            assert!(code(from_fetch(dialect, FetchError::NotFound)).is_null());
        }
        for e in [FetchError::InvalidIndexKey, FetchError::MissingRow] {
            let fetch = shape(from_fetch(Dialect::Fetch, e));
            assert!(fetch.get("extensions").is_none(), "{fetch}");
        }
        assert_eq!(
            shape(from_fetch(Dialect::Fetch, FetchError::Internal("x".into())))["message"],
            "internal error"
        );
    }

    #[test]
    fn grant_denials_carry_telemetry_code_only_there() {
        let telemetry = shape(from_auth(
            Dialect::Telemetry,
            &dq_auth::AuthError::GrantDenied,
        ));
        assert_eq!(telemetry["message"], "invalid claims");
        assert_eq!(telemetry["extensions"]["code"], "UNAUTHORIZED");
        let dq = shape(from_auth(Dialect::Dq, &dq_auth::AuthError::SubjectMismatch));
        assert!(dq.get("extensions").is_none(), "{dq}");
    }
}
