//! JWT validation and bearer-token extraction (HTTP `Authorization` header, gRPC metadata).

use crate::cache::JwksCache;
use crate::error::{AuthError, Result, TokenRejection};
use crate::keys::KeySet;
use crate::principal::{Principal, RawClaims};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use serde::Deserialize;
use std::sync::Arc;

/// The audience every token must contain.
pub const REQUIRED_AUDIENCE: &str = "dimo.zone";

/// The only accepted signature algorithm.
pub const ALGORITHM: &str = "RS256";

/// Longest token accepted, in bytes; token-exchange tokens are far smaller.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// What a token must satisfy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationConfig {
    /// `iss` must equal this (`TOKEN_EXCHANGE_ISSUER_URL`).
    pub issuer: String,
    /// `aud` must contain this ([`REQUIRED_AUDIENCE`]).
    pub audience: String,
    /// Clock leeway for `exp`/`nbf` in seconds (Go: none configured, so 0).
    pub leeway_secs: u64,
}

impl ValidationConfig {
    /// The production rules for `issuer`: audience `dimo.zone`, no leeway.
    pub fn new(issuer: impl Into<String>) -> ValidationConfig {
        ValidationConfig {
            issuer: issuer.into(),
            audience: REQUIRED_AUDIENCE.into(),
            leeway_secs: 0,
        }
    }

    fn jsonwebtoken_validation(&self) -> Validation {
        let mut v = Validation::new(Algorithm::RS256);
        v.algorithms = vec![Algorithm::RS256];
        v.leeway = self.leeway_secs;
        v.validate_exp = true;
        v.validate_nbf = true;
        v.validate_aud = true;
        v.set_issuer(&[&self.issuer]);
        v.set_audience(&[&self.audience]);
        v.set_required_spec_claims(&["exp", "iss", "aud"]);
        v
    }
}

/// Where a [`TokenValidator`] gets its keys.
#[derive(Debug, Clone)]
pub enum KeySource {
    /// A fixed set (a local JWKS file, the development signer, tests).
    Static(Arc<KeySet>),
    /// A refreshed cache (the JWKS URL).
    Cached(Arc<JwksCache>),
}

/// Validates tokens into [`Principal`]s.
#[derive(Debug, Clone)]
pub struct TokenValidator {
    config: ValidationConfig,
    validation: Validation,
    keys: KeySource,
}

#[derive(Deserialize)]
struct RawHeader {
    #[serde(default)]
    alg: Option<String>,
    #[serde(default)]
    kid: Option<String>,
    #[serde(default)]
    crit: Option<serde_json::Value>,
}

/// The parts of a header this crate decides on before touching any key.
struct CheckedHeader {
    kid: String,
}

impl TokenValidator {
    /// A validator for `config` over `keys`.
    pub fn new(config: ValidationConfig, keys: KeySource) -> TokenValidator {
        let validation = config.jsonwebtoken_validation();
        TokenValidator {
            config,
            validation,
            keys,
        }
    }

    /// The rules in force.
    pub fn config(&self) -> &ValidationConfig {
        &self.config
    }

    /// Starts fetching a cached key set on the current Tokio runtime and returns at once
    /// (nothing to do for a static set). The functions call it before attaching the lake, so
    /// the JWKS round trip overlaps the attach instead of delaying the first authenticated
    /// request ([`JwksCache::warm`]). A failure is only logged, and the first request then
    /// fetches itself, as without a prefetch.
    pub fn prefetch(&self) {
        if let KeySource::Cached(cache) = &self.keys {
            let cache = Arc::clone(cache);
            tokio::spawn(async move {
                if let Err(e) = cache.warm().await {
                    tracing::warn!(error = %e, "jwks prefetch at init failed");
                }
            });
        }
    }

    /// Validates `token` (the bare JWT, without `Bearer `).
    ///
    /// # Errors
    /// [`AuthError::InvalidToken`] with the reason; [`AuthError::KeysUnavailable`] when no key
    /// set could be obtained; [`AuthError::Internal`] when no crypto provider is available.
    pub async fn validate(&self, token: &str) -> Result<Principal> {
        let header = check_header(token)?;
        match &self.keys {
            KeySource::Static(keys) => self.validate_with(token, &header, keys),
            KeySource::Cached(cache) => {
                let keys = cache.keys_for(&header.kid).await?;
                self.validate_with(token, &header, &keys)
            }
        }
    }

