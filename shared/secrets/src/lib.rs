//! Secrets Manager values (the catalog DSN, the blob key) read once at init with
//! `GetSecretValue`, cached in the process, and re-fetched when the value in use was refused
//! (a rotation), so no secret has to sit in a Lambda's environment.
//!
//! Not here: what a value means or where it is used (the `lake` and `blob` crates), redaction.
//!
//! # Layout
//! - [`SecretsClient`]: how Secrets Manager is reached (the standard AWS chain, or an explicit
//!   endpoint and keys in tests).
//! - [`Secret`]: one fetched value, cheap to clone, with [`Secret::refresh`] and
//!   [`Secret::refresh_blocking`].
//! - [`Error`]: failures; they name the secret and the field, never a value.
//! - `testing` (feature): secrets in the shared moto server, for other crates' tests.
//!
//! Every SDK call runs on one small runtime owned by this crate, so a synchronous caller (DuckDB
//! code re-attaching a catalog on a blocking thread) can wait for a re-fetch without a runtime
//! of its own, and the SDK's pooled connections always belong to a runtime that is alive.
#![warn(missing_docs)]

use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use aws_sdk_secretsmanager::error::DisplayErrorContext;

#[cfg(feature = "testing")]
#[allow(clippy::expect_used)] // Test setup: moto refusing a secret is a broken test (# Panics).
pub mod testing;

/// The region used when neither the settings nor the AWS chain name one (as the blob store does).
pub const DEFAULT_REGION: &str = "us-east-1";
/// Attempts per `GetSecretValue` (the SDK's standard retry).
const MAX_ATTEMPTS: u32 = 3;
/// Time limit of one attempt: init must fail fast rather than eat the Lambda init phase.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);

/// Failures reading a secret. Messages name the secret id and field, never the value.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `GetSecretValue` failed (access denied, no such secret, network, ...).
    #[error("read secret `{secret}`: {message}")]
    Fetch {
        /// The secret's ARN or name.
        secret: String,
        /// The SDK's description of the failure.
        message: String,
    },
    /// The secret has only a binary value.
    #[error("secret `{secret}` has no string value (binary secrets are not supported)")]
    NotText {
        /// The secret's ARN or name.
        secret: String,
    },
    /// The secret is a JSON object without a usable string in the wanted field.
    #[error("secret `{secret}`: JSON field `{field}` {problem}")]
    Field {
        /// The secret's ARN or name.
        secret: String,
        /// The field.
        field: String,
        /// `is missing`, `is not a string` or `is empty`.
        problem: &'static str,
    },
    /// The secret's (whole) value is empty.
    #[error("secret `{secret}` is empty")]
    Empty {
        /// The secret's ARN or name.
        secret: String,
    },
    /// The crate's runtime could not be started or lost a task.
    #[error("secrets runtime: {0}")]
    Runtime(String),
}

/// Result alias for the secrets crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How Secrets Manager is reached. Unset fields come from the standard AWS chain
/// (`AWS_ENDPOINT_URL`, `AWS_REGION`, the credential providers).
#[derive(Clone, Default)]
pub struct AwsAccess {
    /// Endpoint override (`http://127.0.0.1:5000` for moto).
    pub endpoint: Option<String>,
    /// Region.
    pub region: Option<String>,
    /// Static access key id and secret key; `None` uses the credential chain.
    pub credentials: Option<(String, String)>,
}

impl std::fmt::Debug for AwsAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsAccess")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("static_credentials", &self.credentials.is_some())
            .finish()
    }
}

/// A Secrets Manager client, built on first use (a process with no secret configured never
/// resolves credentials). Clones share the client.
#[derive(Clone, Debug)]
pub struct SecretsClient {
    access: AwsAccess,
    client: Arc<tokio::sync::OnceCell<aws_sdk_secretsmanager::Client>>,
}

impl SecretsClient {
    /// A client configured entirely by the standard AWS chain (what a Lambda uses).
    pub fn from_env() -> SecretsClient {
        SecretsClient::new(AwsAccess::default())
    }

    /// A client with explicit access settings (tests against moto).
    pub fn new(access: AwsAccess) -> SecretsClient {
        SecretsClient {
            access,
            client: Arc::new(tokio::sync::OnceCell::new()),
        }
    }

