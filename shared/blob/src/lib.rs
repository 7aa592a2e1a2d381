//! The blob store din externalizes large payloads to, read and written by dq: object keys
//! `<prefix><subject>/<yyyy>/<mm>/<dd>/<uuid>` in an S3 bucket or under a local root, optionally
//! sealed with DBE1 as din writes them. The same store, unsealed over the lake's data path, is
//! where the materializer puts the Parquet files it writes itself.
//!
//! Not here: deciding *whether* to externalize (the din simulator does) or what a payload means.
//!
//! # Layout
//! - [`dbe1`]: the seal format.
//! - [`BlobConfig`] / [`BlobStore`]: settings and the store (S3 or local directory).
//! - [`BlobError`]: failures, classified as poison (skip the row) or transient (retry the pass).
#![warn(missing_docs)]

pub mod dbe1;

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Datelike, Utc};

pub use dbe1::{SealError, SealKey};
/// The S3 settings of an S3 store, shared with the lake.
pub use dq_config::s3::S3Config;

/// Blob bucket: an S3 bucket name, or a local root when it starts with `/` or `file://`.
pub const BLOB_BUCKET: &str = "BLOB_BUCKET";
/// Key prefix; defaults to [`DEFAULT_PREFIX`].
pub const BLOB_PREFIX: &str = "BLOB_PREFIX";
/// Base64 of the 32-byte DBE1 key (sensitive); must equal din's.
pub const BLOB_ENCRYPTION_KEY: &str = "BLOB_ENCRYPTION_KEY";
/// ARN (or name) of a Secrets Manager secret holding the DBE1 key instead of
/// [`BLOB_ENCRYPTION_KEY`] (setting both is an error): JSON field [`BLOB_KEY_SECRET_FIELD`], or
/// the whole secret when it is not a JSON object.
pub const BLOB_ENCRYPTION_KEY_SECRET_ARN: &str = "BLOB_ENCRYPTION_KEY_SECRET_ARN";
/// The JSON field of [`BLOB_ENCRYPTION_KEY_SECRET_ARN`] holding the key.
pub const BLOB_KEY_SECRET_FIELD: &str = "key";
/// The default key prefix, also the prefix a materializer accepts as a blob reference.
pub const DEFAULT_PREFIX: &str = "cloudevent/blobs/";
/// Largest blob a reader accepts (dq's `maxObjectSize`).
pub const MAX_OBJECT_SIZE: u64 = 50 << 20;

/// Blob-store failures. [`BlobError::is_poison`] tells a row that can never succeed from a fault
/// that a retry of the same pass may clear.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    /// The object does not exist.
    #[error("blob `{key}` not found{}", .s3.as_ref().map(|f| format!(" ({f})")).unwrap_or_default())]
    NotFound {
        /// Object key.
        key: String,
        /// S3's answer (`None` for a local store).
        s3: Option<Box<S3Failure>>,
    },
    /// The object is larger than the reader accepts.
    #[error("blob `{key}` is {size} bytes, over the {limit}-byte limit")]
    Oversize {
        /// Object key.
        key: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The blob is sealed but no key is configured.
    #[error("blob `{key}` is sealed but BLOB_ENCRYPTION_KEY is not set")]
    SealedNoKey {
        /// Object key.
        key: String,
    },
    /// The blob is sealed and did not open.
    #[error("blob `{key}` could not be decrypted: {source}")]
    Decrypt {
        /// Object key.
        key: String,
        /// Why.
        source: SealError,
    },
    /// The key would escape the store (`..`, absolute, empty segments).
    #[error("blob key `{key}` is not a valid object key")]
    InvalidKey {
        /// The offending key.
        key: String,
    },
    /// S3 answered with an error other than a missing object, or could not be reached
    /// (throttling, 5xx, access denied, timeout, network). Retry later; an access refusal
    /// ([`BlobError::is_access_denied`]) only a bounded number of times.
    #[error("blob store error on `{key}`: {failure}")]
    S3 {
        /// Object key.
        key: String,
        /// What S3 answered (boxed: it would make every error of this crate large).
        failure: Box<S3Failure>,
    },
    /// Anything else: local I/O, a failed worker. Retry later.
    #[error("blob store error on `{key}`: {message}")]
    Transient {
        /// Object key.
        key: String,
        /// What failed.
        message: String,
    },
    /// A setting is missing or malformed.
    #[error("invalid blob store configuration: {0}")]
    Config(String),
}

