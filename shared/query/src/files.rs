//! Direct reads of `lake.signals` and `lake.events`: a table's file list read from the catalog
//! once per snapshot.
//!
//! A DuckLake scan lists every live file of the table, with its statistics, from the catalog on
//! every query, so a one-vehicle read costs time proportional to the whole table's file count
//! (measured: ~20 ms of a 22 ms read on a file catalog with 3,570 files, ~90 ms on PostgreSQL)
//! although it opens only the few files of one `subject_bucket` and a few days. Data files are
//! immutable and a snapshot id fixes a table's file list, so a list loaded for snapshot S is exact
//! for every read of S: a read takes its request's pinned snapshot ([`dq_lake::request_snapshot`])
//! and loads the list when no cached one is of that snapshot. The read then scans only the
//! subject's bucket's files whose day partition meets the window, with `read_parquet`, under the
//! same SQL. Nothing is cached beyond the snapshot's own metadata, so answers equal the DuckLake
//! scan's (tests pin it).
//!
//! Whatever a plain parquet read would not reproduce exactly sends the read back to the DuckLake
//! scan: a selected file with a delete file, an encryption key or a column mapping; a bucket
//! with inlined rows; a listing that does not match DuckLake's own. A read with no file to read
//! scans an empty relation of the table's columns: the DuckLake scan would find no row either.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, NaiveDate};
use dq_lake::duckdb::{self, Connection};
use dq_lake::METADATA as META;
use dq_lake::{quote, Snapshot};
use dq_tables::schema::{EVENT_COLUMNS, SIGNAL_COLUMNS};

/// Listings kept per table: the newest two snapshots, so requests pinned on either side of a
/// commit do not reload each other's.
const CACHED_LISTINGS: usize = 2;

/// dq's partition spec of `lake.signals` and `lake.events`, as `transform:column` by key.
const LAYOUT: [&str; 4] = [
    "identity:subject_bucket",
    "year:timestamp",
    "month:timestamp",
    "day:timestamp",
];

/// A table read directly from its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileTable {
    /// `lake.signals`.
    Signals,
    /// `lake.events`.
    Events,
}

impl FileTable {
    /// The table's name in the `lake` schema `main`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            FileTable::Signals => "signals",
            FileTable::Events => "events",
        }
    }

    /// A relation with the table's columns, types included, and no rows.
    fn empty(self) -> String {
        let columns: &[(&str, &str)] = match self {
            FileTable::Signals => &SIGNAL_COLUMNS,
            FileTable::Events => &EVENT_COLUMNS,
        };
        let list: Vec<String> = columns
            .iter()
            .map(|(name, ty)| format!("CAST(NULL AS {ty}) AS \"{name}\""))
            .collect();
        format!("(SELECT {} LIMIT 0)", list.join(", "))
    }
}

/// The per-snapshot file lists of one table, shared by every reader of an engine.
pub(crate) struct TableFiles {
    table: FileTable,
    /// Newest snapshot first.
    listings: Mutex<Vec<Arc<Listing>>>,
}

/// The table's files at one snapshot.
#[derive(Debug, Default)]
struct Listing {
    snapshot: i64,
    /// Files by bucket, each with its day partition.
    by_bucket: HashMap<i32, Vec<DataFile>>,
    /// Files without dq's partition values: read for every bucket and day.
    unpartitioned: Vec<DataFile>,
    /// Buckets with inlined rows at this snapshot.
    inlined: HashSet<i32>,
    /// False when the listing could not be matched with DuckLake's own.
    usable: bool,
}

/// A data file row of the catalog: its stored path, dq partition `(bucket, day)` and whether
/// the catalog marks it readable as plain parquet.
type CatalogFile = (String, Option<(i32, NaiveDate)>, bool);

#[derive(Debug, Clone)]
struct DataFile {
    path: String,
    day: Option<NaiveDate>,
    /// Readable by `read_parquet` alone: no delete file, no encryption, no column mapping.
    plain: bool,
}

impl Listing {
    /// A listing at `snapshot` that sends every read to the DuckLake scan.
    fn unusable(snapshot: i64) -> Listing {
        Listing {
            snapshot,
            ..Listing::default()
        }
    }

