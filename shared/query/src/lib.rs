//! Read SQL over the decoded lake: the dialect-neutral read operations every
//! GraphQL dialect calls — signal aggregations, latest values, available
//! signals, summaries, the snapshot and events.
//!
//! This crate owns the SQL and its semantics: UTC µs time, half-open windows, `from`-aligned
//! buckets, the read-side dedup keys and `subject_bucket` pruning (both defined once in
//! `dq_tables::keys` / `dq_cloudevent::subject_bucket` and reused here), the rollup-first
//! latest path with its base-scan fallback, and argument validation with its client texts.
//! It does NOT own GraphQL types, auth or HTTP (crate `graphql`).
//!
//! # Layout
//! - [`Engine`]: one per process, holding the DuckDB instance and a small connection pool.
//! - [`aggregate`]: the `signals` aggregation (one statement per request for every alias;
//!   answered in Rust over one read when no alias needs SQL).
//! - [`latest`]: latest values, available signals, summaries, snapshot rows.
//! - [`events`]: the `events` list and event summaries.
//! - [`activity`]: `segments` / `dailyActivity` — the DuckDB [`dq_segments::SignalSource`],
//!   ranges aggregation, ranges event counts, batched LocationsAt.
//! - `fold`: the aggregations computed in Rust over one plain read of the rows (`signals`
//!   aliases without filters, the segment and day summaries).
//! - [`filter`]: float / location / string / tags filters rendered to SQL.
//! - `files`: direct reads of `lake.signals`, `lake.events` and their rollups through
//!   per-snapshot file lists, deletes applied; every statement of a request reads one pinned
//!   snapshot ([`dq_lake::request_snapshot`]).
//! - [`interval`]: Go-duration parsing for `interval`.
#![warn(missing_docs)]

pub mod activity;
pub mod aggregate;
pub mod error;
pub mod events;
mod files;
pub mod filter;
mod fold;
pub mod interval;
pub mod latest;
#[cfg(feature = "testing")]
pub mod testing;

/// The pure detectors and request types of `segments` / `dailyActivity`, re-exported for the
/// GraphQL layer.
pub use ::dq_segments as segments;
pub use dq_lake::files::{ListingReport, ListingSource};
pub use error::{Error, Result};

use dq_cloudevent::{eip55, subject_bucket, EthrDid};
use dq_lake::duckdb::{self, Connection};
use dq_lake::{Lake, Newest, Pool, SharedLake, Snapshot};
use files::FileTable;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Idle connections kept for reuse (DUCKDB_MAX_CONNS default).
const MAX_IDLE_CONNECTIONS: usize = 6;

/// The read engine: one embedded DuckDB with the lake attached, opened once per process
/// (cold start) and shared by every request.
pub struct Engine {
    // Positive-only caches: a table that exists keeps existing.
    has_signals_rollup: AtomicBool,
    has_events_rollup: AtomicBool,
    // Pooled-connection reads run so far (one SQL statement each on the segments paths).
    reads: AtomicU64,
    pool: Pool,
    // The file listings of every table read directly; empty: every read takes the DuckLake
    // scan.
    files: Vec<dq_lake::files::TableFiles>,
    // Signal and event reads answered from the files directly.
    direct_reads: AtomicU64,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").finish_non_exhaustive()
    }
}

impl Engine {
    /// Wraps an opened lake.
    pub fn new(lake: Lake) -> Engine {
        Engine::on(Arc::new(SharedLake::new(lake)))
    }

    /// Reads through a lake shared with other readers (e.g. the cloud-event reader); an
    /// invalidated instance is reopened for all of them ([`SharedLake`]).
    pub fn on(lake: Arc<SharedLake>) -> Engine {
        let postgres = lake.is_postgres();
        Engine {
            has_signals_rollup: AtomicBool::new(false),
            has_events_rollup: AtomicBool::new(false),
            reads: AtomicU64::new(0),
            pool: Pool::new(lake, MAX_IDLE_CONNECTIONS),
            files: FileTable::listings(postgres),
            direct_reads: AtomicU64::new(0),
        }
    }

