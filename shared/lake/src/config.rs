//! Lake settings: named environment keys (the Go system's names), read once into [`LakeConfig`].

use std::path::PathBuf;

use crate::catalog::Catalog;
use crate::{Error, Result};

/// Catalog DSN: a file path (optionally `ducklake:<path>`) or a PostgreSQL DSN.
pub const DUCKLAKE_CATALOG_DSN: &str = "DUCKLAKE_CATALOG_DSN";
/// Data path: an absolute local directory or `s3://bucket/prefix/`. Fixed once the catalog exists.
pub const DUCKLAKE_DATA_PATH: &str = "DUCKLAKE_DATA_PATH";
/// Attach read-only (query side).
pub const DUCKLAKE_READ_ONLY: &str = "DUCKLAKE_READ_ONLY";
/// Attach with `ENCRYPTED`; must match how the catalog was created.
pub const LAKE_ENCRYPTION_ENABLED: &str = "LAKE_ENCRYPTION_ENABLED";
/// DuckDB `memory_limit`, e.g. `1GB`.
pub const DUCKDB_MEMORY_LIMIT: &str = "DUCKDB_MEMORY_LIMIT";
/// DuckDB `threads` (0 or unset = DuckDB's default).
pub const DUCKDB_THREADS: &str = "DUCKDB_THREADS";
/// DuckDB `temp_directory` for spills.
pub const DUCKDB_TEMP_DIRECTORY: &str = "DUCKDB_TEMP_DIRECTORY";
/// Directory holding `v1.5.4/<platform>/<name>.duckdb_extension` (filled by `make extensions`).
pub const DUCKDB_EXTENSION_DIR: &str = "DUCKDB_EXTENSION_DIR";
/// S3 region for the data path.
pub const S3_AWS_REGION: &str = "S3_AWS_REGION";
/// Static S3 access key id; unset = the AWS credential chain.
pub const S3_AWS_ACCESS_KEY_ID: &str = "S3_AWS_ACCESS_KEY_ID";
/// Static S3 secret key (sensitive).
pub const S3_AWS_SECRET_ACCESS_KEY: &str = "S3_AWS_SECRET_ACCESS_KEY";
/// S3 endpoint override (`http://host:port` → path style, no TLS).
pub const S3_ENDPOINT: &str = "S3_ENDPOINT";
/// DuckDB-only S3 endpoint override, preferred over [`S3_ENDPOINT`] for the data path.
pub const DUCKDB_S3_ENDPOINT: &str = "DUCKDB_S3_ENDPOINT";
/// KMS key ARN for SSE-KMS on parquet PUTs.
pub const S3_KMS_KEY_ID: &str = "S3_KMS_KEY_ID";

/// The extension directory used when [`DUCKDB_EXTENSION_DIR`] is unset (what `make extensions`
/// fills, relative to the working directory).
pub const DEFAULT_EXTENSION_DIR: &str = ".extensions";

/// S3 settings for a `s3://` data path.
#[derive(Clone, Default)]
pub struct S3Config {
    /// Region, if set.
    pub region: Option<String>,
    /// Static key id; `None` selects the credential chain.
    pub access_key_id: Option<String>,
    /// Static secret key.
    pub secret_access_key: Option<String>,
    /// Endpoint URL (`http://127.0.0.1:5000`) for S3-compatible stores.
    pub endpoint: Option<String>,
    /// SSE-KMS key ARN.
    pub kms_key_id: Option<String>,
}

impl std::fmt::Debug for S3Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Config")
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field(
                "secret_access_key",
                &self.secret_access_key.as_ref().map(|_| "***"),
            )
            .field("endpoint", &self.endpoint)
            .field("kms_key_id", &self.kms_key_id)
            .finish()
    }
}

/// Everything needed to open the lake.
#[derive(Debug, Clone)]
pub struct LakeConfig {
    /// Where the catalog lives.
    pub catalog: Catalog,
    /// `DATA_PATH` for ATTACH; `None` uses the path stored in an existing catalog.
    pub data_path: Option<String>,
    /// Attach read-only.
    pub read_only: bool,
    /// Attach with `ENCRYPTED` (and assert the catalog agrees).
    pub encrypted: bool,
    /// DuckDB memory limit.
    pub memory_limit: Option<String>,
    /// DuckDB worker threads.
    pub threads: Option<u32>,
    /// DuckDB spill directory.
    pub temp_directory: Option<PathBuf>,
    /// Where the pinned extensions are.
    pub extension_dir: PathBuf,
    /// S3 settings for the data path.
    pub s3: S3Config,
}

impl LakeConfig {
    /// A config for a catalog with defaults for everything else.
    pub fn new(catalog_dsn: &str, data_path: Option<&str>) -> Self {
        Self {
            catalog: Catalog::parse(catalog_dsn),
            data_path: data_path.map(str::to_owned),
            read_only: false,
            encrypted: false,
            memory_limit: None,
            threads: None,
            temp_directory: None,
            extension_dir: PathBuf::from(DEFAULT_EXTENSION_DIR),
            s3: S3Config::default(),
        }
    }

