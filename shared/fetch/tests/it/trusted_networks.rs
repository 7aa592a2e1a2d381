//! `FETCH_GRPC_TRUSTED_CIDRS` over the wire (issue 22): the existing native-gRPC callers inside
//! the VPC send no token, and are served when the accepted TCP connection's peer lies in a
//! trusted network. Nothing the client writes (`X-Forwarded-For`, …) changes the peer.

use crate::grpc_web::{decode, frame, Reply};
use crate::{fixture, ids, options, plain, request};
use bytes::Bytes;
use dq_auth::config::{
    AWS_LAMBDA_FUNCTION_NAME, FETCH_GRPC_REQUIRE_JWT, FETCH_GRPC_TRUSTED_CIDRS,
    TOKEN_EXCHANGE_ISSUER_URL,
};
use dq_auth::{AuthSettings, GrpcAuthenticator};
use dq_fetch::FetchApi;
use dq_proto::grpc::fetch_service_client::FetchServiceClient;
use dq_proto::grpc::{ListCloudEventsRequest, ListCloudEventsResponse};
use dq_rawquery::Payloads;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use prost::Message;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use tonic::Code;

/// Headers a client could use to claim an address inside the trusted networks.
const FORGED: [(&str, &str); 3] = [
    ("x-forwarded-for", "10.1.2.3"),
    ("x-real-ip", "10.1.2.3"),
    ("forwarded", "for=10.1.2.3"),
];

/// Serves the shared lake on `bind` with the authenticator that `settings` (environment pairs)
/// configure, through the same path the fetch binary takes.
fn serve_with(bind: &str, settings: &[(&str, &str)]) -> SocketAddr {
    let f = fixture();
    let env: HashMap<&str, &str> = settings.iter().copied().collect();
    let settings = AuthSettings::from_lookup(|k| env.get(k).map(|v| v.to_string())).unwrap();
    let auth = GrpcAuthenticator::from_settings(Some(f.signer.validator().unwrap()), &settings);
    let api = FetchApi::new(
        Arc::clone(&f.seeded.db),
        Payloads::new(Some(Arc::clone(&f.seeded.store))),
        auth,
    );
    f.rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(bind).await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(dq_fetch::server::serve(
            dq_fetch::server::router(api),
            listener,
            std::future::pending(),
        ));
        addr
    })
}

fn list_request() -> ListCloudEventsRequest {
    plain::list_events(options(1), 3)
}

