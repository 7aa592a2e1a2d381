//! DuckDB + DuckLake access for dq: opening an embedded DuckDB with the pinned extensions,
//! attaching the `lake` catalog (file or PostgreSQL) and its `meta` side database, and the
//! catalog objects din owns (`lake.raw_events`, `meta.din_consumer_progress`).
//!
//! Not here: decoding (the `decode` crate), blob storage (`blob`), the din simulator (`sim`).
//!
//! # Layout
//! - [`config`]: environment keys and [`LakeConfig`] (a DSN may come from Secrets Manager, via
//!   the `secrets` crate, and is re-read when the catalog refuses it: [`Lake::open`]).
//! - [`catalog`]: DSN classification and ATTACH targets.
//! - [`raw`]: the `raw_events` DDL, its layout, and its Arrow row schema.
//! - [`progress`]: `meta.din_consumer_progress` (din's snapshot-expiry floor) and snapshots.
//! - [`redact`]: masking of credentials in every error and log line.
//! - [`retry`]: commit-conflict retry.
//! - [`indexes`]: the indexes dq adds to a PostgreSQL catalog (listing refreshes).
//! - [`interruptible`]: a request's reads, interrupted when its caller gives up.
//! - [`snapshot`]: the one snapshot all statements of a request read.
//! - [`catalog_conn`]: a PostgreSQL catalog connection of the process's own, asking the newest
//!   snapshot id in one round trip.
//! - [`files`]: direct reads of a table's files from per-snapshot listings of the catalog
//!   (dq's tables by `subject_bucket`, din's `raw_events` by `type`).
//! - `testing` (feature): fresh lakes on both catalog backends for tests.
#![warn(missing_docs)]

pub mod catalog;
pub mod catalog_conn;
pub mod config;
mod error;
pub mod files;
pub mod indexes;
mod interrupt;
mod pool;
pub mod progress;
pub mod raw;
pub mod redact;
pub mod retry;
pub mod snapshot;
#[cfg(feature = "testing")]
#[allow(clippy::expect_used)] // Test fixtures: a lake that cannot be set up fails the test.
pub mod testing;

use std::path::{Path, PathBuf};

pub use catalog::Catalog;
pub use config::{LakeConfig, S3Config};
pub use duckdb;
pub use error::{is_auth_failure, Error, ReadErrorCode, Result, DB_FAILURE};
pub use interrupt::{given_up, interruptible, one_snapshot};
pub use pool::{is_invalidated, Pool, Pooled, SharedLake};
pub use redact::Redactor;
pub use snapshot::{request_snapshot, Newest, Snapshot};

/// The DuckLake catalog format version din and dq share. Anything else is refused, never migrated.
pub const CATALOG_FORMAT_VERSION: &str = "1.0";

/// The database alias of the DuckLake catalog.
pub const LAKE: &str = "lake";

/// The DuckLake metadata catalog DuckDB attaches for [`LAKE`].
pub const METADATA: &str = "__ducklake_metadata_lake";

/// Whether the table `lake.main.<table>` exists at the newest committed snapshot, asked of the
/// catalog's rows: the one existence probe of the read and the write side. `duckdb_tables()`
/// would answer the same outside a transaction but makes DuckLake load its whole catalog
/// (tables, columns, partitions, macros) on a fresh instance: ~40 ms of a query function's first
/// request, which the direct reads otherwise never need. Not for use inside a transaction that
/// created the table: the catalog's rows show commits only.
///
/// # Errors
/// The catalog could not be read.
pub fn table_exists(conn: &duckdb::Connection, table: &str) -> duckdb::Result<bool> {
    conn.query_row(
        &format!("SELECT count(*) FROM ({})", live_table_id_sql()),
        [table],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

/// The metadata catalog's query for the id of the live table `main.<?>` (one parameter: the
/// table's name; no row when there is no such table).
pub(crate) fn live_table_id_sql() -> String {
    format!(
        "SELECT t.table_id FROM {METADATA}.ducklake_table t \
         JOIN {METADATA}.ducklake_schema sc ON sc.schema_id = t.schema_id \
         WHERE sc.schema_name = 'main' AND t.table_name = ? \
           AND t.end_snapshot IS NULL AND sc.end_snapshot IS NULL"
    )
}

/// An open embedded DuckDB with the lake attached. Clone connections with [`Lake::connect`].
pub struct Lake {
    conn: duckdb::Connection,
    cfg: LakeConfig,
    redactor: Redactor,
}

impl std::fmt::Debug for Lake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lake")
            .field("catalog", &self.cfg.catalog)
            .finish_non_exhaustive()
    }
}

