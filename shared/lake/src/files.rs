//! Direct reads of the lake's tables from their files: a table's file list read from the
//! catalog once, then moved forward snapshot by snapshot. dq's tables (`lake.signals`,
//! `lake.events` and their rollups, partitioned by `subject_bucket` first) and din's
//! `lake.raw_events` (by `type` first) are read this way; [`TableSpec`] says how each is laid
//! out.
//!
//! A DuckLake scan lists every live file of the table, with its statistics, from the catalog on
//! every query, so a one-vehicle read costs time proportional to the whole table's file count
//! (measured: ~20 ms of a 22 ms read on a file catalog with 3,570 files, ~90 ms on PostgreSQL)
//! although it opens only the few files of one partition key and a few days. Data files are
//! immutable and a snapshot id fixes a table's file list, so a list loaded for snapshot S is exact
//! for every read of S: a read takes its request's pinned snapshot ([`crate::request_snapshot`])
//! and, when no cached list is of that snapshot, moves the newest older one forward by the
//! catalog rows that changed in between (`refresh`; time ∝ the commits, not the table) or,
//! when that cannot be exact, loads the list whole (`load`). The read then scans only the files
//! of the keys it reads whose day partition meets the window, with `read_parquet`, under the
//! same SQL. Nothing is cached beyond the snapshot's own metadata, so answers equal the DuckLake
//! scan's (tests pin it). din's merge removes its source files' catalog rows outright, so a
//! refresh that meets a merge's file asks which of the keys' held files are still live.
//!
//! Deleted rows are applied as DuckLake applies them: a file's live delete file (its `pos`
//! column) and the deletes DuckLake keeps inlined in the catalog
//! (`ducklake_inlined_delete_<table id>`: file, row position, snapshot), both as row positions
//! the read skips. Whatever a plain parquet read would not reproduce exactly sends the read back
//! to the DuckLake scan: a selected file with an encryption key, a column mapping other than
//! every column by its own name (the materializer's own writer's files, whose partition values
//! come from their paths), or more than one live delete file; a data or delete file written after the snapshot (DuckLake dates a
//! flushed or merged file back to its rows' snapshots, and such a file can hold rows of later
//! ones); a key with inlined rows; more than a few files without the table's partition values
//! (din's backfill). Paths resolve as DuckLake resolves them (data path, schema path, table
//! path, each when relative); the tests hold every listing against DuckLake's own
//! (`ducklake_list_files`), which a read does not call. A read with no file to read scans an
//! empty relation of the table's columns: the DuckLake scan would find no row either.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::duckdb::{self, Connection};
use crate::METADATA as META;
use crate::{quote, Snapshot, LAKE};
use chrono::{DateTime, Datelike, NaiveDate};

/// Listings kept per table: the newest two snapshots, so requests pinned on either side of a
/// commit do not reload each other's.
const CACHED_LISTINGS: usize = 2;

/// Files without the table's partition values a direct read still takes: every read opens all
/// of them. More (din's backfill registers legacy files unpartitioned, up to 2,000 per commit,
/// until merges rewrite them) and the DuckLake scan answers, which prunes them by their column
/// statistics.
const MAX_UNPARTITIONED: usize = 32;

/// The most days a read of every key (a cloud-event search without a type) reads into its
/// listing day by day; a wider window, or one without bounds, loads the whole table's files
/// (10⁵–10⁶ in production: ~650 ms at 10⁵ on PostgreSQL, `make bench-listing`).
const MAX_LISTED_DAYS: i64 = 31;

/// What joins a file's partition values, and inlined keys, in the listing statements: a
/// control character no partition value of ours holds (`chr(31)` in SQL).
const SEP: char = '\u{1f}';

/// The `read_parquet` option of every direct read: the paths' `key=value` directories are not
/// columns (the files hold every column of the table, partition keys included).
const NO_HIVE: &str = "hive_partitioning = false";

/// How a table read directly is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableSpec {
    /// The table's name in the `lake` schema `main`.
    pub name: &'static str,
    /// The column list of the `SET PARTITIONED BY` that lays the table out, e.g.
    /// `subject_bucket, year("timestamp"), month("timestamp"), day("timestamp")`: its first
    /// key's identity, then optionally the `year`/`month`/`day` of a time. Reads select files
    /// by the first key's column.
    pub partition: &'static str,
    /// Its columns and types, for the empty relation of a read with no file.
    pub columns: &'static [(&'static str, &'static str)],
}

impl TableSpec {
    /// The partition spec as the catalog spells it: `transform:column` by key, `,`-joined.
    fn layout(&self) -> String {
        let keys: Vec<String> = self
            .partition
            .split(',')
            .map(|key| {
                let key = key.trim();
                match key.split_once('(') {
                    Some((transform, column)) => format!(
                        "{}:{}",
                        transform.trim(),
                        column.trim_end_matches(')').trim().trim_matches('"')
                    ),
                    None => format!("identity:{}", key.trim_matches('"')),
                }
            })
            .collect();
        keys.join(",")
    }

    /// A file's partition values from its path's `key=value` directories, joined by [`SEP`] in
    /// key order as the catalog's would be: the identity key under its column's name, the
    /// time's keys as `year`, `month`, `day` (DuckLake's directory names). For the files
    /// `ducklake_add_data_files` registered (the materializer's own Parquet writer): DuckLake
    /// 1.5.4 files every transformed key's value of such a file under the last key's index, so
    /// the catalog's values do not say which is the year, the month or the day
    /// (`tests/it/added_files.rs` pins it). `None` when a key's directory is missing.
    fn hive_part(&self, path: &str) -> Option<String> {
        let dirs: HashMap<&str, &str> = path
            .split('/')
            .filter_map(|dir| dir.split_once('='))
            .collect();
        let values: Option<Vec<&str>> = self
            .layout()
            .split(',')
            .map(|key| match key.split_once(':') {
                Some(("identity", column)) => dirs.get(column).copied(),
                Some((transform, _)) => dirs.get(transform).copied(),
                None => None,
            })
            .collect();
        Some(values?.join(&SEP.to_string()))
    }

    /// Whether the table is partitioned by its key alone (the rollups), not by time as well.
    fn keyed_alone(&self) -> bool {
        !self.partition.contains(',')
    }

    /// The column of the first partition key: what reads select files by.
    fn key(&self) -> &'static str {
        let first = self.partition.split(',').next().unwrap_or_default();
        first.trim().trim_matches('"')
    }

    /// A relation with the table's columns, types included, and no rows.
    fn empty(&self) -> String {
        let list: Vec<String> = self
            .columns
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
    /// Read from the catalog (first use, or when no refresh could be exact): the table's head
    /// and the files of the keys asked for.
    Loaded,
    /// The listing of that snapshot already held, with the files of keys it lacked read from
    /// the catalog.
    Extended,
}

/// One table's listing at one snapshot, as a read would get it.
#[derive(Debug, Clone)]
pub struct ListingReport {
    /// The table's name.
    pub table: &'static str,
    /// The snapshot listed.
    pub snapshot: i64,
    /// How it was obtained.
    pub source: ListingSource,
    /// Data files held at the snapshot: of the keys read so far, or of every key (0 when
    /// unusable).
    pub files: usize,
    /// Whether the files of every key are held.
    pub complete: bool,
    /// False when reads at this snapshot take the DuckLake scan.
    pub usable: bool,
    /// Time to obtain it.
    pub took: Duration,
}

/// The per-snapshot file lists of one table, shared by every reader of an engine.
pub struct TableFiles {
    spec: TableSpec,
    /// Newest snapshot first.
    listings: Mutex<Vec<Arc<Listing>>>,
    /// The metadata catalog is PostgreSQL: refreshes run inside it.
    postgres: bool,
}

/// The table's files at one snapshot.
///
/// Keys hold their files behind an `Arc`, so a refresh copies only the keys a commit touched:
/// cheap with 10⁵ files.
#[derive(Debug, Default, Clone)]
struct Listing {
    snapshot: i64,
    /// The table's catalog id (0 when the table does not exist at the snapshot).
    table_id: i64,
    /// The snapshot's `next_file_id`: DuckLake numbers every later file from it.
    next_file_id: i64,
    /// Partition spec ids laid out as the table's [`TableSpec::layout`].
    layout_ids: Arc<HashSet<i64>>,
    /// What the catalog's relative paths resolve under: DuckLake's data path, then the schema's
    /// and the table's paths (empty in an unusable listing, which is never refreshed).
    prefix: Arc<str>,
    /// Files by partition key, each with its day partition: of every key, or of the keys in
    /// `loaded`.
    by_key: HashMap<String, Arc<Vec<DataFile>>>,
    /// The keys whose files `by_key` holds; `None`: every key. A listing is read a key at a
    /// time as reads ask for keys (the one bucket of a vehicle), so a new instance does not
    /// read the whole table's file rows (~650 ms at 10⁵ files on PostgreSQL) for its first
    /// request, nor keep files it never opens.
    loaded: Option<Arc<HashSet<String>>>,
    /// Days whose files of every key `by_key` holds, beside the keys in `loaded`: a read of
    /// every key over a few days (a search without a type) reads those days' files, not the
    /// whole table's. Empty when `loaded` is `None`.
    days: Arc<HashSet<NaiveDate>>,
    /// Partition spec ids of the table other than [`Listing::layout_ids`]: their files are
    /// read for every key.
    other_ids: Arc<Vec<i64>>,
    /// Files without the spec's partition values: read for every key and day.
    unpartitioned: Arc<Vec<DataFile>>,
    /// Keys with inlined rows at this snapshot; `""` (a NULL or empty key) stands for every key.
    inlined: HashSet<String>,
    /// DuckLake's inlined-data tables of the table, by name.
    inlined_tables: Arc<Vec<String>>,
    /// Deletes DuckLake keeps in the catalog, live at this snapshot: row positions by data
    /// file id (read whole on every listing: the catalog holds them only until din flushes).
    inlined_deletes: Arc<HashMap<i64, Vec<i64>>>,
    /// False when a read at this snapshot must take the DuckLake scan (the table is missing
    /// or its inlined data could not be listed).
    usable: bool,
}

/// A file's partition: its key and, for the time-partitioned tables, its day.
type Partition = (String, Option<NaiveDate>);

