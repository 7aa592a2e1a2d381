//! Development signer (cargo feature `dev`): a runtime RSA-2048 key, its JWKS, and tokens with
//! chosen claims, for local demos and tests. Production builds do not compile this module, so
//! they cannot mint.
//!
//! Keys are generated with aws-lc-rs (already in the dependency tree through rustls and
//! jsonwebtoken); tokens are RS256 compact JWS, verified by the same [`TokenValidator`] as
//! production tokens.

use crate::error::{AuthError, Result};
use crate::keys::KeySet;
use crate::permission::Permission;
use crate::validate::{KeySource, TokenValidator, ValidationConfig, REQUIRED_AUDIENCE};
use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::{KeySize, PublicKeyComponents};
use aws_lc_rs::signature::{KeyPair as _, RsaKeyPair, RSA_PKCS1_SHA256};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{json, Value};
use std::fmt;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch, now.
pub fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// An RSA signing key with its JWKS, for development only.
pub struct DevSigner {
    key_pair: RsaKeyPair,
    kid: String,
    issuer: String,
    n: String,
    e: String,
}

impl fmt::Debug for DevSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DevSigner")
            .field("kid", &self.kid)
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

/// The claims of a development token.
#[derive(Debug, Clone, PartialEq)]
pub struct DevClaims {
    /// `sub`.
    pub subject: Option<String>,
    /// `asset`.
    pub asset: Option<String>,
    /// `permissions` (strings, so tests can also send unknown ones).
    pub permissions: Vec<String>,
    /// `aud` (an array).
    pub audience: Vec<String>,
    /// `iss`; `None` uses the signer's issuer.
    pub issuer: Option<String>,
    /// `exp`, seconds since the epoch.
    pub expires_at: i64,
    /// `nbf`, if any.
    pub not_before: Option<i64>,
    /// `cloud_events`, if any.
    pub cloud_events: Option<Value>,
}

impl DevClaims {
    /// A vehicle token for `asset` with `permissions`, valid for an hour, audience `dimo.zone`,
    /// `sub` a fixed developer license.
    pub fn vehicle(asset: impl Into<String>, permissions: &[Permission]) -> DevClaims {
        DevClaims {
            subject: Some("0xdevlicense000000000000000000000000000000".into()),
            asset: Some(asset.into()),
            permissions: permissions.iter().map(|p| p.as_str().to_string()).collect(),
            audience: vec![REQUIRED_AUDIENCE.into()],
            issuer: None,
            expires_at: now_secs() + 3600,
            not_before: None,
            cloud_events: None,
        }
    }

    /// The demo's token for `asset`: every permission and a grant to every cloud event (any type,
    /// source and id), so each documented query of every dialect answers with data — the
    /// telemetry dialect's `attestations` and the cloud-event roots check these grants. Valid
    /// for a day.
    pub fn demo(asset: impl Into<String>) -> DevClaims {
        let mut claims = DevClaims::vehicle(asset, &Permission::ALL);
        claims.cloud_events = Some(json!({"events": [
            {"event_type": "*", "source": "*", "ids": ["*"], "tags": []}
        ]}));
        claims.expires_at = now_secs() + 24 * 3600;
        claims
    }

    /// The claims as JSON, with `iss` defaulting to `issuer`.
    pub fn to_json(&self, issuer: &str) -> Value {
        let mut v = json!({
            "iss": self.issuer.as_deref().unwrap_or(issuer),
            "aud": self.audience,
            "exp": self.expires_at,
            "iat": now_secs(),
            "permissions": self.permissions,
        });
        if let Some(obj) = v.as_object_mut() {
            if let Some(s) = &self.subject {
                obj.insert("sub".into(), json!(s));
            }
            if let Some(a) = &self.asset {
                obj.insert("asset".into(), json!(a));
            }
            if let Some(nbf) = self.not_before {
                obj.insert("nbf".into(), json!(nbf));
            }
            if let Some(ce) = &self.cloud_events {
                obj.insert("cloud_events".into(), ce.clone());
            }
        }
        v
    }
}

