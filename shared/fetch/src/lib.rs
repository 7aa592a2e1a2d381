//! `grpc.FetchService` over gRPC and gRPC-web: the transport of the cloud-event read engine
//! (`dq-rawquery`), with per-RPC authorization through `dq-auth`, status mapping, limits, the one
//! router both transports use, and the API Gateway adapter.
//!
//! Not here: the search, voiding and payload semantics (`dq-rawquery`), token and subject rules
//! (`dq-auth`), the wire types (`dq-proto`), and the process entry point (`functions/fetch`).
//!
//! # Layout
//! - [`convert`]: protobuf ↔ native.
//! - [`service`]: [`FetchApi`], the tonic service.
//! - [`server`]: the router, the local listener, assembly from the environment.
//! - [`lambda`]: the API Gateway adapter (verified IAM caller).
//! - [`observe`]: the per-call span, call metrics (`QUERY_EMF`) and X-Ray subsegments.
#![warn(missing_docs)]

pub mod convert;
pub mod lambda;
pub mod observe;
pub mod server;
pub mod service;

pub use service::{FetchApi, IamCaller};