/// What a read needs its listing to hold.
#[derive(Debug, Clone, Copy)]
enum Need<'a> {
    /// Every file of these keys.
    Keys(&'a [String]),
    /// Every key's files of these days.
    Days(&'a [NaiveDate]),
    /// Every file.
    All,
}

/// The days of `[from_us, to_us)`, or `None` when it spans more than [`MAX_LISTED_DAYS`],
/// reaches past the representable days or is empty: a read of every key over it needs the
/// whole listing. (An empty window reads no row; it is not worth a listing of its own.)
fn window_days(from_us: i64, to_us: i64) -> Option<Vec<NaiveDate>> {
    if to_us <= from_us {
        return None;
    }
    let first = DateTime::from_timestamp_micros(from_us)?.date_naive();
    let last = DateTime::from_timestamp_micros(to_us - 1)?.date_naive();
    if (last - first).num_days() >= MAX_LISTED_DAYS {
        return None;
    }
    Some(first.iter_days().take_while(|d| *d <= last).collect())
}

/// What a read of `keys` (`None`: every key) over the days `days` (`None`: unbounded) needs.
fn need<'a>(keys: Option<&'a [String]>, days: Option<&'a [NaiveDate]>) -> Need<'a> {
    match (keys, days) {
        (Some(keys), _) => Need::Keys(keys),
        (None, Some(days)) => Need::Days(days),
        (None, None) => Need::All,
    }
}

/// The days of all of `windows` ([`window_days`]), or `None` when any needs the whole
/// listing.
fn windows_days(windows: &[(i64, i64)]) -> Option<Vec<NaiveDate>> {
    let mut days = Vec::new();
    for &(from_us, to_us) in windows {
        days.extend(window_days(from_us, to_us)?);
    }
    days.sort_unstable();
    days.dedup();
    Some(days)
}

/// A data file's live delete files at a snapshot, as the catalog lists them.
#[derive(Debug, Clone, Default, PartialEq)]
struct DeleteFiles {
    count: i64,
    /// The newest one's id (DuckLake writes one per data file and snapshot).
    max_id: Option<i64>,
    /// Its stored path and whether that path is relative.
    path: Option<(String, bool)>,
    /// Parquet without an encryption key.
    plain: bool,
}

impl DeleteFiles {
    /// Whether a read at the snapshot whose `next_file_id` is `next` may apply these itself:
    /// none, or exactly one plain delete file written by then. A later one (dated back by a
    /// flush) can hold deletes of snapshots after the read's.
    fn readable(&self, next: i64) -> bool {
        self.count == 0
            || (self.count == 1 && self.plain && self.max_id.is_some_and(|id| id < next))
    }
}

#[derive(Debug, Clone, PartialEq)]
struct DataFile {
    /// The catalog's `data_file_id`.
    id: i64,
    path: String,
    day: Option<NaiveDate>,
    /// Its live delete file, resolved like `path`.
    deletes: Option<String>,
    /// Readable by `read_parquet` alone once `deletes` and the listing's inlined deletes are
    /// applied: no encryption, no column mapping, written by the listing's snapshot.
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
        self.by_key.values().map(|f| f.len()).sum::<usize>() + self.unpartitioned.len()
    }

    /// The files a read of the keys `keys` (`None`: every key) over `[from_us, to_us)` must
    /// scan, or `None` when only the DuckLake scan answers it exactly. A window reaching past
    /// the representable days reads from the first file or to the last (an unbounded look-back,
    /// a rollup read).
    fn select(&self, keys: Option<&[String]>, from_us: i64, to_us: i64) -> Option<Vec<&DataFile>> {
        // The window's days matter only to a read of every key (a keyed read is the hot path).
        let days = keys.map_or_else(|| window_days(from_us, to_us), |_| None);
        if !self.holds(need(keys, days.as_deref())) {
            // `TableFiles::at` reads the keys or days first; a listing never answers for files
            // it lacks.
            return None;
        }
        if !self.usable || self.inlined.contains("") || self.unpartitioned.len() > MAX_UNPARTITIONED
        {
            return None;
        }
        match keys {
            Some(keys) if keys.iter().any(|k| self.inlined.contains(k)) => return None,
            None if !self.inlined.is_empty() => return None,
            _ => {}
        }
        let first =
            DateTime::from_timestamp_micros(from_us).map_or(NaiveDate::MIN, |t| t.date_naive());
        let last = DateTime::from_timestamp_micros(to_us.checked_sub(1)?)
            .map_or(NaiveDate::MAX, |t| t.date_naive());
        let in_window = |f: &&DataFile| f.day.is_none_or(|d| d >= first && d <= last);
        let files: Vec<&DataFile> = self
            .groups(keys)
            .into_iter()
            .flat_map(|files| files.iter())
            .filter(in_window)
            .chain(self.unpartitioned.iter())
            .collect();
        if files.iter().any(|f| !f.plain) {
            return None;
        }
        Some(files)
    }

    /// Whether the files `need` names are held.
    fn holds(&self, need: Need<'_>) -> bool {
        match need {
            Need::Keys(keys) => keys.iter().all(|k| self.holds_key(k)),
            Need::Days(days) => self.loaded.is_none() || days.iter().all(|d| self.days.contains(d)),
            Need::All => self.loaded.is_none(),
        }
    }

    /// Whether the files of the key `key` are held.
    fn holds_key(&self, key: &str) -> bool {
        self.loaded
            .as_ref()
            .is_none_or(|loaded| loaded.contains(key))
    }

    /// The keys of `keys` whose files are not held (`keys` is `Some`).
    fn missing(&self, keys: &[String]) -> Vec<String> {
        let distinct: HashSet<&String> = keys.iter().filter(|k| !self.holds_key(k)).collect();
        let mut missing: Vec<String> = distinct.into_iter().cloned().collect();
        missing.sort_unstable();
        missing
    }

    /// The days of `days` whose files of every key are not held.
    fn missing_days(&self, days: &[NaiveDate]) -> Vec<NaiveDate> {
        days.iter()
            .filter(|d| !self.days.contains(d))
            .copied()
            .collect()
    }

    /// The file groups of the distinct keys of `keys` held (`None`: of every key), each once.
    fn groups(&self, keys: Option<&[String]>) -> Vec<&Arc<Vec<DataFile>>> {
        match keys {
            Some(keys) => {
                let distinct: HashSet<&String> = keys.iter().collect();
                distinct
                    .into_iter()
                    .filter_map(|k| self.by_key.get(k))
                    .collect()
            }
            None => self.by_key.values().collect(),
        }
    }

    /// The newest day partition of a file of `keys` (`None`: of any key), `None` when no such
    /// file has one. Of a listing holding those keys' files.
    fn newest_day(&self, keys: Option<&[String]>) -> Option<NaiveDate> {
        self.groups(keys)
            .into_iter()
            .flat_map(|files| files.iter())
            .filter_map(|f| f.day)
            .max()
    }

    /// The relation `files` (from [`Listing::select`]) hold for `table`: `read_parquet` over
    /// them, each file with deletes read alone with its deleted row positions skipped. The
    /// files hold every column of the table, partition keys included, so the `key=value`
    /// directories of their paths are not parsed into columns (`hive_partitioning = false`:
    /// a quarter of a 30-file read's time otherwise).
    fn relation(&self, spec: &TableSpec, files: &[&DataFile]) -> String {
        if files.is_empty() {
            return spec.empty();
        }
        let (clean, dirty): (Vec<&DataFile>, Vec<&DataFile>) = files
            .iter()
            .partition(|f| f.deletes.is_none() && !self.inlined_deletes.contains_key(&f.id));
        let list = |files: &[&DataFile]| {
            let paths: Vec<String> = files.iter().map(|f| quote(&f.path)).collect();
            paths.join(", ")
        };
        if dirty.is_empty() {
            return format!("read_parquet([{}], {NO_HIVE})", list(&clean));
        }
        let mut parts = Vec::new();
        if !clean.is_empty() {
            parts.push(format!(
                "SELECT * FROM read_parquet([{}], {NO_HIVE})",
                list(&clean)
            ));
        }
        for f in dirty {
            let mut skipped = Vec::new();
            if let Some(deletes) = &f.deletes {
                skipped.push(format!(
                    "file_row_number NOT IN (SELECT pos FROM read_parquet({}, {NO_HIVE}))",
                    quote(deletes)
                ));
            }
            if let Some(positions) = self.inlined_deletes.get(&f.id) {
                let list: Vec<String> = positions.iter().map(i64::to_string).collect();
                skipped.push(format!("file_row_number NOT IN ({})", list.join(", ")));
            }
            parts.push(format!(
                "SELECT * EXCLUDE (file_row_number) FROM read_parquet({}, {NO_HIVE}, \
                 file_row_number = true) WHERE {}",
                quote(&f.path),
                skipped.join(" AND ")
            ));
        }
        format!("({})", parts.join(" UNION ALL BY NAME "))
    }

    /// The key's (or the unpartitioned) files, copied for writing only when shared.
    fn group_mut(&mut self, key: Option<String>) -> &mut Vec<DataFile> {
        let group = match key {
            Some(k) => self.by_key.entry(k).or_default(),
            None => &mut self.unpartitioned,
        };
        Arc::make_mut(group)
    }

    fn insert(&mut self, key: Option<String>, file: DataFile) {
        self.group_mut(key).push(file);
    }
}

impl TableFiles {
    /// No listing of `spec`'s table loaded yet; `postgres`: the metadata catalog is
    /// PostgreSQL.
    pub fn new(spec: TableSpec, postgres: bool) -> TableFiles {
        TableFiles {
            spec,
            listings: Mutex::new(Vec::new()),
            postgres,
        }
    }

    /// The table listed.
    pub fn spec(&self) -> &TableSpec {
        &self.spec
    }

    /// The days whose files a read of every key (`keys` is `None`) over `windows` needs
    /// listed, or `None` when it needs every file: it reads keys, a window is too wide, or the
    /// table has no day partitions.
    fn days_of(&self, keys: Option<&[String]>, windows: &[(i64, i64)]) -> Option<Vec<NaiveDate>> {
        if keys.is_some() || self.spec.keyed_alone() {
            return None;
        }
        windows_days(windows)
    }

    /// The relations reads of the partition keys `keys` (`None`: every key) over each of
    /// `windows` (`[from_us, to_us)`) scan in place of the table at `snapshot` —
    /// `read_parquet([…])` over its files — or `None` when any of them needs the DuckLake scan.
    ///
    /// # Errors
    /// Catalog reads failed (the caller falls back to the DuckLake scan).
    pub fn relations<const N: usize>(
        &self,
        conn: &Connection,
        snapshot: Snapshot,
        keys: Option<&[String]>,
        windows: [(i64, i64); N],
    ) -> duckdb::Result<Option<[String; N]>> {
        let days = self.days_of(keys, &windows);
        let (listing, _) = self.at(conn, snapshot, need(keys, days.as_deref()))?;
        let relations = windows.map(|(from_us, to_us)| {
            listing
                .select(keys, from_us, to_us)
                .map(|files| listing.relation(&self.spec, &files))
        });
        if relations.iter().any(Option::is_none) {
            return Ok(None);
        }
        Ok(Some(relations.map(Option::unwrap_or_default)))
    }

    /// Whether a direct read of the keys `keys` over `[from_us, to_us)` at `snapshot` has a
    /// file to read; `None` when that read takes the DuckLake scan (no listing says). A
    /// look-back walking into the past stops where this says no.
    ///
    /// # Errors
    /// Catalog reads failed.
    pub fn has_files(
        &self,
        conn: &Connection,
        snapshot: Snapshot,
        keys: Option<&[String]>,
        (from_us, to_us): (i64, i64),
    ) -> duckdb::Result<Option<bool>> {
        let days = self.days_of(keys, &[(from_us, to_us)]);
        let (listing, _) = self.at(conn, snapshot, need(keys, days.as_deref()))?;
        Ok(listing
            .select(keys, from_us, to_us)
            .map(|files| !files.is_empty()))
    }

    /// The newest day partition of the files of the keys `keys` (`None`: every key) at
    /// `snapshot`: `Some(None)` when no such file has one, `None` when the listing is unusable
    /// (a read there takes the DuckLake scan). Keys need only their own files listed; every key
    /// needs the whole listing.
    ///
    /// # Errors
    /// Catalog reads failed.
    pub fn newest_day(
        &self,
        conn: &Connection,
        snapshot: Snapshot,
        keys: Option<&[String]>,
    ) -> duckdb::Result<Option<Option<NaiveDate>>> {
        let (listing, _) = self.at(conn, snapshot, need(keys, None))?;
        Ok(listing.usable.then(|| listing.newest_day(keys)))
    }

    /// The listing at `snapshot` holding the files of `keys` (`None`: every key; `Some(&[])`:
    /// the table's head and its files read for every key) as a read would obtain it, and how.
    ///
    /// # Errors
    /// Catalog reads failed.
    pub fn listing(
        &self,
        conn: &Connection,
        snapshot: Snapshot,
        keys: Option<&[String]>,
    ) -> duckdb::Result<ListingReport> {
        self.report(conn, snapshot, need(keys, None))
    }

    /// The listing at `snapshot` a read of every key over `[from_us, to_us)` obtains (a
    /// cloud-event search without a type), and how: the window's days when it spans at most
    /// [`MAX_LISTED_DAYS`], else every file.
    ///
    /// # Errors
    /// Catalog reads failed.
    pub fn listing_of_window(
        &self,
        conn: &Connection,
        snapshot: Snapshot,
        (from_us, to_us): (i64, i64),
    ) -> duckdb::Result<ListingReport> {
        let days = self.days_of(None, &[(from_us, to_us)]);
        self.report(conn, snapshot, need(None, days.as_deref()))
    }

    fn report(
        &self,
        conn: &Connection,
        snapshot: Snapshot,
        need: Need<'_>,
    ) -> duckdb::Result<ListingReport> {
        let started = Instant::now();
        let (listing, source) = self.at(conn, snapshot, need)?;
        Ok(ListingReport {
            table: self.spec.name,
            snapshot: listing.snapshot,
            source,
            files: listing.file_count(),
            complete: listing.loaded.is_none(),
            usable: listing.usable,
            took: started.elapsed(),
        })
    }

    /// The listing at `snapshot` holding the files `need` names: cached, else the newest older
    /// cached one refreshed (the keys and days it holds), else loaded; then the keys or days
    /// it lacks read into it. One loader at a time: the others wait for its result instead of
    /// reading the same rows again.
    fn at(
        &self,
        conn: &Connection,
        snapshot: Snapshot,
        need: Need<'_>,
    ) -> duckdb::Result<(Arc<Listing>, ListingSource)> {
        // What a first load reads: the keys asked for; for days, the head alone (the days'
        // files are read into it next).
        let keys = match need {
            Need::Keys(keys) => Some(keys),
            Need::Days(_) => Some(&[][..]),
            Need::All => None,
        };
        let mut cached = self.listings.lock().unwrap_or_else(PoisonError::into_inner);
        let started = Instant::now();
        let held = cached.iter().find(|l| l.snapshot == snapshot.0).cloned();
        let (listing, source) = match held {
            Some(l) => (l, ListingSource::Cached),
            None => {
                let base = cached
                    .iter()
                    .find(|l| l.snapshot < snapshot.0 && l.usable)
                    .cloned();
                // A refresh that fails is logged and replaced by a load, never by a worse
                // answer.
                let refreshed = base.and_then(|base| {
                    refresh(conn, self.postgres, &self.spec, &base, snapshot.0)
                        .inspect_err(|e| {
                            tracing::warn!(
                                table = self.spec.name,
                                error = %e,
                                "listing refresh failed"
                            )
                        })
                        .ok()
                        .flatten()
                });
                match refreshed {
                    Some(l) => (Arc::new(l), ListingSource::Refreshed),
                    None => (
                        Arc::new(load(conn, self.postgres, &self.spec, snapshot.0, keys)?),
                        ListingSource::Loaded,
                    ),
                }
            }
        };
        let (listing, source) = if !listing.usable || listing.holds(need) {
            (listing, source)
        } else {
            match need {
                Need::Keys(keys) => {
                    let missing = listing.missing(keys);
                    let extended = extend(conn, self.postgres, &self.spec, &listing, &missing)?;
                    (Arc::new(extended), ListingSource::Extended)
                }
                Need::Days(days) => {
                    let missing = listing.missing_days(days);
                    let extended =
                        extend_days(conn, self.postgres, &self.spec, &listing, &missing)?;
                    (Arc::new(extended), ListingSource::Extended)
                }
                Need::All => {
                    let whole = load(conn, self.postgres, &self.spec, snapshot.0, None)?;
                    (Arc::new(whole), ListingSource::Loaded)
                }
            }
        };
        if source != ListingSource::Cached {
            tracing::debug!(
                table = self.spec.name,
                snapshot = snapshot.0,
                ?source,
                usable = listing.usable,
                keys = listing.by_key.len(),
                days = listing.days.len(),
                complete = listing.loaded.is_none(),
                took_ms = started.elapsed().as_millis() as u64,
                "file listing"
            );
            cached.retain(|l| l.snapshot != listing.snapshot);
            cached.push(Arc::clone(&listing));
            cached.sort_by_key(|l| std::cmp::Reverse(l.snapshot));
            cached.truncate(CACHED_LISTINGS);
        }
        Ok((listing, source))
    }
}

