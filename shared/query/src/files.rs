//! Direct reads of `lake.signals` and `lake.events`: a table's file list read from the catalog
//! once, then moved forward snapshot by snapshot.
//!
//! A DuckLake scan lists every live file of the table, with its statistics, from the catalog on
//! every query, so a one-vehicle read costs time proportional to the whole table's file count
//! (measured: ~20 ms of a 22 ms read on a file catalog with 3,570 files, ~90 ms on PostgreSQL)
//! although it opens only the few files of one `subject_bucket` and a few days. Data files are
//! immutable and a snapshot id fixes a table's file list, so a list loaded for snapshot S is exact
//! for every read of S: a read takes its request's pinned snapshot ([`dq_lake::request_snapshot`])
//! and, when no cached list is of that snapshot, moves the newest older one forward by the
//! catalog rows that changed in between (`refresh`; time ∝ the commits, not the table) or,
//! when that cannot be exact, loads the list whole (`load`). The read then scans only the
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
use std::time::{Duration, Instant};

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

/// How a listing came to be: what [`TableFiles::listing`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListingSource {
    /// Already held for that snapshot.
    Cached,
    /// The cached listing of an older snapshot, moved forward by the catalog rows that changed
    /// between the two snapshots.
    Refreshed,
    /// Read whole from the catalog (first use, or when no refresh could be exact).
    Loaded,
}

/// One table's listing at one snapshot, as a read would get it.
#[derive(Debug, Clone)]
pub struct ListingReport {
    /// `signals` or `events`.
    pub table: &'static str,
    /// The snapshot listed.
    pub snapshot: i64,
    /// How it was obtained.
    pub source: ListingSource,
    /// Data files at the snapshot (0 when unusable).
    pub files: usize,
    /// False when reads at this snapshot take the DuckLake scan.
    pub usable: bool,
    /// Time to obtain it.
    pub took: Duration,
}

/// The per-snapshot file lists of one table, shared by every reader of an engine.
pub(crate) struct TableFiles {
    table: FileTable,
    /// Newest snapshot first.
    listings: Mutex<Vec<Arc<Listing>>>,
    /// The metadata catalog is PostgreSQL: refreshes run inside it.
    postgres: bool,
}

/// The table's files at one snapshot.
///
/// Buckets hold their files behind an `Arc`, so a refresh copies only the buckets a commit
/// touched: cheap with 10⁵ files.
#[derive(Debug, Default, Clone)]
struct Listing {
    snapshot: i64,
    /// The table's catalog id (0 when the table does not exist at the snapshot).
    table_id: i64,
    /// The snapshot's `next_file_id`: DuckLake numbers every later file from it.
    next_file_id: i64,
    /// Partition spec ids laid out as dq's.
    dq_layout: Arc<HashSet<i64>>,
    /// What the catalog's relative paths resolve under, learned from DuckLake's own listing;
    /// `None` until a relative file was seen.
    prefix: Option<Arc<str>>,
    /// Files by bucket, each with its day partition.
    by_bucket: HashMap<i32, Arc<Vec<DataFile>>>,
    /// Files without dq's partition values: read for every bucket and day.
    unpartitioned: Arc<Vec<DataFile>>,
    /// Buckets with inlined rows at this snapshot.
    inlined: HashSet<i32>,
    /// DuckLake's inlined-data tables of the table, by name.
    inlined_tables: Arc<Vec<String>>,
    /// False when the listing could not be matched with DuckLake's own.
    usable: bool,
}

/// A data file row of the catalog: its stored path, whether that path is relative, dq
/// partition `(bucket, day)` and whether the catalog marks it readable as plain parquet.
type CatalogFile = (i64, String, bool, Option<(i32, NaiveDate)>, bool);

#[derive(Debug, Clone, PartialEq)]
struct DataFile {
    /// The catalog's `data_file_id`.
    id: i64,
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

    fn file_count(&self) -> usize {
        self.by_bucket.values().map(|f| f.len()).sum::<usize>() + self.unpartitioned.len()
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
            .flat_map(|files| files.iter())
            .filter(in_window)
            .chain(self.unpartitioned.iter())
            .collect();
        if files.iter().any(|f| !f.plain) {
            return None;
        }
        Some(files.iter().map(|f| f.path.as_str()).collect())
    }

