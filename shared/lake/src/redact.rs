//! Removes credentials from text before it reaches an error or a log line.
//!
//! DuckDB echoes ATTACH targets and connection strings in its error messages, so every message
//! produced by this crate passes through [`Redactor::redact`]. Two layers: the exact secret values
//! the process was configured with, and the *shapes* that carry a password (libpq `password=…`,
//! URL userinfo `user:pass@`) so a secret we were never told about is caught as well.

use std::sync::{Arc, PoisonError, RwLock};

/// The placeholder that replaces a secret.
pub const MASK: &str = "***";

/// Knows the configured secret values and masks them, plus any DSN password, in text. Clones
/// share one list: a password learned when the lake is reopened after a credential rotation is
/// masked by every holder of the lake's redactor.
#[derive(Clone, Default)]
pub struct Redactor {
    secrets: Arc<RwLock<Vec<String>>>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} secrets)", self.read().len())
    }
}

impl Redactor {
    /// A redactor that masks the given values (empty ones are ignored).
    pub fn new<I, S>(secrets: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut secrets: Vec<String> = secrets
            .into_iter()
            .map(Into::into)
            .filter(|s| !s.is_empty())
            .collect();
        // Longest first, so a secret that contains another is masked whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        Self {
            secrets: Arc::new(RwLock::new(secrets)),
        }
    }

    /// Adds one more secret value (seen by every clone).
    pub fn add(&self, secret: impl Into<String>) {
        let secret = secret.into();
        let mut secrets = self.secrets.write().unwrap_or_else(PoisonError::into_inner);
        if !secret.is_empty() && !secrets.contains(&secret) {
            secrets.push(secret);
            secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<String>> {
        self.secrets.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Returns `text` with every known secret and every DSN password masked.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in self.read().iter() {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), MASK);
            }
        }
        mask_url_passwords(&mask_keyword_passwords(&out))
    }
}

/// Masks libpq keyword values `password=…` (bare or single-quoted, any case).
fn mask_keyword_passwords(text: &str) -> String {
    const KEY: &str = "password=";
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    while let Some(found) = lower[pos..].find(KEY) {
        let value_start = pos + found + KEY.len();
        out.push_str(&text[pos..value_start]);
        let rest = &text[value_start..];
        let value_len = if let Some(quoted) = rest.strip_prefix('\'') {
            // libpq quoting: backslash escapes, a closing quote ends the value.
            let mut escaped = false;
            let mut end = quoted.len();
            for (i, c) in quoted.char_indices() {
                match (escaped, c) {
                    (true, _) => escaped = false,
                    (false, '\\') => escaped = true,
                    (false, '\'') => {
                        end = i + 1;
                        break;
                    }
                    _ => {}
                }
            }
            1 + end
        } else {
            rest.find(|c: char| c.is_whitespace() || c == '\'' || c == '"' || c == '&' || c == ')')
                .unwrap_or(rest.len())
        };
        if value_len > 0 {
            out.push_str(MASK);
        }
        pos = value_start + value_len;
    }
    out.push_str(&text[pos..]);
    out
}

/// Masks the password in URL userinfo: `scheme://user:password@host` → `scheme://user:***@host`.
fn mask_url_passwords(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    while let Some(found) = text[pos..].find("://") {
        let auth_start = pos + found + 3;
        out.push_str(&text[pos..auth_start]);
        let rest = &text[auth_start..];
        let authority_end = rest
            .find(|c: char| {
                c == '/' || c == '?' || c == '#' || c.is_whitespace() || c == '\'' || c == '"'
            })
            .unwrap_or(rest.len());
        let authority = &rest[..authority_end];
        match (authority.rfind('@'), authority.find(':')) {
            (Some(at), Some(colon)) if colon < at => {
                out.push_str(&authority[..=colon]);
                out.push_str(MASK);
                out.push_str(&authority[at..]);
            }
            _ => out.push_str(authority),
        }
        pos = auth_start + authority_end;
    }
    out.push_str(&text[pos..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_configured_secrets() {
        let r = Redactor::new(["s3cr3t", ""]);
        assert_eq!(r.redact("key s3cr3t and s3cr3t"), "key *** and ***");
    }

    #[test]
    fn clones_share_secrets_added_later() {
        let r = Redactor::default();
        let clone = r.clone();
        r.add("rotated-pw");
        assert_eq!(clone.redact("auth rotated-pw"), "auth ***");
    }

    #[test]
    fn masks_keyword_dsn_passwords() {
        let r = Redactor::default();
        assert_eq!(
            r.redact("host=h password=hunter2 dbname=x"),
            "host=h password=*** dbname=x"
        );
        assert_eq!(r.redact("PASSWORD='a b\\'c' port=1"), "PASSWORD=*** port=1");
        assert_eq!(r.redact("user=u password="), "user=u password=");
        assert_eq!(
            r.redact("ATTACH 'ducklake:postgres:host=h password=pw' AS lake"),
            "ATTACH 'ducklake:postgres:host=h password=***' AS lake"
        );
    }

    #[test]
    fn masks_url_userinfo_passwords() {
        let r = Redactor::default();
        assert_eq!(
            r.redact("postgresql://dq:pa:ss@127.0.0.1:5432/dq?sslmode=disable"),
            "postgresql://dq:***@127.0.0.1:5432/dq?sslmode=disable"
        );
        assert_eq!(r.redact("s3://bucket/path"), "s3://bucket/path");
        assert_eq!(r.redact("http://user@host/"), "http://user@host/");
    }
}