/// Brings `files`' listing to the newest snapshot on a connection of `pool`: what the query
/// functions' init runs, so that their first request finds it, and finds a pooled connection.
/// On PostgreSQL, production's catalog, a time-partitioned table's listing holds its head (ids,
/// paths, partition specs, inlined keys and deletes) and no key's files yet, so the first
/// request reads only its own keys' file rows (a few ms whatever the table's size; a whole load
/// is ~500 ms at 10⁵ files); a table partitioned by key alone is loaded whole
/// ([`preload_keys`]).
/// On the file catalog, local and read in-process, it holds every key: a whole load of a
/// local lake costs less than the statement each later key would (~5 ms a table on a fresh
/// instance), which would be most of a first request. `None` when the load failed (logged;
/// the first read loads it itself).
pub fn preload(pool: &crate::Pool, files: &TableFiles) -> Option<ListingReport> {
    let keys = preload_keys(pool.is_postgres(), files.spec());
    let newest = preload_newest(pool.is_postgres());
    pool.run(|conn| {
        crate::request_snapshot(conn, &newest)
            .and_then(|snapshot| files.listing(conn, snapshot, keys))
    })
    .and_then(|report| {
        report.map_err(|e| crate::db_error(pool.redactor(), "preload table files", e))
    })
    .inspect_err(|e| tracing::warn!(error = %e, "preloading a file listing failed"))
    .ok()
}

/// The keys whose files an init's listing of `spec`'s table holds ([`preload`]): every key on
/// the file catalog, and on PostgreSQL (`postgres`) for a table partitioned by its key alone
/// (the rollups: a few files a key, which the first `signalsLatest` would otherwise spend a
/// catalog statement on, a first request's largest part); none yet on PostgreSQL for a table
/// partitioned by time as well (a file a key and day: 10⁵–10⁶ in production).
pub fn preload_keys(postgres: bool, spec: &TableSpec) -> Option<&'static [String]> {
    if postgres && !spec.keyed_alone() {
        Some(&[])
    } else {
        None
    }
}

/// How an init's listing asks the newest snapshot ([`preload`]): through DuckDB, since the
/// lake's own catalog connection ([`crate::catalog_conn`]) is still opening while the init runs
/// and waiting for it would add its connect to the init.
pub fn preload_newest(postgres: bool) -> crate::Newest {
    crate::Newest::through_duckdb(postgres)
}

/// `begin_snapshot <= S AND (end_snapshot IS NULL OR end_snapshot > S)` for `alias`.
fn live(alias: &str, snapshot: i64) -> String {
    format!(
        "{alias}.begin_snapshot <= {snapshot} AND \
         ({alias}.end_snapshot IS NULL OR {alias}.end_snapshot > {snapshot})"
    )
}

/// Whether data file `f` of `table` reads the same with `read_parquet` alone as through
/// DuckLake at `s` (before its delete files): not encrypted, and either written by DuckLake
/// (no column mapping) or mapped by name column for column onto the table's live columns
/// under their own names (`ducklake_add_data_files` of a file holding exactly the table's
/// columns, as the materializer's own writer writes them).
fn plain_sql(m: &str, table: i64, s: i64) -> String {
    format!(
        "f.encryption_key IS NULL AND (f.mapping_id IS NULL OR f.mapping_id IN ({}))",
        identity_mappings_sql(m, table, s)
    )
}

/// The ids of `table`'s name mappings that map every live top-level column, and only those,
/// from a file column of the same name.
fn identity_mappings_sql(m: &str, table: i64, s: i64) -> String {
    let column = |alias: &str| {
        format!(
            "{alias}.table_id = {table} AND {alias}.parent_column IS NULL AND {}",
            live(alias, s)
        )
    };
    format!(
        "SELECT cm.mapping_id FROM {m}ducklake_column_mapping cm \
         WHERE cm.table_id = {table} AND cm.type = 'map_by_name' \
           AND NOT EXISTS (SELECT 1 FROM {m}ducklake_name_mapping n \
             WHERE n.mapping_id = cm.mapping_id AND (n.parent_column IS NOT NULL OR NOT EXISTS ( \
               SELECT 1 FROM {m}ducklake_column c WHERE {} \
                 AND c.column_id = n.target_field_id AND c.column_name = n.source_name))) \
           AND (SELECT count(*) FROM {m}ducklake_name_mapping n \
                WHERE n.mapping_id = cm.mapping_id) \
             = (SELECT count(*) FROM {m}ducklake_column c WHERE {})",
        column("c"),
        column("c")
    )
}

/// `begin_snapshot` or `end_snapshot` of `alias` in `(from, to]`: the row changed between them.
fn changed(alias: &str, from: i64, to: i64) -> String {
    format!(
        "(({alias}.begin_snapshot > {from} AND {alias}.begin_snapshot <= {to}) OR \
          ({alias}.end_snapshot > {from} AND {alias}.end_snapshot <= {to}))"
    )
}

/// How catalog SQL names DuckLake's metadata tables: unqualified inside PostgreSQL (the
/// statement runs there, [`in_catalog`]), under the `meta` database on the file catalog.
fn catalog_prefix(postgres: bool) -> String {
    if postgres {
        String::new()
    } else {
        format!("{META}.")
    }
}

/// `sql` (its tables named with [`catalog_prefix`]) as a relation DuckDB selects from: on
/// PostgreSQL run inside the catalog (`postgres_query`), where its filters meet the catalog's
/// indexes and only its answer crosses, instead of DuckDB copying the catalog's tables through
/// the scanner; on the file catalog a subquery.
fn in_catalog(postgres: bool, sql: &str) -> String {
    if postgres {
        format!("postgres_query('{META}', {})", quote(sql))
    } else {
        format!("({sql})")
    }
}

/// The listing at `s` holding the files of `keys` (`None`: every key) and the files read for
/// every key.
fn load(
    conn: &Connection,
    postgres: bool,
    spec: &TableSpec,
    s: i64,
    keys: Option<&[String]>,
) -> duckdb::Result<Listing> {
    match load_once(conn, postgres, spec, s, keys) {
        // din's flush dropped an inlined-data table between the two statements: its rows are
        // in files now, dated back to their snapshots, so the load at `s` again finds them.
        Err(e) if is_missing_inlined_table(&e) => load_once(conn, postgres, spec, s, keys),
        other => other,
    }
}

/// A load in two catalog statements (three with inlined deletes): the table's head row (id,
/// paths, `next_file_id`, partition specs, inlined tables), then its live files of `keys`
/// (`None`: all) with their partition values and delete files beside the inlined rows' keys.
/// On PostgreSQL both run inside the catalog (`postgres_query`) and never through DuckDB's
/// scanner of it, whose first use on a fresh instance loads the catalog's schema (measured on
/// a 10-vehicle lake: seven statements, most through the scanner, took 13–18 ms a table; these
/// two take 4–9).
fn load_once(
    conn: &Connection,
    postgres: bool,
    spec: &TableSpec,
    s: i64,
    keys: Option<&[String]>,
) -> duckdb::Result<Listing> {
    let (name, layout) = (spec.name, spec.layout());
    let mut listing = Listing::unusable(s);
    let m = catalog_prefix(postgres);
    // Where relative paths resolve: DuckLake's data path (as attached, `ducklake_settings`),
    // the schema's path under it, the table's under that, each when marked relative. Asked of
    // the catalog rows, not of `ducklake_list_files`, which loads DuckLake's whole catalog on
    // a fresh instance (~60 ms) and lists every file of the table again (~260 ms at 10⁵
    // files). Tests compare both listings. Partition specs come as `id=spec`, joined by SEP.
    let head = format!(
        "SELECT t.table_id, {PLACE_COLUMNS}, \
           (SELECT next_file_id FROM {m}ducklake_snapshot WHERE snapshot_id = {s}) AS next_id, \
           (SELECT string_agg(CAST(l.partition_id AS VARCHAR) || '=' || l.spec, chr(31)) \
              FROM (SELECT pc.partition_id, string_agg(pc.transform || ':' || c.column_name, \
                      ',' ORDER BY pc.partition_key_index) AS spec \
                    FROM {m}ducklake_partition_column pc \
                    JOIN {m}ducklake_column c ON c.table_id = pc.table_id \
                      AND c.column_id = pc.column_id AND {} \
                    WHERE pc.table_id = t.table_id GROUP BY pc.partition_id) l) AS layouts, \
           {} AS inlined_tables, {} AS inlined_deletes, \
           (SELECT string_agg(CAST(pi.partition_id AS VARCHAR), ',') \
              FROM {m}ducklake_partition_info pi WHERE pi.table_id = t.table_id) AS specs \
         FROM {m}ducklake_table t \
         JOIN {m}ducklake_schema sc ON sc.schema_id = t.schema_id \
         WHERE sc.schema_name = 'main' AND t.table_name = '{name}' AND {} AND {}",
        live("c", s),
        inlined_tables_sql(&m, "t.table_id"),
        inlined_deletes_exist(postgres, "t.table_id"),
        live("t", s),
        live("sc", s)
    );
    let head = conn
        .query_row(&with_data_path(postgres, &head), [], |r| {
            Ok(Head {
                table: r.get(1)?,
                prefix: table_dir(r, 2)?,
                next_file_id: r.get(6)?,
                layouts: r.get(7)?,
                inlined_tables: r.get(8)?,
                inlined_deletes: r.get(9)?,
                specs: r.get(10)?,
            })
        })
        .map(Some)
        .or_else(|e| match e {
            duckdb::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })?;
    let Some(head) = head else {
        return Ok(listing);
    };
    let table = head.table;
    let next_file_id = head.next_file_id;
    // Partition specs laid out as the table's; files of any other spec are read for every key.
    let layout_ids: HashSet<i64> = head
        .layouts
        .as_deref()
        .unwrap_or_default()
        .split(SEP)
        .filter_map(|entry| entry.split_once('='))
        .filter(|(_, spec)| *spec == layout)
        .filter_map(|(id, _)| id.parse().ok())
        .collect();
    let other_ids: Vec<i64> = head
        .specs
        .as_deref()
        .unwrap_or_default()
        .split(',')
        .filter_map(|id| id.parse().ok())
        .filter(|id| !layout_ids.contains(id))
        .collect();
    let Some(inlined_tables) = inlined_names(head.inlined_tables) else {
        return Ok(Listing::unusable(s));
    };
    let only = keys.map(|keys| {
        let ids = format!(
            "{} UNION {}",
            files_of_keys_sql(&m, table, keys),
            files_of_every_key_sql(&m, table, &other_ids, s)
        );
        format!("AND {}", file_id_in(postgres, &ids))
    });

    // The live files with their partition values and delete files, beside the keys of the
    // rows live in the inlined-data tables: on PostgreSQL the catalog sends the table's file
    // rows only, instead of DuckDB copying its file, partition-value and delete-file tables
    // through the scanner first.
    let files = format!(
        "SELECT b.keys, f.* FROM (SELECT {} AS keys) b LEFT JOIN (\
           SELECT f.data_file_id, f.path, f.path_is_relative, f.partition_id, \
             {plain} AS catalog_plain, f.mapping_id IS NOT NULL AS mapped, \
             string_agg(p.partition_value, chr(31) ORDER BY p.partition_key_index) AS part, \
             d.n, d.max_id, d.path AS del_path, d.relative AS del_relative, d.plain AS del_plain \
           FROM {m}ducklake_data_file f \
           LEFT JOIN {m}ducklake_file_partition_value p ON p.data_file_id = f.data_file_id \
           LEFT JOIN ({}) d ON d.data_file_id = f.data_file_id \
           WHERE f.table_id = {table} AND {} {} \
           GROUP BY f.data_file_id, f.path, f.path_is_relative, f.partition_id, f.mapping_id, \
             f.encryption_key, d.n, d.max_id, d.path, d.relative, d.plain) f ON true",
        inlined_keys_sql(&m, &key_text(spec, postgres), &inlined_tables, s),
        delete_files_sql(&m, table, s),
        live("f", s),
        only.unwrap_or_default(),
        plain = plain_sql(&m, table, s),
    );
    listing.table_id = table;
    listing.next_file_id = next_file_id;
    listing.layout_ids = Arc::new(layout_ids);
    listing.other_ids = Arc::new(other_ids);
    listing.prefix = Arc::from(head.prefix);
    listing.loaded = keys.map(|keys| Arc::new(keys.iter().cloned().collect()));
    let inlined_keys = read_files(conn, postgres, spec, &files, &mut listing, &Take::Held)?;
    listing.inlined_tables = Arc::new(inlined_tables);
    listing.inlined = parse_keys(inlined_keys);
    listing.inlined_deletes = Arc::new(inlined_deletes(
        conn,
        postgres,
        table,
        s,
        head.inlined_deletes,
    )?);
    listing.usable = true;
    Ok(listing)
}

