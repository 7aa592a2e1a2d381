//! Cloud events read straight from din's `lake.raw_events` (dq-query.md §4, §5.5), and
//! `grpc.FetchService` serving them over gRPC and gRPC-web.
//!
//! This crate owns the cloud-event read semantics that FetchService and the GraphQL
//! cloud-event resolvers share: the search filter, voiding by tombstones, the dedup key and
//! order, the 400-day floor, type summaries, and payload resolution (batched by-id re-reads,
//! blob fetch with DBE1 opening, the per-call budget). It also owns the FetchService
//! implementation (per-RPC authorization through the `auth` crate, status mapping, limits)
//! and the one router both transports use.
//!
//! Not here: token and subject rules (`auth`), the lake attach (`lake`), the blob store
//! (`blob`), the wire types (`proto`), and the process entry point (`functions/fetch`).
//!
//! # Using it from another surface (GraphQL)
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
//! - [`convert`]: protobuf ↔ native.
//! - [`service`]: [`FetchApi`], the tonic service.
//! - [`server`]: the router, the local listener, assembly from the environment.
//! - [`lambda`]: the API Gateway adapter (verified IAM caller).
//! - [`observe`]: the per-call span, call metrics (`QUERY_EMF`) and X-Ray subsegments.
//! - [`error`]: the error type, [`FetchError`].
#![warn(missing_docs)]
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

pub mod convert;
pub mod db;
pub mod error;
pub mod filter;
pub mod lambda;
pub mod observe;
pub mod payload;
pub mod search;
pub mod server;
pub mod service;

pub use db::Db;
pub use error::{FetchError, Result};
pub use filter::{Filter, Order, StringFilter, TagFilter, Voiding};
pub use payload::Payloads;
pub use search::{Event, Index, Reader, TypeSummary};
pub use service::{FetchApi, IamCaller};
