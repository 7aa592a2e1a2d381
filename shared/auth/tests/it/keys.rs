//! KeySet: which JWKS entries are usable.

use crate::signer;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use dq_auth::{AuthError, KeySet};
use serde_json::json;

#[test]
fn only_rs256_signing_keys_of_2048_bits_or_more_are_kept() {
    let good: serde_json::Value = serde_json::from_str(&signer().jwks_json()).unwrap();
    let good = good["keys"][0].clone();
    let with = |k: &str, v: serde_json::Value| {
        let mut key = good.clone();
        key[k] = v;
        key
    };
    let short_n = URL_SAFE_NO_PAD.encode([0xffu8; 128]);
    let padded_short = URL_SAFE_NO_PAD.encode([[0u8; 200].as_slice(), &[0xff; 100]].concat());
    let doc = json!({"keys": [
        with("kid", json!("ok-1")),
        with("kid", json!("ok-2")).as_object().map(|o| {
            let mut o = o.clone();
            o.remove("use");
            o.remove("alg");
            serde_json::Value::Object(o)
        }).unwrap(),
        with("kid", json!("ok-1")),                       // duplicate: first wins
        json!({"kty": "EC", "kid": "ec", "crv": "P-256", "x": "AA", "y": "AA"}),
        with("use", json!("enc")),
        with("alg", json!("RS512")),
        with("kid", json!("")),
        with("n", json!(short_n)),
        with("n", json!(padded_short)),
        with("n", json!("!!not base64!!")),
        json!("not an object"),
        json!({"kid": "no-kty"}),
    ]});
    let set = KeySet::from_jwks_json(doc.to_string().as_bytes()).unwrap();
    let mut kids: Vec<&str> = set.kids().collect();
    kids.sort_unstable();
    assert_eq!(kids, ["ok-1", "ok-2"]);
    assert_eq!(set.skipped(), 10);
    assert!(format!("{set:?}").contains("ok-1"));
}

#[test]
fn unusable_documents_are_errors() {
    for doc in [
        "",
        "[]",
        "{\"keys\": 5}",
        "{}",
        "{\"keys\": []}",
        "{\"keys\": [{\"kty\": \"oct\", \"k\": \"AA\"}]}",
    ] {
        assert!(
            matches!(
                KeySet::from_jwks_json(doc.as_bytes()),
                Err(AuthError::KeysUnavailable(_))
            ),
            "{doc}"
        );
    }
}
