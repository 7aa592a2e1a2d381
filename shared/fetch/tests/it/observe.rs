//! Call observability (issue 22): one `dq/query` EMF line per RPC with its method and gRPC code,
//! over gRPC, gRPC-web and the Lambda adapter; none with `QUERY_EMF` off; the call span's
//! fields (API Gateway request id, vehicle) in the JSON logs.

use crate::grpc_web::call;
use crate::{fixture, options, plain, request};
use dq_auth::Permission;
use dq_fetch::observe::Observe;
use dq_metrics::{Captured, Sink};
use lambda_http::request::LambdaRequest;
use prost::Message;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tonic::Code;

/// A server whose metrics (`QUERY_EMF` = `value`) are captured.
fn observed(value: &'static str) -> (SocketAddr, Captured, Observe) {
    let f = fixture();
    let (sink, captured) = Sink::memory();
    let emitter = Observe::metrics_from_lookup(|k| (k == "QUERY_EMF").then(|| value.into()))
        .unwrap()
        .map(|e| e.with_sink(sink));
    let observe = Observe::default().with_metrics(emitter);
    (
        f.serve(f.api(false).with_observe(observe.clone())),
        captured,
        observe,
    )
}

/// Waits for the `n`th line (written when the server drops the response body, which can be just
/// after the client has its answer) and returns it, checked for the shape every line has.
fn line(captured: &Captured, n: usize) -> Value {
    let until = Instant::now() + Duration::from_secs(10);
    while captured.lines().len() < n && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    let docs = captured.documents();
    assert_eq!(docs.len(), n, "{docs:?}");
    let d = docs[n - 1].clone();
    let directive = &d["_aws"]["CloudWatchMetrics"][0];
    assert_eq!(directive["Namespace"], "dq/query");
    assert_eq!(
        directive["Dimensions"],
        json!([["Stage", "Function"], ["Stage", "Method", "Code"]])
    );
    assert_eq!(
        directive["Metrics"],
        json!([{"Name": "requests", "Unit": "Count"}, {"Name": "latency_ms", "Unit": "Milliseconds"}])
    );
    assert_eq!(d["requests"], 1.0);
    assert!(d["latency_ms"].as_f64().unwrap() > 0.0, "{d}");
    assert!(d["Stage"].is_string() && d["Function"].is_string(), "{d}");
    d
}

fn method_code(d: &Value) -> (&str, &str) {
    (d["Method"].as_str().unwrap(), d["Code"].as_str().unwrap())
}

#[test]
fn call_lines_carry_method_and_code() {
    let f = fixture();
    let (addr, captured, _) = observed("1");
    let mut c = f.client(addr);
    let list = plain::list_events(options(1), 3);
    f.rt.block_on(c.list_cloud_events(request(list.clone(), Some(&f.owner()))))
        .unwrap();
    assert_eq!(method_code(&line(&captured, 1)), ("ListCloudEvents", "OK"));

    // Vehicle 9 has no events: NOT_FOUND (a trailers-only answer).
    let token9 = f.bearer(9, &[Permission::GetRawData]);
    let e =
        f.rt.block_on(c.get_latest_index(request(plain::latest_index(options(9)), Some(&token9))))
            .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert_eq!(
        method_code(&line(&captured, 2)),
        ("GetLatestIndex", "NOT_FOUND")
    );

    // gRPC-web: the same names; the status of an answered call comes from its trailers.
    let reply = call(
        addr,
        "ListCloudEvents",
        &list.encode_to_vec(),
        Some(&f.owner()),
    );
    assert_eq!(reply.status, 0, "{reply:?}");
    assert_eq!(method_code(&line(&captured, 3)), ("ListCloudEvents", "OK"));
    let reply = call(addr, "ListCloudEvents", &list.encode_to_vec(), None);
    assert_eq!(reply.status, 16, "{reply:?}");
    assert_eq!(
        method_code(&line(&captured, 4)),
        ("ListCloudEvents", "UNAUTHENTICATED")
    );
    // A method the service does not have mints no series of its own.
    let reply = call(addr, "DropAllTables", b"", Some(&f.owner()));
    assert_eq!(reply.status, 12, "{reply:?}");
    assert_eq!(
        method_code(&line(&captured, 5)),
        ("unknown", "UNIMPLEMENTED")
    );
}

#[test]
fn query_emf_off_writes_nothing() {
    let f = fixture();
    for off in ["", "no"] {
        let (addr, captured, _) = observed(off);
        let mut c = f.client(addr);
        f.rt.block_on(
            c.list_cloud_events(request(plain::list_events(options(1), 1), Some(&f.owner()))),
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert!(captured.lines().is_empty(), "QUERY_EMF={off:?}");
    }
    assert!(Observe::metrics_from_lookup(|_| Some("2".into())).is_err());
}

/// The vehicle `events/fetch-list-cloud-events.json` asks for (the demo fleet's first).
const DEMO_VEHICLE: &str = "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:135114";

#[test]
fn lambda_calls_log_the_gateway_request_id_and_vehicle() {
    dq_testkit::logs::capture();
    let f = fixture();
    let (_, captured, observe) = observed("true");
    let path = dq_testkit::workspace_root()
        .join("events")
        .join("fetch-list-cloud-events.json");
    let mut event: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    // Other tests of this binary send the same sample at the same time: a request id of this
    // test's own picks its access line out of the shared log capture.
    event["requestContext"]["requestId"] = json!("observe-sample-1");
    let request: LambdaRequest = serde_json::from_value(event).unwrap();
    let router = dq_fetch::server::router(f.api(false).with_observe(observe));
    f.rt.block_on(async {
        let response = dq_fetch::lambda::handle(router, request.into())
            .await
            .unwrap();
        // lambda_http turns the body into the Lambda answer; the line follows its drop.
        let response = lambda_http::IntoResponse::into_response(response).await;
        assert_eq!(response.status(), 200);
    });
    // The sample names the demo fleet's vehicle, which this fixture does not hold.
    assert_eq!(
        method_code(&line(&captured, 1)),
        ("ListCloudEvents", "NOT_FOUND")
    );
    let access = dq_testkit::logs::lines()
        .into_iter()
        .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
        .find(|l| {
            l["fields"]["message"] == "FetchService call"
                && l["span"]["request_id"] == "observe-sample-1"
        })
        .expect("the call's access line");
    assert_eq!(access["span"]["method"], "ListCloudEvents");
    assert_eq!(access["span"]["vehicle"], DEMO_VEHICLE);
    assert_eq!(access["fields"]["code"], "NOT_FOUND");
}
