//! Lake settings: named environment keys (the Go system's names), read once into [`LakeConfig`].
//! A PostgreSQL DSN may instead live in Secrets Manager ([`DUCKLAKE_CATALOG_SECRET_ARN`]): it is
//! fetched by [`LakeConfig::from_lookup_with_secrets`] and re-read when the catalog refuses it.

use std::path::PathBuf;

use dq_config::Settings;

use crate::catalog::Catalog;
use crate::{Error, Result};

/// Catalog DSN: a file path (optionally `ducklake:<path>`) or a PostgreSQL DSN.
pub const DUCKLAKE_CATALOG_DSN: &str = "DUCKLAKE_CATALOG_DSN";
/// ARN (or name) of a Secrets Manager secret holding the catalog DSN, instead of
/// [`DUCKLAKE_CATALOG_DSN`] (setting both is an error).
pub const DUCKLAKE_CATALOG_SECRET_ARN: &str = "DUCKLAKE_CATALOG_SECRET_ARN";
/// The JSON field of that secret holding the DSN (default [`DEFAULT_CATALOG_SECRET_KEY`]); a
/// secret that is not a JSON object is the DSN itself. Ignored without the ARN.
pub const DUCKLAKE_CATALOG_SECRET_KEY: &str = "DUCKLAKE_CATALOG_SECRET_KEY";
/// The default of [`DUCKLAKE_CATALOG_SECRET_KEY`].
pub const DEFAULT_CATALOG_SECRET_KEY: &str = "dsn";
/// Replaces the host of a PostgreSQL catalog DSN (e.g. an RDS Proxy endpoint), whichever source
/// the DSN comes from; a hostname or IPv4 address.
pub const DUCKLAKE_CATALOG_HOST: &str = "DUCKLAKE_CATALOG_HOST";
/// Most PostgreSQL connections one DuckDB instance opens per attached PostgreSQL database (the
/// lake's catalog and `meta`: an instance holds at most twice this). Connections beyond it wait
/// for a free one. Unset = the postgres extension's default, which does not bound connections.
/// Ignored for a file catalog.
pub const DUCKLAKE_PG_CONNECTION_LIMIT: &str = "DUCKLAKE_PG_CONNECTION_LIMIT";
/// A boolean: read paths ask a PostgreSQL catalog's newest snapshot id over a connection of
/// their own (default on; [`crate::catalog_conn`]); off, through DuckDB's `postgres_query`.
/// Ignored for a file catalog.
pub const DUCKLAKE_SNAPSHOT_CONNECTION: &str = "DUCKLAKE_SNAPSHOT_CONNECTION";
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
/// A boolean: let DuckDB check each extension's signature at every load (off by default).
pub const DUCKDB_VERIFY_EXTENSIONS: &str = "DUCKDB_VERIFY_EXTENSIONS";
/// The S3 keys and settings of the data path, spelled and read once for the lake and the blob
/// store.
pub use dq_config::s3::{
    S3Config, S3_AWS_ACCESS_KEY_ID, S3_AWS_REGION, S3_AWS_SECRET_ACCESS_KEY, S3_ENDPOINT,
    S3_KMS_KEY_ID,
};
/// DuckDB-only S3 endpoint override, preferred over [`S3_ENDPOINT`] for the data path.
pub const DUCKDB_S3_ENDPOINT: &str = "DUCKDB_S3_ENDPOINT";

