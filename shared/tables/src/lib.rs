//! dq's decoded tables as both sides see them: the columns and layout of `lake.signals`,
//! `lake.events` and their rollups, their one-time setup, the dedup and write keys, and the
//! rollup definitions. The materializer writes with these and the read side reads with them, so
//! neither can drift from the other, and the read crates need not link the write path.
//!
//! Not here: writing windows, moving the cursor or refreshing rollups (`dq-materialize`),
//! reading for clients (`dq-query`).
//!
//! # Layout
//! - [`schema`]: columns, partitioning and sort order, creation and the cursor row.
//! - [`keys`]: the dedup and write keys, defined once.
//! - [`latest`]: the `signals_latest` / `events_latest` recompute queries.
#![warn(missing_docs)]

pub mod keys;
pub mod latest;
pub mod schema;