    /// Fetches `secret_id` (an ARN or a name) and keeps its value: the string value of JSON
    /// field `field` when the secret is a JSON object, else the whole secret string.
    ///
    /// # Errors
    /// The fetch failed, the secret is binary or empty, or the field is missing or not a string.
    pub async fn fetch(&self, secret_id: &str, field: Option<&str>) -> Result<Secret> {
        let inner = Arc::new(Inner {
            client: self.clone(),
            id: secret_id.to_owned(),
            field: field.map(str::to_owned),
            value: Mutex::new(String::new()),
            refreshing: tokio::sync::Mutex::new(()),
        });
        let fetched = Arc::clone(&inner);
        let value = on_runtime(async move { fetched.fetch().await }).await?;
        *inner.value.lock().unwrap_or_else(PoisonError::into_inner) = value;
        tracing::info!(secret = %secret_id, "secret read");
        Ok(Secret { inner })
    }

    async fn sdk(&self) -> &aws_sdk_secretsmanager::Client {
        self.client
            .get_or_init(|| build_client(self.access.clone()))
            .await
    }
}

async fn build_client(access: AwsAccess) -> aws_sdk_secretsmanager::Client {
    use aws_config::{retry::RetryConfig, timeout::TimeoutConfig, BehaviorVersion, Region};
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .retry_config(RetryConfig::standard().with_max_attempts(MAX_ATTEMPTS))
        .timeout_config(
            TimeoutConfig::builder()
                .operation_attempt_timeout(ATTEMPT_TIMEOUT)
                .build(),
        );
    if let Some(region) = access.region {
        loader = loader.region(Region::new(region));
    }
    if let Some(endpoint) = access.endpoint {
        loader = loader.endpoint_url(endpoint);
    }
    if let Some((id, secret)) = access.credentials {
        loader = loader.credentials_provider(aws_sdk_secretsmanager::config::Credentials::new(
            id, secret, None, None, "static",
        ));
    }
    let shared = loader.load().await;
    let mut builder = aws_sdk_secretsmanager::config::Builder::from(&shared);
    if shared.region().is_none() {
        builder = builder.region(Region::new(DEFAULT_REGION));
    }
    aws_sdk_secretsmanager::Client::from_conf(builder.build())
}

/// One secret value, cached; clones share the cache.
#[derive(Clone)]
pub struct Secret {
    inner: Arc<Inner>,
}

struct Inner {
    client: SecretsClient,
    id: String,
    field: Option<String>,
    value: Mutex<String>,
    // Held across a re-fetch, so callers that saw the same refused value fetch once between them.
    refreshing: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret")
            .field("id", &self.inner.id)
            .field("field", &self.inner.field)
            .finish_non_exhaustive()
    }
}

impl Secret {
    /// The secret's ARN or name.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The JSON field read, if any.
    pub fn field(&self) -> Option<&str> {
        self.inner.field.as_deref()
    }

    /// The cached value.
    pub fn value(&self) -> String {
        self.inner
            .value
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Re-fetches the value after `refused` (the value in use) was rejected, and returns the
    /// current one. When the cache already holds something else, another caller re-fetched
    /// after the same failure and its value is returned without a call: one failure costs at
    /// most one `GetSecretValue`. The new value may equal the refused one (no rotation
    /// happened); the caller then gives up rather than re-fetch again.
    ///
    /// # Errors
    /// As [`SecretsClient::fetch`]; the cached value is kept.
    pub async fn refresh(&self, refused: &str) -> Result<String> {
        let inner = Arc::clone(&self.inner);
        let refused = refused.to_owned();
        on_runtime(async move { inner.refresh(&refused).await }).await
    }

    /// [`Secret::refresh`] for synchronous code (a DuckDB attach on a blocking thread): waits
    /// on the crate's runtime, so it works with or without a runtime on the calling thread.
    ///
    /// # Errors
    /// As [`Secret::refresh`].
    pub fn refresh_blocking(&self, refused: &str) -> Result<String> {
        let inner = Arc::clone(&self.inner);
        let refused = refused.to_owned();
        wait_on_runtime(async move { inner.refresh(&refused).await })
    }
}

impl Inner {
    async fn refresh(&self, refused: &str) -> Result<String> {
        let _one_at_a_time = self.refreshing.lock().await;
        let cached = self
            .value
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if cached != refused {
            return Ok(cached);
        }
        let fresh = self.fetch().await?;
        if fresh == refused {
            tracing::warn!(secret = %self.id, "secret re-read after a refusal: unchanged");
        } else {
            tracing::info!(secret = %self.id, "secret re-read after a refusal: rotated");
        }
        *self.value.lock().unwrap_or_else(PoisonError::into_inner) = fresh.clone();
        Ok(fresh)
    }

