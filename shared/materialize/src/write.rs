//! Writing one window: decoded rows go from Arrow record batches through the DuckDB appender
//! into per-connection TEMP staging tables (no parquet file on disk; signals as per-event heads
//! and per-row values, `stage_batches`; with the own writer's files only the rollup delta and
//! the rows that may be at rest), then ONE lake transaction compare-and-swaps the progress row
//! (its fence on every window, the cursor too on a span's final window), deletes rows of voided
//! events, finds with one scan the signal rows at rest the window could repeat (write key W1) or
//! collide with (read key R1), pruned by `subject_bucket` and the staged rows' time range,
//! registers the files or inserts the staged rows without those, and recomputes or merges the
//! touched subjects' rollups. The caller commits (after its lease check).

use std::collections::BTreeSet;

use foldhash::{HashMap, HashMapExt, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use dq_decode::rows::{EventRow, SignalRow};
use dq_lake::duckdb::arrow::array::{
    ArrayRef, Float64Builder, Int32Builder, ListBuilder, StringBuilder,
    TimestampMicrosecondBuilder, UInt32Builder, UInt64Builder,
};
use dq_lake::duckdb::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use dq_lake::duckdb::arrow::record_batch::RecordBatch;
use dq_lake::duckdb::Connection;
use dq_lake::{quote, Lake};

use crate::feed::{ts_literal, Resume};
use crate::own_writer::{self, Encoded};
use crate::resolve::Voided;
use crate::{rollup, Error, Result};
use dq_tables::keys::{key_equal, EVENT_WRITE_KEY, SIGNAL_READ_KEY, SIGNAL_WRITE_KEY};
use dq_tables::schema::{
    create_sql, EVENT_COLUMNS, FENCE_COLUMN, RESUME_COLUMN, SIGNALS_LATEST_COLUMNS, SIGNAL_COLUMNS,
};

/// The staged signal rows in `lake.signals` column order: a view joining
/// [`STAGE_VALUES`] to [`STAGE_HEADS`] ([`stage_batches`]).
const STAGE_SIGNALS: &str = "_dq_stage_signals";
const STAGE_HEADS: &str = "_dq_stage_signal_heads";
const STAGE_VALUES: &str = "_dq_stage_signal_values";
const STAGE_EVENTS: &str = "_dq_stage_events";
/// The window's rollup delta computed in Rust (with the own writer's files, [`Staged::files`]).
const STAGE_DELTA: &str = "_dq_stage_signals_delta";
/// The window's signal rows that pass the anti-join, kept to fold them into the rollup (when
/// some staged rows are already at rest; else the stage itself is the new rows).
const NEW_SIGNALS: &str = "temp.main._dq_new_signals";
/// Signal rows at rest that may match a staged row on the write or the read key.
const AT_REST: &str = "temp.main._dq_signals_at_rest";

/// Everything one window transaction does.
#[derive(Debug, Default)]
pub struct WindowPlan {
    /// Decoded signal rows (post-dedup, post-tombstone).
    pub signals: Vec<SignalRow>,
    /// Decoded event rows.
    pub events: Vec<EventRow>,
    /// Events whose decoded rows must be removed.
    pub voided: BTreeSet<Voided>,
    /// The progress-row CAS of this window (none: the window writes without a fence).
    pub progress: Option<ProgressCas>,
    /// `signals` prepared for writing ([`prepare`]) where they were read, if they were.
    pub prepared: Option<Prepared>,
}

impl WindowPlan {
    /// True when the window has no rows to insert or delete.
    pub fn writes_nothing(&self) -> bool {
        self.signals.is_empty() && self.events.is_empty() && self.voided.is_empty()
    }
}

/// The compare-and-swap a window makes on the cursor row of `lake.ingest_progress`, in its own
/// transaction. Writing the row in every window is what fences concurrent writers: DuckLake
/// aborts the later of two commits that both updated it, so two writers can never both commit a
/// window over the same snapshot (where each anti-join would miss the other's rows and append
/// them twice). The comparison on the fence stops a writer whose row was rewritten since it last
/// looked (a takeover) at its next window. Fences are compared for equality only: tokens of
/// different leases (a lock file, a DynamoDB item) are not ordered with each other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgressCas {
    /// The cursor row (`partition` of `lake.ingest_progress`): the writer's shard's.
    pub partition: String,
    /// `(from, to)`: the row must hold cursor `from` and gets `to` (equal on an intermediate
    /// window; the span's end on its final window). None: the cursor is not compared (backfill).
    pub cursor: Option<(i64, i64)>,
    /// The fence the row must hold: what this writer last read or wrote (None: a row never
    /// fenced, e.g. seeded or migrated).
    pub expected_fence: Option<i64>,
    /// This writer's fencing token (its lease's fence), written into the row.
    pub fence: i64,
    /// Where the span stands after this window (intermediate windows), written with the cursor;
    /// None clears it (a span's final window). Left alone when `cursor` is None.
    pub resume: Option<Resume>,
}

impl ProgressCas {
    /// True when the final window moves the cursor.
    pub fn moves_cursor(&self) -> bool {
        self.cursor.is_some_and(|(from, to)| from != to)
    }
}

/// What the window transaction changed (before commit).
#[derive(Debug, Default, Clone, Copy)]
pub struct Applied {
    /// Signal rows inserted (after the anti-join).
    pub signal_rows: u64,
    /// Event rows inserted.
    pub event_rows: u64,
    /// Decoded rows deleted because their event was voided.
    pub deleted_rows: u64,
    /// The progress-row CAS matched (always true without one). False: a peer moved the cursor
    /// or fenced the row since this writer read it; nothing else was written.
    pub progress_matched: bool,
    /// Microseconds the rollup updates took.
    pub rollup_us: u64,
    /// The signal rows went in as the own writer's files ([`Added`]), registered in this
    /// transaction; false: by INSERT, and the files (if any) are not referenced.
    pub registered: bool,
    /// Only the rows that may be at rest were staged and one of them is (a replay): nothing was
    /// written; stage every row and run the window again.
    pub restage: bool,
    /// The window ran again with every row staged after a [`Applied::restage`].
    pub restaged: bool,
    /// Its rows were prepared ([`prepare`]) where they were read, on a read-ahead's thread.
    pub prepared_ahead: bool,
}

fn tstz() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

fn arrow_err(table: &'static str) -> impl Fn(dq_lake::duckdb::arrow::error::ArrowError) -> Error {
    move |e| Error::Arrow {
        table,
        message: e.to_string(),
    }
}