/// Which of a statement's file rows [`read_files`] takes into a listing.
enum Take<'a> {
    /// The files of the keys the listing holds and the files without the table's partition
    /// values (a load).
    Held,
    /// The files of the keys the listing holds; the others are held already (an extension by
    /// key).
    HeldKeys,
    /// The files of these days whose key the listing does not hold (those it holds whole
    /// already).
    Days(&'a HashSet<NaiveDate>),
}

impl Take<'_> {
    fn takes(&self, listing: &Listing, partition: Option<&Partition>) -> bool {
        match (self, partition) {
            (Take::Held, None) => true,
            (_, None) => false,
            (Take::Days(days), Some((key, day))) => {
                !listing.holds_key(key) && day.is_some_and(|d| days.contains(&d))
            }
            (_, Some((key, _))) => listing.holds_key(key),
        }
    }
}

/// Reads the file rows of `sql` (the files statement of [`load_once`]: inlined keys, then a
/// file's id, path, relativity, spec id, plainness, whether it is mapped, partition values and
/// delete files) into `listing` of `spec`'s table, whose head fields are set; returns the
/// inlined keys. `take` says which rows it keeps.
fn read_files(
    conn: &Connection,
    postgres: bool,
    spec: &TableSpec,
    sql: &str,
    listing: &mut Listing,
    take: &Take<'_>,
) -> duckdb::Result<Option<String>> {
    let mut stmt = conn.prepare(&format!("SELECT * FROM {}", in_catalog(postgres, sql)))?;
    let mut rows = stmt.query([])?;
    let mut keys = None;
    let next_file_id = listing.next_file_id;
    while let Some(r) = rows.next()? {
        keys = r.get::<_, Option<String>>(0)?;
        // No file row: the one row of a table without files.
        let Some(id) = r.get::<_, Option<i64>>(1)? else {
            continue;
        };
        let path: String = r.get(2)?;
        let part = file_part(spec, r.get(6)?, r.get(7)?, &path);
        let partition = partition_of(&listing.layout_ids, r.get(4)?, part.as_deref());
        if !take.takes(listing, partition.as_ref()) {
            continue;
        }
        let key = partition.as_ref().map(|(k, _)| k.clone());
        let deletes = delete_files_at(r, 8)?;
        let relative: bool = r.get(3)?;
        let file = DataFile {
            id,
            path: under(&listing.prefix, &path, relative),
            day: partition.as_ref().and_then(|(_, d)| *d),
            deletes: deletes
                .path
                .as_ref()
                .map(|(path, relative)| under(&listing.prefix, path, *relative)),
            plain: r.get::<_, bool>(5)? && id < next_file_id && deletes.readable(next_file_id),
        };
        listing.insert(key, file);
    }
    Ok(keys)
}

/// `base` (at its snapshot) holding the files of `keys` too: one catalog statement for those
/// keys' files; the head, the files of every key, inlined keys and deletes are the base's.
fn extend(
    conn: &Connection,
    postgres: bool,
    spec: &TableSpec,
    base: &Listing,
    keys: &[String],
) -> duckdb::Result<Listing> {
    let m = catalog_prefix(postgres);
    let files = files_among(postgres, base, &files_of_keys_sql(&m, base.table_id, keys));
    let mut fresh = Listing {
        loaded: Some(Arc::new(keys.iter().cloned().collect())),
        by_key: HashMap::new(),
        ..base.clone()
    };
    read_files(conn, postgres, spec, &files, &mut fresh, &Take::HeldKeys)?;
    let mut next = base.clone();
    let mut loaded = next.loaded.as_deref().cloned().unwrap_or_default();
    loaded.extend(keys.iter().cloned());
    next.loaded = Some(Arc::new(loaded));
    next.by_key.extend(fresh.by_key);
    Ok(next)
}

/// The files statement of an extension: the live files at `base`'s snapshot among the ids
/// `ids` (a statement) selects, in [`read_files`]'s columns.
fn files_among(postgres: bool, base: &Listing, ids: &str) -> String {
    let (s, table) = (base.snapshot, base.table_id);
    let m = catalog_prefix(postgres);
    format!(
        "SELECT CAST(NULL AS VARCHAR) AS keys, f.* FROM (\
           SELECT f.data_file_id, f.path, f.path_is_relative, f.partition_id, \
             {plain} AS catalog_plain, f.mapping_id IS NOT NULL AS mapped, \
             (SELECT string_agg(p.partition_value, chr(31) ORDER BY p.partition_key_index) \
               FROM {m}ducklake_file_partition_value p \
               WHERE p.table_id = {table} AND p.data_file_id = f.data_file_id) AS part, \
             d.n, d.max_id, d.path AS del_path, d.relative AS del_relative, d.plain AS del_plain \
           FROM {m}ducklake_data_file f \
           {} \
           WHERE f.table_id = {table} AND {} AND {}) f",
        deletes_join(postgres, &m, table, s),
        live("f", s),
        file_id_in(postgres, ids),
        plain = plain_sql(&m, table, s),
    )
}

/// `base` (at its snapshot) holding every key's files of `days` too: one catalog statement
/// for those days' files of the keys it does not hold whole; the head, the files of every
/// key, inlined keys and deletes are the base's.
fn extend_days(
    conn: &Connection,
    postgres: bool,
    spec: &TableSpec,
    base: &Listing,
    days: &[NaiveDate],
) -> duckdb::Result<Listing> {
    let m = catalog_prefix(postgres);
    let files = files_among(postgres, base, &files_of_days_sql(&m, base.table_id, days));
    let wanted: HashSet<NaiveDate> = days.iter().copied().collect();
    let mut next = base.clone();
    read_files(
        conn,
        postgres,
        spec,
        &files,
        &mut next,
        &Take::Days(&wanted),
    )?;
    let mut held = (*base.days).clone();
    held.extend(wanted);
    next.days = Arc::new(held);
    Ok(next)
}

/// `f.data_file_id` is one of the ids `ids` (a statement) selects. Inside PostgreSQL as an
/// array the statement fills first, so each file row is looked up by its key: PostgreSQL
/// estimates a key's files from the partition values of every key index together (bucket 7
/// shares its value with every July and every 7th), and at 10⁵ files chose to scan the whole
/// file table for a bucket's 391 rows (`make bench-listing`: one bucket's files 25.6 → 8.2 ms).
fn file_id_in(postgres: bool, ids: &str) -> String {
    if postgres {
        format!("f.data_file_id = ANY (ARRAY({ids}))")
    } else {
        format!("f.data_file_id IN ({ids})")
    }
}

/// The ids of `table`'s data files whose first partition value is one of `keys` (any spec's;
/// [`read_files`] keeps those laid out as the table's).
fn files_of_keys_sql(m: &str, table: i64, keys: &[String]) -> String {
    if keys.is_empty() {
        return format!("SELECT data_file_id FROM {m}ducklake_data_file WHERE false");
    }
    let list: Vec<String> = keys.iter().map(|k| quote(k)).collect();
    format!(
        "SELECT k.data_file_id FROM {m}ducklake_file_partition_value k \
         WHERE k.table_id = {table} AND k.partition_key_index = 0 \
           AND k.partition_value IN ({})",
        list.join(", ")
    )
}

/// The ids of `table`'s data files whose year, month and day partition values (keys 1–3, as
/// DuckLake writes them: unpadded numbers) are one of `days`; [`read_files`] checks each
/// file's day again.
fn files_of_days_sql(m: &str, table: i64, days: &[NaiveDate]) -> String {
    if days.is_empty() {
        return format!("SELECT data_file_id FROM {m}ducklake_data_file WHERE false");
    }
    let value = |v: u32| quote(&v.to_string());
    let mut of_month: Vec<String> = days.iter().map(|d| value(d.day())).collect();
    of_month.sort_unstable();
    of_month.dedup();
    let dates: Vec<String> = days
        .iter()
        .map(|d| {
            format!(
                "(y.partition_value = {} AND mo.partition_value = {} AND dd.partition_value = {})",
                quote(&d.year().to_string()),
                value(d.month()),
                value(d.day())
            )
        })
        .collect();
    // Driven by the day of month, the most selective key; the index on (table, key index,
    // value) finds its rows, the file index the same file's month and year. A file
    // `ducklake_add_data_files` registered has its year, month and day all under key 3
    // ([`TableSpec::hive_part`]): every such file of the table is taken (an index on
    // (table, mapping) finds them; din's merges soon rewrite them), a superset [`read_files`]
    // narrows by the day of their path.
    let of_month = of_month.join(", ");
    format!(
        "SELECT dd.data_file_id FROM {m}ducklake_file_partition_value dd \
         JOIN {m}ducklake_file_partition_value mo ON mo.data_file_id = dd.data_file_id \
           AND mo.table_id = {table} AND mo.partition_key_index = 2 \
         JOIN {m}ducklake_file_partition_value y ON y.data_file_id = dd.data_file_id \
           AND y.table_id = {table} AND y.partition_key_index = 1 \
         WHERE dd.table_id = {table} AND dd.partition_key_index = 3 \
           AND dd.partition_value IN ({of_month}) AND ({}) \
         UNION SELECT a.data_file_id FROM {m}ducklake_data_file a \
         WHERE a.table_id = {table} AND a.mapping_id IS NOT NULL",
        dates.join(" OR ")
    )
}

/// The ids of `table`'s files live at `s` that a read of any key takes: without a partition
/// spec, under one of `other_ids` (not the table's layout), or with a NULL first value.
fn files_of_every_key_sql(m: &str, table: i64, other_ids: &[i64], s: i64) -> String {
    let other = if other_ids.is_empty() {
        String::new()
    } else {
        let ids: Vec<String> = other_ids.iter().map(i64::to_string).collect();
        format!(" OR u.partition_id IN ({})", ids.join(", "))
    };
    format!(
        "SELECT u.data_file_id FROM {m}ducklake_data_file u \
         WHERE u.table_id = {table} AND (u.partition_id IS NULL{other}) AND {} \
         UNION SELECT k.data_file_id FROM {m}ducklake_file_partition_value k \
         WHERE k.table_id = {table} AND k.partition_key_index = 0 AND k.partition_value IS NULL",
        live("u", s)
    )
}

/// The head row of a load.
struct Head {
    table: i64,
    /// The table's path, resolved: what its files' relative paths are under.
    prefix: String,
    next_file_id: i64,
    /// `partition_id=spec` by partition spec, joined by [`SEP`].
    layouts: Option<String>,
    /// [`inlined_tables_sql`]'s list.
    inlined_tables: Option<String>,
    /// [`inlined_deletes_exist`]'s answer.
    inlined_deletes: Option<bool>,
    /// Every partition spec id of the table, `,`-joined.
    specs: Option<String>,
}

/// Where the live table `main.<name>` keeps its files (its path under its schema's under the
/// data path, each as the catalog marks it relative), ending in `/`; `None` when there is no
/// such table. Writers put files into it that `ducklake_add_data_files` registers.
///
/// # Errors
/// The catalog could not be read.
pub fn table_path(conn: &Connection, postgres: bool, name: &str) -> duckdb::Result<Option<String>> {
    let m = catalog_prefix(postgres);
    let sql = format!(
        "SELECT {PLACE_COLUMNS} \
         FROM {m}ducklake_table t JOIN {m}ducklake_schema sc ON sc.schema_id = t.schema_id \
         WHERE sc.schema_name = 'main' AND t.table_name = {} \
           AND t.end_snapshot IS NULL AND sc.end_snapshot IS NULL",
        quote(name)
    );
    conn.query_row(&with_data_path(postgres, &sql), [], |r| table_dir(r, 1))
        .map(Some)
        .or_else(|e| match e {
            duckdb::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })
}

