//! Who is calling: a validated token's claims, or a service the platform authenticated.

use crate::permission::{Permission, PermissionSet};
use serde::Deserialize;

/// An authenticated caller. Unauthenticated callers are `None` at the call sites
/// (`Option<&Principal>`): HTTP credentials are optional and each rule
/// decides what "no credentials" means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// A caller holding a valid token-exchange JWT.
    Token(TokenPrincipal),
    /// A caller authenticated another way (issue 7): an API Gateway IAM-authorized route whose
    /// verified caller ARN is allow-listed, a TCP peer in a trusted network (issue 22), or an
    /// explicit local setting. It may read any
    /// subject and holds every permission.
    Service(ServicePrincipal),
}

impl Principal {
    /// The token's `asset` claim (the DID it grants access to); `None` for services and for
    /// tokens without (or with an empty) `asset`.
    pub fn asset(&self) -> Option<&str> {
        match self {
            Principal::Token(t) => t.asset.as_deref(),
            Principal::Service(_) => None,
        }
    }

    /// The permissions held; a service holds all of them.
    pub fn permissions(&self) -> PermissionSet {
        match self {
            Principal::Token(t) => t.permissions,
            Principal::Service(_) => PermissionSet::all(),
        }
    }

    /// True when the caller holds `p`.
    pub fn has(&self, p: Permission) -> bool {
        self.permissions().contains(p)
    }

    /// True for callers that may read any subject (services).
    pub fn reads_any_subject(&self) -> bool {
        matches!(self, Principal::Service(_))
    }

    /// Key of the per-subject concurrency limiter and the `jwtSubject` log field
    /// (rate limiting and logs): the JWT `sub`, or the service's identity.
    pub fn limiter_key(&self) -> Option<&str> {
        match self {
            Principal::Token(t) => t.token_subject.as_deref(),
            Principal::Service(s) => Some(s.caller.log_name()),
        }
    }
}

/// The claims dq reads from a validated token, in every dialect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenPrincipal {
    /// JWT `sub` (a developer license / account); per-subject limiter key and `jwtSubject`.
    pub token_subject: Option<String>,
    /// `asset`: the DID the token grants access to, e.g. `did:erc721:137:0xbA57…B0cF:42`.
    /// Any string is accepted (dq, fetch); telemetry validates it separately.
    pub asset: Option<String>,
    /// `permissions`, parsed; unknown strings are dropped.
    pub permissions: PermissionSet,
    /// `cloud_events` grants (telemetry `attestations` only; dq ignores them).
    pub cloud_events: Option<CloudEventGrants>,
    /// `exp`, seconds since the Unix epoch.
    pub expires_at: u64,
}

/// A service caller (issue 7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePrincipal {
    /// How it was authenticated.
    pub caller: ServiceCaller,
}

/// How a service principal was authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceCaller {
    /// An IAM principal verified by API Gateway and found on the allow-list.
    Iam {
        /// The verified caller ARN as API Gateway reported it.
        arn: String,
    },
    /// A local deployment that explicitly trusts unauthenticated callers.
    LocalTrust,
    /// A caller without a token whose TCP peer address lies in a trusted network
    /// (`FETCH_GRPC_TRUSTED_CIDRS`, the long-running service inside the VPC).
    TrustedNetwork {
        /// The trusted network that holds the peer, e.g. `10.0.0.0/16`.
        network: String,
    },
}

impl ServiceCaller {
    /// The name used in logs and as limiter key.
    pub fn log_name(&self) -> &str {
        match self {
            ServiceCaller::Iam { arn } => arn,
            ServiceCaller::LocalTrust => "local-trusted-caller",
            ServiceCaller::TrustedNetwork { network } => network,
        }
    }
}

/// The `cloud_events` claim: grants over raw cloud events (telemetry `attestations`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub struct CloudEventGrants {
    /// The individual grants; `*` is the wildcard in every field.
    #[serde(default, deserialize_with = "null_as_default")]
    pub events: Vec<CloudEventGrant>,
}

/// One grant in the `cloud_events` claim.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub struct CloudEventGrant {
    /// Event type, or `*`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub event_type: String,
    /// Source address, or `*`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub source: String,
    /// Event ids; `*` admits any.
    #[serde(default, deserialize_with = "null_as_default")]
    pub ids: Vec<String>,
    /// Tags (parsed; ignored by every rule).
    #[serde(default, deserialize_with = "null_as_default")]
    pub tags: Vec<String>,
}

/// Go's `encoding/json` leaves a field at its zero value on JSON `null`.
pub(crate) fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// The JSON claims of a token, as far as dq reads them. Registered claims are validated by
/// `jsonwebtoken` before this is built; the deprecated `contract_address`, `token_id` and
/// `privilege_ids` are ignored.
#[derive(Debug, Deserialize)]
pub(crate) struct RawClaims {
    #[serde(default)]
    sub: Option<String>,
    // Required and type-checked by `jsonwebtoken`'s validation before this is used.
    #[serde(default)]
    exp: Option<u64>,
    #[serde(default)]
    asset: Option<String>,
    #[serde(default)]
    permissions: Option<Vec<String>>,
    #[serde(default)]
    cloud_events: Option<CloudEventGrants>,
}

impl RawClaims {
    pub(crate) fn into_principal(self) -> TokenPrincipal {
        TokenPrincipal {
            token_subject: self.sub.filter(|s| !s.is_empty()),
            asset: self.asset.filter(|s| !s.is_empty()),
            permissions: PermissionSet::from_claim_strings(self.permissions.unwrap_or_default()),
            cloud_events: self.cloud_events,
            expires_at: self.exp.unwrap_or_default(),
        }
    }
}
