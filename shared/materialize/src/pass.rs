//! [`Materializer`]: the pass, drains, backfill, retention prune, audit.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use dq_blob::BlobStore;
use dq_cloudevent::types;
use dq_lake::duckdb::Connection;
use dq_lake::{progress, Lake};
use dq_lease::{Clock, Lease, LeaseGuard, SystemClock};
use tracing::{debug, error, info, instrument, warn};

use crate::config::Config;
use crate::feed::{self, Keyset, Resume, Source};
use crate::own_writer::DataFiles;
use crate::read::{now, ReadAhead, ReadOut, Window, WindowReader};
use crate::shard::Shard;
use crate::summary::{
    micros_since, AuditReport, BackfillSummary, Counts, LeaseInfo, Outcome, Phases, PruneSummary,
    RunSummary, SpanSummary,
};
use crate::write::{self, ProgressCas, WindowPlan};
use crate::{metrics, rollup, Error, Result};
use dq_tables::schema::{self, CURSOR_PARTITION};

/// Retries of a backfill window or prune transaction that lost a race with a concurrent writer.
const CONFLICT_ATTEMPTS: u64 = 5;
/// Rows per feed read inside a window (Go `windowReadChunk`).
pub const CHUNK_ROWS: usize = 512;
/// Hot-path consumer-progress throttle (Go `progressReportInterval`).
pub const PROGRESS_INTERVAL: chrono::TimeDelta = chrono::TimeDelta::seconds(5);
/// Idle keepalive of the consumer-progress row (Go `progressKeepaliveInterval`).
pub const PROGRESS_KEEPALIVE: chrono::TimeDelta = chrono::TimeDelta::minutes(5);

/// A stored cursor as the seeding and merging rules count it: an unreadable one as 0, which
/// can only make a row start earlier (re-decoding is idempotent).
fn cursor_or_start(stored: Option<&str>) -> i64 {
    stored.and_then(|c| c.trim().parse().ok()).unwrap_or(0)
}

/// Seeds `shard`'s cursor row unless it exists, where [`Shard::seed_cursor`] says every one of
/// its buckets is decoded, from the cursor rows of every layout. Re-decoding above it is
/// idempotent. True when it inserted the row.
fn seed_shard_cursor(lake: &Lake, shard: Shard) -> dq_lake::Result<bool> {
    let partition = shard.cursor_partition();
    let stored: Vec<(String, Option<String>)> = {
        let conn = lake.conn();
        let mut stmt = conn
            .prepare(
                "SELECT partition, cursor FROM lake.ingest_progress \
                 WHERE partition = ? OR starts_with(partition, ?)",
            )
            .map_err(|e| lake.error("read the cursor rows", e))?;
        stmt.query_map([CURSOR_PARTITION, &Shard::cursor_partition_prefix()], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .and_then(|rows| rows.collect::<Result<_, _>>())
        .map_err(|e| lake.error("read the cursor rows", e))?
    };
    if stored.iter().any(|(p, _)| *p == partition) {
        return Ok(false);
    }
    // An unknown layout's row counts as absent: that too can only make the new row start
    // earlier.
    let rows: Vec<(Shard, i64)> = stored
        .iter()
        .filter_map(|(p, cursor)| {
            Some((
                Shard::of_cursor_partition(p)?,
                cursor_or_start(cursor.as_deref()),
            ))
        })
        .collect();
    let seed = shard.seed_cursor(&rows);
    lake.conn()
        .execute(
            "INSERT INTO lake.ingest_progress (partition, cursor) SELECT ?, ? \
             WHERE NOT EXISTS (SELECT 1 FROM lake.ingest_progress WHERE partition = ?)",
            [partition.as_str(), &seed.to_string(), partition.as_str()],
        )
        .map(|n| n > 0)
        .map_err(|e| lake.error("seed the shard's cursor", e))
}

/// A held lease for one invocation: renewed between windows, checked right before each commit.
pub struct LeaseSession {
    lease: Lease,
    guard: Mutex<LeaseGuard>,
}

impl std::fmt::Debug for LeaseSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseSession")
            .field("lease", &self.lease.to_string())
            .finish_non_exhaustive()
    }
}

impl LeaseSession {
    /// Acquires `lease` for its TTL; [`dq_lease::LeaseError::Held`] means a peer is running.
    pub async fn acquire(lease: Lease) -> dq_lease::Result<LeaseSession> {
        LeaseSession::acquire_waiting(lease, Duration::ZERO).await
    }

    /// [`LeaseSession::acquire`], waiting up to `wait` for a held lease while asking its holder
    /// to yield ([`Lease::acquire_waiting`]); [`dq_lease::LeaseError::WaitExpired`] when it did not.
    pub async fn acquire_waiting(lease: Lease, wait: Duration) -> dq_lease::Result<LeaseSession> {
        let guard = lease.acquire_waiting(lease.ttl(), wait).await?;
        Ok(LeaseSession {
            lease,
            guard: Mutex::new(guard),
        })
    }

    /// The invocation waiting for this lease, as of the last renewal (see
    /// [`dq_lease::LeaseGuard::yield_requested_by`]).
    pub fn yield_requested_by(&self) -> Option<String> {
        self.guard().yield_requested_by().map(str::to_owned)
    }

    fn guard(&self) -> LeaseGuard {
        self.guard.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Extends the lease (between windows).
    pub async fn renew(&self) -> Result<()> {
        let renewed = self.lease.renew(&self.guard(), self.lease.ttl()).await?;
        *self.guard.lock().unwrap_or_else(|p| p.into_inner()) = renewed;
        Ok(())
    }

    /// Fails unless the lease is still ours with time to commit (fencing).
    pub async fn check(&self) -> Result<()> {
        Ok(self.lease.check(&self.guard()).await?)
    }

    /// The lease's fencing token, as stored in the progress row's fence column.
    pub fn fence(&self) -> Result<i64> {
        let fence = self.guard().fence();
        i64::try_from(fence).map_err(|_| {
            Error::Config(format!(
                "lease `{}` has fence {fence}, above the progress row's BIGINT range",
                self.lease
            ))
        })
    }

    /// Releases the lease.
    pub async fn release(&self) -> Result<()> {
        Ok(self.lease.release(&self.guard()).await?)
    }

    /// What the summaries report.
    pub fn info(&self) -> LeaseInfo {
        let g = self.guard();
        LeaseInfo {
            backend: self.lease.to_string(),
            holder: g.holder().to_owned(),
            fence: g.fence(),
        }
    }
}

/// Who writes a span or a backfill: the lease session (renewed between windows, checked before
/// each commit), if any, and the fencing token every window compare-and-swaps into the progress
/// row ([`ProgressCas`]). Without a lease the token is 0.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Writer<'a> {
    lease: Option<&'a LeaseSession>,
    fence: i64,
}

impl<'a> Writer<'a> {
    fn of(lease: Option<&'a LeaseSession>) -> Result<Writer<'a>> {
        Ok(Writer {
            lease,
            fence: lease.map(LeaseSession::fence).transpose()?.unwrap_or(0),
        })
    }

    /// A writer with `fence` and no lease at all: tests play a second stack or a takeover
    /// with it, which only the progress-row fence can stop.
    #[cfg(feature = "testing")]
    pub(crate) fn bypassing_lease(fence: i64) -> Writer<'static> {
        Writer { lease: None, fence }
    }

    async fn renew(&self) -> Result<()> {
        match self.lease {
            Some(l) => l.renew().await,
            None => Ok(()),
        }
    }

    /// Who asked for the lease, as of the last renewal.
    fn yield_requested_by(&self) -> Option<String> {
        self.lease.and_then(LeaseSession::yield_requested_by)
    }

    /// The pre-commit fencing check. A lease that is still ours but within the safety margin
    /// (a window slower than TTL minus the margin) is renewed and checked again: failing it
    /// would fail the same slow window on every invocation.
    async fn check(&self) -> Result<()> {
        match self.lease {
            Some(l) => match l.check().await {
                Err(Error::Lease(dq_lease::LeaseError::Expiring { .. })) => {
                    l.renew().await?;
                    l.check().await
                }
                other => other,
            },
            None => Ok(()),
        }
    }

