//! The router of one dialect's deployment: `/query` and `/ready` ([`http`]), `/mcp` ([`mcp`],
//! behind `/query`'s JWT step), GraphiQL at every other path ([`graphiql`]), all inside the
//! per-request span and metrics ([`observe`]).

use crate::http::{self, AppState};
use crate::{graphiql, mcp, observe};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::sync::Arc;

/// The router: `/query`, `/mcp`, `/ready`, GraphiQL everywhere else.
pub fn router(state: Arc<AppState>) -> Router {
    let mcp = mcp::service(Arc::clone(&state), state.dialect, state.schema.clone());
    let mcp =
        Router::new()
            .route_service("/mcp", mcp)
            .route_layer(axum::middleware::from_fn_with_state(
                Arc::clone(&state),
                mcp_jwt,
            ));
    Router::new()
        .route(
            "/query",
            get(http::graphql).post(http::graphql).options(options),
        )
        .merge(mcp)
        .route("/ready", get(http::ready))
        .fallback(playground)
        .layer(DefaultBodyLimit::max(http::BODY_LIMIT))
        .layer(axum::middleware::from_fn_with_state(
            (state.dialect, state.observe.clone()),
            observe::middleware,
        ))
        .with_state(state)
}

/// `/query`'s JWT step in front of every `/mcp` request: no token is fine (the schema tools
/// need none, and data tools then answer "jwt missing" through `/query`), but a token that does
/// not validate is refused with `/query`'s 401 before MCP runs, as Go dq's middleware chain did.
async fn mcp_jwt(
    State(state): State<Arc<AppState>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if let Err(rejected) = http::jwt_step(&state, request.headers(), "/mcp").await {
        return rejected;
    }
    next.run(request).await
}

/// gqlgen's OPTIONS transport: 200 with the allowed methods.
async fn options() -> Response {
    (StatusCode::OK, [(header::ALLOW, "OPTIONS, GET, POST")]).into_response()
}

/// GraphiQL, assets bundled (module `graphiql`).
async fn playground(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    graphiql::response(state.dialect, &headers)
}
