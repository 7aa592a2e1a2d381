//! The materializer protocol: turns din's `lake.raw_events` change feed into the decoded tables
//! `lake.signals` / `lake.events` and their rollups, exactly once, under a single-writer lease
//! (the Go system's protocol; issue 4 where it differs).
//!
//! A *span* is the inserts of raw_events snapshots `(cursor, to]`, `to` bounded by
//! `MATERIALIZER_MAX_SNAPSHOT_SPAN` (stretched while small snapshots fit one window). It is read
//! in keyset-ordered windows bounded by rows and payload bytes, the next one read ahead while
//! the current one is written; every window is decoded and written in its own transaction with idempotent
//! inserts, and only the final window moves the cursor, with a CAS, in the same transaction as
//! its rows. So the cursor has moved ⇔ every window of the span is durable, and a crash or a
//! lost race replays a span harmlessly. Every window that writes also compare-and-swaps the
//! cursor row's fence (the writer's lease token), so of two writers racing over the same
//! snapshots (a second stack, a local run, a takeover after lease expiry) DuckLake aborts one at
//! commit instead of letting both append the same rows.
//!
//! Not here: decoding payloads (`decode`), fetching blobs (`blob`), the lease's storage
//! (`lease`), the Lambda adapter (`functions/materializer`), serving reads (`dq-query`), the
//! tables' columns, layout, dedup keys and rollup definitions (`dq-tables`, shared with the read side).
//!
//! # Layout
//! - [`config`]: environment keys and [`Config`].
//! - [`feed`]: change-feed and time-range reads with a total keyset.
//! - [`resolve`]: extras, blobs (poison vs transient), base64 payloads, tombstones.
//! - [`write`]: Arrow staging and the window transaction.
//! - [`own_writer`]: the own writer, a window's new signal rows as Parquet files.
//! - [`rollup`]: the rollup definitions, per-subject refresh, full rebuild, diff.
//! - [`shard`]: [`Shard`], the buckets one of several materializers decodes, and its names.
//! - `pass.rs`: [`Materializer`]: spans, drains, backfill, prune, audit.
//! - `read.rs`: reading and decoding a window, and reading the next one ahead.
//! - [`invoke`]: request parsing and dispatch for the Lambda and the local binary.
//! - [`metrics`]: CloudWatch EMF lines.
//! - [`summary`]: the `Serialize` reports.
//! - `error.rs`: [`Error`], [`Result`].
//! - `testing` (feature): oracles for tests — the expected decoded rows of a lake, and readers.
#![warn(missing_docs)]

pub mod config;
mod error;
pub mod feed;
pub mod invoke;
pub mod metrics;
pub mod own_writer;
mod pass;
mod read;
pub mod resolve;
pub mod rollup;
pub mod shard;
pub mod summary;
// Test oracles: a lake that cannot be read, or a drain that never catches up, fails the test.
#[cfg(feature = "testing")]
#[allow(clippy::unwrap_used, clippy::panic)]
pub mod testing;
pub mod write;

pub use config::Config;
pub use error::{Error, Result};
pub use pass::{LeaseSession, Materializer, MaterializerBuilder};
pub use shard::Shard;
pub use summary::{
    AuditReport, BackfillSummary, Counts, LeaseInfo, Outcome, Phases, PruneSummary, RunSummary,
    SpanSummary,
};
