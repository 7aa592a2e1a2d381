//! `/query` (POST and GET) and `/ready` of one dialect, and the process state they share: the
//! auth chain (global limiter → timeout → JWT → per-subject limiter), the 4 MiB body cap and
//! the HTTP error shapes of the original services.

use crate::cloud_events::CloudEvents;
use crate::context::{Caller, Deadline, Executed, StatementSlots, MAX_STATEMENTS_PER_REQUEST};
use crate::dialect::{Dialect, DialectSettings};
use crate::errors;
use async_graphql::dynamic::Schema;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use dq_auth::{Principal, TokenValidator};
use dq_query::Engine;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// Request body cap.
pub const BODY_LIMIT: usize = 4 << 20;
/// How long a request waits for a global slot before 429.
const GLOBAL_WAIT: Duration = Duration::from_millis(100);
/// `/ready` probe timeout, result cache and failure grace.
const READY_TIMEOUT: Duration = Duration::from_secs(2);
const READY_CACHE: Duration = Duration::from_secs(3);
const READY_GRACE: Duration = Duration::from_secs(60);

/// Limits read once from the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `MAX_REQUEST_DURATION` (default 5 m).
    pub max_request_duration: Duration,
    /// `MAX_CONCURRENT_REQUESTS` (0 = off).
    pub max_concurrent: usize,
    /// `MAX_CONCURRENT_REQUESTS_PER_SUBJECT` (0 = off).
    pub max_concurrent_per_subject: usize,
    /// `MAX_CONCURRENT_STATEMENTS_PER_REQUEST` (default 4, 1–1000): how many root fields of
    /// one request run their SQL at once; the others wait for a slot.
    pub max_statements_per_request: usize,
}

/// `MAX_CONCURRENT_STATEMENTS_PER_REQUEST`'s default: under the engine's six pooled connections,
/// so one request cannot take them all.
pub const DEFAULT_STATEMENTS_PER_REQUEST: usize = 4;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request_duration: Duration::from_secs(300),
            max_concurrent: 0,
            max_concurrent_per_subject: 0,
            max_statements_per_request: DEFAULT_STATEMENTS_PER_REQUEST,
        }
    }
}

impl Limits {
    /// Reads the limits from `lookup` (the environment in production).
    ///
    /// # Errors
    /// An unparsable or non-positive duration, a non-numeric limit, or a statement bound out of
    /// range.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Limits, String> {
        let mut limits = Limits::default();
        if let Some(d) = lookup("MAX_REQUEST_DURATION").filter(|s| !s.trim().is_empty()) {
            let us = dq_query::interval::parse_go_duration_us(d.trim())
                .map_err(|e| format!("MAX_REQUEST_DURATION: {e}"))?;
            let us = u64::try_from(us)
                .ok()
                .filter(|us| *us > 0)
                .ok_or("MAX_REQUEST_DURATION must be positive")?;
            limits.max_request_duration = Duration::from_micros(us);
        }
        let count = |key: &str| -> Result<Option<usize>, String> {
            lookup(key)
                .filter(|s| !s.trim().is_empty())
                .map(|v| {
                    v.trim()
                        .parse()
                        .map_err(|_| format!("{key} must be a non-negative integer"))
                })
                .transpose()
        };
        limits.max_concurrent = count(dq_config::MAX_CONCURRENT_REQUESTS)?.unwrap_or(0);
        limits.max_concurrent_per_subject =
            count("MAX_CONCURRENT_REQUESTS_PER_SUBJECT")?.unwrap_or(0);
        if let Some(n) = count("MAX_CONCURRENT_STATEMENTS_PER_REQUEST")? {
            if !(1..=MAX_STATEMENTS_PER_REQUEST).contains(&n) {
                return Err(format!(
                    "MAX_CONCURRENT_STATEMENTS_PER_REQUEST must be between 1 and {MAX_STATEMENTS_PER_REQUEST}"
                ));
            }
            limits.max_statements_per_request = n;
        }
        Ok(limits)
    }
}

#[derive(Debug, Default)]
struct Readiness {
    checked_at: Option<Instant>,
    ok: bool,
    last_success: Option<Instant>,
}