    /// The files a read of `bucket` over `[from_us, to_us)` must scan, or `None` when only the
    /// DuckLake scan answers it exactly. A `from_us` before any representable day reads from
    /// the first file (an unbounded look-back).
    fn select(&self, bucket: i32, from_us: i64, to_us: i64) -> Option<Vec<&str>> {
        if !self.usable || self.inlined.contains(&bucket) {
            return None;
        }
        let first =
            DateTime::from_timestamp_micros(from_us).map_or(NaiveDate::MIN, |t| t.date_naive());
        let last = DateTime::from_timestamp_micros(to_us.checked_sub(1)?)?.date_naive();
        let in_window = |f: &&DataFile| f.day.is_none_or(|d| d >= first && d <= last);
        let files: Vec<&DataFile> = self
            .by_bucket
            .get(&bucket)
            .into_iter()
            .flatten()
            .filter(in_window)
            .chain(&self.unpartitioned)
            .collect();
        if files.iter().any(|f| !f.plain) {
            return None;
        }
        Some(files.iter().map(|f| f.path.as_str()).collect())
    }
}

impl TableFiles {
    /// No listing loaded yet.
    pub(crate) fn new(table: FileTable) -> TableFiles {
        TableFiles {
            table,
            listings: Mutex::new(Vec::new()),
        }
    }

    /// The relations reads of `bucket` over each of `windows` (`[from_us, to_us)`) scan in
    /// place of the table at `snapshot` — `read_parquet([…])` over its files — or `None` when
    /// any of them needs the DuckLake scan.
    ///
    /// # Errors
    /// Catalog reads failed (the caller falls back to the DuckLake scan).
    pub(crate) fn relations<const N: usize>(
        &self,
        conn: &Connection,
        snapshot: Snapshot,
        bucket: i32,
        windows: [(i64, i64); N],
    ) -> duckdb::Result<Option<[String; N]>> {
        let listing = self.at(conn, snapshot)?;
        let relations = windows.map(|(from_us, to_us)| {
            listing.select(bucket, from_us, to_us).map(|paths| {
                if paths.is_empty() {
                    return self.table.empty();
                }
                let list: Vec<String> = paths.into_iter().map(quote).collect();
                format!("read_parquet([{}])", list.join(", "))
            })
        });
        if relations.iter().any(Option::is_none) {
            return Ok(None);
        }
        Ok(Some(relations.map(Option::unwrap_or_default)))
    }

    /// The listing at `snapshot`, loaded unless cached. One loader at a time: the others wait
    /// for its result instead of loading the same snapshot again.
    fn at(&self, conn: &Connection, snapshot: Snapshot) -> duckdb::Result<Arc<Listing>> {
        let mut cached = self.listings.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(l) = cached.iter().find(|l| l.snapshot == snapshot.0) {
            return Ok(Arc::clone(l));
        }
        let started = std::time::Instant::now();
        let listing = Arc::new(load(conn, self.table, snapshot.0)?);
        tracing::debug!(
            table = self.table.name(),
            snapshot = snapshot.0,
            usable = listing.usable,
            buckets = listing.by_bucket.len(),
            took_ms = started.elapsed().as_millis() as u64,
            "file listing loaded"
        );
        cached.push(Arc::clone(&listing));
        cached.sort_by_key(|l| std::cmp::Reverse(l.snapshot));
        cached.truncate(CACHED_LISTINGS);
        Ok(listing)
    }
}

/// `begin_snapshot <= S AND (end_snapshot IS NULL OR end_snapshot > S)` for `alias`.
fn live(alias: &str, snapshot: i64) -> String {
    format!(
        "{alias}.begin_snapshot <= {snapshot} AND \
         ({alias}.end_snapshot IS NULL OR {alias}.end_snapshot > {snapshot})"
    )
}

