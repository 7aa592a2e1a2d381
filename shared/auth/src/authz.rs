//! Authorization rules shared by every surface: the GraphQL directives (and telemetry's vehicle
//! gate), cloud-event subject access, per-signal privilege filtering and telemetry's
//! `cloud_events` grants.
//!
//! Every function takes the caller as `Option<&Principal>`: `None` is an unauthenticated
//! request, and each rule reports that with its own [`Check`].

use crate::error::{AuthError, Check, Result, SubjectDenial};
use crate::permission::{Permission, Privilege};
use crate::principal::Principal;
use dq_cloudevent::{eip55, Erc721Did, EthrDid};
use std::fmt;
use std::future::Future;
use std::pin::Pin;

/// The API-only approximate-location field (not a catalog signal).
pub const APPROXIMATE_LOCATION_SIGNAL: &str = "currentLocationApproximateCoordinates";

/// The privileges of the approximate-location field's `@requiresOneOfPrivilege`
/// (telemetry's text: "[privilege:GetApproximateLocation privilege:GetLocationHistory]").
pub const APPROXIMATE_LOCATION_PRIVILEGES: [Privilege; 2] = [
    Privilege::VehicleApproximateLocation,
    Privilege::VehicleAllTimeLocation,
];

fn require_caller(caller: Option<&Principal>, check: Check) -> Result<&Principal> {
    caller.ok_or(AuthError::MissingCredentials { check })
}

// ------------------------------------------------------------------------------------------
// GraphQL directives
// ------------------------------------------------------------------------------------------

/// dq `@requiresVehicleToken`: `asset` must equal the queried `subject` byte for byte.
/// Services pass.
///
/// # Errors
/// `MissingCredentials{Directive}` ("unauthorized: jwt missing"), `SubjectMismatch`
/// ("unauthorized: DID in query does not match token claim").
pub fn require_vehicle_token(caller: Option<&Principal>, subject: &str) -> Result<()> {
    let caller = require_caller(caller, Check::Directive)?;
    if caller.reads_any_subject() || caller.asset() == Some(subject) {
        Ok(())
    } else {
        Err(AuthError::SubjectMismatch)
    }
}

/// telemetry `@requiresVehicleToken`: the asset, decoded as an ERC-721 (or
/// ethr) DID, must name `vehicle_contract` (20-byte compare, so case-insensitive) and the
/// queried `token_id`. The chain id is not compared. Services pass.
///
/// # Errors
/// `MissingCredentials{Directive}`, `VehicleContractMismatch`, `VehicleTokenIdMismatch`.
pub fn require_vehicle_token_id(
    caller: Option<&Principal>,
    token_id: i64,
    vehicle_contract: &[u8; 20],
) -> Result<()> {
    let caller = require_caller(caller, Check::Directive)?;
    if caller.reads_any_subject() {
        return Ok(());
    }
    let asset = caller.asset().unwrap_or("");
    let (contract, asset_token) = match asset.parse::<Erc721Did>() {
        Ok(did) => (did.contract, Some(did.token_id)),
        // Account tokens: their address is compared as the "contract" and fails there.
        Err(_) => match asset.parse::<EthrDid>() {
            Ok(did) => (did.address, None),
            Err(_) => ([0u8; 20], None),
        },
    };
    if &contract != vehicle_contract {
        return Err(AuthError::VehicleContractMismatch {
            claim_contract: eip55(&contract),
            required_contract: eip55(vehicle_contract),
        });
    }
    match asset_token {
        Some(t) if t == token_id.to_string() => Ok(()),
        _ => Err(AuthError::VehicleTokenIdMismatch),
    }
}

/// telemetry's extra claim validation at token acceptance: `asset` must
/// decode as `did:erc721:<uint chain>:<hex address>:<decimal>` or `did:ethr:<uint
/// chain>:<hex address>`; otherwise the whole token is invalid (HTTP 401).
///
/// # Errors
/// `InvalidToken(Asset)`.
pub fn validate_telemetry_asset(principal: &Principal) -> Result<()> {
    if principal.reads_any_subject() {
        return Ok(());
    }
    let asset = principal.asset().unwrap_or("");
    if asset.parse::<Erc721Did>().is_ok() || asset.parse::<EthrDid>().is_ok() {
        Ok(())
    } else {
        Err(AuthError::InvalidToken(crate::TokenRejection::Asset))
    }
}