    /// The bucket's (or the unpartitioned) files, copied for writing only when shared.
    fn group_mut(&mut self, bucket: Option<i32>) -> &mut Vec<DataFile> {
        let group = match bucket {
            Some(b) => self.by_bucket.entry(b).or_default(),
            None => &mut self.unpartitioned,
        };
        Arc::make_mut(group)
    }

    fn insert(&mut self, bucket: Option<i32>, file: DataFile) {
        self.group_mut(bucket).push(file);
    }
}

impl TableFiles {
    /// No listing loaded yet; `postgres`: the metadata catalog is PostgreSQL.
    pub(crate) fn new(table: FileTable, postgres: bool) -> TableFiles {
        TableFiles {
            table,
            listings: Mutex::new(Vec::new()),
            postgres,
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
        let (listing, _) = self.at(conn, snapshot)?;
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

    /// The listing at `snapshot` as a read would obtain it, and how.
    ///
    /// # Errors
    /// Catalog reads failed.
    pub(crate) fn listing(
        &self,
        conn: &Connection,
        snapshot: Snapshot,
    ) -> duckdb::Result<ListingReport> {
        let started = Instant::now();
        let (listing, source) = self.at(conn, snapshot)?;
        Ok(ListingReport {
            table: self.table.name(),
            snapshot: listing.snapshot,
            source,
            files: listing.file_count(),
            usable: listing.usable,
            took: started.elapsed(),
        })
    }

    /// The listing at `snapshot`: cached, else the newest older cached one refreshed, else
    /// loaded whole. One loader at a time: the others wait for its result instead of loading
    /// the same snapshot again.
    fn at(
        &self,
        conn: &Connection,
        snapshot: Snapshot,
    ) -> duckdb::Result<(Arc<Listing>, ListingSource)> {
        let mut cached = self.listings.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(l) = cached.iter().find(|l| l.snapshot == snapshot.0) {
            return Ok((Arc::clone(l), ListingSource::Cached));
        }
        let started = Instant::now();
        let base = cached
            .iter()
            .find(|l| l.snapshot < snapshot.0 && l.usable)
            .cloned();
        // A refresh that fails is logged and replaced by a whole load, never by a worse answer.
        let refreshed = base.and_then(|base| {
            refresh(conn, self.postgres, &base, snapshot.0)
                .inspect_err(|e| {
                    tracing::warn!(table = self.table.name(), error = %e, "listing refresh failed")
                })
                .ok()
                .flatten()
        });
        let (listing, source) = match refreshed {
            Some(l) => (Arc::new(l), ListingSource::Refreshed),
            None => (
                Arc::new(load(conn, self.table, snapshot.0)?),
                ListingSource::Loaded,
            ),
        };
        tracing::debug!(
            table = self.table.name(),
            snapshot = snapshot.0,
            ?source,
            usable = listing.usable,
            buckets = listing.by_bucket.len(),
            took_ms = started.elapsed().as_millis() as u64,
            "file listing"
        );
        cached.push(Arc::clone(&listing));
        cached.sort_by_key(|l| std::cmp::Reverse(l.snapshot));
        cached.truncate(CACHED_LISTINGS);
        Ok((listing, source))
    }
}

/// `begin_snapshot <= S AND (end_snapshot IS NULL OR end_snapshot > S)` for `alias`.
fn live(alias: &str, snapshot: i64) -> String {
    format!(
        "{alias}.begin_snapshot <= {snapshot} AND \
         ({alias}.end_snapshot IS NULL OR {alias}.end_snapshot > {snapshot})"
    )
}

/// `begin_snapshot` or `end_snapshot` of `alias` in `(from, to]`: the row changed between them.
fn changed(alias: &str, from: i64, to: i64) -> String {
    format!(
        "(({alias}.begin_snapshot > {from} AND {alias}.begin_snapshot <= {to}) OR \
          ({alias}.end_snapshot > {from} AND {alias}.end_snapshot <= {to}))"
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
    let next_file_id: i64 = conn.query_row(
        &format!("SELECT next_file_id FROM {META}.ducklake_snapshot WHERE snapshot_id = {s}"),
        [],
        |r| r.get(0),
    )?;

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
        "SELECT f.data_file_id, f.path, f.path_is_relative, f.partition_id, \
           f.mapping_id IS NULL AND f.encryption_key IS NULL, \
           string_agg(p.partition_value, '/' ORDER BY p.partition_key_index) \
         FROM {META}.ducklake_data_file f \
         LEFT JOIN {META}.ducklake_file_partition_value p ON p.data_file_id = f.data_file_id \
         WHERE f.table_id = {table} AND {} \
         GROUP BY f.data_file_id, f.path, f.path_is_relative, f.partition_id, f.mapping_id, \
           f.encryption_key",
        live("f", s)
    ))?;
    let mut by_name: HashMap<String, CatalogFile> = HashMap::new();
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, bool>(2)?,
            r.get::<_, Option<i64>>(3)?,
            r.get::<_, bool>(4)?,
            r.get::<_, Option<String>>(5)?,
        ))
    })?;
    for row in rows {
        let (id, path, relative, partition_id, plain, values) = row?;
        let partition = dq_partition_of(&dq_layout, partition_id, values.as_deref());
        let name = file_name(&path).to_owned();
        if by_name
            .insert(name, (id, path, relative, partition, plain))
            .is_some()
        {
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
    let mut prefixes: HashSet<String> = HashSet::new();
    for file in files {
        let (path, plain) = file?;
        let Some((id, stored, relative, partition, catalog_plain)) = by_name.get(file_name(&path))
        else {
            return Ok(Listing::unusable(s));
        };
        let Some(prefix) = path.strip_suffix(stored.as_str()) else {
            return Ok(Listing::unusable(s));
        };
        if *relative {
            prefixes.insert(prefix.to_owned());
        }
        matched += 1;
        let file = DataFile {
            id: *id,
            path,
            day: partition.map(|(_, d)| d),
            plain: plain && *catalog_plain,
        };
        listing.insert(partition.map(|(b, _)| b), file);
    }
    if matched != by_name.len() || prefixes.len() > 1 {
        return Ok(Listing::unusable(s));
    }
    listing.table_id = table;
    listing.next_file_id = next_file_id;
    listing.dq_layout = Arc::new(dq_layout);
    listing.prefix = prefixes.into_iter().next().map(Arc::from);
    let Some((tables, buckets)) = inlined(conn, table, s)? else {
        return Ok(Listing::unusable(s));
    };
    listing.inlined_tables = Arc::new(tables);
    listing.inlined = buckets;
    listing.usable = true;
    Ok(listing)
}

/// `base` moved forward to snapshot `s` by the catalog rows that changed in `(base, s]`: data
/// files that began or ended or were written since, and data files whose delete files did.
/// `None` when the result
/// could not be exact, and a whole load must answer instead: the base snapshot was expired
/// (its removed files' rows may be gone), the table was dropped, a file arrived under another
/// partition spec, or a relative path has no known prefix.
///
/// On PostgreSQL the change query runs inside the catalog (`postgres_query`), where its
/// filters meet the catalog's indexes instead of copying the file tables into DuckDB.
fn refresh(
    conn: &Connection,
    postgres: bool,
    base: &Listing,
    s: i64,
) -> duckdb::Result<Option<Listing>> {
    let (from, table) = (base.snapshot, base.table_id);
    let m = if postgres {
        String::new()
    } else {
        format!("{META}.")
    };
    // Files DuckLake wrote after the base snapshot, whatever their begin_snapshot: a flush of
    // inlined rows and a merge date their files back to the rows' own snapshots. File ids are
    // handed out in commit order from the snapshot's `next_file_id`. A literal, so PostgreSQL
    // plans with its statistics (a parameter's default estimate made it JIT-compile the
    // statement: ~35 ms at 10⁵ files).
    let next = base.next_file_id;
    let sql = format!(
        "SELECT b.kept, b.next_file_id, b.table_live, b.inlined_tables, b.inlined_buckets, \
           f.data_file_id, \
           f.path, f.path_is_relative, f.partition_id, f.catalog_plain, f.live, f.deleted, f.part \
         FROM (SELECT \
             EXISTS (SELECT 1 FROM {m}ducklake_snapshot WHERE snapshot_id = {from}) AS kept, \
             (SELECT next_file_id FROM {m}ducklake_snapshot WHERE snapshot_id = {s}) AS next_file_id, \
             EXISTS (SELECT 1 FROM {m}ducklake_table t WHERE t.table_id = {table} AND {}) \
               AS table_live, \
             {} AS inlined_tables, {} AS inlined_buckets) b \
         LEFT JOIN (SELECT f.data_file_id, f.path, f.path_is_relative, f.partition_id, \
             f.mapping_id IS NULL AND f.encryption_key IS NULL AS catalog_plain, \
             ({}) AS live, \
             EXISTS (SELECT 1 FROM {m}ducklake_delete_file d \
               WHERE d.table_id = {table} AND d.data_file_id = f.data_file_id AND {}) AS deleted, \
             (SELECT string_agg(p.partition_value, '/' ORDER BY p.partition_key_index) \
               FROM {m}ducklake_file_partition_value p \
               WHERE p.table_id = {table} AND p.data_file_id = f.data_file_id) AS part \
           FROM {m}ducklake_data_file f \
           WHERE f.table_id = {table} AND f.data_file_id IN ( \
             SELECT c.data_file_id FROM {m}ducklake_data_file c \
               WHERE c.table_id = {table} AND ({} OR c.data_file_id >= {next}) \
             UNION \
             SELECT c.data_file_id FROM {m}ducklake_delete_file c \
               WHERE c.table_id = {table} AND ({} OR c.delete_file_id >= {next}))) f ON true",
        live("t", s),
        inlined_tables_sql(&m, table),
        inlined_buckets_sql(&m, &base.inlined_tables, s),
        live("f", s),
        live("d", s),
        changed("c", from, s),
        changed("c", from, s),
    );
    let sql = if postgres {
        format!("SELECT * FROM postgres_query('{META}', {})", quote(&sql))
    } else {
        sql
    };
    let mut stmt = conn.prepare(&sql)?;
    let (mut head, mut files) = (None, Vec::new());
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        if head.is_none() {
            head = Some((
                r.get::<_, bool>(0)?,
                r.get::<_, Option<i64>>(1)?,
                r.get::<_, bool>(2)?,
                r.get::<_, Option<String>>(3)?,
                r.get::<_, Option<String>>(4)?,
            ));
        }
        // No file row: the one row of a refresh with no change.
        if let Some(id) = r.get::<_, Option<i64>>(5)? {
            files.push(Changed {
                id,
                path: r.get(6)?,
                relative: r.get(7)?,
                partition_id: r.get(8)?,
                catalog_plain: r.get(9)?,
                live: r.get(10)?,
                deleted: r.get(11)?,
                part: r.get(12)?,
            });
        }
    }
    let Some((kept, Some(next_file_id), table_live, tables, buckets)) = head else {
        return Ok(None);
    };
    if !kept || !table_live {
        return Ok(None);
    }
    let mut next = Listing {
        snapshot: s,
        next_file_id,
        ..base.clone()
    };
    // Inlined rows: from the statement when the inlined tables are the base's (a schema change
    // adds one), else read again.
    match inlined_names(tables) {
        Some(names) if names == *base.inlined_tables => {
            let Some(buckets) = parse_buckets(buckets) else {
                return Ok(None);
            };
            next.inlined = buckets;
        }
        _ => {
            let Some((names, buckets)) = inlined(conn, table, s)? else {
                return Ok(None);
            };
            next.inlined_tables = Arc::new(names);
            next.inlined = buckets;
        }
    }
    for Changed {
        id,
        path,
        relative,
        partition_id,
        catalog_plain,
        live,
        deleted,
        part,
    } in files
    {
        if partition_id.is_some_and(|p| !next.dq_layout.contains(&p)) {
            return Ok(None);
        }
        let partition = dq_partition_of(&next.dq_layout, partition_id, part.as_deref());
        let bucket = partition.map(|(b, _)| b);
        next.group_mut(bucket).retain(|f| f.id != id);
        if live != Some(true) {
            continue;
        }
        let (Some(path), Some(relative)) = (path, relative) else {
            return Ok(None);
        };
        let path = match (relative, &next.prefix) {
            (false, _) => path,
            (true, Some(prefix)) => format!("{prefix}{path}"),
            (true, None) => return Ok(None),
        };
        next.insert(
            bucket,
            DataFile {
                id,
                path,
                day: partition.map(|(_, d)| d),
                plain: catalog_plain == Some(true) && deleted == Some(false),
            },
        );
    }
    next.by_bucket.retain(|_, files| !files.is_empty());
    Ok(Some(next))
}