/// The catalog columns that place a table's directory, of `ducklake_schema sc` and
/// `ducklake_table t`: each one's path and whether it is relative to the level above.
const PLACE_COLUMNS: &str = "sc.path AS schema_path, sc.path_is_relative AS schema_relative, \
     t.path, t.path_is_relative";

/// `sql` (a catalog query) with DuckLake's data path as attached put first.
fn with_data_path(postgres: bool, sql: &str) -> String {
    format!(
        "SELECT (SELECT data_path FROM ducklake_settings('{LAKE}')), h.* FROM {} h",
        in_catalog(postgres, sql)
    )
}

/// A table's directory, as DuckLake resolves relative paths (the data path, the schema's path
/// under it, the table's under that), from a row of [`with_data_path`] holding
/// [`PLACE_COLUMNS`] from column `at`.
fn table_dir(r: &duckdb::Row<'_>, at: usize) -> duckdb::Result<String> {
    let data_path: String = r.get(0)?;
    let schema = under(&data_path, &r.get::<_, String>(at)?, r.get(at + 1)?);
    Ok(under(&schema, &r.get::<_, String>(at + 2)?, r.get(at + 3)?))
}

/// `path` as DuckLake resolves it: under `base` when the catalog marks it relative.
fn under(base: &str, path: &str, relative: bool) -> String {
    if relative {
        format!("{base}{path}")
    } else {
        path.to_owned()
    }
}

/// Per data file of `table`, its delete files live at `s`: `data_file_id, n, max_id, path,
/// relative, plain` (`path`/`relative` of the newest; `plain`: all parquet, unencrypted).
fn delete_files_sql(m: &str, table: i64, s: i64) -> String {
    format!(
        "SELECT d.data_file_id, count(*) AS n, max(d.delete_file_id) AS max_id, \
           max(d.path) AS path, bool_and(d.path_is_relative) AS relative, \
           bool_and(d.encryption_key IS NULL AND lower(d.format) = 'parquet') AS plain \
         FROM {m}ducklake_delete_file d WHERE d.table_id = {table} AND {} \
         GROUP BY d.data_file_id",
        live("d", s)
    )
}

/// The [`delete_files_sql`] columns `n, max_id, path, relative, plain` from column `at` on
/// (all NULL: no delete file).
fn delete_files_at(r: &duckdb::Row<'_>, at: usize) -> duckdb::Result<DeleteFiles> {
    let path: Option<String> = r.get(at + 2)?;
    let relative: Option<bool> = r.get(at + 3)?;
    Ok(DeleteFiles {
        count: r.get::<_, Option<i64>>(at)?.unwrap_or(0),
        max_id: r.get(at + 1)?,
        path: path.zip(relative),
        plain: r.get::<_, Option<bool>>(at + 4)?.unwrap_or(false),
    })
}

/// DuckLake's table of the deletes it keeps in the catalog for a table, named by the table's
/// id: `(file_id, row_id, begin_snapshot)`, `row_id` the position in the file. Created on the
/// table's first inlined delete.
const INLINED_DELETE_TABLE: &str = "ducklake_inlined_delete_";

/// Whether the inlined-delete table of the table with id `table` (a SQL expression) exists, as
/// a column of a catalog statement: PostgreSQL can say; the file catalog's metadata tables are
/// not listed anywhere DuckDB can ask (NULL: try it).
fn inlined_deletes_exist(postgres: bool, table: &str) -> String {
    if postgres {
        format!("to_regclass('{INLINED_DELETE_TABLE}' || {table}) IS NOT NULL")
    } else {
        "CAST(NULL AS BOOLEAN)".into()
    }
}

/// The deletes of `table` kept in the catalog and live at `s`, as row positions by data file.
/// `exists`: whether the catalog holds its inlined-delete table ([`inlined_deletes_exist`]);
/// `None` where the catalog cannot say (the file catalog's): the read is tried.
fn inlined_deletes(
    conn: &Connection,
    postgres: bool,
    table: i64,
    s: i64,
    exists: Option<bool>,
) -> duckdb::Result<HashMap<i64, Vec<i64>>> {
    if exists == Some(false) {
        return Ok(HashMap::new());
    }
    let sql = format!(
        "SELECT * FROM {}",
        in_catalog(
            postgres,
            &format!(
                "SELECT file_id, row_id FROM {}{INLINED_DELETE_TABLE}{table} \
                 WHERE begin_snapshot <= {s} ORDER BY 1, 2",
                catalog_prefix(postgres)
            )
        )
    );
    let mut stmt = match conn.prepare(&sql) {
        Ok(stmt) => stmt,
        // The file catalog's metadata tables are not listed anywhere DuckDB can ask.
        Err(e) if !postgres && e.to_string().contains("does not exist") => {
            return Ok(HashMap::new())
        }
        Err(e) => return Err(e),
    };
    let mut out: HashMap<i64, Vec<i64>> = HashMap::new();
    let rows = stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))?;
    for row in rows {
        let (file, position) = row?;
        out.entry(file).or_default().push(position);
    }
    Ok(out)
}

/// `base` moved forward to snapshot `s` by the catalog rows that changed in `(base, s]`: data
/// files that began or ended or were written since, and data files whose delete files did.
/// `None` when the result
/// could not be exact, and a load must answer instead: the base snapshot was expired (its
/// removed files' rows may be gone), the table was dropped, a file arrived under another
/// partition spec, or a live file row lacks its path. Files of keys `base` does not hold are
/// skipped: they are read whole when a read asks for their key.
///
/// On PostgreSQL the change query runs inside the catalog (`postgres_query`), where its
/// filters meet the catalog's indexes instead of copying the file tables into DuckDB.
fn refresh(
    conn: &Connection,
    postgres: bool,
    spec: &TableSpec,
    base: &Listing,
    s: i64,
) -> duckdb::Result<Option<Listing>> {
    let (from, table) = (base.snapshot, base.table_id);
    let m = catalog_prefix(postgres);
    // Files DuckLake wrote after the base snapshot, whatever their begin_snapshot: a flush of
    // inlined rows and a merge date their files back to the rows' own snapshots. File ids are
    // handed out in commit order from the snapshot's `next_file_id`. A literal, so PostgreSQL
    // plans with its statistics (a parameter's default estimate made it JIT-compile the
    // statement: ~35 ms at 10⁵ files).
    let next = base.next_file_id;
    let deletes = deletes_join(postgres, &m, table, s);
    let statement = |scanned: &[String]| {
        let sql = format!(
        "SELECT b.kept, b.next_file_id, b.table_live, b.inlined_tables, b.inlined_keys, \
           f.data_file_id, \
           f.path, f.path_is_relative, f.partition_id, f.catalog_plain, f.live, f.part, \
           f.n, f.max_id, f.del_path, f.del_relative, f.del_plain, b.deletes_exist, f.mapped, \
           f.dated_back \
         FROM (SELECT \
             EXISTS (SELECT 1 FROM {m}ducklake_snapshot WHERE snapshot_id = {from}) AS kept, \
             (SELECT next_file_id FROM {m}ducklake_snapshot WHERE snapshot_id = {s}) AS next_file_id, \
             EXISTS (SELECT 1 FROM {m}ducklake_table t WHERE t.table_id = {table} AND {}) \
               AS table_live, \
             {} AS inlined_tables, {} AS inlined_keys, {} AS deletes_exist) b \
         LEFT JOIN (SELECT f.data_file_id, f.path, f.path_is_relative, f.partition_id, \
             {plain} AS catalog_plain, f.mapping_id IS NOT NULL AS mapped, \
             ({}) AS live, f.begin_snapshot <= {from} AS dated_back, \
             (SELECT string_agg(p.partition_value, chr(31) ORDER BY p.partition_key_index) \
               FROM {m}ducklake_file_partition_value p \
               WHERE p.table_id = {table} AND p.data_file_id = f.data_file_id) AS part, \
             d.n, d.max_id, d.path AS del_path, d.relative AS del_relative, d.plain AS del_plain \
           FROM {m}ducklake_data_file f \
           {deletes} \
           WHERE f.table_id = {table} AND f.data_file_id IN ( \
             SELECT c.data_file_id FROM {m}ducklake_data_file c \
               WHERE c.table_id = {table} AND ({} OR c.data_file_id >= {next}) \
             UNION \
             SELECT c.data_file_id FROM {m}ducklake_delete_file c \
               WHERE c.table_id = {table} AND ({} OR c.delete_file_id >= {next}))) f ON true",
        live("t", s),
        inlined_tables_sql(&m, &table.to_string()),
        inlined_keys_sql(&m, &key_text(spec, postgres), scanned, s),
        inlined_deletes_exist(postgres, &table.to_string()),
        live("f", s),
        changed("c", from, s),
        changed("c", from, s),
        plain = plain_sql(&m, table, s),
        );
        format!("SELECT * FROM {}", in_catalog(postgres, &sql))
    };
    // The base's inlined-data tables are scanned in the same statement. din's flush drops the
    // tables it emptied: then the statement runs again without them, and the inlined rows are
    // read apart below.
    let mut scanned = base.inlined_tables.as_slice();
    let mut stmt = match conn.prepare(&statement(scanned)) {
        Err(e) if !scanned.is_empty() && is_missing_inlined_table(&e) => {
            scanned = &[];
            conn.prepare(&statement(scanned))?
        }
        other => other?,
    };
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
                r.get::<_, Option<bool>>(17)?,
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
                part: r.get(11)?,
                mapped: r.get::<_, Option<bool>>(18)?.unwrap_or(false),
                dated_back: r.get::<_, Option<bool>>(19)?.unwrap_or(false),
                deletes: delete_files_at(r, 12)?,
            });
        }
    }
    let Some((kept, Some(next_file_id), table_live, tables, keys, deletes_exist)) = head else {
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
        Some(names) if names == *base.inlined_tables && names == scanned => {
            next.inlined = parse_keys(keys);
        }
        _ => {
            let Some((names, keys)) = inlined(conn, postgres, spec, table, s)? else {
                return Ok(None);
            };
            next.inlined_tables = Arc::new(names);
            next.inlined = keys;
        }
    }
    // Keys with a file written since the base but dated back to before it: a flush's or a
    // merge's. A merge removes its source files' catalog rows outright (their rows live on in
    // the merged file, each with its own snapshot), so no changed row says they went.
    let mut merged: HashSet<Option<String>> = HashSet::new();
    for Changed {
        id,
        path,
        relative,
        partition_id,
        catalog_plain,
        live,
        part,
        mapped,
        dated_back,
        deletes,
    } in files
    {
        if partition_id.is_some_and(|p| !next.layout_ids.contains(&p)) {
            return Ok(None);
        }
        let part = file_part(spec, mapped, part, path.as_deref().unwrap_or_default());
        let partition = partition_of(&next.layout_ids, partition_id, part.as_deref());
        let day = partition.as_ref().and_then(|(_, d)| *d);
        let key = partition.map(|(k, _)| k);
        if key.as_deref().is_some_and(|k| !next.holds_key(k))
            && !day.is_some_and(|d| next.days.contains(&d))
        {
            // A key and day not read yet: read, at its snapshot, when a read asks for it.
            continue;
        }
        next.group_mut(key.clone()).retain(|f| f.id != id);
        if live != Some(true) {
            continue;
        }
        if dated_back && id >= base.next_file_id {
            merged.insert(key.clone());
        }
        let (Some(path), Some(relative)) = (path, relative) else {
            return Ok(None);
        };
        let resolved = deletes
            .path
            .as_ref()
            .map(|(path, relative)| under(&next.prefix, path, *relative));
        next.insert(
            key,
            DataFile {
                id,
                path: under(&next.prefix, &path, relative),
                day,
                deletes: resolved,
                plain: catalog_plain == Some(true)
                    && id < next_file_id
                    && deletes.readable(next_file_id),
            },
        );
    }
    drop_gone(conn, postgres, &mut next, &merged, base.next_file_id)?;
    next.by_key.retain(|_, files| !files.is_empty());
    next.inlined_deletes = Arc::new(inlined_deletes(conn, postgres, table, s, deletes_exist)?);
    Ok(Some(next))
}

/// Drops from `next` the files of `keys` older than `next_file_id` (those its base held)
/// that are no longer live at its snapshot: one catalog statement, when a refresh saw a flush
/// or merge land in those keys.
fn drop_gone(
    conn: &Connection,
    postgres: bool,
    next: &mut Listing,
    keys: &HashSet<Option<String>>,
    next_file_id: i64,
) -> duckdb::Result<()> {
    let held: Vec<i64> = keys
        .iter()
        .filter_map(|key| match key {
            Some(k) => next.by_key.get(k),
            None => Some(&next.unpartitioned),
        })
        .flat_map(|files| files.iter().map(|f| f.id))
        .filter(|id| *id < next_file_id)
        .collect();
    if held.is_empty() {
        return Ok(());
    }
    let m = catalog_prefix(postgres);
    let ids: Vec<String> = held.iter().map(i64::to_string).collect();
    let sql = format!(
        "SELECT f.data_file_id FROM {m}ducklake_data_file f \
         WHERE f.table_id = {} AND f.data_file_id IN ({}) AND {}",
        next.table_id,
        ids.join(", "),
        live("f", next.snapshot)
    );
    let mut stmt = conn.prepare(&format!("SELECT * FROM {}", in_catalog(postgres, &sql)))?;
    let live: HashSet<i64> = stmt
        .query_map([], |r| r.get(0))?
        .collect::<duckdb::Result<_>>()?;
    for key in keys {
        next.group_mut(key.clone())
            .retain(|f| f.id >= next_file_id || live.contains(&f.id));
    }
    Ok(())
}