/// [`SIGNAL_WRITE_KEY`] of one decoded row, for deduplicating a window before it is staged (the
/// same columns in the same order; `write_key_matches_columns` pins them together), split into
/// the part an event's rows share and the part each row has.
pub fn signal_write_key(r: &SignalRow) -> ((i32, &str), (&str, i64)) {
    (
        (r.subject_bucket, &r.cloud_event_id),
        (&r.name, r.timestamp.timestamp_micros()),
    )
}

/// The `lake.signals` columns an event's rows share, staged once per run of rows
/// ([`stage_batches`]).
const HEAD_COLUMNS: [&str; 5] = [
    "subject",
    "subject_bucket",
    "source",
    "producer",
    "cloud_event_id",
];
/// The column joining a staged value row to its head.
const HEAD_ID: &str = "head";

/// A window's signal rows deduplicated on the write key (first wins).
pub struct SignalDedup {
    /// The positions of the rows kept, in order: the first of each write key.
    pub kept: Vec<u32>,
    /// Subjects with two kept rows of one read key (R1, [`SIGNAL_READ_KEY`]: two events with a
    /// value of one name at one time). Only these need the read dedup when the window's rows
    /// are folded into the rollup by SQL ([`rollup::merge_new_signals`]).
    pub read_key_collisions: BTreeSet<String>,
}

/// Deduplicates `rows` on the write key (first wins) and, `with_read_keys` (the INSERT path's
/// rollup merge needs them; the own writer's delta deduplicates read keys itself), names the
/// subjects whose kept rows share a read key.
pub fn signal_dedup(rows: &[SignalRow], with_read_keys: bool) -> SignalDedup {
    let kept = write_key_dedup(rows);
    let read_key_collisions = if with_read_keys {
        kept_read_key_collisions(rows, &kept)
    } else {
        BTreeSet::new()
    };
    SignalDedup {
        kept,
        read_key_collisions,
    }
}

/// Runs longer than this are deduplicated with a set rather than by comparing their rows.
const SHORT_RUN: usize = 48;

/// The positions of `rows` that are the first of their write key ([`signal_write_key`]).
///
/// Decode emits an event's rows together, so a run of rows with one head ([`same_head`]) is
/// one event's: its rows are compared with each other (a short run) or go through one set, and
/// the event's key goes into a map once. Only an event whose rows come in more than one run (a
/// raw event repeated in the window) has its new rows checked against the rows its earlier runs
/// kept. A row costs a few comparisons instead of a hashed insert into a set per event.
fn write_key_dedup(rows: &[SignalRow]) -> Vec<u32> {
    let mut kept: Vec<u32> = Vec::with_capacity(rows.len());
    // Each event's runs, as ranges of `kept`: the first here, any later ones in `repeats`.
    let mut events: HashMap<(i32, &str), std::ops::Range<usize>> = HashMap::new();
    let mut repeats: HashMap<(i32, &str), Vec<std::ops::Range<usize>>> = HashMap::new();
    let mut seen: Seen = HashSet::default();
    let mut offset = 0usize;
    for run in rows.chunk_by(same_head) {
        let from = kept.len();
        let Some(first) = run.first() else {
            continue;
        };
        let event = signal_write_key(first).0;
        seen.clear();
        let earlier = events.get(&event).cloned();
        if let Some(first_run) = &earlier {
            let later = repeats.get(&event).into_iter().flatten().cloned();
            for range in std::iter::once(first_run.clone()).chain(later) {
                let positions = kept.get(range).unwrap_or_default();
                for r in positions.iter().filter_map(|&i| rows.get(i as usize)) {
                    seen.insert(signal_write_key(r).1);
                }
            }
        }
        let compare = earlier.is_none() && run.len() <= SHORT_RUN;
        for (j, r) in run.iter().enumerate() {
            let key = signal_write_key(r).1;
            let new = if compare {
                // A row before it in the run with its key was kept, or repeats one that was.
                let before = run.get(..j).unwrap_or_default();
                !before.iter().any(|o| signal_write_key(o).1 == key)
            } else {
                seen.insert(key)
            };
            if new {
                kept.push((offset + j) as u32);
            }
        }
        match earlier {
            None => {
                events.insert(event, from..kept.len());
            }
            Some(_) => repeats.entry(event).or_default().push(from..kept.len()),
        }
        offset += run.len();
    }
    kept
}

/// The subjects of which two rows at `kept` share a read key ([`SIGNAL_READ_KEY`]: name and
/// time). A subject's keys are one set, taken out of the map while the subject's run of rows
/// lasts.
fn kept_read_key_collisions(rows: &[SignalRow], kept: &[u32]) -> BTreeSet<String> {
    let mut read_keys: HashMap<&str, Seen> = HashMap::new();
    let mut subject_run: Option<(&str, Seen)> = None;
    let mut collisions = BTreeSet::new();
    for r in kept.iter().filter_map(|&i| rows.get(i as usize)) {
        let staged = match &mut subject_run {
            Some((s, staged)) if *s == &*r.subject => staged,
            _ => {
                if let Some((s, staged)) = subject_run.take() {
                    read_keys.insert(s, staged);
                }
                let staged = read_keys.remove(&*r.subject).unwrap_or_default();
                &mut subject_run.insert((&*r.subject, staged)).1
            }
        };
        if !staged.insert(signal_write_key(r).1) && !collisions.contains(&*r.subject) {
            collisions.insert(r.subject.to_string());
        }
    }
    collisions
}

/// The rows of `rows` at `positions` as the stage's batches. Decode emits an event's rows
/// together, so the columns they share (the event's subject, source, producer and id,
/// [`HEAD_COLUMNS`]) are staged once per run of rows with equal values (the heads: [`HEAD_ID`],
/// then [`HEAD_COLUMNS`]) and each row keeps only its own columns and its head's number (the
/// values: [`HEAD_ID`], then the other `lake.signals` columns in table order): the long strings
/// cross into DuckDB once per event instead of once per row, which was most of the staging time
/// of a window of ~10⁶ rows. [`STAGE_SIGNALS`] joins them back.
fn stage_batches(rows: &[SignalRow], positions: &[u32]) -> Result<(RecordBatch, RecordBatch)> {
    let n = positions.len();
    let mut head_id = UInt32Builder::new();
    let mut head = HeadBuilders::with_capacity(0);
    let mut row_head = UInt32Builder::with_capacity(n);
    let mut own = ValueBuilders::with_capacity(n);
    let mut current: Option<(&SignalRow, u32)> = None;
    let mut next_head = 0u32;
    for &i in positions {
        let r = rows.get(i as usize).ok_or_else(|| Error::Arrow {
            table: "signals",
            message: format!("row position {i} outside the window's {} rows", rows.len()),
        })?;
        let id = match current {
            Some((h, id)) if same_head(h, r) => id,
            _ => {
                head_id.append_value(next_head);
                head.append_signal(r);
                next_head += 1;
                current = Some((r, next_head - 1));
                next_head - 1
            }
        };
        row_head.append_value(id);
        own.append(r);
    }
    let heads: Vec<ArrayRef> = std::iter::once(Arc::new(head_id.finish()) as ArrayRef)
        .chain(head.finish())
        .collect();
    let (keys, value_columns) = own.finish();
    let values: Vec<ArrayRef> = std::iter::once(Arc::new(row_head.finish()) as ArrayRef)
        .chain(keys)
        .chain(value_columns)
        .collect();
    // Each batch: the head number, then its columns in table order.
    let batch = |cols: &Columns, columns: Vec<ArrayRef>| {
        let names = std::iter::once(HEAD_ID).chain(cols.iter().map(|(n, _)| *n));
        named_batch("signals", names, columns)
    };
    let (head_cols, value_cols) = stage_columns();
    Ok((batch(&head_cols, heads)?, batch(&value_cols, values)?))
}

