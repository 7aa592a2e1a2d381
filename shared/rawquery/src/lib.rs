//! Cloud events read straight from din's `lake.raw_events`: the read engine that FetchService
//! (`dq-fetch`) and the GraphQL cloud-event fields (`dq-graphql`) share, with no transport in it.
//!
//! It owns the cloud-event read semantics: the search filter, voiding by tombstones, the dedup
//! key and order, the 400-day floor, type summaries, and payload resolution (batched by-id
//! re-reads, blob fetch with DBE1 opening, the per-call budget).
//!
//! Not here: gRPC and its status mapping (`dq-fetch`), token and subject rules (`dq-auth`), the
//! lake attach (`dq-lake`), the blob store (`dq-blob`).
//!
//! # Using it
//! Build a [`Filter`], run [`Reader::search`] / [`Reader::latest`] /
//! [`Reader::type_summaries`] on a pooled connection ([`Db::read`]), then
//! [`Payloads::presign_key`] decides whether an index is presigned, and
//! [`Payloads::resolve`] returns events with payloads, in input order. A surface with its own
//! tombstone rule sets [`Filter::voiding`] and resolves with [`Payloads::resolve_with`] and the
//! same [`Voiding`], so every listed row can be resolved.
//!
//! # Layout
//! - [`filter`]: [`Filter`] and the limits.
//! - [`search`]: the SQL over `raw_events` ([`Reader`], [`Index`], [`Event`], [`TypeSummary`]).
//! - [`payload`]: [`Payloads`]: by-id resolution, blobs, budget.
//! - [`db`]: [`Db`], connections used from async code.
//! - [`error`]: the error type, [`FetchError`].
#![warn(missing_docs)]

pub mod db;
pub mod error;
pub mod filter;
pub mod payload;
pub mod search;

pub use db::Db;
pub use error::{FetchError, Result};
pub use filter::{Filter, Order, StringFilter, TagFilter, Voiding};
pub use payload::Payloads;
pub use search::{DirectFiles, Event, Index, Reader, StoredRow, TypeSummary};