/// A data file the refresh found changed, as of the new snapshot.
struct Changed {
    id: i64,
    path: Option<String>,
    relative: Option<bool>,
    partition_id: Option<i64>,
    catalog_plain: Option<bool>,
    live: Option<bool>,
    deleted: Option<bool>,
    part: Option<String>,
}

/// The names of `table`'s inlined-data tables, comma-separated in name order.
fn inlined_tables_sql(m: &str, table: i64) -> String {
    format!(
        "(SELECT string_agg(table_name, ',' ORDER BY table_name) \
          FROM {m}ducklake_inlined_data_tables WHERE table_id = {table})"
    )
}

/// The buckets with rows live at `s` in the inlined-data tables `names`, comma-separated.
fn inlined_buckets_sql(m: &str, names: &[String], s: i64) -> String {
    if names.is_empty() {
        return "CAST(NULL AS VARCHAR)".into();
    }
    let scans: Vec<String> = names
        .iter()
        .map(|name| {
            format!(
                "SELECT subject_bucket FROM {m}{name} i WHERE {}",
                live("i", s)
            )
        })
        .collect();
    format!(
        "(SELECT string_agg(DISTINCT CAST(subject_bucket AS VARCHAR), ',') FROM ({}) x)",
        scans.join(" UNION ALL ")
    )
}