/// ListCloudEvents for vehicle 1 over native gRPC (HTTP/2) to `url`, without a token, with
/// `headers` as metadata: the ids, or the status code and message.
fn native(url: String, headers: &[(&'static str, &str)]) -> Result<Vec<String>, (Code, String)> {
    let f = fixture();
    f.rt.block_on(async {
        let mut client = FetchServiceClient::connect(url).await.unwrap();
        let mut req = request(list_request(), None);
        for (k, v) in headers {
            req.metadata_mut().insert(*k, v.parse().unwrap());
        }
        client
            .list_cloud_events(req)
            .await
            .map(|r| ids(&r.into_inner().cloud_events))
            .map_err(|s| (s.code(), s.message().to_string()))
    })
}

/// The same call as gRPC-web over HTTP/1.1 to `addr`, without a token, with `headers`.
fn web(addr: SocketAddr, headers: &[(&str, &str)]) -> Reply {
    let f = fixture();
    f.rt.block_on(async {
        let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
        let mut req =
            http::Request::post(format!("http://{addr}/grpc.FetchService/ListCloudEvents"))
                .header("content-type", "application/grpc-web+proto")
                .header("x-grpc-web", "1");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let body = Full::new(Bytes::from(frame(&list_request().encode_to_vec())));
        let resp = client.request(req.body(body).unwrap()).await.unwrap();
        assert_eq!(resp.status(), 200);
        let (parts, body) = resp.into_parts();
        decode(&parts.headers, &body.collect().await.unwrap().to_bytes())
    })
}

fn web_ids(reply: Reply) -> Vec<String> {
    assert_eq!(reply.status, 0, "{reply:?}");
    let resp = ListCloudEventsResponse::decode(reply.data.unwrap().as_slice()).unwrap();
    ids(&resp.cloud_events)
}

#[test]
fn a_tokenless_caller_inside_a_trusted_network_is_served() {
    let addr = serve_with(
        "127.0.0.1:0",
        &[
            (FETCH_GRPC_TRUSTED_CIDRS, "10.0.0.0/8, 127.0.0.0/8"),
            (FETCH_GRPC_REQUIRE_JWT, "true"),
        ],
    );
    assert_eq!(
        native(format!("http://{addr}"), &[]).unwrap(),
        ["t2", "t1", "big"]
    );
    assert_eq!(web_ids(web(addr, &[])), ["t2", "t1", "big"]);
    // A token is still checked, not waved through because of the address.
    let bad = native(
        format!("http://{addr}"),
        &[("authorization", "Bearer nope")],
    );
    assert_eq!(bad, Err((Code::Unauthenticated, "invalid token".into())));
}

#[test]
fn a_tokenless_caller_outside_the_trusted_networks_is_refused_even_with_forged_headers() {
    let strict = serve_with(
        "127.0.0.1:0",
        &[
            (FETCH_GRPC_TRUSTED_CIDRS, "10.0.0.0/8"),
            (FETCH_GRPC_REQUIRE_JWT, "true"),
        ],
    );
    let refused = Err((Code::Unauthenticated, "missing bearer token".to_string()));
    assert_eq!(native(format!("http://{strict}"), &[]), refused);
    let reply = web(strict, &[]);
    assert_eq!(
        (reply.status, reply.message.as_str()),
        (16, "missing bearer token")
    );
    for forged in FORGED {
        assert_eq!(
            native(format!("http://{strict}"), &[forged]),
            refused,
            "{forged:?}"
        );
        let reply = web(strict, &[forged]);
        assert_eq!(
            (reply.status, reply.message.as_str()),
            (16, "missing bearer token"),
            "{forged:?}"
        );
    }
    assert_eq!(native(format!("http://{strict}"), &FORGED), refused);
    // With a token the caller is served as before.
    let owner = fixture().owner();
    assert_eq!(
        native(
            format!("http://{strict}"),
            &[("authorization", owner.as_str())]
        )
        .unwrap(),
        ["t2", "t1", "big"]
    );
    // Without require-JWT the RPC refuses it instead, as for any tokenless caller.
    let lenient = serve_with("127.0.0.1:0", &[(FETCH_GRPC_TRUSTED_CIDRS, "10.0.0.0/8")]);
    assert_eq!(
        native(
            format!("http://{lenient}"),
            &[("x-forwarded-for", "10.1.2.3")]
        ),
        Err((Code::Unauthenticated, "no token claims".into()))
    );
}

#[test]
fn ipv6_and_dual_stack_peers() {
    let v6 = serve_with("[::1]:0", &[(FETCH_GRPC_TRUSTED_CIDRS, "::1/128")]);
    assert_eq!(
        native(format!("http://{v6}"), &[]).unwrap(),
        ["t2", "t1", "big"]
    );
    assert_eq!(web_ids(web(v6, &[])), ["t2", "t1", "big"]);
    // An IPv4 network never holds an IPv6 peer.
    let v4_only = serve_with(
        "[::1]:0",
        &[
            (FETCH_GRPC_TRUSTED_CIDRS, "127.0.0.0/8"),
            (FETCH_GRPC_REQUIRE_JWT, "true"),
        ],
    );
    assert_eq!(
        native(format!("http://{v4_only}"), &[]),
        Err((Code::Unauthenticated, "missing bearer token".into()))
    );
    // An IPv6 socket (a dual-stack listener) reports an IPv4 peer as `::ffff:127.0.0.1`: it is
    // matched as the IPv4 address it carries.
    let mapped = serve_with(
        "[::ffff:127.0.0.1]:0",
        &[
            (FETCH_GRPC_TRUSTED_CIDRS, "127.0.0.0/8"),
            (FETCH_GRPC_REQUIRE_JWT, "true"),
        ],
    );
    let v4 = SocketAddr::from(([127, 0, 0, 1], mapped.port()));
    assert_eq!(
        native(format!("http://{v4}"), &[]).unwrap(),
        ["t2", "t1", "big"]
    );
    assert_eq!(web_ids(web(v4, &[])), ["t2", "t1", "big"]);
}

/// Set in the child's environment by [`trusted_networks_stop_the_service_starting_in_lambda`].
const CHILD_ENV: &str = "DQ_FETCH_TRUSTED_NETWORKS_CHILD";

#[test]
fn trusted_networks_stop_the_service_starting_in_lambda() {
    // A child process: the start-up path reads the process environment.
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "trusted_networks::lambda_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .env(AWS_LAMBDA_FUNCTION_NAME, "dq-prod-fetch")
        .env(TOKEN_EXCHANGE_ISSUER_URL, "https://issuer.test")
        .env(FETCH_GRPC_TRUSTED_CIDRS, "10.0.0.0/16")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let error = stdout
        .lines()
        .find_map(|l| l.split_once("START ERROR: ").map(|(_, e)| e))
        .unwrap_or_else(|| panic!("the child did not report: {stdout}"));
    assert!(
        error.contains(FETCH_GRPC_TRUSTED_CIDRS) && error.contains("refused inside Lambda"),
        "{error}"
    );
}

/// Not a test on its own: with [`CHILD_ENV`] set, assembles the service from the environment as
/// the Lambda does and prints why it refused to start.
#[test]
fn lambda_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let rt = crate::runtime();
    match rt.block_on(dq_fetch::server::api_from_env(None)) {
        Ok(_) => panic!("the service started inside Lambda with trusted networks"),
        Err(e) => println!("START ERROR: {e}"),
    }
}