/// The join giving each data file `f` of `table` its live delete files at `s` as
/// [`delete_files_sql`]'s columns (alias `d`): looked up per file through the catalog's index
/// inside PostgreSQL; DuckDB aggregates the table's live delete files once and joins them (a
/// per-file lookup there was 15 ms at 10⁵ files).
fn deletes_join(postgres: bool, m: &str, table: i64, s: i64) -> String {
    if postgres {
        format!(
            "LEFT JOIN LATERAL (SELECT count(*) AS n, max(d.delete_file_id) AS max_id, \
               max(d.path) AS path, bool_and(d.path_is_relative) AS relative, \
               bool_and(d.encryption_key IS NULL AND lower(d.format) = 'parquet') AS plain \
             FROM ducklake_delete_file d \
             WHERE d.table_id = {table} AND d.data_file_id = f.data_file_id AND {}) d ON true",
            live("d", s)
        )
    } else {
        format!(
            "LEFT JOIN ({}) d ON d.data_file_id = f.data_file_id",
            delete_files_sql(m, table, s)
        )
    }
}

/// A data file the refresh found changed, as of the new snapshot.
struct Changed {
    id: i64,
    path: Option<String>,
    relative: Option<bool>,
    partition_id: Option<i64>,
    catalog_plain: Option<bool>,
    live: Option<bool>,
    /// Registered by `ducklake_add_data_files`: its partition values are its path's.
    mapped: bool,
    /// Its `begin_snapshot` is at or before the base's snapshot.
    dated_back: bool,
    part: Option<String>,
    deletes: DeleteFiles,
}

/// The names of `table`'s inlined-data tables, comma-separated in name order.
fn inlined_tables_sql(m: &str, table: &str) -> String {
    format!(
        "(SELECT string_agg(table_name, ',' ORDER BY table_name) \
          FROM {m}ducklake_inlined_data_tables WHERE table_id = {table})"
    )
}

/// The keys (`key`: [`key_text`]) of rows live at `s` in the inlined-data tables `names`,
/// joined by [`SEP`]; a NULL key as `''`.
fn inlined_keys_sql(m: &str, key: &str, names: &[String], s: i64) -> String {
    if names.is_empty() {
        return "CAST(NULL AS VARCHAR)".into();
    }
    let scans: Vec<String> = names
        .iter()
        .map(|name| {
            format!(
                "SELECT coalesce({key}, '') AS k FROM {m}{name} i WHERE {}",
                live("i", s)
            )
        })
        .collect();
    format!(
        "(SELECT string_agg(DISTINCT k, chr(31)) FROM ({}) x)",
        scans.join(" UNION ALL ")
    )
}

/// True for the error of a statement naming an inlined-data table that no longer exists.
fn is_missing_inlined_table(e: &duckdb::Error) -> bool {
    let text = e.to_string();
    text.contains("ducklake_inlined_data_") && text.contains("does not exist")
}

