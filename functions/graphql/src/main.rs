//! The graphql function: one axum router (crate `graphql`) served by `lambda_http` inside Lambda
//! (`AWS_LAMBDA_RUNTIME_API` set) and by `axum::serve` on `PORT` (default 3000) elsewhere. The
//! lake is opened once here, at cold start. With the `dev` feature and `DQ_DEV_AUTH=1` (local
//! only) it signs its own demo tokens.

#[cfg(feature = "dev")]
mod dev;

use std::sync::Arc;

/// The local server's port (default 3000).
const PORT: &str = "PORT";
/// A boolean: sign and accept development tokens (`dev` feature, local only).
#[cfg(feature = "dev")]
const DQ_DEV_AUTH: &str = "DQ_DEV_AUTH";

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let state = dq_graphql::http::state_from_env().await.map_err(|e| {
        tracing::error!(error = %e, "graphql function failed to start");
        e
    })?;
    // Shadow mode (`SHADOW_REFERENCE_URL`): sampled /query requests compared with a reference.
    let shadow = dq_graphql::shadow::Shadow::from_env(state.dialect())?;
    let shadowed = |router: axum::Router| match &shadow {
        Some(s) => Arc::clone(s).wrap(router),
        None => router,
    };
    if dq_config::in_lambda() {
        return lambda_http::run(shadowed(dq_graphql::router(Arc::new(state)))).await;
    }
    let settings = dq_config::Settings::new(dq_config::env_lookup);
    let port: u16 = settings
        .get(PORT)
        .and_then(|p| p.parse().ok())
        .unwrap_or(3000);
    #[cfg(feature = "dev")]
    let dev_auth = settings
        .get(DQ_DEV_AUTH)
        .and_then(|v| dq_config::parse_bool(&v));
    #[cfg(feature = "dev")]
    let (state, extra) = if dev_auth == Some(true) {
        let (validator, jwks, curl) = dev::setup(port)?;
        println!("development token ready; try:\n{curl}");
        let jwks_route = axum::routing::get(move || {
            let jwks = jwks.clone();
            async move { ([("content-type", "application/json")], jwks) }
        });
        (
            state.with_validator(validator),
            axum::Router::new().route("/.well-known/jwks.json", jwks_route),
        )
    } else {
        (state, axum::Router::new())
    };
    #[cfg(not(feature = "dev"))]
    let extra = axum::Router::new();
    let app = extra.merge(shadowed(dq_graphql::router(Arc::new(state))));
    let listener = tokio::net::TcpListener::bind(("0.0.0.0", port)).await?;
    tracing::info!(port, "serving GraphQL on /query");
    axum::serve(listener, app).await?;
    Ok(())
}
