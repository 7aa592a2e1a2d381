//! Auth settings (issuer, JWKS, audience, plus the service callers of issues 7 and 22), read once
//! at start-up.

use crate::network::TrustedNetworks;
use crate::service::{InvalidArn, ServiceAllowList};
use crate::validate::ValidationConfig;
use dq_config::{parse_bool, parse_go_duration, BOOL_VALUES};
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

/// Token issuer; `iss` must equal it. Unset: no token can be validated.
pub const TOKEN_EXCHANGE_ISSUER_URL: &str = "TOKEN_EXCHANGE_ISSUER_URL";
/// JWKS URL. Unset: discovered from the issuer (`<issuer>/.well-known/openid-configuration`).
pub const TOKEN_EXCHANGE_JWK_KEY_SET_URL: &str = "TOKEN_EXCHANGE_JWK_KEY_SET_URL";
/// gRPC: a call without a token is refused by the interceptor ("missing bearer token").
pub const FETCH_GRPC_REQUIRE_JWT: &str = "FETCH_GRPC_REQUIRE_JWT";
/// identity-api GraphQL endpoint for device → vehicle links; unset: cross-subject access is
/// always denied.
pub const IDENTITY_API_URL: &str = "IDENTITY_API_URL";
/// New (issue 7): IAM caller ARNs (comma or whitespace separated) served by FetchService
/// without a token when they arrive through an IAM-authorized API Gateway route.
pub const FETCH_IAM_ALLOWED_CALLERS: &str = "FETCH_IAM_ALLOWED_CALLERS";
/// New (issue 7), local only: serve FetchService callers that present no token as a trusted
/// service. Refused inside Lambda, and accepted only with a loopback listener
/// ([`AuthSettings::check_listener`]).
pub const FETCH_GRPC_TRUST_UNAUTHENTICATED: &str = "FETCH_GRPC_TRUST_UNAUTHENTICATED";
/// New (issue 22), for the fetch binary as a long-running service inside the VPC (not Lambda):
/// IPv4/IPv6 networks (CIDRs, comma or whitespace separated) whose callers are served without a
/// token, as the VPC trusts the existing native-gRPC callers today. A call without a token whose
/// TCP peer address lies in one of them is a trusted service; a call with a token is validated
/// as usual; any other tokenless call is treated as without this setting.
///
/// Only the peer of the accepted TCP connection counts, never `X-Forwarded-For` or any other
/// header. Behind a load balancer that peer is the balancer unless it preserves the client's
/// address: the NLB target group must set `preserve_client_ip.enabled=true` (Fargate tasks are
/// `ip` targets, for which a TCP target group does NOT preserve it by default), or else these
/// networks must be the NLB's own subnets, which trusts every caller the internal NLB and its
/// security group admit. `0.0.0.0/0` and `::/0` (trust everyone) are refused, and so is the
/// setting inside Lambda, where a request has no TCP peer.
pub const FETCH_GRPC_TRUSTED_CIDRS: &str = "FETCH_GRPC_TRUSTED_CIDRS";
/// Longest time (a Go duration) the last successfully fetched JWKS keeps verifying tokens while
/// the issuer cannot be reached; past it, token checks fail as unavailable (HTTP 503, gRPC
/// `UNAVAILABLE`).
pub const TOKEN_EXCHANGE_JWKS_MAX_STALENESS: &str = "TOKEN_EXCHANGE_JWKS_MAX_STALENESS";
/// [`TOKEN_EXCHANGE_JWKS_MAX_STALENESS`] when unset.
pub const DEFAULT_JWKS_MAX_STALENESS: Duration = Duration::from_secs(24 * 3600);
/// Set by the Lambda runtime; used to refuse local-only settings there.
pub const AWS_LAMBDA_FUNCTION_NAME: &str = "AWS_LAMBDA_FUNCTION_NAME";
pub use dq_config::AWS_LAMBDA_RUNTIME_API;

/// Where the signing keys come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksLocation {
    /// `TOKEN_EXCHANGE_JWK_KEY_SET_URL`.
    Url(String),
    /// OIDC discovery from the issuer: fetch [`discovery_url`], then its `jwks_uri`
    /// ([`jwks_uri_from_discovery`]).
    Discover {
        /// The issuer URL.
        issuer: String,
    },
}

