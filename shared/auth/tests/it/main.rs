//! Integration tests of dq-auth. Every token is minted with a real RSA key by the development
//! signer and verified by the production validator; nothing in the verification path is mocked.
// Integration-test helpers fail their test by panicking, like the #[test] bodies clippy.toml exempts.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::panic, clippy::indexing_slicing)]

mod cache;
mod cloud_events;
mod directives;
mod errors;
mod grpc;
mod jwt;
mod keys;
mod remote;
mod settings;
mod signals;

use dq_auth::dev::{DevClaims, DevSigner};
use dq_auth::{DeviceLinks, IdentityError, LinkFuture, Permission, Principal, TokenValidator};
use std::collections::HashMap;
use std::sync::OnceLock;

pub const ISSUER: &str = "https://auth.dev.dimo.zone";
pub const VEHICLE_CONTRACT: &str = "0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF";
pub const DEVICE_CONTRACT: &str = "0x9c94C395cBcBDe662235E0A9d3bB87Ad708561BA";

pub fn vehicle(token: u64) -> String {
    format!("did:erc721:137:{VEHICLE_CONTRACT}:{token}")
}

pub fn device(token: u64) -> String {
    format!("did:erc721:137:{DEVICE_CONTRACT}:{token}")
}

/// One signer per test binary: key generation is the slow part.
pub fn signer() -> &'static DevSigner {
    static SIGNER: OnceLock<DevSigner> = OnceLock::new();
    SIGNER.get_or_init(|| DevSigner::generate(ISSUER).expect("keygen"))
}

pub fn validator() -> TokenValidator {
    signer().validator().expect("validator")
}

/// Mints and validates a token: the principal a real request would carry.
pub fn principal(asset: &str, permissions: &[Permission]) -> Principal {
    let token = signer()
        .mint(&DevClaims::vehicle(asset, permissions))
        .expect("mint");
    validator()
        .validate_sync(&token, &signer().key_set().expect("keys"))
        .expect("valid token")
}

/// identity-api stand-in: device DID → vehicle DID, or a lookup failure.
#[derive(Default)]
pub struct Links {
    pub pairs: HashMap<String, String>,
    pub fail: bool,
    pub calls: std::sync::atomic::AtomicUsize,
}

impl DeviceLinks for Links {
    fn paired_vehicle<'a>(&'a self, device_did: &'a str) -> LinkFuture<'a> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let result = if self.fail {
            Err(IdentityError::new("identity-api returned 502"))
        } else {
            Ok(self.pairs.get(device_did).cloned())
        };
        Box::pin(async move { result })
    }
}
