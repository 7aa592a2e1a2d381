//! The telemetry GraphQL API in three dialects — dq's, telemetry-api's and fetch-api's — from
//! one engine: the async-graphql schemas generated from the signal catalog, their resolvers over
//! the shared `query` and `rawquery` operations, the auth directives and privilege filtering
//! (rules from the `auth` crate), and the axum router that the `graphql` function serves in
//! Lambda and locally.
//!
//! A deployment serves one dialect ([`Dialect`], `GRAPHQL_DIALECT`). Shared types are
//! registered once per set ([`schema::register_signal_types`],
//! [`schema::register_cloud_event_types`]); root resolvers are thin adapters that ask the
//! dialect ([`DialectExt`]) for argument names, gates, enum spelling, null and voiding
//! policies and error texts.
//!
//! # Layers
//! Each module imports only modules of the layers below it (bottom first):
//! 1. [`scalars`], [`errors`], [`dialect`], [`complexity`], [`directives`], [`observe`],
//!    [`graphiql`]: wire formats, error shapes, the dialects and their differences, cost
//!    bounds, directive declarations, request metrics, the GraphiQL page.
//! 2. [`context`]: the request context (caller, deadline, statement slots, running an engine
//!    call).
//! 3. [`args`]: argument parsing (vehicle argument and gates, times, filters).
//! 4. [`signals`], [`segments`], [`cloud_events`]: the resolvers of each feature.
//! 5. [`telemetry`]: telemetry's own operations (over the cloud-event backend).
//! 6. [`schema`]: the types and each dialect's root `Query` (committed SDL: [`DialectExt::sdl`]).
//! 7. [`http`]: `/query`, the limits, readiness, the process state.
//! 8. [`mcp`], [`shadow`]: `/mcp` over `/query`; shadow mode around `/query`.
//! 9. [`router`](mod@router): the router of a deployment.
//!
//! Feature `testing` adds `testing`: a deployment over one lake on a local port, for other
//! crates' tests.
#![warn(missing_docs)]

pub mod args;
pub mod cloud_events;
pub mod complexity;
pub mod context;
pub mod dialect;
pub mod directives;
pub mod errors;
pub mod graphiql;
pub mod http;
pub mod mcp;
pub mod observe;
pub mod router;
pub mod scalars;
pub mod schema;
pub mod segments;
pub mod shadow;
pub mod signals;
pub mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;

pub use dialect::{Dialect, DialectExt, DialectSettings};
pub use http::{AppState, Limits};
pub use router::router;
