//! The newest snapshot over the process's own catalog connection (`dq_lake::catalog_conn`, a
//! PostgreSQL catalog): it answers what DuckDB's `postgres_query` answers, before and after
//! commits and after the connection was lost, and a connection that cannot open leaves the
//! question to DuckDB.

use dq_lake::catalog_conn::{CatalogConn, APPLICATION_NAME};
use dq_lake::testing::{Backend, TestLake};
use dq_lake::{request_snapshot, snapshot, Newest, Redactor, SharedLake, METADATA};

#[test]
fn the_own_connection_answers_what_duckdb_answers() {
    let t = TestLake::new(Backend::Postgres);
    let shared = SharedLake::new(t.open().unwrap());
    let newest = shared.newest();
    let (conn, _) = shared.connect().unwrap();
    let through_duckdb = || snapshot::newest(&conn, true).unwrap();

    let first = request_snapshot(&conn, &newest).unwrap();
    assert_eq!(first, through_duckdb());
    conn.execute_batch("CREATE TABLE lake.t (a INT); INSERT INTO lake.t VALUES (1)")
        .unwrap();
    let second = request_snapshot(&conn, &newest).unwrap();
    assert!(second > first, "{second:?} after {first:?}");
    assert_eq!(second, through_duckdb());
    assert_eq!(newest.answered_by_own_connection(), 2);

    // The server ends the connection (a restart, an idle timeout): the next ask reopens it.
    let ended: i64 = conn
        .query_row(
            &format!(
                "SELECT * FROM postgres_query('{METADATA}', \
                 'SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                  WHERE datname = current_database() AND application_name = ''{APPLICATION_NAME}''')"
            ),
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(ended, 1, "the lake's own connection was open");
    conn.execute_batch("INSERT INTO lake.t VALUES (2)").unwrap();
    let third = request_snapshot(&conn, &newest).unwrap();
    assert!(third > second, "{third:?} after {second:?}");
    assert_eq!(third, through_duckdb());
    assert_eq!(
        newest.answered_by_own_connection(),
        3,
        "reopened, not left to DuckDB"
    );
}

#[test]
fn a_connection_that_cannot_open_leaves_the_question_to_duckdb() {
    let t = TestLake::new(Backend::Postgres);
    let shared = SharedLake::new(t.open().unwrap());
    let (conn, _) = shared.connect().unwrap();
    let refused = Newest::over(
        CatalogConn::start(
            "host=127.0.0.1 port=1 dbname=dq user=dq connect_timeout=2",
            Redactor::default(),
        )
        .unwrap(),
    );
    assert_eq!(
        request_snapshot(&conn, &refused).unwrap(),
        snapshot::newest(&conn, true).unwrap()
    );
    assert_eq!(refused.answered_by_own_connection(), 0);
}

#[test]
fn a_file_catalog_has_no_own_connection() {
    let t = TestLake::new(Backend::File);
    let shared = SharedLake::new(t.open().unwrap());
    let (conn, _) = shared.connect().unwrap();
    let newest = shared.newest();
    assert_eq!(
        request_snapshot(&conn, &newest).unwrap(),
        snapshot::newest(&conn, false).unwrap()
    );
    assert_eq!(newest.answered_by_own_connection(), 0);
}