/// `@requiresAllOfPrivileges(privileges)`: every one must be held.
///
/// # Errors
/// `MissingCredentials{Directive}`; `MissingPrivilege` naming the first missing one.
pub fn require_all_of(caller: Option<&Principal>, privileges: &[Privilege]) -> Result<()> {
    let caller = require_caller(caller, Check::Directive)?;
    match privileges
        .iter()
        .map(|p| Permission::from(*p))
        .find(|p| !caller.has(*p))
    {
        Some(missing) => Err(AuthError::MissingPrivilege { missing }),
        None => Ok(()),
    }
}

/// `@requiresOneOfPrivilege(privileges)`: at least one must be held.
///
/// # Errors
/// `MissingCredentials{Directive}`; `MissingAnyPrivilege` listing them all.
pub fn require_one_of(caller: Option<&Principal>, privileges: &[Privilege]) -> Result<()> {
    let caller = require_caller(caller, Check::Directive)?;
    if privileges.iter().any(|p| caller.has(Permission::from(*p))) {
        Ok(())
    } else {
        Err(AuthError::MissingAnyPrivilege {
            any_of: privileges.iter().map(|p| Permission::from(*p)).collect(),
        })
    }
}

/// The directive on a generated signal field: `@requiresAllOfPrivileges` with the catalog's
/// privileges, or `@requiresOneOfPrivilege` for [`APPROXIMATE_LOCATION_SIGNAL`]. Fields that
/// are not signals have no directive and pass.
///
/// # Errors
/// As [`require_all_of`] / [`require_one_of`].
pub fn require_signal(caller: Option<&Principal>, name: &str) -> Result<()> {
    if name == APPROXIMATE_LOCATION_SIGNAL {
        return require_one_of(caller, &APPROXIMATE_LOCATION_PRIVILEGES);
    }
    match dq_signals::signal(name) {
        Some(def) => require_all_of(caller, def.privileges),
        None => Ok(()),
    }
}

// ------------------------------------------------------------------------------------------
// Per-signal filtering of list-style results
// ------------------------------------------------------------------------------------------

/// Whether `caller` may see signal `name` in availableSignals / dataSummary / signalsSnapshot:
/// the approximate location needs `GetApproximateLocation` OR
/// `GetLocationHistory`; a catalog signal needs ALL its privileges; unknown names are denied.
pub fn may_read_signal(caller: &Principal, name: &str) -> bool {
    if name == APPROXIMATE_LOCATION_SIGNAL {
        return caller.has(Permission::GetApproximateLocation)
            || caller.has(Permission::GetLocationHistory);
    }
    match dq_signals::signal(name) {
        Some(def) => def
            .privileges
            .iter()
            .all(|p| caller.has(Permission::from(*p))),
        None => false,
    }
}

/// Keeps the items whose signal name `caller` may read, in order.
pub fn filter_signals<T>(caller: &Principal, items: Vec<T>, name: impl Fn(&T) -> &str) -> Vec<T> {
    items
        .into_iter()
        .filter(|item| may_read_signal(caller, name(item)))
        .collect()
}

// ------------------------------------------------------------------------------------------
// Cloud-event authorization
// ------------------------------------------------------------------------------------------

/// Raw-data access, step 2 of the cloud-event rule (the gRPC interceptor's rule too).
///
/// # Errors
/// `MissingCredentials{SubjectAccess}` ("unauthorized: no token claims"),
/// `MissingRawDataAccess`.
pub fn require_raw_data(caller: Option<&Principal>) -> Result<&Principal> {
    let caller = require_caller(caller, Check::SubjectAccess)?;
    if caller.permissions().has_raw_data_access() {
        Ok(caller)
    } else {
        Err(AuthError::MissingRawDataAccess)
    }
}

/// A failed identity lookup (as text, for logs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct IdentityError(pub String);

impl IdentityError {
    /// Wraps any displayable error.
    pub fn new(e: impl fmt::Display) -> Self {
        IdentityError(e.to_string())
    }
}

/// The future a [`DeviceLinks`] lookup returns.
pub type LinkFuture<'a> =
    Pin<Box<dyn Future<Output = std::result::Result<Option<String>, IdentityError>> + Send + 'a>>;

/// The device → vehicle lookup (identity-api in production), injected so
/// this crate needs no HTTP client.
pub trait DeviceLinks: Send + Sync {
    /// The `tokenDID` of the vehicle the device `device_did` (normalized ERC-721 DID) is
    /// paired to; `Ok(None)` when it is paired to none.
    fn paired_vehicle<'a>(&'a self, device_did: &'a str) -> LinkFuture<'a>;
}

