//! JWT validation: every rejection case, and what a valid token yields.

use crate::{signer, validator, vehicle, ISSUER};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use dq_auth::dev::{now_secs, DevClaims, DevSigner};
use dq_auth::{AuthError, ErrorCode, Permission, Principal, Surface, TokenRejection};
use serde_json::json;

fn claims() -> DevClaims {
    DevClaims::vehicle(
        vehicle(42),
        &[Permission::GetNonLocationHistory, Permission::GetRawData],
    )
}

async fn check(token: &str) -> Result<Principal, AuthError> {
    validator().validate(token).await
}

async fn rejection(token: &str) -> TokenRejection {
    match check(token).await {
        Err(AuthError::InvalidToken(r)) => r,
        other => panic!("expected an invalid token, got {other:?}"),
    }
}

#[tokio::test]
async fn valid_token_yields_the_claims() {
    let mut c = claims();
    c.permissions.push("privilege:SomethingNew".into());
    c.cloud_events = Some(json!({"events": [{"event_type": "*", "source": "*", "ids": ["*"]}]}));
    let token = signer().mint(&c).unwrap();
    let Principal::Token(t) = check(&token).await.unwrap() else {
        panic!("token principal expected")
    };
    assert_eq!(t.asset.as_deref(), Some(vehicle(42).as_str()));
    assert_eq!(
        t.token_subject.as_deref(),
        Some("0xdevlicense000000000000000000000000000000")
    );
    assert_eq!(
        t.permissions.iter().collect::<Vec<_>>(),
        [Permission::GetNonLocationHistory, Permission::GetRawData]
    );
    assert_eq!(t.expires_at, u64::try_from(c.expires_at).unwrap());
    assert_eq!(t.cloud_events.unwrap().events.len(), 1);
}

#[tokio::test]
async fn audience_may_be_a_string_or_contain_dimo_zone() {
    for aud in [json!("dimo.zone"), json!(["other", "dimo.zone"])] {
        let mut v = claims().to_json(ISSUER);
        v["aud"] = aud;
        let token = signer()
            .sign_json(&json!({"alg": "RS256", "kid": signer().kid()}), &v)
            .unwrap();
        assert!(check(&token).await.is_ok());
    }
}

#[tokio::test]
async fn missing_token_is_not_an_error_over_http() {
    let v = validator();
    assert_eq!(v.authenticate_http(None).await, Ok(None));
    assert_eq!(v.authenticate_http(Some("")).await, Ok(None));
    let e = v.authenticate_http(Some("Token abc")).await.unwrap_err();
    assert_eq!(e, AuthError::MalformedHeader);
    assert_eq!(e.code().http_status(), 500);
    assert_eq!(
        e.message(Surface::Http),
        "Something went wrong while checking the JWT."
    );
    let token = signer().mint(&claims()).unwrap();
    assert!(v
        .authenticate_http(Some(&format!("Bearer {token}")))
        .await
        .unwrap()
        .is_some());
    let e = v.authenticate_http(Some("Bearer x.y.z")).await.unwrap_err();
    assert_eq!(e.code().http_status(), 401);
    assert_eq!(e.message(Surface::Http), "JWT is invalid.");
}

#[tokio::test]
async fn expired_and_not_yet_valid() {
    let mut c = claims();
    c.expires_at = now_secs() - 2;
    assert_eq!(
        rejection(&signer().mint(&c).unwrap()).await,
        TokenRejection::Expired
    );
    let mut c = claims();
    c.not_before = Some(now_secs() + 120);
    assert_eq!(
        rejection(&signer().mint(&c).unwrap()).await,
        TokenRejection::NotYetValid
    );
}

#[tokio::test]
async fn wrong_audience_and_issuer() {
    let mut c = claims();
    c.audience = vec!["dimo.zone.evil".into(), "DIMO.ZONE".into()];
    assert_eq!(
        rejection(&signer().mint(&c).unwrap()).await,
        TokenRejection::Audience
    );
    let mut c = claims();
    c.issuer = Some(format!("{ISSUER}/"));
    assert_eq!(
        rejection(&signer().mint(&c).unwrap()).await,
        TokenRejection::Issuer
    );
}

#[tokio::test]
async fn registered_claims_are_required_and_typed() {
    for (field, value) in [
        ("exp", None),
        ("iss", None),
        ("aud", None),
        // Type confusion (CVE-2026-25537): a string nbf/exp must not skip the check.
        ("nbf", Some(json!((now_secs() + 3600).to_string()))),
        ("exp", Some(json!("never"))),
        ("asset", Some(json!(42))),
        ("permissions", Some(json!("privilege:GetRawData"))),
    ] {
        let mut v = claims().to_json(ISSUER);
        match value {
            None => {
                v.as_object_mut().unwrap().remove(field);
            }
            Some(x) => v[field] = x,
        }
        let token = signer()
            .sign_json(&json!({"alg": "RS256", "kid": signer().kid()}), &v)
            .unwrap();
        let r = rejection(&token).await;
        assert!(
            matches!(r, TokenRejection::MissingClaim(_) | TokenRejection::Claims),
            "{field}: {r:?}"
        );
    }
}

