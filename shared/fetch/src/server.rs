//! Serving FetchService: one router for plain gRPC (HTTP/2) and gRPC-web (HTTP/1.1, tonic-web),
//! used as is by the local listener and by the Lambda adapter; and the service assembled from
//! the environment (lake, blob store, auth, identity-api, limits).

use crate::service::FetchApi;
use dq_auth::{AuthSettings, GrpcAuthenticator};
use dq_proto::grpc::fetch_service_server::FetchServiceServer;
use dq_rawquery::db::Db;
use dq_rawquery::payload::Payloads;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

/// Largest gRPC message sent or received.
pub const MAX_MESSAGE_BYTES: usize = 50 << 20;
/// Local listener port.
pub const PORT_GRPC: &str = "PORT_GRPC";
/// Local listener address (an IP); `make demo` binds 127.0.0.1.
pub const HOST_GRPC: &str = "HOST_GRPC";
/// Port when `PORT_GRPC` is unset (Go dq's `GRPC_PORT` default).
pub const DEFAULT_PORT_GRPC: u16 = 8086;
/// Calls in flight at once; 0 or unset = unlimited.
pub use dq_config::MAX_CONCURRENT_REQUESTS;
/// The server's maximum call deadline, a Go duration (default `30s`): the deadline of calls
/// without `grpc-timeout`, and the cap of the ones a client asks for.
pub const FETCH_MAX_DEADLINE: &str = "FETCH_MAX_DEADLINE";

/// The FetchService router: gRPC and gRPC-web on the same routes, 50 MiB messages.
pub fn router(api: FetchApi) -> axum::Router {
    let observe = api.observe().clone();
    let service = FetchServiceServer::new(api)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    tonic::service::Routes::new(service)
        .into_axum_router()
        // Inside the gRPC-web translation: every call is seen as plain gRPC (status in trailers).
        .layer(axum::middleware::from_fn_with_state(
            observe,
            crate::observe::middleware,
        ))
        .layer(tonic_web::GrpcWebLayer::new())
}

/// Serves `router` on `listener` (HTTP/2 and HTTP/1.1) until `shutdown` resolves, then drains.
///
/// # Errors
/// When the server fails.
pub async fn serve(
    router: axum::Router,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), tonic::transport::Error> {
    tonic::transport::Server::builder()
        .accept_http1(true)
        .add_routes(tonic::service::Routes::from(router))
        .serve_with_incoming_shutdown(
            // Without TCP_NODELAY, Nagle + delayed ACK add ~40 ms to each small unary response
            // (the builder's nodelay setting does not apply to an incoming we build).
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
            shutdown,
        )
        .await
}

