//! Per-call observability of FetchService, from one middleware inside the gRPC-web translation
//! (so plain gRPC and gRPC-web calls look the same to it):
//!
//! - a `tracing` span `request` with `request_id`, `trace_id`, `method` and `vehicle` (recorded
//!   by the service once a subject is authorized), so every log line of the call carries them,
//!   and one access line `FetchService call` with the status code and latency;
//! - with `QUERY_EMF` on, one EMF line per RPC in `dq/query`: properties `Method` (the RPC name,
//!   `unknown` for a path the service does not serve) and `Code` (the gRPC status in upper snake
//!   case: `OK`, `NOT_FOUND`, …), metrics `requests` and `latency_ms`, aggregated over
//!   `[Stage, Function]` and `[Stage, Method, Code]`;
//! - under X-Ray active tracing (`AWS_XRAY_DAEMON_ADDRESS`), one subsegment per call, annotated
//!   with `vehicle`, `request_id`, `method` and `code`.
//!
//! The status of a successful call travels in the trailers after the body, so the line is
//! written when the response body is finished (dropped): the latency covers encoding too, and a
//! body abandoned before its trailers counts as `CANCELLED`.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use dq_metrics::emf::{COUNT, MILLISECONDS};
use dq_metrics::query::Dimensions;
use dq_metrics::request::Scope;
use dq_metrics::xray::{Subsegment, TraceHeader};
use dq_metrics::{Metric, RequestIds};
use http_body_util::BodyExt as _;
use std::time::{Instant, SystemTime};
use tracing::Instrument as _;

/// The per-call dimension set beside `[Stage, Function]`.
pub const DIMENSIONS: &[&str] = &["Stage", "Method", "Code"];

/// The RPCs of `grpc.FetchService` (fetch-api.proto); any other method name is `unknown`, so a
/// caller cannot mint metric series.
pub const METHODS: &[&str] = &[
    "GetLatestIndex",
    "ListIndexes",
    "GetLatestCloudEvent",
    "ListCloudEvents",
    "ListCloudEventsFromIndex",
];

/// The service's path prefix.
const SERVICE_PREFIX: &str = "/grpc.FetchService/";

/// FetchService's dimensions ([`DIMENSIONS`]) for [`dq_metrics::query::Observe`].
#[derive(Debug)]
pub struct Calls;

impl Dimensions for Calls {
    const PER_REQUEST: &'static [&'static str] = DIMENSIONS;
}

/// What the middleware writes to; built once per process.
pub type Observe = dq_metrics::query::Observe<Calls>;

/// The RPC name of a request path.
fn method(path: &str) -> &'static str {
    path.strip_prefix(SERVICE_PREFIX)
        .and_then(|m| METHODS.iter().find(|k| **k == m))
        .copied()
        .unwrap_or("unknown")
}

/// The upper snake case name of a numeric gRPC status.
pub fn code_name(code: i32) -> &'static str {
    match code {
        0 => "OK",
        1 => "CANCELLED",
        2 => "UNKNOWN",
        3 => "INVALID_ARGUMENT",
        4 => "DEADLINE_EXCEEDED",
        5 => "NOT_FOUND",
        6 => "ALREADY_EXISTS",
        7 => "PERMISSION_DENIED",
        8 => "RESOURCE_EXHAUSTED",
        9 => "FAILED_PRECONDITION",
        10 => "ABORTED",
        11 => "OUT_OF_RANGE",
        12 => "UNIMPLEMENTED",
        13 => "INTERNAL",
        14 => "UNAVAILABLE",
        15 => "DATA_LOSS",
        16 => "UNAUTHENTICATED",
        _ => "UNKNOWN",
    }
}

fn grpc_status(headers: &axum::http::HeaderMap) -> Option<&'static str> {
    let v = headers.get("grpc-status")?.to_str().ok()?;
    Some(code_name(v.trim().parse().ok()?))
}

