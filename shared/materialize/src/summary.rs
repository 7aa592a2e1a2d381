//! The serializable reports every operation returns; they are the Lambda's JSON responses, and
//! log field names match their keys.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

/// How a span ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Decoded rows and the cursor move committed.
    Committed,
    /// Nothing to decode: the cursor is at (or only dq/maintenance snapshots remain below) head.
    #[default]
    CaughtUp,
    /// A peer moved the cursor or won a commit conflict; nothing was committed by us.
    Moved,
    /// The change feed from the cursor was expired by din; the cursor skipped the unretained prefix.
    CursorReset,
    /// `lake.raw_events` does not exist yet (dq started before din): caught up.
    NoRawTable,
    /// A waiting maintenance invocation asked for the lease: the span stopped between two window
    /// transactions (the cursor did not move; the next drain resumes after the committed windows).
    Yielded,
    /// The invocation's deadline passed mid-span: it stopped between two window transactions,
    /// the cursor did not move, and the next span resumes after the committed windows.
    Paused,
}

/// Row counts of decoding work (a span, a drain, a backfill).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Counts {
    /// Windows written (one transaction each).
    pub windows: u64,
    /// Raw rows read of this materializer's shard (poison and skipped rows included).
    pub raw_rows: u64,
    /// Change-feed statements run: a window's reads of `lake.raw_events` (each a scan of its
    /// span's rows after the keyset position).
    pub feed_reads: u64,
    /// Window commits DuckLake refused because a concurrent transaction (another shard's
    /// window, din's maintenance) changed the same tables; each was run again.
    pub conflicts: u64,
    /// Windows that staged only the rows that may be at rest (the own writer's files carrying
    /// the rest), found one at rest (a replay) and ran again with every row staged.
    pub restaged: u64,
    /// Windows read and decoded ahead, while the window before them was written.
    pub read_ahead: u64,
    /// Windows written whose rows were prepared for writing on their read-ahead's thread.
    pub prepared_ahead: u64,
    /// Signal rows inserted (after the write-key anti-join).
    pub signal_rows: u64,
    /// Event rows inserted.
    pub event_rows: u64,
    /// Signal rows the decoder produced (before the anti-join).
    pub decoded_signal_rows: u64,
    /// Event rows the decoder produced.
    pub decoded_event_rows: u64,
    /// Raw rows dropped as repeats of an earlier row's `Key()` in the same window.
    pub duplicates: u64,
    /// Raw rows not decoded because a tombstone voids them.
    pub voided: u64,
    /// Decoded rows deleted because their event was voided later.
    pub deleted_rows: u64,
    /// Rows of types dq does not decode, or refused by the vehicle gate.
    pub skipped: u64,
    /// Raw events whose decode reported errors (salvaged rows are still written).
    pub decode_failures: u64,
    /// Poison rows by reason (skipped blob rows, bad base64, malformed extras, decode errors).
    pub poison: BTreeMap<String, u64>,
    /// Where the time went, phase by phase.
    pub phases: Phases,
}

/// Wall time per phase of decoding work, in microseconds, summed over windows (a window that
/// lost a commit race counts its staging, statements and commit attempt again). A window read
/// ahead is read and decoded while the window before it is written: its read phases overlap
/// that write, and [`Phases::read_wait_us`] is what the drain waited for them. The
/// materializer bench prints them beside each phase's floor, so the next bottleneck shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Phases {
    /// Change-feed reads: keyset chunks of `lake.raw_events`.
    pub feed_read_us: u64,
    /// Payloads made whole: blob fetches, base64, the window's tombstones.
    pub resolve_us: u64,
    /// Tombstones at rest for the window's events.
    pub tombstones_us: u64,
    /// Decoding (pure Rust, on every core).
    pub decode_us: u64,
    /// Decoded signal rows prepared for writing: the write-key dedup, and with the own writer
    /// the rollup delta and the Parquet files encoded (`write::prepare`). A window read ahead
    /// is prepared on its reader's thread too.
    pub prepare_us: u64,
    /// Waiting for a window read ahead: the part of its feed read, resolve, tombstones, decode
    /// and prepare (counted above, beside the write of the window before) that the write did
    /// not hide.
    pub read_wait_us: u64,
    /// Decoded rows into the TEMP staging tables (Arrow batches, the appender): every row, or
    /// with the own writer only the rollup delta and the rows that may be at rest.
    pub stage_us: u64,
    /// The own writer's files stored, and the window transaction's statements: progress CAS,
    /// voids, the files' registration or anti-join inserts (which write Parquet files), rollups.
    pub write_us: u64,
    /// Of `write_us`: the rollup updates.
    pub rollup_us: u64,
    /// The lease check and COMMIT (the catalog's metadata writes).
    pub commit_us: u64,
}

