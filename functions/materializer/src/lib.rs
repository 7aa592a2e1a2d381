//! The materializer Lambda's adapter: builds one [`Context`] at cold start and maps each
//! invocation onto [`dq_materialize::invoke`], under the single-writer lease. No SQL and no decoding
//! here: the adapter only wires; errors carry a stable class for `lambda_runtime::Diagnostic`.
//!
//! Not here: the protocol (`dq-materialize`), the lease's storage (`dq-lease`).
//!
//! # Layout
//! - [`Context`]: the attached lake + blob store + lease handle, built from the environment.
//! - [`handler`]: one invocation (an EventBridge event or `{"action": …}`) → JSON summary.
//! - [`run_local`]: the same binary without Lambda: loop passes, `--once`, `--action`.
#![warn(missing_docs)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use dq_materialize::invoke::{invoke, parse_request, requested_shard, Action};
use dq_materialize::{metrics, LeaseSession, Materializer, Shard};
use serde_json::{json, Value};

/// What one warm Lambda keeps between invocations.
pub struct Context {
    materializer: Arc<Mutex<Materializer>>,
    lease: dq_lease::Lease,
    /// The materializer's EMF writer when EMF is on (its lease metrics are written here).
    metrics: Option<dq_metrics::Emitter>,
    /// The settings as given: the materializer's own shard changes with each invocation's
    /// `"shard"`, while a request naming none runs as the configured one.
    config: dq_materialize::Config,
}

/// A handler failure with its class (`config`, `catalog`, `transient`, `lease`, `lease_wait`,
/// `request`).
#[derive(Debug)]
pub struct HandlerError {
    /// Stable class for `Diagnostic::error_type`.
    pub class: &'static str,
    /// Redacted message.
    pub message: String,
}

impl std::fmt::Display for HandlerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.class, self.message)
    }
}

impl std::error::Error for HandlerError {}

impl From<dq_materialize::Error> for HandlerError {
    fn from(e: dq_materialize::Error) -> Self {
        HandlerError {
            class: e.class(),
            message: e.to_string(),
        }
    }
}

impl From<HandlerError> for lambda_runtime::Diagnostic {
    fn from(e: HandlerError) -> Self {
        lambda_runtime::Diagnostic {
            error_type: e.class.to_owned(),
            error_message: e.message,
        }
    }
}

impl Context {
    /// Reads every setting, attaches the lake, opens the blob store (when `BLOB_BUCKET` is set),
    /// creates dq's tables where missing and builds the lease handle (DynamoDB when
    /// `MATERIALIZER_LEASE_TABLE` is set, else a lock file next to the catalog).
    pub async fn from_env() -> anyhow::Result<Context> {
        let config = dq_materialize::Config::from_env()?;
        // One Secrets Manager client for both secrets (built only if one is configured).
        let secrets = dq_secrets::SecretsClient::from_env();
        let lake_cfg =
            dq_lake::LakeConfig::from_lookup_with_secrets(dq_config::env_lookup, &secrets).await?;
        let lease_path = local_lease_path(&lake_cfg);
        let blob_cfg =
            dq_blob::BlobConfig::from_lookup_with_secrets(dq_config::env_lookup, &secrets).await?;
        let blobs = if blob_cfg.bucket.is_empty() {
            None
        } else {
            Some(Arc::new(dq_blob::BlobStore::open(&blob_cfg).await?))
        };
        let lake = dq_lake::Lake::open(lake_cfg)?;
        let m = Materializer::builder(lake)
            .config(config)
            .blobs(blobs)
            .build()?;
        let lease = dq_lease::Lease::from_env(&lease_path).await?;
        tracing::info!(lease = %lease, "materializer ready");
        Ok(Context::new(m, lease))
    }

    /// A context over an already built materializer and lease (tests).
    pub fn new(materializer: Materializer, lease: dq_lease::Lease) -> Context {
        Context {
            metrics: materializer.metrics().cloned(),
            config: materializer.config().clone(),
            materializer: Arc::new(Mutex::new(materializer)),
            lease,
        }
    }
}

/// Where the local lease lock lives: beside a file catalog, else beside a local data path (so two
/// local stacks never share a lock), else in the temp dir.
fn local_lease_path(cfg: &dq_lake::LakeConfig) -> PathBuf {
    let data_parent = cfg
        .data_path
        .as_deref()
        .filter(|p| !p.contains("://"))
        .and_then(|p| Path::new(p.trim_end_matches('/')).parent())
        .filter(|p| !p.as_os_str().is_empty());
    cfg.catalog
        .parent_dir()
        .or(data_parent)
        .map(|d| d.join("materializer.lease"))
        .unwrap_or_else(|| std::env::temp_dir().join("dq-materializer.lease"))
}

/// One invocation: parse, take the lease (a refusal returns `{"skipped": "lease held by a peer",
/// "held_by": <holder>, "held_until": <epoch seconds>}`), run the
/// action on a blocking thread (DuckDB is synchronous), release, return the summary.
///
/// With `MATERIALIZER_LEASE_WAIT` set, a maintenance action ([`Action::waits_for_lease`]) waits
/// for a held lease instead, up to that long but never past the deadline minus
/// `MATERIALIZER_DRAIN_MARGIN`, asking the holder (the drain) to yield; when the holder did not,
/// the invocation fails with class `lease_wait` and a message naming the holder.
pub async fn handler(
    event: Value,
    ctx: &Context,
    request_id: &str,
    deadline: Option<Instant>,
    until_caught_up: bool,
) -> Result<Value, HandlerError> {
    let action = parse_request(&event)?;
    let shard = requested_shard(&event, ctx.config.shard)?;
    run(ctx, action, shard, request_id, deadline, until_caught_up).await
}