    async fn fetch(&self) -> Result<String> {
        let out = self
            .client
            .sdk()
            .await
            .get_secret_value()
            .secret_id(&self.id)
            .send()
            .await
            .map_err(|e| Error::Fetch {
                secret: self.id.clone(),
                message: DisplayErrorContext(&e).to_string(),
            })?;
        let text = out.secret_string().ok_or_else(|| Error::NotText {
            secret: self.id.clone(),
        })?;
        extract(&self.id, text, self.field.as_deref())
    }
}

/// The value of `field` in a JSON-object secret, else the whole (trimmed) string. Parse errors
/// are not reported: they would quote the secret, and a non-JSON secret is a plain value.
fn extract(id: &str, text: &str, field: Option<&str>) -> Result<String> {
    let json = match (field, serde_json::from_str::<serde_json::Value>(text)) {
        (Some(field), Ok(serde_json::Value::Object(map))) => Some((field, map)),
        _ => None,
    };
    let value = match json {
        Some((field, map)) => {
            let problem = |problem| Error::Field {
                secret: id.to_owned(),
                field: field.to_owned(),
                problem,
            };
            match map.get(field) {
                None => return Err(problem("is missing")),
                Some(serde_json::Value::String(s)) if s.trim().is_empty() => {
                    return Err(problem("is empty"))
                }
                Some(serde_json::Value::String(s)) => s.trim().to_owned(),
                Some(_) => return Err(problem("is not a string")),
            }
        }
        None => text.trim().to_owned(),
    };
    if value.is_empty() {
        return Err(Error::Empty {
            secret: id.to_owned(),
        });
    }
    Ok(value)
}

/// The crate's runtime: one worker thread, started on first use, never shut down (a `static`).
fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> =
        OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("dq-secrets")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| Error::Runtime(e.clone()))
}

/// Runs `fut` on the crate's runtime and blocks the calling thread until it is done: no runtime
/// of the caller's is needed or driven.
fn wait_on_runtime<T: Send + 'static>(
    fut: impl Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    runtime()?.spawn(async move {
        // The receiver only goes away if the caller's thread died; nothing to report to.
        let _ = tx.send(fut.await);
    });
    rx.recv()
        .map_err(|_| Error::Runtime("a task ended without an answer".into()))?
}

/// Runs `fut` on the crate's runtime and awaits it from whatever runtime the caller is on.
async fn on_runtime<T: Send + 'static>(
    fut: impl Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    runtime()?
        .spawn(fut)
        .await
        .map_err(|e| Error::Runtime(e.to_string()))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_field_of_a_json_secret() {
        let got = extract("s", r#"{"dsn": " host=h ", "other": 1}"#, Some("dsn")).unwrap();
        assert_eq!(got, "host=h");
    }

    #[test]
    fn reads_the_whole_string_of_a_plain_secret() {
        assert_eq!(
            extract("s", "host=h password=p\n", Some("dsn")).unwrap(),
            "host=h password=p"
        );
        assert_eq!(extract("s", "abc", None).unwrap(), "abc");
        // A JSON value that is not an object is a plain value too.
        assert_eq!(extract("s", "\"abc\"", Some("dsn")).unwrap(), "\"abc\"");
    }

    #[test]
    fn field_problems_name_the_field_but_not_the_value() {
        for (text, problem) in [
            (r#"{"password": "hunter22"}"#, "is missing"),
            (r#"{"dsn": 5, "password": "hunter22"}"#, "is not a string"),
            (r#"{"dsn": " ", "password": "hunter22"}"#, "is empty"),
        ] {
            let e = extract("arn:s", text, Some("dsn")).unwrap_err().to_string();
            assert!(e.contains("`dsn`") && e.contains(problem), "{e}");
            assert!(e.contains("arn:s") && !e.contains("hunter22"), "{e}");
        }
        assert!(matches!(extract("s", "  ", None), Err(Error::Empty { .. })));
    }
}