impl Lake {
    /// Opens an in-memory DuckDB, loads the pinned extensions from the extension directory (never
    /// from the network), and attaches `lake` and (unless read-only) `meta` as din does. Refuses a
    /// catalog whose format version is not [`CATALOG_FORMAT_VERSION`] and one whose encryption
    /// disagrees with the configuration.
    ///
    /// With a DSN from Secrets Manager ([`LakeConfig::catalog_secret`]) the secret's cached value
    /// is used, and when the catalog refuses its credentials (a rotation) the secret is re-read
    /// once and the open retried; neither the DSN nor a password reaches an error or a log.
    pub fn open(cfg: LakeConfig) -> Result<Lake> {
        Lake::open_with_redactor(cfg, Redactor::default())
    }

    /// A fresh instance from this lake's config (after DuckDB invalidated this one, or the
    /// catalog refused its credentials), re-reading a rotated secret as [`Lake::open`] does. The
    /// redactor is shared, so holders of this lake's redactor also mask a rotated password.
    pub fn reopen(&self) -> Result<Lake> {
        Lake::open_with_redactor(self.cfg.clone(), self.redactor.clone())
    }

    /// Whether an error of this lake's statements calls for [`Lake::reopen`]: DuckDB invalidated
    /// the instance, or the catalog refused credentials that come from a secret (rotated: new
    /// PostgreSQL connections fail while the old ones live on).
    pub fn needs_reopen(&self, message: &str) -> bool {
        is_invalidated(message) || (self.cfg.catalog_secret.is_some() && is_auth_failure(message))
    }

    fn open_with_redactor(mut cfg: LakeConfig, redactor: Redactor) -> Result<Lake> {
        let Some(secret) = cfg.catalog_secret.clone() else {
            return Lake::open_once(cfg, redactor);
        };
        // The cached value, not the config's copy: another instance may have re-read it since.
        let dsn = secret.value();
        cfg.catalog = cfg.catalog_for(&dsn)?;
        match Lake::open_once(cfg.clone(), redactor.clone()) {
            Err(e) if e.is_auth_failure() => {
                tracing::warn!(
                    secret = %secret.id(),
                    "the catalog refused the credentials of the secret; re-reading it"
                );
                let fresh = secret.refresh_blocking(&dsn).map_err(Error::Secret)?;
                if fresh == dsn {
                    return Err(e);
                }
                cfg.catalog = cfg.catalog_for(&fresh)?;
                Lake::open_once(cfg, redactor)
            }
            opened => opened,
        }
    }

    fn open_once(cfg: LakeConfig, redactor: Redactor) -> Result<Lake> {
        if let Some(pw) = cfg.catalog.password() {
            redactor.add(percent_decode(&pw));
            redactor.add(pw);
        }
        if let Some(secret) = &cfg.s3.secret_access_key {
            redactor.add(secret.clone());
        }
        let ext_dir = absolute(&cfg.extension_dir)?;
        let db_config = duckdb::Config::default()
            .with("autoinstall_known_extensions", "false")
            .and_then(|c| c.with("autoload_known_extensions", "false"))
            .and_then(|c| {
                let unchecked = if cfg.verify_extensions {
                    "false"
                } else {
                    "true"
                };
                c.with("allow_unsigned_extensions", unchecked)
            })
            .and_then(|c| c.with("extension_directory", ext_dir.to_string_lossy()))
            .map_err(|e| db_error(&redactor, "configure duckdb", e))?;
        let conn = duckdb::Connection::open_in_memory_with_flags(db_config)
            .map_err(|e| db_error(&redactor, "open duckdb", e))?;
        let lake = Lake {
            conn,
            cfg,
            redactor,
        };
        lake.bootstrap(&ext_dir)?;
        Ok(lake)
    }