/// An inlined row's key (alias `i`) as text. Inside PostgreSQL (`native_postgres`) DuckLake
/// stores a VARCHAR column of inlined rows as `bytea`, which DuckDB reads back as text but
/// PostgreSQL's own cast would render as hex.
fn key_text(spec: &TableSpec, native_postgres: bool) -> String {
    let key = spec.key();
    let varchar = spec
        .columns
        .iter()
        .any(|(name, ty)| *name == key && ty.eq_ignore_ascii_case("VARCHAR"));
    if native_postgres && varchar {
        format!("convert_from(i.\"{key}\", 'UTF8')")
    } else {
        format!("CAST(i.\"{key}\" AS VARCHAR)")
    }
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

/// Keys from [`inlined_keys_sql`]. A list holding `''` only (one NULL or empty key) is
/// one key, not none.
fn parse_keys(list: Option<String>) -> HashSet<String> {
    list.map(|l| l.split(SEP).map(str::to_owned).collect())
        .unwrap_or_default()
}

/// `table`'s inlined-data tables and the keys (column `key`) of rows live in them at `s`:
/// those rows live in the catalog, not in files. `None` when a table name is not DuckLake's.
fn inlined(
    conn: &Connection,
    postgres: bool,
    spec: &TableSpec,
    table: i64,
    s: i64,
) -> duckdb::Result<Option<(Vec<String>, HashSet<String>)>> {
    let m = catalog_prefix(postgres);
    let key = key_text(spec, postgres);
    let one = |expr: String| {
        format!(
            "SELECT * FROM {}",
            in_catalog(postgres, &format!("SELECT {expr}"))
        )
    };
    let tables = conn.query_row(&one(inlined_tables_sql(&m, &table.to_string())), [], |r| {
        r.get(0)
    })?;
    let Some(names) = inlined_names(tables) else {
        return Ok(None);
    };
    let keys = conn.query_row(&one(inlined_keys_sql(&m, &key, &names, s)), [], |r| {
        r.get(0)
    })?;
    Ok(Some((names, parse_keys(keys))))
}

/// A file's partition values joined by [`SEP`]: the catalog's (`part`), or for a `mapped`
/// file (one `ducklake_add_data_files` registered) those of its path ([`TableSpec::hive_part`]).
fn file_part(spec: &TableSpec, mapped: bool, part: Option<String>, path: &str) -> Option<String> {
    if mapped {
        spec.hive_part(path)
    } else {
        part
    }
}

/// A file's partition: its spec is the table's layout and its values parse.
fn partition_of(
    layout_ids: &HashSet<i64>,
    partition_id: Option<i64>,
    values: Option<&str>,
) -> Option<Partition> {
    partition_id
        .filter(|id| layout_ids.contains(id))
        .and_then(|_| partition(values.unwrap_or_default()))
}

/// `(key, day)` from a file's partition values joined by [`SEP`], if they parse: the key and
/// the day's year, month and day for the time-partitioned tables, the key alone for the
/// rollups. A NULL value is missing from the join, so the values do not parse.
fn partition(values: &str) -> Option<Partition> {
    let parts: Vec<&str> = values.split(SEP).collect();
    match parts[..] {
        [key] => Some((key.to_owned(), None)),
        [key, year, month, day] => {
            let day = NaiveDate::from_ymd_opt(
                year.parse().ok()?,
                month.parse().ok()?,
                day.parse().ok()?,
            )?;
            Some((key.to_owned(), Some(day)))
        }
        _ => None,
    }
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
    use crate::testing::{Backend, TestLake};

    /// A time-partitioned table laid out as dq's `lake.signals`, with the columns the tests use.
    const SIGNALS: TableSpec = TableSpec {
        name: "signals",
        partition: r#"subject_bucket, year("timestamp"), month("timestamp"), day("timestamp")"#,
        columns: &[
            ("subject", "VARCHAR"),
            ("subject_bucket", "INTEGER"),
            ("timestamp", "TIMESTAMP WITH TIME ZONE"),
            ("value_number", "DOUBLE"),
        ],
    };

    /// din's `lake.raw_events`, by type first.
    const RAW: TableSpec = TableSpec {
        name: "raw_events",
        partition: crate::raw::PARTITION,
        columns: &crate::raw::COLUMNS,
    };

    fn file(path: &str, day: Option<(i32, u32, u32)>, plain: bool) -> DataFile {
        DataFile {
            id: 0,
            path: path.into(),
            day: day.map(|(y, m, d)| NaiveDate::from_ymd_opt(y, m, d).unwrap()),
            deletes: None,
            plain,
        }
    }

    /// The paths [`Listing::select`] picks.
    fn paths<'a>(l: &'a Listing, key: &str, from_us: i64, to_us: i64) -> Option<Vec<&'a str>> {
        l.select(Some(&[key.to_owned()]), from_us, to_us)
            .map(|files| files.iter().map(|f| f.path.as_str()).collect())
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
            by_key: HashMap::from([
                (
                    "3".to_owned(),
                    Arc::new(vec![
                        file("a", Some((2025, 6, 1)), true),
                        file("b", Some((2025, 6, 2)), true),
                        file("c", Some((2025, 6, 3)), true),
                    ]),
                ),
                (
                    "4".to_owned(),
                    Arc::new(vec![file("d", Some((2025, 6, 2)), false)]),
                ),
            ]),
            inlined: HashSet::from(["5".to_owned()]),
            usable: true,
            ..Listing::default()
        }
    }

    #[test]
    fn selects_the_buckets_days_of_a_half_open_window() {
        let l = listing();
        // [Jun 2 00:00, Jun 3 00:00): Jun 3's file holds no row of the window.
        assert_eq!(
            paths(&l, "3", us(2025, 6, 2, 0), us(2025, 6, 3, 0)),
            Some(vec!["b"])
        );
        assert_eq!(
            paths(&l, "3", us(2025, 6, 1, 23), us(2025, 6, 3, 1)),
            Some(vec!["a", "b", "c"])
        );
    }

    #[test]
    fn a_read_of_every_key_lists_at_most_31_days() {
        let june = |d| NaiveDate::from_ymd_opt(2025, 6, d).unwrap();
        assert_eq!(
            window_days(us(2025, 6, 1, 0), us(2025, 6, 2, 0)),
            Some(vec![june(1)])
        );
        assert_eq!(
            window_days(us(2025, 6, 1, 23), us(2025, 6, 3, 1)),
            Some(vec![june(1), june(2), june(3)])
        );
        let days = window_days(us(2025, 6, 1, 0), us(2025, 7, 2, 0)).unwrap();
        assert_eq!(days.len() as i64, MAX_LISTED_DAYS);
        assert_eq!(window_days(us(2025, 6, 1, 0), us(2025, 7, 2, 1)), None);
        assert_eq!(window_days(us(2025, 6, 1, 0), i64::MAX), None);
        assert_eq!(window_days(i64::MIN, us(2025, 6, 1, 0)), None);
        assert_eq!(window_days(us(2025, 6, 1, 0), us(2025, 6, 1, 0)), None);
        assert_eq!(
            windows_days(&[
                (us(2025, 6, 2, 0), us(2025, 6, 3, 0)),
                (us(2025, 6, 1, 12), us(2025, 6, 2, 12))
            ]),
            Some(vec![june(1), june(2)])
        );
        assert_eq!(
            windows_days(&[(us(2025, 6, 2, 0), us(2025, 6, 3, 0)), (0, i64::MAX)]),
            None
        );
    }

    #[test]
    fn falls_back_when_a_plain_read_would_differ() {
        let mut l = listing();
        let day = (us(2025, 6, 2, 0), us(2025, 6, 3, 0));
        assert_eq!(paths(&l, "4", day.0, day.1), None, "not plain");
        assert_eq!(paths(&l, "5", day.0, day.1), None, "inlined rows");
        assert_eq!(
            paths(&l, "6", day.0, day.1),
            Some(vec![]),
            "no file: nothing to read"
        );
        l.insert(None, file("u", None, true));
        assert_eq!(paths(&l, "6", day.0, day.1), Some(vec!["u"]));
        let mut many = l.clone();
        for i in 0..MAX_UNPARTITIONED {
            many.insert(None, file(&format!("u{i}"), None, true));
        }
        assert_eq!(
            paths(&many, "6", day.0, day.1),
            None,
            "a backfill's unpartitioned files: the scan prunes them"
        );
        assert_eq!(paths(&l, "3", day.0, day.1), Some(vec!["b", "u"]));
        // Every key: the inlined rows of key 5 send the read to the scan.
        assert_eq!(l.select(None, day.0, day.1).map(|f| f.len()), None);
        l.inlined.clear();
        assert_eq!(l.select(None, day.0, day.1).map(|f| f.len()), None, "d");
        Arc::make_mut(l.by_key.get_mut("4").unwrap())[0].plain = true;
        assert_eq!(l.select(None, day.0, day.1).map(|f| f.len()), Some(3));
        assert_eq!(l.newest_day(None), NaiveDate::from_ymd_opt(2025, 6, 3));
        let of = |k: &str| l.newest_day(Some(&[k.to_owned()]));
        assert_eq!(of("4"), NaiveDate::from_ymd_opt(2025, 6, 2));
        assert_eq!(of("9"), None, "a key without files");
        // A NULL key among the inlined rows stands for every key.
        l.inlined.insert(String::new());
        assert_eq!(paths(&l, "3", day.0, day.1), None, "inlined NULL key");
        l.inlined.clear();
        l.usable = false;
        assert_eq!(paths(&l, "3", day.0, day.1), None, "unmatched listing");
    }

    #[test]
    fn deleted_rows_are_skipped_by_position() {
        let mut l = listing();
        let mut with_file = file("e", Some((2025, 6, 2)), true);
        with_file.id = 1;
        with_file.deletes = Some("e-delete".into());
        let mut with_inlined = file("f", Some((2025, 6, 2)), true);
        with_inlined.id = 2;
        l.inlined_deletes = Arc::new(HashMap::from([(2, vec![3, 9])]));
        let clean = file("g", Some((2025, 6, 2)), true);
        assert_eq!(
            l.relation(&SIGNALS, &[&clean]),
            "read_parquet(['g'], hive_partitioning = false)"
        );
        assert_eq!(
            l.relation(&SIGNALS, &[&clean, &with_file, &with_inlined]),
            "(SELECT * FROM read_parquet(['g'], hive_partitioning = false) UNION ALL BY NAME \
             SELECT * EXCLUDE (file_row_number) FROM read_parquet('e', hive_partitioning = false, \
             file_row_number = true) WHERE file_row_number NOT IN \
             (SELECT pos FROM read_parquet('e-delete', hive_partitioning = false)) UNION ALL BY NAME \
             SELECT * EXCLUDE (file_row_number) FROM read_parquet('f', hive_partitioning = false, \
             file_row_number = true) WHERE file_row_number NOT IN (3, 9))"
        );
        assert!(l
            .relation(&RAW, &[])
            .contains("CAST(NULL AS VARCHAR) AS \"subject\""));

        // One delete file written by the snapshot: applied; two, or one written later (dated
        // back by a flush), or an encrypted one: the DuckLake scan.
        let one = |max_id, plain| DeleteFiles {
            count: 1,
            max_id: Some(max_id),
            path: Some(("d".into(), true)),
            plain,
        };
        assert!(DeleteFiles::default().readable(10));
        assert!(one(9, true).readable(10));
        assert!(!one(10, true).readable(10));
        assert!(!one(9, false).readable(10));
        assert!(!DeleteFiles {
            count: 2,
            ..one(9, true)
        }
        .readable(10));
    }

    /// The catalog spells a partition spec `transform:column` by key; the key column is the
    /// first one's.
    #[test]
    fn layouts_are_spelled_as_the_catalog_spells_them() {
        assert_eq!(
            SIGNALS.layout(),
            "identity:subject_bucket,year:timestamp,month:timestamp,day:timestamp"
        );
        assert_eq!(SIGNALS.key(), "subject_bucket");
        assert_eq!(RAW.layout(), "identity:type,year:time,month:time,day:time");
        assert_eq!(RAW.key(), "type");
        let rollup = TableSpec {
            partition: "subject_bucket",
            ..SIGNALS
        };
        assert_eq!(rollup.layout(), "identity:subject_bucket");
    }

    #[test]
    fn partition_values_and_names_are_validated() {
        let values = |v: &[&str]| v.join(&SEP.to_string());
        assert_eq!(
            partition(&values(&["12", "2025", "6", "30"])),
            Some(("12".to_owned(), NaiveDate::from_ymd_opt(2025, 6, 30)))
        );
        assert_eq!(
            partition(&values(&["a/b,c", "2025", "6", "30"])),
            Some(("a/b,c".to_owned(), NaiveDate::from_ymd_opt(2025, 6, 30))),
            "a type may hold any character but the separator"
        );
        assert_eq!(
            partition("12"),
            Some(("12".to_owned(), None)),
            "a rollup's key"
        );
        assert_eq!(partition(&values(&["12", "2025", "6", "31"])), None);
        assert_eq!(partition(&values(&["12", "2025", "6"])), None, "a NULL key");
        assert_eq!(partition(&values(&["12", "2025", "6", "30", "1"])), None);
        assert!(is_inlined_table_name("ducklake_inlined_data_4_12"));
        assert!(!is_inlined_table_name("ducklake_inlined_data_4_"));
        assert!(!is_inlined_table_name("ducklake_inlined_data_4_1; DROP"));
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
        assert_eq!(parse_keys(None), HashSet::new());
        assert_eq!(
            parse_keys(Some(values(&["3", "dimo.status"]))),
            HashSet::from(["3".to_owned(), "dimo.status".to_owned()])
        );
        assert_eq!(
            parse_keys(Some(String::new())),
            HashSet::from([String::new()])
        );
    }

    /// A listing's files with their keys, its inlined keys, its inlined deletes and whether it
    /// is usable.
    type Rows = (
        Vec<(Option<String>, DataFile)>,
        Vec<String>,
        Vec<(i64, Vec<i64>)>,
        bool,
    );

    /// A listing as sorted rows, for comparing two listings of one snapshot.
    fn rows(l: &Listing) -> Rows {
        let mut files: Vec<(Option<String>, DataFile)> = l
            .by_key
            .iter()
            .flat_map(|(k, files)| files.iter().map(|f| (Some(k.clone()), f.clone())))
            .chain(l.unpartitioned.iter().map(|f| (None, f.clone())))
            .collect();
        files.sort_by_key(|(_, f)| f.id);
        let mut inlined: Vec<String> = l.inlined.iter().cloned().collect();
        inlined.sort_unstable();
        let mut deletes: Vec<(i64, Vec<i64>)> = l
            .inlined_deletes
            .iter()
            .map(|(f, p)| (*f, p.clone()))
            .collect();
        deletes.sort_unstable();
        (files, inlined, deletes, l.usable)
    }

    fn newest(conn: &Connection) -> i64 {
        crate::snapshot::newest(conn, false).unwrap().0
    }

    /// `n` speed rows per subject of `subjects`, one per hour from `day` 00:00.
    fn insert(conn: &Connection, subjects: &[&str], day: &str, n: usize) {
        let values: Vec<String> = subjects
            .iter()
            .flat_map(|subject| {
                // Any bucket rule does: one bucket per subject.
                let bucket = subject.len() as i32 * 7 + i32::from(subject.as_bytes()[6]);
                (0..n).map(move |h| {
                    format!(
                        "('{subject}', {bucket}, '{day}'::TIMESTAMPTZ + INTERVAL {h} HOUR, {h})"
                    )
                })
            })
            .collect();
        conn.execute_batch(&format!(
            "INSERT INTO lake.signals (subject, subject_bucket, \"timestamp\", value_number) \
             VALUES {}",
            values.join(", ")
        ))
        .unwrap();
    }

    /// `l` holding only the files of `keys` and those read for every key.
    fn restricted(l: &Listing, keys: &[String]) -> Listing {
        let mut only = l.clone();
        only.by_key.retain(|k, _| keys.contains(k));
        only
    }

    /// A refresh from `base` to the newest snapshot lists what a whole load lists, and one from
    /// `partial` (a listing of a few keys) what a load of those keys lists, the whole load's
    /// files of those keys; the partial one extended by every other key lists what the whole
    /// load lists. Returns both refreshed.
    fn refreshed_as_loaded(
        conn: &Connection,
        postgres: bool,
        (base, partial): (&Listing, &Listing),
        stage: &str,
    ) -> (Listing, Listing) {
        let s = newest(conn);
        assert!(s > base.snapshot, "{stage}: a commit landed");
        let loaded = load(conn, postgres, &SIGNALS, s, None).unwrap();
        assert_lists_as_ducklake(conn, &SIGNALS, &loaded, stage);
        let refreshed = refresh(conn, postgres, &SIGNALS, base, s)
            .unwrap()
            .unwrap_or_else(|| panic!("{stage}: the refresh answered"));
        assert_eq!(rows(&refreshed), rows(&loaded), "{stage}");
        assert_eq!(refreshed.snapshot, s);

        let keys: Vec<String> = partial.loaded.as_deref().unwrap().iter().cloned().collect();
        let moved = refresh(conn, postgres, &SIGNALS, partial, s)
            .unwrap()
            .unwrap_or_else(|| panic!("{stage}: the partial refresh answered"));
        let expected = rows(&restricted(&loaded, &keys));
        assert_eq!(rows(&moved), expected, "{stage}: partial refresh");
        let direct = load(conn, postgres, &SIGNALS, s, Some(&keys)).unwrap();
        assert_eq!(rows(&direct), expected, "{stage}: partial load");
        let others: Vec<String> = loaded
            .by_key
            .keys()
            .filter(|k| !keys.contains(k))
            .cloned()
            .collect();
        let extended = extend(conn, postgres, &SIGNALS, &moved, &others).unwrap();
        assert_eq!(rows(&extended), rows(&loaded), "{stage}: extended");
        (refreshed, moved)
    }

    /// Writes one Parquet file per `(subject, day)` of `rows` (24 hourly rows of the test
    /// table's columns) into the table's partition directory under `prefix` and registers them
    /// in one `ducklake_add_data_files` call, as the materializer's own writer does. Returns
    /// their paths.
    fn add_files(conn: &Connection, prefix: &str, rows: &[(&str, &str)]) -> Vec<String> {
        let paths: Vec<String> = rows
            .iter()
            .enumerate()
            .map(|(i, (subject, day))| {
                let bucket = subject.len() as i32 * 7 + i32::from(subject.as_bytes()[6]);
                let date = NaiveDate::parse_from_str(day, "%Y-%m-%d").unwrap();
                let dir = format!(
                    "{prefix}subject_bucket={bucket}/year={}/month={}/day={}",
                    date.year(),
                    date.month(),
                    date.day()
                );
                std::fs::create_dir_all(&dir).unwrap();
                let path = format!("{dir}/dq-test-{i}.parquet");
                conn.execute_batch(&format!(
                    "COPY (SELECT '{subject}' AS subject, {bucket} AS subject_bucket, \
                       '{day}'::TIMESTAMPTZ + INTERVAL (h) HOUR AS \"timestamp\", \
                       h::DOUBLE + 0.5 AS value_number FROM range(24) r(h)) \
                     TO '{path}' (FORMAT parquet)"
                ))
                .unwrap();
                path
            })
            .collect();
        let list: Vec<String> = paths.iter().map(|p| quote(p)).collect();
        conn.execute_batch(&format!(
            "CALL ducklake_add_data_files('lake', 'signals', [{}])",
            list.join(", ")
        ))
        .unwrap();
        paths
    }

    /// A direct read of `key` through `l` answers as the DuckLake scan at `l`'s snapshot.
    fn assert_reads_as_ducklake(conn: &Connection, l: &Listing, key: &str) {
        let files = l
            .select(Some(&[key.to_owned()]), i64::MIN, i64::MAX)
            .unwrap_or_else(|| panic!("bucket {key} is read directly: {:?}", rows(l)));
        let rows_of = |relation: &str| -> Vec<(String, i64, f64)> {
            let mut stmt = conn
                .prepare(&format!(
                    "SELECT subject, epoch_us(\"timestamp\"), value_number FROM {relation} \
                     WHERE subject_bucket = {key} ORDER BY ALL"
                ))
                .unwrap();
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        let direct = rows_of(&l.relation(&SIGNALS, &files));
        let scan = rows_of(&format!("lake.signals AT (VERSION => {})", l.snapshot));
        assert!(!scan.is_empty(), "bucket {key} has rows");
        assert_eq!(direct, scan, "bucket {key}");
    }

    /// Every data file of `l` with its delete file, resolved, as DuckLake's own listing of that
    /// snapshot has them: the path rule is ours, so it is held against DuckLake's here.
    fn assert_lists_as_ducklake(conn: &Connection, spec: &TableSpec, l: &Listing, stage: &str) {
        assert!(l.usable, "{stage}: the listing is usable");
        let mut ours: Vec<(String, Option<String>)> = l
            .by_key
            .values()
            .flat_map(|files| files.iter())
            .chain(l.unpartitioned.iter())
            .map(|f| (f.path.clone(), f.deletes.clone()))
            .collect();
        ours.sort();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT data_file, delete_file FROM ducklake_list_files('lake', '{}', \
                 schema => 'main', snapshot_version => {}) ORDER BY 1, 2",
                spec.name, l.snapshot
            ))
            .unwrap();
        let theirs: Vec<(String, Option<String>)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(!theirs.is_empty(), "{stage}: DuckLake lists files");
        assert_eq!(ours, theirs, "{stage}");
    }

    fn refresh_lists_what_a_load_lists(backend: Backend) {
        let t = TestLake::new(backend);
        let lake = t.open().unwrap();
        let create: Vec<String> = SIGNALS
            .columns
            .iter()
            .map(|(n, ty)| format!("\"{n}\" {ty}"))
            .collect();
        // Two commits, as dq's schema setup makes them.
        lake.conn()
            .execute_batch(&format!(
                "CREATE TABLE lake.signals ({})",
                create.join(", ")
            ))
            .unwrap();
        lake.conn()
            .execute_batch(&format!(
                "ALTER TABLE lake.signals SET PARTITIONED BY ({})",
                SIGNALS.partition
            ))
            .unwrap();
        crate::indexes::ensure(&lake).unwrap();
        let conn = lake.conn();
        let postgres = backend == Backend::Postgres;
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
            assert_eq!(indexes, crate::indexes::CHANGE_INDEXES.len() as i64);
        }
        let subjects = ["did:a:1", "did:a:2", "did:a:3", "did:a:4"];

        insert(conn, &subjects, "2025-06-01", 24);
        let base = load(conn, postgres, &SIGNALS, newest(conn), None).unwrap();
        assert!(base.usable && base.file_count() >= 4, "{:?}", rows(&base));
        // The keys of `did:a:1` (new files next) and `did:a:3` (inlined rows after), by the rule
        // of `insert`; the other two are read into it by extension at each stage.
        let keys = ["98".to_owned(), "100".to_owned()];
        let partial = load(conn, postgres, &SIGNALS, base.snapshot, Some(&keys)).unwrap();
        assert_eq!(rows(&partial), rows(&restricted(&base, &keys)));
        assert_eq!(partial.file_count(), 2, "{:?}", rows(&partial));
        // A listing of no key yet: the head alone, as the query functions' init loads it.
        let head = load(conn, postgres, &SIGNALS, base.snapshot, Some(&[])).unwrap();
        assert!(head.usable && head.file_count() == 0 && head.table_id == base.table_id);

        insert(conn, &subjects[..2], "2025-06-02", 24);
        let (l, p) = refreshed_as_loaded(conn, postgres, (&base, &partial), "new files");
        assert!(l.file_count() > base.file_count());
        // The base listing is untouched: its buckets were shared, not changed in place.
        assert_eq!(
            rows(&base),
            rows(&load(conn, postgres, &SIGNALS, base.snapshot, None).unwrap())
        );

        // Files the materializer's own writer makes: written into the table's partition
        // directories and registered with `ducklake_add_data_files`. DuckLake maps them by
        // name and misfiles their day's partition values; the listing takes their days from
        // their paths and reads them directly.
        let added = add_files(
            conn,
            &l.prefix,
            &[("did:a:1", "2025-06-02"), ("did:a:2", "2025-06-07")],
        );
        let (l, p) = refreshed_as_loaded(conn, postgres, (&l, &p), "added files");
        let listed: Vec<&DataFile> = l
            .by_key
            .values()
            .flat_map(|files| files.iter())
            .filter(|f| added.contains(&f.path))
            .collect();
        assert_eq!(listed.len(), added.len(), "{:?}", rows(&l));
        assert!(listed.iter().all(|f| f.plain), "{listed:?}");
        let mut days: Vec<String> = listed.iter().map(|f| format!("{:?}", f.day)).collect();
        days.sort();
        assert_eq!(days, ["Some(2025-06-02)", "Some(2025-06-07)"]);
        for key in ["98", "99"] {
            assert_reads_as_ducklake(conn, &l, key);
        }
        // Read by day (as a search of every key reads), an added file is found by its path's day.
        let head = load(conn, postgres, &SIGNALS, l.snapshot, Some(&[])).unwrap();
        for day in [2, 7] {
            let day = [NaiveDate::from_ymd_opt(2025, 6, day).unwrap()];
            let by_day = extend_days(conn, postgres, &SIGNALS, &head, &day).unwrap();
            assert_eq!(rows(&by_day), rows(&of_days(&l, &day)), "{day:?}");
        }

        // din's merge of files the listing holds: DuckLake removes the sources' catalog rows.
        insert(conn, &subjects[..2], "2025-06-02", 24);
        conn.execute_batch("CALL ducklake_merge_adjacent_files('lake')")
            .unwrap();
        let (l, p) = refreshed_as_loaded(conn, postgres, (&l, &p), "merged");
        for key in ["98", "99"] {
            assert_reads_as_ducklake(conn, &l, key);
        }

        insert(conn, &subjects[2..3], "2025-06-03", 2);
        let (l, p) = refreshed_as_loaded(conn, postgres, (&l, &p), "inlined rows");
        assert!(!l.inlined.is_empty(), "DuckLake inlined the two rows");

        conn.execute_batch(
            "DELETE FROM lake.signals WHERE \"timestamp\" < '2025-06-01 12:00:00+00'::TIMESTAMPTZ",
        )
        .unwrap();
        let (l, p) = refreshed_as_loaded(conn, postgres, (&l, &p), "delete files");
        assert!(
            l.by_key
                .values()
                .flat_map(|f| f.iter())
                .any(|f| f.deletes.is_some() && f.plain),
            "files with a delete file are read directly"
        );

        // A delete of a few rows: DuckLake keeps it in the catalog, not in a delete file.
        conn.execute_batch("DELETE FROM lake.signals WHERE value_number = 20")
            .unwrap();
        let (l, p) = refreshed_as_loaded(conn, postgres, (&l, &p), "inlined deletes");
        assert!(
            !l.inlined_deletes.is_empty(),
            "DuckLake inlined the deletes: {:?}",
            rows(&l)
        );

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
        let (after, _) =
            refreshed_as_loaded(conn, postgres, (&l, &p), "flushed, rewritten, merged");
        assert!(after.inlined.is_empty());

        // A base whose snapshot was expired: its removed files' rows may be gone.
        insert(conn, &subjects, "2025-06-04", 24);
        conn.execute_batch(&format!(
            "CALL ducklake_expire_snapshots('lake', versions => [{}])",
            after.snapshot
        ))
        .unwrap();
        assert!(refresh(conn, postgres, &SIGNALS, &after, newest(conn))
            .unwrap()
            .is_none());

        // The query functions attach the catalog read-only: the refresh runs there too.
        if postgres {
            let base = load(conn, postgres, &SIGNALS, newest(conn), None).unwrap();
            insert(conn, &subjects[..1], "2025-06-05", 24);
            let ro = t.open_with(|c| c.read_only = true).unwrap();
            let moved = refresh(ro.conn(), true, &SIGNALS, &base, newest(ro.conn())).unwrap();
            assert_eq!(
                moved.map(|l| rows(&l)),
                Some(rows(
                    &load(conn, postgres, &SIGNALS, newest(conn), None).unwrap()
                ))
            );
        }
    }

    /// din's table is listed by type: a read of one type opens only that type's files of the
    /// window's days, a read of every type all of them, and a refresh lists what a load lists.
    fn raw_events_are_listed_by_type(backend: Backend) {
        let t = TestLake::new(backend);
        let lake = t.open().unwrap();
        crate::raw::ensure(&lake).unwrap();
        let conn = lake.conn();
        let postgres = backend == Backend::Postgres;
        let insert = |ty: &str, day: &str, n: usize| {
            let values: Vec<String> = (0..n)
                .map(|i| {
                    format!(
                        "('did:a:{i}', '{day}'::TIMESTAMPTZ + INTERVAL {i} MINUTE, '{ty}', \
                         'id-{ty}-{day}-{i}')"
                    )
                })
                .collect();
            conn.execute_batch(&format!(
                "INSERT INTO lake.raw_events (subject, \"time\", type, id) VALUES {}",
                values.join(", ")
            ))
            .unwrap();
        };
        insert("dimo.status", "2025-06-01", 20);
        insert("dimo.status", "2025-06-02", 20);
        insert("dimo.tombstone", "2025-06-02", 20);
        let base = load(conn, postgres, &RAW, newest(conn), None).unwrap();
        assert_lists_as_ducklake(conn, &RAW, &base, "raw_events");
        let status_only = ["dimo.status".to_owned()];
        let partial = load(conn, postgres, &RAW, base.snapshot, Some(&status_only)).unwrap();
        assert_eq!(rows(&partial), rows(&restricted(&base, &status_only)));
        assert_eq!(partial.file_count(), 2);
        let day2 = (us(2025, 6, 2, 0), us(2025, 6, 3, 0));
        let status = ["dimo.status".to_owned()];
        let picked = base.select(Some(&status), day2.0, day2.1).unwrap();
        assert_eq!(picked.len(), 1, "{:?}", rows(&base));
        assert_eq!(base.select(None, day2.0, day2.1).unwrap().len(), 2);
        assert_eq!(base.select(None, i64::MIN, i64::MAX).unwrap().len(), 3);
        assert_eq!(base.newest_day(None), NaiveDate::from_ymd_opt(2025, 6, 2));

        // A read of every type over a few days reads those days' files into the listing, not
        // the whole table's.
        let june = |d| NaiveDate::from_ymd_opt(2025, 6, d).unwrap();
        let day1 = (us(2025, 6, 1, 0), us(2025, 6, 2, 0));
        let head = load(conn, postgres, &RAW, base.snapshot, Some(&[])).unwrap();
        let by_day = extend_days(conn, postgres, &RAW, &head, &[june(2)]).unwrap();
        assert_eq!(rows(&by_day), rows(&of_days(&base, &[june(2)])));
        assert_eq!(by_day.file_count(), 2, "{:?}", rows(&by_day));
        assert_eq!(
            by_day.select(None, day2.0, day2.1).map(|f| paths_of(&f)),
            base.select(None, day2.0, day2.1).map(|f| paths_of(&f))
        );
        assert!(
            by_day.select(None, day1.0, day1.1).is_none(),
            "day 1 is not held"
        );
        assert!(by_day.select(None, day1.0, day2.1).is_none());
        assert!(by_day.select(Some(&status), day2.0, day2.1).is_none());
        // Beside a type held whole, only the other types' files of the day are read.
        let both = extend_days(conn, postgres, &RAW, &partial, &[june(2)]).unwrap();
        assert_eq!(both.file_count(), 3, "{:?}", rows(&both));
        assert_eq!(both.select(None, day2.0, day2.1).unwrap().len(), 2);
        assert_eq!(both.select(Some(&status), day1.0, day2.1).unwrap().len(), 2);
        // A key extension of a listing read by day holds that key's files once.
        let keyed = extend(conn, postgres, &RAW, &by_day, &status).unwrap();
        assert_eq!(rows(&keyed), rows(&both));

        // Through the engine's cache: the first read of every type over one day reads the
        // head and that day's files; a read without bounds, all of them.
        let files = TableFiles::new(RAW, postgres);
        let at = Snapshot(base.snapshot);
        let report = files.listing_of_window(conn, at, day2).unwrap();
        assert_eq!(report.source, ListingSource::Extended);
        assert_eq!((report.files, report.complete), (2, false));
        let [relation] = files.relations(conn, at, None, [day2]).unwrap().unwrap();
        assert_eq!(
            files.listing_of_window(conn, at, day2).unwrap().source,
            ListingSource::Cached
        );
        let read: i64 = conn
            .query_row(&format!("SELECT count(*) FROM {relation}"), [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(read, 40, "{relation}");
        let wide = (day1.0, day1.0 + MAX_LISTED_DAYS * 86_400_000_000 + 1);
        let report = files.listing_of_window(conn, at, wide).unwrap();
        assert_eq!(
            (report.source, report.files, report.complete),
            (ListingSource::Loaded, 3, true)
        );

        insert("dimo.status", "2025-06-03", 20);
        let s = newest(conn);
        let moved = refresh(conn, postgres, &RAW, &base, s).unwrap().unwrap();
        assert_eq!(
            rows(&moved),
            rows(&load(conn, postgres, &RAW, s, None).unwrap())
        );
        assert_eq!(moved.newest_day(None), NaiveDate::from_ymd_opt(2025, 6, 3));
        let tombstones = ["dimo.tombstone".to_owned()];
        assert_eq!(
            moved.newest_day(Some(&tombstones)),
            NaiveDate::from_ymd_opt(2025, 6, 2),
            "a type's own newest day"
        );

        // A bundle of a few rows is inlined: reads of its type take the scan, other types not.
        insert("dimo.tombstone", "2025-06-03", 2);
        let s = newest(conn);
        let moved = refresh(conn, postgres, &RAW, &moved, s).unwrap().unwrap();
        assert_eq!(
            rows(&moved),
            rows(&load(conn, postgres, &RAW, s, None).unwrap())
        );
        assert!(moved.select(Some(&status), day2.0, day2.1).is_some());
        assert!(moved
            .select(Some(&["dimo.tombstone".to_owned()]), day2.0, day2.1)
            .is_none());
        assert!(moved.select(None, day2.0, day2.1).is_none());

        // A refresh of a listing read by day moves the files of its days, whatever their type.
        insert("dimo.tombstone", "2025-06-02", 20);
        insert("dimo.attestation", "2025-06-02", 20);
        let s = newest(conn);
        let moved = refresh(conn, postgres, &RAW, &by_day, s).unwrap().unwrap();
        let loaded = load(conn, postgres, &RAW, s, None).unwrap();
        assert_eq!(rows(&moved), rows(&of_days(&loaded, &[june(2)])));
        assert_eq!(moved.file_count(), 4, "{:?}", rows(&moved));
    }

    /// `l`'s files of `days` only (and those read for every key): what a listing read by those
    /// days holds.
    fn of_days(l: &Listing, days: &[NaiveDate]) -> Listing {
        let mut only = l.clone();
        for files in only.by_key.values_mut() {
            Arc::make_mut(files).retain(|f| f.day.is_some_and(|d| days.contains(&d)));
        }
        only.by_key.retain(|_, files| !files.is_empty());
        only
    }

    fn paths_of(files: &[&DataFile]) -> Vec<String> {
        let mut paths: Vec<String> = files.iter().map(|f| f.path.clone()).collect();
        paths.sort();
        paths
    }

    crate::backend_tests!(
        refresh_lists_what_a_load_lists,
        raw_events_are_listed_by_type
    );
}