    /// Validates `token` against an explicit key set, synchronously.
    ///
    /// # Errors
    /// As [`TokenValidator::validate`].
    pub fn validate_sync(&self, token: &str, keys: &KeySet) -> Result<Principal> {
        let header = check_header(token)?;
        self.validate_with(token, &header, keys)
    }

    /// HTTP: reads an optional `Authorization` header the way go-jwt-middleware does with
    /// optional credentials and validates the token in it.
    ///
    /// `Ok(None)` means "proceed unauthenticated" (no header, or an empty token).
    ///
    /// # Errors
    /// [`AuthError::MalformedHeader`] for a header that is not `Bearer <token>` (HTTP 500
    /// "Something went wrong while checking the JWT."); otherwise as
    /// [`TokenValidator::validate`] (HTTP 401 "JWT is invalid.").
    pub async fn authenticate_http(
        &self,
        authorization: Option<&str>,
    ) -> Result<Option<Principal>> {
        match http_bearer_token(authorization)? {
            None => Ok(None),
            Some(token) => self.validate(token).await.map(Some),
        }
    }

    fn validate_with(
        &self,
        token: &str,
        header: &CheckedHeader,
        keys: &KeySet,
    ) -> Result<Principal> {
        ensure_crypto_provider()?;
        let key = keys.get(&header.kid).ok_or_else(|| {
            AuthError::InvalidToken(TokenRejection::UnknownKid(
                header.kid.chars().take(64).collect(),
            ))
        })?;
        let data = jsonwebtoken::decode::<RawClaims>(token, key, &self.validation)
            .map_err(|e| AuthError::InvalidToken(rejection(e.kind())))?;
        Ok(Principal::Token(data.claims.into_principal()))
    }
}

/// Decides on the header before any key is used: shape, `alg` (RS256 only, so `none` and an
/// HS256 token "signed" with the public key never reach a verifier), `kid` present, no `crit`.
fn check_header(token: &str) -> Result<CheckedHeader> {
    let malformed = || AuthError::InvalidToken(TokenRejection::Malformed);
    if token.len() > MAX_TOKEN_BYTES {
        return Err(malformed());
    }
    let mut parts = token.split('.');
    let (Some(header), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(malformed());
    };
    let bytes = URL_SAFE_NO_PAD.decode(header).map_err(|_| malformed())?;
    let header: RawHeader = serde_json::from_slice(&bytes).map_err(|_| malformed())?;
    match header.alg.as_deref() {
        Some(ALGORITHM) => {}
        other => {
            return Err(AuthError::InvalidToken(TokenRejection::Algorithm(
                other.unwrap_or("").chars().take(32).collect(),
            )))
        }
    }
    if header.crit.is_some() {
        return Err(AuthError::InvalidToken(TokenRejection::CriticalHeader));
    }
    let kid = header
        .kid
        .filter(|k| !k.is_empty())
        .ok_or(AuthError::InvalidToken(TokenRejection::MissingKid))?;
    Ok(CheckedHeader { kid })
}

fn rejection(kind: &ErrorKind) -> TokenRejection {
    match kind {
        ErrorKind::ExpiredSignature => TokenRejection::Expired,
        ErrorKind::ImmatureSignature => TokenRejection::NotYetValid,
        ErrorKind::InvalidIssuer => TokenRejection::Issuer,
        ErrorKind::InvalidAudience => TokenRejection::Audience,
        ErrorKind::InvalidSignature => TokenRejection::Signature,
        ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm => {
            TokenRejection::Algorithm(String::new())
        }
        ErrorKind::MissingRequiredClaim(c) => TokenRejection::MissingClaim(c.clone()),
        ErrorKind::InvalidClaimFormat(_) | ErrorKind::Json(_) => TokenRejection::Claims,
        _ => TokenRejection::Malformed,
    }
}

/// Makes sure `jsonwebtoken` has a crypto provider, so a verification can never hit its
/// "no provider" panic (e.g. if feature unification enabled both of its backends).
fn ensure_crypto_provider() -> Result<()> {
    use jsonwebtoken::crypto::CryptoProvider;
    if CryptoProvider::try_get_default().is_some() {
        return Ok(());
    }
    // Losing a race against another installer is fine: some provider is then installed.
    let _ = jsonwebtoken::crypto::aws_lc::DEFAULT_PROVIDER.install_default();
    match CryptoProvider::try_get_default() {
        Some(_) => Ok(()),
        None => Err(AuthError::Internal(
            "no jsonwebtoken crypto provider".into(),
        )),
    }
}