    fn bootstrap(&self, ext_dir: &Path) -> Result<()> {
        let cfg = &self.cfg;
        if let Some(limit) = &cfg.memory_limit {
            self.exec(
                "set memory_limit",
                &format!("SET memory_limit = {}", quote(limit)),
            )?;
        }
        if let Some(threads) = cfg.threads {
            self.exec("set threads", &format!("SET threads = {threads}"))?;
        }
        if let Some(dir) = &cfg.temp_directory {
            std::fs::create_dir_all(dir).map_err(|source| Error::Io {
                context: format!("create temp directory {}", dir.display()),
                source,
            })?;
            let dir = dir.to_string_lossy();
            self.exec(
                "set temp_directory",
                &format!("SET temp_directory = {}", quote(&dir)),
            )?;
        }
        // DuckLake never changes a file once written (a rewrite is a new file under a new
        // name), so what was read of a file stays true: without these, every read of a file on
        // S3 asks for its size and date again (a HEAD per file per statement, ~65 ms for the
        // 30 files of a month on a local moto), though its bytes are already cached. Local
        // files are read like remote ones, a column chunk at a time: DuckDB otherwise reads a
        // local file's page headers with one small `pread` each (the 30 day files of a month
        // of `segments`' rows: 19.7 → 14.1 ms with both Parquet options, DuckDB 1.5.4).
        // GLOBAL: a plain `SET` of an extension's option (both Parquet ones) holds for this
        // connection only, not for the pooled connections the reads run on.
        self.exec("set session defaults", SESSION_DEFAULTS)?;

        let mut extensions = vec!["icu", "ducklake"];
        if cfg.catalog.is_postgres() {
            extensions.push("postgres_scanner");
        }
        if cfg.data_on_s3() {
            extensions.push("httpfs");
            if cfg.s3.access_key_id.is_none() {
                extensions.push("aws");
            }
        }
        self.load_extensions(ext_dir, &extensions)?;
        if let Some(limit) = cfg
            .pg_connection_limit
            .filter(|_| cfg.catalog.is_postgres())
        {
            // The extension's `pg_connection_limit` is deprecated and bounds nothing in 1.5.4; a
            // pool of this size per attached database (`lake`'s catalog and `meta`), waiting for
            // a free connection instead of opening one more (the default 'force'), does.
            self.exec(
                "set pg_pool_max_connections",
                &format!(
                    "SET pg_pool_max_connections = {limit}; SET pg_pool_acquire_mode = 'wait'"
                ),
            )?;
        }
        set_utc(&self.conn).map_err(|e| db_error(&self.redactor, "set TimeZone", e))?;
        if cfg.data_on_s3() {
            self.exec("create S3 secret", &s3_secret_sql(&cfg.s3))?;
        }
        self.attach()
    }