#[tokio::test]
async fn alg_none_is_rejected() {
    let body = URL_SAFE_NO_PAD.encode(claims().to_json(ISSUER).to_string());
    for header in [
        json!({"alg": "none", "kid": signer().kid()}),
        json!({"alg": "None", "kid": signer().kid()}),
        json!({"kid": signer().kid()}),
    ] {
        let head = URL_SAFE_NO_PAD.encode(header.to_string());
        for token in [format!("{head}.{body}."), format!("{head}.{body}")] {
            let r = check(&token).await.unwrap_err();
            assert!(matches!(r, AuthError::InvalidToken(_)), "{r:?}");
        }
    }
}

#[tokio::test]
async fn hs256_signed_with_the_public_key_is_rejected() {
    use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
    let jwks: serde_json::Value = serde_json::from_str(&signer().jwks_json()).unwrap();
    let n = jwks["keys"][0]["n"].as_str().unwrap().to_string();
    let secrets: Vec<Vec<u8>> = vec![
        signer().public_key_der().unwrap(),
        signer().jwks_json().into_bytes(),
        n.into_bytes(),
    ];
    for secret in secrets {
        for alg in [Algorithm::HS256, Algorithm::HS384, Algorithm::HS512] {
            let mut header = Header::new(alg);
            header.kid = Some(signer().kid().to_string());
            let token = encode(
                &header,
                &claims().to_json(ISSUER),
                &EncodingKey::from_secret(&secret).unwrap(),
            )
            .unwrap();
            assert!(matches!(
                rejection(&token).await,
                TokenRejection::Algorithm(_)
            ));
        }
    }
}

#[tokio::test]
async fn other_rsa_algorithms_are_rejected() {
    // A real RS256 signature under a header claiming RS512/PS256 must not be accepted either.
    for alg in ["RS512", "PS256", "ES256"] {
        let token = signer()
            .sign_json(
                &json!({"alg": alg, "kid": signer().kid()}),
                &claims().to_json(ISSUER),
            )
            .unwrap();
        assert_eq!(
            rejection(&token).await,
            TokenRejection::Algorithm(alg.into())
        );
    }
}

#[tokio::test]
async fn unknown_or_missing_kid() {
    let token = signer()
        .sign_json(
            &json!({"alg": "RS256", "kid": "rotated-away"}),
            &claims().to_json(ISSUER),
        )
        .unwrap();
    assert_eq!(
        rejection(&token).await,
        TokenRejection::UnknownKid("rotated-away".into())
    );
    let token = signer()
        .sign_json(&json!({"alg": "RS256"}), &claims().to_json(ISSUER))
        .unwrap();
    assert_eq!(rejection(&token).await, TokenRejection::MissingKid);
}

#[tokio::test]
async fn a_different_key_under_our_kid_is_rejected() {
    let other = DevSigner::generate(ISSUER).unwrap();
    let token = other
        .sign_json(
            &json!({"alg": "RS256", "kid": signer().kid()}),
            &claims().to_json(ISSUER),
        )
        .unwrap();
    assert_eq!(rejection(&token).await, TokenRejection::Signature);
}

#[tokio::test]
async fn tampered_payload_and_signature() {
    let token = signer().mint(&claims()).unwrap();
    let parts: Vec<&str> = token.split('.').collect();
    // Another vehicle, same signature.
    let mut forged = claims().to_json(ISSUER);
    forged["asset"] = json!(vehicle(43));
    let forged = URL_SAFE_NO_PAD.encode(forged.to_string());
    let tampered = format!("{}.{}.{}", parts[0], forged, parts[2]);
    assert_eq!(rejection(&tampered).await, TokenRejection::Signature);
    // Flip one signature character — in the middle: the last character of an RS256 signature
    // carries padding bits, and a non-zero one there makes the token malformed, not forged.
    let mut sig = parts[2].to_string();
    let mid = sig.len() / 2;
    let flipped = if &sig[mid..=mid] == "A" { "B" } else { "A" };
    sig.replace_range(mid..=mid, flipped);
    let tampered = format!("{}.{}.{}", parts[0], parts[1], sig);
    assert_eq!(rejection(&tampered).await, TokenRejection::Signature);
    // Header swapped (kid unchanged, typ added): the signature covers the header too.
    let head = URL_SAFE_NO_PAD
        .encode(json!({"alg": "RS256", "kid": signer().kid(), "typ": "at+jwt"}).to_string());
    let tampered = format!("{}.{}.{}", head, parts[1], parts[2]);
    assert_eq!(rejection(&tampered).await, TokenRejection::Signature);
}

#[tokio::test]
async fn garbage_never_panics() {
    for token in [
        "",
        ".",
        "..",
        "a.b.c",
        "eyJhbGciOiJSUzI1NiJ9..",
        "\u{0}\u{1}.\u{ff}.x",
        "ëyJ.é.ü",
        &"A".repeat(100_000),
    ] {
        let e = check(token).await.unwrap_err();
        assert_eq!(e.code(), ErrorCode::Unauthenticated, "{token:.20}");
    }
}

#[tokio::test]
async fn errors_never_contain_the_token() {
    let mut c = claims();
    c.expires_at = now_secs() - 10;
    let token = signer().mint(&c).unwrap();
    let e = check(&token).await.unwrap_err();
    let sig = token.rsplit('.').next().unwrap();
    for text in [
        e.to_string(),
        format!("{e:?}"),
        e.message(Surface::Http),
        e.message(Surface::Grpc),
    ] {
        assert!(!text.contains(sig) && !text.contains(&token), "{text}");
    }
}