/// The OIDC discovery document URL of `issuer`.
pub fn discovery_url(issuer: &str) -> String {
    format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    )
}

/// The `jwks_uri` of an OIDC discovery document, if present.
pub fn jwks_uri_from_discovery(json: &[u8]) -> Option<String> {
    let doc: serde_json::Value = serde_json::from_slice(json).ok()?;
    doc.get("jwks_uri")?
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// One bad setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    /// The environment key.
    pub key: &'static str,
    /// What is wrong (never the value of a secret; none of these keys is one).
    pub reason: String,
}

/// Every bad setting found, not just the first.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The problems, in key order.
    pub problems: Vec<ConfigProblem>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid auth settings: ")?;
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{}: {}", p.key, p.reason)?;
        }
        Ok(())
    }
}

/// The auth settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthSettings {
    /// `TOKEN_EXCHANGE_ISSUER_URL`.
    pub issuer: Option<String>,
    /// `TOKEN_EXCHANGE_JWK_KEY_SET_URL`.
    pub jwks_url: Option<String>,
    /// `FETCH_GRPC_REQUIRE_JWT` (default false).
    pub grpc_require_jwt: bool,
    /// `IDENTITY_API_URL`.
    pub identity_api_url: Option<String>,
    /// `FETCH_IAM_ALLOWED_CALLERS`.
    pub iam_allowed_callers: ServiceAllowList,
    /// `FETCH_GRPC_TRUST_UNAUTHENTICATED` (default false; refused in Lambda).
    pub grpc_trust_unauthenticated: bool,
    /// `FETCH_GRPC_TRUSTED_CIDRS` (default none; refused in Lambda).
    pub grpc_trusted_cidrs: TrustedNetworks,
    /// `TOKEN_EXCHANGE_JWKS_MAX_STALENESS` (default [`DEFAULT_JWKS_MAX_STALENESS`]).
    pub jwks_max_staleness: Duration,
}

impl Default for AuthSettings {
    fn default() -> Self {
        AuthSettings {
            issuer: None,
            jwks_url: None,
            grpc_require_jwt: false,
            identity_api_url: None,
            iam_allowed_callers: ServiceAllowList::empty(),
            grpc_trust_unauthenticated: false,
            grpc_trusted_cidrs: TrustedNetworks::empty(),
            jwks_max_staleness: DEFAULT_JWKS_MAX_STALENESS,
        }
    }
}

/// A [`TOKEN_EXCHANGE_JWKS_MAX_STALENESS`] value: a Go duration (the parser of the other
/// duration settings) of at least the JWKS refresh interval, else every refresh would be late.
fn max_staleness(v: &str) -> Result<Duration, String> {
    let min = crate::cache::CacheConfig::default().ttl;
    let d = parse_go_duration(v)?;
    if d < min {
        return Err(format!(
            "must be at least {}s (the JWKS refresh interval)",
            min.as_secs()
        ));
    }
    Ok(d)
}

fn is_http_url(s: &str) -> bool {
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"));
    rest.is_some_and(|r| !r.is_empty() && !r.starts_with('/') && !r.contains(char::is_whitespace))
}

impl AuthSettings {
    /// Reads the process environment.
    ///
    /// # Errors
    /// [`ConfigError`] listing every bad key.
    pub fn from_env() -> Result<AuthSettings, ConfigError> {
        AuthSettings::from_lookup(dq_config::env_lookup)
    }