fn load(conn: &Connection, table: FileTable, s: i64) -> duckdb::Result<Listing> {
    let name = table.name();
    let mut listing = Listing::unusable(s);
    let table: Option<i64> = conn
        .query_row(
            &format!(
                "SELECT t.table_id FROM {META}.ducklake_table t \
                 JOIN {META}.ducklake_schema sc ON sc.schema_id = t.schema_id \
                 WHERE sc.schema_name = 'main' AND t.table_name = '{name}' AND {} AND {}",
                live("t", s),
                live("sc", s)
            ),
            [],
            |r| r.get(0),
        )
        .map(Some)
        .or_else(|e| match e {
            duckdb::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })?;
    let Some(table) = table else {
        return Ok(listing);
    };

    // Partition specs laid out as dq's; files of any other spec are read for every bucket.
    let mut stmt = conn.prepare(&format!(
        "SELECT pc.partition_id, \
           string_agg(pc.transform || ':' || c.column_name, ',' ORDER BY pc.partition_key_index) \
         FROM {META}.ducklake_partition_column pc \
         JOIN {META}.ducklake_column c ON c.table_id = pc.table_id AND c.column_id = pc.column_id \
           AND {} \
         WHERE pc.table_id = {table} GROUP BY pc.partition_id",
        live("c", s)
    ))?;
    let dq_layout: HashSet<i64> = stmt
        .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?
        .filter_map(|row| match row {
            Ok((id, spec)) if spec == LAYOUT.join(",") => Some(Ok(id)),
            Ok(_) => None,
            Err(e) => Some(Err(e)),
        })
        .collect::<duckdb::Result<_>>()?;

    // The catalog's rows by file name (DuckLake names files by UUID), with partition values.
    let mut stmt = conn.prepare(&format!(
        "SELECT f.path, f.partition_id, f.mapping_id IS NULL AND f.encryption_key IS NULL, \
           string_agg(p.partition_value, '/' ORDER BY p.partition_key_index) \
         FROM {META}.ducklake_data_file f \
         LEFT JOIN {META}.ducklake_file_partition_value p ON p.data_file_id = f.data_file_id \
         WHERE f.table_id = {table} AND {} \
         GROUP BY f.data_file_id, f.path, f.partition_id, f.mapping_id, f.encryption_key",
        live("f", s)
    ))?;
    let mut by_name: HashMap<String, CatalogFile> = HashMap::new();
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, Option<i64>>(1)?,
            r.get::<_, bool>(2)?,
            r.get::<_, Option<String>>(3)?,
        ))
    })?;
    for row in rows {
        let (path, partition_id, plain, values) = row?;
        let partition = partition_id
            .filter(|id| dq_layout.contains(id))
            .and_then(|_| dq_partition(values.as_deref().unwrap_or_default()));
        let name = file_name(&path).to_owned();
        if by_name.insert(name, (path, partition, plain)).is_some() {
            return Ok(Listing::unusable(s)); // two files of one name: not matchable, never guess
        }
    }

    // DuckLake's own listing at S: resolved paths, delete files, encryption.
    let mut stmt = conn.prepare(&format!(
        "SELECT data_file, delete_file IS NULL AND data_file_encryption_key IS NULL \
         FROM ducklake_list_files('lake', '{name}', schema => 'main', snapshot_version => {s})"
    ))?;
    let files = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, bool>(1)?)))?;
    let mut matched = 0usize;
    for file in files {
        let (path, plain) = file?;
        let Some((relative, partition, catalog_plain)) = by_name.get(file_name(&path)) else {
            return Ok(Listing::unusable(s));
        };
        if !path.ends_with(relative.as_str()) {
            return Ok(Listing::unusable(s));
        }
        matched += 1;
        let file = DataFile {
            path,
            day: partition.map(|(_, d)| d),
            plain: plain && *catalog_plain,
        };
        match partition {
            Some((bucket, _)) => listing.by_bucket.entry(*bucket).or_default().push(file),
            None => listing.unpartitioned.push(file),
        }
    }
    if matched != by_name.len() {
        return Ok(Listing::unusable(s));
    }

    // Inlined rows live in the catalog, not in files: their buckets take the DuckLake scan.
    let mut stmt = conn.prepare(&format!(
        "SELECT table_name FROM {META}.ducklake_inlined_data_tables WHERE table_id = {table}"
    ))?;
    let inlined_tables = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<duckdb::Result<Vec<_>>>()?;
    for name in inlined_tables {
        if !is_inlined_table_name(&name) {
            return Ok(Listing::unusable(s));
        }
        let mut stmt = conn.prepare(&format!(
            "SELECT DISTINCT subject_bucket FROM {META}.{name} i WHERE {}",
            live("i", s)
        ))?;
        for bucket in stmt.query_map([], |r| r.get::<_, i32>(0))? {
            listing.inlined.insert(bucket?);
        }
    }
    listing.usable = true;
    Ok(listing)
}

