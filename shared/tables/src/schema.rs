//! dq's own catalog objects (decoded tables, rollups, the cursor) and their one-time setup.
//!
//! Layout (`SET PARTITIONED/SORTED BY`) is applied only to a table that lacks it: every such
//! ALTER bumps the catalog's schema version and renames inlined-data tables under din's
//! maintainer, so a reboot must mint no snapshot. Rollups use plain DDL, never a zero-row
//! CTAS.

use dq_lake::{progress, retry, Lake};

/// The `lake.ingest_progress` partition holding the raw_events snapshot cursor.
pub const CURSOR_PARTITION: &str = "lake.raw_events#snapshot";

/// The `lake.ingest_progress` column holding the fencing token of the last writer of a window.
/// Every window compare-and-swaps it (see `write::ProgressCas`), so two concurrent writers'
/// windows always update the same row and DuckLake aborts the later one at commit.
pub const FENCE_COLUMN: &str = "fence";

/// The `lake.ingest_progress` column holding where a span stands between its window
/// transactions: the span's end snapshot and the keyset position after its last committed
/// window, NULL once the span moved the cursor. A span cut short (a deadline, a yield, a killed
/// Lambda) resumes there instead of re-reading its committed windows.
pub const RESUME_COLUMN: &str = "span_resume";

const TSTZ: &str = "TIMESTAMP WITH TIME ZONE";

/// A column: name and DuckDB type.
type Column = (&'static str, &'static str);

/// A signal value as stored, in `lake.signals` and `lake.signals_latest` alike: one of the
/// number, the string or the location parts is set, the others are zero.
const VALUE_COLUMNS: [Column; 6] = [
    ("value_number", "DOUBLE"),
    ("value_string", "VARCHAR"),
    ("loc_lat", "DOUBLE"),
    ("loc_lon", "DOUBLE"),
    ("loc_hdop", "DOUBLE"),
    ("loc_heading", "DOUBLE"),
];

/// The per-name summary both rollups keep.
const SUMMARY_COLUMNS: [Column; 3] = [
    ("count", "BIGINT"),
    ("first_seen", TSTZ),
    ("last_seen", TSTZ),
];

/// The `parts` one after another. Only used in const items, where a wrong `N` (or an index out
/// of range) fails the build.
#[allow(clippy::indexing_slicing)]
const fn columns<const N: usize>(parts: &[&[Column]]) -> [Column; N] {
    let mut out = [("", ""); N];
    let mut n = 0;
    let mut p = 0;
    while p < parts.len() {
        let part = parts[p];
        let mut i = 0;
        while i < part.len() {
            out[n] = part[i];
            n += 1;
            i += 1;
        }
        p += 1;
    }
    assert!(n == N, "N must be the number of columns");
    out
}

/// `lake.signals` columns in table order (the Arrow batches are built in this order).
pub const SIGNAL_COLUMNS: [(&str, &str); 13] = columns(&[
    &[
        ("subject", "VARCHAR"),
        ("subject_bucket", "INTEGER"),
        ("name", "VARCHAR"),
        ("timestamp", TSTZ),
        ("source", "VARCHAR"),
        ("producer", "VARCHAR"),
        ("cloud_event_id", "VARCHAR"),
    ],
    &VALUE_COLUMNS,
]);

/// `lake.events` columns in table order.
pub const EVENT_COLUMNS: [(&str, &str); 12] = [
    ("subject", "VARCHAR"),
    ("subject_bucket", "INTEGER"),
    ("source", "VARCHAR"),
    ("producer", "VARCHAR"),
    ("cloud_event_id", "VARCHAR"),
    ("type", "VARCHAR"),
    ("data_version", "VARCHAR"),
    ("name", "VARCHAR"),
    ("timestamp", TSTZ),
    ("duration_ns", "UBIGINT"),
    ("metadata", "VARCHAR"),
    ("tags", "VARCHAR[]"),
];

/// `lake.signals_latest` columns (latest value and summary per subject and name), also the named
/// INSERT column list.
pub const SIGNALS_LATEST_COLUMNS: [(&str, &str); 14] = columns(&[
    &[
        ("subject", "VARCHAR"),
        ("subject_bucket", "INTEGER"),
        ("name", "VARCHAR"),
        ("timestamp", TSTZ),
    ],
    &VALUE_COLUMNS,
    &[("loc_ts", TSTZ)],
    &SUMMARY_COLUMNS,
]);

