//! The single-writer lease of the materializer Lambda: one writer at a time commits decoded rows.
//!
//! EventBridge may invoke the materializer concurrently, or twice for one tick; exactly one
//! invocation may write. An invocation [`Lease::acquire`]s the lease (a refusal,
//! [`LeaseError::Held`], means a peer is running: skip the tick), [`Lease::renew`]s it between
//! windows, [`Lease::check`]s it right before each commit (fencing: a holder whose lease was
//! taken over gets [`LeaseError::Lost`] and must not commit), and [`Lease::release`]s it at the
//! end. Every acquisition by a new holder gets a higher *fence* ([`LeaseGuard::fence`]).
//!
//! This crate owns the lease and its storage: a DynamoDB item written only with conditional
//! writes, or, without AWS, an OS file lock next to the catalog. It does not own the catalog's
//! cursor CAS, which stays the final guard of exactly-once; the lease prevents wasted work and
//! gives a fencing token, which the materializer writes into the catalog's progress row in every
//! window transaction (so the catalog, not this check, aborts a writer that lost the lease). It does not renew in the background either: the caller renews, so a
//! frozen Lambda never believes it still holds a lease.
//!
//! A maintenance invocation need not wait for the holder's lease to expire:
//! [`Lease::acquire_waiting`] records a *yield request* on the lease and polls. The holder sees
//! the request in the guard of its next renewal ([`LeaseGuard::yield_requested_by`]) and, at a
//! commit boundary of its choosing, releases. Nothing is taken from the holder: a holder that
//! never yields keeps the lease, and the waiter gets [`LeaseError::WaitExpired`].
//!
//! Why not the `dynamodb-lease` crate (0.22): its lease version is a random UUID replaced on each
//! extension, not a monotonic fencing token; it has no consistent "still mine?" read, reads the
//! system clock directly, returns `anyhow` errors, panics on bad settings and renews from a
//! background task a frozen Lambda cannot run. (Its TTL attribute and plain calls suit moto.)
//!
//! # Layout
//! - [`Lease`] / [`LeaseGuard`]: the handle the materializer uses, whatever the backend.
//! - [`config`]: the `MATERIALIZER_LEASE_*` keys and [`LeaseConfig`].
//! - [`clock`]: [`Clock`], [`SystemClock`] and the test [`ManualClock`].
//! - `dynamo.rs`: the DynamoDB item, its conditional writes and [`Lease::create_table_if_missing`].
//! - `local.rs`: the lock-file backend.
//! - `error.rs`: [`LeaseError`], [`LostReason`], [`Result`].
//!
//! # Example
//! ```no_run
//! # async fn tick(request_id: &str) -> dq_lease::Result<()> {
//! let lease = dq_lease::Lease::from_env("/var/lake/materializer.lease").await?; // at cold start
//! let lease = lease.for_invocation(request_id);
//! let guard = match lease.acquire(lease.ttl()).await {
//!     Ok(guard) => guard,
//!     Err(dq_lease::LeaseError::Held { .. }) => return Ok(()), // a peer is running
//!     Err(other) => return Err(other),
//! };
//! // ... decode a window ...
//! lease.check(&guard).await?; // right before the commit
//! // ... commit with the cursor CAS ...
//! lease.release(&guard).await
//! # }
//! ```
#![warn(missing_docs)]

pub mod clock;
pub mod config;
mod dynamo;
mod error;
mod local;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub use clock::{Clock, ManualClock, SystemClock};
pub use config::LeaseConfig;
pub use dynamo::{KEY as TABLE_KEY, TTL_ATTRIBUTE};
pub use error::{LeaseError, LostReason, Result};

use dynamo::{DynamoBackend, Snapshot};
use local::LocalBackend;

/// How close to expiry [`Lease::check`] refuses by default: a commit must fit in this time.
pub const DEFAULT_CHECK_MARGIN: Duration = Duration::from_secs(10);

/// Proof of one acquisition: who holds the lease, with which fence, until when.
///
/// A guard is only valid with the [`Lease`] handle (or a clone of it) that acquired it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseGuard {
    lease_id: String,
    holder: String,
    fence: u64,
    expires_at: i64,
    yield_requested_by: Option<String>,
}

impl LeaseGuard {
    /// The fencing token: strictly higher for every acquisition by a new holder. Record it with
    /// what you write if a reader must reject older writers.
    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// When the lease expires unless renewed, in epoch seconds.
    pub fn expires_at(&self) -> i64 {
        self.expires_at
    }

