//! Reading a window: the change feed's rows after a keyset position, their payloads made whole,
//! tombstones applied, decoded ([`WindowReader`]); and the read-ahead ([`ReadAhead`]), which
//! reads, decodes and prepares (`write::prepare`) the next window on a thread of its own while
//! the current one is written. Those are most of a drain's work, and while a window is written
//! a core is idle much of the time (its registration calls and COMMIT wait on the catalog), so
//! the two overlap.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Utc};
use dq_blob::BlobStore;
use dq_cloudevent::{types, RawEvent};
use dq_decode::decode_batch;
use dq_lake::duckdb::Connection;
use dq_lake::{db_error, quote, Conn, Redactor};
use dq_lease::Clock;
use tracing::{debug, warn};

use crate::config::Config;
use crate::feed::{self, FeedRow, Keyset, Source};
use crate::resolve::{self, Voided};
use crate::summary::{micros_since, Counts};
use crate::write::{self, WindowPlan};
use crate::Result;

/// "Now" for decode skew, lag, retention and progress throttling, from the one [`Clock`] the
/// lease uses too (millisecond precision is plenty for all four).
pub(crate) fn now(clock: &dyn Clock) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(clock.now_millis()).unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// One window read and decoded.
pub(crate) struct Window {
    pub(crate) plan: WindowPlan,
    pub(crate) exhausted: bool,
    /// Raw rows the window read, of every shard.
    pub(crate) scanned: u64,
}

/// What reading and decoding a window takes, owned, so that a window can be read on a thread
/// of its own.
#[derive(Clone)]
pub(crate) struct WindowReader {
    pub(crate) redactor: Redactor,
    pub(crate) blobs: Option<Arc<BlobStore>>,
    pub(crate) config: Config,
    pub(crate) chunk_rows: usize,
    pub(crate) clock: Arc<dyn Clock>,
}

impl WindowReader {
    /// Reads, resolves and decodes one window after `after`.
    pub(crate) async fn read(
        &self,
        conn: &Connection,
        source: Source,
        after: &mut Option<Keyset>,
        counts: &mut Counts,
        oldest_event: &mut Option<DateTime<Utc>>,
    ) -> Result<Window> {
        let mut events: Vec<RawEvent> = Vec::new();
        let mut plan = WindowPlan::default();
        let (mut raw, mut bytes, mut exhausted) = (0usize, 0usize, false);
        let mut owned = 0usize;
        loop {
            let limit = (self.config.window_rows - raw).max(1);
            let budget = self.config.window_bytes.saturating_sub(bytes).max(1);
            let t0 = Instant::now();
            let feed::Chunk {
                rows,
                budget_reached,
            } = feed::read_chunk(&self.redactor, conn, source, after.as_ref(), limit, budget)?;
            counts.phases.feed_read_us += micros_since(t0);
            counts.feed_reads += 1;
            debug!(
                rows = rows.len(),
                took_ms = t0.elapsed().as_millis() as u64,
                "feed read"
            );
            // Fewer rows than asked and under the byte budget: nothing more in the span.
            let more = rows.len() == limit || budget_reached;
            let mut rows = rows.into_iter().peekable();
            let mut over_budget = false;
            // Payloads are resolved (blobs fetched) a chunk at a time so a window of blob rows
            // stops at the byte budget; rows read past it are dropped and re-read next window.
            while rows.peek().is_some() {
                let chunk: Vec<FeedRow> = rows.by_ref().take(self.chunk_rows).collect();
                // The keyset position comes from the raw scan, before any poison drop.
                if let Some(last) = chunk.last() {
                    *after = Some(last.key());
                }
                for r in &chunk {
                    let t = r.row.time;
                    *oldest_event = Some(oldest_event.map_or(t, |o| o.min(t)));
                }
                raw += chunk.len();
                // Other shards' rows are dropped before their blobs are fetched.
                let shard = self.config.shard;
                let mut own = Vec::with_capacity(chunk.len());
                for r in chunk.into_iter().filter(|r| shard.owns(&r.row.subject)) {
                    owned += 1;
                    // A row lacking its subject, time or id is poison: counted, never decoded.
                    match r.missing {
                        Some(reason) => {
                            warn!(rowid = r.rowid, reason, "raw row lacks a header key");
                            *counts.poison.entry(reason.to_owned()).or_default() += 1;
                        }
                        None => own.push(r.row),
                    }
                }
                let t0 = Instant::now();
                let resolved =
                    resolve::resolve(own, self.blobs.as_ref(), self.config.blob_access_attempts)
                        .await?;
                counts.phases.resolve_us += micros_since(t0);
                bytes += resolved.bytes;
                events.extend(resolved.events);
                plan.voided.extend(resolved.voided);
                for (k, v) in resolved.poison {
                    *counts.poison.entry(k).or_default() += v;
                }
                if bytes >= self.config.window_bytes {
                    over_budget = rows.peek().is_some();
                    break;
                }
            }
            if !more && !over_budget {
                exhausted = true;
                break;
            }
            if raw >= self.config.window_rows || bytes >= self.config.window_bytes {
                break;
            }
        }
        counts.raw_rows += owned as u64;
        // Tombstones: of this window, and any already in the lake for these events (issue 4).
        let mut voided: BTreeSet<Voided> = plan.voided.clone();
        let t0 = Instant::now();
        voided.extend(self.tombstones(conn, &events)?);
        counts.phases.tombstones_us += micros_since(t0);
        let before = events.len();
        events.retain(|e| !voided.contains(&(e.header.subject.clone(), e.header.id.clone())));
        counts.voided += (before - events.len()) as u64;
        let t0 = Instant::now();
        let out = decode_batch(&events, &self.config.gate, now(self.clock.as_ref()));
        counts.phases.decode_us += micros_since(t0);
        debug!(
            raw,
            payload_bytes = bytes,
            events = events.len(),
            signal_rows = out.signal_rows.len(),
            took_ms = t0.elapsed().as_millis() as u64,
            "window decoded"
        );
        counts.duplicates += out.duplicates as u64;
        counts.skipped += (out.skipped + out.gated) as u64;
        counts.decode_failures += out.failures.len() as u64;
        for f in &out.failures {
            let reason = f.errors.first().map_or("unknown", |e| e.reason());
            warn!(cloud_event_id = %f.cloud_event_id, source = %f.source, reason, "decode failure");
            *counts.poison.entry(reason.to_owned()).or_default() += 1;
        }
        counts.decoded_signal_rows += out.signal_rows.len() as u64;
        counts.decoded_event_rows += out.event_rows.len() as u64;
        plan.signals = out.signal_rows;
        plan.events = out.event_rows;
        Ok(Window {
            plan,
            exhausted,
            scanned: raw as u64,
        })
    }

