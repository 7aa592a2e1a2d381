//! The catalog DSN from Secrets Manager (moto) on a throwaway PostgreSQL cluster: opening from
//! the secret, re-reading it when the role's password was rotated (at reopen and on the read
//! path), and the per-instance PostgreSQL connection limit.

use std::collections::HashMap;
use std::sync::{Arc, Barrier};

use dq_lake::config::{
    DUCKDB_EXTENSION_DIR, DUCKDB_THREADS, DUCKLAKE_CATALOG_SECRET_ARN, DUCKLAKE_CATALOG_SECRET_KEY,
    DUCKLAKE_DATA_PATH,
};
use dq_lake::{Lake, LakeConfig, Pool, SharedLake};
use dq_secrets::testing::{create_secret, moto_client, put_secret_value};

/// A role of its own (its password changes) owning a fresh database on the shared cluster.
struct Role {
    name: String,
    db: String,
}

impl Role {
    fn create(connection_limit: Option<u32>, password: &str) -> Role {
        let pg = dq_testkit::shared_postgres();
        let name = dq_testkit::unique_name("role").replace('-', "_");
        let db = dq_testkit::unique_name("db");
        let limit = connection_limit
            .map(|n| format!(" CONNECTION LIMIT {n}"))
            .unwrap_or_default();
        pg.psql_as_superuser(
            "postgres",
            &format!("CREATE ROLE {name} LOGIN PASSWORD '{password}'{limit}"),
        )
        .unwrap();
        pg.psql_as_superuser(
            "postgres",
            &format!("CREATE DATABASE \"{db}\" OWNER {name}"),
        )
        .unwrap();
        Role { name, db }
    }

    fn dsn(&self, password: &str) -> String {
        format!(
            "host=127.0.0.1 port={} dbname={} user={} password={password}",
            dq_testkit::shared_postgres().port(),
            self.db,
            self.name
        )
    }

    fn set_password(&self, password: &str) {
        dq_testkit::shared_postgres()
            .psql_as_superuser(
                "postgres",
                &format!("ALTER ROLE {} PASSWORD '{password}'", self.name),
            )
            .unwrap();
    }

    /// Ends the role's sessions: the lake's pooled PostgreSQL connections must reconnect.
    fn terminate_sessions(&self) {
        dq_testkit::shared_postgres()
            .psql_as_superuser(
                "postgres",
                &format!(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{}'",
                    self.name
                ),
            )
            .unwrap();
    }
}

fn password(tag: &str) -> String {
    format!("pw{tag}{}", dq_testkit::unique_name("x").replace('-', ""))
}