    /// The CAS on cursor row `partition` of a window that read the row with `expected_fence`,
    /// leaving the span at `resume` (see [`ProgressCas::resume`]).
    fn cas(
        &self,
        partition: &str,
        cursor: Option<(i64, i64)>,
        expected_fence: Option<i64>,
        resume: Option<Resume>,
    ) -> ProgressCas {
        ProgressCas {
            partition: partition.to_owned(),
            cursor,
            expected_fence,
            fence: self.fence,
            resume,
        }
    }
}

/// The cursor row of `lake.ingest_progress`.
#[derive(Debug, Default, PartialEq, Eq)]
struct ProgressRow {
    cursor: i64,
    /// The fencing token of its last writer.
    fence: Option<i64>,
    /// Where the span in progress stands, if one was cut short.
    resume: Option<Resume>,
}

#[derive(Debug, Default)]
struct ProgressState {
    reported: Option<i64>,
    last_attempt: Option<DateTime<Utc>>,
    last_success: Option<DateTime<Utc>>,
}

/// Builds a [`Materializer`]. Every knob has the default of [`Config::default`].
/// It holds the materializer it configures; [`MaterializerBuilder::build`] readies the lake.
pub struct MaterializerBuilder(Materializer);

impl MaterializerBuilder {
    /// Sets the blob store payloads are fetched from (none: a blob reference aborts the pass).
    pub fn blobs(mut self, blobs: Option<Arc<BlobStore>>) -> Self {
        self.0.blobs = blobs;
        self
    }

    /// Sets every [`Config`] knob.
    pub fn config(mut self, config: Config) -> Self {
        self.0.config = config;
        self
    }

    /// Snapshots per span (default 16; values below 1 become 1).
    pub fn max_snapshot_span(mut self, span: i64) -> Self {
        self.0.config.max_snapshot_span = span.max(1);
        self
    }

    /// Raw rows per window (default 200 000) and payload bytes per window (default 128 MiB).
    pub fn window(mut self, rows: usize, bytes: usize) -> Self {
        self.0.config.window_rows = rows.max(1);
        self.0.config.window_bytes = bytes.max(1);
        self
    }

    /// Rows per feed read inside a window (default [`CHUNK_ROWS`]).
    pub fn chunk_rows(mut self, rows: usize) -> Self {
        self.0.chunk_rows = rows.max(1);
        self
    }

    /// The vehicle gate (default: disabled).
    pub fn gate(mut self, gate: dq_decode::VehicleGate) -> Self {
        self.0.config.gate = gate;
        self
    }

    /// Print EMF metric lines (default from [`Config`]: true).
    pub fn emf(mut self, on: bool) -> Self {
        self.0.config.emf = on;
        self
    }

    /// The clock (default [`SystemClock`]; tests pass a [`dq_lease::ManualClock`]).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.0.clock = clock;
        self
    }

    /// Where EMF lines go (default stdout; tests capture them).
    pub fn metrics_sink(mut self, sink: dq_metrics::Sink) -> Self {
        self.0.metrics = self.0.metrics.with_sink(sink);
        self
    }

    /// The subject buckets this materializer decodes (default [`Shard::ALL`]).
    pub fn shard(mut self, shard: Shard) -> Self {
        self.0.config.shard = shard;
        self
    }

    /// Creates dq's tables where missing, seeds a shard's cursor row, and returns the
    /// materializer.
    pub fn build(self) -> Result<Materializer> {
        let report = schema::ensure(&self.0.lake)?;
        if !report.created.is_empty() {
            info!(created = ?report.created, "decoded tables created");
        }
        let m = self.0;
        m.ensure_shard_cursor()?;
        Ok(m)
    }
}

/// The decode side of dq over one lake. Cheap to keep across warm Lambda invocations.
pub struct Materializer {
    lake: Lake,
    blobs: Option<Arc<BlobStore>>,
    /// The own writer's file store, set up at the first window that writes signal rows; `None`
    /// inside: the writer is off (config, an encrypted lake) and windows INSERT.
    data_files: tokio::sync::OnceCell<Option<DataFiles>>,
    config: Config,
    clock: Arc<dyn Clock>,
    chunk_rows: usize,
    progress: Mutex<ProgressState>,
    metrics: dq_metrics::Emitter,
    /// The next window, being read while this one is written ([`ReadAhead`]): of the same span,
    /// or in a drain the first of the next span.
    read_ahead: Mutex<Option<ReadAhead>>,
}

impl std::fmt::Debug for Materializer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Materializer")
            .field("lake", &self.lake)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// How a window transaction ended.
enum Commit {
    Done(write::Applied),
    /// The progress-row CAS matched nothing: a peer moved the cursor or fenced the row.
    Moved,
    /// DuckLake refused the commit because a concurrent transaction changed a table this one
    /// wrote (another shard's window, din's maintenance, a peer): nothing landed, and the same
    /// window may run again on the new snapshot, where its CAS tells a peer from a bystander.
    Conflict,
}

/// Attempts at a drain window that keeps losing commit races (other shards' windows, din's
/// maintenance) before the span is abandoned, to resume at the next run.
const WINDOW_CONFLICT_ATTEMPTS: u64 = 12;

/// How far past `MATERIALIZER_MAX_SNAPSHOT_SPAN` a span of small snapshots may stretch (a
/// multiple of it): the change feed of a span is read once per window, so a span of thousands of
/// inlined inserts is still bounded.
const SPAN_STRETCH: i64 = 16;

/// `floor` (the snapshot bound of a span), stretched toward `cap` while the raw rows the span's
/// snapshots added (`added`: ascending `(snapshot, rows)` in `(cur, cap]`) stay within `budget`.
/// A snapshot that alone exceeds it ends the span when no rows come before it (a span of only
/// empty snapshots would commit a window of nothing), and starts the next one otherwise.
fn stretched_end(floor: i64, cap: i64, added: &[(i64, u64)], budget: u64) -> i64 {
    let mut total = 0u64;
    for &(snapshot, rows) in added {
        let next = total.saturating_add(rows);
        if next > budget {
            let end = if total == 0 { snapshot } else { snapshot - 1 };
            return end.max(floor);
        }
        total = next;
    }
    cap.max(floor)
}

/// Drops `value` on a thread of its own: a window's millions of decoded rows took 0.2–0.25 s to
/// free, which the next window's write would wait for. When no thread can be started, the
/// value is dropped in turn (with the closure that holds it).
fn free_aside<T: Send + 'static>(value: T) {
    let _ = std::thread::Builder::new()
        .name("dq-free".into())
        .spawn(move || drop(value));
}

/// The pause before re-running a window that lost a commit race: growing with the attempt,
/// with jitter so racing shards do not collide again in lockstep.
fn conflict_backoff(attempt: u64) -> Duration {
    let jitter = u64::from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
            % 40,
    );
    Duration::from_millis(20 * attempt.min(10) + jitter)
}

/// The snapshots and bounds of one span.
struct SpanPlan {
    /// The cursor: exclusive lower snapshot.
    cur: i64,
    /// Inclusive upper snapshot.
    to: i64,
    /// Catalog head when the span started.
    head: i64,
    /// The committed position a resumed span continues after.
    after: Option<Keyset>,
    /// Stop between windows once this has passed.
    deadline: Option<Instant>,
    /// Read the next span's first window ahead ([`Materializer::run_span_as`]).
    next_span: bool,
}

impl Materializer {
    /// A builder over `lake` with default settings.
    pub fn builder(lake: Lake) -> MaterializerBuilder {
        MaterializerBuilder(Materializer {
            lake,
            blobs: None,
            data_files: tokio::sync::OnceCell::new(),
            config: Config::default(),
            clock: Arc::new(SystemClock),
            chunk_rows: CHUNK_ROWS,
            progress: Mutex::new(ProgressState::default()),
            metrics: metrics::emitter(),
            read_ahead: Mutex::new(None),
        })
    }