/// The global and per-subject concurrency limits.
#[derive(Debug)]
pub struct Limiter {
    global: Option<Arc<Semaphore>>,
    per_subject: usize,
    in_flight: Mutex<HashMap<String, usize>>,
}

/// A held per-subject slot, released on drop (also when the handler unwinds).
#[derive(Debug)]
pub struct SubjectSlot<'a> {
    limiter: &'a Limiter,
    key: String,
}

impl Drop for SubjectSlot<'_> {
    fn drop(&mut self) {
        let mut map = self
            .limiter
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = map.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                map.remove(&self.key);
            }
        }
    }
}

impl Limiter {
    /// Limits of `limits` (0 = off).
    pub fn new(limits: &Limits) -> Limiter {
        Limiter {
            global: (limits.max_concurrent > 0)
                .then(|| Arc::new(Semaphore::new(limits.max_concurrent))),
            per_subject: limits.max_concurrent_per_subject,
            in_flight: Mutex::new(HashMap::new()),
        }
    }

    /// A global slot, waiting up to 100 ms; `None` means 429, `Some(None)` unlimited.
    pub async fn acquire_global(&self) -> Option<Option<OwnedSemaphorePermit>> {
        match &self.global {
            None => Some(None),
            Some(sem) => tokio::time::timeout(GLOBAL_WAIT, Arc::clone(sem).acquire_owned())
                .await
                .ok()
                .and_then(Result::ok)
                .map(Some),
        }
    }

    /// A slot for the token subject `key` (no wait); `None` means 429. Unauthenticated
    /// requests (`key` None) are not limited.
    pub fn acquire_subject(&self, key: Option<&str>) -> Option<Option<SubjectSlot<'_>>> {
        let Some(key) = key.filter(|_| self.per_subject > 0) else {
            return Some(None);
        };
        let mut map = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let n = map.entry(key.to_string()).or_insert(0);
        if *n >= self.per_subject {
            return None;
        }
        *n += 1;
        Some(Some(SubjectSlot {
            limiter: self,
            key: key.to_string(),
        }))
    }
}

/// Everything a request needs; built once per process (cold start).
pub struct AppState {
    pub(crate) dialect: Dialect,
    pub(crate) schema: Schema,
    engine: Arc<Engine>,
    validator: Option<TokenValidator>,
    limits: Limits,
    limiter: Limiter,
    cloud_events: Option<Arc<CloudEvents>>,
    readiness: tokio::sync::Mutex<Readiness>,
    pub(crate) observe: crate::observe::Observe,
}

impl AppState {
    /// Assembles the state of a `dialect` deployment; `validator` is `None` when no issuer is
    /// configured.
    ///
    /// # Errors
    /// The schema cannot be built (a bug).
    pub fn new(
        dialect: Dialect,
        settings: DialectSettings,
        engine: Arc<Engine>,
        validator: Option<TokenValidator>,
        limits: Limits,
    ) -> Result<AppState, String> {
        let schema =
            crate::schema::build(dialect, settings).map_err(|e| format!("build schema: {e}"))?;
        Ok(AppState {
            dialect,
            schema,
            engine,
            validator,
            limiter: Limiter::new(&limits),
            limits,
            cloud_events: None,
            readiness: tokio::sync::Mutex::new(Readiness::default()),
            observe: crate::observe::Observe::default(),
        })
    }
}

impl AppState {
    /// Replaces the token validator (the local demo's development signer).
    pub fn with_validator(mut self, validator: TokenValidator) -> AppState {
        self.validator = Some(validator);
        self
    }

    /// Serves the cloud-event queries from `backend`.
    pub fn with_cloud_events(mut self, backend: CloudEvents) -> AppState {
        self.cloud_events = Some(Arc::new(backend));
        self
    }

    /// Request metrics and X-Ray subsegments ([`crate::observe`]; default: neither).
    pub fn with_observe(mut self, observe: crate::observe::Observe) -> AppState {
        self.observe = observe;
        self
    }

    /// The dialect this deployment serves.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }
}

