//! `lake.raw_events`, din's table: the exact DDL, first-creation-only layout, the
//! layout as the catalog records it, and the Arrow schema of its rows (column order is the
//! contract: din's appender writes positionally).

use std::sync::Arc;

use duckdb::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};

use crate::{duckdb, retry, Lake, Result};

/// The table's name in schema `main` of `lake`.
pub const TABLE: &str = "raw_events";

/// The 13 columns in contract order with their DuckDB types.
pub const COLUMNS: [(&str, &str); 13] = [
    ("subject", "VARCHAR"),
    ("time", "TIMESTAMP WITH TIME ZONE"),
    ("type", "VARCHAR"),
    ("id", "VARCHAR"),
    ("source", "VARCHAR"),
    ("producer", "VARCHAR"),
    ("data_content_type", "VARCHAR"),
    ("data_version", "VARCHAR"),
    ("extras", "VARCHAR"),
    ("data", "VARCHAR"),
    ("data_base64", "BLOB"),
    ("data_index_key", "VARCHAR"),
    ("voids_id", "VARCHAR"),
];

/// din's partition spec of `raw_events`: the list its one `SET PARTITIONED BY` names.
pub const PARTITION: &str = r#"type, year("time"), month("time"), day("time")"#;
const SORT_SQL: &str = r#"ALTER TABLE lake.raw_events SET SORTED BY (subject, "time")"#;

/// The `CREATE TABLE IF NOT EXISTS` statement, built from [`COLUMNS`].
pub fn create_sql() -> String {
    let cols: Vec<String> = COLUMNS
        .iter()
        .map(|(n, t)| format!("{} {t}", quote_ident(n)))
        .collect();
    format!(
        "CREATE TABLE IF NOT EXISTS lake.raw_events ({})",
        cols.join(", ")
    )
}

fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Arrow schema matching the table column for column (`time` as UTC microseconds).
pub fn arrow_schema() -> SchemaRef {
    let fields: Vec<Field> = COLUMNS
        .iter()
        .map(|(name, ty)| {
            let dt = match *ty {
                "TIMESTAMP WITH TIME ZONE" => {
                    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
                }
                "BLOB" => DataType::Binary,
                _ => DataType::Utf8,
            };
            Field::new(*name, dt, true)
        })
        .collect();
    Arc::new(Schema::new(fields))
}

/// What [`ensure`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EnsureOutcome {
    /// The table did not exist and was created.
    pub created: bool,
    /// The partition spec was (re)applied.
    pub partitioned: bool,
    /// The sort spec was (re)applied.
    pub sorted: bool,
}

/// Creates `lake.raw_events` if missing and applies only the layout pieces that are missing.
/// Each `SET PARTITIONED/SORTED BY` bumps the catalog's schema version and renames inlined-data
/// tables under din's maintainer, so a reopen of a laid-out table must change nothing.
pub fn ensure(lake: &Lake) -> Result<EnsureOutcome> {
    retry::on_conflict("ensure raw_events", || {
        let mut out = EnsureOutcome {
            created: !exists(lake)?,
            ..Default::default()
        };
        if out.created {
            lake.exec("create lake.raw_events", &create_sql())?;
        }
        let layout = layout(lake)?;
        if layout.partition.is_empty() {
            lake.exec(
                "partition lake.raw_events",
                &format!("ALTER TABLE lake.raw_events SET PARTITIONED BY ({PARTITION})"),
            )?;
            out.partitioned = true;
        }
        if layout.sort.is_empty() {
            lake.exec("sort lake.raw_events", SORT_SQL)?;
            out.sorted = true;
        }
        Ok(out)
    })
}

/// True when `lake.main.raw_events` exists ([`crate::table_exists`]).
pub fn exists(lake: &Lake) -> Result<bool> {
    crate::table_exists(lake.conn(), TABLE).map_err(|e| lake.error("probe lake.raw_events", e))
}

/// The table's layout as the catalog's own metadata records it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Layout {
    /// `(column name, type as stored, nulls allowed)` in column order.
    pub columns: Vec<(String, String, bool)>,
    /// `(column name, transform)` of the active partition spec, in key order.
    pub partition: Vec<(String, String)>,
    /// `(expression, direction)` of the active sort spec, in key order.
    pub sort: Vec<(String, String)>,
}