impl BlobError {
    /// True when the row referencing this blob can never decode (count it and skip it).
    pub fn is_poison(&self) -> bool {
        !matches!(
            self,
            BlobError::S3 { .. } | BlobError::Transient { .. } | BlobError::Config(_)
        )
    }

    /// True when S3 refused the request for the caller's rights on the object (HTTP 403,
    /// `AccessDenied`, or a KMS refusal of the object's key). A retry may clear it (a policy
    /// being fixed), but it is not a fault of the service: callers retry it a bounded number of
    /// times and then give the row up instead of blocking on it forever.
    pub fn is_access_denied(&self) -> bool {
        match self {
            BlobError::S3 { failure, .. } => {
                failure.status == Some(403)
                    || failure
                        .code
                        .as_deref()
                        .is_some_and(|c| c == "AccessDenied" || c.starts_with("KMS."))
            }
            _ => false,
        }
    }

    /// A stable label for metrics (`missing`, `oversize`, `sealed_no_key`, `decrypt`, …).
    pub fn reason(&self) -> &'static str {
        match self {
            BlobError::NotFound { .. } => "missing",
            BlobError::Oversize { .. } => "oversize",
            BlobError::SealedNoKey { .. } => "sealed_no_key",
            BlobError::Decrypt { .. } => "decrypt",
            BlobError::InvalidKey { .. } => "invalid_key",
            e if e.is_access_denied() => "access_denied",
            BlobError::S3 { .. } | BlobError::Transient { .. } => "transient",
            BlobError::Config(_) => "config",
        }
    }
}

/// What S3 answered to one request, in a form that fits one log line: the SDK's own `Debug`
/// and `DisplayErrorContext` renderings dump the raw response (headers, body, connector
/// internals) over several kilobytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Failure {
    /// The S3 operation (`GetObject`, `PutObject`, …).
    pub operation: &'static str,
    /// The HTTP status, when S3 answered.
    pub status: Option<u16>,
    /// S3's error code (`NoSuchKey`, `AccessDenied`, `SlowDown`, …), when it sent one.
    pub code: Option<String>,
    /// S3's error message, or for a request that got no answer the error chain.
    pub message: Option<String>,
    /// The `x-amz-request-id` of the answer.
    pub request_id: Option<String>,
}

impl S3Failure {
    /// The failure of `operation` from an SDK error.
    pub fn from_sdk<E>(operation: &'static str, err: &aws_sdk_s3::error::SdkError<E>) -> Self
    where
        E: aws_sdk_s3::error::ProvideErrorMetadata + std::error::Error + 'static,
    {
        use aws_sdk_s3::error::{ProvideErrorMetadata as _, SdkError};
        use aws_sdk_s3::operation::RequestId as _;
        let status = match err {
            SdkError::ServiceError(e) => Some(e.raw().status().as_u16()),
            SdkError::ResponseError(e) => Some(e.raw().status().as_u16()),
            _ => None,
        };
        let message = err.message().map(str::to_owned).or_else(|| {
            // No service answer: the error's chain of Display texts (never its Debug form).
            let mut chain = vec![err.to_string()];
            let mut source = std::error::Error::source(err);
            while let Some(s) = source {
                chain.push(s.to_string());
                source = s.source();
            }
            Some(chain.join(": "))
        });
        S3Failure {
            operation,
            status,
            code: err.code().map(str::to_owned),
            message,
            request_id: err.request_id().map(str::to_owned),
        }
    }
}

impl std::fmt::Display for S3Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "S3 {}:", self.operation)?;
        if let Some(status) = self.status {
            write!(f, " HTTP {status}")?;
        }
        if let Some(code) = &self.code {
            write!(f, " {code}")?;
        }
        if let Some(message) = &self.message {
            // One line whatever the server or the connector put in it.
            let flat: String = message
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect();
            write!(f, ": {flat}")?;
        }
        if let Some(id) = &self.request_id {
            write!(f, " (request id {id})")?;
        }
        Ok(())
    }
}

/// Result alias for the blob crate.
pub type Result<T, E = BlobError> = std::result::Result<T, E>;