/// The middleware (state: the writers).
pub(crate) async fn middleware(
    State(observe): State<Observe>,
    req: Request,
    next: Next,
) -> Response {
    let ids = RequestIds::of(req.headers(), req.extensions());
    let method = method(req.uri().path());
    let span = tracing::info_span!(
        "request",
        request_id = %ids.request_id,
        trace_id = ids.trace_id(),
        method,
        vehicle = tracing::field::Empty,
    );
    let started = Instant::now();
    let wall = SystemTime::now();
    let (resp, scope) = dq_metrics::request::scope(next.run(req).instrument(span.clone())).await;
    let (parts, body) = resp.into_parts();
    let mut call = Call {
        observe,
        method,
        started,
        wall,
        http_status: parts.status.as_u16(),
        // A trailers-only answer (every error tonic returns) has its status in the headers.
        code: grpc_status(&parts.headers),
        trace: ids.trace,
        request_id: ids.request_id,
        scope,
        span,
    };
    // The closure owns `call`, so it lives exactly as long as the body (see `Call::drop`).
    let body = body.map_frame(move |frame| {
        call.trailers(frame.trailers_ref());
        frame
    });
    Response::from_parts(parts, Body::new(body))
}

/// One call in flight; written out when its response body is dropped.
struct Call {
    observe: Observe,
    method: &'static str,
    started: Instant,
    wall: SystemTime,
    http_status: u16,
    code: Option<&'static str>,
    trace: Option<TraceHeader>,
    request_id: String,
    scope: Scope,
    span: tracing::Span,
}

impl Call {
    fn trailers(&mut self, trailers: Option<&axum::http::HeaderMap>) {
        if let Some(code) = trailers.and_then(grpc_status) {
            self.code = Some(code);
        }
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        let code = self.code.unwrap_or("CANCELLED");
        let latency_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        // The call's access line, inside its span (request id, trace id, vehicle).
        self.span
            .in_scope(|| tracing::info!(code, latency_ms, "FetchService call"));
        self.observe.emit(
            &[("Method", self.method), ("Code", code)],
            &[
                Metric::new("requests", 1.0, COUNT),
                Metric::new("latency_ms", latency_ms, MILLISECONDS),
            ],
        );
        self.observe.trace(self.trace.as_ref(), || Subsegment {
            name: "dq-fetch".into(),
            start: self.wall,
            end: SystemTime::now(),
            status: self.http_status,
            annotations: vec![
                ("vehicle", self.scope.vehicle().unwrap_or_default()),
                ("request_id", std::mem::take(&mut self.request_id)),
                ("method", self.method.to_string()),
                ("code", code.to_string()),
            ],
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_are_the_protos_rpcs() {
        let proto = include_str!("../../proto/proto/fetch-api.proto");
        let rpcs: Vec<&str> = proto
            .lines()
            .filter_map(|l| l.trim().strip_prefix("rpc "))
            .filter_map(|l| l.split('(').next())
            .map(str::trim)
            .collect();
        assert_eq!(rpcs, METHODS);
        assert_eq!(
            method("/grpc.FetchService/ListCloudEvents"),
            "ListCloudEvents"
        );
        assert_eq!(method("/grpc.FetchService/DropTables"), "unknown");
        assert_eq!(method("/other.Service/ListCloudEvents"), "unknown");
    }

    #[test]
    fn code_names() {
        assert_eq!(code_name(0), "OK");
        assert_eq!(code_name(5), "NOT_FOUND");
        assert_eq!(code_name(16), "UNAUTHENTICATED");
        assert_eq!(code_name(99), "UNKNOWN");
        for c in 0..=16 {
            assert_eq!(
                code_name(c),
                format!("{:?}", tonic::Code::from_i32(c)).chars().fold(
                    String::new(),
                    |mut s, ch| {
                        if ch.is_uppercase() && !s.is_empty() {
                            s.push('_');
                        }
                        s.push(ch.to_ascii_uppercase());
                        s
                    }
                ),
                "{c}"
            );
        }
    }
}
