//! JWKS cache: cold-start priming and the init-time prefetch, TTL, refresh on unknown `kid` (rate limited), stale keys on
//! failure, single-flight refreshes.

use crate::{vehicle, ISSUER};
use dq_auth::dev::{DevClaims, DevSigner};
use dq_auth::{
    AuthError, CacheConfig, ErrorCode, JwksCache, JwksFetchError, KeySource, Permission,
    TokenRejection, TokenValidator, ValidationConfig,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A JWKS endpoint whose document can be swapped (key rotation) or broken.
#[derive(Clone, Default)]
struct Endpoint {
    doc: Arc<Mutex<Option<String>>>,
    fetches: Arc<AtomicUsize>,
}

impl Endpoint {
    fn serve(&self, jwks: Option<String>) {
        *self.doc.lock().unwrap() = jwks;
    }

    fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }

    fn cache(&self, config: CacheConfig) -> Arc<JwksCache> {
        let this = self.clone();
        Arc::new(JwksCache::new(
            move || {
                let this = this.clone();
                async move {
                    this.fetches.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    match this.doc.lock().unwrap().clone() {
                        Some(doc) => Ok(doc.into_bytes()),
                        None => Err(JwksFetchError::new("503 from issuer")),
                    }
                }
            },
            config,
        ))
    }
}

fn token(signer: &DevSigner) -> String {
    signer
        .mint(&DevClaims::vehicle(vehicle(1), &[Permission::GetRawData]))
        .unwrap()
}

fn validator(cache: &Arc<JwksCache>) -> TokenValidator {
    TokenValidator::new(
        ValidationConfig::new(ISSUER),
        KeySource::Cached(Arc::clone(cache)),
    )
}

const LONG: Duration = Duration::from_secs(3600);

/// Cache settings: keys kept `ttl`, refreshes at most every `min_refresh_interval`.
fn config(ttl: Duration, min_refresh_interval: Duration) -> CacheConfig {
    CacheConfig {
        ttl,
        min_refresh_interval,
        ..CacheConfig::default()
    }
}

/// An endpoint serving `signer`'s keys, and a cache of it with `config`, primed (one fetch).
async fn primed(signer: &DevSigner, config: CacheConfig) -> (Endpoint, Arc<JwksCache>) {
    let endpoint = Endpoint::default();
    endpoint.serve(Some(signer.jwks_json()));
    let cache = endpoint.cache(config);
    cache.prime().await.unwrap();
    (endpoint, cache)
}

#[tokio::test]
async fn rotation_is_picked_up_on_unknown_kid_and_rate_limited() {
    let old = DevSigner::generate(ISSUER).unwrap();
    let new = DevSigner::generate(ISSUER).unwrap();
    let (endpoint, cache) = primed(&old, config(LONG, Duration::ZERO)).await;
    let v = validator(&cache);
    assert!(v.validate(&token(&old)).await.is_ok());
    assert_eq!(endpoint.fetches(), 1);

    // The issuer rotates: the first token with the new kid triggers a refresh.
    endpoint.serve(Some(new.jwks_json()));
    assert!(v.validate(&token(&new)).await.is_ok());
    assert_eq!(endpoint.fetches(), 2);
    assert!(v.validate(&token(&new)).await.is_ok());
    assert_eq!(endpoint.fetches(), 2, "known kid: no fetch");

    // With a long interval, garbage kids cannot make us fetch again.
    let limited = endpoint.cache(config(LONG, LONG));
    limited.prime().await.unwrap();
    let before = endpoint.fetches();
    let v = validator(&limited);
    for _ in 0..5 {
        let e = v.validate(&token(&old)).await.unwrap_err();
        assert!(matches!(
            e,
            AuthError::InvalidToken(TokenRejection::UnknownKid(_))
        ));
    }
    assert_eq!(endpoint.fetches(), before);
}

#[tokio::test]
async fn first_use_fetches_and_failures_are_unavailable() {
    let signer = DevSigner::generate(ISSUER).unwrap();
    let endpoint = Endpoint::default();
    let cache = endpoint.cache(config(LONG, LONG));
    let v = validator(&cache);
    // Issuer down at cold start: prime fails loudly, requests get UNAVAILABLE.
    assert!(matches!(
        cache.prime().await,
        Err(AuthError::KeysUnavailable(_))
    ));
    let e = v.validate(&token(&signer)).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::Unavailable);
    assert_eq!(e.code().grpc_code(), 14);

    // Lazy first fetch without prime.
    endpoint.serve(Some(signer.jwks_json()));
    let lazy = endpoint.cache(CacheConfig::default());
    assert!(validator(&lazy).validate(&token(&signer)).await.is_ok());
}

