//! The Lambda side of the router: API Gateway HTTP API (payload v2) events carrying gRPC-web
//! requests (base64 bodies are decoded by lambda_http, binary responses re-encoded by it).
//!
//! The only thing added here is identity: the caller ARN that API Gateway verified on an
//! IAM-authorized route (`requestContext.authorizer.iam.userArn`) becomes an [`IamCaller`]
//! request extension, which the service checks against `FETCH_IAM_ALLOWED_CALLERS`. Nothing a
//! client sends (headers, body) can produce it.

use crate::service::IamCaller;
use lambda_http::request::RequestContext;
use lambda_http::RequestExt;
use std::convert::Infallible;
use tower::util::ServiceExt;

/// The verified IAM caller of an API Gateway v2 request, if its route is IAM-authorized.
pub fn iam_caller(request: &lambda_http::Request) -> Option<IamCaller> {
    match request.request_context_ref()? {
        RequestContext::ApiGatewayV2(ctx) => ctx
            .authorizer
            .as_ref()?
            .iam
            .as_ref()?
            .user_arn
            .clone()
            .filter(|arn| !arn.is_empty())
            .map(IamCaller),
        // REST API and other origins are not deployed for FetchService: no IAM identity.
        _ => None,
    }
}

/// Handles one Lambda HTTP request with `router` (a clone per request; axum routers are cheap
/// to clone), attaching the verified IAM caller first.
///
/// # Errors
/// Never: the router answers every request, failures as gRPC statuses.
pub async fn handle(
    router: axum::Router,
    mut request: lambda_http::Request,
) -> Result<axum::response::Response, Infallible> {
    // Drop anything already there before inserting what the platform verified.
    request.extensions_mut().remove::<IamCaller>();
    if let Some(caller) = iam_caller(&request) {
        request.extensions_mut().insert(caller);
    }
    router.oneshot(request).await
}