/// `(name, timestamp)` pairs seen: the rest of the write keys of one `(subject_bucket,
/// cloud_event_id)`, or of the read keys of one subject.
type Seen<'a> = HashSet<(&'a str, i64)>;

/// Column (name, type) pairs.
type Columns = Vec<(&'static str, &'static str)>;

/// True when `b` has `a`'s [`HEAD_COLUMNS`] values. An event's rows share its strings, so the
/// pointers usually answer without comparing bytes.
fn same_head(a: &SignalRow, b: &SignalRow) -> bool {
    fn same(a: &Arc<str>, b: &Arc<str>) -> bool {
        Arc::ptr_eq(a, b) || a == b
    }
    a.subject_bucket == b.subject_bucket
        && same(&a.cloud_event_id, &b.cloud_event_id)
        && same(&a.subject, &b.subject)
        && same(&a.source, &b.source)
        && same(&a.producer, &b.producer)
}

/// The distinct subjects of a window's rows, numbered in order of appearance. A subject's
/// string is hashed only when it is not the previous row's (an event's rows share it), so
/// grouping and sorting by subject need no byte comparisons per row.
#[derive(Default)]
pub(crate) struct Subjects<'a> {
    names: Vec<&'a str>,
    index: HashMap<&'a str, usize>,
    last: Option<(&'a Arc<str>, usize)>,
}

impl<'a> Subjects<'a> {
    /// The number of `subject`.
    pub(crate) fn index(&mut self, subject: &'a Arc<str>) -> usize {
        match self.last {
            Some((s, i)) if Arc::ptr_eq(s, subject) => i,
            _ => {
                let names = &mut self.names;
                let i = *self.index.entry(subject).or_insert_with(|| {
                    names.push(subject);
                    names.len() - 1
                });
                self.last = Some((subject, i));
                i
            }
        }
    }

    /// Each subject's rank in byte order, by number.
    pub(crate) fn ranks(&self) -> Vec<usize> {
        let mut order: Vec<(&str, usize)> = self.names.iter().copied().zip(0..).collect();
        order.sort_unstable();
        let mut rank = vec![0; order.len()];
        for (r, (_, i)) in order.into_iter().enumerate() {
            if let Some(slot) = rank.get_mut(i) {
                *slot = r;
            }
        }
        rank
    }
}

/// `lake.signals` columns (name, type) split into the head's and the value row's, each in table
/// order.
fn stage_columns() -> (Columns, Columns) {
    SIGNAL_COLUMNS
        .iter()
        .partition(|(n, _)| HEAD_COLUMNS.contains(n))
}

/// Builders of the columns a signal row has of its own, after its event's (`name`,
/// `timestamp`, then the value columns): shared by staging and the own writer's files.
pub(crate) struct ValueBuilders {
    name: StringBuilder,
    ts: TimestampMicrosecondBuilder,
    num: Float64Builder,
    string: StringBuilder,
    lat: Float64Builder,
    lon: Float64Builder,
    hdop: Float64Builder,
    heading: Float64Builder,
}

impl ValueBuilders {
    pub(crate) fn with_capacity(n: usize) -> Self {
        ValueBuilders {
            name: StringBuilder::with_capacity(n, n * 24),
            ts: TimestampMicrosecondBuilder::with_capacity(n).with_timezone("UTC"),
            num: Float64Builder::with_capacity(n),
            string: StringBuilder::with_capacity(n, n),
            lat: Float64Builder::with_capacity(n),
            lon: Float64Builder::with_capacity(n),
            hdop: Float64Builder::with_capacity(n),
            heading: Float64Builder::with_capacity(n),
        }
    }

    pub(crate) fn append(&mut self, r: &SignalRow) {
        self.name.append_value(&r.name);
        self.ts.append_value(r.timestamp.timestamp_micros());
        self.num.append_value(r.value_number);
        self.string.append_value(&r.value_string);
        self.lat.append_value(r.loc_lat);
        self.lon.append_value(r.loc_lon);
        self.hdop.append_value(r.loc_hdop);
        self.heading.append_value(r.loc_heading);
    }

    /// `(name, timestamp)` and the value columns, each in table order.
    pub(crate) fn finish(mut self) -> ([ArrayRef; 2], [ArrayRef; 6]) {
        (
            [Arc::new(self.name.finish()), Arc::new(self.ts.finish())],
            [
                Arc::new(self.num.finish()),
                Arc::new(self.string.finish()),
                Arc::new(self.lat.finish()),
                Arc::new(self.lon.finish()),
                Arc::new(self.hdop.finish()),
                Arc::new(self.heading.finish()),
            ],
        )
    }
}

/// Builders of the columns a decoded row has from its event ([`HEAD_COLUMNS`], in their order,
/// which both tables share): shared by the signal stage's heads, the events batch and the own
/// writer's files.
pub(crate) struct HeadBuilders {
    subject: StringBuilder,
    bucket: Int32Builder,
    source: StringBuilder,
    producer: StringBuilder,
    ceid: StringBuilder,
}

impl HeadBuilders {
    pub(crate) fn with_capacity(n: usize) -> Self {
        HeadBuilders {
            subject: StringBuilder::with_capacity(n, n * 64),
            bucket: Int32Builder::with_capacity(n),
            source: StringBuilder::with_capacity(n, n * 42),
            producer: StringBuilder::with_capacity(n, n * 64),
            ceid: StringBuilder::with_capacity(n, n * 36),
        }
    }

    pub(crate) fn append(
        &mut self,
        subject: &str,
        bucket: i32,
        source: &str,
        producer: &str,
        ceid: &str,
    ) {
        self.subject.append_value(subject);
        self.bucket.append_value(bucket);
        self.source.append_value(source);
        self.producer.append_value(producer);
        self.ceid.append_value(ceid);
    }

