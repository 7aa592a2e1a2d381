//! Lease settings: named environment keys, read once into [`LeaseConfig`].
//!
//! [`MATERIALIZER_LEASE_TABLE`] selects the backend: set, the lease is a DynamoDB item; unset,
//! it is a lock file next to the catalog (the same binary runs without AWS).

use std::time::Duration;

use crate::{LeaseError, Result};

/// DynamoDB table holding the lease item; unset selects the local lock-file lease.
pub const MATERIALIZER_LEASE_TABLE: &str = "MATERIALIZER_LEASE_TABLE";
/// The lease's partition key value; defaults to [`DEFAULT_LEASE_ID`]. One per catalog.
pub const MATERIALIZER_LEASE_ID: &str = "MATERIALIZER_LEASE_ID";
/// Lease time-to-live: whole seconds with an optional `s`, `m` or `h` suffix (`120`, `120s`,
/// `2m`); defaults to [`DEFAULT_TTL`], at least [`MIN_TTL`].
pub const MATERIALIZER_LEASE_TTL: &str = "MATERIALIZER_LEASE_TTL";
/// DynamoDB endpoint override for local emulators (moto, DynamoDB Local); takes precedence over
/// [`AWS_ENDPOINT_URL`].
pub const DYNAMODB_ENDPOINT: &str = "DYNAMODB_ENDPOINT";
/// Endpoint override shared by every AWS service, used when [`DYNAMODB_ENDPOINT`] is unset.
pub const AWS_ENDPOINT_URL: &str = "AWS_ENDPOINT_URL";
/// AWS region of the lease table; defaults to [`DEFAULT_REGION`].
pub const AWS_REGION: &str = "AWS_REGION";

/// The lease id when [`MATERIALIZER_LEASE_ID`] is unset.
pub const DEFAULT_LEASE_ID: &str = "dq-materializer";
/// The TTL when [`MATERIALIZER_LEASE_TTL`] is unset.
pub const DEFAULT_TTL: Duration = Duration::from_secs(120);
/// The shortest accepted TTL: twice [`crate::DEFAULT_CHECK_MARGIN`], so a fresh lease passes
/// [`crate::Lease::check`] for at least as long as the margin.
pub const MIN_TTL: Duration = Duration::from_secs(20);
/// The longest accepted TTL; longer would leave a crashed holder's lease blocking for hours.
pub const MAX_TTL: Duration = Duration::from_secs(12 * 3600);
/// The region when [`AWS_REGION`] is unset.
pub const DEFAULT_REGION: &str = "us-east-1";

/// Lease settings ("what was given"; [`crate::Lease::from_config`] builds the handle).
#[derive(Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    /// DynamoDB table; `None` selects the local lock-file lease.
    pub table: Option<String>,
    /// The lease item's key.
    pub lease_id: String,
    /// How long an acquisition or renewal lasts.
    pub ttl: Duration,
    /// DynamoDB endpoint override (`http://127.0.0.1:5000`).
    pub endpoint: Option<String>,
    /// AWS region.
    pub region: String,
    /// Static access key id; `None` uses the AWS credential chain (production, and local stacks
    /// that export `AWS_ACCESS_KEY_ID`). Not read from the environment by this crate.
    pub access_key_id: Option<String>,
    /// Static secret key (sensitive), used with [`LeaseConfig::access_key_id`].
    pub secret_access_key: Option<String>,
}

impl Default for LeaseConfig {
    /// The local lease with default id and TTL.
    fn default() -> Self {
        LeaseConfig {
            table: None,
            lease_id: DEFAULT_LEASE_ID.to_owned(),
            ttl: DEFAULT_TTL,
            endpoint: None,
            region: DEFAULT_REGION.to_owned(),
            access_key_id: None,
            secret_access_key: None,
        }
    }
}

impl std::fmt::Debug for LeaseConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseConfig")
            .field("table", &self.table)
            .field("lease_id", &self.lease_id)
            .field("ttl", &self.ttl)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field(
                "secret_access_key",
                &self.secret_access_key.as_ref().map(|_| "***"),
            )
            .finish()
    }
}

