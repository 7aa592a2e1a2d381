//! Authenticates callers and authorizes their reads, for the GraphQL Lambda (issue 5) and
//! FetchService (issue 7): JWT validation, the GraphQL directives, cloud-event access,
//! per-signal filtering, the gRPC rules and the auth settings, with the differences of the
//! telemetry and fetch dialects (vehicle gate, `did` access, claims).
//!
//! This crate owns the rules: which tokens are valid, who a caller is ([`Principal`]), what it
//! may read, and the exact error texts each surface shows ([`AuthError::message`]).
//!
//! It does NOT own transport or I/O. There are no async-graphql, tonic, axum or HTTP client
//! types here. Adapters read the `Authorization` header or metadata and the API Gateway
//! request context. They fetch the JWKS through an injected [`JwksFetcher`] and call
//! identity-api through an injected [`DeviceLinks`]. They map [`ErrorCode`] to their status
//! codes once. Rate limits, request timeouts and the order of the HTTP middleware chain
//! also stay with the function crates.
//!
//! # Using it
//! - HTTP `/query` (middleware order: … → RequestTimeout → **JWT** → **PerSubjectLimiter** → claim
//!   injector): [`TokenValidator::authenticate_http`] on the `Authorization` header gives
//!   `Option<Principal>` (credentials are optional) or an error whose [`ErrorCode::http_status`]
//!   and `message(Surface::Http)` form the 401/500 JSON body; [`Principal::limiter_key`] is
//!   the limiter key. The telemetry dialect also calls [`validate_telemetry_asset`].
//! - GraphQL: directives call [`require_vehicle_token`] (dq) / [`require_vehicle_token_id`]
//!   (telemetry), [`require_all_of`], [`require_one_of`], [`require_signal`]; cloud-event
//!   resolvers call [`authorize_cloud_events`]; list results use [`filter_signals`]. Errors
//!   render with `message(surface)`; [`AuthError::graphql_extension_code`] says whether a code
//!   is attached (almost never).
//! - gRPC: [`GrpcAuthenticator::authenticate`] per call, then [`authorize_subject_filter`] or
//!   [`authorize_index_subjects`] in each RPC; [`ErrorCode::grpc_code`] and
//!   `message(Surface::Grpc)` form the status.
//!
//! # Layout
//! - [`validate`]: JWT validation ([`TokenValidator`], RS256 only, issuer, `dimo.zone`
//!   audience, `exp`/`nbf` without leeway) and bearer extraction for HTTP and gRPC.
//! - [`keys`] / [`cache`]: [`KeySet`] from JWKS JSON; [`JwksCache`] with TTL, rate-limited
//!   refresh on an unknown `kid`, and a maximum staleness past which it fails closed.
//! - [`principal`]: [`Principal`], either a token's claims or a platform-authenticated service.
//! - [`permission`]: [`Permission`] strings, the GraphQL [`Privilege`] enum, [`PermissionSet`].
//! - [`authz`]: directives (dq and telemetry gates, privileges), cloud-event subject access
//!   with device links, per-signal filtering, telemetry attestation grants.
//! - [`grpc`]: FetchService authentication ([`GrpcAuthenticator`]) and per-RPC subject scope.
//! - [`service`]: the IAM caller allow-list ([`ServiceAllowList`]).
//! - [`network`]: the trusted networks of tokenless callers inside the VPC
//!   ([`TrustedNetworks`]).
//! - [`config`]: auth settings read once from the environment ([`AuthSettings`]).
//! - [`remote`]: the HTTP upstreams: the JWKS fetcher and identity-api's device links.
//! - [`error`]: [`AuthError`], [`ErrorCode`], [`Surface`].
//! - `dev` (feature `dev`): a development signer that mints tokens and serves its JWKS.
#![warn(missing_docs)]

pub mod authz;
pub mod cache;
pub mod config;
#[cfg(feature = "dev")]
pub mod dev;
pub mod error;
pub mod grpc;
pub mod keys;
pub mod network;
pub mod permission;
pub mod principal;
pub mod remote;
pub mod service;
pub mod validate;

pub use authz::{
    authorize_attestations, authorize_cloud_events, authorize_subject, filter_signals,
    may_read_signal, require_all_of, require_one_of, require_raw_data, require_signal,
    require_vehicle_token, require_vehicle_token_id, validate_telemetry_asset, AttestationRequest,
    AuthorizedSubject, DeviceLinks, IdentityError, LinkFuture,
};
pub use cache::{CacheConfig, JwksCache, JwksFetchError, JwksFetcher};
pub use config::{AuthSettings, ConfigError, JwksLocation};
pub use error::{AuthError, Check, ErrorCode, Result, SubjectDenial, Surface, TokenRejection};
pub use grpc::{
    authorize_index_subjects, authorize_subject_filter, GrpcAuthenticator, GrpcCredentials,
    SubjectScope,
};
pub use keys::KeySet;
pub use network::{Cidr, InvalidCidr, TrustedNetworks};
pub use permission::{Permission, PermissionSet, Privilege};
pub use principal::{
    CloudEventGrant, CloudEventGrants, Principal, ServiceCaller, ServicePrincipal, TokenPrincipal,
};
pub use service::{ServiceAllowList, VerifiedIamCaller};
pub use validate::{
    grpc_bearer_token, http_bearer_token, KeySource, TokenValidator, ValidationConfig,
    REQUIRED_AUDIENCE,
};