/// Blob-store settings (read once at start-up).
#[derive(Clone, Default)]
pub struct BlobConfig {
    /// S3 bucket name, or local root (`/abs` or `file:///abs`).
    pub bucket: String,
    /// Key prefix.
    pub prefix: String,
    /// Base64 DBE1 key, if blobs are sealed.
    pub encryption_key: Option<String>,
    /// S3 settings, shared with the lake's data path.
    pub s3: S3Config,
}

impl std::fmt::Debug for BlobConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobConfig")
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix)
            .field("sealed", &self.encryption_key.is_some())
            .field("region", &self.s3.region)
            .field("endpoint", &self.s3.endpoint)
            .finish_non_exhaustive()
    }
}

impl BlobConfig {
    /// A local store rooted at `root` with the default prefix.
    pub fn local(root: impl AsRef<Path>) -> Self {
        Self {
            bucket: root.as_ref().display().to_string(),
            prefix: DEFAULT_PREFIX.into(),
            ..Default::default()
        }
    }

    /// Reads `BLOB_*` and the `S3_*` keys shared with the lake settings; a key kept in Secrets
    /// Manager is not fetched here (use [`BlobConfig::from_lookup_with_secrets`]).
    pub fn from_env() -> Self {
        Self::from_lookup(dq_config::env_lookup)
    }

    /// [`BlobConfig::from_env`] through `get` (a map in tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Self {
        let settings = dq_config::Settings::new(get);
        Self {
            bucket: settings.get(BLOB_BUCKET).unwrap_or_default(),
            prefix: settings
                .get(BLOB_PREFIX)
                .unwrap_or_else(|| DEFAULT_PREFIX.into()),
            encryption_key: settings.get(BLOB_ENCRYPTION_KEY),
            s3: S3Config::read(&settings),
        }
    }

    /// Reads the settings through `get` (a function passes `dq_config::env_lookup`) and fetches
    /// the key through `client` when `BLOB_ENCRYPTION_KEY_SECRET_ARN` is set. What every function
    /// calls at init.
    ///
    /// # Errors
    /// Both key sources set, or the secret could not be read.
    pub async fn from_lookup_with_secrets(
        get: impl Fn(&str) -> Option<String>,
        client: &dq_secrets::SecretsClient,
    ) -> Result<Self> {
        let arn = dq_config::Settings::new(&get).get(BLOB_ENCRYPTION_KEY_SECRET_ARN);
        let mut cfg = Self::from_lookup(get);
        let Some(arn) = arn else {
            return Ok(cfg);
        };
        if cfg.encryption_key.is_some() {
            return Err(BlobError::Config(format!(
                "set {BLOB_ENCRYPTION_KEY} or {BLOB_ENCRYPTION_KEY_SECRET_ARN}, not both"
            )));
        }
        let secret = client
            .fetch(&arn, Some(BLOB_KEY_SECRET_FIELD))
            .await
            .map_err(|e| BlobError::Config(format!("{BLOB_ENCRYPTION_KEY_SECRET_ARN}: {e}")))?;
        cfg.encryption_key = Some(secret.value());
        Ok(cfg)
    }

    /// True when the bucket names a local directory.
    pub fn is_local(&self) -> bool {
        self.bucket.starts_with('/') || self.bucket.starts_with("file://")
    }
}

enum Backend {
    Local(PathBuf),
    S3 {
        client: aws_sdk_s3::Client,
        bucket: String,
        kms_key_id: Option<String>,
    },
}

/// A blob store: put and get whole objects, sealing and opening DBE1 when a key is configured.
pub struct BlobStore {
    backend: Backend,
    prefix: String,
    seal: Option<SealKey>,
}

impl std::fmt::Debug for BlobStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backend = match &self.backend {
            Backend::Local(root) => format!("local:{}", root.display()),
            Backend::S3 { bucket, .. } => format!("s3:{bucket}"),
        };
        f.debug_struct("BlobStore")
            .field("backend", &backend)
            .field("prefix", &self.prefix)
            .field("sealed", &self.seal.is_some())
            .finish()
    }
}