/// Inlined-table names from [`inlined_tables_sql`]; `None` for a name that is not DuckLake's
/// (never put into SQL).
fn inlined_names(list: Option<String>) -> Option<Vec<String>> {
    let names: Vec<String> = list
        .as_deref()
        .unwrap_or_default()
        .split(',')
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect();
    names
        .iter()
        .all(|n| is_inlined_table_name(n))
        .then_some(names)
}

/// Buckets from [`inlined_buckets_sql`].
fn parse_buckets(list: Option<String>) -> Option<HashSet<i32>> {
    list.as_deref()
        .unwrap_or_default()
        .split(',')
        .filter(|b| !b.is_empty())
        .map(|b| b.parse().ok())
        .collect()
}

/// `table`'s inlined-data tables and the buckets with rows live in them at `s`: those rows
/// live in the catalog, not in files. `None` when a name or a bucket does not parse.
fn inlined(
    conn: &Connection,
    table: i64,
    s: i64,
) -> duckdb::Result<Option<(Vec<String>, HashSet<i32>)>> {
    let m = format!("{META}.");
    let tables = conn.query_row(
        &format!("SELECT {}", inlined_tables_sql(&m, table)),
        [],
        |r| r.get(0),
    )?;
    let Some(names) = inlined_names(tables) else {
        return Ok(None);
    };
    let buckets = conn.query_row(
        &format!("SELECT {}", inlined_buckets_sql(&m, &names, s)),
        [],
        |r| r.get(0),
    )?;
    Ok(parse_buckets(buckets).map(|b| (names, b)))
}

