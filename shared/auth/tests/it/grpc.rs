//! FetchService authorization and issue 7's service callers: nobody unauthenticated is
//! ever served.

use crate::{device, principal, signer, validator, vehicle, Links};
use dq_auth::dev::{now_secs, DevClaims};
use dq_auth::{
    authorize_index_subjects, authorize_subject_filter, AuthError, ErrorCode, GrpcAuthenticator,
    GrpcCredentials, Permission, Principal, ServiceAllowList, ServiceCaller, ServicePrincipal,
    SubjectScope, Surface, TrustedNetworks, VerifiedIamCaller,
};

const ALLOWED_ROLE: &str = "arn:aws:iam::123456789012:role/telemetry-api";
const ALLOWED_CALLER: &str = "arn:aws:sts::123456789012:assumed-role/telemetry-api/lambda-1";
const OTHER_CALLER: &str = "arn:aws:sts::123456789012:assumed-role/random-app/lambda-1";

fn authenticator(require_jwt: bool) -> GrpcAuthenticator {
    GrpcAuthenticator::new(Some(validator()), require_jwt)
        .with_allow_list(ServiceAllowList::from_arns([ALLOWED_ROLE]).unwrap())
}

fn bearer(perms: &[Permission]) -> String {
    format!(
        "Bearer {}",
        signer()
            .mint(&DevClaims::vehicle(vehicle(42), perms))
            .unwrap()
    )
}

async fn auth(
    a: &GrpcAuthenticator,
    authorization: Option<&str>,
    iam: Option<&str>,
) -> Result<Option<Principal>, AuthError> {
    a.authenticate(GrpcCredentials {
        authorization,
        iam_caller: iam.map(VerifiedIamCaller),
        peer: None,
    })
    .await
}

/// A call from the TCP peer `peer` (no IAM caller).
async fn auth_from(
    a: &GrpcAuthenticator,
    authorization: Option<&str>,
    peer: &str,
) -> Result<Option<Principal>, AuthError> {
    a.authenticate(GrpcCredentials {
        authorization,
        iam_caller: None,
        peer: Some(peer.parse().unwrap()),
    })
    .await
}

#[tokio::test]
async fn interceptor_rules() {
    let a = authenticator(true);
    // Missing token with FETCH_GRPC_REQUIRE_JWT.
    let e = auth(&a, None, None).await.unwrap_err();
    assert_eq!(
        (e.code().grpc_code(), e.message(Surface::Grpc).as_str()),
        (16, "missing bearer token")
    );
    // Invalid and expired tokens.
    let mut c = DevClaims::vehicle(vehicle(42), &[Permission::GetRawData]);
    c.expires_at = now_secs() - 5;
    let expired = signer().mint(&c).unwrap();
    for bad in ["Bearer nope", expired.as_str()] {
        let e = auth(&a, Some(bad), None).await.unwrap_err();
        assert_eq!(
            (e.code().grpc_code(), e.message(Surface::Grpc).as_str()),
            (16, "invalid token")
        );
    }
    // Valid token without raw-data access.
    let e = auth(&a, Some(&bearer(&[Permission::GetLocationHistory])), None)
        .await
        .unwrap_err();
    assert_eq!(
        (e.code().grpc_code(), e.message(Surface::Grpc).as_str()),
        (7, "token lacks raw-data permission")
    );
    // Valid token, prefix optional and case-insensitive.
    let ok = bearer(&[Permission::GetRawData]);
    assert!(auth(&a, Some(&ok), None).await.unwrap().is_some());
    let bare = ok.trim_start_matches("Bearer ");
    assert!(auth(&a, Some(bare), None).await.unwrap().is_some());
    assert!(auth(&a, Some(&format!("bearer {bare}")), None)
        .await
        .unwrap()
        .is_some());
}

#[tokio::test]
async fn without_require_jwt_a_tokenless_call_still_gets_no_data() {
    let a = authenticator(false);
    let caller = auth(&a, None, None).await.unwrap();
    assert_eq!(caller, None);
    let e = authorize_subject_filter(caller.as_ref(), &[vehicle(42)], None)
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), e.message(Surface::Grpc).as_str()),
        (ErrorCode::Unauthenticated, "no token claims")
    );
    let e = authorize_index_subjects(caller.as_ref(), &[vehicle(42)], None)
        .await
        .unwrap_err();
    assert_eq!(e.code().grpc_code(), 16);
    // No issuer configured: a token cannot be checked, so it is no identity.
    let no_issuer = GrpcAuthenticator::new(None, false);
    assert_eq!(
        auth(&no_issuer, Some(&bearer(&[Permission::GetRawData])), None).await,
        Ok(None)
    );
}

#[tokio::test]
async fn iam_allow_list() {
    let a = authenticator(true);
    let p = auth(&a, None, Some(ALLOWED_CALLER)).await.unwrap().unwrap();
    assert!(p.reads_any_subject());
    assert_eq!(
        authorize_subject_filter(Some(&p), &[vehicle(1), vehicle(2)], None).await,
        Ok(SubjectScope::Unrestricted)
    );
    assert_eq!(
        authorize_subject_filter(Some(&p), &Vec::<String>::new(), None).await,
        Ok(SubjectScope::Unrestricted)
    );
    // Its Authorization header is SigV4, not a JWT: ignored rather than "invalid token".
    let p2 = auth(
        &a,
        Some("AWS4-HMAC-SHA256 Credential=AKIA/..."),
        Some(ALLOWED_CALLER),
    )
    .await
    .unwrap();
    assert!(p2.is_some());
    // Any other IAM caller is refused, even with a valid token alongside.
    for iam in [
        OTHER_CALLER,
        "arn:aws:sts::999999999999:assumed-role/telemetry-api/x",
        "",
    ] {
        let e = auth(&a, Some(&bearer(&[Permission::GetRawData])), Some(iam))
            .await
            .unwrap_err();
        assert_eq!(e.code().grpc_code(), 7, "{iam}");
        assert_eq!(e.message(Surface::Grpc), "caller is not allowed");
    }
    // No allow-list: every IAM caller is refused.
    let none = GrpcAuthenticator::new(Some(validator()), false);
    assert!(auth(&none, None, Some(ALLOWED_CALLER)).await.is_err());
}

