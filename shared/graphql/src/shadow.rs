//! Shadow mode, the production half of the cutover gate: a sampled fraction of live `/query`
//! requests is re-sent to a reference deployment (the service this dialect replaces), the two
//! answers are compared canonically (the `reconcile` crate, the same comparison as
//! `dqctl reconcile`), and the outcome is counted as an EMF metric in [`NAMESPACE`]:
//! `shadow_matched`, `shadow_mismatched`, `shadow_failed` (the reference did not answer) and
//! `shadow_dropped` (no comparison slot free, or an answer too large to compare), per stage and
//! per stage and function ([`DIMENSIONS`]). Only `shadow_matched` is ever a match.
//!
//! The live answer never waits for the reference: the layer hands the client its response as
//! soon as the handler built it and compares in a spawned task. Comparisons in flight are bounded
//! by a semaphore taken with `try_acquire`; when it is saturated the comparison is dropped, never
//! queued. In Lambda an execution environment is frozen between invocations, so a comparison
//! still running when the response is sent continues in the next invocation; one that outlives
//! `SHADOW_TIMEOUT` that way counts as failed.

use crate::dialect::Dialect;
use crate::http::{parse_request, BODY_LIMIT};
use axum::body::{Body, Bytes, HttpBody as _};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use dq_metrics::{Emitter, Metric, Origin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// The CloudWatch namespace of the shadow metrics.
pub const NAMESPACE: &str = "dq/graphql";

/// The dimension sets of the shadow metrics: `[Stage]` (every dialect of a stage together) and
/// `[Stage, Function]`.
pub const DIMENSIONS: &[&[&str]] = &[&["Stage"], &["Stage", "Function"]];

/// Live answers above this are not compared (counted as dropped): comparing holds both answers
/// in memory beside the live traffic.
pub const MAX_COMPARED_BYTES: usize = 16 << 20;

/// Shadow settings, read once from the environment.
#[derive(Debug, Clone, PartialEq)]
pub struct ShadowConfig {
    /// `SHADOW_REFERENCE_URL`: the reference deployment's `/query` URL (unset or empty: off).
    pub reference_url: reqwest::Url,
    /// `SHADOW_SAMPLE_RATE`: fraction of live requests re-sent, 0 to 1 (default 0.01).
    pub sample_rate: f64,
    /// `SHADOW_MAX_IN_FLIGHT`: comparisons running at once (default 4, at least 1).
    pub max_in_flight: usize,
    /// `SHADOW_TIMEOUT`: the reference's whole answer, a Go duration (default `10s`).
    pub timeout: Duration,
    /// `SHADOW_FLOAT_EPSILON`: relative float tolerance (default `dq_reconcile::DEFAULT_EPSILON`).
    pub epsilon: f64,
}

impl ShadowConfig {
    /// Reads the settings from `lookup` (the environment in production); `None` when
    /// `SHADOW_REFERENCE_URL` is unset or empty.
    ///
    /// # Errors
    /// A URL that is not http(s), a rate outside 0..=1, a zero or non-numeric limit, an
    /// unparsable or non-positive timeout, a negative or non-finite epsilon. The URL itself is
    /// never echoed (it may carry credentials).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, String> {
        let get = |key: &str| {
            lookup(key)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let Some(url) = get("SHADOW_REFERENCE_URL") else {
            return Ok(None);
        };
        let reference_url = reqwest::Url::parse(&url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or("SHADOW_REFERENCE_URL must be an http(s) URL")?;
        let sample_rate = match get("SHADOW_SAMPLE_RATE") {
            None => 0.01,
            Some(v) => v
                .parse::<f64>()
                .ok()
                .filter(|r| (0.0..=1.0).contains(r))
                .ok_or("SHADOW_SAMPLE_RATE must be a number from 0 to 1")?,
        };
        let max_in_flight = match get("SHADOW_MAX_IN_FLIGHT") {
            None => 4,
            Some(v) => v
                .parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or("SHADOW_MAX_IN_FLIGHT must be a positive integer")?,
        };
        let timeout = match get("SHADOW_TIMEOUT") {
            None => Duration::from_secs(10),
            Some(v) => {
                let us = dq_query::interval::parse_go_duration_us(&v)
                    .map_err(|e| format!("SHADOW_TIMEOUT: {e}"))?;
                let us = u64::try_from(us)
                    .ok()
                    .filter(|us| *us > 0)
                    .ok_or("SHADOW_TIMEOUT must be positive")?;
                Duration::from_micros(us)
            }
        };
        let epsilon = match get("SHADOW_FLOAT_EPSILON") {
            None => dq_reconcile::DEFAULT_EPSILON,
            Some(v) => v
                .parse::<f64>()
                .ok()
                .filter(|e| e.is_finite() && *e >= 0.0)
                .ok_or("SHADOW_FLOAT_EPSILON must be a non-negative number")?,
        };
        Ok(Some(ShadowConfig {
            reference_url,
            sample_rate,
            max_in_flight,
            timeout,
            epsilon,
        }))
    }
}

/// What became of one sampled request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The reference answered the same.
    Matched,
    /// The answers differ (logged with the first differing path).
    Mismatched,
    /// The reference could not be reached or did not answer in time.
    Failed,
    /// Not compared: every slot busy, or the live answer too large.
    Dropped,
}

impl Outcome {
    fn metric(self) -> &'static str {
        match self {
            Outcome::Matched => "shadow_matched",
            Outcome::Mismatched => "shadow_mismatched",
            Outcome::Failed => "shadow_failed",
            Outcome::Dropped => "shadow_dropped",
        }
    }
}

