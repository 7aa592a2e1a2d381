//! Lease settings: named environment keys, read once into [`LeaseConfig`].
//!
//! [`MATERIALIZER_LEASE_TABLE`] selects the backend: set, the lease is a DynamoDB item; unset,
//! it is a lock file next to the catalog (the same binary runs without AWS).

use std::time::Duration;

use dq_config::{parse_seconds_or_go_duration, Settings};

use crate::{LeaseError, Result};

/// DynamoDB table holding the lease item; unset selects the local lock-file lease.
pub const MATERIALIZER_LEASE_TABLE: &str = "MATERIALIZER_LEASE_TABLE";
/// The lease's partition key value; defaults to [`DEFAULT_LEASE_ID`]. One per catalog.
pub const MATERIALIZER_LEASE_ID: &str = "MATERIALIZER_LEASE_ID";
/// Lease time-to-live: whole seconds or a Go duration (`120`, `120s`, `2m`, `1m30s`); defaults to [`DEFAULT_TTL`], at least [`MIN_TTL`].
pub const MATERIALIZER_LEASE_TTL: &str = "MATERIALIZER_LEASE_TTL";
/// How long a maintenance action waits for a held lease, asking its holder to yield, before it
/// gives up with [`crate::LeaseError::WaitExpired`]: a Go duration (`90s`, `5m`, `1m30s`);
/// defaults to 0 (no wait: a held lease is refused at once), at most [`MAX_WAIT`].
pub const MATERIALIZER_LEASE_WAIT: &str = "MATERIALIZER_LEASE_WAIT";
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
/// The longest accepted [`MATERIALIZER_LEASE_WAIT`]: a Lambda runs for at most 15 minutes.
pub const MAX_WAIT: Duration = Duration::from_secs(15 * 60);
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
    /// How long [`crate::Lease::acquire_waiting`] waits for a held lease (zero: not at all).
    pub wait: Duration,
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
            wait: Duration::ZERO,
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
            .field("wait", &self.wait)
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
        Self::from_lookup(dq_config::env_lookup)
    }

    /// Reads the settings through `get` (the environment in production, a map in tests). Blank
    /// values count as unset; every malformed key is reported at once.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let mut settings = Settings::new(get);
        let table = settings.get(MATERIALIZER_LEASE_TABLE);
        if let Some(table) = &table {
            if !valid_table_name(table) {
                settings.problem(format!(
                    "{MATERIALIZER_LEASE_TABLE} must be 3 to 255 letters, digits, `_`, `-` or `.`"
                ));
            }
        }
        let ttl = match settings.get(MATERIALIZER_LEASE_TTL) {
            None => DEFAULT_TTL,
            Some(text) => match parse_seconds_or_go_duration(&text) {
                Ok(ttl) if (MIN_TTL..=MAX_TTL).contains(&ttl) => ttl,
                _ => {
                    settings.problem(format!(
                        "{MATERIALIZER_LEASE_TTL} must be whole seconds or a Go duration (120, \
                         2m, 1m30s), between {}s and {}s",
                        MIN_TTL.as_secs(),
                        MAX_TTL.as_secs()
                    ));
                    DEFAULT_TTL
                }
            },
        };
        let wait = match settings.get(MATERIALIZER_LEASE_WAIT) {
            None => Duration::ZERO,
            Some(text) => match parse_seconds_or_go_duration(&text) {
                Ok(wait) if wait <= MAX_WAIT => wait,
                _ => {
                    settings.problem(format!(
                        "{MATERIALIZER_LEASE_WAIT} must be a duration like 90s, 5m or 1m30s, at \
                         most {}s",
                        MAX_WAIT.as_secs()
                    ));
                    Duration::ZERO
                }
            },
        };
        let lease_id = settings
            .get(MATERIALIZER_LEASE_ID)
            .unwrap_or_else(|| DEFAULT_LEASE_ID.to_owned());
        let endpoint = settings
            .get(DYNAMODB_ENDPOINT)
            .or_else(|| settings.get(AWS_ENDPOINT_URL));
        let region = settings
            .get(AWS_REGION)
            .unwrap_or_else(|| DEFAULT_REGION.to_owned());
        settings.check().map_err(LeaseError::Config)?;
        Ok(LeaseConfig {
            table,
            lease_id,
            ttl,
            wait,
            endpoint,
            region,
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

#[cfg(test)]
mod tests {
    use super::*;

    use dq_config::pairs_lookup as lookup;

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

    /// The TTL and the wait take whole seconds or a Go duration (the toolkit's parser).
    #[test]
    fn parses_durations() {
        let ttl = |v: &str| LeaseConfig::from_lookup(lookup(&[(MATERIALIZER_LEASE_TTL, v)]));
        let wait = |v: &str| LeaseConfig::from_lookup(lookup(&[(MATERIALIZER_LEASE_WAIT, v)]));
        assert_eq!(ttl("120").unwrap().ttl, Duration::from_secs(120));
        assert_eq!(ttl("120s").unwrap().ttl, Duration::from_secs(120));
        assert_eq!(ttl("2m").unwrap().ttl, Duration::from_secs(120));
        assert_eq!(ttl("1h").unwrap().ttl, Duration::from_secs(3600));
        assert_eq!(ttl("1m30s").unwrap().ttl, Duration::from_secs(90));
        // Go fractions, as every other duration setting reads them.
        assert_eq!(ttl("1.5m").unwrap().ttl, Duration::from_secs(90));
        assert_eq!(wait("1500ms").unwrap().wait, Duration::from_millis(1500));
        assert_eq!(wait("0").unwrap().wait, Duration::ZERO);
        for bad in ["s", "-3", "2d", "ten", "5s3", "m5"] {
            assert!(ttl(bad).is_err(), "{bad}");
            assert!(wait(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn reads_the_wait() {
        let cfg = LeaseConfig::from_lookup(lookup(&[(MATERIALIZER_LEASE_WAIT, "5m")])).unwrap();
        assert_eq!(cfg.wait, Duration::from_secs(300));
        let err = LeaseConfig::from_lookup(lookup(&[(MATERIALIZER_LEASE_WAIT, "1h")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains(MATERIALIZER_LEASE_WAIT), "{err}");
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