impl Phases {
    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &Phases) {
        self.feed_read_us += other.feed_read_us;
        self.resolve_us += other.resolve_us;
        self.tombstones_us += other.tombstones_us;
        self.decode_us += other.decode_us;
        self.prepare_us += other.prepare_us;
        self.read_wait_us += other.read_wait_us;
        self.stage_us += other.stage_us;
        self.write_us += other.write_us;
        self.rollup_us += other.rollup_us;
        self.commit_us += other.commit_us;
    }

    /// The phases in pipeline order, named as in the JSON.
    pub fn named(&self) -> [(&'static str, u64); 10] {
        [
            ("feed_read", self.feed_read_us),
            ("resolve", self.resolve_us),
            ("tombstones", self.tombstones_us),
            ("decode", self.decode_us),
            ("prepare", self.prepare_us),
            ("read_wait", self.read_wait_us),
            ("stage", self.stage_us),
            ("write", self.write_us),
            ("of which rollup", self.rollup_us),
            ("commit", self.commit_us),
        ]
    }
}

/// Microseconds since `t0`, saturating.
pub(crate) fn micros_since(t0: std::time::Instant) -> u64 {
    u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX)
}

impl Counts {
    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &Counts) {
        self.windows += other.windows;
        self.raw_rows += other.raw_rows;
        self.feed_reads += other.feed_reads;
        self.conflicts += other.conflicts;
        self.restaged += other.restaged;
        self.prepared_ahead += other.prepared_ahead;
        self.read_ahead += other.read_ahead;
        self.signal_rows += other.signal_rows;
        self.event_rows += other.event_rows;
        self.decoded_signal_rows += other.decoded_signal_rows;
        self.decoded_event_rows += other.decoded_event_rows;
        self.duplicates += other.duplicates;
        self.voided += other.voided;
        self.deleted_rows += other.deleted_rows;
        self.skipped += other.skipped;
        self.decode_failures += other.decode_failures;
        for (k, v) in &other.poison {
            *self.poison.entry(k.clone()).or_default() += v;
        }
        self.phases.add(&other.phases);
    }

    /// Poison rows over all reasons.
    pub fn poison_total(&self) -> u64 {
        self.poison.values().sum()
    }
}

/// The lease an operation ran under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeaseInfo {
    /// `dynamodb:<table>/<id>` or `file:<path>`.
    pub backend: String,
    /// Holder id.
    pub holder: String,
    /// Fencing token of this acquisition.
    pub fence: u64,
}

/// One span: `(from, to]` of raw_events snapshots.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SpanSummary {
    /// How it ended.
    pub outcome: Outcome,
    /// Cursor before.
    pub from: i64,
    /// Span end (the cursor after, when committed).
    pub to: i64,
    /// Catalog head when the span started.
    pub head: i64,
    /// True when the span continued after the windows an earlier, cut-short run committed.
    pub resumed: bool,
    /// Work done.
    #[serde(flatten)]
    pub counts: Counts,
    /// Snapshots skipped because din expired them (cursor reset).
    pub skipped_snapshots: i64,
    /// Producer lateness: now − oldest event time of the span.
    pub lag_seconds: Option<f64>,
    /// Decode position lag: now − commit time of the oldest snapshot above the cursor.
    pub commit_lag_seconds: f64,
    /// The lease held, if any.
    pub lease: Option<LeaseInfo>,
}

/// A run of spans (one Lambda invocation, `--once`, or one loop turn).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunSummary {
    /// Spans attempted.
    pub spans: u64,
    /// Spans committed.
    pub batches: u64,
    /// True when the last span found nothing left to decode.
    pub caught_up: bool,
    /// True when a peer won (another materializer is running).
    pub moved: bool,
    /// True when the run stopped to let a waiting maintenance invocation take the lease; the
    /// next scheduled run resumes.
    pub yielded: bool,
    /// True when the deadline stopped the last span between two windows; the next run resumes it.
    pub paused: bool,
    /// Cursor at the start.
    pub from: i64,
    /// Cursor at the end.
    pub to: i64,
    /// Head seen by the last span.
    pub head: i64,
    /// Work done.
    #[serde(flatten)]
    pub counts: Counts,
    /// Expired-feed cursor resets.
    pub cursor_resets: u64,
    /// Snapshots skipped by resets.
    pub skipped_snapshots: i64,
    /// Producer lateness of the last committed span.
    pub lag_seconds: Option<f64>,
    /// Commit lag at the last span.
    pub commit_lag_seconds: f64,
    /// The lease held, if any.
    pub lease: Option<LeaseInfo>,
}