/// Why the service could not be assembled.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A setting is invalid.
    #[error("invalid setting {key}: {reason}")]
    Setting {
        /// The environment key.
        key: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The auth settings are invalid.
    #[error(transparent)]
    Auth(#[from] dq_auth::ConfigError),
    /// The lake could not be opened.
    #[error(transparent)]
    Lake(#[from] dq_lake::Error),
    /// The blob store could not be configured.
    #[error(transparent)]
    Blob(#[from] dq_blob::BlobError),
    /// The HTTP client could not be built.
    #[error("http client: {0}")]
    Http(String),
}

/// The listen address from `HOST_GRPC` (default all interfaces, `0.0.0.0`) and `PORT_GRPC`.
///
/// # Errors
/// [`StartError::Setting`] for a value that is not an IP address or a port.
pub fn listen_addr() -> Result<SocketAddr, StartError> {
    let port = match env(PORT_GRPC) {
        None => DEFAULT_PORT_GRPC,
        Some(v) => v.parse().map_err(|_| StartError::Setting {
            key: PORT_GRPC,
            reason: "must be a port number".into(),
        })?,
    };
    let host: IpAddr = match env(HOST_GRPC) {
        None => Ipv4Addr::UNSPECIFIED.into(),
        Some(v) => v.parse().map_err(|_| StartError::Setting {
            key: HOST_GRPC,
            reason: "must be an IP address (e.g. 127.0.0.1, ::1, 0.0.0.0)".into(),
        })?,
    };
    Ok(SocketAddr::new(host, port))
}

fn env(key: &str) -> Option<String> {
    dq_config::Settings::new(dq_config::env_lookup).get(key)
}

/// Assembles the service from the environment: `DUCKLAKE_*`/`DUCKDB_*` (lake), `BLOB_*` and
/// `S3_*` (blob store; none without `BLOB_BUCKET`), the auth settings (`TOKEN_EXCHANGE_*`,
/// `FETCH_GRPC_REQUIRE_JWT`, `FETCH_IAM_ALLOWED_CALLERS`, `FETCH_GRPC_TRUST_UNAUTHENTICATED`,
/// `FETCH_GRPC_TRUSTED_CIDRS`, `IDENTITY_API_URL`), `MAX_CONCURRENT_REQUESTS` and
/// `FETCH_MAX_DEADLINE`.
///
/// `listener` is the local listener's address ([`listen_addr`]), `None` inside Lambda (the
/// Runtime API serves; the local trust setting is refused there).
///
/// # Errors
/// [`StartError`] naming what is wrong.
pub async fn api_from_env(listener: Option<SocketAddr>) -> Result<FetchApi, StartError> {
    let settings = AuthSettings::from_env()?;
    if let Some(addr) = listener {
        settings.check_listener(addr)?;
    }
    let max_concurrent = match env(MAX_CONCURRENT_REQUESTS) {
        None => 0,
        Some(v) => v.parse().map_err(|_| StartError::Setting {
            key: MAX_CONCURRENT_REQUESTS,
            reason: "must be a non-negative integer".into(),
        })?,
    };
    let max_deadline = match env(FETCH_MAX_DEADLINE) {
        None => crate::service::DEFAULT_DEADLINE,
        Some(v) => dq_config::parse_go_duration(&v)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| StartError::Setting {
                key: FETCH_MAX_DEADLINE,
                reason: format!("{v:?} is not a positive Go duration (e.g. `30s`)"),
            })?,
    };
    let http = reqwest::Client::builder()
        .timeout(dq_auth::remote::UPSTREAM_TIMEOUT)
        .build()
        .map_err(|e| StartError::Http(e.to_string()))?;
    let validator = dq_auth::remote::validator(&settings, &http);
    if let Some(v) = &validator {
        v.prefetch();
    }
    let secrets = dq_secrets::SecretsClient::from_env();
    let blob_cfg =
        dq_blob::BlobConfig::from_lookup_with_secrets(dq_config::env_lookup, &secrets).await?;
    let store = if blob_cfg.bucket.is_empty() {
        None
    } else {
        Some(Arc::new(dq_blob::BlobStore::open(&blob_cfg).await?))
    };
    let lake_cfg =
        dq_lake::LakeConfig::from_lookup_with_secrets(dq_config::env_lookup, &secrets).await?;
    // The lake opens, then `raw_events`' file listing loads: a new instance's first request
    // reads instead of listing.
    let db = tokio::task::spawn_blocking(move || {
        let db = Db::new(dq_lake::Lake::open(lake_cfg)?);
        db.preload_listing();
        Ok::<_, dq_lake::Error>(db)
    })
    .await
    .map_err(|e| StartError::Setting {
        key: "DUCKLAKE_CATALOG_DSN",
        reason: format!("opening the lake failed: {e}"),
    })??;
    let authenticator = GrpcAuthenticator::from_settings(validator, &settings);
    let mut api = FetchApi::new(Arc::new(db), Payloads::new(store), authenticator)
        .with_concurrency_limit(max_concurrent)
        .with_max_deadline(max_deadline)
        .with_observe(crate::observe::Observe::from_env().map_err(|reason| {
            StartError::Setting {
                key: dq_metrics::query::QUERY_EMF,
                reason,
            }
        })?);
    if let Some(url) = settings.identity_api_url.clone() {
        api = api.with_device_links(Arc::new(dq_auth::remote::IdentityApi::new(http, url)));
    }
    Ok(api)
}
