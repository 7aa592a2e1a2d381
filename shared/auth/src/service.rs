//! Service callers authenticated by the platform rather than by a JWT (issue 7).
//!
//! The services that call FetchService today (telemetry-api, attestation-api, rewards-api,
//! identity-api) send no token. In Lambda they reach dq through an API Gateway route with IAM
//! authorization; API Gateway verifies the SigV4 signature and reports the caller ARN in the
//! request context. A caller whose ARN is on the allow-list becomes a
//! [`Principal::Service`].
//!
//! Matching is exact on the IAM identity, never on patterns:
//! - a role (`arn:aws:iam::<acct>:role[/path]/<name>`) matches the caller ARNs of its sessions
//!   (`arn:aws:sts::<acct>:assumed-role/<name>/<session>`) and itself; role paths are ignored
//!   because session ARNs do not carry them;
//! - any other ARN (a user, …) matches only itself.
//!
//! Entries with wildcards (`*`, `?`) are refused at configuration time.

use crate::error::{AuthError, Result};
use crate::principal::{Principal, ServiceCaller, ServicePrincipal};
use std::fmt;

/// A caller ARN that the platform verified (API Gateway `requestContext.authorizer.iam.userArn`).
///
/// Build it ONLY from the API Gateway request context of an IAM-authorized route, never from a
/// header or anything else the client controls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifiedIamCaller<'a>(pub &'a str);

/// An allow-list entry or caller reduced to the IAM identity it stands for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum IamIdentity {
    Role {
        partition: String,
        account: String,
        name: String,
    },
    Exact(String),
}

/// Why an allow-list entry was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid allow-list entry {entry:?}: {reason}")]
pub struct InvalidArn {
    /// The entry as configured.
    pub entry: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

fn identity(arn: &str) -> Option<IamIdentity> {
    // arn:partition:service:region:account:resource (the resource may contain ':').
    let mut parts = arn.splitn(6, ':');
    let (Some("arn"), Some(partition), Some(service), Some(_region), Some(account), Some(resource)) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return None;
    };
    if partition.is_empty() || account.is_empty() || resource.is_empty() {
        return None;
    }
    let role = |name: &str| IamIdentity::Role {
        partition: partition.to_string(),
        account: account.to_string(),
        name: name.to_string(),
    };
    match service {
        "iam" => match resource.strip_prefix("role/") {
            Some(path_and_name) => path_and_name
                .rsplit('/')
                .next()
                .filter(|n| !n.is_empty())
                .map(role),
            None => Some(IamIdentity::Exact(arn.to_string())),
        },
        "sts" => match resource.strip_prefix("assumed-role/") {
            Some(rest) => {
                let mut it = rest.splitn(2, '/');
                match (it.next(), it.next()) {
                    (Some(name), Some(session)) if !name.is_empty() && !session.is_empty() => {
                        Some(role(name))
                    }
                    _ => None,
                }
            }
            None => Some(IamIdentity::Exact(arn.to_string())),
        },
        _ => Some(IamIdentity::Exact(arn.to_string())),
    }
}

/// The configured IAM callers allowed to use FetchService without a token.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ServiceAllowList {
    entries: Vec<(String, IamIdentity)>,
}

impl fmt::Debug for ServiceAllowList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|(s, _)| s))
            .finish()
    }
}

impl ServiceAllowList {
    /// An empty list: no IAM caller is served.
    pub fn empty() -> ServiceAllowList {
        ServiceAllowList::default()
    }

