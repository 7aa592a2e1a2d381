//! Vehicle usage segments: the six detectors, the `segments` request pipeline (clamp,
//! validation, detection, strict `after` cursor, `limit`) and the pure part of `dailyActivity`
//! (IANA time zone, DST-safe calendar days, per-day overlap).
//!
//! Detectors are pure algorithms over the narrow reads of a [`SignalSource`]; the DuckDB
//! implementation of that trait is `query::activity::LakeSource` (crate dq-query); it runs
//! the SQL documented on each trait method (the ignition transitions: one read of the
//! readings, then [`reference::ignition_state_changes`] over them).
//! [`reference`](mod@reference) holds executable definitions of those reads and [`memory`] an
//! in-memory source built on them, usable as a conformance oracle for the SQL implementation.
//!
//! This crate owns no SQL, no GraphQL types and no I/O. It does not compute segment or day
//! summaries (signal aggregations, event counts, start/end locations and their gap-fill): those
//! need SQL. It returns what the caller needs to request them ([`SegmentList::summary_ranges`],
//! [`DayWindow`]s, the default signal sets in [`signals`]) and applies the
//! post-summary IDLING speed filter ([`SegmentList::finish`]).
//!
//! Time is always passed in (`now`), never read from the clock, so every rule that depends on
//! "now" (the `to` clamp, ongoing segments, the future-day check) is deterministic in tests.
//!
//! # Layout
//! - [`model`] — plain data: [`Mechanism`], [`Segment`], [`TimeRange`], source rows.
//! - [`config`] — [`SegmentConfig`], SDL default injection ([`SegmentConfigInput`]), range checks.
//! - [`source`] — the [`SignalSource`] trait (reads + their SQL contract).
//! - [`reference`](mod@reference) / [`memory`] — reference semantics of the reads and an in-memory source.
//! - [`detect`] — one module per mechanism, and [`detect::detect`] dispatching on [`Mechanism`].
//! - [`pipeline`] — the `segments` request pipeline ([`segments`], [`SegmentsRequest`]).
//! - [`daily`] — `dailyActivity` planning and day bucketing.
//! - [`signals`] — default summary signal sets and request merging.
//! - [`error`] — [`Error`] and [`ValidationError`] (the exact BAD_REQUEST messages).
//! - `testing` (feature) — the detectors' worked examples, for this crate's tests and dq-query's.
#![warn(missing_docs)]

pub mod config;
pub mod daily;
pub mod detect;
pub mod error;
pub mod memory;
pub mod model;
pub mod pipeline;
pub mod reference;
pub mod signals;
pub mod source;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

mod ranges;
mod time;

pub use config::{InputValue, SegmentConfig, SegmentConfigInput};
pub use daily::{
    daily_activity, plan_daily_activity, DailyActivityRequest, DailyPlan, DayActivity, DayWindow,
};
pub use error::{Error, Result, ValidationError};
pub use model::{ActiveWindow, LevelSample, Mechanism, Segment, StateChange, TimeRange, Ts};
pub use pipeline::{segments, validate_segments_request, SegmentList, SegmentsRequest};
pub use source::{SignalSource, WindowSpec};
