//! The telemetry GraphQL API in dq's dialect (dq-query.md §1, §5, §6): the async-graphql schema
//! generated from the signal catalog, its resolvers over the shared `query` operations, the
//! auth directives and privilege filtering (rules from the `auth` crate), and the axum router
//! that the `graphql` function serves in Lambda and locally.
//!
//! Shaped for the other dialects (dialects.md §6): shared types are registered by
//! [`schema::register_shared`], root resolvers are thin adapters over `query::Engine`, and
//! error texts come from `auth::Surface`.
//!
//! # Layout
//! - [`schema`]: the executable schema (and the committed SDL, [`SDL`]).
//! - [`resolvers`]: root and signal-field resolvers.
//! - [`cloud_events`]: the raw cloud-event queries (over the `fetch` crate) and identity-api.
//! - [`http`]: the router, limits, readiness.
//! - [`scalars`], [`errors`]: wire formats and error shapes.
#![warn(missing_docs)]

pub mod cloud_events;
pub mod errors;
pub mod http;
pub mod resolvers;
pub mod scalars;
pub mod schema;

pub use http::{router, AppState, Limits};

/// The committed SDL of the dq dialect (`schema/dq.graphql`); a test asserts the served schema
/// equals it.
pub const SDL: &str = include_str!("../schema/dq.graphql");