    /// Turns direct reads of dq's tables (the `files` module) off or on
    /// (default on). Off, every read is a DuckLake scan: the reference the direct reads are
    /// tested against.
    #[must_use]
    pub fn direct_file_reads(mut self, on: bool) -> Engine {
        self.files = if on {
            FileTable::listings(self.pool.is_postgres())
        } else {
            Vec::new()
        };
        self
    }

    fn db_error(&self, context: &str, e: duckdb::Error) -> Error {
        match dq_lake::db_error(self.pool.redactor(), context, e) {
            dq_lake::Error::Duckdb { context, message } => Error::Database { context, message },
            other => Error::Database {
                context: context.to_string(),
                message: other.to_string(),
            },
        }
    }

    /// Opens the lake from the environment (`DUCKLAKE_CATALOG_DSN`, …) and wraps it: the one
    /// DuckDB instance of the process.
    ///
    /// # Errors
    /// Bad settings or an unreachable catalog.
    pub fn open_from_env() -> Result<Engine> {
        let cfg = dq_lake::LakeConfig::from_env()?;
        Ok(Engine::new(Lake::open(cfg)?))
    }

    /// Runs `f` on a pooled connection (TimeZone UTC), mapping errors with `context`. Called
    /// inside [`dq_lake::interruptible`] (the GraphQL resolvers' engine calls), the statement is
    /// interrupted when the request is given up, and later calls of that request fail at once.
    pub(crate) fn with_conn<T>(
        &self,
        context: &str,
        f: impl FnOnce(&Connection) -> duckdb::Result<T>,
    ) -> Result<T> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.on_conn(context, f)
    }

    /// [`Engine::with_conn`] for work that runs no statement on the lake (a look at a cached
    /// file listing): not counted in [`Engine::reads`].
    fn on_conn<T>(
        &self,
        context: &str,
        f: impl FnOnce(&Connection) -> duckdb::Result<T>,
    ) -> Result<T> {
        self.pool.run(f)?.map_err(|e| self.db_error(context, e))
    }

    /// Runs `run(conn, snapshot)` on a pooled connection, where `snapshot` is the one every
    /// statement of the current request reads ([`dq_lake::request_snapshot`]): the statement
    /// names its tables with [`Snapshot::table`].
    pub(crate) fn with_snapshot<T>(
        &self,
        context: &str,
        run: impl FnOnce(&Connection, Snapshot) -> duckdb::Result<T>,
    ) -> Result<T> {
        self.with_snapshot_of(context, &self.pool.newest(), run)
    }

    /// [`Engine::with_snapshot`] with the newest snapshot asked by `newest`.
    fn with_snapshot_of<T>(
        &self,
        context: &str,
        newest: &Newest,
        run: impl FnOnce(&Connection, Snapshot) -> duckdb::Result<T>,
    ) -> Result<T> {
        self.with_conn(context, |c| run(c, dq_lake::request_snapshot(c, newest)?))
    }

    /// The rows of the statement `sql(relations)` over `subject`'s data in `table`, `params`
    /// bound, each mapped by `row`, on a pooled connection; how `relations` are chosen is
    /// [`Engine::read_of`]'s.
    #[allow(clippy::too_many_arguments)] // A statement: its table, windows, text, parameters, row.
    pub(crate) fn rows_of<const N: usize, T>(
        &self,
        context: &str,
        table: FileTable,
        subject: &str,
        windows: [(i64, i64); N],
        sql: impl Fn(&[String; N]) -> String,
        params: &[&dyn duckdb::ToSql],
        row: impl Fn(&duckdb::Row<'_>) -> duckdb::Result<T>,
    ) -> Result<Vec<T>> {
        self.read_of(context, table, subject, windows, sql, |stmt| {
            stmt.query_map(params, &row)?.collect()
        })
    }

    /// The answer `run` takes from the prepared statement `sql(relations)` over `subject`'s
    /// data in `table`, on a pooled connection. `relations[i]` is what a read of the subject's
    /// bucket over `windows[i]` (`[from_us, to_us)`) scans at the request's snapshot: the
    /// bucket's files directly when that snapshot's listing allows it for every window (module
    /// `files`), else the table itself. A failed direct read (a listing or a file the catalog
    /// no longer has) is retried as the DuckLake scan, so the direct path can make a read
    /// faster but never fail it.
    pub(crate) fn read_of<const N: usize, T>(
        &self,
        context: &str,
        table: FileTable,
        subject: &str,
        windows: [(i64, i64); N],
        sql: impl Fn(&[String; N]) -> String,
        run: impl Fn(&mut duckdb::Statement<'_>) -> duckdb::Result<T>,
    ) -> Result<T> {
        let run_on = |c: &Connection, relations: &[String; N]| -> duckdb::Result<T> {
            let started = std::time::Instant::now();
            let answer = run(&mut c.prepare(&sql(relations))?);
            // `RUST_LOG=dq_query=debug` shows where a request's time goes, statement by statement.
            tracing::debug!(
                statement = context,
                ms = started.elapsed().as_secs_f64() * 1e3,
                "read"
            );
            answer
        };
        #[cfg(feature = "testing")]
        if let Some(relation) = testing::relation(table) {
            return self.with_conn(context, |c| run_on(c, &[(); N].map(|()| relation.clone())));
        }
        let files = self.files_of(table);
        let bucket = [subject_bucket(subject).to_string()];
        self.with_snapshot(context, |c, snapshot| {
            let run = |relations: &[String; N]| run_on(c, relations);
            let scan = || [(); N].map(|()| snapshot.table(table.name()));
            let direct = files.and_then(|files| {
                files
                    .relations(c, snapshot, Some(&bucket), windows)
                    .map_err(|e| self.db_error("list table files", e))
                    .inspect_err(|e| tracing::warn!(error = %e, "file listing failed"))
                    .ok()
                    .flatten()
            });
            match direct.map(|relations| run(&relations)) {
                Some(Ok(answer)) => {
                    self.direct_reads.fetch_add(1, Ordering::Relaxed);
                    Ok(answer)
                }
                // The request was given up: the failure is its interrupt, not the files'.
                Some(Err(e)) if dq_lake::given_up() => Err(e),
                Some(Err(e)) => {
                    // Logged through the redactor: a catalog error can carry its DSN.
                    let e = self.db_error("read table files", e);
                    tracing::warn!(error = %e, "direct read failed; scanning the lake");
                    run(&scan())
                }
                None => run(&scan()),
            }
        })
    }

    /// The listing of `table`'s files (`None`: direct reads are off).
    fn files_of(&self, table: FileTable) -> Option<&dq_lake::files::TableFiles> {
        self.files.iter().find(|f| *f.spec() == table.spec())
    }

    /// Whether a read of `subject`'s bucket of `table` over `window` (`[from_us, to_us)`) at
    /// the request's snapshot may find a row: false only when that snapshot's listing shows no
    /// file there and nothing inlined. A listing that cannot say, or fails, says true (the read
    /// itself decides). Runs no statement on the lake unless the listing must be brought to the
    /// snapshot.
    pub(crate) fn may_hold(&self, table: FileTable, subject: &str, window: (i64, i64)) -> bool {
        #[cfg(feature = "testing")]
        if let Some(may) = testing::may_hold(table, window) {
            return may;
        }
        let Some(files) = self.files_of(table) else {
            return true;
        };
        let bucket = [subject_bucket(subject).to_string()];
        let newest = self.pool.newest();
        self.on_conn("list table files", |c| {
            let snapshot = dq_lake::request_snapshot(c, &newest)?;
            files.has_files(c, snapshot, Some(&bucket), window)
        })
        .inspect_err(|e| tracing::warn!(error = %e, "file listing failed"))
        .ok()
        .flatten()
        .unwrap_or(true)
    }

    /// Brings the file listings of dq's tables to the newest snapshot holding the files of the
    /// partition keys `keys` (subject buckets; `None`: every key, `Some(&[])`: the tables' heads
    /// and the files read for every key), as the next read would (cached, refreshed from the
    /// previous listing, loaded, or extended by keys), and says how each was obtained. Empty
    /// with direct reads off.
    ///
    /// # Errors
    /// The catalog could not be read.
    pub fn list_files(&self, keys: Option<&[String]>) -> Result<Vec<ListingReport>> {
        self.listings(&self.pool.newest(), |_| keys)
    }

    /// [`Engine::list_files`] as the query functions' init runs it: each listing holds what
    /// `dq_lake::files::preload_keys` says for its table and the catalog (on PostgreSQL the
    /// rollups whole, the time-partitioned tables' heads only), the newest snapshot asked as
    /// `dq_lake::files::preload_newest` says. It also asks whether the rollups
    /// exist, which a first `signalsLatest` or event summary would otherwise ask in a catalog
    /// statement of its own.
    ///
    /// # Errors
    /// The catalog could not be read.
    pub fn preload_files(&self) -> Result<Vec<ListingReport>> {
        let postgres = self.pool.is_postgres();
        let reports = self.listings(&dq_lake::files::preload_newest(postgres), |files| {
            dq_lake::files::preload_keys(postgres, files.spec())
        })?;
        self.table_exists(&self.has_signals_rollup, "signals_latest")?;
        self.table_exists(&self.has_events_rollup, "events_latest")?;
        Ok(reports)
    }

    fn listings<'k>(
        &self,
        newest: &Newest,
        keys: impl Fn(&dq_lake::files::TableFiles) -> Option<&'k [String]>,
    ) -> Result<Vec<ListingReport>> {
        self.with_snapshot_of("list table files", newest, |c, snapshot| {
            self.files
                .iter()
                .map(|files| files.listing(c, snapshot, keys(files)))
                .collect()
        })
    }

    /// How many reads of dq's tables were answered from the tables' files directly (module
    /// `files`).
    pub fn direct_reads(&self) -> u64 {
        self.direct_reads.load(Ordering::Relaxed)
    }

    /// How many reads (pooled-connection calls) this engine has run. Every read of the
    /// [`activity`] paths is exactly one SQL statement, so differences of this counter count
    /// statements statements per request).
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// The readiness probe: `SELECT 1 FROM lake.signals LIMIT 0`.
    ///
    /// # Errors
    /// The catalog or table is unreachable.
    pub fn probe(&self) -> Result<()> {
        self.with_conn("readiness probe", |c| {
            c.execute_batch("SELECT 1 FROM lake.signals LIMIT 0")
        })
    }

    fn table_exists(&self, cache: &AtomicBool, table: &str) -> Result<bool> {
        if cache.load(Ordering::Relaxed) {
            return Ok(true);
        }
        let exists = self.with_conn("probe rollup table", |c| dq_lake::table_exists(c, table))?;
        if exists {
            cache.store(true, Ordering::Relaxed);
        }
        Ok(exists)
    }
}