    /// The holder id of this acquisition.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// The lease id (the DynamoDB key, or the lock file path).
    pub fn lease_id(&self) -> &str {
        &self.lease_id
    }

    /// The holder id of an invocation waiting for this lease, as seen by the acquisition or
    /// renewal that returned this guard: the holder should release at its next commit boundary.
    pub fn yield_requested_by(&self) -> Option<&str> {
        self.yield_requested_by.as_deref()
    }
}

/// The first pause between attempts of [`Lease::acquire_waiting`]; it doubles up to
/// [`MAX_WAIT_POLL`].
const FIRST_WAIT_POLL: Duration = Duration::from_millis(200);
/// The longest pause between attempts of [`Lease::acquire_waiting`]: how long a released lease
/// may stay free before the waiter takes it (a scheduled tick could take it meanwhile, and is
/// then asked to yield in turn).
const MAX_WAIT_POLL: Duration = Duration::from_secs(2);

/// Where the lease lives.
#[derive(Clone, Debug)]
enum Backend {
    Dynamo(DynamoBackend),
    Local(LocalBackend),
}

/// A handle on the single-writer lease, for one holder.
///
/// Build it once at cold start ([`Lease::from_env`]), then take a handle per invocation with
/// [`Lease::for_invocation`], which gives it its own holder id. Clones share the holder (and, on
/// the local backend, the held lock, which is released when the last clone is dropped).
#[derive(Clone)]
pub struct Lease {
    backend: Backend,
    holder: String,
    clock: Arc<dyn Clock>,
    ttl: Duration,
    check_margin: Duration,
    wait: Duration,
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("backend", &self.to_string())
            .field("holder", &self.holder)
            .field("ttl", &self.ttl)
            .field("check_margin", &self.check_margin)
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

impl fmt::Display for Lease {
    /// `dynamodb:<table>/<lease id>` or `file:<path>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.backend {
            Backend::Dynamo(dynamo) => {
                write!(f, "dynamodb:{}/{}", dynamo.table(), dynamo.lease_id())
            }
            Backend::Local(local) => write!(f, "file:{}", local.path().display()),
        }
    }
}

impl Lease {
    /// A lease on the lock file at `path` (created on first acquire; its directory must exist).
    pub fn local(path: impl Into<PathBuf>) -> Lease {
        Lease::with_backend(Backend::Local(LocalBackend::new(path.into())))
    }

    /// A lease on item `lease_id` of DynamoDB table `table`, through `client`.
    pub fn dynamo(
        client: aws_sdk_dynamodb::Client,
        table: impl Into<String>,
        lease_id: impl Into<String>,
    ) -> Lease {
        Lease::with_backend(Backend::Dynamo(DynamoBackend::new(
            client,
            table.into(),
            lease_id.into(),
        )))
    }

    /// The lease `cfg` describes: DynamoDB when it names a table (building the client), else the
    /// lock file at `local_path` (e.g. `<catalog dir>/materializer.lease`).
    pub async fn from_config(cfg: &LeaseConfig, local_path: impl AsRef<Path>) -> Result<Lease> {
        let lease = match &cfg.table {
            Some(table) => {
                if !config::valid_table_name(table) {
                    return Err(LeaseError::Config(format!(
                        "{} `{table}` is not a valid DynamoDB table name",
                        config::MATERIALIZER_LEASE_TABLE
                    )));
                }
                let client = dynamo::client(cfg).await;
                Lease::dynamo(client, table.clone(), cfg.lease_id.clone())
            }
            None => Lease::local(local_path.as_ref()),
        };
        let lease = lease.with_ttl(cfg.ttl).with_wait(cfg.wait);
        tracing::info!(
            lease = %lease,
            ttl_secs = cfg.ttl.as_secs(),
            wait_secs = cfg.wait.as_secs(),
            endpoint = cfg.endpoint.as_deref().unwrap_or("default"),
            "materializer lease configured"
        );
        Ok(lease)
    }

    /// [`Lease::from_config`] with [`LeaseConfig::from_env`].
    pub async fn from_env(local_path: impl AsRef<Path>) -> Result<Lease> {
        Lease::from_config(&LeaseConfig::from_env()?, local_path).await
    }

    fn with_backend(backend: Backend) -> Lease {
        Lease {
            backend,
            holder: holder_id(&format!("pid{}", std::process::id())),
            clock: Arc::new(SystemClock),
            ttl: config::DEFAULT_TTL,
            check_margin: DEFAULT_CHECK_MARGIN,
            wait: Duration::ZERO,
        }
    }