/// Builds the process state from the environment: the lake (opened once), the JWT validator
/// (`TOKEN_EXCHANGE_*`) and the limits.
///
/// # Errors
/// Any invalid setting, or the lake failing to open.
pub async fn state_from_env() -> Result<AppState, String> {
    let settings = dq_auth::AuthSettings::from_env().map_err(|e| e.to_string())?;
    let limits = Limits::from_lookup(|k| std::env::var(k).ok())?;
    let http = reqwest::Client::new();
    let validator = dq_auth::remote::validator(&settings, &http);
    if let Some(v) = &validator {
        v.prefetch();
    }
    let secrets = dq_secrets::SecretsClient::from_env();
    let blob_cfg = dq_blob::BlobConfig::from_lookup_with_secrets(dq_config::env_lookup, &secrets)
        .await
        .map_err(|e| format!("blob settings: {e}"))?;
    let store = if blob_cfg.bucket.is_empty() {
        None
    } else {
        let store = dq_blob::BlobStore::open(&blob_cfg)
            .await
            .map_err(|e| format!("open blob store: {e}"))?;
        Some(Arc::new(store))
    };
    let cfg = dq_lake::LakeConfig::from_lookup_with_secrets(dq_config::env_lookup, &secrets)
        .await
        .map_err(|e| e.to_string())?;
    // The lake opens, then the file listings of every table a request reads load: a new
    // instance's first request reads instead of listing.
    let (engine, db) = tokio::task::spawn_blocking(move || {
        let (engine, db) = share_lake(dq_lake::Lake::open(cfg)?);
        preload(&engine, &db);
        Ok::<_, dq_lake::Error>((engine, db))
    })
    .await
    .map_err(|e| format!("open lake: {e}"))?
    .map_err(|e| format!("open lake: {e}"))?;
    let (dialect, dialect_settings) = DialectSettings::from_lookup(|k| std::env::var(k).ok())?;
    let links = settings.identity_api_url.clone().map(|url| {
        Arc::new(dq_auth::remote::IdentityApi::new(http.clone(), url))
            as Arc<dyn dq_auth::DeviceLinks>
    });
    Ok(AppState::new(
        dialect,
        dialect_settings,
        Arc::new(engine),
        validator,
        limits,
    )?
    .with_cloud_events(CloudEvents::new(db, store, links))
    .with_observe(crate::observe::Observe::from_env()?))
}

/// One DuckDB instance for both readers (signal engine and cloud-event reader), reopened for
/// both when DuckDB invalidates it ([`dq_lake::SharedLake`]).
pub fn share_lake(lake: dq_lake::Lake) -> (Engine, Arc<dq_rawquery::Db>) {
    let shared = Arc::new(dq_lake::SharedLake::new(lake));
    (
        Engine::on(Arc::clone(&shared)),
        Arc::new(dq_rawquery::Db::on(shared)),
    )
}

/// Loads the file listing of every table the readers of [`share_lake`] read directly, one
/// table after another (on PostgreSQL the rollups whole, and of the time-partitioned tables
/// the head and the files every read takes, a key's files, a vehicle's bucket, read when a
/// request first asks for it; on the file catalog whole, `dq_lake::files::preload_keys`): dq's tables on a connection
/// of the engine's pool, `raw_events` on one of the cloud-event reader's, so each pool also
/// holds a connection for the first request.
/// The function's init. A load that fails is logged and left to the first read.
pub fn preload(engine: &Engine, db: &dq_rawquery::Db) {
    if let Err(e) = engine.preload_files() {
        tracing::warn!(error = %e, "preloading the file listings failed");
    }
    db.preload_listing();
}

fn text(status: StatusCode, body: &'static str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

fn json_message(status: u16, message: String) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        axum::Json(serde_json::json!({ "message": message })),
    )
        .into_response()
}

/// The GraphQL request of a `/query` call (also read by [`crate::shadow`]).
pub(crate) fn parse_request(
    method: &Method,
    uri: &Uri,
    body: &Bytes,
) -> Result<async_graphql::Request, String> {
    if method == Method::GET {
        async_graphql::http::parse_query_string(uri.query().unwrap_or(""))
            .map_err(|e| e.to_string())
    } else {
        serde_json::from_slice(body)
            .map_err(|e| format!("json request body could not be decoded: {e}"))
    }
}

