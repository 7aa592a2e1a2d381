//! [`JwksCache`]: a [`KeySet`] kept fresh from an injected fetch.
//!
//! The fetch is a [`JwksFetcher`] (any `Fn() -> impl Future<Output = Result<Vec<u8>, _>>`
//! works), so this crate needs no HTTP client: the function crate fetches the JWKS URL (or the
//! issuer's discovery document, see [`crate::config::discovery_url`]) with its own client.
//!
//! Rules (keys cached for 1 minute, issue 5: "refreshed on unknown
//! `kid`"):
//! - keys older than [`CacheConfig::ttl`] are refreshed before use; when that refresh fails the
//!   stale keys keep serving (logged) rather than failing every request, but only up to
//!   [`CacheConfig::max_staleness`] after their last successful fetch: past it, an issuer that
//!   stays unreachable fails every check closed ([`AuthError::KeysUnavailable`], HTTP 503 /
//!   gRPC `UNAVAILABLE`) instead of accepting keys it may have revoked long ago;
//! - an unknown `kid` triggers a refresh, at most once per [`CacheConfig::min_refresh_interval`]
//!   (so a stream of garbage `kid`s cannot hammer the issuer);
//! - refreshes are single-flight: concurrent callers wait for the one in progress and then
//!   look again.

use crate::error::{AuthError, Result};
use crate::keys::KeySet;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A failed JWKS fetch (transport or HTTP status), as text for logs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct JwksFetchError(pub String);

impl JwksFetchError {
    /// Wraps any displayable error.
    pub fn new(e: impl fmt::Display) -> Self {
        JwksFetchError(e.to_string())
    }
}

/// The boxed future a [`JwksFetcher`] returns.
pub type FetchFuture<'a> =
    Pin<Box<dyn Future<Output = std::result::Result<Vec<u8>, JwksFetchError>> + Send + 'a>>;

/// Fetches the JWKS document bytes.
pub trait JwksFetcher: Send + Sync {
    /// Fetches the current JWKS JSON.
    fn fetch(&self) -> FetchFuture<'_>;
}

impl<F, Fut> JwksFetcher for F
where
    F: Fn() -> Fut + Send + Sync,
    Fut: Future<Output = std::result::Result<Vec<u8>, JwksFetchError>> + Send + 'static,
{
    fn fetch(&self) -> FetchFuture<'_> {
        Box::pin(self())
    }
}

/// Cache timings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    /// Age after which keys are refreshed before use (Go: 1 minute).
    pub ttl: Duration,
    /// Minimum time between two fetches triggered by unknown `kid`s or failures.
    pub min_refresh_interval: Duration,
    /// Age after which keys that could not be refreshed are no longer used
    /// (`TOKEN_EXCHANGE_JWKS_MAX_STALENESS`).
    pub max_staleness: Duration,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            ttl: Duration::from_secs(60),
            min_refresh_interval: Duration::from_secs(10),
            max_staleness: crate::config::DEFAULT_JWKS_MAX_STALENESS,
        }
    }
}

struct State {
    keys: Arc<KeySet>,
    /// When `keys` were fetched successfully.
    fetched_at: Option<Instant>,
    /// When the last fetch (successful or not) started.
    attempted_at: Option<Instant>,
    /// Bumped when a fetch attempt ends; lets a waiter see that someone else just fetched.
    generation: u64,
}

/// A [`KeySet`] refreshed through a [`JwksFetcher`]. Share it in an `Arc`.
pub struct JwksCache {
    fetcher: Box<dyn JwksFetcher>,
    config: CacheConfig,
    state: Mutex<State>,
    refresh: tokio::sync::Mutex<()>,
}

impl fmt::Debug for JwksCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JwksCache")
            .field("config", &self.config)
            .field("keys", &self.current())
            .finish()
    }
}

impl JwksCache {
    /// An empty cache; the first use fetches (or call [`JwksCache::prime`] at cold start).
    pub fn new(fetcher: impl JwksFetcher + 'static, config: CacheConfig) -> JwksCache {
        JwksCache {
            fetcher: Box::new(fetcher),
            config,
            state: Mutex::new(State {
                keys: Arc::new(KeySet::empty()),
                fetched_at: None,
                attempted_at: None,
                generation: 0,
            }),
            refresh: tokio::sync::Mutex::new(()),
        }
    }

    /// Fetches now, ignoring the rate limit; for cold start, so a broken JWKS URL fails the
    /// boot instead of the first request.
    ///
    /// # Errors
    /// [`AuthError::KeysUnavailable`] when the fetch fails or holds no usable key.
    pub async fn prime(&self) -> Result<Arc<KeySet>> {
        let _guard = self.refresh.lock().await;
        self.fetch_and_store().await
    }