/// A file's dq partition: its spec is dq's layout and its values parse.
fn dq_partition_of(
    dq_layout: &HashSet<i64>,
    partition_id: Option<i64>,
    values: Option<&str>,
) -> Option<(i32, NaiveDate)> {
    partition_id
        .filter(|id| dq_layout.contains(id))
        .and_then(|_| dq_partition(values.unwrap_or_default()))
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
            id: 0,
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
                    Arc::new(vec![
                        file("a", Some((2025, 6, 1)), true),
                        file("b", Some((2025, 6, 2)), true),
                        file("c", Some((2025, 6, 3)), true),
                    ]),
                ),
                (4, Arc::new(vec![file("d", Some((2025, 6, 2)), false)])),
            ]),
            inlined: HashSet::from([5]),
            usable: true,
            ..Listing::default()
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
        l.insert(None, file("u", None, true));
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
        assert_eq!(inlined_names(None), Some(vec![]));
        assert_eq!(
            inlined_names(Some(
                "ducklake_inlined_data_4_1,ducklake_inlined_data_4_2".into()
            )),
            Some(vec![
                "ducklake_inlined_data_4_1".to_owned(),
                "ducklake_inlined_data_4_2".to_owned()
            ])
        );
        assert_eq!(
            inlined_names(Some("ducklake_inlined_data_4_1,x; DROP".into())),
            None
        );
        assert_eq!(parse_buckets(None), Some(HashSet::new()));
        assert_eq!(
            parse_buckets(Some("3,17".into())),
            Some(HashSet::from([3, 17]))
        );
        assert_eq!(parse_buckets(Some("3,x".into())), None);
    }

    /// A listing's files with their buckets, its inlined buckets and whether it is usable.
    type Rows = (Vec<(Option<i32>, DataFile)>, Vec<i32>, bool);

    /// A listing as sorted rows, for comparing two listings of one snapshot.
    fn rows(l: &Listing) -> Rows {
        let mut files: Vec<(Option<i32>, DataFile)> = l
            .by_bucket
            .iter()
            .flat_map(|(b, files)| files.iter().map(|f| (Some(*b), f.clone())))
            .chain(l.unpartitioned.iter().map(|f| (None, f.clone())))
            .collect();
        files.sort_by_key(|(_, f)| f.id);
        let mut inlined: Vec<i32> = l.inlined.iter().copied().collect();
        inlined.sort_unstable();
        (files, inlined, l.usable)
    }

    fn newest(conn: &Connection) -> i64 {
        dq_lake::snapshot::newest(conn, false).unwrap().0
    }

    /// `n` speed rows per subject of `subjects`, one per hour from `day` 00:00.
    fn insert(conn: &Connection, subjects: &[&str], day: &str, n: usize) {
        let values: Vec<String> = subjects
            .iter()
            .flat_map(|subject| {
                let bucket = dq_cloudevent::subject_bucket(subject);
                (0..n).map(move |h| {
                    format!(
                        "('{subject}', {bucket}, 'speed', '{day}'::TIMESTAMPTZ + INTERVAL {h} HOUR, \
                         '0xs', 'p', 'id-{subject}-{day}-{h}', {h}, '', 0, 0, 0, 0)"
                    )
                })
            })
            .collect();
        conn.execute_batch(&format!(
            "INSERT INTO lake.signals (subject, subject_bucket, name, \"timestamp\", source, \
               producer, cloud_event_id, value_number, value_string, loc_lat, loc_lon, loc_hdop, \
               loc_heading) VALUES {}",
            values.join(", ")
        ))
        .unwrap();
    }

    /// A refresh from `base` to the newest snapshot lists what a whole load lists; returns it.
    fn refreshed_as_loaded(
        conn: &Connection,
        postgres: bool,
        base: &Listing,
        stage: &str,
    ) -> Listing {
        let s = newest(conn);
        assert!(s > base.snapshot, "{stage}: a commit landed");
        let loaded = load(conn, FileTable::Signals, s).unwrap();
        let refreshed = refresh(conn, postgres, base, s)
            .unwrap()
            .unwrap_or_else(|| panic!("{stage}: the refresh answered"));
        assert_eq!(rows(&refreshed), rows(&loaded), "{stage}");
        assert_eq!(refreshed.snapshot, s);
        refreshed
    }

    fn refresh_lists_what_a_load_lists(backend: dq_lake::testing::Backend) {
        let t = dq_lake::testing::TestLake::new(backend);
        let lake = t.open().unwrap();
        dq_tables::schema::ensure(&lake).unwrap();
        let conn = lake.conn();
        let postgres = backend == dq_lake::testing::Backend::Postgres;
        if postgres {
            let indexes: i64 = conn
                .query_row(
                    &format!(
                        "SELECT count(*) FROM postgres_query('{META}', \
                           'SELECT indexname FROM pg_indexes WHERE indexname LIKE ''dq_%''')"
                    ),
                    [],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(indexes, dq_lake::indexes::CHANGE_INDEXES.len() as i64);
        }
        let subjects = ["did:a:1", "did:a:2", "did:a:3", "did:a:4"];

        insert(conn, &subjects, "2025-06-01", 24);
        let base = load(conn, FileTable::Signals, newest(conn)).unwrap();
        assert!(base.usable && base.file_count() >= 4, "{:?}", rows(&base));

        insert(conn, &subjects[..2], "2025-06-02", 24);
        let l = refreshed_as_loaded(conn, postgres, &base, "new files");
        assert!(l.file_count() > base.file_count());
        // The base listing is untouched: its buckets were shared, not changed in place.
        assert_eq!(
            rows(&base),
            rows(&load(conn, FileTable::Signals, base.snapshot).unwrap())
        );

        insert(conn, &subjects[2..3], "2025-06-03", 2);
        let l = refreshed_as_loaded(conn, postgres, &l, "inlined rows");
        assert!(!l.inlined.is_empty(), "DuckLake inlined the two rows");

        conn.execute_batch(
            "DELETE FROM lake.signals WHERE \"timestamp\" < '2025-06-01 12:00:00+00'::TIMESTAMPTZ",
        )
        .unwrap();
        let l = refreshed_as_loaded(conn, postgres, &l, "delete files");
        assert!(l
            .by_bucket
            .values()
            .flat_map(|f| f.iter())
            .any(|f| !f.plain));

        // Maintenance as din runs it, keeping the snapshot `l` is at.
        conn.execute_batch(
            "CALL ducklake_flush_inlined_data('lake'); \
             CALL ducklake_rewrite_data_files('lake', delete_threshold => 0.0); \
             CALL ducklake_merge_adjacent_files('lake');",
        )
        .unwrap();
        let older: String = conn
            .query_row(
                &format!(
                    "SELECT string_agg(snapshot_id::VARCHAR, ',') FROM {META}.ducklake_snapshot \
                     WHERE snapshot_id < {}",
                    l.snapshot
                ),
                [],
                |r| r.get(0),
            )
            .unwrap();
        conn.execute_batch(&format!(
            "CALL ducklake_expire_snapshots('lake', versions => [{older}]); \
             CALL ducklake_cleanup_old_files('lake', cleanup_all => true);"
        ))
        .unwrap();
        let after = refreshed_as_loaded(conn, postgres, &l, "flushed, rewritten, merged");
        assert!(after.inlined.is_empty());

        // A base whose snapshot was expired: its removed files' rows may be gone.
        insert(conn, &subjects, "2025-06-04", 24);
        conn.execute_batch(&format!(
            "CALL ducklake_expire_snapshots('lake', versions => [{}])",
            after.snapshot
        ))
        .unwrap();
        assert!(refresh(conn, postgres, &after, newest(conn))
            .unwrap()
            .is_none());

        // The query functions attach the catalog read-only: the refresh runs there too.
        if postgres {
            let base = load(conn, FileTable::Signals, newest(conn)).unwrap();
            insert(conn, &subjects[..1], "2025-06-05", 24);
            let ro = t.open_with(|c| c.read_only = true).unwrap();
            let moved = refresh(ro.conn(), true, &base, newest(ro.conn())).unwrap();
            assert_eq!(
                moved.map(|l| rows(&l)),
                Some(rows(&load(conn, FileTable::Signals, newest(conn)).unwrap()))
            );
        }
    }

    dq_lake::backend_tests!(refresh_lists_what_a_load_lists);
}