    /// Reads the settings from the process environment.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads the settings through `get` (the environment in production, a map in tests). Every
    /// missing or malformed key is reported at once.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let get = |k: &str| {
            get(k)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let mut problems = Vec::new();
        let dsn = get(DUCKLAKE_CATALOG_DSN);
        if dsn.is_none() {
            problems.push(format!("{DUCKLAKE_CATALOG_DSN} is required"));
        }
        let data_path = get(DUCKLAKE_DATA_PATH);
        if let Some(p) = &data_path {
            if !(p.starts_with("s3://") || p.starts_with('/')) {
                problems.push(format!(
                    "{DUCKLAKE_DATA_PATH} must be an absolute directory or s3:// URL"
                ));
            }
        }
        let threads = match get(DUCKDB_THREADS).map(|t| t.parse::<u32>()) {
            None => None,
            Some(Ok(0)) => None,
            Some(Ok(n)) => Some(n),
            Some(Err(_)) => {
                problems.push(format!("{DUCKDB_THREADS} must be a whole number"));
                None
            }
        };
        let read_only = parse_bool(&get, DUCKLAKE_READ_ONLY, &mut problems);
        let encrypted = parse_bool(&get, LAKE_ENCRYPTION_ENABLED, &mut problems);
        if !problems.is_empty() {
            return Err(Error::Config(problems.join("; ")));
        }
        let mut cfg = LakeConfig::new(dsn.as_deref().unwrap_or_default(), data_path.as_deref());
        cfg.read_only = read_only;
        cfg.encrypted = encrypted;
        cfg.memory_limit = get(DUCKDB_MEMORY_LIMIT);
        cfg.threads = threads;
        cfg.temp_directory = get(DUCKDB_TEMP_DIRECTORY).map(PathBuf::from);
        if let Some(dir) = get(DUCKDB_EXTENSION_DIR) {
            cfg.extension_dir = PathBuf::from(dir);
        }
        cfg.s3 = S3Config {
            region: get(S3_AWS_REGION),
            access_key_id: get(S3_AWS_ACCESS_KEY_ID),
            secret_access_key: get(S3_AWS_SECRET_ACCESS_KEY),
            endpoint: get(DUCKDB_S3_ENDPOINT).or_else(|| get(S3_ENDPOINT)),
            kms_key_id: get(S3_KMS_KEY_ID),
        };
        Ok(cfg)
    }

    /// True when the data path is on S3 (httpfs and a secret are needed).
    pub fn data_on_s3(&self) -> bool {
        self.data_path
            .as_deref()
            .is_some_and(|p| p.starts_with("s3://"))
    }
}

fn parse_bool(
    get: &impl Fn(&str) -> Option<String>,
    key: &str,
    problems: &mut Vec<String>,
) -> bool {
    match get(key).map(|v| v.to_ascii_lowercase()) {
        None => false,
        Some(v) if matches!(v.as_str(), "1" | "true" | "yes" | "on") => true,
        Some(v) if matches!(v.as_str(), "0" | "false" | "no" | "off") => false,
        Some(_) => {
            problems.push(format!("{key} must be true or false"));
            false
        }
    }
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
    fn reports_every_problem_at_once() {
        let err = LakeConfig::from_lookup(lookup(&[
            (DUCKLAKE_DATA_PATH, "relative/dir"),
            (DUCKDB_THREADS, "two"),
            (LAKE_ENCRYPTION_ENABLED, "maybe"),
        ]))
        .unwrap_err()
        .to_string();
        for key in [
            DUCKLAKE_CATALOG_DSN,
            DUCKLAKE_DATA_PATH,
            DUCKDB_THREADS,
            LAKE_ENCRYPTION_ENABLED,
        ] {
            assert!(err.contains(key), "{err}");
        }
    }

    #[test]
    fn reads_a_full_config_without_leaking_the_secret() {
        let cfg = LakeConfig::from_lookup(lookup(&[
            (DUCKLAKE_CATALOG_DSN, "host=h password=pw"),
            (DUCKLAKE_DATA_PATH, "s3://b/lake/"),
            (DUCKDB_THREADS, "2"),
            (S3_AWS_SECRET_ACCESS_KEY, "topsecret"),
            (S3_ENDPOINT, "http://127.0.0.1:9"),
            (DUCKDB_EXTENSION_DIR, "/opt/ext"),
        ]))
        .unwrap();
        assert!(cfg.catalog.is_postgres());
        assert!(cfg.data_on_s3());
        assert_eq!(cfg.threads, Some(2));
        assert_eq!(cfg.extension_dir, PathBuf::from("/opt/ext"));
        let debug = format!("{cfg:?}");
        assert!(
            !debug.contains("topsecret") && !debug.contains("pw"),
            "{debug}"
        );
    }
}