impl LeaseConfig {
    /// Reads the settings from the process environment.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    /// Reads the settings through `get` (the environment in production, a map in tests). Blank
    /// values count as unset; every malformed key is reported at once.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let get = |key: &str| {
            get(key)
                .map(|value| value.trim().to_owned())
                .filter(|value| !value.is_empty())
        };
        let mut problems = Vec::new();
        let table = get(MATERIALIZER_LEASE_TABLE);
        if let Some(table) = &table {
            if !valid_table_name(table) {
                problems.push(format!(
                    "{MATERIALIZER_LEASE_TABLE} must be 3 to 255 letters, digits, `_`, `-` or `.`"
                ));
            }
        }
        let ttl = match get(MATERIALIZER_LEASE_TTL) {
            None => DEFAULT_TTL,
            Some(text) => match parse_ttl(&text) {
                Some(ttl) if (MIN_TTL..=MAX_TTL).contains(&ttl) => ttl,
                _ => {
                    problems.push(format!(
                        "{MATERIALIZER_LEASE_TTL} must be whole seconds with an optional s, m or h \
                         suffix, between {}s and {}s",
                        MIN_TTL.as_secs(),
                        MAX_TTL.as_secs()
                    ));
                    DEFAULT_TTL
                }
            },
        };
        if !problems.is_empty() {
            return Err(LeaseError::Config(problems.join("; ")));
        }
        Ok(LeaseConfig {
            table,
            lease_id: get(MATERIALIZER_LEASE_ID).unwrap_or_else(|| DEFAULT_LEASE_ID.to_owned()),
            ttl,
            endpoint: get(DYNAMODB_ENDPOINT).or_else(|| get(AWS_ENDPOINT_URL)),
            region: get(AWS_REGION).unwrap_or_else(|| DEFAULT_REGION.to_owned()),
            access_key_id: None,
            secret_access_key: None,
        })
    }

    /// True when the lease lives in DynamoDB.
    pub fn is_dynamo(&self) -> bool {
        self.table.is_some()
    }
}

/// DynamoDB's table-name rule.
pub(crate) fn valid_table_name(name: &str) -> bool {
    (3..=255).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// `120`, `120s`, `2m`, `1h` → a duration; anything else → `None`.
fn parse_ttl(text: &str) -> Option<Duration> {
    let (digits, unit) = match text.strip_suffix(['s', 'm', 'h']) {
        Some(digits) => (digits, &text[digits.len()..]),
        None => (text, "s"),
    };
    let amount: u64 = digits.trim().parse().ok()?;
    let per_unit = match unit {
        "m" => 60,
        "h" => 3600,
        _ => 1,
    };
    amount.checked_mul(per_unit).map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn unset_table_selects_the_local_lease_with_defaults() {
        let cfg = LeaseConfig::from_lookup(lookup(&[(MATERIALIZER_LEASE_TABLE, "  ")])).unwrap();
        assert_eq!(cfg, LeaseConfig::default());
        assert!(!cfg.is_dynamo());
        assert_eq!(cfg.ttl, Duration::from_secs(120));
        assert_eq!(cfg.region, "us-east-1");
    }

    #[test]
    fn reads_every_key() {
        let cfg = LeaseConfig::from_lookup(lookup(&[
            (MATERIALIZER_LEASE_TABLE, "dq-leases"),
            (MATERIALIZER_LEASE_ID, "catalog-a"),
            (MATERIALIZER_LEASE_TTL, "3m"),
            (DYNAMODB_ENDPOINT, "http://127.0.0.1:5000"),
            (AWS_ENDPOINT_URL, "http://ignored:1"),
            (AWS_REGION, "eu-west-1"),
        ]))
        .unwrap();
        assert_eq!(cfg.table.as_deref(), Some("dq-leases"));
        assert_eq!(cfg.lease_id, "catalog-a");
        assert_eq!(cfg.ttl, Duration::from_secs(180));
        assert_eq!(cfg.endpoint.as_deref(), Some("http://127.0.0.1:5000"));
        assert_eq!(cfg.region, "eu-west-1");
    }

    #[test]
    fn falls_back_to_the_shared_endpoint() {
        let cfg =
            LeaseConfig::from_lookup(lookup(&[(AWS_ENDPOINT_URL, "http://moto:5000")])).unwrap();
        assert_eq!(cfg.endpoint.as_deref(), Some("http://moto:5000"));
    }

    #[test]
    fn reports_every_problem_at_once() {
        let err = LeaseConfig::from_lookup(lookup(&[
            (MATERIALIZER_LEASE_TABLE, "no spaces allowed"),
            (MATERIALIZER_LEASE_TTL, "5s"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(err.contains(MATERIALIZER_LEASE_TABLE), "{err}");
        assert!(err.contains(MATERIALIZER_LEASE_TTL), "{err}");
    }

    #[test]
    fn parses_ttls() {
        assert_eq!(parse_ttl("120"), Some(Duration::from_secs(120)));
        assert_eq!(parse_ttl("120s"), Some(Duration::from_secs(120)));
        assert_eq!(parse_ttl("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_ttl("1h"), Some(Duration::from_secs(3600)));
        for bad in ["", "s", "1.5m", "-3", "2d", "ten"] {
            assert_eq!(parse_ttl(bad), None, "{bad}");
        }
    }

    #[test]
    fn debug_hides_the_secret() {
        let cfg = LeaseConfig {
            secret_access_key: Some("hunter2".into()),
            ..LeaseConfig::default()
        };
        assert!(!format!("{cfg:?}").contains("hunter2"));
    }
}
