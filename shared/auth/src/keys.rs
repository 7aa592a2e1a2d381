//! [`KeySet`]: the RS256 verification keys of a JWKS document, by `kid`.
//!
//! Where the JSON comes from is the caller's business: the JWKS URL fetched at cold start
//! (through [`crate::JwksCache`]), a local file, or the development signer.

use crate::error::{AuthError, Result};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use jsonwebtoken::DecodingKey;
use serde::Deserialize;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::fmt;

/// Smallest RSA modulus accepted, in bytes (2048 bits).
pub const MIN_RSA_MODULUS_BYTES: usize = 256;

/// RS256 verification keys by `kid`.
#[derive(Clone, Default)]
pub struct KeySet {
    keys: HashMap<String, DecodingKey>,
    skipped: usize,
}

impl fmt::Debug for KeySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut kids: Vec<&str> = self.kids().collect();
        kids.sort_unstable();
        f.debug_struct("KeySet")
            .field("kids", &kids)
            .field("skipped", &self.skipped)
            .finish()
    }
}

#[derive(Deserialize)]
struct JwksDocument {
    #[serde(default)]
    keys: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct RsaJwk {
    kty: String,
    #[serde(default)]
    kid: Option<String>,
    #[serde(default, rename = "use")]
    use_: Option<String>,
    #[serde(default)]
    alg: Option<String>,
    #[serde(default)]
    n: Option<String>,
    #[serde(default)]
    e: Option<String>,
}

impl KeySet {
    /// An empty set (every token is then rejected with an unknown `kid`).
    pub fn empty() -> KeySet {
        KeySet::default()
    }

    /// Parses a JWKS document (`{"keys": [...]}`), keeping the RSA keys usable for RS256
    /// signatures: `kty` `RSA`, a non-empty `kid`, `use` absent or `sig`, `alg` absent or
    /// `RS256`, and a modulus of at least 2048 bits. Other entries are skipped (logged), and a
    /// duplicate `kid` keeps its first key.
    ///
    /// # Errors
    /// [`AuthError::KeysUnavailable`] when the JSON is not a JWKS document or no entry is usable.
    pub fn from_jwks_json(json: &[u8]) -> Result<KeySet> {
        let doc: JwksDocument = serde_json::from_slice(json)
            .map_err(|e| AuthError::KeysUnavailable(format!("jwks is not valid json: {e}")))?;
        let mut set = KeySet::default();
        for (index, entry) in doc.keys.into_iter().enumerate() {
            match usable_key(entry) {
                Ok((kid, key)) => match set.keys.entry(kid) {
                    Entry::Occupied(taken) => {
                        tracing::warn!(kid = %taken.key(), "jwks: duplicate kid, keeping the first key");
                        set.skipped += 1;
                    }
                    Entry::Vacant(slot) => {
                        slot.insert(key);
                    }
                },
                Err(reason) => {
                    tracing::debug!(index, reason, "jwks: skipping key");
                    set.skipped += 1;
                }
            }
        }
        if set.keys.is_empty() {
            return Err(AuthError::KeysUnavailable(
                "jwks holds no usable RS256 key".into(),
            ));
        }
        Ok(set)
    }

    /// The key for `kid`.
    pub fn get(&self, kid: &str) -> Option<&DecodingKey> {
        self.keys.get(kid)
    }

    /// True when `kid` is present.
    pub fn contains(&self, kid: &str) -> bool {
        self.keys.contains_key(kid)
    }

    /// The key ids (unordered).
    pub fn kids(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(String::as_str)
    }

    /// Number of usable keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when there is no usable key.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Number of JWKS entries that were skipped.
    pub fn skipped(&self) -> usize {
        self.skipped
    }
}

fn b64url(s: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(s.trim_end_matches('=')).ok()
}

fn usable_key(
    entry: serde_json::Value,
) -> std::result::Result<(String, DecodingKey), &'static str> {
    let jwk: RsaJwk = serde_json::from_value(entry).map_err(|_| "not a jwk object")?;
    if jwk.kty != "RSA" {
        return Err("kty is not RSA");
    }
    let kid = jwk.kid.filter(|k| !k.is_empty()).ok_or("no kid")?;
    if jwk.use_.as_deref().is_some_and(|u| u != "sig") {
        return Err("use is not sig");
    }
    if jwk.alg.as_deref().is_some_and(|a| a != "RS256") {
        return Err("alg is not RS256");
    }
    let n = jwk.n.as_deref().and_then(b64url).ok_or("bad n")?;
    let e = jwk.e.as_deref().and_then(b64url).ok_or("bad e")?;
    let significant = n.iter().skip_while(|b| **b == 0).count();
    if significant < MIN_RSA_MODULUS_BYTES {
        return Err("modulus shorter than 2048 bits");
    }
    if e.is_empty() {
        return Err("empty exponent");
    }
    Ok((kid, DecodingKey::from_rsa_raw_components(&n, &e)))
}
