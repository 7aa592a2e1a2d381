use dq_lake::backend_tests;
use dq_lake::testing::{Backend, TestLake};
use dq_lake::Error;

backend_tests!(
    only_writers_attach_meta,
    every_connection_is_utc,
    every_connection_reads_with_the_session_defaults,
    missing_extension_names_make_extensions,
    extension_signatures_are_checked_only_when_asked,
    other_format_version_is_refused,
    encryption_mismatch_is_refused
);

/// The writers attach `meta` (din's consumer floor lives there); a read-only open, the query
/// functions', does not: one catalog connection fewer at every cold start.
fn only_writers_attach_meta(backend: Backend) {
    let t = TestLake::new(backend);
    let databases = |read_only: bool| -> Vec<String> {
        let lake = t.open_with(|c| c.read_only = read_only).unwrap();
        let mut stmt = lake
            .conn()
            .prepare("SELECT database_name FROM duckdb_databases() WHERE NOT internal ORDER BY 1")
            .unwrap();
        let names = stmt.query_map([], |r| r.get(0)).unwrap();
        names.collect::<Result<_, _>>().unwrap()
    };
    assert!(databases(false).contains(&"meta".to_owned()));
    let read_only = databases(true);
    assert!(read_only.contains(&"lake".to_owned()), "{read_only:?}");
    assert!(!read_only.contains(&"meta".to_owned()), "{read_only:?}");
}

/// The read settings hold on every connection the reads check out, not only on the one the
/// lake was opened with: a plain `SET` of the Parquet extension's options holds for one
/// connection.
fn every_connection_reads_with_the_session_defaults(backend: Backend) {
    let t = TestLake::new(backend);
    let lake = t.open().unwrap();
    for conn in [lake.connect().unwrap(), lake.connect().unwrap()] {
        for (setting, want) in [
            ("parquet_metadata_cache", "true"),
            ("prefetch_all_parquet_files", "true"),
            ("preserve_insertion_order", "false"),
            ("validate_external_file_cache", "NO_VALIDATION"),
        ] {
            let got: String = conn
                .query_row("SELECT current_setting(?)::VARCHAR", [setting], |r| {
                    r.get(0)
                })
                .unwrap();
            assert_eq!(got, want, "{setting}");
        }
    }
}

