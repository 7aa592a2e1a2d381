//! FetchService authorization (a token reads only its own subject, an allowed service any) plus
//! issue 7's service callers.
//!
//! Two steps, both transport-neutral (the tonic interceptor and the gRPC-web Lambda adapter
//! both call them):
//! 1. [`GrpcAuthenticator::authenticate`] once per call: who is calling.
//! 2. [`authorize_subject_filter`] / [`authorize_index_subjects`] in every RPC: which subjects
//!    the search may touch.
//!
//! An unauthenticated caller is never served: without a token, an allow-listed IAM identity, a
//! TCP peer in a trusted network (issue 22) or the explicit local setting, step 1 or step 2
//! fails with `UNAUTHENTICATED`.

use crate::authz::{authorize_subject, require_raw_data, AuthorizedSubject, DeviceLinks};
use crate::config::AuthSettings;
use crate::error::{AuthError, Check, Result};
use crate::network::TrustedNetworks;
use crate::principal::{Principal, ServiceCaller, ServicePrincipal};
use crate::service::{ServiceAllowList, VerifiedIamCaller};
use crate::validate::{grpc_bearer_token, TokenValidator};
use std::collections::HashMap;
use std::net::IpAddr;

/// What a gRPC call presents.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GrpcCredentials<'a> {
    /// The `authorization` metadata value, if any.
    pub authorization: Option<&'a str>,
    /// The caller ARN API Gateway verified (Lambda, IAM-authorized route only).
    pub iam_caller: Option<VerifiedIamCaller<'a>>,
    /// The peer address of the accepted TCP connection (local listener only; `None` in Lambda).
    /// Take it ONLY from the connection, never from a header such as `X-Forwarded-For`.
    pub peer: Option<IpAddr>,
}

/// The per-call authentication step of FetchService.
#[derive(Debug, Clone)]
pub struct GrpcAuthenticator {
    validator: Option<TokenValidator>,
    require_jwt: bool,
    allow_list: ServiceAllowList,
    trust_unauthenticated: bool,
    trusted_networks: TrustedNetworks,
}

impl GrpcAuthenticator {
    /// `validator`: `None` when no issuer is configured (then no token can be accepted).
    /// `require_jwt`: `FETCH_GRPC_REQUIRE_JWT`.
    pub fn new(validator: Option<TokenValidator>, require_jwt: bool) -> GrpcAuthenticator {
        GrpcAuthenticator {
            validator,
            require_jwt,
            allow_list: ServiceAllowList::empty(),
            trust_unauthenticated: false,
            trusted_networks: TrustedNetworks::empty(),
        }
    }

    /// The authenticator `settings` describe: `FETCH_GRPC_REQUIRE_JWT`,
    /// `FETCH_IAM_ALLOWED_CALLERS`, `FETCH_GRPC_TRUST_UNAUTHENTICATED` and
    /// `FETCH_GRPC_TRUSTED_CIDRS`, with `validator` for tokens (`None` without an issuer).
    pub fn from_settings(
        validator: Option<TokenValidator>,
        settings: &AuthSettings,
    ) -> GrpcAuthenticator {
        GrpcAuthenticator::new(validator, settings.grpc_require_jwt)
            .with_allow_list(settings.iam_allowed_callers.clone())
            .trust_unauthenticated(settings.grpc_trust_unauthenticated)
            .trust_networks(settings.grpc_trusted_cidrs.clone())
    }

    /// Serves IAM callers on `allow_list` as services.
    pub fn with_allow_list(mut self, allow_list: ServiceAllowList) -> GrpcAuthenticator {
        self.allow_list = allow_list;
        self
    }

    /// Local deployments only: treats callers that present no token as a service. The config
    /// layer refuses this setting inside Lambda and on a listener that is not a loopback
    /// address ([`crate::AuthSettings::check_listener`]).
    pub fn trust_unauthenticated(mut self, yes: bool) -> GrpcAuthenticator {
        self.trust_unauthenticated = yes;
        self
    }

    /// Serves callers that present no token as a service when their TCP peer address lies in
    /// one of `networks` (`FETCH_GRPC_TRUSTED_CIDRS`; the config layer refuses it inside Lambda,
    /// where there is no peer address).
    pub fn trust_networks(mut self, networks: TrustedNetworks) -> GrpcAuthenticator {
        self.trusted_networks = networks;
        self
    }