/// Outcome counts since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShadowTotals {
    /// [`Outcome::Matched`].
    pub matched: u64,
    /// [`Outcome::Mismatched`].
    pub mismatched: u64,
    /// [`Outcome::Failed`].
    pub failed: u64,
    /// [`Outcome::Dropped`].
    pub dropped: u64,
}

/// The shadow comparator of one process.
#[derive(Debug)]
pub struct Shadow {
    config: ShadowConfig,
    dialect: Dialect,
    comparator: dq_reconcile::Comparator,
    client: reqwest::Client,
    slots: Arc<Semaphore>,
    counts: Counters,
    metrics: Emitter,
}

/// One live counter per [`Outcome`].
#[derive(Debug, Default)]
struct Counters {
    matched: AtomicU64,
    mismatched: AtomicU64,
    failed: AtomicU64,
    dropped: AtomicU64,
}

impl Counters {
    fn of(&self, outcome: Outcome) -> &AtomicU64 {
        match outcome {
            Outcome::Matched => &self.matched,
            Outcome::Mismatched => &self.mismatched,
            Outcome::Failed => &self.failed,
            Outcome::Dropped => &self.dropped,
        }
    }
}

/// What the comparison needs of the live request.
struct Sampled {
    method: Method,
    uri: Uri,
    authorization: Option<HeaderValue>,
    content_type: Option<HeaderValue>,
    body: Bytes,
}

impl Shadow {
    /// Shadows `dialect`'s answers as `config` says.
    ///
    /// # Errors
    /// The HTTP client cannot be built (TLS setup).
    pub fn new(dialect: Dialect, config: ShadowConfig) -> Result<Shadow, String> {
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .build()
            .map_err(|e| format!("shadow HTTP client: {e}"))?;
        let comparator = dq_reconcile::Comparator::new(dialect).with_epsilon(config.epsilon);
        Ok(Shadow {
            slots: Arc::new(Semaphore::new(config.max_in_flight)),
            config,
            dialect,
            comparator,
            client,
            counts: Counters::default(),
            metrics: Emitter::new(NAMESPACE, DIMENSIONS, Origin::from_env()),
        })
    }

    /// The shadow of a `dialect` deployment (the one its state parsed from `GRAPHQL_DIALECT`)
    /// from the `SHADOW_*` settings; `None` when off.
    ///
    /// # Errors
    /// An invalid setting.
    pub fn from_env(dialect: Dialect) -> Result<Option<Arc<Shadow>>, String> {
        let Some(config) = ShadowConfig::from_lookup(|k| std::env::var(k).ok())? else {
            return Ok(None);
        };
        Shadow::new(dialect, config).map(|s| Some(Arc::new(s)))
    }

