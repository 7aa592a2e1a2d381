use dq_lake::testing::{Backend, TestLake};
use dq_lake::{backend_tests, progress, raw};

backend_tests!(
    layout_matches_dins_contract,
    reopen_mints_no_snapshots,
    missing_sort_is_restored_alone
);

/// din's `raw_events` columns, written out here rather than taken from our DDL.
fn expected_columns() -> Vec<(String, String, bool)> {
    [
        ("subject", "varchar"),
        ("time", "timestamptz"),
        ("type", "varchar"),
        ("id", "varchar"),
        ("source", "varchar"),
        ("producer", "varchar"),
        ("data_content_type", "varchar"),
        ("data_version", "varchar"),
        ("extras", "varchar"),
        ("data", "varchar"),
        ("data_base64", "blob"),
        ("data_index_key", "varchar"),
        ("voids_id", "varchar"),
    ]
    .into_iter()
    .map(|(n, t)| (n.to_owned(), t.to_owned(), true))
    .collect()
}

fn layout_matches_dins_contract(backend: Backend) {
    let t = TestLake::new(backend);
    let lake = t.open().unwrap();
    let out = raw::ensure(&lake).unwrap();
    assert!(out.created && out.partitioned && out.sorted);
    let layout = raw::layout(&lake).unwrap();
    assert_eq!(layout.columns, expected_columns());
    let pairs = |v: &[(&str, &str)]| {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        layout.partition,
        pairs(&[
            ("type", "identity"),
            ("time", "year"),
            ("time", "month"),
            ("time", "day")
        ])
    );
    assert_eq!(
        layout.sort,
        pairs(&[("subject", "ASC"), ("\"time\"", "ASC")])
    );
    // Bootstrap is snapshot 0; CREATE, PARTITIONED BY and SORTED BY are 1, 2 and 3.
    assert_eq!(progress::head(&lake).unwrap(), 3);
}

fn reopen_mints_no_snapshots(backend: Backend) {
    let t = TestLake::new(backend);
    {
        let lake = t.open().unwrap();
        raw::ensure(&lake).unwrap();
    }
    let lake = t.open().unwrap();
    let head = progress::head(&lake).unwrap();
    let out = raw::ensure(&lake).unwrap();
    assert_eq!(out, raw::EnsureOutcome::default());
    assert_eq!(progress::head(&lake).unwrap(), head);
    let tables: i64 = lake
        .conn()
        .query_row(
            "SELECT count(*) FROM duckdb_tables() WHERE database_name = 'lake'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(tables, 1);
}

fn missing_sort_is_restored_alone(backend: Backend) {
    let t = TestLake::new(backend);
    let lake = t.open().unwrap();
    raw::ensure(&lake).unwrap();
    lake.exec("reset sort", "ALTER TABLE lake.raw_events RESET SORTED BY")
        .unwrap();
    assert!(raw::layout(&lake).unwrap().sort.is_empty());
    let out = raw::ensure(&lake).unwrap();
    assert_eq!(
        out,
        raw::EnsureOutcome {
            created: false,
            partitioned: false,
            sorted: true
        }
    );
    assert_eq!(raw::layout(&lake).unwrap().sort.len(), 2);
}
