//! The fetch Lambda: FetchService as gRPC-web behind API Gateway (HTTP API, IAM-authorized
//! routes), or locally plain gRPC and gRPC-web on `HOST_GRPC`:`PORT_GRPC`. Everything but
//! process wiring lives in the `fetch` crate.

use anyhow::Context as _;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    // Inside Lambda the Runtime API serves the requests: there is no listener.
    let addr = if dq_config::in_lambda() {
        None
    } else {
        Some(dq_fetch::server::listen_addr()?)
    };
    let api = dq_fetch::server::api_from_env(addr)
        .await
        .context("assemble FetchService")?;
    let router = dq_fetch::server::router(api);
    match addr {
        None => lambda_http::run(lambda_http::service_fn(move |request| {
            dq_fetch::lambda::handle(router.clone(), request)
        }))
        .await
        .map_err(|e| anyhow::anyhow!("lambda runtime: {e}")),
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("bind {addr}"))?;
            tracing::info!(%addr, "FetchService listening (gRPC and gRPC-web)");
            dq_fetch::server::serve(router, listener, async {
                // Graceful stop on Ctrl-C or SIGTERM.
                let _ = tokio::signal::ctrl_c().await;
            })
            .await
            .context("serve FetchService")
        }
    }
}