#[tokio::test]
async fn local_trust_setting() {
    let a = GrpcAuthenticator::new(Some(validator()), true).trust_unauthenticated(true);
    let p = auth(&a, None, None).await.unwrap().unwrap();
    assert!(p.reads_any_subject());
    // A presented token is still validated, not waved through.
    assert!(auth(&a, Some("Bearer nope"), None).await.is_err());
    let t = auth(&a, Some(&bearer(&[Permission::GetRawData])), None)
        .await
        .unwrap()
        .unwrap();
    assert!(!t.reads_any_subject());
}

#[tokio::test]
async fn trusted_networks_serve_tokenless_peers_inside_them() {
    let a = authenticator(true)
        .trust_networks(TrustedNetworks::parse("10.0.0.0/16, fd00:ab::/32").unwrap());
    let service = |network: &str| {
        Some(Principal::Service(ServicePrincipal {
            caller: ServiceCaller::TrustedNetwork {
                network: network.into(),
            },
        }))
    };
    for (peer, network) in [
        ("10.0.3.4", "10.0.0.0/16"),
        // A dual-stack listener reports IPv4 peers as IPv4-mapped IPv6 addresses.
        ("::ffff:10.0.200.1", "10.0.0.0/16"),
        ("fd00:ab::7", "fd00:ab::/32"),
    ] {
        let p = auth_from(&a, None, peer).await.unwrap();
        assert_eq!(p, service(network), "{peer}");
        let p = p.unwrap();
        assert!(p.reads_any_subject());
        assert_eq!(p.limiter_key(), Some(network));
        assert_eq!(
            authorize_subject_filter(Some(&p), &Vec::<String>::new(), None).await,
            Ok(SubjectScope::Unrestricted)
        );
    }
    // Outside the networks (or no peer at all, as in Lambda): what require-JWT gives.
    for peer in ["10.1.0.1", "192.168.0.1", "fd00:ac::1", "127.0.0.1"] {
        let e = auth_from(&a, None, peer).await.unwrap_err();
        assert_eq!(
            (e.code().grpc_code(), e.message(Surface::Grpc).as_str()),
            (16, "missing bearer token"),
            "{peer}"
        );
    }
    assert!(auth(&a, None, None).await.is_err());
    let lenient =
        authenticator(false).trust_networks(TrustedNetworks::parse("10.0.0.0/16").unwrap());
    assert_eq!(auth_from(&lenient, None, "10.9.0.1").await, Ok(None));
    // A token from inside a trusted network is still validated, not waved through.
    let e = auth_from(&a, Some("Bearer nope"), "10.0.3.4")
        .await
        .unwrap_err();
    assert_eq!(e.message(Surface::Grpc), "invalid token");
    let t = auth_from(&a, Some(&bearer(&[Permission::GetRawData])), "10.0.3.4")
        .await
        .unwrap()
        .unwrap();
    assert!(!t.reads_any_subject());
}

#[tokio::test]
async fn per_rpc_subject_scope() {
    let p = principal(&vehicle(42), &[Permission::GetRawData]);
    let mut links = Links::default();
    links.pairs.insert(device(7), vehicle(42));
    // Required.
    for empty in [vec![], vec![String::new()]] {
        let e = authorize_subject_filter(Some(&p), &empty, Some(&links))
            .await
            .unwrap_err();
        assert_eq!(
            (e.code().grpc_code(), e.message(Surface::Grpc).as_str()),
            (7, "subject is required")
        );
    }
    // Replaced by exactly the authorized (normalized) list.
    let messy = device(7).to_lowercase();
    let scope = authorize_subject_filter(
        Some(&p),
        &[vehicle(42), messy.clone(), vehicle(42)],
        Some(&links),
    )
    .await
    .unwrap();
    assert_eq!(
        scope.search_dids(),
        Some(vec![vehicle(42).as_str(), device(7).as_str()])
    );
    // One foreign subject fails the whole call.
    let e = authorize_subject_filter(Some(&p), &[vehicle(42), vehicle(43)], Some(&links))
        .await
        .unwrap_err();
    assert_eq!(
        (e.code().grpc_code(), e.message(Surface::Grpc).as_str()),
        (7, "no access to subject")
    );
}

#[tokio::test]
async fn index_subjects_are_each_authorized_in_order() {
    let p = principal(&vehicle(42), &[Permission::GetRawData]);
    let mut links = Links::default();
    links.pairs.insert(device(7), vehicle(42));
    let subjects = [device(7), vehicle(42), device(7), device(7)];
    let out = authorize_index_subjects(Some(&p), &subjects, Some(&links))
        .await
        .unwrap();
    let search: Vec<&str> = out.iter().map(|a| a.search.as_str()).collect();
    assert_eq!(search, [device(7), vehicle(42), device(7), device(7)]);
    assert_eq!(
        links.calls.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "one lookup per distinct subject"
    );
    let e = authorize_index_subjects(Some(&p), &[vehicle(42), vehicle(1)], Some(&links))
        .await
        .unwrap_err();
    assert_eq!(e.message(Surface::Grpc), "no access to subject");
}
