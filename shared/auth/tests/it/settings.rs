//! Start-up rules of the auth settings: the local trust setting needs a loopback listener, a
//! query function inside Lambda needs a token issuer, and the JWKS staleness bound.

use auth::config::{
    AWS_LAMBDA_FUNCTION_NAME, AWS_LAMBDA_RUNTIME_API, DEFAULT_JWKS_MAX_STALENESS,
    FETCH_GRPC_TRUST_UNAUTHENTICATED, TOKEN_EXCHANGE_ISSUER_URL, TOKEN_EXCHANGE_JWKS_MAX_STALENESS,
};
use auth::{AuthSettings, ConfigError};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

fn settings(pairs: &[(&str, &str)]) -> Result<AuthSettings, ConfigError> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    AuthSettings::from_lookup(|k| map.get(k).cloned())
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

#[test]
fn trusting_unauthenticated_callers_needs_a_loopback_listener() {
    let trusting = settings(&[(FETCH_GRPC_TRUST_UNAUTHENTICATED, "true")]).unwrap();
    for open in [
        "0.0.0.0:8086",
        "[::]:8086",
        "10.1.2.3:8086",
        "[2001:db8::1]:8086",
    ] {
        let e = trusting.check_listener(addr(open)).unwrap_err();
        let text = e.to_string();
        assert_eq!(e.problems.len(), 1, "{text}");
        assert_eq!(
            e.problems[0].key, FETCH_GRPC_TRUST_UNAUTHENTICATED,
            "{text}"
        );
        assert!(text.contains("loopback"), "{text}");
        assert!(text.contains(open), "the error names the address: {text}");
    }
    for local in ["127.0.0.1:8086", "[::1]:8086", "127.0.0.2:1"] {
        assert_eq!(trusting.check_listener(addr(local)), Ok(()), "{local}");
    }
    // Without the setting any listener is fine.
    let plain = settings(&[]).unwrap();
    assert_eq!(plain.check_listener(addr("0.0.0.0:8086")), Ok(()));
}

#[test]
fn a_query_function_inside_lambda_needs_a_token_issuer() {
    for lambda in [
        (AWS_LAMBDA_FUNCTION_NAME, "dq-dev-graphql"),
        (AWS_LAMBDA_RUNTIME_API, "127.0.0.1:9001"),
    ] {
        let e = settings(&[lambda]).unwrap_err();
        let text = e.to_string();
        let keys: Vec<&str> = e.problems.iter().map(|p| p.key).collect();
        assert_eq!(keys, [TOKEN_EXCHANGE_ISSUER_URL], "{text}");
        assert!(text.contains("inside Lambda"), "{text}");
        let ok = settings(&[
            lambda,
            (TOKEN_EXCHANGE_ISSUER_URL, "https://auth.dimo.zone"),
        ]);
        assert!(ok.is_ok(), "{ok:?}");
    }
    // Locally an issuer stays optional (callers are then unauthenticated).
    assert_eq!(settings(&[]).unwrap().issuer, None);
}

#[test]
fn jwks_max_staleness_setting() {
    assert_eq!(
        settings(&[]).unwrap().jwks_max_staleness,
        DEFAULT_JWKS_MAX_STALENESS
    );
    assert_eq!(DEFAULT_JWKS_MAX_STALENESS, Duration::from_secs(24 * 3600));
    assert_eq!(
        settings(&[(TOKEN_EXCHANGE_JWKS_MAX_STALENESS, "1h30m")])
            .unwrap()
            .jwks_max_staleness,
        Duration::from_secs(5400)
    );
    for bad in ["soon", "30s", "-2h", "15"] {
        let e = settings(&[(TOKEN_EXCHANGE_JWKS_MAX_STALENESS, bad)]).unwrap_err();
        assert_eq!(
            e.problems[0].key, TOKEN_EXCHANGE_JWKS_MAX_STALENESS,
            "{bad}: {e}"
        );
    }
}