impl BlobStore {
    /// Builds the store. S3 clients use static credentials when both keys are set, else the
    /// default chain; path-style addressing with an endpoint; 30 s per attempt, 3 attempts.
    pub async fn open(cfg: &BlobConfig) -> Result<Self> {
        if cfg.bucket.is_empty() {
            return Err(BlobError::Config(format!("{BLOB_BUCKET} is required")));
        }
        let seal = match &cfg.encryption_key {
            Some(k) => Some(
                SealKey::from_base64(k)
                    .map_err(|e| BlobError::Config(format!("{BLOB_ENCRYPTION_KEY}: {e}")))?,
            ),
            None => None,
        };
        let backend = if cfg.is_local() {
            let root = cfg.bucket.strip_prefix("file://").unwrap_or(&cfg.bucket);
            Backend::Local(PathBuf::from(root))
        } else {
            Backend::S3 {
                client: s3_client(&cfg.s3).await,
                bucket: cfg.bucket.clone(),
                kms_key_id: cfg.s3.kms_key_id.clone(),
            }
        };
        Ok(Self {
            backend,
            prefix: cfg.prefix.clone(),
            seal,
        })
    }

    /// The key prefix of this store.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// A presigned GET URL for `key`, valid for `ttl` (dq's GraphQL `dataUrl`); `None` for a
    /// local store, which has no URLs.
    ///
    /// # Errors
    /// [`BlobError::InvalidKey`]; [`BlobError::Config`] for an unusable `ttl`;
    /// [`BlobError::Transient`] when signing fails.
    pub async fn presign_get(&self, key: &str, ttl: std::time::Duration) -> Result<Option<String>> {
        if key.is_empty() || key.starts_with('/') || key.split('/').any(|s| s == "..") {
            return Err(BlobError::InvalidKey { key: key.into() });
        }
        match &self.backend {
            Backend::Local(_) => Ok(None),
            Backend::S3 { client, bucket, .. } => {
                let cfg = aws_sdk_s3::presigning::PresigningConfig::expires_in(ttl)
                    .map_err(|e| BlobError::Config(format!("presign ttl: {e}")))?;
                let req = client
                    .get_object()
                    .bucket(bucket)
                    .key(key)
                    .presigned(cfg)
                    .await
                    .map_err(|e| BlobError::S3 {
                        key: key.into(),
                        failure: Box::new(S3Failure::from_sdk("presign GetObject", &e)),
                    })?;
                Ok(Some(req.uri().to_string()))
            }
        }
    }

    /// True when this store seals what it writes.
    pub fn seals(&self) -> bool {
        self.seal.is_some()
    }

    /// A fresh object key for a payload of `subject` ingested at `now` (UTC date, random v4 uuid).
    pub fn new_key(&self, subject: &str, now: DateTime<Utc>) -> String {
        format!(
            "{}{}/{}/{:02}/{:02}/{}",
            self.prefix,
            subject,
            now.year(),
            now.month(),
            now.day(),
            uuid::Uuid::new_v4()
        )
    }

    /// Writes `payload` under `key`, sealed when a key is configured.
    pub async fn put(&self, key: &str, payload: &[u8]) -> Result<()> {
        validate_key(key)?;
        let body = match &self.seal {
            Some(seal) => seal.seal(key, payload),
            None => payload.to_vec(),
        };
        match &self.backend {
            Backend::Local(root) => {
                let path = root.join(key);
                let key = key.to_owned();
                tokio::task::spawn_blocking(move || write_atomic(&path, &body))
                    .await
                    .map_err(|e| BlobError::Transient {
                        key: key.clone(),
                        message: e.to_string(),
                    })?
                    .map_err(|e| BlobError::Transient {
                        key,
                        message: e.to_string(),
                    })
            }
            Backend::S3 {
                client,
                bucket,
                kms_key_id,
            } => {
                let mut req = client
                    .put_object()
                    .bucket(bucket)
                    .key(key)
                    .content_type("application/octet-stream")
                    .body(body.into());
                if let Some(kms) = kms_key_id {
                    req = req
                        .server_side_encryption(aws_sdk_s3::types::ServerSideEncryption::AwsKms)
                        .ssekms_key_id(kms)
                        .bucket_key_enabled(true);
                }
                req.send().await.map(|_| ()).map_err(|e| BlobError::S3 {
                    key: key.to_owned(),
                    failure: Box::new(S3Failure::from_sdk("PutObject", &e)),
                })
            }
        }
    }

