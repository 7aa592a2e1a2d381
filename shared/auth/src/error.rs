//! The crate's one error type, its stable machine code, and the per-surface error texts.
//!
//! Every check in this crate fails with an [`AuthError`] that says *which* rule failed and with
//! what data. Adapters then ask it two things, once each:
//! - [`AuthError::code`] → an [`ErrorCode`], mapped to an HTTP status
//!   ([`ErrorCode::http_status`]) and a gRPC status code ([`ErrorCode::grpc_code`]);
//! - [`AuthError::message`] for a [`Surface`] → the exact text that surface's clients expect
//!   (each dialect keeps its own texts and status codes).
//!
//! No variant carries the bearer token, so neither `Display` nor `Debug` can leak it.

use crate::permission::Permission;
use std::fmt;

/// `Result` with [`AuthError`] as the default error.
pub type Result<T, E = AuthError> = std::result::Result<T, E>;

/// The client-facing surface whose error texts a message is rendered for.
///
/// The GraphQL dialects share one engine; they differ only in a few texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Surface {
    /// dq's own GraphQL dialect (`subject: String!`).
    Dq,
    /// The telemetry-api GraphQL dialect (`tokenId: Int!`).
    Telemetry,
    /// The fetch-api GraphQL dialect (`did: String!`).
    Fetch,
    /// The gRPC `FetchService`.
    Grpc,
    /// The HTTP JWT middleware, before GraphQL runs: the JSON `message` of a 401/500 body
    /// (go-jwt-middleware's texts).
    Http,
}

/// Stable machine code of an [`AuthError`]; adapters map it once per transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// No credentials, or credentials that do not prove an identity.
    Unauthenticated,
    /// An authenticated caller that may not do this.
    Forbidden,
    /// An `Authorization` header that is not `Bearer <token>`. HTTP 500 reproduces
    /// go-jwt-middleware's default error handler.
    MalformedCredentials,
    /// The signing keys could not be obtained (JWKS fetch failed and nothing is cached).
    Unavailable,
    /// A broken deployment (no crypto provider); never the caller's fault.
    Internal,
}

impl ErrorCode {
    /// The code as a stable upper-case string, e.g. for logs and metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Unauthenticated => "UNAUTHENTICATED",
            ErrorCode::Forbidden => "FORBIDDEN",
            ErrorCode::MalformedCredentials => "MALFORMED_CREDENTIALS",
            ErrorCode::Unavailable => "UNAVAILABLE",
            ErrorCode::Internal => "INTERNAL",
        }
    }

    /// HTTP status for errors raised before GraphQL runs (the JWT middleware). Resolver-level
    /// auth errors stay inside a 200 GraphQL response.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::Unauthenticated => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::MalformedCredentials => 500,
            ErrorCode::Unavailable => 503,
            ErrorCode::Internal => 500,
        }
    }

    /// Numeric gRPC status code (`tonic::Code::from_i32` takes it as is).
    pub fn grpc_code(self) -> i32 {
        match self {
            ErrorCode::Unauthenticated | ErrorCode::MalformedCredentials => 16,
            ErrorCode::Forbidden => 7,
            ErrorCode::Unavailable => 14,
            ErrorCode::Internal => 13,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which rule found that the caller had no credentials; the texts differ per rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Check {
    /// A GraphQL directive (`@requiresVehicleToken`, privilege directives): "jwt missing".
    Directive,
    /// Subject authorization (cloud-event resolvers, every gRPC RPC): "no token claims".
    SubjectAccess,
    /// The gRPC interceptor with `FETCH_GRPC_REQUIRE_JWT=true`: "missing bearer token".
    BearerRequired,
}

/// Why a presented token was rejected. For logs and tests; clients see one text per surface.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TokenRejection {
    /// Not a compact JWS with a parseable header, or longer than the accepted maximum.
    Malformed,
    /// The header names an algorithm other than RS256 (`none`, `HS256`, …).
    Algorithm(String),
    /// The header has no `kid`.
    MissingKid,
    /// The `kid` is not in the key set, even after a refresh.
    UnknownKid(String),
    /// The header lists `crit` extensions, none of which we understand.
    CriticalHeader,
    /// The signature does not verify.
    Signature,
    /// `exp` is in the past.
    Expired,
    /// `nbf` is in the future.
    NotYetValid,
    /// `iss` is not the configured issuer.
    Issuer,
    /// `aud` does not contain the required audience.
    Audience,
    /// A required registered claim (`exp`, `iss`, `aud`) is absent.
    MissingClaim(String),
    /// The claims do not have the expected shape (wrong JSON types).
    Claims,
    /// A dialect's extra claim validation failed (telemetry: `asset` is not an ERC-721/ethr DID).
    Asset,
}

impl fmt::Display for TokenRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenRejection::Malformed => f.write_str("malformed token"),
            TokenRejection::Algorithm(alg) => write!(f, "algorithm {alg:?} is not allowed"),
            TokenRejection::MissingKid => f.write_str("token header has no kid"),
            TokenRejection::UnknownKid(kid) => write!(f, "unknown kid {kid:?}"),
            TokenRejection::CriticalHeader => f.write_str("unsupported critical header"),
            TokenRejection::Signature => f.write_str("signature does not verify"),
            TokenRejection::Expired => f.write_str("token expired"),
            TokenRejection::NotYetValid => f.write_str("token not yet valid"),
            TokenRejection::Issuer => f.write_str("wrong issuer"),
            TokenRejection::Audience => f.write_str("wrong audience"),
            TokenRejection::MissingClaim(c) => write!(f, "missing claim {c}"),
            TokenRejection::Claims => f.write_str("claims have the wrong shape"),
            TokenRejection::Asset => f.write_str("asset claim is not an ERC-721 or ethr DID"),
        }
    }
}