impl DevSigner {
    /// Generates a fresh RSA-2048 key for tokens issued by `issuer`.
    ///
    /// # Errors
    /// [`AuthError::Internal`] inside Lambda (`AWS_LAMBDA_FUNCTION_NAME` set: a build that
    /// enabled `dev` by mistake still cannot mint there), or if key generation fails.
    pub fn generate(issuer: impl Into<String>) -> Result<DevSigner> {
        refuse_in_lambda(std::env::var_os(crate::config::AWS_LAMBDA_FUNCTION_NAME).is_some())?;
        let key_pair = RsaKeyPair::generate(KeySize::Rsa2048)
            .map_err(|_| AuthError::Internal("rsa key generation failed".into()))?;
        let components = PublicKeyComponents::<Vec<u8>>::from(key_pair.public_key());
        let n = URL_SAFE_NO_PAD.encode(&components.n);
        let e = URL_SAFE_NO_PAD.encode(&components.e);
        // RFC 7638 thumbprint as kid.
        let canonical = format!(r#"{{"e":"{e}","kty":"RSA","n":"{n}"}}"#);
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, canonical.as_bytes());
        let kid = URL_SAFE_NO_PAD.encode(digest.as_ref());
        Ok(DevSigner {
            key_pair,
            kid,
            issuer: issuer.into(),
            n,
            e,
        })
    }

    /// The key id in the header of every token.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The issuer tokens carry by default.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The JWKS document (`{"keys":[...]}`) to serve or write to a file.
    pub fn jwks_json(&self) -> String {
        json!({"keys": [{
            "kty": "RSA", "use": "sig", "alg": "RS256",
            "kid": self.kid, "n": self.n, "e": self.e,
        }]})
        .to_string()
    }

    /// The public key as a [`KeySet`].
    ///
    /// # Errors
    /// Never in practice (the JWKS is well formed).
    pub fn key_set(&self) -> Result<KeySet> {
        KeySet::from_jwks_json(self.jwks_json().as_bytes())
    }

    /// A validator that accepts this signer's tokens under the production rules.
    ///
    /// # Errors
    /// As [`DevSigner::key_set`].
    pub fn validator(&self) -> Result<TokenValidator> {
        Ok(TokenValidator::new(
            ValidationConfig::new(self.issuer.clone()),
            KeySource::Static(Arc::new(self.key_set()?)),
        ))
    }

    /// The public key as DER SubjectPublicKeyInfo (what an alg-confusion attacker would use as
    /// an HMAC secret).
    ///
    /// # Errors
    /// [`AuthError::Internal`] if serialization fails.
    pub fn public_key_der(&self) -> Result<Vec<u8>> {
        self.key_pair
            .public_key()
            .as_der()
            .map(|d| d.as_ref().to_vec())
            .map_err(|_| AuthError::Internal("public key serialization failed".into()))
    }

    /// Mints an RS256 token with `claims`.
    ///
    /// # Errors
    /// [`AuthError::Internal`] if signing fails.
    pub fn mint(&self, claims: &DevClaims) -> Result<String> {
        self.sign_json(
            &json!({"alg": "RS256", "typ": "JWT", "kid": self.kid}),
            &claims.to_json(&self.issuer),
        )
    }

    /// Signs arbitrary header and claims JSON with RS256 (the header is used as given, so
    /// tests can lie about `alg` or `kid`).
    ///
    /// # Errors
    /// [`AuthError::Internal`] if signing fails.
    pub fn sign_json(&self, header: &Value, claims: &Value) -> Result<String> {
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let mut signature = vec![0u8; self.key_pair.public_modulus_len()];
        self.key_pair
            .sign(
                &RSA_PKCS1_SHA256,
                &SystemRandom::new(),
                signing_input.as_bytes(),
                &mut signature,
            )
            .map_err(|_| AuthError::Internal("rsa signing failed".into()))?;
        Ok(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature)
        ))
    }
}

/// Second line of defence behind the cargo feature: never mint inside Lambda.
fn refuse_in_lambda(in_lambda: bool) -> Result<()> {
    if in_lambda {
        Err(AuthError::Internal(
            "the development signer is refused inside Lambda".into(),
        ))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_inside_lambda() {
        assert!(refuse_in_lambda(true).is_err());
        assert!(refuse_in_lambda(false).is_ok());
    }

    #[test]
    fn jwks_round_trips_and_kid_is_a_thumbprint() {
        let signer = DevSigner::generate("https://issuer.example").unwrap();
        let keys = signer.key_set().unwrap();
        assert_eq!(keys.kids().collect::<Vec<_>>(), [signer.kid()]);
        assert_eq!(signer.kid().len(), 43, "base64url of a sha-256 digest");
        let token = signer
            .mint(&DevClaims::vehicle("did:x", &[Permission::GetRawData]))
            .unwrap();
        assert!(signer
            .validator()
            .unwrap()
            .validate_sync(&token, &keys)
            .is_ok());
    }
}