    /// [`Self::append`] with a signal row's head.
    pub(crate) fn append_signal(&mut self, r: &SignalRow) {
        self.append(
            &r.subject,
            r.subject_bucket,
            &r.source,
            &r.producer,
            &r.cloud_event_id,
        );
    }

    pub(crate) fn finish(mut self) -> [ArrayRef; 5] {
        [
            Arc::new(self.subject.finish()),
            Arc::new(self.bucket.finish()),
            Arc::new(self.source.finish()),
            Arc::new(self.producer.finish()),
            Arc::new(self.ceid.finish()),
        ]
    }
}

/// The `lake.events` rows as one Arrow batch, columns in table order.
pub fn event_batch(rows: &[EventRow]) -> Result<RecordBatch> {
    let n = rows.len();
    let mut head = HeadBuilders::with_capacity(n);
    let mut ty = StringBuilder::with_capacity(n, n * 10);
    let mut version = StringBuilder::with_capacity(n, n * 12);
    let mut name = StringBuilder::with_capacity(n, n * 24);
    let mut ts = TimestampMicrosecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut duration = UInt64Builder::with_capacity(n);
    let mut metadata = StringBuilder::with_capacity(n, n * 8);
    let mut tags = ListBuilder::new(StringBuilder::new());
    for r in rows {
        head.append(
            &r.subject,
            r.subject_bucket,
            &r.source,
            &r.producer,
            &r.cloud_event_id,
        );
        ty.append_value(&r.event_type);
        version.append_value(&r.data_version);
        name.append_value(&r.name);
        ts.append_value(r.timestamp.timestamp_micros());
        duration.append_value(r.duration_ns);
        metadata.append_value(&r.metadata);
        for t in &r.tags {
            tags.values().append_value(t);
        }
        tags.append(true);
    }
    let columns: Vec<ArrayRef> = head
        .finish()
        .into_iter()
        .chain([
            Arc::new(ty.finish()) as ArrayRef,
            Arc::new(version.finish()),
            Arc::new(name.finish()),
            Arc::new(ts.finish()),
            Arc::new(duration.finish()),
            Arc::new(metadata.finish()),
            Arc::new(tags.finish()),
        ])
        .collect();
    debug_assert_eq!(columns.get(8).map(|c| c.data_type()), Some(&tstz()));
    named_batch("events", EVENT_COLUMNS.iter().map(|(n, _)| *n), columns)
}

/// `columns` as one batch of `table`'s, named by `names` in order, each field typed by its
/// array.
pub(crate) fn named_batch<'a>(
    table: &'static str,
    names: impl Iterator<Item = &'a str>,
    columns: Vec<ArrayRef>,
) -> Result<RecordBatch> {
    let fields: Vec<Field> = names
        .zip(&columns)
        .map(|(n, c)| Field::new(n, c.data_type().clone(), true))
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(arrow_err(table))
}

/// The part of writing a window's signal rows that needs no connection: the write-key dedup
/// and, when the own writer's files carry the rows, the rollup delta and the files encoded.
/// Pure, so a window read ahead is prepared on its reader's thread while the window before it
/// is written (a third of the write's time was this).
pub struct Prepared {
    /// The rows kept and the subjects with read-key collisions.
    pub dedup: SignalDedup,
    /// Prepared for the own writer's files: `delta` and `encoded` are set when a row is kept.
    pub files: bool,
    /// The rollup delta of the kept rows ([`rollup::signals_delta`]).
    pub delta: Option<RecordBatch>,
    /// The kept rows as the own writer's files ([`own_writer::encode`]).
    pub encoded: Vec<Encoded>,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("kept", &self.dedup.kept.len())
            .field("files", &self.files)
            .field("encoded", &self.encoded.len())
            .finish()
    }
}

/// Prepares `rows` for writing: as the own writer's files (`files`) or to be staged whole.
pub fn prepare(rows: &[SignalRow], files: bool) -> Result<Prepared> {
    let t0 = std::time::Instant::now();
    let dedup = signal_dedup(rows, !files);
    let dedup_ms = t0.elapsed().as_millis() as u64;
    let (delta, encoded) = if files && !dedup.kept.is_empty() {
        // The delta is one thread's work and the encoding spreads over every core: side by side.
        let (delta, encoded) = std::thread::scope(|scope| {
            let delta = scope.spawn(|| {
                let t0 = std::time::Instant::now();
                let delta = rollup::signals_delta(rows, &dedup.kept);
                (delta, t0.elapsed().as_millis() as u64)
            });
            let t0 = std::time::Instant::now();
            let encoded = own_writer::encode(rows, &dedup.kept);
            let encode_ms = t0.elapsed().as_millis() as u64;
            let delta = delta.join().map(|(delta, delta_ms)| {
                tracing::debug!(dedup_ms, delta_ms, encode_ms, "signal rows prepared");
                delta
            });
            (delta, encoded)
        });
        let delta = delta.map_err(|_| Error::Arrow {
            table: "signals_latest",
            message: "the rollup delta's thread panicked".into(),
        })??;
        (Some(delta), encoded?)
    } else {
        (None, Vec::new())
    };
    Ok(Prepared {
        dedup,
        files,
        delta,
        encoded,
    })
}

/// What staging learned about a window's rows that its statements use.
#[derive(Debug, Default)]
pub struct Staged {
    /// [`SignalDedup::read_key_collisions`].
    pub read_key_collisions: BTreeSet<String>,
    /// [`SignalDedup::kept`]: the signal rows kept, as positions in the plan's rows.
    pub kept: Vec<u32>,
    /// The own writer's files carry the window's signal rows: none was staged, the window's
    /// rollup delta was, and the transaction stages only the rows that may be at rest
    /// (`stage_suspects`). False: every kept row is staged.
    pub files: bool,
    /// The staged rollup delta (with `files`): its keys' first times tell which rows may be at
    /// rest.
    pub delta: Option<RecordBatch>,
}

/// The window's signal rows as the own writer's Parquet files, written into the table's
/// directory ([`crate::own_writer`]), for [`apply`] to register in place of its INSERT.
#[derive(Debug)]
pub struct Added {
    /// The files, as DuckDB names them.
    pub paths: Vec<String>,
    /// Rows they hold: every staged row.
    pub rows: u64,
}