    /// Identifies the caller:
    /// 1. a verified IAM caller → allow-listed service, or `ServiceNotAllowed` (its
    ///    `authorization` header is its SigV4 signature, not a JWT, so it is not read);
    /// 2. a token → validated (`InvalidToken` → "invalid token") and required to carry
    ///    raw-data access ("token lacks raw-data permission");
    /// 3. nothing → the local trust setting's service; else, when the TCP peer lies in a
    ///    trusted network, that network's service; else `MissingCredentials{BearerRequired}`
    ///    ("missing bearer token") when `require_jwt`; else `Ok(None)`, which every RPC then
    ///    refuses with "no token claims".
    ///
    /// # Errors
    /// As listed above.
    pub async fn authenticate(
        &self,
        credentials: GrpcCredentials<'_>,
    ) -> Result<Option<Principal>> {
        if let Some(caller) = credentials.iam_caller {
            return self.allow_list.authorize(caller).map(Some);
        }
        match grpc_bearer_token(credentials.authorization) {
            Some(token) => {
                let Some(validator) = &self.validator else {
                    // No issuer configured: Go installs no interceptor and the RPC finds no
                    // claims. A token we cannot check is not an identity.
                    return Ok(None);
                };
                let principal = validator.validate(token).await?;
                require_raw_data(Some(&principal))?;
                Ok(Some(principal))
            }
            None if self.trust_unauthenticated => Ok(Some(Principal::Service(ServicePrincipal {
                caller: ServiceCaller::LocalTrust,
            }))),
            None => match credentials
                .peer
                .and_then(|peer| self.trusted_networks.find(peer))
            {
                Some(network) => Ok(Some(Principal::Service(ServicePrincipal {
                    caller: ServiceCaller::TrustedNetwork {
                        network: network.to_string(),
                    },
                }))),
                None if self.require_jwt => Err(AuthError::MissingCredentials {
                    check: Check::BearerRequired,
                }),
                None => Ok(None),
            },
        }
    }
}

/// The subjects a search may touch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubjectScope {
    /// A service: the client's own subject filter stands (including none).
    Unrestricted,
    /// A token: the search's subject filter is REPLACED by exactly these DIDs
    /// ([`AuthorizedSubject::search`]); client `not_in`/`or` clauses on subject are dropped.
    Only(Vec<AuthorizedSubject>),
}

impl SubjectScope {
    /// The DIDs to search, or `None` when unrestricted.
    pub fn search_dids(&self) -> Option<Vec<&str>> {
        match self {
            SubjectScope::Unrestricted => None,
            SubjectScope::Only(list) => Some(list.iter().map(|s| s.search.as_str()).collect()),
        }
    }
}

/// Per-RPC subject authorization of a search. `requested` is `subject.in` of the
/// advanced options, or the single plain `subject` (empty when unset).
///
/// # Errors
/// `MissingCredentials{SubjectAccess}` ("no token claims", UNAUTHENTICATED);
/// `MissingRawDataAccess`; `SubjectRequired` ("subject is required"); `SubjectDenied` ("no
/// access to subject") for the first subject refused.
pub async fn authorize_subject_filter<S: AsRef<str>>(
    caller: Option<&Principal>,
    requested: &[S],
    links: Option<&dyn DeviceLinks>,
) -> Result<SubjectScope> {
    let caller = require_raw_data(caller)?;
    if caller.reads_any_subject() {
        return Ok(SubjectScope::Unrestricted);
    }
    let requested: Vec<&str> = requested
        .iter()
        .map(AsRef::as_ref)
        .filter(|s| !s.is_empty())
        .collect();
    if requested.is_empty() {
        return Err(AuthError::SubjectRequired);
    }
    let mut out: Vec<AuthorizedSubject> = Vec::with_capacity(requested.len());
    for subject in requested {
        if out.iter().any(|a| a.requested == subject) {
            continue;
        }
        out.push(authorize_subject(caller, subject, links).await?);
    }
    Ok(SubjectScope::Only(out))
}

/// ListCloudEventsFromIndex: authorizes each index's `header.subject`, in input order
/// (one identity lookup per distinct subject).
///
/// # Errors
/// As [`authorize_subject_filter`], for the first index refused.
pub async fn authorize_index_subjects<S: AsRef<str>>(
    caller: Option<&Principal>,
    subjects: &[S],
    links: Option<&dyn DeviceLinks>,
) -> Result<Vec<AuthorizedSubject>> {
    let caller = require_raw_data(caller)?;
    let mut seen: HashMap<&str, AuthorizedSubject> = HashMap::new();
    let mut out = Vec::with_capacity(subjects.len());
    for subject in subjects {
        let subject = subject.as_ref();
        let authorized = match seen.get(subject) {
            Some(a) => a.clone(),
            None => {
                let a = authorize_subject(caller, subject, links).await?;
                seen.insert(subject, a.clone());
                a
            }
        };
        out.push(authorized);
    }
    Ok(out)
}