/// Why a subject was refused (step 3 of the cloud-event rule). Clients see one text; this is for
/// logs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SubjectDenial {
    /// Not the token's asset and not an ERC-721 DID, so no device link can apply.
    NotErc721,
    /// Not the token's asset and no identity client is configured.
    NoIdentityClient,
    /// identity-api knows the device but it is paired to another vehicle (or none).
    NotLinked,
    /// The identity lookup failed (timeout, non-200, neither device kind found).
    LookupFailed(String),
}

impl fmt::Display for SubjectDenial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubjectDenial::NotErc721 => f.write_str("subject is not the asset nor an erc721 did"),
            SubjectDenial::NoIdentityClient => f.write_str("no identity client configured"),
            SubjectDenial::NotLinked => f.write_str("device is not paired to the token's vehicle"),
            SubjectDenial::LookupFailed(e) => write!(f, "identity lookup failed: {e}"),
        }
    }
}

/// Every way authentication or authorization can fail.
///
/// `Display` renders the dq text (logs); use [`AuthError::message`] for a client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No credentials where the rule needs them.
    #[error("{}", self.message(Surface::Dq))]
    MissingCredentials {
        /// The rule that needed them.
        check: Check,
    },
    /// The `Authorization` header is present but is not `Bearer <token>`.
    #[error("authorization header format must be Bearer {{token}}")]
    MalformedHeader,
    /// A token was presented and rejected.
    #[error("invalid token: {0}")]
    InvalidToken(TokenRejection),
    /// No signing keys are available (fetch failed and nothing cached).
    #[error("signing keys unavailable: {0}")]
    KeysUnavailable(String),
    /// dq `@requiresVehicleToken`: `asset` is not byte-equal to the queried subject.
    #[error("{}", self.message(Surface::Dq))]
    SubjectMismatch,
    /// telemetry `@requiresVehicleToken`: the asset's contract is not the vehicle contract.
    #[error("{}", self.message(Surface::Telemetry))]
    VehicleContractMismatch {
        /// The asset's contract (or ethr address), EIP-55.
        claim_contract: String,
        /// The configured vehicle contract, EIP-55.
        required_contract: String,
    },
    /// telemetry `@requiresVehicleToken`: the asset's token id is not the queried `tokenId`.
    #[error("{}", self.message(Surface::Telemetry))]
    VehicleTokenIdMismatch,
    /// `@requiresAllOfPrivileges`: the first permission the token lacks.
    #[error("{}", self.message(Surface::Dq))]
    MissingPrivilege {
        /// The first missing permission, in directive order.
        missing: Permission,
    },
    /// `@requiresOneOfPrivilege`: the token holds none of these.
    #[error("{}", self.message(Surface::Dq))]
    MissingAnyPrivilege {
        /// The accepted permissions, in directive order.
        any_of: Vec<Permission>,
    },
    /// Raw-data access (`GetRawData`, or both history permissions) is missing (step 2 of the
    /// cloud-event rule).
    #[error("{}", self.message(Surface::Dq))]
    MissingRawDataAccess,
    /// gRPC: the search names no subject.
    #[error("subject is required")]
    SubjectRequired,
    /// The caller may not read this subject (step 3 of the cloud-event rule).
    #[error("no access to subject {subject:?}: {reason}")]
    SubjectDenied {
        /// The subject as requested.
        subject: String,
        /// Why (for logs).
        reason: SubjectDenial,
    },
    /// telemetry `attestations`: no `cloud_events` grant admits the request.
    #[error("invalid claims")]
    GrantDenied,
    /// An IAM-authenticated caller whose ARN is not on the allow-list.
    #[error("caller {caller_arn:?} is not on the service allow-list")]
    ServiceNotAllowed {
        /// The verified caller ARN (not a secret).
        caller_arn: String,
    },
    /// A deployment problem (e.g. no JWT crypto provider). Never the caller's fault.
    #[error("internal auth error: {0}")]
    Internal(String),
}

