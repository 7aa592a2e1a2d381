//! What the pinned DuckLake extension does with `ducklake_add_data_files`, the registration the
//! materializer's own-Parquet write path would use (issue 20). Pinned here so an extension
//! upgrade that changes any of it is noticed before that path relies on it. `make
//! bench-materializer` measures what the registration costs per file.

use dq_lake::testing::{Backend, TestLake};
use dq_lake::{backend_tests, METADATA};

backend_tests!(
    added_files_follow_the_transaction_and_get_misfiled_partition_values,
    merges_take_added_files_in_the_tables_own_directories_only
);

/// Partitioned like `lake.signals` (bucket, then the timestamp's year, month and day).
const TABLE: &str =
    "CREATE TABLE lake.added (subject_bucket INTEGER, \"timestamp\" TIMESTAMPTZ, v DOUBLE);\n\
     ALTER TABLE lake.added SET PARTITIONED BY \
       (subject_bucket, year(\"timestamp\"), month(\"timestamp\"), day(\"timestamp\"));\n\
     CREATE TABLE lake.cursor (c BIGINT);\n\
     INSERT INTO lake.cursor VALUES (0);";

/// `(partition_key_index, partition_value)` rows the catalog holds for `lake.added`'s live files:
/// the added one (`added`), or the others.
fn partition_values(conn: &dq_lake::duckdb::Connection, added: bool) -> Vec<(i64, String)> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT p.partition_key_index, p.partition_value \
             FROM {METADATA}.ducklake_file_partition_value p \
             JOIN {METADATA}.ducklake_data_file f ON f.data_file_id = p.data_file_id \
             JOIN {METADATA}.ducklake_table t ON t.table_id = f.table_id \
             WHERE t.table_name = 'added' AND t.end_snapshot IS NULL AND f.end_snapshot IS NULL \
               AND (f.path LIKE '%/{ADDED}') = ? \
             ORDER BY 1, 2"
        ))
        .unwrap();
    let rows = stmt
        .query_map([added], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap();
    rows.collect::<Result<_, _>>().unwrap()
}

/// The file name of the Parquet file the test writes and adds.
const ADDED: &str = "rows.parquet";

fn added_files_follow_the_transaction_and_get_misfiled_partition_values(backend: Backend) {
    let t = TestLake::new(backend);
    let lake = t.open().unwrap();
    let conn = lake.conn();
    conn.execute_batch(TABLE).unwrap();
    let dir = t.path("own/subject_bucket=7/year=2026/month=11/day=30");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(ADDED);
    let file = file.to_str().unwrap();
    conn.execute_batch(&format!(
        "COPY (SELECT 7::INTEGER AS subject_bucket, \
                      TIMESTAMPTZ '2026-11-30 12:00:00+00' + to_seconds(i::BIGINT) AS \"timestamp\", \
                      i::DOUBLE AS v FROM range(1000) r(i)) \
         TO '{file}' (FORMAT parquet)"
    ))
    .unwrap();
    let add = format!(
        "BEGIN; CALL ducklake_add_data_files('lake', 'added', '{file}'); \
         UPDATE lake.cursor SET c = c + 1;"
    );
    let state = || -> (i64, i64) {
        conn.query_row(
            "SELECT (SELECT count(*) FROM lake.added), (SELECT c FROM lake.cursor)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
    };

    // Rolled back with the cursor update: no rows, the cursor unmoved, the file left on disk
    // unreferenced (a writer must sweep it).
    conn.execute_batch(&format!("{add} ROLLBACK;")).unwrap();
    assert_eq!(state(), (0, 0));
    assert!(std::path::Path::new(file).exists());
    assert!(partition_values(conn, true).is_empty());

    // Committed with it: the rows and the cursor move together.
    conn.execute_batch(&format!("{add} COMMIT;")).unwrap();
    assert_eq!(state(), (1000, 1));
    let in_window: i64 = conn
        .query_row(
            "SELECT count(*) FROM lake.added WHERE subject_bucket = 7 \
             AND \"timestamp\" >= TIMESTAMPTZ '2026-11-30 12:03:00+00' \
             AND \"timestamp\" < TIMESTAMPTZ '2026-11-30 12:06:00+00'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        in_window, 180,
        "reads filtered by time answer from the added file"
    );

    // DuckLake's own write of the same rows (too many to inline) records one value per
    // partition key, in key order.
    conn.execute_batch(
        "INSERT INTO lake.added SELECT subject_bucket, \"timestamp\", v FROM lake.added",
    )
    .unwrap();
    let expected = |pairs: &[(i64, &str)]| -> Vec<(i64, String)> {
        pairs.iter().map(|(k, v)| (*k, (*v).to_owned())).collect()
    };
    assert_eq!(
        partition_values(conn, false),
        expected(&[(0, "7"), (1, "2026"), (2, "11"), (3, "30")])
    );
    // The added file's hive path is parsed, but 1.5.4 files every transformed key's value under
    // the last key's index: year, month and day all as key 3. Anything reading partition values
    // (dq's direct-read listing, din's maintenance grouping) must not trust them for added files.
    assert_eq!(
        partition_values(conn, true),
        expected(&[(0, "7"), (3, "11"), (3, "2026"), (3, "30")]),
        "DuckLake changed how ducklake_add_data_files records partition values: revisit the \
         own-Parquet write path's listing rules (issue 20)"
    );

    // A file outside a hive path is refused: DuckLake takes an added file's partition values
    // from its path, so an own writer must write into `subject_bucket=…/year=…/…` directories.
    let flat = t.path("own/flat.parquet");
    std::fs::copy(file, &flat).unwrap();
    let refused = conn
        .execute_batch(&format!(
            "CALL ducklake_add_data_files('lake', 'added', '{}')",
            flat.to_str().unwrap()
        ))
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("invalid partition value"),
        "a file outside a hive path was not refused as expected: {refused}"
    );
    assert_eq!(state(), (2000, 1), "the refused file added no rows");
}