    /// Loads each extension from `<dir>/<duckdb version>/<platform>/`, failing with a pointer to
    /// `make extensions` when a file is missing rather than letting DuckDB reach for the network.
    fn load_extensions(&self, ext_dir: &Path, names: &[&str]) -> Result<()> {
        let (version, platform): (String, String) = self
            .conn
            .query_row(
                "SELECT library_version, platform FROM pragma_version(), pragma_platform()",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(|e| db_error(&self.redactor, "read duckdb version", e))?;
        let dir = ext_dir.join(&version).join(&platform);
        for name in names {
            let file = dir.join(format!("{name}.duckdb_extension"));
            if !file.is_file() {
                return Err(Error::MissingExtension {
                    name: (*name).to_owned(),
                    dir: dir.display().to_string(),
                });
            }
            self.exec(
                &format!("load extension {name}"),
                &format!("LOAD {}", quote(&file.to_string_lossy())),
            )?;
        }
        Ok(())
    }

    fn attach(&self) -> Result<()> {
        let cfg = &self.cfg;
        if let Some(parent) = cfg.catalog.parent_dir() {
            std::fs::create_dir_all(parent).map_err(|source| Error::Io {
                context: format!("create catalog directory {}", parent.display()),
                source,
            })?;
        }
        if let Some(path) = cfg.data_path.as_deref().filter(|p| p.starts_with('/')) {
            std::fs::create_dir_all(path).map_err(|source| Error::Io {
                context: format!("create data directory {path}"),
                source,
            })?;
        }
        let mut opts = Vec::new();
        if let Some(path) = &cfg.data_path {
            opts.push(format!("DATA_PATH {}", quote(path)));
        }
        if cfg.encrypted && !cfg.read_only {
            opts.push("ENCRYPTED".to_owned());
        }
        if cfg.read_only {
            opts.push("READ_ONLY".to_owned());
        }
        let opts = if opts.is_empty() {
            String::new()
        } else {
            format!(" ({})", opts.join(", "))
        };
        let attach = format!(
            "ATTACH IF NOT EXISTS {} AS {LAKE}{opts}",
            quote(&cfg.catalog.uri())
        );
        retry::on_conflict("attach lake", || {
            self.exec("attach catalog `lake`", &attach)
        })
        .map_err(version_error)?;
        self.check_catalog()?;
        // The read side (attached read-only) never reads `meta`, din's consumer floor: not
        // attaching it spares a catalog connection (a TLS handshake with RDS) at every cold start.
        if cfg.read_only {
            return Ok(());
        }

        let (target, is_pg) = cfg.catalog.meta_target();
        let meta_opts = if is_pg { " (TYPE postgres)" } else { "" };
        self.exec(
            "attach side database `meta`",
            &format!("ATTACH IF NOT EXISTS {} AS meta{meta_opts}", quote(&target)),
        )
    }

    /// Refuses another catalog format version and an encryption mismatch (din's checks too).
    fn check_catalog(&self) -> Result<()> {
        let read = |key: &str| -> Result<Option<String>> {
            let mut stmt = self
                .conn
                .prepare(&format!(
                    "SELECT value FROM {METADATA}.ducklake_metadata WHERE key = ?"
                ))
                .map_err(|e| db_error(&self.redactor, "read catalog metadata", e))?;
            let mut rows = stmt
                .query_map([key], |r| r.get::<_, Option<String>>(0))
                .map_err(|e| db_error(&self.redactor, "read catalog metadata", e))?;
            match rows.next() {
                Some(v) => v.map_err(|e| db_error(&self.redactor, "read catalog metadata", e)),
                None => Ok(None),
            }
        };
        let version = read("version")?.unwrap_or_default();
        if version != CATALOG_FORMAT_VERSION {
            return Err(Error::CatalogVersion {
                found: version,
                expected: CATALOG_FORMAT_VERSION,
            });
        }
        if let Some(encrypted) = read("encrypted")? {
            if !self.cfg.read_only && (encrypted == "true") != self.cfg.encrypted {
                return Err(Error::EncryptionMismatch {
                    catalog: encrypted,
                    configured: self.cfg.encrypted,
                });
            }
        }
        Ok(())
    }

    /// A new connection to the same database, with the per-connection settings applied
    /// (`TimeZone = 'UTC'`: partition values and naive timestamps are computed in the session zone).
    pub fn connect(&self) -> Result<Conn> {
        let conn = self
            .conn
            .try_clone()
            .map_err(|e| db_error(&self.redactor, "clone connection", e))?;
        set_utc(&conn).map_err(|e| db_error(&self.redactor, "set TimeZone", e))?;
        Ok(Conn { inner: Some(conn) })
    }

    /// The connection the lake was opened with.
    pub fn conn(&self) -> &duckdb::Connection {
        &self.conn
    }

    /// Gives up an instance DuckDB invalidated ([`is_invalidated`]) without running its
    /// destructors. Destroying it can abort the whole process: a connection left inside an
    /// explicit transaction (a commit the failure interrupted) is rolled back by a C++
    /// destructor, the rollback throws "database has been invalidated", and the runtime calls
    /// `std::terminate` (seen in CI). The memory stays allocated; invalidations are rare (the
    /// catalog failing mid-statement), and a Lambda environment that grows too large is recycled.
    pub fn abandon(self) {
        tracing::warn!("abandoning an invalidated DuckDB instance without destroying it");
        std::mem::forget(self);
    }

    /// The configuration the lake was opened with.
    pub fn config(&self) -> &LakeConfig {
        &self.cfg
    }

    /// The redactor holding this lake's secrets; use it for any message derived from DuckDB.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// Runs one or more statements on the primary connection, with a redacted error context.
    pub fn exec(&self, context: &str, sql: &str) -> Result<()> {
        self.conn
            .execute_batch(sql)
            .map_err(|e| db_error(&self.redactor, context, e))
    }

    /// Converts a DuckDB error into an [`Error`] with `context`, masking this lake's secrets.
    pub fn error(&self, context: &str, e: duckdb::Error) -> Error {
        db_error(&self.redactor, context, e)
    }
}

/// Builds a redacted [`Error::Duckdb`].
pub fn db_error(redactor: &Redactor, context: &str, e: duckdb::Error) -> Error {
    Error::Duckdb {
        context: redactor.redact(context),
        message: redactor.redact(&e.to_string()),
    }
}

/// The settings every connection of the instance reads with ([`Lake::open`]).
const SESSION_DEFAULTS: &str = "SET GLOBAL preserve_insertion_order = false; \
     SET GLOBAL parquet_metadata_cache = true; \
     SET GLOBAL prefetch_all_parquet_files = true; \
     SET GLOBAL validate_external_file_cache = 'NO_VALIDATION'; \
     SET GLOBAL enable_http_metadata_cache = true";

fn set_utc(conn: &duckdb::Connection) -> duckdb::Result<()> {
    conn.execute_batch("SET TimeZone = 'UTC'")
}

/// DuckLake's own refusal of a catalog it would have to migrate becomes our version error.
fn version_error(e: Error) -> Error {
    match &e {
        Error::Duckdb { message, .. } if message.contains("catalog version mismatch") => {
            let found = message
                .split("catalog version is ")
                .nth(1)
                .and_then(|rest| rest.split(',').next())
                .unwrap_or("unknown")
                .to_owned();
            Error::CatalogVersion {
                found,
                expected: CATALOG_FORMAT_VERSION,
            }
        }
        _ => e,
    }
}

/// A SQL string literal: single quotes doubled. Values are ours (paths, DSNs, settings), but a
/// quote in a path must still not end the literal.
pub fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).map_err(|source| Error::Io {
        context: format!("resolve extension directory {}", path.display()),
        source,
    })
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            byte,
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `CREATE OR REPLACE SECRET` for the data path, the one din creates.
fn s3_secret_sql(s3: &S3Config) -> String {
    let mut parts = vec!["TYPE s3".to_owned()];
    match (&s3.access_key_id, &s3.secret_access_key) {
        (Some(id), secret) => {
            parts.push("PROVIDER config".to_owned());
            parts.push(format!("KEY_ID {}", quote(id)));
            parts.push(format!("SECRET {}", quote(secret.as_deref().unwrap_or(""))));
        }
        (None, _) => parts.push("PROVIDER credential_chain".to_owned()),
    }
    if let Some(region) = &s3.region {
        parts.push(format!("REGION {}", quote(region)));
    }
    if let Some(kms) = &s3.kms_key_id {
        parts.push(format!("KMS_KEY_ID {}", quote(kms)));
    }
    if let Some(endpoint) = &s3.endpoint {
        let (scheme, host) = endpoint.split_once("://").unwrap_or(("https", endpoint));
        let host = host.trim_end_matches('/');
        parts.push(format!("ENDPOINT {}", quote(host)));
        parts.push("URL_STYLE 'path'".to_owned());
        parts.push(format!("USE_SSL {}", scheme != "http"));
    }
    format!("CREATE OR REPLACE SECRET lake_s3 ({})", parts.join(", "))
}

