//! Per-request observability of the HTTP surface, from one middleware around every route:
//!
//! - a `tracing` span `request` with `request_id`, `trace_id`, `dialect` and `vehicle` (recorded
//!   by the `/query` handler once the token is validated), so every log line of the request
//!   carries them;
//! - with `QUERY_EMF` on, one EMF line per `/query` request in `dq/query`: properties `Dialect`
//!   and `Code`, metrics `requests`, `latency_ms` and `graphql_errors`, aggregated over
//!   `[Stage, Function]` and `[Stage, Dialect, Code]`;
//! - under X-Ray active tracing (`AWS_XRAY_DAEMON_ADDRESS`), one subsegment per request,
//!   annotated with `vehicle`, `request_id`, `dialect` and `code`.
//!
//! `Code` is the first GraphQL error's `extensions.code`, `OK` when there is none; an answer
//! refused before GraphQL ran carries the auth code of its rejection (`UNAUTHENTICATED`, …), and
//! any other refusal (429, 413, a recovered panic's 500) or a refusal whose errors have no code
//! (422) the HTTP status name in upper snake case (`TOO_MANY_REQUESTS`, …). Errors without a
//! code in a 200 answer count as `ERROR`.

use crate::dialect::Dialect;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use dq_metrics::emf::{COUNT, MILLISECONDS};
use dq_metrics::query::Dimensions;
use dq_metrics::xray::Subsegment;
use dq_metrics::{Metric, RequestIds};
use std::time::{Instant, SystemTime};
use tracing::Instrument as _;

/// The per-request dimension set beside `[Stage, Function]`.
pub const DIMENSIONS: &[&str] = &["Stage", "Dialect", "Code"];
/// The longest `extensions.code` taken as a dimension value.
const MAX_CODE_LEN: usize = 64;

/// The HTTP surface's dimensions ([`DIMENSIONS`]) for [`dq_metrics::query::Observe`].
#[derive(Debug)]
pub struct Requests;

impl Dimensions for Requests {
    const PER_REQUEST: &'static [&'static str] = DIMENSIONS;
}

/// What the middleware writes to; built once per process.
pub type Observe = dq_metrics::query::Observe<Requests>;

/// The outcome of one GraphQL execution (or refusal) that the handler attaches to its response
/// for the middleware.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The first error's `extensions.code` (or the auth code of a refusal), if any.
    pub code: Option<String>,
    /// How many GraphQL errors the answer carries.
    pub errors: usize,
}

impl Outcome {
    /// The outcome of `response`.
    pub fn of(response: &async_graphql::Response) -> Outcome {
        let code =
            response
                .errors
                .first()
                .and_then(|e| match e.extensions.as_ref()?.get("code")? {
                    async_graphql::Value::String(s) => Some(s.clone()),
                    async_graphql::Value::Enum(n) => Some(n.to_string()),
                    _ => None,
                });
        Outcome {
            code,
            errors: response.errors.len(),
        }
    }

    /// The outcome of a request refused with the auth error `code`.
    pub fn refused(code: &str) -> Outcome {
        Outcome {
            code: Some(code.to_string()),
            errors: 0,
        }
    }
}

/// The `Code` of an answer with `status` and the handler's `outcome`.
fn code(status: StatusCode, outcome: Option<&Outcome>) -> String {
    let given = outcome
        .and_then(|o| o.code.as_deref())
        // A code is a bounded upper-case word in dq's own errors; anything else would mint
        // series, so it counts as uncoded.
        .filter(|c| {
            !c.is_empty()
                && c.len() <= MAX_CODE_LEN
                && c.bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        });
    match given {
        Some(c) => c.to_string(),
        None if status.is_success() && outcome.is_none_or(|o| o.errors == 0) => "OK".into(),
        None if status.is_success() => "ERROR".into(),
        None => status_name(status),
    }
}

/// `Too Many Requests` → `TOO_MANY_REQUESTS`.
fn status_name(status: StatusCode) -> String {
    status
        .canonical_reason()
        .map(|r| {
            r.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() {
                        c.to_ascii_uppercase()
                    } else {
                        '_'
                    }
                })
                .collect()
        })
        .unwrap_or_else(|| format!("HTTP_{}", status.as_u16()))
}

/// The middleware (state: the dialect served and the writers).
pub(crate) async fn middleware(
    State((dialect, observe)): State<(Dialect, Observe)>,
    req: Request,
    next: Next,
) -> Response {
    let ids = RequestIds::of(req.headers(), req.extensions());
    let span = tracing::info_span!(
        "request",
        request_id = %ids.request_id,
        trace_id = ids.trace_id(),
        dialect = dialect.name(),
        vehicle = tracing::field::Empty,
    );
    let measured = req.uri().path() == "/query"
        && (req.method() == Method::GET || req.method() == Method::POST);
    let started = Instant::now();
    let wall = SystemTime::now();
    let (resp, scope) = dq_metrics::request::scope(next.run(req).instrument(span)).await;
    let status = resp.status();
    let outcome = resp.extensions().get::<Outcome>();
    let code = code(status, outcome);
    if measured {
        let errors = outcome.map_or(0, |o| o.errors);
        observe.emit(
            &[("Dialect", dialect.name()), ("Code", code.as_str())],
            &[
                Metric::new("requests", 1.0, COUNT),
                Metric::new(
                    "latency_ms",
                    started.elapsed().as_secs_f64() * 1000.0,
                    MILLISECONDS,
                ),
                Metric::new("graphql_errors", errors as f64, COUNT),
            ],
        );
    }
    observe.trace(ids.trace.as_ref(), || Subsegment {
        name: format!("dq-graphql-{}", dialect.name()),
        start: wall,
        end: SystemTime::now(),
        status: status.as_u16(),
        annotations: vec![
            ("vehicle", scope.vehicle().unwrap_or_default()),
            ("request_id", ids.request_id.clone()),
            ("dialect", dialect.name().to_string()),
            ("code", code),
        ],
    });
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes() {
        let coded = |c: &str, errors| Outcome {
            code: Some(c.into()),
            errors,
        };
        let uncoded = |errors| Outcome { code: None, errors };
        let cases = [
            (200, Some(uncoded(0)), "OK"),
            (200, None, "OK"),
            (200, Some(coded("UNAUTHORIZED", 2)), "UNAUTHORIZED"),
            (200, Some(uncoded(1)), "ERROR"),
            (200, Some(coded("not a code", 1)), "ERROR"),
            (
                401,
                Some(Outcome::refused("UNAUTHENTICATED")),
                "UNAUTHENTICATED",
            ),
            (422, Some(uncoded(1)), "UNPROCESSABLE_ENTITY"),
            (429, None, "TOO_MANY_REQUESTS"),
            (500, None, "INTERNAL_SERVER_ERROR"),
            (599, None, "HTTP_599"),
        ];
        for (status, outcome, want) in cases {
            let status = StatusCode::from_u16(status).unwrap();
            assert_eq!(code(status, outcome.as_ref()), want, "{status} {outcome:?}");
        }
    }
}