/// `lake.events_latest` columns (event summary per subject and name).
pub const EVENTS_LATEST_COLUMNS: [(&str, &str); 6] = columns(&[
    &[
        ("subject", "VARCHAR"),
        ("subject_bucket", "INTEGER"),
        ("name", "VARCHAR"),
    ],
    &SUMMARY_COLUMNS,
]);

/// One of dq's tables and the layout it gets at first creation.
struct Table {
    name: &'static str,
    columns: &'static [Column],
    partition: &'static str,
    sort: Option<&'static str>,
}

/// The partition spec of `lake.signals` and `lake.events` (the `SET PARTITIONED BY` list).
pub const TIME_PARTITION: &str =
    r#"subject_bucket, year("timestamp"), month("timestamp"), day("timestamp")"#;

/// The partition spec of the rollups: the bucket alone.
pub const BUCKET_PARTITION: &str = "subject_bucket";

const TABLES: [Table; 4] = [
    Table {
        name: "signals",
        columns: &SIGNAL_COLUMNS,
        partition: TIME_PARTITION,
        sort: Some(r#"subject, "timestamp""#),
    },
    Table {
        name: "events",
        columns: &EVENT_COLUMNS,
        partition: TIME_PARTITION,
        sort: Some(r#"subject, "timestamp""#),
    },
    Table {
        name: "signals_latest",
        columns: &SIGNALS_LATEST_COLUMNS,
        partition: BUCKET_PARTITION,
        sort: None,
    },
    Table {
        name: "events_latest",
        columns: &EVENTS_LATEST_COLUMNS,
        partition: BUCKET_PARTITION,
        sort: None,
    },
];

/// A quoted column list, e.g. `"subject", "timestamp"`.
pub fn column_list(columns: &[(&str, &str)]) -> String {
    columns
        .iter()
        .map(|(n, _)| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `CREATE TABLE <qualified> (<columns>)`.
pub fn create_sql(qualified: &str, columns: &[(&str, &str)], if_not_exists: bool) -> String {
    let cols: Vec<String> = columns
        .iter()
        .map(|(n, t)| format!("\"{n}\" {t}"))
        .collect();
    let ine = if if_not_exists { "IF NOT EXISTS " } else { "" };
    format!("CREATE TABLE {ine}{qualified} ({})", cols.join(", "))
}

/// What [`ensure`] did: the tables it created and the layout pieces it applied.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct SchemaReport {
    /// Tables created by this call.
    pub created: Vec<&'static str>,
    /// `SET PARTITIONED/SORTED BY` statements issued (zero on every reboot).
    pub layout_statements: usize,
    /// Columns added to a table created by an older build (`table.column`; empty on reboot).
    pub columns_added: Vec<&'static str>,
}

/// Creates dq's tables where missing, lays out only what lacks a layout, creates
/// `lake.ingest_progress` once (adding its fence and resume columns to an older catalog; each
/// materializer seeds its own cursor row in it, `dq_materialize`), creates
/// `meta.din_consumer_progress` defensively and, on PostgreSQL, the catalog's change indexes.
/// Retried on commit conflicts (two writers bootstrapping a fresh catalog).
pub fn ensure(lake: &Lake) -> dq_lake::Result<SchemaReport> {
    let mut report = SchemaReport::default();
    for table in &TABLES {
        retry::on_conflict("ensure decoded table", || {
            ensure_table(lake, table, &mut report)
        })?;
    }
    retry::on_conflict("ensure ingest_progress", || {
        lake.exec(
            "create lake.ingest_progress",
            &format!(
                "CREATE TABLE IF NOT EXISTS lake.ingest_progress \
                 (partition VARCHAR, cursor VARCHAR, {FENCE_COLUMN} BIGINT, {RESUME_COLUMN} VARCHAR)"
            ),
        )?;
        // A catalog created by an older build (or Go dq) lacks these: add them once. Probed
        // first because every ALTER mints a snapshot and bumps the schema version.
        for (column, ty, added) in [
            (FENCE_COLUMN, "BIGINT", "ingest_progress.fence"),
            (RESUME_COLUMN, "VARCHAR", "ingest_progress.span_resume"),
        ] {
            if !has_column(lake, "ingest_progress", column)? {
                lake.exec(
                    "add a column to lake.ingest_progress",
                    &format!(
                        "ALTER TABLE lake.ingest_progress ADD COLUMN IF NOT EXISTS {column} {ty}"
                    ),
                )?;
                report.columns_added.push(added);
            }
        }
        Ok(())
    })?;
    progress::ensure(lake)?;
    // Listing refreshes stay exact without them, only slower: a role that may not index din's
    // catalog is told, not stopped.
    if let Err(e) = dq_lake::indexes::ensure(lake) {
        tracing::warn!(error = %e, "catalog change indexes not created; file listings refresh by scans");
    }
    Ok(report)
}

fn ensure_table(lake: &Lake, table: &Table, report: &mut SchemaReport) -> dq_lake::Result<()> {
    let qualified = format!("lake.{}", table.name);
    if !exists(lake, table.name)? {
        // Create and lay out in one transaction: no window where the table exists unlaid-out.
        let mut sql = vec![
            "BEGIN".to_owned(),
            create_sql(&qualified, table.columns, false),
            format!(
                "ALTER TABLE {qualified} SET PARTITIONED BY ({})",
                table.partition
            ),
        ];
        if let Some(sort) = table.sort {
            sql.push(format!("ALTER TABLE {qualified} SET SORTED BY ({sort})"));
        }
        sql.push("COMMIT".to_owned());
        let batch = sql.join(";\n");
        if let Err(e) = lake.exec(&format!("create {qualified}"), &batch) {
            let _ = lake.exec("rollback", "ROLLBACK");
            return Err(e);
        }
        report.created.push(table.name);
        report.layout_statements += 1 + usize::from(table.sort.is_some());
        return Ok(());
    }
    // Exists: lay out only what is missing (a table created by an older build or by hand).
    let layout = dq_lake::raw::table_layout(lake, table.name)?;
    if layout.partition.is_empty() {
        lake.exec(
            &format!("partition {qualified}"),
            &format!(
                "ALTER TABLE {qualified} SET PARTITIONED BY ({})",
                table.partition
            ),
        )?;
        report.layout_statements += 1;
    }
    if let (Some(sort), true) = (table.sort, layout.sort.is_empty()) {
        lake.exec(
            &format!("sort {qualified}"),
            &format!("ALTER TABLE {qualified} SET SORTED BY ({sort})"),
        )?;
        report.layout_statements += 1;
    }
    Ok(())
}

/// True when `lake.main.<table>` exists ([`dq_lake::table_exists`]).
pub fn exists(lake: &Lake, table: &str) -> dq_lake::Result<bool> {
    dq_lake::table_exists(lake.conn(), table)
        .map_err(|e| lake.error(&format!("probe lake.{table}"), e))
}

/// True when `lake.main.<table>` has a column `column`.
pub fn has_column(lake: &Lake, table: &str, column: &str) -> dq_lake::Result<bool> {
    lake.conn()
        .query_row(
            "SELECT count(*) FROM duckdb_columns() WHERE database_name = 'lake' AND schema_name = 'main' \
             AND table_name = ? AND column_name = ?",
            [table, column],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n > 0)
        .map_err(|e| lake.error(&format!("probe lake.{table}.{column}"), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ddl_quotes_keywords() {
        let sql = create_sql("lake.signals", &SIGNAL_COLUMNS, false);
        assert!(
            sql.contains("\"timestamp\" TIMESTAMP WITH TIME ZONE"),
            "{sql}"
        );
        assert_eq!(
            column_list(&EVENTS_LATEST_COLUMNS[..2]),
            "\"subject\", \"subject_bucket\""
        );
    }
    #[test]
    fn composed_column_lists_keep_table_order() {
        let names = |cols: &[Column]| cols.iter().map(|(n, _)| *n).collect::<Vec<_>>();
        assert_eq!(
            names(&SIGNALS_LATEST_COLUMNS),
            [
                "subject",
                "subject_bucket",
                "name",
                "timestamp",
                "value_number",
                "value_string",
                "loc_lat",
                "loc_lon",
                "loc_hdop",
                "loc_heading",
                "loc_ts",
                "count",
                "first_seen",
                "last_seen"
            ]
        );
        assert_eq!(
            names(&SIGNAL_COLUMNS)[6..8],
            ["cloud_event_id", "value_number"]
        );
        assert_eq!(
            names(&EVENTS_LATEST_COLUMNS),
            [
                "subject",
                "subject_bucket",
                "name",
                "count",
                "first_seen",
                "last_seen"
            ]
        );
    }
}