    /// A handle on the same lease for a new holder `<invocation_id>-<random>` (characters other
    /// than letters, digits, `-`, `_`, `.`, `:` become `-`). It shares the client and settings but
    /// holds nothing yet.
    pub fn for_invocation(&self, invocation_id: &str) -> Lease {
        let backend = match &self.backend {
            Backend::Dynamo(dynamo) => Backend::Dynamo(dynamo.clone()),
            Backend::Local(local) => Backend::Local(local.fresh()),
        };
        Lease {
            backend,
            holder: holder_id(invocation_id),
            clock: Arc::clone(&self.clock),
            ttl: self.ttl,
            check_margin: self.check_margin,
            wait: self.wait,
        }
    }

    /// The same backend and settings on another item, named from this one's: DynamoDB item
    /// `id(<this id>)` in the same table, or lock file `path(<this path>)`. Nobody holds it yet
    /// through the new handle. Writers that split the work (shards) hold one item each.
    pub fn for_item(&self, id: impl Fn(&str) -> String, path: impl Fn(&Path) -> PathBuf) -> Lease {
        let backend = match &self.backend {
            Backend::Dynamo(dynamo) => Backend::Dynamo(DynamoBackend::new(
                dynamo.client().clone(),
                dynamo.table().to_owned(),
                id(dynamo.lease_id()),
            )),
            Backend::Local(local) => Backend::Local(LocalBackend::new(path(local.path()))),
        };
        Lease {
            backend,
            holder: self.holder.clone(),
            clock: Arc::clone(&self.clock),
            ttl: self.ttl,
            check_margin: self.check_margin,
            wait: self.wait,
        }
    }