/// A subject the caller may read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizedSubject {
    /// The subject as requested.
    pub requested: String,
    /// The DID to search: the request verbatim when it is the token's asset (or the caller is
    /// a service); the normalized device DID (EIP-55 contract, canonical token id) when access
    /// comes from a device link.
    pub search: String,
}

/// Step 3 of the cloud-event rule for one subject, after steps 1–2: the token's own asset, or a
/// device that identity-api reports paired to that asset. Services read any subject verbatim.
///
/// # Errors
/// `SubjectDenied` with the reason.
pub async fn authorize_subject(
    caller: &Principal,
    subject: &str,
    links: Option<&dyn DeviceLinks>,
) -> Result<AuthorizedSubject> {
    if caller.reads_any_subject() || caller.asset() == Some(subject) {
        return Ok(AuthorizedSubject {
            requested: subject.to_string(),
            search: subject.to_string(),
        });
    }
    let deny = |reason| AuthError::SubjectDenied {
        subject: subject.to_string(),
        reason,
    };
    let device = subject
        .parse::<Erc721Did>()
        .map_err(|_| deny(SubjectDenial::NotErc721))?;
    let links = links.ok_or_else(|| deny(SubjectDenial::NoIdentityClient))?;
    let normalized = device.to_string();
    let vehicle = links
        .paired_vehicle(&normalized)
        .await
        .map_err(|e| deny(SubjectDenial::LookupFailed(e.0)))?;
    match (vehicle, caller.asset()) {
        (Some(vehicle), Some(asset)) if vehicle == asset => Ok(AuthorizedSubject {
            requested: subject.to_string(),
            search: normalized,
        }),
        _ => Err(deny(SubjectDenial::NotLinked)),
    }
}

/// The GraphQL cloud-event resolvers' whole rule (steps 1–3, also the fetch dialect's `did` rule).
///
/// # Errors
/// `MissingCredentials{SubjectAccess}`, `MissingRawDataAccess`, `SubjectDenied`.
pub async fn authorize_cloud_events(
    caller: Option<&Principal>,
    subject: &str,
    links: Option<&dyn DeviceLinks>,
) -> Result<AuthorizedSubject> {
    let caller = require_raw_data(caller)?;
    authorize_subject(caller, subject, links).await
}

// ------------------------------------------------------------------------------------------
// telemetry `attestations`
// ------------------------------------------------------------------------------------------

/// What an `attestations` query asks for, as the grant check sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttestationRequest<'a> {
    /// The requested subject (verbatim).
    pub subject: &'a str,
    /// The filter's source address rendered EIP-55, or `None` when unfiltered.
    pub source: Option<&'a str>,
    /// The filter's event id, or `None` when unfiltered.
    pub id: Option<&'a str>,
}

/// The attestation event type.
pub const ATTESTATION_TYPE: &str = "dimo.attestation";

/// telemetry `attestations` authorization: a `cloud_events` claim, subject
/// == asset (exact), and a grant whose type is `dimo.attestation` or `*`, whose source is `*`
/// or the requested source (`*` when unfiltered), and whose ids contain `*` or the requested
/// id (`*` when unfiltered). Tags are ignored. Services pass.
///
/// # Errors
/// `GrantDenied` ("invalid claims", code `UNAUTHORIZED`) for every failure, including none.
pub fn authorize_attestations(
    caller: Option<&Principal>,
    request: &AttestationRequest<'_>,
) -> Result<()> {
    let caller = caller.ok_or(AuthError::GrantDenied)?;
    let Principal::Token(token) = caller else {
        return Ok(());
    };
    let grants = token.cloud_events.as_ref().ok_or(AuthError::GrantDenied)?;
    if token.asset.as_deref() != Some(request.subject) {
        return Err(AuthError::GrantDenied);
    }
    let source = request.source.unwrap_or("*");
    let id = request.id.unwrap_or("*");
    let admitted = grants.events.iter().any(|g| {
        (g.event_type == ATTESTATION_TYPE || g.event_type == "*")
            && (g.source == "*" || g.source == source)
            && g.ids.iter().any(|i| i == "*" || i == id)
    });
    if admitted {
        Ok(())
    } else {
        Err(AuthError::GrantDenied)
    }
}
