//! `dqctl seed` end to end: the built binary against a file catalog and a PostgreSQL catalog, and
//! the errors an operator sees for a wrong password or missing extensions.
// Integration-test helpers fail their test by panicking, like the #[test] bodies clippy.toml exempts.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::panic, clippy::indexing_slicing)]

use std::path::Path;
use std::process::{Command, Output};

fn dqctl_seed(ext_dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dqctl"))
        .arg("seed")
        .args([
            "--vehicles",
            "3",
            "--days",
            "1",
            "--start",
            "2026-05-04T00:00:00Z",
            "--quiet",
        ])
        .args(args)
        .env("DUCKDB_EXTENSION_DIR", ext_dir)
        .env_remove("DUCKLAKE_CATALOG_DSN")
        .env_remove("BLOB_BUCKET")
        .output()
        .expect("run dqctl")
}

fn seeds_into(catalog: &str, dir: &Path) {
    let data = dir.join("data").display().to_string();
    let blobs = dir.join("blobs").display().to_string();
    let out = dqctl_seed(
        &dq_lake::testing::extension_dir(),
        &[
            "--catalog",
            catalog,
            "--data-path",
            &data,
            "--blob-dir",
            &blobs,
            "--threshold",
            "1536",
            "--duplicate-every",
            "3",
            "--split-every",
            "4",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "dqctl seed failed: {stderr}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json summary");
    let report = &json["report"];
    let commits = report["bundles"].as_i64().unwrap()
        + report["duplicate_bundles"].as_i64().unwrap()
        + report["split_bundles"].as_i64().unwrap();
    assert_eq!(report["commits"].as_i64().unwrap(), commits, "{json}");
    // Snapshots 1..3 create and lay out raw_events; each commit adds exactly one.
    assert_eq!(
        json["head_snapshot"].as_i64().unwrap(),
        3 + commits,
        "{json}"
    );
    assert!(report["externalized"].as_i64().unwrap() > 0, "{json}");
    assert!(
        json["raw_events_by_type"]["dimo.status"].as_i64().unwrap() > 0,
        "{json}"
    );
}

#[test]
fn seeds_a_file_catalog() {
    let dir = tempfile::tempdir().unwrap();
    seeds_into(
        &format!("ducklake:{}", dir.path().join("catalog.ducklake").display()),
        dir.path(),
    );
}

#[test]
fn seeds_a_postgres_catalog() {
    let pg = dq_testkit::shared_postgres();
    let dsn = pg
        .create_database(&dq_testkit::unique_name("seed"))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    seeds_into(&dsn, dir.path());
}

#[test]
fn wrong_password_is_reported_without_it() {
    let pg = dq_testkit::shared_postgres();
    let wrong = "N0t-The-Passw0rd";
    let dsn = format!(
        "host=127.0.0.1 port={} dbname=postgres user=dq password={wrong}",
        pg.port()
    );
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data").display().to_string();
    let out = dqctl_seed(
        &dq_lake::testing::extension_dir(),
        &["--catalog", &dsn, "--data-path", &data],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("password authentication failed"),
        "{stderr}"
    );
    assert!(
        !stderr.contains(wrong) && !stderr.contains(pg.password()),
        "password leaked: {stderr}"
    );
}

#[test]
fn missing_extensions_point_at_make_extensions() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = format!("ducklake:{}", dir.path().join("c.ducklake").display());
    let data = dir.path().join("data").display().to_string();
    let out = dqctl_seed(dir.path(), &["--catalog", &catalog, "--data-path", &data]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("make extensions"), "{stderr}");
}