/// `(bucket, day)` from dq's four partition values joined by `/`, if they parse.
fn dq_partition(values: &str) -> Option<(i32, NaiveDate)> {
    let parts: Vec<&str> = values.split('/').collect();
    let [bucket, year, month, day] = parts[..] else {
        return None;
    };
    let day = NaiveDate::from_ymd_opt(year.parse().ok()?, month.parse().ok()?, day.parse().ok()?)?;
    Some((bucket.parse().ok()?, day))
}

fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// DuckLake's `ducklake_inlined_data_<table id>_<schema version>`: the only names put into SQL.
fn is_inlined_table_name(name: &str) -> bool {
    name.strip_prefix("ducklake_inlined_data_")
        .and_then(|rest| rest.split_once('_'))
        .is_some_and(|(t, v)| {
            !t.is_empty()
                && !v.is_empty()
                && t.bytes().all(|b| b.is_ascii_digit())
                && v.bytes().all(|b| b.is_ascii_digit())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, day: Option<(i32, u32, u32)>, plain: bool) -> DataFile {
        DataFile {
            path: path.into(),
            day: day.map(|(y, m, d)| NaiveDate::from_ymd_opt(y, m, d).unwrap()),
            plain,
        }
    }

    fn us(y: i32, m: u32, d: u32, h: u32) -> i64 {
        NaiveDate::from_ymd_opt(y, m, d)
            .unwrap()
            .and_hms_opt(h, 0, 0)
            .unwrap()
            .and_utc()
            .timestamp_micros()
    }

    fn listing() -> Listing {
        Listing {
            snapshot: 7,
            by_bucket: HashMap::from([
                (
                    3,
                    vec![
                        file("a", Some((2025, 6, 1)), true),
                        file("b", Some((2025, 6, 2)), true),
                        file("c", Some((2025, 6, 3)), true),
                    ],
                ),
                (4, vec![file("d", Some((2025, 6, 2)), false)]),
            ]),
            unpartitioned: vec![],
            inlined: HashSet::from([5]),
            usable: true,
        }
    }

    #[test]
    fn selects_the_buckets_days_of_a_half_open_window() {
        let l = listing();
        // [Jun 2 00:00, Jun 3 00:00): Jun 3's file holds no row of the window.
        assert_eq!(
            l.select(3, us(2025, 6, 2, 0), us(2025, 6, 3, 0)),
            Some(vec!["b"])
        );
        assert_eq!(
            l.select(3, us(2025, 6, 1, 23), us(2025, 6, 3, 1)),
            Some(vec!["a", "b", "c"])
        );
    }

    #[test]
    fn falls_back_when_a_plain_read_would_differ() {
        let mut l = listing();
        let day = (us(2025, 6, 2, 0), us(2025, 6, 3, 0));
        assert_eq!(l.select(4, day.0, day.1), None, "delete file");
        assert_eq!(l.select(5, day.0, day.1), None, "inlined rows");
        assert_eq!(
            l.select(6, day.0, day.1),
            Some(vec![]),
            "no file: nothing to read"
        );
        l.unpartitioned.push(file("u", None, true));
        assert_eq!(l.select(6, day.0, day.1), Some(vec!["u"]));
        assert_eq!(l.select(3, day.0, day.1), Some(vec!["b", "u"]));
        l.usable = false;
        assert_eq!(l.select(3, day.0, day.1), None, "unmatched listing");
    }

    #[test]
    fn partition_values_and_names_are_validated() {
        assert_eq!(
            dq_partition("12/2025/6/30"),
            Some((12, NaiveDate::from_ymd_opt(2025, 6, 30).unwrap()))
        );
        assert_eq!(dq_partition("12/2025/6/31"), None);
        assert_eq!(dq_partition("12/2025/6"), None);
        assert_eq!(dq_partition("12/2025/6/30/1"), None);
        assert!(is_inlined_table_name("ducklake_inlined_data_4_12"));
        assert!(!is_inlined_table_name("ducklake_inlined_data_4_"));
        assert!(!is_inlined_table_name("ducklake_inlined_data_4_1; DROP"));
        assert_eq!(file_name("s/b=1/x.parquet"), "x.parquet");
    }
}