    /// `router` with every `/query` request passing through the shadow.
    pub fn wrap(self: Arc<Self>, router: Router) -> Router {
        router.layer(axum::middleware::from_fn_with_state(self, observe))
    }

    /// Outcome counts so far.
    pub fn totals(&self) -> ShadowTotals {
        let n = |o: Outcome| self.counts.of(o).load(Ordering::Relaxed);
        ShadowTotals {
            matched: n(Outcome::Matched),
            mismatched: n(Outcome::Mismatched),
            failed: n(Outcome::Failed),
            dropped: n(Outcome::Dropped),
        }
    }

    fn count(&self, outcome: Outcome) {
        self.counts.of(outcome).fetch_add(1, Ordering::Relaxed);
        self.metrics.emit(
            &[],
            &[Metric::new(outcome.metric(), 1.0, dq_metrics::emf::COUNT)],
        );
    }

    fn sampled(&self) -> bool {
        self.config.sample_rate >= 1.0 || rand::random::<f64>() < self.config.sample_rate
    }

    /// Sends `req` to the reference and compares its answer with the live one.
    async fn compare(&self, req: Sampled, live_status: u16, live: Bytes) -> Outcome {
        let mut url = self.config.reference_url.clone();
        let mut call = if req.method == Method::GET {
            url.set_query(req.uri.query());
            self.client.get(url)
        } else {
            self.client.post(url).body(req.body.clone())
        };
        if let Some(v) = req.authorization {
            call = call.header(header::AUTHORIZATION, v);
        }
        if let Some(v) = req.content_type {
            call = call.header(header::CONTENT_TYPE, v);
        }
        let answer = match call.send().await {
            Ok(resp) => {
                let status = resp.status().as_u16();
                resp.bytes().await.map(|b| (status, b))
            }
            Err(e) => Err(e),
        };
        let (ref_status, ref_body) = match answer {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(
                    dialect = self.dialect.name(),
                    error = %e.without_url(),
                    "shadow reference did not answer"
                );
                return Outcome::Failed;
            }
        };
        let (document, operation) = match parse_request(&req.method, &req.uri, &req.body) {
            Ok(r) => (r.query, r.operation_name),
            Err(_) => (String::new(), None),
        };
        let mismatch = match (
            dq_reconcile::Answer::parse(ref_status, &ref_body),
            dq_reconcile::Answer::parse(live_status, &live),
        ) {
            (Ok(reference), Ok(candidate)) => {
                self.comparator
                    .compare(&document, operation.as_deref(), &reference, &candidate)
            }
            // Plain-text answers (limits, panics) match only byte for byte.
            (Err(_), Err(_)) if ref_status == live_status && ref_body == live => None,
            (r, c) => Some(dq_reconcile::Mismatch {
                path: "(body)".into(),
                description: match (r.is_err(), c.is_err()) {
                    (true, true) => "non-JSON answers that differ",
                    (true, false) => "the reference answered with a non-JSON body",
                    _ => "dq answered with a non-JSON body",
                }
                .into(),
                reference: Some(format!("HTTP {ref_status}")),
                candidate: Some(format!("HTTP {live_status}")),
            }),
        };
        match mismatch {
            None => Outcome::Matched,
            Some(m) => {
                // Path and kind only: the values are vehicle data.
                tracing::warn!(
                    dialect = self.dialect.name(),
                    path = %m.path,
                    description = %m.description,
                    "shadow comparison mismatched"
                );
                Outcome::Mismatched
            }
        }
    }
}