fn every_connection_is_utc(backend: Backend) {
    let t = TestLake::new(backend);
    let lake = t.open().unwrap();
    for conn in [lake.connect().unwrap(), lake.connect().unwrap()] {
        let tz: String = conn
            .query_row("SELECT current_setting('TimeZone')", [], |r| r.get(0))
            .unwrap();
        assert_eq!(tz, "UTC");
        // 23:30 at -02:00 is the next UTC day: partition values must follow UTC.
        let day: i64 = conn
            .query_row(
                "SELECT day(TIMESTAMPTZ '2026-03-01 23:30:00-02')",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(day, 2);
    }
}

fn missing_extension_names_make_extensions(backend: Backend) {
    let t = TestLake::new(backend);
    let empty = t.path("no-extensions");
    std::fs::create_dir_all(&empty).unwrap();
    let err = t
        .open_with(|c| c.extension_dir = empty.clone())
        .unwrap_err();
    assert!(matches!(err, Error::MissingExtension { .. }), "{err}");
    assert!(err.to_string().contains("make extensions"), "{err}");
}

/// Off by default (the pinned files are hash-checked when installed; the check costs most of a
/// cold start); when asked, DuckDB refuses an extension file whose bytes changed.
fn extension_signatures_are_checked_only_when_asked(backend: Backend) {
    let t = TestLake::new(backend);
    let unsigned_allowed = |verify: bool| -> String {
        let lake = t.open_with(|c| c.verify_extensions = verify).unwrap();
        lake.conn()
            .query_row(
                "SELECT current_setting('allow_unsigned_extensions')::VARCHAR",
                [],
                |r| r.get(0),
            )
            .unwrap()
    };
    assert_eq!(unsigned_allowed(false), "true");
    assert_eq!(unsigned_allowed(true), "false");

    // A copy of the extension directory with one byte of `icu` flipped.
    let pinned = t.config.extension_dir.clone();
    let copy = t.path("tampered-extensions");
    for entry in walk(&pinned) {
        let rel = entry.strip_prefix(&pinned).unwrap();
        let to = copy.join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        if entry
            .file_name()
            .is_some_and(|n| n == "icu.duckdb_extension")
        {
            let mut bytes = std::fs::read(&entry).unwrap();
            let middle = bytes.len() / 2;
            bytes[middle] ^= 0xff;
            std::fs::write(&to, bytes).unwrap();
        } else {
            std::os::unix::fs::symlink(&entry, &to).unwrap();
        }
    }
    let err = t
        .open_with(|c| {
            c.extension_dir = copy.clone();
            c.verify_extensions = true;
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains("load extension icu"), "{err}");
}

/// Every file under `dir`, recursively.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

fn other_format_version_is_refused(backend: Backend) {
    for version in ["0.3", "1.1"] {
        let t = TestLake::new(backend);
        drop(t.open().unwrap());
        set_catalog_version(&t, version);
        let err = t.open().unwrap_err();
        assert!(
            matches!(&err, Error::CatalogVersion { found, .. } if found == version),
            "{version}: {err}"
        );
        assert!(err.to_string().contains("never migrates"), "{err}");
    }
}

fn encryption_mismatch_is_refused(backend: Backend) {
    let t = TestLake::new(backend);
    drop(t.open().unwrap());
    let err = t.open_with(|c| c.encrypted = true).unwrap_err();
    assert!(
        matches!(err, Error::EncryptionMismatch { .. }) || err.to_string().contains("encrypt"),
        "{err}"
    );
}

/// Rewrites the catalog's recorded format version behind DuckLake's back.
fn set_catalog_version(t: &TestLake, version: &str) {
    let sql = format!("UPDATE ducklake_metadata SET value = '{version}' WHERE key = 'version'");
    match &t.config.catalog {
        dq_lake::Catalog::File(path) => {
            let conn = dq_lake::duckdb::Connection::open(path).unwrap();
            conn.execute_batch(&sql).unwrap();
        }
        dq_lake::Catalog::Postgres(dsn) => {
            let db = dsn
                .split_whitespace()
                .find_map(|kv| kv.strip_prefix("dbname="))
                .unwrap();
            dq_testkit::shared_postgres()
                .psql_as_superuser(db, &sql)
                .unwrap();
        }
    }
}

#[test]
fn wrong_postgres_password_is_not_echoed() {
    let pg = dq_testkit::shared_postgres();
    let t = TestLake::new(Backend::Postgres);
    let wrong = "Wr0ng-Pa55word-xyz";
    let dsn = t.config.catalog.uri().replace("ducklake:postgres:", "");
    let dsn = dsn.replace(
        &format!("password={}", pg.password()),
        &format!("password={wrong}"),
    );
    let err = t
        .open_with(|c| c.catalog = dq_lake::Catalog::parse(&dsn))
        .unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(!text.contains(wrong), "password leaked: {text}");
    assert!(!text.contains(pg.password()), "password leaked: {text}");
    assert!(
        text.contains("password authentication failed"),
        "expected an authentication error: {text}"
    );
}

#[test]
fn url_dsn_password_is_not_echoed() {
    let pg = dq_testkit::shared_postgres();
    let wrong = "An0ther-Wr0ng-pw";
    let dsn = format!("postgresql://dq:{wrong}@127.0.0.1:{}/postgres", pg.port());
    let t = TestLake::new(Backend::File);
    let err = t
        .open_with(|c| c.catalog = dq_lake::Catalog::parse(&dsn))
        .unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(!text.contains(wrong), "password leaked: {text}");
}