    /// Recovers from a failed invocation: when `error` says DuckDB invalidated the instance
    /// ([`dq_lake::is_invalidated`]; a catalog restart mid-commit), every later statement would
    /// fail too, so the lake is replaced by a freshly opened one from the same config. Commits
    /// are in the lake, so nothing else carries over; the old instance is abandoned, never
    /// destroyed ([`Lake::abandon`]: the interrupted commit's transaction is still open in it).
    /// The same holds when the catalog refused credentials read from a secret (a rotation):
    /// the reopening re-reads the secret ([`Lake::needs_reopen`], [`Lake::reopen`]).
    /// Other errors leave the lake as it is. A reopening that fails (the catalog is still down)
    /// keeps the old lake, and the next failed invocation tries again.
    pub fn recover_from(&mut self, error: &Error) {
        // A window read ahead on the old instance is not worth waiting for.
        self.read_ahead
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if !self.lake.needs_reopen(&error.to_string()) {
            return;
        }
        match self.lake.reopen() {
            Ok(fresh) => {
                std::mem::replace(&mut self.lake, fresh).abandon();
                tracing::warn!("lake reopened after an invalidation or a credential rotation");
            }
            Err(e) => {
                tracing::warn!(error = %e, "reopening the lake failed; the next invocation retries")
            }
        }
    }