/// The layer: samples, runs the live request, and spawns the comparison after the live answer
/// is built. Unsampled requests pass through untouched.
async fn observe(State(shadow): State<Arc<Shadow>>, req: Request, next: Next) -> Response {
    let method = req.method().clone();
    if req.uri().path() != "/query"
        || !(method == Method::GET || method == Method::POST)
        || !shadow.sampled()
    {
        return next.run(req).await;
    }
    // Only a body already known to fit under the handler's cap is copied (Lambda's bodies are in
    // memory, local ones carry Content-Length); the handler keeps answering every other one.
    let fits = req.body().is_end_stream()
        || req
            .body()
            .size_hint()
            .upper()
            .is_some_and(|n| n <= BODY_LIMIT as u64);
    if !fits {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let body = match axum::body::to_bytes(body, BODY_LIMIT).await {
        Ok(b) => b,
        // What the handler's own body extractor answers for a body that breaks off.
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("Failed to buffer the request body: {e}"),
            )
                .into_response()
        }
    };
    let sampled = Sampled {
        method,
        uri: parts.uri.clone(),
        authorization: parts.headers.get(header::AUTHORIZATION).cloned(),
        content_type: parts.headers.get(header::CONTENT_TYPE).cloned(),
        body: body.clone(),
    };
    let resp = next.run(Request::from_parts(parts, Body::from(body))).await;
    // A 429 is this instance's load, not an answer to compare.
    if resp.status() == StatusCode::TOO_MANY_REQUESTS {
        return resp;
    }
    let small = resp
        .body()
        .size_hint()
        .upper()
        .is_some_and(|n| n <= MAX_COMPARED_BYTES as u64);
    let slot = small
        .then(|| Arc::clone(&shadow.slots).try_acquire_owned().ok())
        .flatten();
    let Some(slot) = slot else {
        shadow.count(Outcome::Dropped);
        return resp;
    };
    let (parts, body) = resp.into_parts();
    // The handler's bodies are in memory (JSON or text), so this only copies a pointer.
    let Ok(live) = axum::body::to_bytes(body, MAX_COMPARED_BYTES).await else {
        shadow.count(Outcome::Dropped);
        return (StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error").into_response();
    };
    let status = parts.status.as_u16();
    let task_shadow = Arc::clone(&shadow);
    let task_live = live.clone();
    tokio::spawn(async move {
        let _slot = slot;
        let outcome = task_shadow.compare(sampled, status, task_live).await;
        task_shadow.count(outcome);
    });
    Response::from_parts(parts, Body::from(live))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn config_from_env() {
        assert_eq!(ShadowConfig::from_lookup(env(&[])), Ok(None));
        assert_eq!(
            ShadowConfig::from_lookup(env(&[("SHADOW_REFERENCE_URL", " ")])),
            Ok(None)
        );
        let c = ShadowConfig::from_lookup(env(&[(
            "SHADOW_REFERENCE_URL",
            "https://telemetry-api.dimo.zone/query",
        )]))
        .unwrap()
        .unwrap();
        assert_eq!(
            (c.sample_rate, c.max_in_flight, c.timeout, c.epsilon),
            (
                0.01,
                4,
                Duration::from_secs(10),
                dq_reconcile::DEFAULT_EPSILON
            )
        );
        let c = ShadowConfig::from_lookup(env(&[
            ("SHADOW_REFERENCE_URL", "http://127.0.0.1:9/query"),
            ("SHADOW_SAMPLE_RATE", "1"),
            ("SHADOW_MAX_IN_FLIGHT", "2"),
            ("SHADOW_TIMEOUT", "1500ms"),
            ("SHADOW_FLOAT_EPSILON", "1e-6"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            (c.sample_rate, c.max_in_flight, c.timeout, c.epsilon),
            (1.0, 2, Duration::from_millis(1500), 1e-6)
        );
        for bad in [
            &[("SHADOW_REFERENCE_URL", "ftp://user:secret@host/")][..],
            &[
                ("SHADOW_REFERENCE_URL", "http://h/"),
                ("SHADOW_SAMPLE_RATE", "1.5"),
            ],
            &[
                ("SHADOW_REFERENCE_URL", "http://h/"),
                ("SHADOW_MAX_IN_FLIGHT", "0"),
            ],
            &[
                ("SHADOW_REFERENCE_URL", "http://h/"),
                ("SHADOW_TIMEOUT", "0s"),
            ],
            &[
                ("SHADOW_REFERENCE_URL", "http://h/"),
                ("SHADOW_FLOAT_EPSILON", "-1"),
            ],
        ] {
            let pairs: &'static [(&'static str, &'static str)] = bad;
            let err = ShadowConfig::from_lookup(env(pairs)).unwrap_err();
            assert!(!err.contains("secret"), "{err}");
        }
    }
}