impl RunSummary {
    /// Folds one span in.
    pub fn push(&mut self, span: &SpanSummary) {
        if self.spans == 0 {
            self.from = span.from;
        }
        self.spans += 1;
        self.head = span.head;
        self.counts.add(&span.counts);
        self.commit_lag_seconds = span.commit_lag_seconds;
        self.lease = span.lease.clone();
        match span.outcome {
            Outcome::Committed => {
                self.batches += 1;
                self.to = span.to;
                self.lag_seconds = span.lag_seconds;
            }
            Outcome::CursorReset => {
                self.cursor_resets += 1;
                self.skipped_snapshots += span.skipped_snapshots;
                self.to = span.to;
            }
            Outcome::CaughtUp | Outcome::NoRawTable => {
                self.caught_up = true;
                self.to = self.to.max(span.from);
            }
            Outcome::Moved => {
                self.moved = true;
                self.to = self.to.max(span.from);
            }
            Outcome::Yielded => {
                self.yielded = true;
                self.to = self.to.max(span.from);
            }
            Outcome::Paused => {
                self.paused = true;
                self.to = self.to.max(span.from);
            }
        }
    }
}

/// A backfill of `[from, to)` by raw event time.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BackfillSummary {
    /// Inclusive start.
    pub from: DateTime<Utc>,
    /// Exclusive end.
    pub to: DateTime<Utc>,
    /// True when the whole range was re-decoded; false when the run stopped at its deadline.
    pub complete: bool,
    /// Where the next run continues (its `from`) when not complete.
    pub next_from: Option<DateTime<Utc>>,
    /// Time chunks done.
    pub chunks: u64,
    /// Work done.
    #[serde(flatten)]
    pub counts: Counts,
}

/// A retention prune.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PruneSummary {
    /// Rows with a timestamp before this are to be deleted.
    pub cutoff: DateTime<Utc>,
    /// True when no decoded row before `cutoff` is left; false when the run stopped at its
    /// deadline (the next run continues with the oldest rows left).
    pub complete: bool,
    /// Decoded rows before this are gone: `cutoff` when complete, else the end of the last day
    /// deleted.
    pub pruned_before: DateTime<Utc>,
    /// Transactions (days) done.
    pub chunks: u64,
    /// Signal rows deleted.
    pub signal_rows_deleted: u64,
    /// Event rows deleted.
    pub event_rows_deleted: u64,
    /// Distinct subjects whose rollup rows were recomputed.
    pub subjects: u64,
}

/// The `audit` action's findings; `clean` is the conjunction of every check.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AuditReport {
    /// Cursor snapshot.
    pub cursor: i64,
    /// Catalog head.
    pub head: i64,
    /// Signal rows beyond the first per (subject, name, timestamp, cloud_event_id).
    pub duplicate_signal_rows: i64,
    /// Event rows beyond the first per (subject, timestamp, name, source, cloud_event_id).
    pub duplicate_event_rows: i64,
    /// Signal rows with no raw `dimo.status` row (subject, id).
    pub orphan_signal_rows: i64,
    /// Event rows with no raw `dimo.events` row (subject, id).
    pub orphan_event_rows: i64,
    /// Decoded rows of voided events.
    pub voided_rows: i64,
    /// Raw rows with a non-empty `voids_id` whose type is not `dimo.tombstone`: din never writes
    /// them, and both voiding rules (the materializer's and the readers' tombstone probe) look
    /// only at `dimo.tombstone` rows.
    pub stray_voids_rows: i64,
    /// Rows of `signals_latest` EXCEPT ALL its recompute, both ways.
    pub signals_latest_diff: i64,
    /// Rows of `events_latest` EXCEPT ALL its recompute, both ways.
    pub events_latest_diff: i64,
    /// Every check passed.
    pub clean: bool,
}