/// Loads the plan's rows, `prepared`, into fresh TEMP staging tables on `conn`, before the
/// window's transaction.
/// Prepared for the own writer's files, only the window's rollup delta is staged here; the
/// transaction stages the rows that may be at rest (`stage_suspects`).
pub fn stage(
    lake: &Lake,
    conn: &Connection,
    plan: &WindowPlan,
    prepared: Prepared,
) -> Result<Staged> {
    let (head_cols, value_cols) = stage_columns();
    fn with_head(cols: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
        std::iter::once((HEAD_ID, "UINTEGER"))
            .chain(cols.iter().copied())
            .collect()
    }
    let temp = |sql: String| sql.replace("CREATE TABLE", "CREATE OR REPLACE TEMP TABLE");
    let select: Vec<String> = SIGNAL_COLUMNS
        .iter()
        .map(|(n, _)| format!("\"{n}\""))
        .collect();
    let sql = [
        temp(create_sql(STAGE_HEADS, &with_head(&head_cols), false)),
        temp(create_sql(STAGE_VALUES, &with_head(&value_cols), false)),
        format!(
            "CREATE OR REPLACE TEMP VIEW {STAGE_SIGNALS} AS SELECT {} \
             FROM temp.main.{STAGE_VALUES} JOIN temp.main.{STAGE_HEADS} USING ({HEAD_ID})",
            select.join(", ")
        ),
        temp(create_sql(STAGE_EVENTS, &EVENT_COLUMNS, false)),
        temp(create_sql(STAGE_DELTA, &SIGNALS_LATEST_COLUMNS, false)),
    ]
    .join(";\n");
    conn.execute_batch(&sql)
        .map_err(|e| lake.error("create staging tables", e))?;
    let mut out = Staged::default();
    if !plan.signals.is_empty() {
        let t0 = std::time::Instant::now();
        let rows = &plan.signals;
        let Prepared {
            dedup,
            files,
            delta,
            ..
        } = prepared;
        if let Some(delta) = &delta {
            append(lake, conn, STAGE_DELTA, delta.clone())?;
        }
        let staged: &[u32] = if files { &[] } else { &dedup.kept };
        let (heads, values) = stage_batches(rows, staged)?;
        let built_ms = t0.elapsed().as_millis() as u64;
        append(lake, conn, STAGE_HEADS, heads)?;
        append(lake, conn, STAGE_VALUES, values)?;
        tracing::debug!(
            built_ms,
            staged = staged.len(),
            kept = dedup.kept.len(),
            took_ms = t0.elapsed().as_millis() as u64,
            "signals staged"
        );
        out.files = files;
        out.delta = delta;
        out.read_key_collisions = dedup.read_key_collisions;
        out.kept = dedup.kept;
    }
    if !plan.events.is_empty() {
        append(lake, conn, STAGE_EVENTS, event_batch(&plan.events)?)?;
    }
    Ok(out)
}

/// Stages, on `tx` (the window's open transaction), the kept rows that may already be at rest,
/// and returns their buckets and time range (None: there are none). A row can repeat (write
/// key) or collide with (read key) a row at rest only if its time is at or before the newest
/// time at rest of its subject and name, which the rollup holds (`signals_latest.last_seen`,
/// equal to the recompute at every snapshot): a window of new data has none of those, so it
/// copies none of its rows into DuckDB and scans no `lake.signals` file.
fn stage_suspects(
    lake: &Lake,
    tx: &Connection,
    rows: &[SignalRow],
    staged: &Staged,
) -> Result<Option<(String, TimeRange)>> {
    // No delta: no kept rows, so none can be at rest.
    let Some(delta) = &staged.delta else {
        return Ok(None);
    };
    let sql = format!(
        "SELECT subject, name, epoch_us(last_seen) FROM lake.signals_latest \
         WHERE subject_bucket IN ({})",
        buckets(rows.iter().map(|r| r.subject_bucket))
    );
    let mut stmt = tx
        .prepare(&sql)
        .map_err(|e| lake.error("read the rollup's last times", e))?;
    let last_seen = stmt
        .query_map([], |r| {
            Ok((
                (r.get::<_, String>(0)?, r.get::<_, String>(1)?),
                r.get::<_, i64>(2)?,
            ))
        })
        .and_then(|rows| rows.collect::<std::result::Result<Vec<_>, _>>())
        .map_err(|e| lake.error("read the rollup's last times", e))?;
    let last: HashMap<(&str, &str), i64> = last_seen
        .iter()
        .map(|((s, n), t)| ((s.as_str(), n.as_str()), *t))
        .collect();
    // A (subject, name) has a suspect row only if its first time in the window (the delta's
    // `first_seen`) is at or before its last time at rest: the rows are looked at only then.
    let suspect_keys = suspect_keys(delta, &last)?;
    if suspect_keys.is_empty() {
        return Ok(None);
    }
    let is_suspect = |r: &SignalRow| {
        suspect_keys
            .get(&(&*r.subject, &*r.name))
            .is_some_and(|t| r.timestamp.timestamp_micros() <= *t)
    };
    let positions: Vec<u32> = staged
        .kept
        .iter()
        .copied()
        .filter(|i| rows.get(*i as usize).is_some_and(is_suspect))
        .collect();
    let suspects = || positions.iter().filter_map(|i| rows.get(*i as usize));
    let Some(span) = range(suspects().map(|r| &r.timestamp)) else {
        return Ok(None);
    };
    let (heads, values) = stage_batches(rows, &positions)?;
    append(lake, tx, STAGE_HEADS, heads)?;
    append(lake, tx, STAGE_VALUES, values)?;
    Ok(Some((buckets(suspects().map(|r| r.subject_bucket)), span)))
}

/// The `(subject, name)` keys of a rollup delta whose first time is at or before their last
/// time at rest (`last`), with that last time.
fn suspect_keys<'a>(
    delta: &'a RecordBatch,
    last: &HashMap<(&str, &str), i64>,
) -> Result<HashMap<(&'a str, &'a str), i64>> {
    use dq_lake::duckdb::arrow::array::{Array, StringArray, TimestampMicrosecondArray};
    fn column<'b, T: 'static>(delta: &'b RecordBatch, name: &str) -> Result<&'b T> {
        delta
            .column_by_name(name)
            .and_then(|c| c.as_any().downcast_ref::<T>())
            .ok_or_else(|| Error::Arrow {
                table: "signals_latest",
                message: format!("the rollup delta has no column {name} of the expected type"),
            })
    }
    let subject = column::<StringArray>(delta, "subject")?;
    let name = column::<StringArray>(delta, "name")?;
    let first = column::<TimestampMicrosecondArray>(delta, "first_seen")?;
    Ok((0..delta.num_rows())
        .filter(|&i| !first.is_null(i))
        .map(|i| ((subject.value(i), name.value(i)), first.value(i)))
        .filter_map(|(key, first)| {
            let t = *last.get(&key)?;
            (first <= t).then_some((key, t))
        })
        .collect())
}

fn append(lake: &Lake, conn: &Connection, table: &str, batch: RecordBatch) -> Result<()> {
    let mut app = conn
        .appender_to_catalog_and_db(table, "temp", "main")
        .map_err(|e| lake.error("open staging appender", e))?;
    app.append_record_batch(batch)
        .map_err(|e| lake.error("append staging batch", e))?;
    app.flush()
        .map_err(|e| lake.error("flush staging batch", e))?;
    Ok(())
}

/// The first and last time of a set of rows.
type TimeRange = (DateTime<Utc>, DateTime<Utc>);

fn range<'a>(ts: impl Iterator<Item = &'a DateTime<Utc>>) -> Option<TimeRange> {
    ts.fold(None, |acc, t| match acc {
        None => Some((*t, *t)),
        Some((lo, hi)) => Some((lo.min(*t), hi.max(*t))),
    })
}