    /// Tombstones at rest voiding any of `events` (a tombstone may precede a redelivery).
    fn tombstones(&self, conn: &Connection, events: &[RawEvent]) -> Result<Vec<Voided>> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let subjects: BTreeSet<&str> = events.iter().map(|e| e.header.subject.as_str()).collect();
        let list = subjects
            .iter()
            .map(|s| quote(s))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "SELECT subject, voids_id FROM lake.raw_events WHERE type = '{}' \
             AND voids_id IS NOT NULL AND subject IN ({list})",
            types::TOMBSTONE
        );
        let mut stmt = conn
            .prepare(&sql)
            .map_err(|e| db_error(&self.redactor, "read tombstones", e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|e| db_error(&self.redactor, "read tombstones", e))?;
        Ok(rows)
    }
}

/// A window being read and decoded on a thread of its own, for the read of exactly `source`
/// after `after`.
pub(crate) struct ReadAhead {
    source: Source,
    after: Option<Keyset>,
    done: tokio::sync::oneshot::Receiver<Result<ReadOut>>,
}

/// A read-ahead's window and what reading it changed: the position after it, its counts, its
/// oldest event.
pub(crate) struct ReadOut {
    pub(crate) window: Window,
    pub(crate) after: Option<Keyset>,
    pub(crate) counts: Counts,
    pub(crate) oldest_event: Option<DateTime<Utc>>,
}

impl ReadOut {
    /// Its window, its position, counts and oldest event added to the reader's.
    pub(crate) fn into_window(
        self,
        after: &mut Option<Keyset>,
        counts: &mut Counts,
        oldest_event: &mut Option<DateTime<Utc>>,
    ) -> Window {
        *after = self.after;
        counts.add(&self.counts);
        counts.read_ahead += 1;
        if let Some(t) = self.oldest_event {
            *oldest_event = Some(oldest_event.map_or(t, |o| o.min(t)));
        }
        self.window
    }
}

impl ReadAhead {
    /// Starts reading the window of `source` after `after` on a new thread, over `conn` (a
    /// connection of its own; payloads from blobs are fetched on the caller's runtime), and
    /// preparing its signal rows for writing as the own writer's files (`prepare` true) or not
    /// (false; None: the writer is not known, it prepares them). `None` outside a runtime or
    /// when no thread could be started: the window is then read in turn.
    pub(crate) fn start(
        reader: WindowReader,
        conn: Conn,
        source: Source,
        after: Option<Keyset>,
        prepare: Option<bool>,
    ) -> Option<ReadAhead> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let (tx, done) = tokio::sync::oneshot::channel();
        let from = after.clone();
        std::thread::Builder::new()
            .name("dq-read-ahead".into())
            .spawn(move || {
                let mut after = from;
                let mut counts = Counts::default();
                let mut oldest_event = None;
                let read = runtime
                    .block_on(reader.read(
                        &conn,
                        source,
                        &mut after,
                        &mut counts,
                        &mut oldest_event,
                    ))
                    .and_then(|mut window| {
                        if let Some(files) = prepare {
                            let t0 = Instant::now();
                            window.plan.prepared =
                                Some(write::prepare(&window.plan.signals, files)?);
                            counts.phases.prepare_us += micros_since(t0);
                            debug!(took_ms = t0.elapsed().as_millis() as u64, "window prepared");
                        }
                        Ok(window)
                    });
                // Nobody waits when the span ended without it (a lost race, the deadline).
                let _ = tx.send(read.map(|window| ReadOut {
                    window,
                    after,
                    counts,
                    oldest_event,
                }));
            })
            .inspect_err(|e| warn!(error = %e, "no thread for the read-ahead; reading in turn"))
            .ok()?;
        Some(ReadAhead {
            source,
            after,
            done,
        })
    }

    /// Whether it reads the window of `source` after `after`.
    pub(crate) fn reads(&self, source: Source, after: Option<&Keyset>) -> bool {
        self.source == source && self.after.as_ref() == after
    }

    /// Whether it reads its source's first window (no position to start after).
    pub(crate) fn starts_span(&self) -> bool {
        self.after.is_none()
    }

    /// The source it reads (a span's change feed, or a time range).
    pub(crate) fn source(&self) -> Source {
        self.source
    }

    /// Waits for its window; `None` if its thread ended without one (then read it in turn).
    pub(crate) async fn finish(self) -> Option<Result<ReadOut>> {
        self.done.await.ok()
    }
}
