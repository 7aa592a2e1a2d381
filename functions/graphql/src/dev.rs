//! Local demo auth (feature `dev`, `DQ_DEV_AUTH=1`, refused inside Lambda): a fresh signing
//! key whose JWKS the demo serves, and a ready-to-paste `curl` with a token for one vehicle,
//! written in the dialect the process serves (`GRAPHQL_DIALECT`).

use dq_auth::dev::{DevClaims, DevSigner};
use dq_auth::TokenValidator;

/// The demo vehicle when `DQ_DEV_SUBJECT` is unset.
const DEFAULT_SUBJECT: &str = "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:1";

/// The validator for the demo's tokens, the JWKS to serve, and the `curl` to print.
pub fn setup(port: u16) -> Result<(TokenValidator, String, String), String> {
    let issuer = format!("http://localhost:{port}");
    let signer = DevSigner::generate(issuer).map_err(|e| e.to_string())?;
    // The token's asset is the vehicle DID in every dialect (telemetry's gate decodes it and
    // compares contract and token id with the query's tokenId).
    let subject = std::env::var("DQ_DEV_SUBJECT").unwrap_or_else(|_| DEFAULT_SUBJECT.into());
    let dialect = std::env::var("GRAPHQL_DIALECT").unwrap_or_default();
    let query = match dialect.trim() {
        "telemetry" => {
            let token_id = token_id(&subject).ok_or_else(|| {
                format!(
                    "the telemetry dialect needs a vehicle DID did:erc721:<chain>:<contract>:<tokenId> \
                     in DQ_DEV_SUBJECT, not {subject:?}"
                )
            })?;
            format!(
                r#"{{"query":"{{ signalsLatest(tokenId: {token_id}) {{ lastSeen speed {{ timestamp value }} currentLocationCoordinates {{ timestamp value {{ latitude longitude }} }} }} }}"}}"#
            )
        }
        "fetch" => format!(
            r#"{{"query":"{{ cloudEvents(did: \"{subject}\", limit: 3) {{ header {{ id type time }} }} }}"}}"#
        ),
        _ => format!(
            r#"{{"query":"{{ signalsLatest(subject: \"{subject}\") {{ lastSeen speed {{ timestamp value }} currentLocationCoordinates {{ timestamp value {{ latitude longitude }} }} }} }}"}}"#
        ),
    };
    // Every grant a dialect's root fields check (DevClaims::demo), so each documented query works.
    let token = signer
        .mint(&DevClaims::demo(subject.clone()))
        .map_err(|e| e.to_string())?;
    // The same token prefills GraphiQL's Authorization header through `?token=`.
    let curl = format!(
        "curl -s http://localhost:{port}/query -H 'Content-Type: application/json' -H 'Authorization: Bearer {token}' -d '{query}'\n\
         or open GraphiQL: http://localhost:{port}/?token={token}"
    );
    let validator = signer.validator().map_err(|e| e.to_string())?;
    Ok((validator, signer.jwks_json(), curl))
}

/// The token id of a `did:erc721:<chain>:<contract>:<tokenId>` vehicle DID.
fn token_id(subject: &str) -> Option<u32> {
    let parts: Vec<&str> = subject.split(':').collect();
    match parts.as_slice() {
        ["did", "erc721", _, _, id] => id.parse().ok(),
        _ => None,
    }
}