/// The distinct buckets `of` a window's rows, as a literal list (so DuckLake prunes files).
fn buckets(of: impl Iterator<Item = i32>) -> String {
    let set: BTreeSet<i32> = of.collect();
    set.iter()
        .map(i32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The idempotent insert of events (an anti-join on the write key): staged rows whose write key
/// is not already at rest, one per key. (Signals are deduplicated in Rust and anti-joined
/// against [`signals_at_rest`].)
fn events_anti_join(bucket_list: &str, (lo, hi): (DateTime<Utc>, DateTime<Utc>)) -> String {
    let partition = EVENT_WRITE_KEY
        .iter()
        .map(|c| format!("s.{c}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "SELECT s.* FROM temp.main.{STAGE_EVENTS} AS s \
         WHERE NOT EXISTS (SELECT 1 FROM lake.events AS t \
           WHERE t.subject_bucket IN ({bucket_list}) \
             AND t.\"timestamp\" >= '{}'::TIMESTAMPTZ AND t.\"timestamp\" <= '{}'::TIMESTAMPTZ \
             AND {}) \
         QUALIFY row_number() OVER (PARTITION BY {partition} ORDER BY s.subject) = 1",
        ts_literal(lo),
        ts_literal(hi),
        key_equal(&EVENT_WRITE_KEY, "t", "s"),
    )
}

/// Copies into [`AT_REST`] the signal rows at rest that share `(subject_bucket, name,
/// timestamp)` with a staged row, and counts them. That is a superset of the rows the window
/// must not write again (same write key W1) and of those its rows collide with on the read key
/// R1 (the bucket is a function of the subject): one scan of `lake.signals` answers both, and a
/// window of new data finds none.
fn signals_at_rest(
    lake: &Lake,
    tx: &Connection,
    bucket_list: &str,
    (lo, hi): (DateTime<Utc>, DateTime<Utc>),
) -> Result<u64> {
    let sql = format!(
        "CREATE OR REPLACE TEMP TABLE {AT_REST} AS \
         SELECT DISTINCT t.subject, t.subject_bucket, t.cloud_event_id, t.name, t.\"timestamp\" \
         FROM lake.signals t JOIN temp.main.{STAGE_SIGNALS} s \
           ON s.subject_bucket = t.subject_bucket AND s.name = t.name AND s.\"timestamp\" = t.\"timestamp\" \
         WHERE t.subject_bucket IN ({bucket_list}) \
           AND t.\"timestamp\" >= '{}'::TIMESTAMPTZ AND t.\"timestamp\" <= '{}'::TIMESTAMPTZ",
        ts_literal(lo),
        ts_literal(hi),
    );
    tx.execute_batch(&sql)
        .map_err(|e| lake.error("find signals at rest", e))?;
    let n = tx
        .query_row(&format!("SELECT count(*) FROM {AT_REST}"), [], |r| {
            r.get::<_, u64>(0)
        })
        .map_err(|e| lake.error("count signals at rest", e))?;
    Ok(n)
}

/// Subjects of the window's new signal rows that share a read key (R1) with a row at rest.
fn read_key_collisions(lake: &Lake, tx: &Connection) -> Result<BTreeSet<String>> {
    let sql = format!(
        "SELECT DISTINCT n.subject FROM {NEW_SIGNALS} n JOIN {AT_REST} t \
           ON t.subject_bucket = n.subject_bucket AND {}",
        key_equal(&SIGNAL_READ_KEY, "t", "n"),
    );
    let mut stmt = tx
        .prepare(&sql)
        .map_err(|e| lake.error("find read-key collisions", e))?;
    let rows = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .and_then(|rows| rows.collect::<std::result::Result<BTreeSet<_>, _>>())
        .map_err(|e| lake.error("find read-key collisions", e))?;
    Ok(rows)
}

/// Registers the own writer's files at `paths` with `lake.signals` in the open transaction
/// `tx`: DuckLake reads each file's footer for its statistics and takes its partition values
/// from its directories. The paths are the writer's own (the table's directory and generated
/// names), quoted: duckdb-rs binds no list parameter.
fn register(lake: &Lake, tx: &Connection, paths: &[String]) -> Result<()> {
    let t0 = std::time::Instant::now();
    let list: Vec<String> = paths.iter().map(|p| quote(p)).collect();
    tx.execute_batch(&format!(
        "CALL ducklake_add_data_files('lake', 'signals', [{}])",
        list.join(", ")
    ))
    .map_err(|e| lake.error("register the window's signal files", e))?;
    tracing::debug!(
        files = paths.len(),
        took_ms = t0.elapsed().as_millis() as u64,
        "signal files registered"
    );
    Ok(())
}

/// The progress-row CAS: true when it matched (one row updated).
pub(crate) fn swap_progress(lake: &Lake, tx: &Connection, cas: &ProgressCas) -> Result<bool> {
    let n = match cas.cursor {
        Some((from, to)) => tx.execute(
            &format!(
                "UPDATE lake.ingest_progress SET cursor = ?, {FENCE_COLUMN} = ?, {RESUME_COLUMN} = ? \
                 WHERE partition = ? AND cursor = ? AND {FENCE_COLUMN} IS NOT DISTINCT FROM ?"
            ),
            dq_lake::duckdb::params![
                to.to_string(),
                cas.fence,
                cas.resume.as_ref().map(Resume::encode),
                cas.partition,
                from.to_string(),
                cas.expected_fence
            ],
        ),
        None => tx.execute(
            &format!(
                "UPDATE lake.ingest_progress SET {FENCE_COLUMN} = ? \
                 WHERE partition = ? AND {FENCE_COLUMN} IS NOT DISTINCT FROM ?"
            ),
            dq_lake::duckdb::params![cas.fence, cas.partition, cas.expected_fence],
        ),
    }
    .map_err(|e| lake.error("compare-and-swap the progress row", e))?;
    Ok(n == 1)
}

/// Runs the plan's statements on `tx` (an open lake transaction) over its rows as [`stage`]
/// left them (`staged`); the caller commits. The progress-row CAS runs first: when it matches
/// nothing, nothing else is written. With `added` (the staged signal rows as files already
/// written) and nothing at rest to skip, the files are registered instead of INSERTing.
pub fn apply(
    lake: &Lake,
    tx: &Connection,
    plan: &WindowPlan,
    staged: &Staged,
    added: Option<&Added>,
) -> Result<Applied> {
    let mut applied = Applied {
        progress_matched: true,
        ..Applied::default()
    };
    if let Some(cas) = &plan.progress {
        applied.progress_matched = swap_progress(lake, tx, cas)?;
        if !applied.progress_matched {
            return Ok(applied);
        }
    }
    let exec = |ctx: &str, sql: &str| -> Result<u64> {
        let t0 = std::time::Instant::now();
        let n = tx
            .execute(sql, [])
            .map(|n| n as u64)
            .map_err(|e| lake.error(ctx, e))?;
        tracing::debug!(rows = n, took_ms = t0.elapsed().as_millis() as u64, "{ctx}");
        Ok(n)
    };
    let mut subjects: BTreeSet<String> = BTreeSet::new();
    if !plan.voided.is_empty() {
        let list = buckets(
            plan.voided
                .iter()
                .map(|(s, _)| dq_cloudevent::subject_bucket(s)),
        );
        let pairs = plan
            .voided
            .iter()
            .map(|(s, id)| {
                format!(
                    "(subject = {} AND cloud_event_id = {})",
                    quote(s),
                    quote(id)
                )
            })
            .collect::<Vec<_>>()
            .join(" OR ");
        for table in ["signals", "events"] {
            applied.deleted_rows += exec(
                "delete rows of voided events",
                &format!("DELETE FROM lake.{table} WHERE subject_bucket IN ({list}) AND ({pairs})"),
            )?;
        }
        subjects.extend(plan.voided.iter().map(|(s, _)| s.clone()));
    }
    // Subjects whose rollup rows must be recomputed from history: the voided ones (rows were
    // deleted) and those with a new row colliding on the read key with a row at rest. Everything
    // else is folded in incrementally (`rollup::merge_new_signals`).
    let mut recompute_signals = subjects.clone();
    let mut new_signals = None;
    if let Some(r) = range(plan.signals.iter().map(|r| &r.timestamp)) {
        let at_rest = if staged.files {
            match stage_suspects(lake, tx, &plan.signals, staged)? {
                Some((list, range)) => signals_at_rest(lake, tx, &list, range)?,
                None => 0,
            }
        } else {
            let list = buckets(plan.signals.iter().map(|r| r.subject_bucket));
            signals_at_rest(lake, tx, &list, r)?
        };
        if at_rest > 0 && staged.files {
            // A replay: the anti-joined INSERT needs every row staged.
            applied.restage = true;
            return Ok(applied);
        }
        // The stage holds one row per write key already (deduplicated in Rust); with nothing at
        // rest to skip or collide with it is inserted as it is, without a copy, or registered
        // as the own writer's files of the same rows.
        let rows = if at_rest == 0 {
            format!("temp.main.{STAGE_SIGNALS}")
        } else {
            exec(
                "select new signals",
                &format!(
                    "CREATE OR REPLACE TEMP TABLE {NEW_SIGNALS} AS \
                     SELECT s.* FROM temp.main.{STAGE_SIGNALS} AS s \
                     WHERE NOT EXISTS (SELECT 1 FROM {AT_REST} AS t WHERE {})",
                    key_equal(&SIGNAL_WRITE_KEY, "t", "s")
                ),
            )?;
            recompute_signals.extend(read_key_collisions(lake, tx)?);
            NEW_SIGNALS.to_owned()
        };
        applied.signal_rows = match (added.filter(|_| at_rest == 0), staged.files) {
            (Some(files), _) => {
                register(lake, tx, &files.paths)?;
                applied.registered = true;
                files.rows
            }
            (None, true) => {
                return Err(Error::Config(
                    "a window staged for the own writer's files has none to register".into(),
                ))
            }
            (None, false) => exec(
                "insert signals",
                &format!("INSERT INTO lake.signals SELECT * FROM {rows}"),
            )?,
        };
        new_signals = Some(rows).filter(|_| applied.signal_rows > 0);
    }
    if let Some(r) = range(plan.events.iter().map(|r| &r.timestamp)) {
        let list = buckets(plan.events.iter().map(|r| r.subject_bucket));
        applied.event_rows = exec(
            "insert events",
            &format!("INSERT INTO lake.events {}", events_anti_join(&list, r)),
        )?;
        subjects.extend(plan.events.iter().map(|r| r.subject.clone()));
    }
    let t0 = std::time::Instant::now();
    rollup::refresh_signals(lake, tx, &recompute_signals)?;
    match (&new_signals, staged.files) {
        (Some(_), true) => rollup::merge_delta(
            lake,
            tx,
            &format!("temp.main.{STAGE_DELTA}"),
            &recompute_signals,
        )?,
        (Some(rows), false) => rollup::merge_new_signals(
            lake,
            tx,
            rows,
            &recompute_signals,
            &staged.read_key_collisions,
        )?,
        (None, _) => {}
    }
    rollup::refresh_events(lake, tx, &subjects)?;
    applied.rollup_us = crate::summary::micros_since(t0);
    tracing::debug!(
        recomputed = recompute_signals.len(),
        took_ms = t0.elapsed().as_millis() as u64,
        "rollups updated"
    );
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_key_matches_columns() {
        // The Rust key lists the SQL key's columns in order.
        assert_eq!(
            SIGNAL_WRITE_KEY,
            ["subject_bucket", "cloud_event_id", "name", "\"timestamp\""]
        );
        let row = SignalRow {
            subject: "s".into(),
            subject_bucket: 7,
            name: "speed".into(),
            timestamp: chrono::DateTime::from_timestamp_micros(42).unwrap(),
            source: "".into(),
            producer: "".into(),
            cloud_event_id: "e".into(),
            value_number: 1.0,
            value_string: String::new(),
            loc_lat: 0.0,
            loc_lon: 0.0,
            loc_hdop: 0.0,
            loc_heading: 0.0,
        };
        assert_eq!(signal_write_key(&row), ((7, "e"), ("speed", 42)));
    }

    fn row(event: &str, producer: &str, name: &str, micros: i64, value: f64) -> SignalRow {
        SignalRow {
            subject: "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:7".into(),
            subject_bucket: 7,
            name: name.to_owned().into(),
            timestamp: chrono::DateTime::from_timestamp_micros(micros).unwrap(),
            source: "0x1234567890123456789012345678901234567890".into(),
            producer: producer.into(),
            cloud_event_id: event.into(),
            value_number: value,
            value_string: String::new(),
            loc_lat: 0.0,
            loc_lon: 0.0,
            loc_hdop: 0.0,
            loc_heading: 0.0,
        }
    }

    /// Every kept row of `rows` staged: the dedup, the heads and the values.
    struct Stage {
        dedup: SignalDedup,
        heads: RecordBatch,
        values: RecordBatch,
    }

    fn signal_stage(rows: &[SignalRow]) -> Stage {
        let dedup = signal_dedup(rows, true);
        let (heads, values) = stage_batches(rows, &dedup.kept).unwrap();
        Stage {
            dedup,
            heads,
            values,
        }
    }

    /// The staged rows, joined back as the view does: (event, producer, name, micros, value).
    fn joined(stage: &Stage) -> Vec<(String, String, String, i64, f64)> {
        use dq_lake::duckdb::arrow::array::{AsArray, Float64Array};
        use dq_lake::duckdb::arrow::datatypes::{TimestampMicrosecondType, UInt32Type};
        let col = |b: &RecordBatch, n: &str| b.column_by_name(n).unwrap().clone();
        let (heads, values) = (&stage.heads, &stage.values);
        let head_of = col(heads, HEAD_ID);
        let head_of = head_of.as_primitive::<UInt32Type>();
        let (ceid, producer) = (col(heads, "cloud_event_id"), col(heads, "producer"));
        let (ceid, producer) = (ceid.as_string::<i32>(), producer.as_string::<i32>());
        let head = col(values, HEAD_ID);
        let (name, ts, num) = (
            col(values, "name"),
            col(values, "timestamp"),
            col(values, "value_number"),
        );
        let num = num.as_any().downcast_ref::<Float64Array>().unwrap();
        (0..values.num_rows())
            .map(|i| {
                let h = head.as_primitive::<UInt32Type>().value(i);
                let at = head_of.values().iter().position(|x| *x == h).unwrap();
                (
                    ceid.value(at).to_owned(),
                    producer.value(at).to_owned(),
                    name.as_string::<i32>().value(i).to_owned(),
                    ts.as_primitive::<TimestampMicrosecondType>().value(i),
                    num.value(i),
                )
            })
            .collect()
    }

    #[test]
    fn staging_keeps_the_first_row_of_each_write_key() {
        let rows = vec![
            row("a", "p", "speed", 1, 1.0),
            row("a", "p", "speed", 1, 2.0), // same key, same run
            row("a", "p", "rpm", 1, 3.0),
            row("b", "p", "speed", 1, 4.0),
            row("a", "p", "speed", 1, 5.0), // same key, a later run of the same event
            row("a", "p", "speed", 2, 6.0),
            row("a", "q", "rpm", 1, 7.0), // same write key, other producer: still a repeat
            row("a", "q", "fuel", 1, 8.0),
        ];
        let stage = signal_stage(&rows);
        let got: Vec<_> = joined(&stage)
            .into_iter()
            .map(|(e, p, n, t, v)| format!("{e} {p} {n} {t} {v}"))
            .collect();
        assert_eq!(
            got,
            [
                "a p speed 1 1",
                "a p rpm 1 3",
                "b p speed 1 4",
                "a p speed 2 6",
                "a q fuel 1 8"
            ]
        );
        // One head per run of rows sharing the event's columns, never per row.
        assert_eq!(stage.heads.num_rows(), 4);
        let (head_cols, value_cols) = stage_columns();
        assert_eq!(
            head_cols.len() + value_cols.len(),
            SIGNAL_COLUMNS.len(),
            "every column staged once"
        );
        assert_eq!(stage.values.num_columns(), value_cols.len() + 1);
        // Events a and b both have a speed at 1 (one subject): a read-key collision.
        assert_eq!(
            stage.dedup.read_key_collisions,
            BTreeSet::from([rows[0].subject.to_string()])
        );
    }

    proptest::proptest! {
        /// The run-wise write-key dedup keeps what one set of whole write keys keeps (first
        /// wins): events repeated in later runs, runs longer than [`SHORT_RUN`], rows of one key
        /// inside a run.
        #[test]
        fn write_key_dedup_keeps_the_first_of_each_write_key(
            runs in proptest::collection::vec(
                (0..4u8, 0..2i32, 0..2u8, proptest::collection::vec((0..3u8, 0..4i64), 0..70)),
                0..12,
            )
        ) {
            let mut rows = Vec::new();
            for (event, bucket, subject, keys) in &runs {
                for (name, micros) in keys {
                    rows.push(SignalRow {
                        subject: format!("s{subject}").into(),
                        subject_bucket: *bucket,
                        ..row(&format!("e{event}"), "p", &format!("n{name}"), *micros, 1.0)
                    });
                }
            }
            let mut seen = std::collections::HashSet::new();
            let expected: Vec<u32> = (0..rows.len() as u32)
                .filter(|&i| {
                    let r = &rows[i as usize];
                    seen.insert((r.subject_bucket, r.cloud_event_id.to_string(), r.name.to_string(),
                        r.timestamp))
                })
                .collect();
            proptest::prop_assert_eq!(signal_dedup(&rows, false).kept, expected);
        }
    }

    #[test]
    fn staging_names_the_subjects_with_two_rows_of_one_read_key() {
        let of = |subject: &str, event: &str, name: &str, micros: i64| SignalRow {
            subject: subject.into(),
            ..row(event, "p", name, micros, 1.0)
        };
        let rows = vec![
            // x: two events with a speed at 1.
            of("x", "a", "speed", 1),
            of("x", "b", "speed", 1),
            // y: a write-key repeat and another name at the same time are not collisions.
            of("y", "c", "speed", 1),
            of("y", "c", "speed", 1),
            of("y", "d", "rpm", 1),
            // z: rows of one read key in two runs of the subject, apart.
            of("z", "e", "speed", 2),
            of("y", "f", "fuel", 2),
            of("z", "g", "speed", 2),
        ];
        let stage = signal_stage(&rows);
        assert_eq!(
            stage.dedup.read_key_collisions,
            BTreeSet::from(["x".to_owned(), "z".to_owned()])
        );
        // Without read keys (the own writer's path) the same rows are kept and none is named.
        let files = signal_dedup(&rows, false);
        assert_eq!(files.kept, stage.dedup.kept);
        assert!(files.read_key_collisions.is_empty());
    }
}