    /// Removes the object under `key`; one that is not there is no error.
    ///
    /// # Errors
    /// [`BlobError::InvalidKey`]; [`BlobError::Transient`] or [`BlobError::S3`] when the store
    /// refused.
    pub async fn delete(&self, key: &str) -> Result<()> {
        validate_key(key)?;
        match &self.backend {
            Backend::Local(root) => match tokio::fs::remove_file(root.join(key)).await {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(BlobError::Transient {
                    key: key.to_owned(),
                    message: e.to_string(),
                }),
                _ => Ok(()),
            },
            Backend::S3 { client, bucket, .. } => client
                .delete_object()
                .bucket(bucket)
                .key(key)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| BlobError::S3 {
                    key: key.to_owned(),
                    failure: Box::new(S3Failure::from_sdk("DeleteObject", &e)),
                }),
        }
    }

    /// Reads the object under `key`, refusing more than `limit` bytes, and opens DBE1 if sealed.
    pub async fn get(&self, key: &str, limit: u64) -> Result<Vec<u8>> {
        validate_key(key)?;
        let raw = match &self.backend {
            Backend::Local(root) => read_local(&root.join(key), key, limit).await?,
            Backend::S3 { client, bucket, .. } => read_s3(client, bucket, key, limit).await?,
        };
        if !dbe1::is_sealed(&raw) {
            return Ok(raw);
        }
        match &self.seal {
            Some(seal) => seal.open(key, &raw).map_err(|source| BlobError::Decrypt {
                key: key.to_owned(),
                source,
            }),
            None => Err(BlobError::SealedNoKey {
                key: key.to_owned(),
            }),
        }
    }
}

/// Object keys are relative paths of plain segments: they are joined to a local root, and the
/// subject inside them is a DID with `:` but never `/..`.
fn validate_key(key: &str) -> Result<()> {
    let bad = key.is_empty()
        || key.starts_with('/')
        || key.contains('\\')
        || key.contains('\0')
        || Path::new(key)
            .components()
            .any(|c| !matches!(c, Component::Normal(_)))
        || key
            .split('/')
            .any(|seg| seg.is_empty() || seg == "." || seg == "..");
    if bad {
        Err(BlobError::InvalidKey {
            key: key.to_owned(),
        })
    } else {
        Ok(())
    }
}

async fn read_local(path: &Path, key: &str, limit: u64) -> Result<Vec<u8>> {
    let transient = |e: std::io::Error| BlobError::Transient {
        key: key.to_owned(),
        message: e.to_string(),
    };
    let meta = match tokio::fs::metadata(path).await {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(BlobError::NotFound {
                key: key.to_owned(),
                s3: None,
            })
        }
        Err(e) => return Err(transient(e)),
    };
    if meta.len() > limit {
        return Err(BlobError::Oversize {
            key: key.to_owned(),
            size: meta.len(),
            limit,
        });
    }
    tokio::fs::read(path).await.map_err(transient)
}

async fn read_s3(
    client: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    limit: u64,
) -> Result<Vec<u8>> {
    use aws_sdk_s3::operation::get_object::GetObjectError;
    let out = match client.get_object().bucket(bucket).key(key).send().await {
        Ok(out) => out,
        Err(err) => {
            let not_found = matches!(err.as_service_error(), Some(GetObjectError::NoSuchKey(_)))
                || err
                    .raw_response()
                    .is_some_and(|r| r.status().as_u16() == 404);
            let failure = Box::new(S3Failure::from_sdk("GetObject", &err));
            return Err(if not_found {
                BlobError::NotFound {
                    key: key.to_owned(),
                    s3: Some(failure),
                }
            } else {
                BlobError::S3 {
                    key: key.to_owned(),
                    failure,
                }
            });
        }
    };
    let size = out.content_length().and_then(|n| u64::try_from(n).ok());
    if let Some(size) = size.filter(|s| *s > limit) {
        return Err(BlobError::Oversize {
            key: key.to_owned(),
            size,
            limit,
        });
    }
    let body = out
        .body
        .collect()
        .await
        .map_err(|e| BlobError::Transient {
            key: key.to_owned(),
            message: e.to_string(),
        })?
        .into_bytes();
    // Without a Content-Length the size is only known after reading; still a poison oversize.
    if body.len() as u64 > limit {
        return Err(BlobError::Oversize {
            key: key.to_owned(),
            size: body.len() as u64,
            limit,
        });
    }
    Ok(body.to_vec())
}