    /// Reads settings through `lookup` (tests, settings files). Empty values count as unset.
    ///
    /// # Errors
    /// [`ConfigError`] listing every bad key.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<AuthSettings, ConfigError> {
        let settings = dq_config::Settings::new(lookup);
        let get = |k: &str| settings.get(k);
        let mut problems = Vec::new();
        let mut url = |key: &'static str| {
            let v = get(key)?;
            if is_http_url(&v) {
                Some(v)
            } else {
                problems.push(ConfigProblem {
                    key,
                    reason: "must be an absolute http(s) URL".into(),
                });
                None
            }
        };
        let issuer = url(TOKEN_EXCHANGE_ISSUER_URL);
        let jwks_url = url(TOKEN_EXCHANGE_JWK_KEY_SET_URL);
        let identity_api_url = url(IDENTITY_API_URL);
        let mut boolean = |key: &'static str| match get(key) {
            None => false,
            Some(v) => parse_bool(&v).unwrap_or_else(|| {
                problems.push(ConfigProblem {
                    key,
                    reason: format!("must be a boolean ({BOOL_VALUES})"),
                });
                false
            }),
        };
        let grpc_require_jwt = boolean(FETCH_GRPC_REQUIRE_JWT);
        let grpc_trust_unauthenticated = boolean(FETCH_GRPC_TRUST_UNAUTHENTICATED);
        let iam_allowed_callers = match get(FETCH_IAM_ALLOWED_CALLERS) {
            None => ServiceAllowList::empty(),
            Some(v) => ServiceAllowList::parse(&v).unwrap_or_else(|e: InvalidArn| {
                problems.push(ConfigProblem {
                    key: FETCH_IAM_ALLOWED_CALLERS,
                    reason: e.to_string(),
                });
                ServiceAllowList::empty()
            }),
        };
        let grpc_trusted_cidrs = match get(FETCH_GRPC_TRUSTED_CIDRS) {
            None => TrustedNetworks::empty(),
            Some(v) => TrustedNetworks::parse(&v).unwrap_or_else(|e| {
                problems.push(ConfigProblem {
                    key: FETCH_GRPC_TRUSTED_CIDRS,
                    reason: e.to_string(),
                });
                TrustedNetworks::empty()
            }),
        };
        let jwks_max_staleness = match get(TOKEN_EXCHANGE_JWKS_MAX_STALENESS) {
            None => DEFAULT_JWKS_MAX_STALENESS,
            Some(v) => max_staleness(&v).unwrap_or_else(|reason| {
                problems.push(ConfigProblem {
                    key: TOKEN_EXCHANGE_JWKS_MAX_STALENESS,
                    reason,
                });
                DEFAULT_JWKS_MAX_STALENESS
            }),
        };
        let in_lambda =
            get(AWS_LAMBDA_FUNCTION_NAME).is_some() || get(AWS_LAMBDA_RUNTIME_API).is_some();
        if grpc_trust_unauthenticated && in_lambda {
            problems.push(ConfigProblem {
                key: FETCH_GRPC_TRUST_UNAUTHENTICATED,
                reason: "is for local deployments and is refused inside Lambda".into(),
            });
        }
        if in_lambda && get(FETCH_GRPC_TRUSTED_CIDRS).is_some() {
            problems.push(ConfigProblem {
                key: FETCH_GRPC_TRUSTED_CIDRS,
                reason: format!(
                    "is for the long-running gRPC service and is refused inside Lambda: a \
                     Lambda request has no TCP peer address (IAM callers use \
                     {FETCH_IAM_ALLOWED_CALLERS})"
                ),
            });
        }
        if issuer.is_none() && jwks_url.is_some() {
            problems.push(ConfigProblem {
                key: TOKEN_EXCHANGE_ISSUER_URL,
                reason: format!("is required when {TOKEN_EXCHANGE_JWK_KEY_SET_URL} is set"),
            });
        } else if in_lambda && get(TOKEN_EXCHANGE_ISSUER_URL).is_none() {
            // Without an issuer no token can be validated, so every data query would fail as
            // "jwt missing", which reads as the client's fault rather than the deployment's.
            problems.push(ConfigProblem {
                key: TOKEN_EXCHANGE_ISSUER_URL,
                reason: "is required inside Lambda: without a token issuer no query can be \
                         authorized"
                    .into(),
            });
        }
        if !problems.is_empty() {
            return Err(ConfigError { problems });
        }
        Ok(AuthSettings {
            issuer,
            jwks_url,
            grpc_require_jwt,
            identity_api_url,
            iam_allowed_callers,
            grpc_trust_unauthenticated,
            grpc_trusted_cidrs,
            jwks_max_staleness,
        })
    }

    /// Checks the settings against the address the local FetchService listener is bound to:
    /// [`FETCH_GRPC_TRUST_UNAUTHENTICATED`] serves every caller that presents no token, so it is
    /// accepted only when nothing but this host can connect (a loopback address).
    ///
    /// # Errors
    /// [`ConfigError`] naming the setting and the address when the trust setting is on and
    /// `listener` is not a loopback address.
    pub fn check_listener(&self, listener: SocketAddr) -> Result<(), ConfigError> {
        if !self.grpc_trust_unauthenticated || listener.ip().is_loopback() {
            return Ok(());
        }
        Err(ConfigError {
            problems: vec![ConfigProblem {
                key: FETCH_GRPC_TRUST_UNAUTHENTICATED,
                reason: format!(
                    "is accepted only when the gRPC listener is bound to a loopback address \
                     (127.0.0.1 or ::1), not {listener}"
                ),
            }],
        })
    }

    /// The token rules, when an issuer is configured.
    pub fn validation_config(&self) -> Option<ValidationConfig> {
        self.issuer.as_deref().map(ValidationConfig::new)
    }

    /// Where to fetch keys, when an issuer is configured.
    pub fn jwks_location(&self) -> Option<JwksLocation> {
        match (&self.jwks_url, &self.issuer) {
            (Some(url), _) => Some(JwksLocation::Url(url.clone())),
            (None, Some(issuer)) => Some(JwksLocation::Discover {
                issuer: issuer.clone(),
            }),
            (None, None) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Result<AuthSettings, ConfigError> {
        AuthSettings::from_lookup(dq_config::pairs_lookup(pairs))
    }

    #[test]
    fn defaults_and_values() {
        let s = settings(&[]).unwrap();
        assert_eq!(s, AuthSettings::default());
        assert_eq!(s.jwks_location(), None);
        let s = settings(&[
            (TOKEN_EXCHANGE_ISSUER_URL, "https://auth.dimo.zone"),
            (FETCH_GRPC_REQUIRE_JWT, "true"),
            (
                FETCH_IAM_ALLOWED_CALLERS,
                "arn:aws:iam::1:role/a,arn:aws:iam::1:role/b",
            ),
        ])
        .unwrap();
        assert!(s.grpc_require_jwt);
        assert_eq!(s.iam_allowed_callers.entries().count(), 2);
        assert_eq!(
            s.jwks_location(),
            Some(JwksLocation::Discover {
                issuer: "https://auth.dimo.zone".into()
            })
        );
        assert_eq!(
            s.validation_config().map(|c| (c.audience, c.leeway_secs)),
            Some(("dimo.zone".into(), 0))
        );
        assert_eq!(
            discovery_url("https://auth.dimo.zone/"),
            "https://auth.dimo.zone/.well-known/openid-configuration"
        );
        assert_eq!(
            jwks_uri_from_discovery(br#"{"jwks_uri":"https://auth.dimo.zone/keys"}"#),
            Some("https://auth.dimo.zone/keys".into())
        );
        assert_eq!(jwks_uri_from_discovery(b"{}"), None);
    }

    #[test]
    fn every_problem_is_listed() {
        let e = settings(&[
            (TOKEN_EXCHANGE_ISSUER_URL, "auth.dimo.zone"),
            (
                TOKEN_EXCHANGE_JWK_KEY_SET_URL,
                "https://auth.dimo.zone/keys",
            ),
            (FETCH_GRPC_REQUIRE_JWT, "maybe"),
            (FETCH_IAM_ALLOWED_CALLERS, "arn:aws:iam::1:role/*"),
            (FETCH_GRPC_TRUST_UNAUTHENTICATED, "1"),
            (FETCH_GRPC_TRUSTED_CIDRS, "10.0.0.0/8"),
            (AWS_LAMBDA_FUNCTION_NAME, "dq-fetch"),
        ])
        .unwrap_err();
        let keys: Vec<&str> = e.problems.iter().map(|p| p.key).collect();
        assert_eq!(
            keys,
            [
                TOKEN_EXCHANGE_ISSUER_URL,
                FETCH_GRPC_REQUIRE_JWT,
                FETCH_IAM_ALLOWED_CALLERS,
                FETCH_GRPC_TRUST_UNAUTHENTICATED,
                FETCH_GRPC_TRUSTED_CIDRS,
                TOKEN_EXCHANGE_ISSUER_URL,
            ]
        );
        // Local trust outside Lambda is fine.
        assert!(
            settings(&[(FETCH_GRPC_TRUST_UNAUTHENTICATED, "true")])
                .unwrap()
                .grpc_trust_unauthenticated
        );
    }
}