    /// Uses `clock` for expiry (tests pass a [`ManualClock`]).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Lease {
        self.clock = clock;
        self
    }

    /// Sets the TTL returned by [`Lease::ttl`] (default [`config::DEFAULT_TTL`]).
    pub fn with_ttl(mut self, ttl: Duration) -> Lease {
        self.ttl = ttl;
        self
    }

    /// Sets how close to expiry [`Lease::check`] refuses (default [`DEFAULT_CHECK_MARGIN`]).
    pub fn with_check_margin(mut self, margin: Duration) -> Lease {
        self.check_margin = margin;
        self
    }

    /// Sets the wait returned by [`Lease::wait`] (default zero).
    pub fn with_wait(mut self, wait: Duration) -> Lease {
        self.wait = wait;
        self
    }

    /// The configured wait ([`config::MATERIALIZER_LEASE_WAIT`]), to pass to
    /// [`Lease::acquire_waiting`].
    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// This handle's holder id.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// The configured TTL, to pass to [`Lease::acquire`] and [`Lease::renew`].
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// True for the lock-file backend.
    pub fn is_local(&self) -> bool {
        matches!(self.backend, Backend::Local(_))
    }

    /// Acquires the lease for `ttl`: succeeds when nobody holds it, the holder's lease expired,
    /// or this holder already has it (then the fence is unchanged and the expiry extended).
    ///
    /// # Errors
    /// [`LeaseError::Held`] when another holder has it: a normal outcome, "a peer is running".
    pub async fn acquire(&self, ttl: Duration) -> Result<LeaseGuard> {
        let term = Term::new(self.clock.now_millis(), ttl);
        let guard = match &self.backend {
            Backend::Dynamo(dynamo) => dynamo.acquire(&self.holder, term).await,
            Backend::Local(local) => local.acquire(&self.holder, term),
        };
        match &guard {
            Ok(guard) => tracing::info!(
                lease = %self,
                holder = %self.holder,
                fence = guard.fence,
                expires_at = guard.expires_at,
                "lease acquired"
            ),
            Err(LeaseError::Held {
                holder, expires_at, ..
            }) => tracing::info!(
                lease = %self,
                holder = %holder,
                expires_at,
                "lease held by a peer"
            ),
            Err(_) => {}
        }
        guard
    }

    /// [`Lease::acquire`], waiting up to `wait` for a held lease: each refusal records a yield
    /// request for the holder ([`LeaseGuard::yield_requested_by`]) and the attempt is repeated
    /// after a pause that doubles from 200 ms to 2 s. A zero `wait` is one plain attempt.
    ///
    /// # Errors
    /// [`LeaseError::Held`] when `wait` is zero and another holder has it;
    /// [`LeaseError::WaitExpired`] when another holder still has it after `wait` (the yield
    /// request is withdrawn first, so a holder that did not act on it yet keeps running).
    pub async fn acquire_waiting(&self, ttl: Duration, wait: Duration) -> Result<LeaseGuard> {
        if wait.is_zero() {
            return self.acquire(ttl).await;
        }
        let started = tokio::time::Instant::now();
        let give_up = started + wait;
        let mut pause = FIRST_WAIT_POLL;
        let mut asked = false;
        loop {
            let (holder, expires_at) = match self.acquire(ttl).await {
                Err(LeaseError::Held {
                    holder, expires_at, ..
                }) => (holder, expires_at),
                other => return other,
            };
            let now = tokio::time::Instant::now();
            if now >= give_up {
                if let Err(error) = self.withdraw_yield().await {
                    tracing::warn!(lease = %self, %error, "withdrawing the yield request failed");
                }
                return Err(LeaseError::WaitExpired {
                    lease_id: self.lease_id(),
                    holder,
                    expires_at,
                    waited_secs: now.duration_since(started).as_secs(),
                });
            }
            // Asked again on every attempt: a holder that took the lease meanwhile (a scheduled
            // tick) cleared the request addressed to its predecessor.
            let requested = match &self.backend {
                Backend::Dynamo(dynamo) => {
                    dynamo
                        .request_yield(&self.holder, self.clock.now_secs())
                        .await?
                }
                Backend::Local(local) => {
                    local.request_yield(&self.holder, self.clock.now_secs())?
                }
            };
            if requested && !asked {
                asked = true;
                tracing::info!(lease = %self, holder = %holder, "lease held; asked the holder to yield");
            }
            tokio::time::sleep(pause.min(give_up - now)).await;
            pause = (pause * 2).min(MAX_WAIT_POLL);
        }
    }

    /// Withdraws this handle's yield request, if it is still the recorded one.
    async fn withdraw_yield(&self) -> Result<()> {
        match &self.backend {
            Backend::Dynamo(dynamo) => dynamo.withdraw_yield(&self.holder).await,
            Backend::Local(local) => local.withdraw_yield(Some(&self.holder)),
        }
    }

    /// The lease id guards of this lease carry.
    fn lease_id(&self) -> String {
        match &self.backend {
            Backend::Dynamo(dynamo) => dynamo.lease_id().to_owned(),
            Backend::Local(local) => local.lease_id(),
        }
    }

    /// Extends the lease of `guard` to now + `ttl` and returns the updated guard.
    ///
    /// # Errors
    /// [`LeaseError::Lost`] unless this holder still has it with the guard's fence.
    pub async fn renew(&self, guard: &LeaseGuard, ttl: Duration) -> Result<LeaseGuard> {
        self.ensure_own(guard)?;
        let term = Term::new(self.clock.now_millis(), ttl);
        let renewed = match &self.backend {
            Backend::Dynamo(dynamo) => dynamo.renew(guard, term).await,
            Backend::Local(local) => local.renew(guard, term),
        };
        self.log_lost(&renewed);
        renewed
    }

    /// Verifies, with a strongly consistent read, that `guard` still holds the lease with the
    /// same fence and more than the check margin left. Call it right before a commit.
    ///
    /// # Errors
    /// [`LeaseError::Lost`] when the lease was taken over, released or deleted;
    /// [`LeaseError::Expiring`] when it is still ours but expires within the margin (renew, then
    /// check again).
    pub async fn check(&self, guard: &LeaseGuard) -> Result<()> {
        self.ensure_own(guard)?;
        let current = match &self.backend {
            Backend::Dynamo(dynamo) => dynamo.read().await,
            Backend::Local(local) => local.snapshot(guard).map(Some),
        };
        let verdict = current.and_then(|current| self.judge(guard, current));
        self.log_lost(&verdict);
        verdict
    }

    /// Gives the lease up so a peer need not wait for expiry. Releasing a lease that was
    /// already lost or released is not an error.
    pub async fn release(&self, guard: &LeaseGuard) -> Result<()> {
        if self.ensure_own(guard).is_err() {
            return Ok(());
        }
        let now = self.clock.now_secs();
        let released = match &self.backend {
            Backend::Dynamo(dynamo) => dynamo.release(guard, now).await?,
            Backend::Local(local) => local.release(guard, now)?,
        };
        if released {
            tracing::info!(lease = %self, fence = guard.fence, "lease released");
        } else {
            tracing::info!(lease = %self, fence = guard.fence, "lease already lost; nothing to release");
        }
        Ok(())
    }

    /// Creates the DynamoDB table (on-demand, key [`TABLE_KEY`], TTL on [`TTL_ATTRIBUTE`]) unless
    /// it exists, for local and test stacks; in production SAM creates it. Checks the key of an
    /// existing table. Does nothing for the local backend.
    pub async fn create_table_if_missing(&self) -> Result<()> {
        match &self.backend {
            Backend::Dynamo(dynamo) => dynamo.create_table_if_missing().await,
            Backend::Local(_) => Ok(()),
        }
    }

    /// The guard must come from this holder and this lease.
    fn ensure_own(&self, guard: &LeaseGuard) -> Result<()> {
        if guard.holder == self.holder && guard.lease_id == self.lease_id() {
            Ok(())
        } else {
            Err(LeaseError::Lost {
                lease_id: guard.lease_id.clone(),
                fence: guard.fence,
                reason: LostReason::NotHeld,
            })
        }
    }

    /// Compares the current lease with `guard` and the check margin.
    fn judge(&self, guard: &LeaseGuard, current: Option<Snapshot>) -> Result<()> {
        let current = match current {
            Some(current)
                if current.holder.as_deref() == Some(guard.holder.as_str())
                    && current.fence == guard.fence =>
            {
                current
            }
            other => return Err(dynamo::lost(guard, other.as_ref())),
        };
        let margin_secs = ttl_secs(self.check_margin);
        if current.expires_at.saturating_sub(self.clock.now_secs()) <= margin_secs {
            return Err(LeaseError::Expiring {
                lease_id: guard.lease_id.clone(),
                expires_at: current.expires_at,
                margin_secs: margin_secs.unsigned_abs(),
            });
        }
        Ok(())
    }

    fn log_lost<T>(&self, result: &Result<T>) {
        if let Err(error @ LeaseError::Lost { .. }) = result {
            tracing::warn!(lease = %self, holder = %self.holder, %error, "lease lost");
        }
    }
}

