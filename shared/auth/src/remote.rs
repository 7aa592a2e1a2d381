//! The two upstreams auth talks to over HTTP, shared by GraphQL and FetchService: the JWKS (from
//! `TOKEN_EXCHANGE_JWK_KEY_SET_URL`, or the issuer's OIDC discovery document) and identity-api's
//! device → vehicle lookup (cloud-event access of a device paired to the token's vehicle).

use std::sync::Arc;
use std::time::Duration;

use crate::authz::{DeviceLinks, IdentityError, LinkFuture};
use crate::cache::FetchFuture;
use crate::config::{discovery_url, jwks_uri_from_discovery};
use crate::{
    AuthSettings, CacheConfig, JwksCache, JwksFetchError, JwksFetcher, JwksLocation, KeySource,
    TokenValidator,
};

/// How long one JWKS, discovery or identity-api request may take.
pub const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(10);

/// Largest JWKS or discovery document accepted, in bytes; real ones are a few KiB. The body is
/// read incrementally and the fetch fails once it is over, so a broken or hostile endpoint
/// cannot make the process buffer an unbounded body.
pub const MAX_JWKS_BYTES: usize = 1 << 20;

/// Fetches the key set over HTTP.
#[derive(Debug, Clone)]
pub struct HttpJwks {
    http: reqwest::Client,
    location: JwksLocation,
}

impl HttpJwks {
    /// A fetcher for `location` on a shared client.
    pub fn new(http: reqwest::Client, location: JwksLocation) -> HttpJwks {
        HttpJwks { http, location }
    }

    async fn get(&self, url: &str) -> Result<Vec<u8>, JwksFetchError> {
        let mut resp = self
            .http
            .get(url)
            .timeout(UPSTREAM_TIMEOUT)
            .send()
            .await
            .map_err(JwksFetchError::new)?;
        if !resp.status().is_success() {
            return Err(JwksFetchError(format!("GET {url}: HTTP {}", resp.status())));
        }
        let too_large = || {
            JwksFetchError(format!(
                "GET {url}: the response body is larger than {MAX_JWKS_BYTES} bytes"
            ))
        };
        if resp
            .content_length()
            .is_some_and(|n| n > MAX_JWKS_BYTES as u64)
        {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(JwksFetchError::new)? {
            if body.len() + chunk.len() > MAX_JWKS_BYTES {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    async fn fetch_keys(&self) -> Result<Vec<u8>, JwksFetchError> {
        match &self.location {
            JwksLocation::Url(url) => self.get(url).await,
            JwksLocation::Discover { issuer } => {
                let doc = self.get(&discovery_url(issuer)).await?;
                let uri = jwks_uri_from_discovery(&doc)
                    .ok_or_else(|| JwksFetchError("discovery document has no jwks_uri".into()))?;
                self.get(&uri).await
            }
        }
    }
}

impl JwksFetcher for HttpJwks {
    fn fetch(&self) -> FetchFuture<'_> {
        Box::pin(self.fetch_keys())
    }
}

/// The production validator for `settings` (cached JWKS, refreshed on unknown `kid`), or `None`
/// when no issuer is configured: every caller is then unauthenticated.
pub fn validator(settings: &AuthSettings, http: &reqwest::Client) -> Option<TokenValidator> {
    let config = settings.validation_config()?;
    let location = settings.jwks_location()?;
    let cache = JwksCache::new(
        HttpJwks::new(http.clone(), location),
        CacheConfig {
            max_staleness: settings.jwks_max_staleness,
            ..CacheConfig::default()
        },
    );
    Some(TokenValidator::new(
        config,
        KeySource::Cached(Arc::new(cache)),
    ))
}

/// identity-api over HTTP: the first non-empty `vehicle.tokenDID` of the device, aftermarket first.
#[derive(Debug, Clone)]
pub struct IdentityApi {
    http: reqwest::Client,
    url: String,
}

const IDENTITY_QUERY: &str = "query($did:String!){ aftermarketDevice(by:{tokenDID:$did}){vehicle{tokenDID}} syntheticDevice(by:{tokenDID:$did}){vehicle{tokenDID}} }";

impl IdentityApi {
    /// A client for `url` (`IDENTITY_API_URL`) on a shared HTTP client.
    pub fn new(http: reqwest::Client, url: impl Into<String>) -> IdentityApi {
        IdentityApi {
            http,
            url: url.into(),
        }
    }

    async fn lookup(&self, did: &str) -> Result<Option<String>, IdentityError> {
        let body = serde_json::json!({"query": IDENTITY_QUERY, "variables": {"did": did}});
        let resp = self
            .http
            .post(&self.url)
            .timeout(UPSTREAM_TIMEOUT)
            .json(&body)
            .send()
            .await
            .map_err(IdentityError::new)?;
        if !resp.status().is_success() {
            return Err(IdentityError(format!(
                "identity-api: HTTP {}",
                resp.status()
            )));
        }
        let doc: serde_json::Value = resp.json().await.map_err(IdentityError::new)?;
        // Partial GraphQL errors are normal: one of the two device kinds is always unknown.
        let vehicle = ["aftermarketDevice", "syntheticDevice"]
            .iter()
            .find_map(|kind| {
                doc.pointer(&format!("/data/{kind}/vehicle/tokenDID"))
                    .and_then(serde_json::Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
            });
        match vehicle {
            Some(v) => Ok(Some(v)),
            None => Err(IdentityError("identity-api: device not found".into())),
        }
    }
}

impl DeviceLinks for IdentityApi {
    fn paired_vehicle<'a>(&'a self, device_did: &'a str) -> LinkFuture<'a> {
        Box::pin(self.lookup(device_did))
    }
}
