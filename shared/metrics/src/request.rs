//! The identity of one served request for its `tracing` span and its X-Ray subsegment: the
//! request id, the trace id, and the vehicle once a handler knows it.
//!
//! The vehicle is recorded by the handler deep inside the request ([`record_vehicle`]) and read
//! back by the middleware that created the span ([`scope`], [`Scope::vehicle`]), so it reaches
//! both the JSON logs (a span field) and the subsegment's annotations.

use crate::xray::TraceHeader;
use lambda_http::request::RequestContext;
use lambda_http::RequestExt as _;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

/// The longest id taken from a request (API Gateway's and Lambda's are far shorter); longer or
/// non-printable values are ignored, so a client cannot stuff the logs through a header.
const MAX_ID_LEN: usize = 256;

/// The ids of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestIds {
    /// API Gateway's request id, else the Lambda invocation's, else a fresh UUID.
    pub request_id: String,
    /// The X-Ray trace: Lambda's (`X-Amzn-Trace-Id`, which lambda_http sets from the invocation)
    /// or, outside Lambda, the caller's header; `None` when neither parses.
    pub trace: Option<TraceHeader>,
}

impl RequestIds {
    /// The ids of a request with these `headers` and `extensions` (lambda_http puts the API
    /// Gateway and Lambda contexts there).
    pub fn of(headers: &http::HeaderMap, extensions: &http::Extensions) -> RequestIds {
        let gateway = extensions
            .request_context_ref()
            .and_then(|ctx| match ctx {
                RequestContext::ApiGatewayV2(c) => c.request_id.clone(),
                RequestContext::ApiGatewayV1(c) => c.request_id.clone(),
                #[allow(unreachable_patterns)]
                _ => None,
            })
            .filter(|id| printable(id));
        let lambda = extensions.lambda_context_ref();
        let request_id = gateway
            .or_else(|| {
                lambda
                    .map(|c| c.request_id.clone())
                    .filter(|id| printable(id))
            })
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let trace = headers
            .get("x-amzn-trace-id")
            .and_then(|v| v.to_str().ok())
            .filter(|v| printable(v))
            .and_then(TraceHeader::parse)
            .or_else(|| {
                lambda
                    .and_then(|c| c.xray_trace_id.as_deref())
                    .filter(|v| printable(v))
                    .and_then(TraceHeader::parse)
            });
        RequestIds { request_id, trace }
    }

    /// The trace's root id (`1-…-…`), the `trace_id` of logs; empty without a trace.
    pub fn trace_id(&self) -> &str {
        self.trace.as_ref().map_or("", |t| t.root.as_str())
    }
}

fn printable(s: &str) -> bool {
    !s.is_empty() && s.len() <= MAX_ID_LEN && s.bytes().all(|b| b.is_ascii_graphic())
}

/// What a request's handlers learn about it while it runs.
#[derive(Debug, Clone, Default)]
pub struct Scope(Arc<Mutex<Option<String>>>);

impl Scope {
    /// The vehicle the handler recorded, if any.
    pub fn vehicle(&self) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

tokio::task_local! {
    static SCOPE: Scope;
}

/// Runs `fut` (one request) with a fresh [`Scope`] that [`record_vehicle`] fills; returns the
/// scope with the output.
pub async fn scope<F: Future>(fut: F) -> (F::Output, Scope) {
    let scope = Scope::default();
    let out = SCOPE.scope(scope.clone(), fut).await;
    (out, scope)
}

/// Records the request's vehicle (a subject DID or token id, once resolved): on the current
/// span's `vehicle` field and in the request's [`Scope`]. A later call replaces an earlier one;
/// outside a request it only touches the current span, if any.
pub fn record_vehicle(vehicle: &str) {
    if vehicle.is_empty() {
        return;
    }
    tracing::Span::current().record("vehicle", vehicle);
    let _ = SCOPE.try_with(|s| {
        *s.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(vehicle.to_string());
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_http::aws_lambda_events::apigw::ApiGatewayV2httpRequestContext;

    #[test]
    fn ids_from_gateway_lambda_and_headers() {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            "x-amzn-trace-id",
            "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
                .parse()
                .unwrap(),
        );
        let mut ext = http::Extensions::new();
        let mut ctx = ApiGatewayV2httpRequestContext::default();
        ctx.request_id = Some("gw-req-1".into());
        ext.insert(RequestContext::ApiGatewayV2(ctx));
        let mut lambda = lambda_http::Context::default();
        lambda.request_id = "lambda-req-1".into();
        lambda.xray_trace_id = Some("Root=1-aaaaaaaa-bbbbbbbbbbbbbbbbbbbbbbbb;Sampled=0".into());
        ext.insert(lambda);
        let ids = RequestIds::of(&headers, &ext);
        assert_eq!(ids.request_id, "gw-req-1");
        assert_eq!(ids.trace_id(), "1-5759e988-bd862e3fe1be46a994272793");

        // No gateway context, no header: the Lambda invocation's ids.
        ext.remove::<RequestContext>();
        let ids = RequestIds::of(&http::HeaderMap::new(), &ext);
        assert_eq!(ids.request_id, "lambda-req-1");
        assert_eq!(ids.trace_id(), "1-aaaaaaaa-bbbbbbbbbbbbbbbbbbbbbbbb");

        // Nothing: a fresh id, no trace; a header with a control character is ignored.
        let mut headers = http::HeaderMap::new();
        headers.insert(
            "x-amzn-trace-id",
            http::HeaderValue::from_bytes(b"Root=1-a-b\tx").unwrap(),
        );
        let a = RequestIds::of(&headers, &http::Extensions::new());
        let b = RequestIds::of(&headers, &http::Extensions::new());
        assert_ne!(a.request_id, b.request_id);
        assert!(uuid::Uuid::parse_str(&a.request_id).is_ok());
        assert_eq!(a.trace, None);
    }

    #[tokio::test]
    async fn vehicle_reaches_the_scope() {
        let ((), scope) = scope(async {
            record_vehicle("");
            record_vehicle("did:erc721:137:0xabc:1");
        })
        .await;
        assert_eq!(scope.vehicle().as_deref(), Some("did:erc721:137:0xabc:1"));
        // Outside a scope nothing fails.
        record_vehicle("did:erc721:137:0xabc:2");
    }
}