/// The instant of one acquire or renew and the expiry it grants, in the backends' units: whole
/// epoch seconds (the DynamoDB TTL attribute's), and the milliseconds fresh fences are seeded from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Term {
    /// Milliseconds since the epoch.
    now_millis: i64,
    /// Whole seconds since the epoch (rounded down).
    now: i64,
    /// `now` + the TTL in whole seconds (rounded up).
    expires_at: i64,
}

impl Term {
    /// The term of a lease granted at `now_millis` for `ttl`.
    fn new(now_millis: i64, ttl: Duration) -> Self {
        let now = clock::epoch_secs(now_millis);
        Term {
            now_millis,
            now,
            expires_at: now.saturating_add(ttl_secs(ttl)),
        }
    }
}

/// Whole seconds, rounded up, at least 1 for a non-zero duration.
fn ttl_secs(ttl: Duration) -> i64 {
    let secs = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    i64::try_from(secs).unwrap_or(i64::MAX)
}

/// `<prefix>-<12 random hex digits>`, with the prefix restricted to a safe alphabet.
fn holder_id(prefix: &str) -> String {
    let prefix: String = prefix
        .chars()
        .take(100)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}-{}", &random[..12])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_rounds_up_to_whole_seconds() {
        assert_eq!(ttl_secs(Duration::from_secs(120)), 120);
        assert_eq!(ttl_secs(Duration::from_millis(1_001)), 2);
        assert_eq!(ttl_secs(Duration::ZERO), 0);
    }

    #[test]
    fn holder_ids_are_unique_and_safe() {
        let a = holder_id("req 1/\nx");
        let b = holder_id("req 1/\nx");
        assert_ne!(a, b);
        assert!(a.starts_with("req-1--x-"), "{a}");
        assert!(!a.contains('\n'));
    }

    #[test]
    fn handles_for_invocations_have_their_own_holder() {
        let lease = Lease::local("/tmp/never-opened.lease").with_ttl(Duration::from_secs(60));
        let first = lease.for_invocation("req-1");
        let second = lease.for_invocation("req-1");
        assert_ne!(first.holder(), second.holder());
        assert_eq!(first.ttl(), Duration::from_secs(60));
        assert!(first.is_local());
        assert_eq!(first.to_string(), "file:/tmp/never-opened.lease");
    }
}