/// `subject_bucket = N AND subject = ?` — the per-subject predicate every read starts with,
/// the bucket literal first so DuckLake prunes partitions. The subject is
/// bound as the statement's parameter.
pub(crate) fn subject_predicate(subject: &str) -> String {
    format!(
        "subject_bucket = {} AND subject = ?",
        subject_bucket(subject)
    )
}

/// `(name = 'a' OR name = 'b' …)`: a read's signal or event names, as literals. DuckDB plans
/// an `IN` list of two or more strings as a hash join against the list, which cost more than the
/// comparisons on the rows one vehicle reads (5 names over 71,085 in-memory rows: 2.0 ms with
/// `IN`, 1.3 ms with `OR`; a month of `segments`' rows from 30 files: 18.4 against 15.0 ms).
/// `names` must not be empty.
pub(crate) fn names_predicate<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let terms: Vec<String> = names
        .into_iter()
        .map(|n| format!("name = {}", dq_lake::quote(n)))
        .collect();
    format!("({})", terms.join(" OR "))
}

/// A µs timestamp literal (inlined, never bound).
pub(crate) fn ts_lit(us: i64) -> String {
    format!("make_timestamp({us}::BIGINT)::TIMESTAMPTZ")
}

/// `source` as the signals/latest paths validate it: an ethr DID reduced to its EIP-55
/// address.
///
/// # Errors
/// `source '<s>' is not a valid ethr DID`.
pub fn source_address(source: &str) -> Result<String> {
    source
        .parse::<EthrDid>()
        .map(|d| eip55(&d.address))
        .map_err(|_| Error::invalid(format!("source '{source}' is not a valid ethr DID")))
}