    /// The lake.
    pub fn lake(&self) -> &Lake {
        &self.lake
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The cursor. A missing row is re-seeded where every bucket of the shard is decoded
    /// ([`Shard::seed_cursor`]; 0 with no other row: re-decoding is idempotent); without that
    /// self-heal every CAS would match nothing and dq would look caught up forever.
    pub fn cursor(&self) -> Result<i64> {
        self.progress_row().map(|row| row.cursor)
    }

    /// The subject buckets this materializer decodes.
    pub fn shard(&self) -> Shard {
        self.config.shard
    }

    /// Decodes `shard`'s buckets from now on (a Lambda environment serving the invocations of
    /// several shards), seeding its cursor row if it has none.
    pub fn set_shard(&mut self, shard: Shard) -> Result<()> {
        if shard == self.config.shard {
            return Ok(());
        }
        self.config.shard = shard;
        // The consumer-progress throttle belongs to the previous shard's consumer name.
        *self.progress.lock().unwrap_or_else(|p| p.into_inner()) = ProgressState::default();
        self.ensure_shard_cursor()
    }

    fn ensure_shard_cursor(&self) -> Result<()> {
        let shard = self.config.shard;
        let seeded = dq_lake::retry::on_conflict("seed the shard's cursor", || {
            seed_shard_cursor(&self.lake, shard)
        })?;
        if seeded {
            info!(%shard, buckets = ?shard.buckets(), "shard cursor row seeded");
        }
        Ok(())
    }

    /// The cursor row, self-healed as in [`Self::cursor`].
    fn progress_row(&self) -> Result<ProgressRow> {
        let partition = self.config.shard.cursor_partition();
        type Stored = (Option<String>, Option<i64>, Option<String>);
        let got: Vec<Stored> = {
            let conn = self.lake.conn();
            let mut stmt = conn
                .prepare(&format!(
                    "SELECT cursor, {}, {} FROM lake.ingest_progress WHERE partition = ?",
                    schema::FENCE_COLUMN,
                    schema::RESUME_COLUMN
                ))
                .map_err(|e| self.lake.error("read cursor", e))?;
            stmt.query_map([&partition], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .and_then(|rows| rows.collect::<Result<_, _>>())
                .map_err(|e| self.lake.error("read cursor", e))?
        };
        if got.len() > 1 {
            // Two writers of one shard seeded its row at once (DuckLake lets concurrent inserts
            // both commit). Every CAS would then update both rows and count as lost, forever:
            // keep one row at the lowest cursor (everything at or below it is decoded).
            let lowest = got
                .iter()
                .map(|(c, _, _)| cursor_or_start(c.as_deref()))
                .min()
                .unwrap_or(0);
            warn!(
                partition,
                rows = got.len(),
                cursor = lowest,
                "duplicate cursor rows; keeping one"
            );
            dq_lake::retry::on_conflict("merge duplicate cursor rows", || {
                self.lake.exec(
                    "merge duplicate cursor rows",
                    &format!(
                        "BEGIN; DELETE FROM lake.ingest_progress WHERE partition = {p}; \
                         INSERT INTO lake.ingest_progress (partition, cursor) VALUES ({p}, '{lowest}'); \
                         COMMIT",
                        p = dq_lake::quote(&partition)
                    ),
                )
                .inspect_err(|_| {
                    let _ = self.lake.exec("roll back", "ROLLBACK");
                })
            })?;
            return self.progress_row();
        }
        let Some((cursor, fence, resume)) = got.into_iter().next() else {
            error!(partition, "cursor row missing, re-seeding");
            let shard = self.config.shard;
            dq_lake::retry::on_conflict("re-seed the cursor", || {
                seed_shard_cursor(&self.lake, shard)
            })?;
            return self.progress_row();
        };
        let cursor = match cursor {
            None => 0,
            Some(v) => v.trim().parse().map_err(|_| Error::BadCursor {
                partition,
                value: v.clone(),
            })?,
        };
        let resume = resume.and_then(|text| {
            let r = Resume::decode(&text);
            if r.is_none() {
                warn!(%text, "unreadable span position in the progress row; the span starts over");
            }
            r
        });
        Ok(ProgressRow {
            cursor,
            fence,
            resume,
        })
    }

    /// `(head, oldest retained, commit time of the oldest snapshot above cur)` in one scan.
    fn position(&self, cur: i64) -> Result<(i64, i64, Option<DateTime<Utc>>)> {
        self.lake
            .conn()
            .query_row(
                "SELECT coalesce(max(snapshot_id), 0), coalesce(min(snapshot_id), 0), \
                 min(snapshot_time) FILTER (WHERE snapshot_id > ?) FROM lake.snapshots()",
                [cur],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .map_err(|e| self.lake.error("read head snapshot", e).into())
    }

    /// The last snapshot of a span after `cur`: `MATERIALIZER_MAX_SNAPSHOT_SPAN` snapshots, or
    /// more while the raw rows they added still fit one window. Every window of a span costs
    /// about the same catalog work (a file per bucket and day it touches, their registration
    /// and commit), so small snapshots (din's quiet-lake bundles, a backlog of them) are
    /// decoded in full windows rather than one small window per span; a busy lake's snapshots
    /// fill a window long before the snapshot bound.
    fn span_end(&self, cur: i64, head: i64) -> Result<i64> {
        let span = self.config.max_snapshot_span;
        let floor = head.min(cur.saturating_add(span));
        if floor >= head {
            return Ok(floor);
        }
        let cap = head.min(cur.saturating_add(span.saturating_mul(SPAN_STRETCH)));
        let added = dq_lake::raw::inserted_rows(&self.lake, cur, cap)?;
        Ok(stretched_end(
            floor,
            cap,
            &added,
            self.config.window_rows as u64,
        ))
    }

    /// The reader of windows, owning what it needs.
    fn reader(&self) -> WindowReader {
        WindowReader {
            redactor: self.lake.redactor().clone(),
            blobs: self.blobs.clone(),
            config: self.config.clone(),
            chunk_rows: self.chunk_rows,
            clock: self.clock.clone(),
        }
    }

    /// Starts reading the window of `source` after `after` ahead, on a connection of its own.
    fn start_read_ahead(&self, source: Source, after: Option<Keyset>) -> Result<()> {
        let prepare = self.data_files.get().map(Option::is_some);
        let ahead = ReadAhead::start(self.reader(), self.lake.connect()?, source, after, prepare);
        *self.read_ahead.lock().unwrap_or_else(|p| p.into_inner()) = ahead;
        Ok(())
    }

    /// The first window of the span after `cur`, read ahead by the span before, with the span's
    /// end: `None` when none was read, it is not this span's start, it read nothing, or it failed
    /// (the span is then planned and read in turn, which meets the same failure where it is
    /// handled). Only the wait for this span's start counts as `read_wait`, as in
    /// [`Self::next_window`].
    async fn read_ahead_of(
        &self,
        cur: i64,
        head: i64,
        phases: &mut Phases,
    ) -> Option<(i64, ReadOut)> {
        let ahead = self.take_read_ahead()?;
        let end = match ahead.source() {
            Source::Changes { from, to } if from == cur && to <= head && ahead.starts_span() => {
                Some(to)
            }
            _ => None,
        };
        let t0 = Instant::now();
        let out = ahead.finish().await;
        let end = end?;
        phases.read_wait_us += micros_since(t0);
        match out {
            Some(Ok(out)) if out.window.scanned > 0 => Some((end, out)),
            _ => None,
        }
    }

    /// The window being read ahead, if any, taken out of its slot.
    fn take_read_ahead(&self) -> Option<ReadAhead> {
        self.read_ahead
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    /// Waits for a window read ahead that nothing will use (the drain stopped), so its thread
    /// is not left reading after the call returns.
    async fn settle_read_ahead(&self) {
        let ahead = self.take_read_ahead();
        if let Some(ahead) = ahead {
            drop(ahead.finish().await);
        }
    }

    /// The window of `source` after `after`: the one read ahead when it is that window, else
    /// read now on `conn`.
    async fn next_window(
        &self,
        conn: &Connection,
        source: Source,
        after: &mut Option<Keyset>,
        counts: &mut Counts,
        oldest_event: &mut Option<DateTime<Utc>>,
    ) -> Result<Window> {
        let ahead = self.take_read_ahead();
        if let Some(ahead) = ahead {
            let wanted = ahead.reads(source, after.as_ref());
            let t0 = Instant::now();
            let out = ahead.finish().await;
            if wanted {
                counts.phases.read_wait_us += micros_since(t0);
                if let Some(out) = out {
                    return Ok(out?.into_window(after, counts, oldest_event));
                }
            }
        }
        self.reader()
            .read(conn, source, after, counts, oldest_event)
            .await
    }

    /// Reports `id` to din's consumer floor: hot path throttled to one per 5 s and only on
    /// change; `now` (caught up, reset) reports a change at once and re-stamps an unchanged id
    /// every 5 min. Best effort: a failure is logged and retried later.
    fn report_progress(&self, id: i64, now_mode: bool) {
        let now = now(self.clock.as_ref());
        let mut st = self.progress.lock().unwrap_or_else(|p| p.into_inner());
        let changed = st.reported != Some(id);
        let due = if now_mode {
            changed
                || st
                    .last_success
                    .is_none_or(|t| now - t >= PROGRESS_KEEPALIVE)
        } else {
            changed && st.last_attempt.is_none_or(|t| now - t >= PROGRESS_INTERVAL)
        };
        if !due {
            return;
        }
        st.last_attempt = Some(now);
        match progress::record(&self.lake, &self.config.shard.consumer(), id) {
            Ok(()) => {
                st.reported = Some(id);
                st.last_success = Some(now);
            }
            Err(e) => warn!(snapshot_id = id, error = %e, "consumer progress report failed"),
        }
    }

    /// Runs one span under `lease`, if given, to its end.
    pub async fn run_span(&self, lease: Option<&LeaseSession>) -> Result<SpanSummary> {
        self.run_span_until(lease, None).await
    }

    /// Runs one span under `lease`, if given, stopping between two windows once `deadline` has
    /// passed ([`Outcome::Paused`]; the next span resumes there). At least one window runs, so
    /// every invocation makes progress.
    pub async fn run_span_until(
        &self,
        lease: Option<&LeaseSession>,
        deadline: Option<Instant>,
    ) -> Result<SpanSummary> {
        let span = self.run_span_as(Writer::of(lease)?, deadline, false).await;
        self.settle_read_ahead().await;
        span
    }

    /// Runs one span as `writer` (see [`Self::run_span_until`]). With `next_span` (a drain,
    /// which runs the next span right after) the last window of the span reads the next span's
    /// first window ahead.
    #[instrument(skip_all, fields(fence = writer.fence))]
    pub(crate) async fn run_span_as(
        &self,
        writer: Writer<'_>,
        deadline: Option<Instant>,
        next_span: bool,
    ) -> Result<SpanSummary> {
        let lease = writer.lease;
        let mut s = SpanSummary {
            lease: lease.map(LeaseSession::info),
            ..SpanSummary::default()
        };
        if !dq_lake::raw::exists(&self.lake)? {
            s.outcome = Outcome::NoRawTable;
            info!("lake.raw_events does not exist yet; caught up");
            return Ok(s);
        }
        let ProgressRow {
            cursor: cur,
            fence,
            resume,
        } = self.progress_row()?;
        let (head, oldest, oldest_pending) = self.position(cur)?;
        s.from = cur;
        s.to = cur;
        s.head = head;
        if head <= cur {
            self.report_progress(cur, true);
            return Ok(s);
        }
        let now = now(self.clock.as_ref());
        s.commit_lag_seconds = oldest_pending.map_or(0.0, |t| secs(now - t));
        if oldest > cur + 1 {
            return self.recover_expired(cur, oldest, s);
        }
        // A span cut short continues after its committed windows, over the same snapshots.
        let resume = resume.filter(|r| r.to > cur && r.to <= head);
        // The span before read this span's first window ahead: the span is the one it read,
        // unless it read nothing (only dq's own snapshots: the span then runs to the head, so
        // that it finds the feed caught up).
        let first = match resume {
            None => self.read_ahead_of(cur, head, &mut s.counts.phases).await,
            Some(_) => None,
        };
        let to = match (resume.as_ref(), first.as_ref()) {
            (Some(r), _) => r.to,
            (None, Some((to, _))) => *to,
            (None, None) => self.span_end(cur, head)?,
        };
        s.to = to;
        s.resumed = resume.is_some();
        let started = Instant::now();
        let span = SpanPlan {
            cur,
            to,
            head,
            after: resume.map(|r| r.after),
            deadline,
            next_span,
        };
        let first = first.map(|(_, out)| out);
        match self.decode_span(&span, writer, fence, &mut s, first).await {
            Ok(()) => {}
            Err(
                e @ (Error::TransientBlob(_)
                | Error::DataFile(_)
                | Error::Lease(_)
                | Error::NoBlobStore { .. }),
            ) => return Err(e),
            Err(e) => {
                // Classified by retention, never by the error text.
                match self.position(cur) {
                    Ok((_, oldest, _)) if oldest > cur + 1 => {
                        return self.recover_expired(cur, oldest, s)
                    }
                    _ => return Err(e),
                }
            }
        }
        match s.outcome {
            Outcome::Committed => {
                s.commit_lag_seconds = 0.0;
                info!(
                    from = s.from,
                    to = s.to,
                    raw_rows = s.counts.raw_rows,
                    signal_rows = s.counts.signal_rows,
                    event_rows = s.counts.event_rows,
                    poison = s.counts.poison_total(),
                    took_ms = started.elapsed().as_millis() as u64,
                    "span committed"
                );
                self.report_progress(to, false);
            }
            Outcome::CaughtUp => {
                s.commit_lag_seconds = 0.0;
                s.to = cur;
                self.report_progress(cur, true);
            }
            Outcome::Moved => {
                info!(
                    from = cur,
                    to, "a peer moved the cursor or fenced the progress row; span abandoned"
                );
                s.to = cur;
            }
            Outcome::Yielded | Outcome::Paused => s.to = cur,
            Outcome::CursorReset | Outcome::NoRawTable => {}
        }
        self.emit(&metrics::span_metrics(&s));
        Ok(s)
    }

    /// din expired `(cur, oldest)`: skip exactly that prefix (never to head), count and log it.
    fn recover_expired(&self, cur: i64, oldest: i64, mut s: SpanSummary) -> Result<SpanSummary> {
        let new = oldest - 1;
        dq_lake::retry::on_conflict("reset cursor", || {
            self.lake
                .conn()
                .execute(
                    &format!(
                        "UPDATE lake.ingest_progress SET cursor = ?, {} = NULL \
                         WHERE partition = ? AND cursor = ?",
                        schema::RESUME_COLUMN
                    ),
                    [
                        new.to_string(),
                        self.config.shard.cursor_partition(),
                        cur.to_string(),
                    ],
                )
                .map_err(|e| self.lake.error("reset cursor", e))
        })?;
        s.outcome = Outcome::CursorReset;
        s.to = new;
        s.skipped_snapshots = new - cur;
        error!(
            from = cur,
            to = new,
            skipped_snapshots = s.skipped_snapshots,
            "change feed expired before it was decoded; skipped the unretained snapshots \
             (raise LAKE_SNAPSHOT_RETENTION; recover the rows with the backfill action)"
        );
        self.report_progress(new, true);
        self.emit(&metrics::span_metrics(&s));
        Ok(s)
    }

    /// Decodes `(cur, to]` window by window, after `span.after` when resuming. Every window
    /// that writes compare-and-swaps the progress row from `fence` (as read with the cursor),
    /// then from its own token, and records its keyset position; the final window moves the
    /// cursor and clears the position.
    async fn decode_span(
        &self,
        span: &SpanPlan,
        writer: Writer<'_>,
        mut fence: Option<i64>,
        s: &mut SpanSummary,
        mut first: Option<ReadOut>,
    ) -> Result<()> {
        let SpanPlan { cur, to, head, .. } = *span;
        let source = Source::Changes { from: cur, to };
        let mut conn = self.lake.connect()?;
        // Known before the first read-ahead starts, which prepares its rows for this writer.
        self.data_files(&conn).await?;
        let mut after: Option<Keyset> = span.after.clone();
        let mut oldest_event: Option<DateTime<Utc>> = None;
        // Raw rows of every shard: a span with only other shards' rows still moves this cursor.
        let mut scanned = 0u64;
        loop {
            writer.renew().await?;
            // A waiting maintenance invocation asked for the lease: stop between two window
            // transactions. The windows committed so far stay, and so does their position in
            // the progress row: the next drain resumes after them.
            if let Some(requester) = writer.yield_requested_by() {
                info!(%requester, from = cur, to, "yielding the lease to a waiting invocation");
                s.outcome = Outcome::Yielded;
                return Ok(());
            }
            let mut window = match first.take() {
                Some(out) => out.into_window(&mut after, &mut s.counts, &mut oldest_event),
                None => {
                    self.next_window(&conn, source, &mut after, &mut s.counts, &mut oldest_event)
                        .await?
                }
            };
            scanned += window.scanned;
            // Reading (blob fetches) and decoding are the long phases: renew before writing.
            writer.renew().await?;
            if window.exhausted && scanned == 0 && to >= head && !s.resumed {
                // Only dq's own or maintenance snapshots remain: caught up, cursor untouched
                // (advancing it would mint a snapshot and never catch up).
                s.outcome = Outcome::CaughtUp;
                return Ok(());
            }
            let late = span.deadline.is_some_and(|d| Instant::now() >= d);
            let pause = !window.exhausted && late;
            // A window with nothing to write cannot duplicate anything: no fence needed, unless
            // it is the last of this invocation and must record how far the span got.
            if window.exhausted || pause || !window.plan.writes_nothing() {
                let (end, resume) = match (&after, window.exhausted) {
                    (Some(k), false) => (
                        cur,
                        Some(Resume {
                            to,
                            after: k.clone(),
                        }),
                    ),
                    _ => (to, None),
                };
                window.plan.progress = Some(writer.cas(
                    &self.config.shard.cursor_partition(),
                    Some((cur, end)),
                    fence,
                    resume,
                ));
            }
            // The next window is read while this one is written.
            if !late {
                if !window.exhausted {
                    self.start_read_ahead(source, after.clone())?;
                } else if span.next_span && to < head {
                    let next = Source::Changes {
                        from: to,
                        to: self.span_end(to, head)?,
                    };
                    self.start_read_ahead(next, None)?;
                }
            }
            let mut attempt = 0;
            let committed = loop {
                match self
                    .commit_window(&mut conn, &mut window.plan, writer, &mut s.counts.phases)
                    .await?
                {
                    Commit::Conflict if attempt < WINDOW_CONFLICT_ATTEMPTS => {
                        attempt += 1;
                        s.counts.conflicts += 1;
                        debug!(attempt, "window lost a commit race; running it again");
                        tokio::time::sleep(conflict_backoff(attempt)).await;
                        writer.renew().await?;
                    }
                    other => break other,
                }
            };
            match committed {
                Commit::Moved | Commit::Conflict => {
                    s.outcome = Outcome::Moved;
                    return Ok(());
                }
                Commit::Done(applied) => {
                    if window.plan.progress.is_some() {
                        fence = Some(writer.fence);
                    }
                    s.counts.windows += 1;
                    s.counts.restaged += u64::from(applied.restaged);
                    s.counts.prepared_ahead += u64::from(applied.prepared_ahead);
                    s.counts.signal_rows += applied.signal_rows;
                    s.counts.event_rows += applied.event_rows;
                    s.counts.deleted_rows += applied.deleted_rows;
                }
            }
            free_aside(std::mem::take(&mut window.plan));
            if window.exhausted {
                s.outcome = Outcome::Committed;
                s.lag_seconds = oldest_event.map(|t| secs(now(self.clock.as_ref()) - t));
                return Ok(());
            }
            if pause {
                info!(
                    from = cur,
                    to,
                    windows = s.counts.windows,
                    "deadline reached mid-span; the next run resumes after the committed windows"
                );
                s.outcome = Outcome::Paused;
                return Ok(());
            }
        }
    }

    /// Stages and writes one window in one transaction: the progress-row CAS (the fence that
    /// makes DuckLake abort one of two concurrent writers at commit), the rows, and the lease
    /// check as the last step before COMMIT. With the own writer the signal rows are written as
    /// Parquet files first and registered in the transaction; files no commit registered are
    /// removed again (or, when a failed COMMIT may have landed, left to din's orphan sweep).
    async fn commit_window(
        &self,
        conn: &mut Connection,
        plan: &mut WindowPlan,
        writer: Writer<'_>,
        phases: &mut Phases,
    ) -> Result<Commit> {
        let data_files = self.data_files(conn).await?;
        // Prepared where it was read (a read-ahead) for the writer it meets, or now. A retry
        // after a lost race prepares again: its first attempt's files were removed.
        let prepared_ahead = plan
            .prepared
            .as_ref()
            .is_some_and(|p| p.files == data_files.is_some());
        let mut prepared = match plan.prepared.take() {
            Some(p) if prepared_ahead => p,
            _ => {
                let t0 = Instant::now();
                let p = write::prepare(&plan.signals, data_files.is_some())?;
                phases.prepare_us += micros_since(t0);
                p
            }
        };
        let encoded = std::mem::take(&mut prepared.encoded);
        let t0 = Instant::now();
        let staged = write::stage(&self.lake, conn, plan, prepared)?;
        phases.stage_us += micros_since(t0);
        debug!(took_ms = t0.elapsed().as_millis() as u64, "window staged");
        let files = match data_files {
            Some(files) if !encoded.is_empty() => {
                let t0 = Instant::now();
                let rows = encoded.iter().map(|f| f.rows).sum();
                let paths = files.put(encoded).await?;
                phases.write_us += micros_since(t0);
                debug!(
                    files = paths.len(),
                    took_ms = t0.elapsed().as_millis() as u64,
                    "signal files written"
                );
                Some((files, write::Added { paths, rows }))
            }
            _ => None,
        };
        let mut may_have_landed = false;
        let added = files.as_ref().map(|(_, added)| added);
        let (mut staged, mut restaged) = (staged, false);
        let result = loop {
            let attempt = self
                .apply_and_commit(
                    conn,
                    plan,
                    &staged,
                    added,
                    writer,
                    phases,
                    &mut may_have_landed,
                )
                .await;
            match attempt {
                Ok(Some(Commit::Done(applied))) => {
                    break Ok(Commit::Done(write::Applied {
                        restaged,
                        prepared_ahead,
                        ..applied
                    }))
                }
                Ok(Some(other)) => break Ok(other),
                // A replay: every row staged, the anti-joined INSERT decides.
                Ok(None) if !restaged => {
                    debug!("window staged again with every row");
                    restaged = true;
                    let t0 = Instant::now();
                    let all = write::prepare(&plan.signals, false)
                        .and_then(|p| write::stage(&self.lake, conn, plan, p));
                    match all {
                        Ok(all) => staged = all,
                        Err(e) => break Err(e),
                    }
                    phases.stage_us += micros_since(t0);
                }
                Ok(None) => {
                    break Err(Error::Config(
                        "a window with every row staged asked to be staged again".into(),
                    ))
                }
                Err(e) => break Err(e),
            }
        };
        if let Some((store, added)) = &files {
            let registered = match &result {
                Ok(Commit::Done(applied)) => applied.registered,
                Ok(Commit::Moved | Commit::Conflict) => false,
                Err(_) => may_have_landed,
            };
            if !registered {
                store.remove(&added.paths).await;
            }
        }
        result
    }

    /// The own writer's file store: set up once, `None` when windows INSERT (the writer is
    /// switched off, the lake is encrypted: added files carry no key, or there is no
    /// `lake.signals`).
    async fn data_files(&self, conn: &Connection) -> Result<Option<&DataFiles>> {
        let lake = self.lake.config();
        let files = self
            .data_files
            .get_or_try_init(|| async {
                if !self.config.own_writer || lake.encrypted {
                    return Ok(None);
                }
                let path = dq_lake::files::table_path(conn, lake.catalog.is_postgres(), "signals")
                    .map_err(|e| self.lake.error("find lake.signals' directory", e))?;
                match path {
                    Some(path) => DataFiles::open(&path, &lake.s3).await.map(Some),
                    None => Ok(None),
                }
            })
            .await?;
        Ok(files.as_ref())
    }

    /// The window's transaction: its statements, the lease check and COMMIT.
    /// `may_have_landed` is set when COMMIT failed in a way that may have committed. None:
    /// nothing written, the window must be staged with every row ([`write::Applied::restage`]).
    #[allow(clippy::too_many_arguments)]
    async fn apply_and_commit(
        &self,
        conn: &mut Connection,
        plan: &WindowPlan,
        staged: &write::Staged,
        added: Option<&write::Added>,
        writer: Writer<'_>,
        phases: &mut Phases,
        may_have_landed: &mut bool,
    ) -> Result<Option<Commit>> {
        let t0 = Instant::now();
        let tx = conn
            .transaction()
            .map_err(|e| self.lake.error("begin window", e))?;
        let applied = write::apply(&self.lake, &tx, plan, staged, added);
        phases.write_us += micros_since(t0);
        let applied = match applied {
            Ok(a) => a,
            Err(Error::Lake(e)) if e.is_commit_conflict() => return Ok(Some(Commit::Conflict)),
            Err(e) => return Err(e),
        };
        phases.rollup_us += applied.rollup_us;
        if !applied.progress_matched {
            return Ok(Some(Commit::Moved)); // tx dropped: rolled back
        }
        if applied.restage {
            return Ok(None); // tx dropped: rolled back
        }
        debug!(took_ms = t0.elapsed().as_millis() as u64, "window applied");
        let t0 = Instant::now();
        writer.check().await?;
        let committed = tx.commit();
        phases.commit_us += micros_since(t0);
        match committed {
            Ok(()) => {
                debug!(
                    took_ms = t0.elapsed().as_millis() as u64,
                    "window committed"
                );
                Ok(Some(Commit::Done(applied)))
            }
            Err(e) => {
                let err = self.lake.error("commit window", e);
                if let Some(
                    cas @ ProgressCas {
                        cursor: Some((_, to)),
                        ..
                    },
                ) = plan.progress.as_ref().filter(|c| c.moves_cursor())
                {
                    // Possibly a lost ack: the row says whether the transaction landed.
                    let landed = ProgressRow {
                        cursor: *to,
                        fence: Some(cas.fence),
                        resume: None,
                    };
                    if self.progress_row().ok() == Some(landed) {
                        warn!(to, error = %err, "commit reported an error but the cursor moved; treating as committed");
                        return Ok(Some(Commit::Done(applied)));
                    }
                }
                if err.is_commit_conflict() {
                    return Ok(Some(Commit::Conflict));
                }
                *may_have_landed = true;
                Err(err.into())
            }
        }
    }

    /// Runs spans until caught up, a peer wins, a waiting invocation asks for the lease, or
    /// `deadline` passes.
    pub async fn drain(
        &self,
        deadline: Option<Instant>,
        lease: Option<&LeaseSession>,
    ) -> Result<RunSummary> {
        let mut run = RunSummary::default();
        loop {
            let span = match self.run_span_as(Writer::of(lease)?, deadline, true).await {
                Ok(span) => span,
                Err(e) => {
                    self.settle_read_ahead().await;
                    return Err(e);
                }
            };
            run.push(&span);
            match span.outcome {
                Outcome::Committed | Outcome::CursorReset => {}
                Outcome::CaughtUp
                | Outcome::NoRawTable
                | Outcome::Moved
                | Outcome::Yielded
                | Outcome::Paused => break,
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
        }
        self.settle_read_ahead().await;
        self.emit(&metrics::run_metrics(&run));
        Ok(run)
    }

    /// Re-decodes raw rows with `from <= time < to` from the base table (works after snapshot
    /// expiry), in bounded windows, without touching the cursor. Idempotent. The whole range in
    /// one run: [`Self::backfill_chunked`] with no chunks and no deadline.
    pub async fn backfill(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        lease: Option<&LeaseSession>,
    ) -> Result<BackfillSummary> {
        self.backfill_chunked(from, to, None, None, lease).await
    }

    /// [`Self::backfill`] in time chunks of `chunk` (boundaries at multiples of `chunk` since
    /// the epoch: UTC midnights for 24h; `None`: one chunk), oldest first, each in committed
    /// windows. Between chunks it stops once `deadline` has passed, after at least one chunk so
    /// every run makes progress: the summary then says `complete: false` and `next_from`, the
    /// `from` of the run that continues. Re-running a chunk is harmless (the write-key
    /// anti-join), so a run cut short mid-chunk is resumed from the same `from`.
    #[instrument(skip(self, lease))]
    pub async fn backfill_chunked(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        chunk: Option<Duration>,
        deadline: Option<Instant>,
        lease: Option<&LeaseSession>,
    ) -> Result<BackfillSummary> {
        if from >= to {
            return Err(Error::InvalidRequest {
                action: "backfill",
                reason: "`from` must be before `to`".into(),
            });
        }
        if chunk.is_some_and(|c| c < Duration::from_micros(1)) {
            return Err(Error::InvalidRequest {
                action: "backfill",
                reason: "`chunk` must be at least a microsecond".into(),
            });
        }
        let mut out = BackfillSummary {
            from,
            to,
            ..BackfillSummary::default()
        };
        if !dq_lake::raw::exists(&self.lake)? {
            out.complete = true;
            return Ok(out);
        }
        let writer = Writer::of(lease)?;
        let mut conn = self.lake.connect()?;
        let mut fence = self.progress_row()?.fence;
        let mut start = from;
        while start < to {
            if out.chunks > 0 && deadline.is_some_and(|d| Instant::now() >= d) {
                out.next_from = Some(start);
                info!(
                    next_from = %start,
                    chunks = out.chunks,
                    signal_rows = out.counts.signal_rows,
                    "backfill stopped at the deadline; continue from next_from"
                );
                return Ok(out);
            }
            let end = chunk.map_or(to, |c| chunk_end(start, c).min(to));
            let source = Source::Range {
                from: start,
                to: end,
            };
            self.backfill_range(&mut conn, source, writer, &mut fence, &mut out.counts)
                .await?;
            out.chunks += 1;
            start = end;
        }
        out.complete = true;
        info!(
            raw_rows = out.counts.raw_rows,
            signal_rows = out.counts.signal_rows,
            event_rows = out.counts.event_rows,
            chunks = out.chunks,
            "backfill done"
        );
        Ok(out)
    }

    /// Re-decodes the raw rows of `source` window by window; every window that writes
    /// compare-and-swaps the progress row's fence.
    async fn backfill_range(
        &self,
        conn: &mut Connection,
        source: Source,
        writer: Writer<'_>,
        fence: &mut Option<i64>,
        counts: &mut Counts,
    ) -> Result<()> {
        let mut after = None;
        let mut oldest = None;
        loop {
            writer.renew().await?;
            let mut window = self
                .reader()
                .read(conn, source, &mut after, counts, &mut oldest)
                .await?;
            // A conflict here means a concurrent writer touched the same rows or the progress
            // row: re-read its fence and retry the window.
            let mut attempts = 0;
            loop {
                if !window.plan.writes_nothing() {
                    window.plan.progress =
                        Some(writer.cas(&self.config.shard.cursor_partition(), None, *fence, None));
                }
                match self
                    .commit_window(conn, &mut window.plan, writer, &mut counts.phases)
                    .await?
                {
                    Commit::Done(a) => {
                        if window.plan.progress.is_some() {
                            *fence = Some(writer.fence);
                        }
                        counts.windows += 1;
                        counts.restaged += u64::from(a.restaged);
                        counts.prepared_ahead += u64::from(a.prepared_ahead);
                        counts.signal_rows += a.signal_rows;
                        counts.event_rows += a.event_rows;
                        counts.deleted_rows += a.deleted_rows;
                        break;
                    }
                    Commit::Moved | Commit::Conflict if attempts < CONFLICT_ATTEMPTS => {
                        attempts += 1;
                        tokio::time::sleep(Duration::from_millis(200 * attempts)).await;
                        *fence = self.progress_row()?.fence;
                    }
                    Commit::Moved | Commit::Conflict => {
                        return Err(Error::Lake(dq_lake::Error::Config(
                            "backfill window kept conflicting with a concurrent writer".into(),
                        )))
                    }
                }
            }
            if window.exhausted {
                return Ok(());
            }
        }
    }

    /// Deletes decoded rows older than `retention`, oldest first, one UTC day (the tables' day
    /// partition) per transaction. Each transaction compare-and-swaps the progress row's fence
    /// like every write, deletes the day's rows, recomputes the touched subjects' rollup rows
    /// (so rollups stay equal to the recompute, which Go's prune does not keep) and checks the
    /// lease right before its commit. Between days it renews the lease and stops once `deadline`
    /// has passed, after at least one day so every run makes progress: the summary then says
    /// `complete: false`, and the next run continues from the oldest rows left.
    #[instrument(skip(self, lease))]
    pub async fn prune(
        &self,
        retention: Duration,
        deadline: Option<Instant>,
        lease: Option<&LeaseSession>,
    ) -> Result<PruneSummary> {
        let cutoff = now(self.clock.as_ref())
            - chrono::TimeDelta::from_std(retention).map_err(|_| Error::InvalidRequest {
                action: "prune",
                reason: "retention out of range".into(),
            })?;
        let writer = Writer::of(lease)?;
        let mut conn = self.lake.connect()?;
        let mut fence = self.progress_row()?.fence;
        let mut out = PruneSummary {
            cutoff,
            ..PruneSummary::default()
        };
        let mut subjects = BTreeSet::new();
        loop {
            let Some(oldest) = self.oldest_decoded(&conn, cutoff)? else {
                out.complete = true;
                out.pruned_before = cutoff;
                break;
            };
            if out.chunks > 0 && deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            writer.renew().await?;
            let end = chunk_end(oldest, Duration::from_secs(86_400)).min(cutoff);
            let chunk = self.prune_chunk(&mut conn, end, writer, &mut fence).await?;
            out.chunks += 1;
            out.signal_rows_deleted += chunk.signal_rows;
            out.event_rows_deleted += chunk.event_rows;
            out.pruned_before = end;
            subjects.extend(chunk.subjects);
        }
        out.subjects = subjects.len() as u64;
        info!(
            signal_rows_deleted = out.signal_rows_deleted,
            event_rows_deleted = out.event_rows_deleted,
            chunks = out.chunks,
            complete = out.complete,
            "prune done"
        );
        Ok(out)
    }

    /// The oldest decoded timestamp before `cutoff`, over both tables.
    fn oldest_decoded(
        &self,
        conn: &Connection,
        cutoff: DateTime<Utc>,
    ) -> Result<Option<DateTime<Utc>>> {
        let cut = feed::ts_literal(cutoff);
        let own = self.config.shard.bucket_predicate(None);
        conn.query_row(
            &format!(
                "SELECT min(t) FROM (\
                 SELECT min(\"timestamp\") AS t FROM lake.signals WHERE \"timestamp\" < '{cut}'::TIMESTAMPTZ AND {own} \
                 UNION ALL \
                 SELECT min(\"timestamp\") FROM lake.events WHERE \"timestamp\" < '{cut}'::TIMESTAMPTZ AND {own})"
            ),
            [],
            |r| r.get(0),
        )
        .map_err(|e| self.lake.error("find the oldest decoded row", e).into())
    }

    /// One prune transaction: every decoded row before `end`, retried on a lost race.
    async fn prune_chunk(
        &self,
        conn: &mut Connection,
        end: DateTime<Utc>,
        writer: Writer<'_>,
        fence: &mut Option<i64>,
    ) -> Result<PrunedChunk> {
        let mut attempts = 0;
        loop {
            match self.try_prune_chunk(conn, end, writer, *fence).await {
                Ok(Some(chunk)) => {
                    *fence = Some(writer.fence);
                    return Ok(chunk);
                }
                Ok(None) => {}
                Err(Error::Lake(e)) if e.is_commit_conflict() => {
                    warn!(error = %e, "prune chunk lost a commit race; retrying")
                }
                Err(e) => return Err(e),
            }
            if attempts == CONFLICT_ATTEMPTS {
                return Err(Error::Lake(dq_lake::Error::Config(
                    "prune chunk kept conflicting with a concurrent writer".into(),
                )));
            }
            attempts += 1;
            tokio::time::sleep(Duration::from_millis(200 * attempts)).await;
            *fence = self.progress_row()?.fence;
        }
    }

    /// The prune transaction; `None` when the progress row's fence moved since it was read.
    async fn try_prune_chunk(
        &self,
        conn: &mut Connection,
        end: DateTime<Utc>,
        writer: Writer<'_>,
        fence: Option<i64>,
    ) -> Result<Option<PrunedChunk>> {
        let cut = feed::ts_literal(end);
        let tx = conn
            .transaction()
            .map_err(|e| self.lake.error("begin prune", e))?;
        let cas = writer.cas(&self.config.shard.cursor_partition(), None, fence, None);
        if !write::swap_progress(&self.lake, &tx, &cas)? {
            return Ok(None); // tx dropped: rolled back
        }
        // A shard prunes its own buckets only: other shards' rows are theirs to rewrite.
        let own = self.config.shard.bucket_predicate(None);
        let subjects: BTreeSet<String> = {
            let mut stmt = tx
                .prepare(&format!(
                    "SELECT DISTINCT subject FROM (SELECT subject FROM lake.signals WHERE \"timestamp\" < '{cut}'::TIMESTAMPTZ AND {own} \
                     UNION ALL SELECT subject FROM lake.events WHERE \"timestamp\" < '{cut}'::TIMESTAMPTZ AND {own})"
                ))
                .map_err(|e| self.lake.error("list pruned subjects", e))?;
            stmt.query_map([], |r| r.get(0))
                .and_then(|rows| rows.collect::<Result<_, _>>())
                .map_err(|e| self.lake.error("list pruned subjects", e))?
        };
        let del = |table: &str| {
            tx.execute(
                &format!(
                    "DELETE FROM lake.{table} WHERE \"timestamp\" < '{cut}'::TIMESTAMPTZ AND {own}"
                ),
                [],
            )
            .map(|n| n as u64)
            .map_err(|e| self.lake.error("prune decoded rows", e))
        };
        let signal_rows = del("signals")?;
        let event_rows = del("events")?;
        rollup::refresh_subjects(&self.lake, &tx, &subjects)?;
        writer.check().await?;
        tx.commit()
            .map_err(|e| self.lake.error("commit prune", e))?;
        Ok(Some(PrunedChunk {
            signal_rows,
            event_rows,
            subjects,
        }))
    }

    /// Recomputes both rollups of this materializer's shard's buckets from the base.
    pub fn rebuild_rollups(&self) -> Result<rollup::RebuildSummary> {
        rollup::rebuild(&self.lake, self.config.shard)
    }

    /// Checks the invariants: no duplicate decoded rows under the write/read keys, decoded ⊆ raw,
    /// no rows of voided events, cursor ≤ head, rollups == recompute.
    #[instrument(skip(self))]
    pub fn audit(&self) -> Result<AuditReport> {
        let conn = self.lake.connect()?;
        let q = |sql: &str| -> Result<i64> {
            conn.query_row(sql, [], |r| r.get::<_, Option<i64>>(0))
                .map(Option::unwrap_or_default)
                .map_err(|e| self.lake.error("audit", e).into())
        };
        let mut r = AuditReport {
            cursor: self.cursor()?,
            head: progress::head(&self.lake)?,
            duplicate_signal_rows: q(
                "SELECT sum(c - 1) FROM (SELECT count(*) AS c FROM lake.signals \
                GROUP BY subject, name, \"timestamp\", cloud_event_id HAVING count(*) > 1)",
            )?,
            duplicate_event_rows: q(
                "SELECT sum(c - 1) FROM (SELECT count(*) AS c FROM lake.events \
                GROUP BY subject, \"timestamp\", name, source, cloud_event_id HAVING count(*) > 1)",
            )?,
            ..AuditReport::default()
        };
        if dq_lake::raw::exists(&self.lake)? {
            let orphans = |table: &str, ty: &str| {
                q(&format!(
                    "SELECT count(*) FROM lake.{table} d WHERE NOT EXISTS (SELECT 1 FROM lake.raw_events r \
                     WHERE r.type = '{ty}' AND r.subject = d.subject AND r.id = d.cloud_event_id)"
                ))
            };
            r.orphan_signal_rows = orphans("signals", types::STATUS)?;
            r.orphan_event_rows = orphans("events", types::EVENTS)?;
            for table in ["signals", "events"] {
                r.voided_rows += q(&format!(
                    "SELECT count(*) FROM lake.{table} d WHERE EXISTS (SELECT 1 FROM lake.raw_events r \
                     WHERE r.type = '{}' AND r.subject = d.subject AND r.voids_id = d.cloud_event_id)",
                    types::TOMBSTONE
                ))?;
            }
            r.stray_voids_rows = q(&format!(
                "SELECT count(*) FROM lake.raw_events WHERE voids_id <> '' AND type <> '{}'",
                types::TOMBSTONE
            ))?;
        } else {
            r.orphan_signal_rows = q("SELECT count(*) FROM lake.signals")?;
            r.orphan_event_rows = q("SELECT count(*) FROM lake.events")?;
        }
        let (sd, ed) = rollup::diff(&self.lake, &conn)?;
        r.signals_latest_diff = sd;
        r.events_latest_diff = ed;
        r.clean = r.duplicate_signal_rows == 0
            && r.duplicate_event_rows == 0
            && r.orphan_signal_rows == 0
            && r.orphan_event_rows == 0
            && r.voided_rows == 0
            && r.stray_voids_rows == 0
            && r.cursor <= r.head
            && sd == 0
            && ed == 0;
        if !r.clean {
            warn!(report = ?r, "audit found problems");
        }
        Ok(r)
    }

    /// Writes EMF lines when enabled.
    pub fn emit(&self, m: &[metrics::Metric]) {
        if self.config.emf {
            self.metrics.emit_at(&[], m, self.clock.now_millis());
        }
    }

    /// The EMF writer when EMF is enabled (the Lambda adapter's lease metrics use it too).
    pub fn metrics(&self) -> Option<&dq_metrics::Emitter> {
        self.config.emf.then_some(&self.metrics)
    }
}

/// What one prune transaction deleted.
struct PrunedChunk {
    signal_rows: u64,
    event_rows: u64,
    subjects: BTreeSet<String>,
}

/// The first chunk boundary after `t`: the next multiple of `chunk` since the epoch (UTC
/// midnight for a day). Saturates at the largest representable time.
fn chunk_end(t: DateTime<Utc>, chunk: Duration) -> DateTime<Utc> {
    let step = i64::try_from(chunk.as_micros()).unwrap_or(i64::MAX).max(1);
    let next = t
        .timestamp_micros()
        .div_euclid(step)
        .saturating_add(1)
        .saturating_mul(step);
    dq_cloudevent::time::from_micros_saturating(next)
}

fn secs(d: chrono::TimeDelta) -> f64 {
    d.num_milliseconds() as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn now_reads_the_lease_clock() {
        let clock = dq_lease::ManualClock::at_secs(1_750_000_000);
        clock.advance(Duration::from_millis(250));
        assert_eq!(
            now(&clock),
            Utc.timestamp_opt(1_750_000_000, 250_000_000).unwrap()
        );
        assert!(now(&SystemClock) > Utc.with_ymd_and_hms(2020, 1, 1, 0, 0, 0).unwrap());
    }

    #[test]
    fn a_span_stretches_only_while_its_snapshots_fit_one_window() {
        // Snapshots 11..=14 are the snapshot bound (floor 14).
        type Added<'a> = &'a [(i64, u64)];
        let small: Added = &[(11, 10), (13, 10), (16, 10), (20, 10), (25, 70)];
        let busy: Added = &[(11, 80), (12, 80), (16, 10)];
        let cases: [(&str, i64, Added, u64, i64); 6] = [
            ("the one that overflows stays out", 30, small, 100, 24),
            ("all fit: up to the cap", 30, small, 110, 30),
            ("inlined inserts only", 30, &[], 100, 30),
            ("never below the snapshot bound", 30, busy, 100, 14),
            ("the cap is the head", 14, small, 1_000, 14),
            (
                "a snapshot larger than a window after only empty ones ends the span",
                30,
                &[(20, 500), (21, 10)],
                100,
                20,
            ),
        ];
        for (why, cap, added, budget, end) in cases {
            assert_eq!(stretched_end(14, cap, added, budget), end, "{why}");
        }
    }

    #[test]
    fn chunks_end_at_the_next_multiple_of_their_length() {
        let t = |d, h, m| Utc.with_ymd_and_hms(2025, 6, d, h, m, 0).unwrap();
        let day = Duration::from_secs(86_400);
        assert_eq!(chunk_end(t(1, 5, 30), day), t(2, 0, 0));
        assert_eq!(
            chunk_end(t(2, 0, 0), day),
            t(3, 0, 0),
            "a boundary starts a chunk"
        );
        assert_eq!(
            chunk_end(t(1, 5, 30), Duration::from_secs(6 * 3600)),
            t(1, 6, 0)
        );
        let before_epoch = Utc.with_ymd_and_hms(1969, 12, 31, 12, 0, 0).unwrap();
        assert_eq!(
            chunk_end(before_epoch, day),
            Utc.timestamp_opt(0, 0).unwrap()
        );
        assert_eq!(
            chunk_end(DateTime::<Utc>::MAX_UTC, day),
            DateTime::<Utc>::MAX_UTC
        );
    }
}