/// Reads [`Layout`] for `raw_events` from the metadata catalog ([`crate::METADATA`]; active
/// rows only).
pub fn layout(lake: &Lake) -> Result<Layout> {
    table_layout(lake, TABLE)
}

/// Reads [`Layout`] for any table of `lake.main`.
pub fn table_layout(lake: &Lake, table: &str) -> Result<Layout> {
    let m = crate::METADATA;
    let table_id = format!("({})", crate::live_table_id_sql());
    let columns = format!(
        "SELECT column_name, column_type, nulls_allowed FROM {m}.ducklake_column \
         WHERE table_id = {table_id} AND end_snapshot IS NULL AND parent_column IS NULL ORDER BY column_order"
    );
    let partition = format!(
        "SELECT c.column_name, pc.transform \
         FROM {m}.ducklake_partition_info pi \
         JOIN {m}.ducklake_partition_column pc \
           ON pc.partition_id = pi.partition_id AND pc.table_id = pi.table_id \
         JOIN {m}.ducklake_column c \
           ON c.column_id = pc.column_id AND c.table_id = pc.table_id AND c.end_snapshot IS NULL \
         WHERE pi.table_id = {table_id} AND pi.end_snapshot IS NULL ORDER BY pc.partition_key_index"
    );
    let sort = format!(
        "SELECT se.expression, se.sort_direction \
         FROM {m}.ducklake_sort_info si \
         JOIN {m}.ducklake_sort_expression se \
           ON se.sort_id = si.sort_id AND se.table_id = si.table_id \
         WHERE si.table_id = {table_id} AND si.end_snapshot IS NULL ORDER BY se.sort_key_index"
    );
    Ok(Layout {
        columns: query(lake, table, "columns", &columns, |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?,
        partition: query(lake, table, "partitioning", &partition, |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?,
        sort: query(lake, table, "sort order", &sort, |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?,
    })
}

/// The rows of `lake.raw_events` data files added by each snapshot in `(after, upto]`,
/// ascending by snapshot, read from the metadata catalog. Snapshots that added none are
/// absent, and inlined inserts are not counted (at most the inline limit of rows each): a size
/// estimate for planning a span, never a count to rely on.
pub fn inserted_rows(lake: &Lake, after: i64, upto: i64) -> Result<Vec<(i64, u64)>> {
    let m = crate::METADATA;
    let ctx = "read the rows each snapshot added to lake.raw_events";
    let table_id: Option<i64> = lake
        .conn()
        .query_row(
            &format!("SELECT max(table_id) FROM ({})", crate::live_table_id_sql()),
            [TABLE],
            |r| r.get(0),
        )
        .map_err(|e| lake.error(ctx, e))?;
    let Some(table_id) = table_id else {
        return Ok(Vec::new());
    };
    // Literal integers, so the PostgreSQL scanner pushes the filters into the catalog.
    let sql = format!(
        "SELECT begin_snapshot, sum(record_count)::UBIGINT FROM {m}.ducklake_data_file \
         WHERE table_id = {table_id} AND begin_snapshot > {after} AND begin_snapshot <= {upto} \
         GROUP BY begin_snapshot ORDER BY begin_snapshot"
    );
    let mut stmt = lake.conn().prepare(&sql).map_err(|e| lake.error(ctx, e))?;
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .and_then(|rows| rows.collect())
        .map_err(|e| lake.error(ctx, e))
}

/// Runs one metadata query bound to the table name and collects its rows.
fn query<T>(
    lake: &Lake,
    table: &str,
    what: &str,
    sql: &str,
    row: impl FnMut(&duckdb::Row<'_>) -> duckdb::Result<T>,
) -> Result<Vec<T>> {
    let ctx = || format!("read {what} of lake.{table}");
    let mut stmt = lake
        .conn()
        .prepare(sql)
        .map_err(|e| lake.error(&ctx(), e))?;
    stmt.query_map([table], row)
        .and_then(|rows| rows.collect())
        .map_err(|e| lake.error(&ctx(), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_sql_quotes_every_column() {
        let sql = create_sql();
        assert!(sql.starts_with("CREATE TABLE IF NOT EXISTS lake.raw_events (\"subject\" VARCHAR, \"time\" TIMESTAMP WITH TIME ZONE"));
        assert_eq!(arrow_schema().fields().len(), 13);
    }
}