async fn run(
    ctx: &Context,
    action: Action,
    shard: Shard,
    request_id: &str,
    deadline: Option<Instant>,
    until_caught_up: bool,
) -> Result<Value, HandlerError> {
    let needs_lease = !matches!(action, Action::Audit);
    // Each shard holds its own lease: its own item, or its own lock file.
    let lease = ctx
        .lease
        .for_item(|id| shard.lease_id(id), |path| shard.lease_file(path))
        .for_invocation(request_id);
    let session = if needs_lease {
        let wait = if action.waits_for_lease() {
            lease_wait(ctx, deadline)
        } else {
            std::time::Duration::ZERO
        };
        match LeaseSession::acquire_waiting(lease, wait).await {
            Ok(s) => Some(s),
            Err(e @ dq_lease::LeaseError::WaitExpired { .. }) => {
                emit(ctx, &metrics::lease_metric("lease_wait_expired"));
                return Err(HandlerError {
                    class: "lease_wait",
                    message: e.to_string(),
                });
            }
            Err(dq_lease::LeaseError::Held {
                holder, expires_at, ..
            }) => {
                emit(ctx, &metrics::lease_metric("lease_refused"));
                return Ok(json!({
                    "action": action.name(), "skipped": "lease held by a peer",
                    "held_by": holder, "held_until": expires_at,
                }));
            }
            Err(e) => return Err(dq_materialize::Error::from(e).into()),
        }
    } else {
        None
    };
    if session.is_some() {
        emit(ctx, &metrics::lease_metric("lease_acquired"));
    }
    let m = Arc::clone(&ctx.materializer);
    let handle = tokio::runtime::Handle::current();
    let act = action.clone();
    let out = tokio::task::spawn_blocking(move || {
        let mut guard = m.lock().unwrap_or_else(|p| p.into_inner());
        let result = match guard.set_shard(shard) {
            Ok(()) => handle.block_on(invoke(
                &guard,
                &act,
                session.as_ref(),
                deadline,
                until_caught_up,
            )),
            Err(e) => Err(e),
        };
        if let Err(e) = &result {
            guard.recover_from(e);
        }
        if let Some(s) = &session {
            if let Err(e) = handle.block_on(s.release()) {
                tracing::warn!(error = %e, "lease release failed");
            }
        }
        result
    })
    .await
    .map_err(|e| HandlerError {
        class: "panic",
        message: e.to_string(),
    })?;
    if let Err(dq_materialize::Error::Lease(_)) = &out {
        emit(ctx, &metrics::lease_metric("lease_lost"));
    }
    let mut value = out?;
    if let Value::Object(map) = &mut value {
        map.insert("action".into(), json!(action.name()));
        if !shard.is_all() {
            map.insert("shard".into(), json!(shard.to_string()));
        }
    }
    Ok(value)
}

/// `MATERIALIZER_LEASE_WAIT`, cut so the action keeps the drain margin of its invocation.
fn lease_wait(ctx: &Context, deadline: Option<Instant>) -> std::time::Duration {
    let wait = ctx.lease.wait();
    match deadline {
        None => wait,
        Some(deadline) => {
            let margin = ctx.config.drain_margin;
            wait.min(
                deadline
                    .saturating_duration_since(Instant::now())
                    .saturating_sub(margin),
            )
        }
    }
}

fn emit(ctx: &Context, m: &[metrics::Metric]) {
    if let Some(e) = &ctx.metrics {
        e.emit(&[], m);
    }
}

/// Command line of the local mode.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct LocalArgs {
    /// Run until caught up, print the summary, exit.
    pub once: bool,
    /// Run this action once (payload fields from `--from`, `--to`, `--retention`).
    pub action: Option<String>,
    /// Extra payload fields.
    pub fields: Vec<(String, String)>,
}

impl LocalArgs {
    /// Parses `--once`, `--action <name>`, and `--<field> <value>` for action fields.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<LocalArgs, String> {
        let mut out = LocalArgs::default();
        let mut it = args.into_iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--once" => out.once = true,
                "--action" => out.action = Some(it.next().ok_or("--action needs a name")?),
                "-h" | "--help" => {
                    return Err("usage: materializer [--once] [--action materialize|backfill|prune|rebuild-rollups|audit] [--from RFC3339 --to RFC3339] [--retention 8760h]".into())
                }
                flag if flag.starts_with("--") => {
                    let v = it.next().ok_or(format!("{flag} needs a value"))?;
                    out.fields.push((flag.trim_start_matches("--").to_owned(), v));
                }
                other => return Err(format!("unexpected argument `{other}`")),
            }
        }
        Ok(out)
    }

    /// The request payload these arguments describe, if a single run is asked for.
    pub fn payload(&self) -> Option<Value> {
        let action = self
            .action
            .clone()
            .or(self.once.then(|| "materialize".into()))?;
        let mut map = serde_json::Map::new();
        map.insert("action".into(), json!(action));
        for (k, v) in &self.fields {
            map.insert(k.clone(), json!(v));
        }
        Some(Value::Object(map))
    }
}

/// Without the Lambda runtime: one action (`--once`, `--action`) printing its summary, or a loop
/// of drains every `MATERIALIZER_POLL_INTERVAL`.
pub async fn run_local(
    ctx: &Context,
    args: &LocalArgs,
    poll: std::time::Duration,
) -> Result<(), HandlerError> {
    if let Some(payload) = args.payload() {
        let out = handler(payload, ctx, "local", None, true).await?;
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return Ok(());
    }
    loop {
        let out = handler(json!({"action": "materialize"}), ctx, "local", None, true).await;
        match out {
            Ok(v) => tracing::info!(summary = %v, "pass done"),
            Err(e) => tracing::error!(error = %e, "pass failed"),
        }
        tokio::time::sleep(poll).await;
    }
}
