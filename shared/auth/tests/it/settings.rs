//! Start-up rules of the auth settings: the local trust setting needs a loopback listener, a
//! query function inside Lambda needs a token issuer, the JWKS staleness bound, and the trusted
//! networks of the long-running gRPC service.

use dq_auth::config::{
    AWS_LAMBDA_FUNCTION_NAME, AWS_LAMBDA_RUNTIME_API, DEFAULT_JWKS_MAX_STALENESS,
    FETCH_GRPC_TRUSTED_CIDRS, FETCH_GRPC_TRUST_UNAUTHENTICATED, TOKEN_EXCHANGE_ISSUER_URL,
    TOKEN_EXCHANGE_JWKS_MAX_STALENESS,
};
use dq_auth::{AuthSettings, Cidr, ConfigError, TrustedNetworks};
use std::collections::HashMap;
use std::net::IpAddr;
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

fn networks(list: &str) -> Vec<String> {
    settings(&[(FETCH_GRPC_TRUSTED_CIDRS, list)])
        .unwrap()
        .grpc_trusted_cidrs
        .networks()
        .iter()
        .map(Cidr::to_string)
        .collect()
}

/// The one problem `list` causes, as text; asserts it names the key.
fn refused(list: &str) -> String {
    let e = settings(&[(FETCH_GRPC_TRUSTED_CIDRS, list)]).unwrap_err();
    let keys: Vec<&str> = e.problems.iter().map(|p| p.key).collect();
    assert_eq!(keys, [FETCH_GRPC_TRUSTED_CIDRS], "{list}: {e}");
    e.to_string()
}

fn holds(list: &str, ip: &str) -> bool {
    let ip: IpAddr = ip.parse().unwrap();
    TrustedNetworks::parse(list).unwrap().find(ip).is_some()
}

#[test]
fn trusted_cidrs_parse_ipv4_and_ipv6() {
    assert!(settings(&[]).unwrap().grpc_trusted_cidrs.is_empty());
    assert_eq!(
        networks(" 10.0.0.0/16,172.31.0.0/20\t192.168.7.9 fd00:ab::/32,,2001:db8::1 "),
        [
            "10.0.0.0/16",
            "172.31.0.0/20",
            "192.168.7.9/32",
            "fd00:ab::/32",
            "2001:db8::1/128",
        ]
    );
    assert!(holds("10.0.0.0/16", "10.0.255.255"));
    assert!(!holds("10.0.0.0/16", "10.1.0.0"));
    assert!(holds("192.168.7.9", "192.168.7.9"));
    assert!(!holds("192.168.7.9", "192.168.7.10"));
    assert!(holds("fd00:ab::/32", "fd00:ab:ffff::1"));
    assert!(!holds("fd00:ab::/32", "fd00:ac::1"));
    // Families never mix, except a dual-stack listener's IPv4-mapped peers.
    assert!(!holds("::/1", "10.0.0.1"));
    assert!(holds("10.0.0.0/16", "::ffff:10.0.0.1"));
    assert!(!holds("10.0.0.0/8", "::a00:1"));
}

#[test]
fn malformed_trusted_cidrs_are_config_errors() {
    for (bad, why) in [
        ("10.0.0.0/33", "prefix length must be a number from 1 to 32"),
        ("fd00::/129", "prefix length must be a number from 1 to 128"),
        ("10.0.0.0/-1", "prefix length"),
        ("10.0.0.0/", "prefix length"),
        ("10.0.0/8", "not an IPv4 or IPv6 network"),
        ("10.0.0.0/8/8", "prefix length"),
        ("vpc", "not an IPv4 or IPv6 network"),
        ("fe80::1%eth0/64", "not an IPv4 or IPv6 network"),
        ("10.1.2.3/8", "host bits set; the network is 10.0.0.0/8"),
        (
            "fd00:ab::1/32",
            "host bits set; the network is fd00:ab::/32",
        ),
        ("::ffff:10.0.0.0/104", "write it as IPv4"),
        (",  ,", "lists no network"),
        ("10.0.0.0/8, nope", "\"nope\""),
    ] {
        let text = refused(bad);
        assert!(text.contains(why), "{bad}: {text}");
    }
}

#[test]
fn trusting_every_address_is_refused() {
    for everyone in ["0.0.0.0/0", "::/0", "10.0.0.0/8 0.0.0.0/0", "10.0.0.0/0"] {
        let text = refused(everyone);
        assert!(text.contains("trusts every address"), "{everyone}: {text}");
    }
    // Wide but deliberate networks stay allowed.
    assert_eq!(networks("0.0.0.0/1"), ["0.0.0.0/1"]);
}

#[test]
fn trusted_cidrs_are_refused_inside_lambda() {
    for lambda in [
        (AWS_LAMBDA_FUNCTION_NAME, "dq-dev-fetch"),
        (AWS_LAMBDA_RUNTIME_API, "127.0.0.1:9001"),
    ] {
        let e = settings(&[
            lambda,
            (TOKEN_EXCHANGE_ISSUER_URL, "https://auth.dimo.zone"),
            (FETCH_GRPC_TRUSTED_CIDRS, "10.0.0.0/16"),
        ])
        .unwrap_err();
        let text = e.to_string();
        let keys: Vec<&str> = e.problems.iter().map(|p| p.key).collect();
        assert_eq!(keys, [FETCH_GRPC_TRUSTED_CIDRS], "{text}");
        assert!(text.contains("refused inside Lambda"), "{text}");
        assert!(text.contains("no TCP peer address"), "{text}");
    }
    // Outside Lambda any listener is fine: the service runs behind an internal load balancer.
    let s = settings(&[(FETCH_GRPC_TRUSTED_CIDRS, "10.0.0.0/16")]).unwrap();
    assert_eq!(s.check_listener(addr("0.0.0.0:8086")), Ok(()));
}