    /// Builds the list from ARNs.
    ///
    /// # Errors
    /// [`InvalidArn`] for the first entry that is not an ARN or holds a wildcard.
    pub fn from_arns<I, S>(arns: I) -> std::result::Result<ServiceAllowList, InvalidArn>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut entries = Vec::new();
        for arn in arns {
            let arn = arn.as_ref().trim();
            if arn.is_empty() {
                continue;
            }
            let invalid = |reason| InvalidArn {
                entry: arn.to_string(),
                reason,
            };
            if arn.contains(['*', '?']) {
                return Err(invalid("wildcards are not allowed"));
            }
            let id = identity(arn).ok_or_else(|| invalid("not an IAM ARN"))?;
            entries.push((arn.to_string(), id));
        }
        Ok(ServiceAllowList { entries })
    }

    /// Parses a comma- or whitespace-separated list (the environment form).
    ///
    /// # Errors
    /// As [`ServiceAllowList::from_arns`].
    pub fn parse(list: &str) -> std::result::Result<ServiceAllowList, InvalidArn> {
        ServiceAllowList::from_arns(list.split(|c: char| c == ',' || c.is_whitespace()))
    }

    /// True when no caller is allowed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries as configured.
    pub fn entries(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(s, _)| s.as_str())
    }

    /// True when the verified caller is on the list.
    pub fn allows(&self, caller: VerifiedIamCaller<'_>) -> bool {
        match identity(caller.0) {
            Some(id) => self.entries.iter().any(|(_, e)| *e == id),
            None => false,
        }
    }

    /// The service principal for an allow-listed caller.
    ///
    /// # Errors
    /// [`AuthError::ServiceNotAllowed`] for any other caller.
    pub fn authorize(&self, caller: VerifiedIamCaller<'_>) -> Result<Principal> {
        if self.allows(caller) {
            Ok(Principal::Service(ServicePrincipal {
                caller: ServiceCaller::Iam {
                    arn: caller.0.to_string(),
                },
            }))
        } else {
            Err(AuthError::ServiceNotAllowed {
                caller_arn: caller.0.chars().take(256).collect(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROLE: &str = "arn:aws:iam::123456789012:role/identity-api";
    const SESSION: &str = "arn:aws:sts::123456789012:assumed-role/identity-api/i-0abc";

    #[test]
    fn role_entries_match_their_sessions() {
        let list = ServiceAllowList::parse(&format!(
            "{ROLE}, arn:aws:iam::123456789012:role/svc/rewards-api\narn:aws:iam::123456789012:user/ops"
        ))
        .unwrap();
        assert_eq!(list.entries().count(), 3);
        for ok in [
            SESSION,
            ROLE,
            "arn:aws:sts::123456789012:assumed-role/rewards-api/lambda-7",
            "arn:aws:iam::123456789012:user/ops",
        ] {
            assert!(list.allows(VerifiedIamCaller(ok)), "{ok}");
        }
        for no in [
            "arn:aws:sts::999999999999:assumed-role/identity-api/i-0abc",
            "arn:aws-cn:sts::123456789012:assumed-role/identity-api/i-0abc",
            "arn:aws:sts::123456789012:assumed-role/identity-api-2/x",
            "arn:aws:sts::123456789012:assumed-role/identity-api",
            "arn:aws:iam::123456789012:user/ops2",
            "arn:aws:iam::123456789012:root",
            "identity-api",
            "",
        ] {
            assert!(!list.allows(VerifiedIamCaller(no)), "{no}");
        }
    }

    #[test]
    fn bad_entries_are_refused() {
        assert!(ServiceAllowList::parse("arn:aws:iam::123456789012:role/*").is_err());
        assert!(ServiceAllowList::parse("*").is_err());
        assert!(ServiceAllowList::parse("identity-api").is_err());
        assert!(ServiceAllowList::parse("arn:aws:iam::123456789012:role/").is_err());
        assert!(ServiceAllowList::parse(" , ").unwrap().is_empty());
    }

    #[test]
    fn authorize_yields_a_service_principal() {
        let list = ServiceAllowList::from_arns([ROLE]).unwrap();
        let p = list.authorize(VerifiedIamCaller(SESSION)).unwrap();
        assert!(p.reads_any_subject());
        assert_eq!(p.limiter_key(), Some(SESSION));
        let e = ServiceAllowList::empty()
            .authorize(VerifiedIamCaller(SESSION))
            .unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::Forbidden);
    }
}
