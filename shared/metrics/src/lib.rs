//! Observability shared by dq's functions: the one CloudWatch Embedded Metric Format encoder
//! (every line carries the `Stage` and `Function` it comes from), the request identity of the
//! query functions' `tracing` spans, and per-request X-Ray subsegments.
//!
//! Not here: which metrics a component writes (the materializer's in `dq-materialize`, the
//! query transports' dimensions and values in the `observe` modules of `dq-graphql` and
//! `dq-fetch`).
//!
//! # Layout
//! - [`emf`]: [`Metric`], [`encode`], [`Emitter`] and its [`Sink`] (stdout, or memory in tests).
//! - [`origin`]: [`Origin`] (`DQ_STAGE`, `AWS_LAMBDA_FUNCTION_NAME`).
//! - [`query`]: the query functions' namespace, `QUERY_EMF`, and [`query::Observe`], what
//!   the per-request middleware of each query transport writes to.
//! - [`request`]: [`RequestIds`] of a request, and the vehicle handlers record on it.
//! - [`xray`]: the trace header and the subsegment sent to the X-Ray daemon.
#![warn(missing_docs)]

pub mod emf;
pub mod origin;
pub mod query;
pub mod request;
pub mod xray;

pub use emf::{encode, Captured, Emitter, Metric, Sink};
pub use origin::Origin;
pub use request::{record_vehicle, RequestIds};
