//! The graphql function: one axum router (crate `graphql`) served by `lambda_http` inside Lambda
//! (`AWS_LAMBDA_RUNTIME_API` set) and by `axum::serve` on `PORT` (default 3000) elsewhere. The
//! lake is opened once here, at cold start. With the `dev` feature and `DQ_DEV_AUTH=1` (local
//! only) it signs its own demo tokens.

#[cfg(feature = "dev")]
mod dev;

use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let state = graphql::http::state_from_env().await.map_err(|e| {
        tracing::error!(error = %e, "graphql function failed to start");
        e
    })?;
    // Shadow mode (`SHADOW_REFERENCE_URL`): sampled /query requests compared with a reference.
    let shadow = graphql::shadow::Shadow::from_env(state.dialect())?;
    let shadowed = |router: axum::Router| match &shadow {
        Some(s) => Arc::clone(s).wrap(router),
        None => router,
    };
    if std::env::var_os("AWS_LAMBDA_RUNTIME_API").is_some() {
        return lambda_http::run(shadowed(graphql::router(Arc::new(state)))).await;
    }
    let port: u16 = std::env::var("PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(3000);
    #[cfg(feature = "dev")]
    let (state, extra) = if std::env::var("DQ_DEV_AUTH").as_deref() == Ok("1") {
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
    let app = extra.merge(shadowed(graphql::router(Arc::new(state))));
    let listener = tokio::net::TcpListener::bind(("0.0.0.0", port)).await?;
    tracing::info!(port, "serving GraphQL on /query");
    axum::serve(listener, app).await?;
    Ok(())
}