/// A connection of [`Lake::connect`] that is never destroyed inside an open transaction it
/// cannot roll back. A commit that fails because DuckDB invalidated the database (the catalog
/// died mid-commit) leaves its explicit transaction open, every later statement fails, and
/// DuckDB's destructor then rolls back, throws and aborts the process (`std::terminate`; seen in
/// CI). On drop an open transaction is rolled back; a connection of an invalidated instance is
/// leaked instead, as [`Lake::abandon`] leaks the whole instance.
pub struct Conn {
    // `Some` until dropped.
    inner: Option<duckdb::Connection>,
}

// `inner` is `None` only inside `drop`, so these accessors cannot fail: Deref has no error path.
#[allow(clippy::expect_used)]
impl std::ops::Deref for Conn {
    type Target = duckdb::Connection;

    fn deref(&self) -> &duckdb::Connection {
        self.inner
            .as_ref()
            .expect("a Conn holds its connection until dropped")
    }
}

#[allow(clippy::expect_used)] // As Deref.
impl std::ops::DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut duckdb::Connection {
        self.inner
            .as_mut()
            .expect("a Conn holds its connection until dropped")
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        let Some(conn) = self.inner.take() else {
            return;
        };
        // duckdb-rs cannot tell whether a transaction is open, so ask DuckDB: ROLLBACK fails
        // harmlessly without one, and with "invalidated" when only a leak is safe.
        match conn.execute_batch("ROLLBACK") {
            Err(e) if is_invalidated(&e.to_string()) => {
                tracing::warn!("leaking a connection of an invalidated DuckDB instance");
                std::mem::forget(conn);
            }
            _ => drop(conn),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_secret_for_an_endpoint_with_static_keys() {
        let sql = s3_secret_sql(&S3Config {
            region: Some("us-east-1".into()),
            access_key_id: Some("AK".into()),
            secret_access_key: Some("SK".into()),
            endpoint: Some("http://127.0.0.1:5000/".into()),
            kms_key_id: None,
        });
        assert_eq!(
            sql,
            "CREATE OR REPLACE SECRET lake_s3 (TYPE s3, PROVIDER config, KEY_ID 'AK', SECRET 'SK', \
             REGION 'us-east-1', ENDPOINT '127.0.0.1:5000', URL_STYLE 'path', USE_SSL false)"
        );
    }

    #[test]
    fn s3_secret_uses_the_credential_chain_without_keys() {
        let sql = s3_secret_sql(&S3Config::default());
        assert_eq!(
            sql,
            "CREATE OR REPLACE SECRET lake_s3 (TYPE s3, PROVIDER credential_chain)"
        );
    }

    #[test]
    fn maps_ducklake_version_refusal() {
        let e = version_error(Error::Duckdb {
            context: "attach".into(),
            message: "Invalid Input Error: DuckLake catalog version mismatch: catalog version is 0.9, but the extension requires version 1.0.".into(),
        });
        assert!(
            matches!(e, Error::CatalogVersion { ref found, .. } if found == "0.9"),
            "{e}"
        );
    }

    #[test]
    fn decodes_percent_escapes_for_redaction() {
        assert_eq!(percent_decode("p%40ss%2"), "p@ss%2");
    }

    #[test]
    fn quotes_literals() {
        assert_eq!(quote("it's"), "'it''s'");
    }
}