fn source_ip(headers: &HeaderMap) -> &str {
    headers
        .get("x-forwarded-for")
        .or_else(|| headers.get("x-real-ip"))
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// `/query`: the auth chain around one execution; a panic becomes a plain 500.
pub(crate) async fn graphql(
    State(state): State<Arc<AppState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    use futures::FutureExt as _;
    let path = uri.path().to_string();
    match std::panic::AssertUnwindSafe(handle_query(state, method, uri, headers, body))
        .catch_unwind()
        .await
    {
        Ok(resp) => resp,
        Err(panic) => {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            tracing::error!(path, panic = msg, "recovered from panic in HTTP handler");
            text(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error")
        }
    }
}

async fn handle_query(
    state: Arc<AppState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(_global) = state.limiter.acquire_global().await else {
        let mut resp = text(
            StatusCode::TOO_MANY_REQUESTS,
            "server is at its concurrent-request limit; retry shortly",
        );
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return resp;
    };
    let deadline = Instant::now() + state.limits.max_request_duration;
    let principal = match jwt_step(&state, &headers, uri.path()).await {
        Ok(p) => p,
        Err(rejected) => return rejected,
    };
    if let Some(vehicle) = principal.as_ref().and_then(Principal::asset) {
        dq_metrics::record_vehicle(vehicle);
    }
    let Some(_slot) = state
        .limiter
        .acquire_subject(principal.as_ref().and_then(Principal::limiter_key))
    else {
        return text(
            StatusCode::TOO_MANY_REQUESTS,
            "too many concurrent requests",
        );
    };
    tracing::info!(
        method = %method,
        path = %uri.path(),
        sourceIp = source_ip(&headers),
        jwtSubject = principal.as_ref().and_then(Principal::limiter_key).unwrap_or(""),
        subject = principal.as_ref().and_then(Principal::asset).unwrap_or(""),
        "graphql request"
    );
    let request = match parse_request(&method, &uri, &body) {
        Ok(r) => r,
        Err(e) => {
            let body = serde_json::json!({ "errors": [{ "message": e }] });
            return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
        }
    };
    let executed = Arc::new(Executed::default());
    let mut request = request
        .data(Caller(principal))
        .data(Deadline(deadline))
        .data(Arc::clone(&executed))
        .data(StatementSlots::new(state.limits.max_statements_per_request))
        .data(Arc::clone(&state.engine));
    if let Some(ce) = &state.cloud_events {
        request = request.data(Arc::clone(ce));
    }
    let response = match tokio::time::timeout_at(deadline, state.schema.execute(request)).await {
        Ok(r) => r,
        Err(_) => async_graphql::Response::from_errors(vec![
            errors::timeout(state.dialect).into_server_error(async_graphql::Pos::default())
        ]),
    };
    // Parse/validation failures (nothing executed) are HTTP 422 as in gqlgen.
    let rejected = !response.errors.is_empty()
        && !executed.0.load(std::sync::atomic::Ordering::Relaxed)
        && response.data == async_graphql::Value::Null;
    let status = if rejected {
        StatusCode::UNPROCESSABLE_ENTITY
    } else {
        StatusCode::OK
    };
    let outcome = crate::observe::Outcome::of(&response);
    let mut resp = (status, axum::Json(response)).into_response();
    resp.extensions_mut().insert(outcome);
    resp
}

/// The JWT step of `/query` and `/mcp`: the caller (none without a token or without an issuer
/// configured), or the HTTP rejection to answer (logged with `path`).
pub(crate) async fn jwt_step(
    state: &AppState,
    headers: &HeaderMap,
    path: &str,
) -> Result<Option<Principal>, Response> {
    let Some(validator) = &state.validator else {
        return Ok(None);
    };
    let authorization = headers
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or("\u{fffd}"));
    authenticate(state.dialect, validator, authorization)
        .await
        .map_err(|e| {
            tracing::warn!(path, error = %e, "jwt rejected");
            let mut resp = json_message(e.code().http_status(), e.message(dq_auth::Surface::Http));
            resp.extensions_mut()
                .insert(crate::observe::Outcome::refused(e.code().as_str()));
            resp
        })
}

/// The JWT step; telemetry also rejects tokens whose `asset` is not a vehicle or account DID
/// (HTTP 401 before GraphQL runs).
async fn authenticate(
    dialect: Dialect,
    validator: &TokenValidator,
    authorization: Option<&str>,
) -> dq_auth::Result<Option<Principal>> {
    let principal = validator.authenticate_http(authorization).await?;
    if dialect == Dialect::Telemetry {
        if let Some(p) = &principal {
            dq_auth::validate_telemetry_asset(p)?;
        }
    }
    Ok(principal)
}

pub(crate) async fn ready(State(state): State<Arc<AppState>>) -> Response {
    let mut r = state.readiness.lock().await;
    let now = Instant::now();
    if r.checked_at
        .is_none_or(|t| now.duration_since(t) >= READY_CACHE)
    {
        let engine = Arc::clone(&state.engine);
        let probe = tokio::task::spawn_blocking(move || engine.probe());
        let ok = matches!(
            tokio::time::timeout(READY_TIMEOUT, probe).await,
            Ok(Ok(Ok(())))
        );
        r.checked_at = Some(now);
        r.ok = ok;
        if ok {
            r.last_success = Some(now);
        } else {
            tracing::warn!("readiness probe failed");
        }
    }
    // After any success, failures are masked for a grace window.
    let in_grace = r
        .last_success
        .is_some_and(|t| now.duration_since(t) < READY_GRACE);
    if r.ok || in_grace {
        text(StatusCode::OK, "ok")
    } else {
        text(StatusCode::SERVICE_UNAVAILABLE, "not ready")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn limiter_slots() {
        let limiter = Limiter::new(&Limits {
            max_concurrent: 1,
            max_concurrent_per_subject: 1,
            ..Limits::default()
        });
        let held = limiter.acquire_global().await.unwrap();
        assert!(held.is_some());
        assert!(
            limiter.acquire_global().await.is_none(),
            "second waits 100 ms, then 429"
        );
        drop(held);
        assert!(limiter.acquire_global().await.is_some());

        let slot = limiter.acquire_subject(Some("0xdev")).unwrap();
        assert!(slot.is_some());
        assert!(limiter.acquire_subject(Some("0xdev")).is_none());
        assert!(limiter.acquire_subject(Some("0xother")).is_some());
        assert!(
            limiter.acquire_subject(None).is_some(),
            "anonymous is not limited"
        );
        drop(slot);
        assert!(limiter.acquire_subject(Some("0xdev")).is_some());
    }

    #[test]
    fn limits_from_env() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(Limits::from_lookup(env(&[])), Ok(Limits::default()));
        let l = Limits::from_lookup(env(&[
            ("MAX_REQUEST_DURATION", "30s"),
            ("MAX_CONCURRENT_REQUESTS", "16"),
            ("MAX_CONCURRENT_REQUESTS_PER_SUBJECT", "8"),
        ]))
        .unwrap();
        assert_eq!(
            (
                l.max_request_duration,
                l.max_concurrent,
                l.max_concurrent_per_subject
            ),
            (Duration::from_secs(30), 16, 8)
        );
        assert_eq!(
            Limits::from_lookup(env(&[("MAX_CONCURRENT_STATEMENTS_PER_REQUEST", "2")]))
                .map(|l| l.max_statements_per_request),
            Ok(2)
        );
        assert_eq!(
            Limits::from_lookup(env(&[("MAX_CONCURRENT_STATEMENTS_PER_REQUEST", "0")])),
            Err("MAX_CONCURRENT_STATEMENTS_PER_REQUEST must be between 1 and 1000".to_string())
        );
        assert!(Limits::from_lookup(env(&[("MAX_REQUEST_DURATION", "0s")])).is_err());
        assert!(Limits::from_lookup(env(&[("MAX_REQUEST_DURATION", "soon")])).is_err());
    }
}