/// Writes 100 rows of bucket 7 on `day` (of November 2026) as the Parquet file `name` in
/// `dir`'s hive directories, and registers it.
fn add(conn: &dq_lake::duckdb::Connection, dir: &str, day: u32, name: &str) {
    let dir = format!("{dir}/subject_bucket=7/year=2026/month=11/day={day}");
    std::fs::create_dir_all(&dir).unwrap();
    let file = format!("{dir}/{name}");
    conn.execute_batch(&format!(
        "COPY (SELECT 7::INTEGER AS subject_bucket, \
                      TIMESTAMPTZ '2026-11-{day} 12:00:00+00' + to_seconds(i::BIGINT) AS \"timestamp\", \
                      i::DOUBLE AS v FROM range(100) r(i)) \
         TO '{file}' (FORMAT parquet); \
         CALL ducklake_add_data_files('lake', 'added', '{file}');"
    ))
    .unwrap();
}

/// din's `ducklake_merge_adjacent_files` over added files: those in the table's own partition
/// directories merge (with DuckLake's own files of the partition) into files with correct
/// partition values, one per day; a partition whose files sit in different directories, the
/// first outside the table's, makes the merge fail (an internal error). The materializer's own writer writes into the table's
/// directories for that reason (`dq_materialize::own_writer`).
fn merges_take_added_files_in_the_tables_own_directories_only(backend: Backend) {
    let t = TestLake::new(backend);
    let lake = t.open().unwrap();
    let conn = lake.conn();
    conn.execute_batch(TABLE).unwrap();
    conn.execute_batch(
        "INSERT INTO lake.added SELECT 7, TIMESTAMPTZ '2026-11-29 01:00:00+00' \
         + to_seconds(i::BIGINT), -1 FROM range(100) r(i)",
    )
    .unwrap();
    let table = dq_lake::files::table_path(conn, backend == Backend::Postgres, "added")
        .unwrap()
        .unwrap();
    let table = table.trim_end_matches('/');
    for (day, name) in [(29, "a.parquet"), (29, "b.parquet"), (30, "c.parquet")] {
        add(conn, table, day, name);
    }
    conn.execute_batch("CALL ducklake_merge_adjacent_files('lake')")
        .unwrap();
    let mut files = conn
        .prepare("SELECT data_file FROM ducklake_list_files('lake', 'added') ORDER BY 1")
        .unwrap();
    let files: Vec<String> = files
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(files.len(), 2, "one merged file a day: {files:?}");
    for file in &files {
        let days: i64 = conn
            .query_row(
                &format!("SELECT count(DISTINCT day(\"timestamp\")) FROM read_parquet('{file}')"),
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(days, 1, "{file} holds one day");
    }
    assert_eq!(
        partition_values(conn, false).len(),
        8,
        "the merged files' partition values are DuckLake's own"
    );
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM lake.added", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 400);

    // A partition whose first file sits outside the table's directories and another inside
    // them: the merge refuses.
    add(
        conn,
        &t.path("elsewhere").to_string_lossy(),
        28,
        "d.parquet",
    );
    add(conn, table, 28, "e.parquet");
    let refused = conn
        .execute_batch("CALL ducklake_merge_adjacent_files('lake')")
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("different hive partition path"),
        "DuckLake changed how it merges added files of one partition in different \
         directories: {refused}"
    );
}