/// The extension directory used when [`DUCKDB_EXTENSION_DIR`] is unset (what `make extensions`
/// fills, relative to the working directory).
pub const DEFAULT_EXTENSION_DIR: &str = ".extensions";

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
    /// [`DUCKDB_VERIFY_EXTENSIONS`]: DuckDB checks each extension's signature when loading it.
    /// Off by default: the check hashes the whole file (~75 ms for each of ducklake and
    /// postgres_scanner, most of a cold start), while the files were already hash-pinned when
    /// installed (`scripts/extensions.lock`) and a Lambda layer cannot change after publishing.
    pub verify_extensions: bool,
    /// S3 settings for a `s3://` data path.
    pub s3: S3Config,
    /// The secret the PostgreSQL DSN came from: [`crate::Lake::open`] starts from its cached
    /// value and re-reads it once when the catalog refuses the credentials (a rotation).
    pub catalog_secret: Option<dq_secrets::Secret>,
    /// [`DUCKLAKE_CATALOG_HOST`], applied to every DSN the secret yields.
    pub catalog_host: Option<String>,
    /// [`DUCKLAKE_PG_CONNECTION_LIMIT`].
    pub pg_connection_limit: Option<u32>,
    /// [`DUCKLAKE_SNAPSHOT_CONNECTION`].
    pub snapshot_connection: bool,
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
            verify_extensions: false,
            s3: S3Config::default(),
            catalog_secret: None,
            catalog_host: None,
            pg_connection_limit: None,
            snapshot_connection: true,
        }
    }

    /// Reads the settings from the process environment; a DSN kept in Secrets Manager is
    /// refused here (use [`LakeConfig::from_lookup_with_secrets`]).
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(dq_config::env_lookup)
    }

    /// Reads the settings through `get` (a function passes `dq_config::env_lookup`) and, when
    /// [`DUCKLAKE_CATALOG_SECRET_ARN`] is set, fetches the DSN through `client`. What every
    /// function calls at init.
    pub async fn from_lookup_with_secrets(
        get: impl Fn(&str) -> Option<String>,
        client: &dq_secrets::SecretsClient,
    ) -> Result<Self> {
        let (mut cfg, secret) = Self::parse(get)?;
        if let Some(source) = secret {
            let secret = client
                .fetch(&source.arn, Some(&source.key))
                .await
                .map_err(Error::Secret)?;
            cfg.catalog = cfg.catalog_for(&secret.value())?;
            cfg.catalog_secret = Some(secret);
        }
        Ok(cfg)
    }

    /// Reads the settings through `get` (the environment in production, a map in tests). Every
    /// missing or malformed key is reported at once.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self> {
        match Self::parse(get)? {
            (cfg, None) => Ok(cfg),
            (_, Some(_)) => Err(Error::Config(format!(
                "{DUCKLAKE_CATALOG_SECRET_ARN} is set: the DSN must be fetched \
                 (LakeConfig::from_lookup_with_secrets)"
            ))),
        }
    }

    /// The catalog for `dsn` with [`DUCKLAKE_CATALOG_HOST`] applied.
    ///
    /// # Errors
    /// A host override for a file catalog.
    pub fn catalog_for(&self, dsn: &str) -> Result<Catalog> {
        catalog_for(dsn, self.catalog_host.as_deref()).map_err(Error::Config)
    }

    /// Every setting; the catalog is left empty when its DSN is a secret still to fetch.
    fn parse(get: impl Fn(&str) -> Option<String>) -> Result<(Self, Option<SecretSource>)> {
        let mut settings = Settings::new(get);
        let dsn = settings.get(DUCKLAKE_CATALOG_DSN);
        let secret = settings
            .get(DUCKLAKE_CATALOG_SECRET_ARN)
            .map(|arn| SecretSource {
                arn,
                key: settings
                    .get(DUCKLAKE_CATALOG_SECRET_KEY)
                    .unwrap_or_else(|| DEFAULT_CATALOG_SECRET_KEY.to_owned()),
            });
        match (&dsn, &secret) {
            (None, None) => settings.problem(format!(
                "{DUCKLAKE_CATALOG_DSN} or {DUCKLAKE_CATALOG_SECRET_ARN} is required"
            )),
            (Some(_), Some(_)) => settings.problem(format!(
                "set {DUCKLAKE_CATALOG_DSN} or {DUCKLAKE_CATALOG_SECRET_ARN}, not both"
            )),
            _ => {}
        }
        let catalog_host = settings.get(DUCKLAKE_CATALOG_HOST);
        let host_ok = catalog_host.as_deref().is_none_or(is_hostname);
        if !host_ok {
            settings.problem(format!(
                "{DUCKLAKE_CATALOG_HOST} must be a hostname or IPv4 address"
            ));
        }
        let catalog = match (&dsn, &secret) {
            (Some(dsn), None) if host_ok => match catalog_for(dsn, catalog_host.as_deref()) {
                Ok(catalog) => Some(catalog),
                Err(problem) => {
                    settings.problem(problem);
                    None
                }
            },
            _ => None,
        };
        let pg_connection_limit = match settings.get(DUCKLAKE_PG_CONNECTION_LIMIT) {
            None => None,
            Some(v) => match parse_connection_limit(&v) {
                Some(n) => Some(n),
                None => {
                    settings.problem(format!(
                        "{DUCKLAKE_PG_CONNECTION_LIMIT} must be a positive integer"
                    ));
                    None
                }
            },
        };
        let data_path = settings.get(DUCKLAKE_DATA_PATH);
        if let Some(p) = &data_path {
            if !(p.starts_with("s3://") || p.starts_with('/')) {
                settings.problem(format!(
                    "{DUCKLAKE_DATA_PATH} must be an absolute directory or s3:// URL"
                ));
            }
        }
        let threads = match settings.get(DUCKDB_THREADS).map(|t| t.parse::<u32>()) {
            None => None,
            Some(Ok(0)) => None,
            Some(Ok(n)) => Some(n),
            Some(Err(_)) => {
                settings.problem(format!("{DUCKDB_THREADS} must be a whole number"));
                None
            }
        };
        let read_only = settings.bool(DUCKLAKE_READ_ONLY, false);
        let encrypted = settings.bool(LAKE_ENCRYPTION_ENABLED, false);
        let verify_extensions = settings.bool(DUCKDB_VERIFY_EXTENSIONS, false);
        let snapshot_connection = settings.bool(DUCKLAKE_SNAPSHOT_CONNECTION, true);
        settings.check().map_err(Error::Config)?;
        let mut cfg = LakeConfig::new("", data_path.as_deref());
        if let Some(catalog) = catalog {
            cfg.catalog = catalog;
        }
        cfg.catalog_host = catalog_host;
        cfg.pg_connection_limit = pg_connection_limit;
        cfg.read_only = read_only;
        cfg.encrypted = encrypted;
        cfg.verify_extensions = verify_extensions;
        cfg.snapshot_connection = snapshot_connection;
        cfg.memory_limit = settings.get(DUCKDB_MEMORY_LIMIT);
        cfg.threads = threads;
        cfg.temp_directory = settings.get(DUCKDB_TEMP_DIRECTORY).map(PathBuf::from);
        if let Some(dir) = settings.get(DUCKDB_EXTENSION_DIR) {
            cfg.extension_dir = PathBuf::from(dir);
        }
        cfg.s3 = S3Config::read(&settings);
        if let Some(endpoint) = settings.get(DUCKDB_S3_ENDPOINT) {
            cfg.s3.endpoint = Some(endpoint);
        }
        Ok((cfg, secret))
    }

    /// True when the data path is on S3 (httpfs and a secret are needed).
    pub fn data_on_s3(&self) -> bool {
        self.data_path
            .as_deref()
            .is_some_and(|p| p.starts_with("s3://"))
    }
}