impl AuthError {
    /// The stable machine code.
    pub fn code(&self) -> ErrorCode {
        match self {
            AuthError::MissingCredentials { .. } | AuthError::InvalidToken(_) => {
                ErrorCode::Unauthenticated
            }
            AuthError::MalformedHeader => ErrorCode::MalformedCredentials,
            AuthError::KeysUnavailable(_) => ErrorCode::Unavailable,
            AuthError::Internal(_) => ErrorCode::Internal,
            AuthError::SubjectMismatch
            | AuthError::VehicleContractMismatch { .. }
            | AuthError::VehicleTokenIdMismatch
            | AuthError::MissingPrivilege { .. }
            | AuthError::MissingAnyPrivilege { .. }
            | AuthError::MissingRawDataAccess
            | AuthError::SubjectRequired
            | AuthError::SubjectDenied { .. }
            | AuthError::GrantDenied
            | AuthError::ServiceNotAllowed { .. } => ErrorCode::Forbidden,
        }
    }

    /// The GraphQL `extensions.code` a surface attaches, if any. Auth errors carry none except
    /// telemetry's `invalid claims`, which also gets
    /// `reason: "Internal Server Error"` from the shared error helper.
    pub fn graphql_extension_code(&self, surface: Surface) -> Option<&'static str> {
        match (self, surface) {
            (AuthError::GrantDenied, Surface::Telemetry) => Some("UNAUTHORIZED"),
            _ => None,
        }
    }

    /// The exact client-facing text for `surface`.
    pub fn message(&self, surface: Surface) -> String {
        match self {
            AuthError::MissingCredentials { check } => match (check, surface) {
                (_, Surface::Http) => "JWT is missing.".into(),
                (Check::BearerRequired, Surface::Grpc) => "missing bearer token".into(),
                (_, Surface::Grpc) => "no token claims".into(),
                (Check::Directive, _) => "unauthorized: jwt missing".into(),
                _ => "unauthorized: no token claims".into(),
            },
            AuthError::MalformedHeader => match surface {
                Surface::Grpc => "invalid token".into(),
                _ => "Something went wrong while checking the JWT.".into(),
            },
            AuthError::InvalidToken(_) | AuthError::KeysUnavailable(_) => match surface {
                Surface::Grpc => "invalid token".into(),
                _ => "JWT is invalid.".into(),
            },
            AuthError::SubjectMismatch => match surface {
                Surface::Grpc => "no access to subject".into(),
                _ => "unauthorized: DID in query does not match token claim".into(),
            },
            AuthError::VehicleContractMismatch {
                claim_contract,
                required_contract,
            } => format!(
                "unauthorized: unauthorized: contract in claim is {claim_contract} instead of the required {required_contract}"
            ),
            AuthError::VehicleTokenIdMismatch => {
                "unauthorized: unauthorized: token id does not match".into()
            }
            AuthError::MissingPrivilege { missing } => match surface {
                Surface::Telemetry => format!(
                    "unauthorized: missing required privilege(s) {}",
                    missing.as_str()
                ),
                Surface::Grpc => format!("missing required privilege {}", missing.as_str()),
                _ => format!("unauthorized: missing required privilege {}", missing.as_str()),
            },
            AuthError::MissingAnyPrivilege { any_of } => {
                let list: Vec<&str> = any_of.iter().map(|p| p.as_str()).collect();
                let body = format!(
                    "requires at least one of the following privileges [{}]",
                    list.join(" ")
                );
                match surface {
                    Surface::Grpc => body,
                    _ => format!("unauthorized: {body}"),
                }
            }
            AuthError::MissingRawDataAccess => match surface {
                Surface::Grpc => "token lacks raw-data permission".into(),
                _ => "unauthorized: token does not have required permission for this operation"
                    .into(),
            },
            AuthError::SubjectRequired => match surface {
                Surface::Grpc => "subject is required".into(),
                _ => "unauthorized: subject is required".into(),
            },
            AuthError::SubjectDenied { .. } => match surface {
                Surface::Grpc => "no access to subject".into(),
                _ => "unauthorized: token does not have access to this subject".into(),
            },
            AuthError::GrantDenied => "invalid claims".into(),
            AuthError::ServiceNotAllowed { .. } => match surface {
                Surface::Grpc => "caller is not allowed".into(),
                _ => "unauthorized: caller is not allowed".into(),
            },
            AuthError::Internal(_) => match surface {
                Surface::Http => "Something went wrong while checking the JWT.".into(),
                _ => "internal error".into(),
            },
        }
    }
}
