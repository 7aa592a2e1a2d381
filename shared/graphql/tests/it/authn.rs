//! Acceptance 4: token rejections with the documented errors, and per-field privilege errors
//! that null one field while the rest of the answer stands.

use crate::*;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::json;

async fn seeded() -> (Fixture, String) {
    let subject = vehicle(42);
    let t = at(0);
    let events = vec![status(
        &subject,
        SOURCE,
        "e-1",
        t,
        vec![
            item("speed", t, json!(50.0)),
            item(
                "currentLocationCoordinates",
                t,
                json!({"latitude": 40.0, "longitude": -3.0, "hdop": 1.2}),
            ),
        ],
    )];
    (fixture(&events).await, subject)
}

fn latest_query(subject: &str) -> String {
    format!(
        r#"{{ signalsLatest(subject: "{subject}") {{ speed {{ value }} currentLocationCoordinates {{ value {{ latitude }} }} currentLocationApproximateCoordinates {{ value {{ hdop }} }} }} }}"#
    )
}

fn claims_json(f: &Fixture, subject: &str) -> Value {
    DevClaims::vehicle(subject, &ALL).to_json(f.signer.issuer())
}

#[tokio::test]
async fn rejected_tokens() {
    let (f, subject) = seeded().await;
    let q = latest_query(&subject);
    let invalid = json!({"message": "JWT is invalid."});

    let mut expired = DevClaims::vehicle(&subject, &ALL);
    expired.expires_at = dq_auth::dev::now_secs() - 60;
    let mut wrong_aud = DevClaims::vehicle(&subject, &ALL);
    wrong_aud.audience = vec!["other.zone".into()];
    let mut wrong_iss = DevClaims::vehicle(&subject, &ALL);
    wrong_iss.issuer = Some("https://evil.example".into());
    let claims = claims_json(&f, &subject);
    let alg_none = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(json!({"alg": "none", "typ": "JWT"}).to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    // HS256 keyed with the RSA public key (the alg-confusion attack).
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD
            .encode(json!({"alg": "HS256", "typ": "JWT", "kid": f.signer.kid()}).to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let key = aws_lc_rs::hmac::Key::new(
        aws_lc_rs::hmac::HMAC_SHA256,
        &f.signer.public_key_der().unwrap(),
    );
    let tag = aws_lc_rs::hmac::sign(&key, input.as_bytes());
    let hs256 = format!("{input}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()));
    let unknown_kid = f
        .signer
        .sign_json(
            &json!({"alg": "RS256", "typ": "JWT", "kid": "not-a-known-kid"}),
            &claims,
        )
        .unwrap();

    let forgeries = [
        ("expired", f.signer.mint(&expired).unwrap()),
        ("wrong audience", f.signer.mint(&wrong_aud).unwrap()),
        ("wrong issuer", f.signer.mint(&wrong_iss).unwrap()),
        ("alg none", alg_none),
        ("HS256 with the public key", hs256),
        ("unknown kid", unknown_kid),
        ("garbage", "not.a.jwt".into()),
    ];
    for (what, token) in &forgeries {
        let (status, body) = f.gql(Some(token), &q).await;
        assert_eq!((status, &body), (401, &invalid), "{what}");
    }
    crate::report(
        "jwt-forgeries",
        &json!({
            "forgeries": forgeries.iter().map(|(w, _)| *w).collect::<Vec<_>>(),
            "rejected_with_401": forgeries.len(),
            "served": 0,
        }),
    );

    // A malformed Authorization header is a 500 (go-jwt-middleware's default handler).
    let req = http::Request::post("/query")
        .header("content-type", "application/json")
        .header("authorization", "Basic abc")
        .body(Body::from(json!({"query": q}).to_string()))
        .unwrap();
    let (status, _, body) = f.send(req).await;
    assert_eq!(status, 500);
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap(),
        json!({"message": "Something went wrong while checking the JWT."})
    );

    // No token: the request runs and the directive refuses it.
    let (status, body) = f.gql(None, &q).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["signalsLatest"], Value::Null);
    assert_eq!(body["errors"][0]["message"], "unauthorized: jwt missing");
    assert_eq!(body["errors"][0]["path"], json!(["signalsLatest"]));
    assert!(body["errors"][0].get("extensions").is_none());

    // Another vehicle's token.
    let other = f.token(&vehicle(43), &ALL);
    let (_, body) = f.gql(Some(&other), &q).await;
    assert_eq!(body["data"]["signalsLatest"], Value::Null);
    assert_eq!(
        body["errors"][0]["message"],
        "unauthorized: DID in query does not match token claim"
    );

    // The valid token reads everything.
    let data = f.data(&subject, &q).await;
    assert_eq!(data["signalsLatest"]["speed"]["value"], 50);
}

#[tokio::test]
async fn per_field_privileges() {
    let (f, subject) = seeded().await;
    let token = f.token(&subject, &[Permission::GetNonLocationHistory]);
    let (status, body) = f.gql(Some(&token), &latest_query(&subject)).await;
    assert_eq!(status, 200);
    let latest = &body["data"]["signalsLatest"];
    assert_eq!(latest["speed"]["value"], 50, "{body}");
    // Present as null (not missing), each with its own error and path.
    assert_eq!(latest.get("currentLocationCoordinates"), Some(&Value::Null));
    assert_eq!(
        latest.get("currentLocationApproximateCoordinates"),
        Some(&Value::Null)
    );
    assert!(body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["path"] == json!(["signalsLatest", "currentLocationCoordinates"])));
    let messages: Vec<&str> = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["message"].as_str().unwrap())
        .collect();
    assert!(
        messages.contains(&"unauthorized: missing required privilege privilege:GetLocationHistory")
    );
    assert!(messages.contains(
        &"unauthorized: requires at least one of the following privileges [privilege:GetApproximateLocation privilege:GetLocationHistory]"
    ));

    // Approximate location alone is enough for the approximate field, not the exact one.
    let token = f.token(&subject, &[Permission::GetApproximateLocation]);
    let (_, body) = f.gql(Some(&token), &latest_query(&subject)).await;
    let latest = &body["data"]["signalsLatest"];
    assert_eq!(
        latest["currentLocationApproximateCoordinates"]["value"]["hdop"],
        1.2
    );
    assert_eq!(latest["speed"], Value::Null);
    assert_eq!(body["errors"].as_array().unwrap().len(), 2);

    // Same on aggregations.
    let q = format!(
        r#"{{ signals(subject: "{subject}", interval: "1h", from: "{}", to: "{}") {{ speed(agg: MAX) currentLocationCoordinates(agg: LAST) {{ latitude }} }} }}"#,
        rfc(at(0)),
        rfc(at(3600))
    );
    let token = f.token(&subject, &[Permission::GetNonLocationHistory]);
    let (_, body) = f.gql(Some(&token), &q).await;
    assert_eq!(body["data"]["signals"][0]["speed"], 50);
    assert_eq!(
        body["data"]["signals"][0]["currentLocationCoordinates"],
        Value::Null
    );
    assert_eq!(
        body["errors"][0]["message"],
        "unauthorized: missing required privilege privilege:GetLocationHistory"
    );

    // List results drop what the token may not read.
    let q = format!(r#"{{ availableSignals(subject: "{subject}") }}"#);
    let (_, body) = f.gql(Some(&token), &q).await;
    assert_eq!(body["data"]["availableSignals"], json!(["speed"]));

    // events needs both history privileges.
    let q = format!(
        r#"{{ events(subject: "{subject}", from: "{}", to: "{}") {{ name }} }}"#,
        rfc(at(0)),
        rfc(at(3600))
    );
    let (_, body) = f.gql(Some(&token), &q).await;
    assert_eq!(
        body["errors"][0]["message"],
        "unauthorized: missing required privilege privilege:GetLocationHistory"
    );
}