/// Where a secret DSN is to be fetched from.
struct SecretSource {
    arn: String,
    key: String,
}

/// The catalog of `dsn`, its PostgreSQL host replaced by `host` when given.
fn catalog_for(dsn: &str, host: Option<&str>) -> std::result::Result<Catalog, String> {
    match (Catalog::parse(dsn), host) {
        (Catalog::Postgres(dsn), Some(host)) => {
            Ok(Catalog::Postgres(crate::catalog::with_host(&dsn, host)))
        }
        (Catalog::File(_), Some(_)) => Err(format!(
            "{DUCKLAKE_CATALOG_HOST} applies to a PostgreSQL catalog only"
        )),
        (catalog, None) => Ok(catalog),
    }
}

/// A DNS name (RFC 1123 labels) or a dotted IPv4 address (which has that shape too): nothing
/// that could change the meaning of the DSN it is spliced into.
pub fn is_hostname(host: &str) -> bool {
    host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// A positive whole number of connections.
fn parse_connection_limit(value: &str) -> Option<u32> {
    value.parse::<u32>().ok().filter(|n| *n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    use dq_config::pairs_lookup as lookup;

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

    #[test]
    fn extension_signatures_are_checked_only_when_set() {
        let verify = |value: Option<&str>| {
            let mut pairs = vec![(DUCKLAKE_CATALOG_DSN, "/tmp/lake.ducklake")];
            pairs.extend(value.map(|v| (DUCKDB_VERIFY_EXTENSIONS, v)));
            LakeConfig::from_lookup(lookup(&pairs)).map(|c| c.verify_extensions)
        };
        assert!(!verify(None).unwrap());
        assert!(verify(Some("yes")).unwrap());
        assert!(!verify(Some("false")).unwrap());
        let err = verify(Some("maybe")).unwrap_err().to_string();
        assert!(err.contains(DUCKDB_VERIFY_EXTENSIONS), "{err}");
    }

    #[test]
    fn the_snapshot_connection_is_on_unless_turned_off() {
        let on = |value: Option<&str>| {
            let mut pairs = vec![(DUCKLAKE_CATALOG_DSN, "host=db dbname=dq")];
            pairs.extend(value.map(|v| (DUCKLAKE_SNAPSHOT_CONNECTION, v)));
            LakeConfig::from_lookup(lookup(&pairs)).map(|c| c.snapshot_connection)
        };
        assert!(on(None).unwrap());
        assert!(!on(Some("false")).unwrap());
        let err = on(Some("sometimes")).unwrap_err().to_string();
        assert!(err.contains(DUCKLAKE_SNAPSHOT_CONNECTION), "{err}");
    }

    #[test]
    fn both_dsn_sources_are_a_config_error_naming_both() {
        let err = LakeConfig::from_lookup(lookup(&[
            (DUCKLAKE_CATALOG_DSN, "host=h password=pw"),
            (
                DUCKLAKE_CATALOG_SECRET_ARN,
                "arn:aws:secretsmanager:eu-west-1:1:secret:dq",
            ),
        ]))
        .unwrap_err()
        .to_string();
        assert!(
            err.contains(DUCKLAKE_CATALOG_DSN)
                && err.contains(DUCKLAKE_CATALOG_SECRET_ARN)
                && err.contains("not both"),
            "{err}"
        );
        assert!(!err.contains("pw"), "{err}");
    }

    #[test]
    fn a_secret_dsn_needs_the_async_loader() {
        let err = LakeConfig::from_lookup(lookup(&[(DUCKLAKE_CATALOG_SECRET_ARN, "arn:x")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("from_lookup_with_secrets"), "{err}");
    }

    #[test]
    fn the_catalog_host_replaces_the_dsn_host() {
        let cfg = LakeConfig::from_lookup(lookup(&[
            (
                DUCKLAKE_CATALOG_DSN,
                "host=db.internal dbname=dq password=pw",
            ),
            (
                DUCKLAKE_CATALOG_HOST,
                "dq-proxy.proxy-abc.eu-west-1.rds.amazonaws.com",
            ),
        ]))
        .unwrap();
        assert_eq!(
            cfg.catalog,
            Catalog::Postgres(
                "host=dq-proxy.proxy-abc.eu-west-1.rds.amazonaws.com dbname=dq password=pw \
                 connect_timeout=10"
                    .into()
            )
        );
        // Applied again to whatever DSN a secret yields later.
        assert_eq!(
            cfg.catalog_for("postgresql://u:pw@db:5432/dq")
                .unwrap()
                .uri(),
            "ducklake:postgres:postgresql://u:pw@dq-proxy.proxy-abc.eu-west-1.rds.amazonaws.com\
             :5432/dq?connect_timeout=10"
        );
    }

    #[test]
    fn the_catalog_host_must_be_a_hostname_of_a_postgres_catalog() {
        for host in ["h x", "h' password=x", "-h", "a..b", "h:5432", "[::1]"] {
            let err = LakeConfig::from_lookup(lookup(&[
                (DUCKLAKE_CATALOG_DSN, "host=h"),
                (DUCKLAKE_CATALOG_HOST, host),
            ]))
            .unwrap_err()
            .to_string();
            assert!(err.contains("must be a hostname"), "{host}: {err}");
        }
        let err = LakeConfig::from_lookup(lookup(&[
            (DUCKLAKE_CATALOG_DSN, "/tmp/lake.ducklake"),
            (DUCKLAKE_CATALOG_HOST, "proxy"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(err.contains("PostgreSQL catalog only"), "{err}");
        assert!(is_hostname("10.0.0.12") && is_hostname("localhost"));
        assert!(!is_hostname(&"a".repeat(64)));
    }

    #[test]
    fn the_connection_limit_is_a_positive_integer() {
        let with = |v: &str| {
            LakeConfig::from_lookup(lookup(&[
                (DUCKLAKE_CATALOG_DSN, "host=h"),
                (DUCKLAKE_PG_CONNECTION_LIMIT, v),
            ]))
        };
        assert_eq!(with(" 4 ").unwrap().pg_connection_limit, Some(4));
        for bad in ["0", "-1", "two", "1.5", "99999999999"] {
            let err = with(bad).unwrap_err().to_string();
            assert!(
                err.contains(DUCKLAKE_PG_CONNECTION_LIMIT) && err.contains("positive integer"),
                "{bad}: {err}"
            );
        }
        assert_eq!(
            LakeConfig::from_lookup(lookup(&[(DUCKLAKE_CATALOG_DSN, "host=h")]))
                .unwrap()
                .pg_connection_limit,
            None
        );
    }
}
