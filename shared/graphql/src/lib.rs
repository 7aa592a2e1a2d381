//! The telemetry GraphQL API (dq-query.md §1, §5, §6) in three dialects — dq's, telemetry-api's
//! and fetch-api's (dialects.md) — from one engine: the async-graphql schemas generated from
//! the signal catalog, their resolvers over the shared `query` and `fetch` operations, the auth
//! directives and privilege filtering (rules from the `auth` crate), and the axum router that
//! the `graphql` function serves in Lambda and locally.
//!
//! A deployment serves one dialect ([`Dialect`], `GRAPHQL_DIALECT`). Shared types are
//! registered once per set ([`schema::register_signal_types`],
//! [`schema::register_cloud_event_types`]), root resolvers are thin adapters that read the
//! dialect only for argument names, gates, enum spelling, null policy and error texts.
//!
//! # Layout
//! - [`dialect`]: the dialects, their settings and spellings.
//! - [`schema`]: the executable schemas (committed SDL: [`Dialect::sdl`]).
//! - [`resolvers`]: root and signal-field resolvers of the signal operations.
//! - [`cloud_events`]: the raw cloud-event queries (over the `fetch` crate) and identity-api.
//! - [`telemetry`]: telemetry's `attestations` and `vinVCLatest`.
//! - [`http`]: the router, limits, readiness.
//! - [`graphiql`]: the GraphiQL page at `/`, its assets bundled.
//! - [`mcp`]: `/mcp`, MCP Streamable HTTP (tools over the same schema and auth chain).
//! - [`complexity`]: the cost bounds of a document (score, introspection depth).
//! - [`directives`]: the declarations of the directives the schemas apply (SDL, introspection).
//! - [`shadow`]: shadow mode, live requests re-sent to a reference and compared (cutover gate).
//! - [`observe`]: the per-request span, `/query` metrics (`QUERY_EMF`) and X-Ray subsegments.
//! - [`scalars`], [`errors`]: wire formats and error shapes.
#![warn(missing_docs)]

pub mod cloud_events;
pub mod complexity;
pub mod dialect;
pub mod directives;
pub mod errors;
pub mod graphiql;
pub mod http;
pub mod mcp;
pub mod observe;
pub mod resolvers;
pub mod scalars;
pub mod schema;
pub mod shadow;
pub mod telemetry;

pub use dialect::{Dialect, DialectSettings};
pub use http::{router, AppState, Limits};
