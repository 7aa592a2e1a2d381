//! Decoding of connected-vehicle payloads into DIMO signals and events, bit-exact with
//! model-garage v1.0.11, plus dq's post-processing of the result.
//!
//! Input is a [`dq_cloudevent::RawEvent`]; output is [`Signal`]s and [`Event`]s, or flat
//! [`rows::SignalRow`]/[`rows::EventRow`]s ready for `lake.signals`/`lake.events`. Problems are
//! data ([`DecodeError`] with a stable `reason()`), never panics. This crate does no I/O and
//! knows nothing about DuckDB or blob storage: callers fetch payloads and write rows.
//!
//! # Layout
//! - [`modules`] — the registry and one module per vendor (default, AutoPi/HashDog V2, Ruptela,
//!   Tesla API and telemetry).
//! - [`post`] — vehicle gate, future/duplicate pruning, coordinate merge, finite filter.
//! - [`pipeline`] — one event or a batch end to end, the way the materializer runs it.
//! - [`rows`] — flattening into decoded-table rows.
//! - [`model`] / [`error`] — the output types.
//!
//! # Deliberate deviations from the Go reference
//! - HashDog `charging`/`oil`/`oilLife` return per-signal [`DecodeError::NotImplemented`]
//!   instead of panicking away the whole event.
//! - The coordinate merge follows din's D6 fix: no (0,0) location from HDOP alone.
//! - Invalid JSON at gjson call sites decodes to nothing (as gjson does) but is also reported
//!   as [`DecodeError::InvalidJson`], so poison payloads are countable.
#![warn(missing_docs)]

pub mod error;
pub mod model;
pub mod modules;
pub mod pipeline;
pub mod post;
pub mod rows;
mod util;

pub use error::DecodeError;
pub use model::{Decoded, Event, Location, Signal, SignalValue};
pub use modules::{EventModule, SignalModule};
pub use pipeline::{
    decode_batch, decode_batch_on, decode_event, BatchOutcome, EventOutcome, Route,
};
pub use post::VehicleGate;