/// A lake config read like a function's, with the DSN in secret `arn`.
fn config_from_secret(arn: &str, dir: &tempfile::TempDir) -> LakeConfig {
    let env: HashMap<&str, String> = HashMap::from([
        (DUCKLAKE_CATALOG_SECRET_ARN, arn.to_owned()),
        (DUCKLAKE_CATALOG_SECRET_KEY, "rw".to_owned()),
        (
            DUCKLAKE_DATA_PATH,
            dir.path().join("data").display().to_string(),
        ),
        (
            DUCKDB_EXTENSION_DIR,
            dq_lake::testing::extension_dir().display().to_string(),
        ),
        (DUCKDB_THREADS, "2".to_owned()),
    ]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(LakeConfig::from_lookup_with_secrets(
        |k| env.get(k).cloned(),
        &moto_client(),
    ))
    .unwrap()
}

fn secret_json(dsn: &str) -> String {
    serde_json::json!({ "rw": dsn, "ro": "unused" }).to_string()
}

fn count(lake: &Lake) -> i64 {
    lake.connect()
        .unwrap()
        .query_row("SELECT count(*) FROM lake.t", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn the_dsn_read_from_a_secret_opens_the_lake() {
    let pw = password("open");
    let role = Role::create(None, &pw);
    let arn = create_secret(&secret_json(&role.dsn(&pw)));
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_from_secret(&arn, &dir);
    assert!(cfg.catalog.is_postgres());
    assert!(!format!("{cfg:?}").contains(&pw));
    let lake = Lake::open(cfg).unwrap();
    lake.exec("create", "CREATE TABLE lake.t AS SELECT 1 AS i")
        .unwrap();
    assert_eq!(count(&lake), 1);
}

#[test]
fn a_rotated_password_is_re_read_once_and_never_shown() {
    dq_testkit::logs::capture();
    let [a, b, c] = ["a", "b", "c"].map(password);
    let role = Role::create(None, &a);
    let arn = create_secret(&secret_json(&role.dsn(&a)));
    let dir = tempfile::tempdir().unwrap();
    let lake = Lake::open(config_from_secret(&arn, &dir)).unwrap();
    lake.exec("create", "CREATE TABLE lake.t AS SELECT 1 AS i")
        .unwrap();
    let mut errors = Vec::new();

    // Rotation: the role gets B and the secret says so; the reopen fails with A, re-reads the
    // secret and attaches with B.
    role.set_password(&b);
    put_secret_value(&arn, &secret_json(&role.dsn(&b)));
    let lake = lake.reopen().unwrap();
    assert_eq!(count(&lake), 1);

    // The role moves on to C but the secret still says B: one re-read, still B, the refusal is
    // returned (redacted) rather than retried forever.
    role.set_password(&c);
    let err = lake.reopen().unwrap_err();
    assert!(err.is_auth_failure(), "{err}");
    errors.push(err.to_string());
    errors.push(format!("{err:?}"));

    // The read path: the secret catches up (C); the pooled PostgreSQL connections die, the next
    // read reconnects with B and is refused, and the pool reopens the lake with C.
    put_secret_value(&arn, &secret_json(&role.dsn(&c)));
    role.terminate_sessions();
    let shared = Arc::new(SharedLake::new(lake));
    let pool = Pool::new(Arc::clone(&shared), 2);
    let read = || {
        let pooled = pool.checkout()?;
        let got = pooled
            .conn()
            .query_row("SELECT count(*) FROM lake.t", [], |r| r.get::<_, i64>(0))
            .map_err(|e| dq_lake::db_error(pool.redactor(), "read", e));
        pool.give_back(pooled, got.as_ref().err().map(|e| e.to_string()).as_deref());
        got
    };
    let mut read_errors = Vec::new();
    let answer = (0..3).find_map(|_| match read() {
        Ok(n) => Some(n),
        Err(e) => {
            read_errors.push(e.to_string());
            None
        }
    });
    assert_eq!(
        answer,
        Some(1),
        "a read after the reopening succeeds: {read_errors:?}"
    );
    assert!(
        read_errors.iter().any(|e| dq_lake::is_auth_failure(e)),
        "the refusal surfaced on the read path: {read_errors:?}"
    );
    errors.extend(read_errors);
    assert!(shared.generation() >= 1, "the lake was reopened");

    // Masked everywhere, including by the redactor handed out before the last rotation.
    assert_eq!(pool.redactor().redact(&format!("token {c}")), "token ***");
    let n = dq_testkit::logs::assert_no_secrets(&[&a, &b, &c], &errors);
    assert!(n > 0, "logs were captured");
}

#[test]
fn the_connection_limit_bounds_postgres_connections_per_instance() {
    // The role may hold 2 connections: with a limit of 1 an instance uses one for the lake's
    // catalog and one for `meta`, whatever the concurrency.
    let pw = password("limit");
    let role = Role::create(Some(2), &pw);
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = LakeConfig::new(&role.dsn(&pw), Some(&dir.path().display().to_string()));
    cfg.extension_dir = dq_lake::testing::extension_dir();
    cfg.threads = Some(2);
    cfg.pg_connection_limit = Some(1);
    let lake = Lake::open(cfg.clone()).unwrap();
    let setting = |name: &str| -> String {
        lake.conn()
            .query_row(
                &format!("SELECT current_setting('{name}')::VARCHAR"),
                [],
                |r| r.get(0),
            )
            .unwrap()
    };
    assert_eq!(setting("pg_pool_max_connections"), "1");
    assert_eq!(setting("pg_pool_acquire_mode"), "wait");
    lake.exec("create", "CREATE TABLE lake.t AS SELECT 1 AS i")
        .unwrap();
    assert_eq!(concurrent_errors(&lake, 6), Vec::<String>::new());
    drop(lake);

    // Control: without the limit the same load opens more connections than the role may have.
    cfg.pg_connection_limit = None;
    let lake = Lake::open(cfg).unwrap();
    let errors = concurrent_errors(&lake, 6);
    assert!(
        errors.iter().any(|e| e.contains("too many connections")),
        "{errors:?}"
    );
}

/// Runs `threads` reads at once, each holding a `meta` connection for 200 ms and reading the
/// lake; returns their errors.
fn concurrent_errors(lake: &Lake, threads: usize) -> Vec<String> {
    let barrier = Barrier::new(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let conn = lake.connect().unwrap();
                let redactor = lake.redactor().clone();
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    conn.query_row(
                        "SELECT ((SELECT count(*) FROM lake.t) + (SELECT count(*) FROM \
                         postgres_query('meta', 'SELECT 1 AS one FROM pg_sleep(0.2)')))::BIGINT",
                        [],
                        |r| r.get::<_, i64>(0),
                    )
                    .map_err(|e| redactor.redact(&e.to_string()))
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().unwrap().err())
            .collect()
    })
}