#[tokio::test]
async fn prefetch_at_init_fetches_once_with_or_before_the_first_request() {
    let signer = DevSigner::generate(ISSUER).unwrap();
    let endpoint = Endpoint::default();
    endpoint.serve(Some(signer.jwks_json()));

    // The prefetch runs alone: the keys are there before any request, which fetches nothing.
    let cache = endpoint.cache(config(LONG, LONG));
    validator(&cache).prefetch();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(endpoint.fetches(), 1);
    assert!(!cache.current().is_empty());
    assert!(validator(&cache).validate(&token(&signer)).await.is_ok());
    assert_eq!(endpoint.fetches(), 1);

    // A request overtakes the prefetch (the spawned task has not run yet): one fetch between
    // them, whichever takes the refresh lock first.
    let cache = endpoint.cache(config(LONG, LONG));
    let v = validator(&cache);
    v.prefetch();
    assert!(v.validate(&token(&signer)).await.is_ok());
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(endpoint.fetches(), 2);

    // A failing prefetch is logged, not fatal, and does not use up the first request's fetch:
    // with a long refresh interval, the request still fetches at once.
    let down = Endpoint::default();
    let cache = down.cache(config(LONG, LONG));
    validator(&cache).prefetch();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(down.fetches(), 1);
    down.serve(Some(signer.jwks_json()));
    assert!(validator(&cache).validate(&token(&signer)).await.is_ok());
    assert_eq!(down.fetches(), 2);
}

#[tokio::test]
async fn stale_keys_keep_serving_when_refresh_fails() {
    let signer = DevSigner::generate(ISSUER).unwrap();
    let (endpoint, cache) = primed(&signer, config(Duration::ZERO, Duration::ZERO)).await;
    endpoint.serve(None);
    let v = validator(&cache);
    assert!(v.validate(&token(&signer)).await.is_ok());
    assert!(endpoint.fetches() >= 2, "ttl 0 refreshes on every use");
    // A garbage document does not replace good keys either.
    endpoint.serve(Some("{\"keys\": []}".into()));
    assert!(v.validate(&token(&signer)).await.is_ok());
}

#[tokio::test]
async fn concurrent_unknown_kids_share_one_fetch() {
    let old = DevSigner::generate(ISSUER).unwrap();
    let new = DevSigner::generate(ISSUER).unwrap();
    let (endpoint, cache) = primed(&old, config(LONG, Duration::ZERO)).await;
    endpoint.serve(Some(new.jwks_json()));
    let v = Arc::new(validator(&cache));
    let t = token(&new);
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let v = Arc::clone(&v);
        let t = t.clone();
        tasks.push(tokio::spawn(async move { v.validate(&t).await.is_ok() }));
    }
    for task in tasks {
        assert!(task.await.unwrap());
    }
    assert_eq!(
        endpoint.fetches(),
        2,
        "one priming fetch + one shared refresh"
    );
}

#[tokio::test]
async fn stale_keys_fail_closed_after_the_maximum_staleness() {
    const MAX: Duration = Duration::from_millis(300);
    let signer = DevSigner::generate(ISSUER).unwrap();
    let endpoint = Endpoint::default();
    endpoint.serve(Some(signer.jwks_json()));
    // Refreshing on every use, and rate limited to never refetching: both must stop at MAX.
    for min_refresh_interval in [Duration::ZERO, LONG] {
        let cache = endpoint.cache(CacheConfig {
            ttl: Duration::ZERO,
            min_refresh_interval,
            max_staleness: MAX,
        });
        cache.prime().await.unwrap();
        endpoint.serve(None);
        let v = validator(&cache);
        assert!(v.validate(&token(&signer)).await.is_ok(), "within MAX");
        tokio::time::sleep(MAX + Duration::from_millis(50)).await;
        let e = v.validate(&token(&signer)).await.unwrap_err();
        assert!(matches!(e, AuthError::KeysUnavailable(_)), "{e}");
        assert!(e.to_string().contains("maximum staleness"), "{e}");
        assert_eq!(e.code(), ErrorCode::Unavailable);
        assert_eq!(e.code().http_status(), 503);
        assert_eq!(e.code().grpc_code(), 14, "UNAVAILABLE");
        // The issuer is back: the next allowed refresh serves again.
        endpoint.serve(Some(signer.jwks_json()));
        if min_refresh_interval.is_zero() {
            assert!(v.validate(&token(&signer)).await.is_ok(), "recovered");
        }
    }
}