/// Local write as din does it: temp file in the target dir, fsync, 0644, rename, fsync the dir.
fn write_atomic(path: &Path, body: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("blob path has no parent"))?;
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".tmp-{}", uuid::Uuid::new_v4()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(body)?;
        f.sync_all()?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644))?;
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

async fn s3_client(cfg: &S3Config) -> aws_sdk_s3::Client {
    use aws_config::{retry::RetryConfig, timeout::TimeoutConfig, BehaviorVersion, Region};
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .retry_config(RetryConfig::standard().with_max_attempts(3))
        .timeout_config(
            TimeoutConfig::builder()
                .operation_attempt_timeout(Duration::from_secs(30))
                .build(),
        );
    if let Some(region) = &cfg.region {
        loader = loader.region(Region::new(region.clone()));
    }
    if let (Some(id), Some(secret)) = (&cfg.access_key_id, &cfg.secret_access_key) {
        loader = loader.credentials_provider(aws_sdk_s3::config::Credentials::new(
            id, secret, None, None, "static",
        ));
    }
    let shared = loader.load().await;
    let mut builder = aws_sdk_s3::config::Builder::from(&shared);
    if shared.region().is_none() {
        builder = builder.region(Region::new("us-east-1"));
    }
    if let Some(endpoint) = &cfg.endpoint {
        builder = builder.endpoint_url(endpoint).force_path_style(true);
    }
    aws_sdk_s3::Client::from_conf(builder.build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_dins_layout() {
        let store = BlobStore {
            backend: Backend::Local(PathBuf::from("/x")),
            prefix: DEFAULT_PREFIX.into(),
            seal: None,
        };
        let now = DateTime::parse_from_rfc3339("2026-06-09T23:59:59Z")
            .unwrap()
            .with_timezone(&Utc);
        let key = store.new_key(
            "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:42",
            now,
        );
        let (dir, uuid) = key.rsplit_once('/').unwrap();
        assert_eq!(dir, "cloudevent/blobs/did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:42/2026/06/09");
        assert_eq!(uuid.len(), 36);
        assert_eq!(uuid::Uuid::parse_str(uuid).unwrap().get_version_num(), 4);
    }

    #[test]
    fn refuses_traversal_keys() {
        for key in ["", "/etc/passwd", "a/../b", "a//b", "./a", "a/..", "a\\b"] {
            assert!(
                matches!(validate_key(key), Err(BlobError::InvalidKey { .. })),
                "{key}"
            );
        }
        validate_key("cloudevent/blobs/did:erc721:1:0xab:1/2026/01/02/u").unwrap();
    }

    #[test]
    fn s3_failures_print_on_one_line() {
        let f = S3Failure {
            operation: "GetObject",
            status: Some(403),
            code: Some("AccessDenied".into()),
            message: Some("Access\nDenied".into()),
            request_id: Some("R1".into()),
        };
        assert_eq!(
            f.to_string(),
            "S3 GetObject: HTTP 403 AccessDenied: Access Denied (request id R1)"
        );
        let e = BlobError::NotFound {
            key: "k".into(),
            s3: None,
        };
        assert_eq!(e.to_string(), "blob `k` not found");
    }

    #[test]
    fn classifies_poison_and_transient() {
        assert!(BlobError::NotFound {
            key: "k".into(),
            s3: None
        }
        .is_poison());
        assert!(BlobError::SealedNoKey { key: "k".into() }.is_poison());
        assert!(!BlobError::Transient {
            key: "k".into(),
            message: "503".into()
        }
        .is_poison());
        let s3 = |status: u16, code: &str| BlobError::S3 {
            key: "k".into(),
            failure: Box::new(S3Failure {
                operation: "GetObject",
                status: Some(status),
                code: Some(code.into()),
                message: None,
                request_id: None,
            }),
        };
        for e in [s3(403, "AccessDenied"), s3(400, "KMS.DisabledException")] {
            assert!(e.is_access_denied() && !e.is_poison(), "{e}");
            assert_eq!(e.reason(), "access_denied");
        }
        for e in [s3(500, "InternalError"), s3(503, "SlowDown")] {
            assert!(!e.is_access_denied() && !e.is_poison(), "{e}");
            assert_eq!(e.reason(), "transient");
        }
        assert_eq!(
            BlobError::Oversize {
                key: "k".into(),
                size: 2,
                limit: 1
            }
            .reason(),
            "oversize"
        );
    }
}
