//! Indexes dq adds to a PostgreSQL catalog.
//!
//! DuckLake creates its catalog tables with primary keys only. A read that moves a file listing
//! from one snapshot to the next asks for the data and delete files that began or ended between
//! the two, and for the partition values of those files; a read of a key the listing does not
//! hold yet asks for the files of that key (first partition value) and for the table's files
//! without its partition spec. Without these indexes each of those is a sequential scan of
//! tables that hold a row per file (10⁵–10⁶ in production) and four per file for the partition
//! values. Indexes change no row DuckLake reads or writes; din's catalog
//! only gains them. The file catalog is scanned in-process, where a scan of 10⁵ rows is cheap.

use crate::{quote, Lake, Result, METADATA};

/// `(index, table, columns)` created on a PostgreSQL catalog.
pub const CHANGE_INDEXES: [(&str, &str, &str); 9] = [
    (
        "dq_data_file_begin",
        "ducklake_data_file",
        "table_id, begin_snapshot",
    ),
    (
        "dq_data_file_end",
        "ducklake_data_file",
        "table_id, end_snapshot",
    ),
    (
        "dq_delete_file_begin",
        "ducklake_delete_file",
        "table_id, begin_snapshot",
    ),
    (
        "dq_delete_file_end",
        "ducklake_delete_file",
        "table_id, end_snapshot",
    ),
    (
        "dq_delete_file_data_file",
        "ducklake_delete_file",
        "data_file_id",
    ),
    (
        "dq_file_partition_value_file",
        "ducklake_file_partition_value",
        "data_file_id",
    ),
    (
        "dq_file_partition_value_key",
        "ducklake_file_partition_value",
        "table_id, partition_key_index, partition_value",
    ),
    (
        "dq_data_file_partition",
        "ducklake_data_file",
        "table_id, partition_id",
    ),
    // The files `ducklake_add_data_files` registered (a column mapping): a read by day takes
    // them apart, their day partition values being misfiled (`files`, `files_of_days_sql`).
    (
        "dq_data_file_mapping",
        "ducklake_data_file",
        "table_id, mapping_id",
    ),
];

/// Creates [`CHANGE_INDEXES`] where missing on a PostgreSQL catalog; nothing on a file catalog.
/// Returns how many statements ran.
///
/// # Errors
/// The catalog refused a statement (a read-only role, say).
pub fn ensure(lake: &Lake) -> Result<usize> {
    if !lake.config().catalog.is_postgres() {
        return Ok(0);
    }
    for (index, table, columns) in CHANGE_INDEXES {
        let sql = format!("CREATE INDEX IF NOT EXISTS {index} ON {table} ({columns})");
        lake.exec(
            "create a catalog index",
            &format!("CALL postgres_execute('{METADATA}', {})", quote(&sql)),
        )?;
    }
    Ok(CHANGE_INDEXES.len())
}