    /// Fetches unless a fetch was already attempted (by a request, or an earlier call): what a
    /// process runs in the background at init. A request arriving meanwhile waits for this
    /// fetch and uses its outcome, so the two never fetch twice. A failed warm-up does not count
    /// against the refresh interval: the first request still fetches, as it would without one.
    ///
    /// # Errors
    /// As [`JwksCache::prime`].
    pub async fn warm(&self) -> Result<()> {
        let _guard = self.refresh.lock().await;
        if self.lock().attempted_at.is_some() {
            return Ok(());
        }
        let result = self.fetch_and_store().await.map(drop);
        if result.is_err() {
            self.lock().attempted_at = None;
        }
        result
    }

    /// The keys currently held (possibly empty or stale).
    pub fn current(&self) -> Arc<KeySet> {
        Arc::clone(&self.lock().keys)
    }

    /// The key set to verify a token signed with `kid`, refreshing per the module rules.
    ///
    /// # Errors
    /// [`AuthError::KeysUnavailable`] when no keys were ever fetched successfully, or when the
    /// last successful fetch is older than [`CacheConfig::max_staleness`] and no refresh
    /// succeeds. An unknown `kid` is NOT an error here: the returned set simply lacks it.
    pub async fn keys_for(&self, kid: &str) -> Result<Arc<KeySet>> {
        let now = Instant::now();
        let (keys, fetched_at, generation, stale, may_refetch) = {
            let st = self.lock();
            let stale = st
                .fetched_at
                .is_none_or(|t| now.saturating_duration_since(t) >= self.config.ttl);
            let may_refetch = st.attempted_at.is_none_or(|t| {
                now.saturating_duration_since(t) >= self.config.min_refresh_interval
            });
            (
                Arc::clone(&st.keys),
                st.fetched_at,
                st.generation,
                stale,
                may_refetch,
            )
        };
        let unknown = !keys.contains(kid);
        // A stale-but-present set is refreshed at most once per interval as well, so a failing
        // issuer is not fetched on every request.
        let never_fetched = keys.is_empty() && generation == 0;
        let want = never_fetched || ((stale || unknown) && may_refetch);
        if !want {
            return if keys.is_empty() {
                Err(AuthError::KeysUnavailable("no jwks fetched yet".into()))
            } else {
                self.unless_too_stale(keys, fetched_at)
            };
        }

        let _guard = self.refresh.lock().await;
        {
            // Someone refreshed while we waited: use their result.
            let st = self.lock();
            if st.generation != generation {
                let (keys, fetched_at) = (Arc::clone(&st.keys), st.fetched_at);
                drop(st);
                return if keys.is_empty() {
                    Err(AuthError::KeysUnavailable("jwks fetch failed".into()))
                } else {
                    self.unless_too_stale(keys, fetched_at)
                };
            }
        }
        match self.fetch_and_store().await {
            Ok(fresh) => Ok(fresh),
            Err(e) if !keys.is_empty() => {
                let kept = self.unless_too_stale(keys, fetched_at)?;
                tracing::warn!(error = %e, "jwks refresh failed; serving the cached keys");
                Ok(kept)
            }
            Err(e) => Err(e),
        }
    }

    /// `keys`, fetched at `fetched_at`, unless that is more than [`CacheConfig::max_staleness`]
    /// ago (then the issuer has been unreachable that long: fail closed).
    fn unless_too_stale(
        &self,
        keys: Arc<KeySet>,
        fetched_at: Option<Instant>,
    ) -> Result<Arc<KeySet>> {
        let age = fetched_at.map(|t| t.elapsed());
        match age {
            Some(age) if age <= self.config.max_staleness => Ok(keys),
            _ => {
                let age = age.map_or_else(|| "unknown".into(), |a| format!("{}s", a.as_secs()));
                tracing::error!(
                    age = %age,
                    max_staleness_s = self.config.max_staleness.as_secs(),
                    "jwks could not be refreshed within its maximum staleness; refusing tokens"
                );
                Err(AuthError::KeysUnavailable(format!(
                    "the cached jwks was fetched {age} ago, more than the {}s maximum staleness \
                     ({}), and refreshing it failed",
                    self.config.max_staleness.as_secs(),
                    crate::config::TOKEN_EXCHANGE_JWKS_MAX_STALENESS
                )))
            }
        }
    }

    /// Fetches and stores. Callers hold the refresh lock. The generation moves when the
    /// attempt ENDS (success or not), so a caller that looked while it was in flight sees it
    /// move and reuses the outcome instead of fetching again.
    async fn fetch_and_store(&self) -> Result<Arc<KeySet>> {
        self.lock().attempted_at = Some(Instant::now());
        let result = match self.fetcher.fetch().await {
            Ok(bytes) => KeySet::from_jwks_json(&bytes).map(Arc::new),
            Err(e) => Err(AuthError::KeysUnavailable(format!(
                "jwks fetch failed: {e}"
            ))),
        };
        let mut st = self.lock();
        st.generation = st.generation.wrapping_add(1);
        if let Ok(set) = &result {
            st.keys = Arc::clone(set);
            st.fetched_at = Some(Instant::now());
        }
        result
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is plain data updated in single assignments; a poisoned lock still holds
        // a consistent value.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
