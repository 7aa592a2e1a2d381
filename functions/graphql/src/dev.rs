//! Local demo auth (feature `dev`, `DQ_DEV_AUTH=1`, refused inside Lambda): a fresh signing
//! key whose JWKS the demo serves, and a ready-to-paste `curl` with a token for one vehicle.

use auth::dev::{now_secs, DevClaims, DevSigner};
use auth::{Permission, TokenValidator};

/// The demo vehicle when `DQ_DEV_SUBJECT` is unset.
const DEFAULT_SUBJECT: &str = "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:1";

/// The validator for the demo's tokens, the JWKS to serve, and the `curl` to print.
pub fn setup(port: u16) -> Result<(TokenValidator, String, String), String> {
    let issuer = format!("http://localhost:{port}");
    let signer = DevSigner::generate(issuer).map_err(|e| e.to_string())?;
    let subject = std::env::var("DQ_DEV_SUBJECT").unwrap_or_else(|_| DEFAULT_SUBJECT.into());
    let mut claims = DevClaims::vehicle(
        subject.clone(),
        &[
            Permission::GetNonLocationHistory,
            Permission::GetLocationHistory,
            Permission::GetApproximateLocation,
            Permission::GetRawData,
        ],
    );
    claims.expires_at = now_secs() + 24 * 3600;
    let token = signer.mint(&claims).map_err(|e| e.to_string())?;
    let query = format!(
        r#"{{"query":"{{ signalsLatest(subject: \"{subject}\") {{ lastSeen speed {{ timestamp value }} currentLocationCoordinates {{ timestamp value {{ latitude longitude }} }} }} }}"}}"#
    );
    let curl = format!(
        "curl -s http://localhost:{port}/query -H 'Content-Type: application/json' -H 'Authorization: Bearer {token}' -d '{query}'"
    );
    let validator = signer.validator().map_err(|e| e.to_string())?;
    Ok((validator, signer.jwks_json(), curl))
}