/// `source` as availableSignals / dataSummary / signalsSnapshot use it (not validated): an ethr
/// DID becomes its address, anything else is compared verbatim.
pub fn lenient_source(source: &str) -> String {
    source_address(source).unwrap_or_else(|_| source.to_string())
}

/// Go's zero `time.Time` (0001-01-01T00:00:00Z) in µs: what an unset time argument is.
pub const GO_ZERO_TIME_US: i64 = -62_135_596_800_000_000;

/// Subjects must be non-empty on every read.
pub(crate) fn check_subject(subject: &str) -> Result<()> {
    if subject.is_empty() {
        Err(Error::invalid("subject is required"))
    } else {
        Ok(())
    }
}

/// A read of `subject` over `[from_us, to_us)`: a subject, both times set, in order.
pub(crate) fn check_window(subject: &str, from_us: i64, to_us: i64) -> Result<()> {
    check_subject(subject)?;
    if from_us == GO_ZERO_TIME_US || to_us == GO_ZERO_TIME_US {
        return Err(Error::invalid("from and to are required"));
    }
    if from_us > to_us {
        return Err(Error::invalid("from must be before to"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_quoted_literals_joined_by_or() {
        assert_eq!(names_predicate(["speed"]), "(name = 'speed')");
        assert_eq!(
            names_predicate(["speed", "o'clock"]),
            "(name = 'speed' OR name = 'o''clock')"
        );
    }

    #[test]
    fn source_reduction() {
        let did = "did:ethr:137:0xcd445F4c6bDAD32b68a2939b912150Fe3C88803E";
        assert_eq!(
            source_address(did).unwrap(),
            "0xcd445F4c6bDAD32b68a2939b912150Fe3C88803E"
        );
        assert_eq!(
            source_address("0xabc"),
            Err(Error::invalid("source '0xabc' is not a valid ethr DID"))
        );
        assert_eq!(lenient_source("0xabc"), "0xabc");
        assert!(subject_predicate("").starts_with("subject_bucket = 197 "));
    }

    /// A request given up while its statement runs (here: the deadline of a `timeout`, as the
    /// GraphQL resolvers apply it) has that statement interrupted at once, and the pooled
    /// connection serves the next statement.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_given_up_read_is_interrupted_and_its_connection_reused() {
        use std::sync::mpsc;
        use std::time::{Duration, Instant};
        // Runs for hours unless interrupted.
        const HEAVY: &str = "SELECT count(*) FROM range(1000000000000) t(i) WHERE hash(i) % 7 = 0";
        let t = dq_lake::testing::TestLake::new(dq_lake::testing::Backend::File);
        let engine = Arc::new(Engine::new(t.open().unwrap()));
        let (handle_tx, handle_rx) = mpsc::channel();
        let (done_tx, done_rx) = mpsc::channel();
        let e = Arc::clone(&engine);
        let read = dq_lake::interruptible(move || {
            let out = e.with_conn("heavy read", |c| {
                handle_tx.send(c.interrupt_handle()).ok();
                c.query_row(HEAVY, [], |r| r.get::<_, i64>(0))
            });
            done_tx.send((out, Instant::now())).ok();
        });
        let timed_out = tokio::time::timeout(Duration::from_millis(300), read).await;
        let deadline = Instant::now();
        assert!(
            timed_out.is_err(),
            "the heavy statement outlasts the deadline"
        );
        let handle = handle_rx.recv().unwrap();
        let Ok((out, ended)) = done_rx.recv_timeout(Duration::from_secs(3)) else {
            // Not interrupted: stop it by hand so the runtime can shut down, then fail.
            handle.interrupt();
            panic!("the statement kept running after the deadline");
        };
        let late = ended.saturating_duration_since(deadline);
        assert!(
            late < Duration::from_millis(100),
            "interrupted {late:?} after the deadline"
        );
        let err = out.unwrap_err().to_string();
        assert!(err.contains("INTERRUPT"), "{err}");
        let (answer, same_connection) = engine
            .with_conn("next read", |c| {
                let answer: i64 = c.query_row("SELECT 42", [], |r| r.get(0))?;
                Ok((answer, Arc::ptr_eq(&c.interrupt_handle(), &handle)))
            })
            .unwrap();
        assert_eq!(answer, 42);
        assert!(
            same_connection,
            "the interrupted connection went back to the pool"
        );
    }
}
