//! The JWKS fetcher behind `auth::JwksCache`: reqwest against `TOKEN_EXCHANGE_JWK_KEY_SET_URL`,
//! or the `jwks_uri` discovered from the issuer (dq-query.md §5.1).

use auth::cache::FetchFuture;
use auth::config::{discovery_url, jwks_uri_from_discovery};
use auth::{AuthSettings, CacheConfig, JwksCache, JwksFetchError, JwksFetcher, KeySource};
use auth::{TokenValidator, ValidationConfig};
use std::sync::Arc;
use std::time::Duration;

/// How long one JWKS (or discovery) request may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Fetches the key set over HTTP.
#[derive(Debug, Clone)]
pub struct HttpJwks {
    client: reqwest::Client,
    jwks_url: Option<String>,
    issuer: String,
}

impl HttpJwks {
    async fn get(&self, url: &str) -> Result<Vec<u8>, JwksFetchError> {
        let resp = self
            .client
            .get(url)
            .timeout(FETCH_TIMEOUT)
            .send()
            .await
            .map_err(JwksFetchError::new)?;
        if !resp.status().is_success() {
            return Err(JwksFetchError(format!("GET {url}: HTTP {}", resp.status())));
        }
        Ok(resp.bytes().await.map_err(JwksFetchError::new)?.to_vec())
    }

    async fn fetch_keys(&self) -> Result<Vec<u8>, JwksFetchError> {
        let url = match &self.jwks_url {
            Some(u) => u.clone(),
            None => {
                let doc = self.get(&discovery_url(&self.issuer)).await?;
                jwks_uri_from_discovery(&doc)
                    .ok_or_else(|| JwksFetchError("discovery document has no jwks_uri".into()))?
            }
        };
        self.get(&url).await
    }
}

impl JwksFetcher for HttpJwks {
    fn fetch(&self) -> FetchFuture<'_> {
        Box::pin(self.fetch_keys())
    }
}

/// The production validator for `settings`, or `None` when no issuer is configured (every
/// request is then unauthenticated and the directives refuse it).
pub fn validator(settings: &AuthSettings) -> Option<TokenValidator> {
    let issuer = settings.issuer.clone()?;
    let fetcher = HttpJwks {
        client: reqwest::Client::new(),
        jwks_url: settings.jwks_url.clone(),
        issuer: issuer.clone(),
    };
    let cache = JwksCache::new(fetcher, CacheConfig::default());
    Some(TokenValidator::new(
        ValidationConfig::new(issuer),
        KeySource::Cached(Arc::new(cache)),
    ))
}