/// HTTP `Authorization` header → token, like go-jwt-middleware's `AuthHeaderTokenExtractor`:
/// absent or empty → `None`; otherwise it must split on whitespace into exactly
/// `<bearer> <token>` (scheme case-insensitive).
///
/// # Errors
/// [`AuthError::MalformedHeader`] for any other shape.
pub fn http_bearer_token(authorization: Option<&str>) -> Result<Option<&str>> {
    let Some(value) = authorization.filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let mut fields = value.split_whitespace();
    match (fields.next(), fields.next(), fields.next()) {
        (Some(scheme), Some(token), None) if scheme.eq_ignore_ascii_case("bearer") => {
            Ok(Some(token))
        }
        _ => Err(AuthError::MalformedHeader),
    }
}

/// gRPC `authorization` metadata → token: the `Bearer ` prefix is optional
/// and case-insensitive; surrounding whitespace is ignored; empty → `None`.
pub fn grpc_bearer_token(authorization: Option<&str>) -> Option<&str> {
    let value = authorization?.trim_start();
    let token = match value.get(..7) {
        Some(prefix) if prefix.eq_ignore_ascii_case("bearer ") => value.get(7..)?.trim(),
        _ => value.trim(),
    };
    (!token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_header_shapes() {
        assert_eq!(http_bearer_token(None), Ok(None));
        assert_eq!(http_bearer_token(Some("")), Ok(None));
        assert_eq!(http_bearer_token(Some("Bearer abc")), Ok(Some("abc")));
        assert_eq!(http_bearer_token(Some("bearer   abc ")), Ok(Some("abc")));
        assert_eq!(http_bearer_token(Some("BEARER abc")), Ok(Some("abc")));
        for bad in ["Bearer", "abc", "Basic abc", "Bearer a b", "  "] {
            assert_eq!(
                http_bearer_token(Some(bad)),
                Err(AuthError::MalformedHeader),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn grpc_metadata_shapes() {
        assert_eq!(grpc_bearer_token(None), None);
        assert_eq!(grpc_bearer_token(Some("")), None);
        assert_eq!(grpc_bearer_token(Some("Bearer ")), None);
        assert_eq!(grpc_bearer_token(Some("Bearer abc")), Some("abc"));
        assert_eq!(grpc_bearer_token(Some("bEaReR abc")), Some("abc"));
        assert_eq!(grpc_bearer_token(Some("abc")), Some("abc"));
        assert_eq!(grpc_bearer_token(Some("  abc  ")), Some("abc"));
        // Multi-byte input near the prefix boundary must not panic.
        assert_eq!(grpc_bearer_token(Some("béarer x")), Some("béarer x"));
    }

    #[test]
    fn header_checks_come_before_keys() {
        let enc = |json: &str| format!("{}.e30.c2ln", URL_SAFE_NO_PAD.encode(json));
        let reason = |t: &str| match check_header(t) {
            Err(AuthError::InvalidToken(r)) => Some(r),
            _ => None,
        };
        assert_eq!(
            reason(&enc(r#"{"alg":"none"}"#)),
            Some(TokenRejection::Algorithm("none".into()))
        );
        assert_eq!(
            reason(&enc(r#"{"alg":"HS256","kid":"k"}"#)),
            Some(TokenRejection::Algorithm("HS256".into()))
        );
        assert_eq!(
            reason(&enc(r#"{"kid":"k"}"#)),
            Some(TokenRejection::Algorithm(String::new()))
        );
        assert_eq!(
            reason(&enc(r#"{"alg":"RS256"}"#)),
            Some(TokenRejection::MissingKid)
        );
        assert_eq!(
            reason(&enc(r#"{"alg":"RS256","kid":"k","crit":["b64"]}"#)),
            Some(TokenRejection::CriticalHeader)
        );
        assert!(check_header(&enc(r#"{"alg":"RS256","kid":"k"}"#)).is_ok());
        for bad in [
            "",
            "a.b",
            "a.b.c.d",
            "!!.e30.x",
            "e30",
            &"a".repeat(MAX_TOKEN_BYTES + 1),
        ] {
            assert_eq!(reason(bad), Some(TokenRejection::Malformed), "{bad:.20}");
        }
    }
}
