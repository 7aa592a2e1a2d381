//! Request observability (issue 22): one `dq/query` EMF line per `/query` request with its
//! dialect and code (answered, refused by a grant, refused with 401), none with `QUERY_EMF` off,
//! the request span's fields in the JSON logs, and the X-Ray subsegment on a UDP socket.

use crate::{read_response, seed, vehicle, ISSUER};
use axum::body::Body;
use dq_auth::dev::{DevClaims, DevSigner};
use dq_auth::Permission;
use dq_graphql::observe::Observe;
use dq_graphql::{AppState, Dialect, Limits};
use dq_lake::testing::{Backend, TestLake};
use dq_metrics::xray::Daemon;
use dq_metrics::{Captured, Sink};
use serde_json::{json, Value};
use std::sync::Arc;
use tower::ServiceExt;

const TRACE_ROOT: &str = "1-67890abc-0123456789abcdef01234567";

/// An empty lake served in `dialect` with `observe`.
struct Served {
    _lake: TestLake,
    state: Arc<AppState>,
    signer: DevSigner,
}

async fn served(dialect: Dialect, observe: Observe) -> Served {
    let t = TestLake::new(Backend::File);
    seed(&t, &[]).await;
    let signer = DevSigner::generate(ISSUER).unwrap();
    let state = dq_graphql::testing::state(
        dialect,
        t.open().unwrap(),
        signer.validator().unwrap(),
        Limits::default(),
    )
    .unwrap()
    .with_observe(observe);
    Served {
        _lake: t,
        state: Arc::new(state),
        signer,
    }
}

/// `QUERY_EMF` set to `value`, lines captured.
fn metrics(value: &'static str) -> (Observe, Captured) {
    let (sink, captured) = Sink::memory();
    let emitter = Observe::metrics_from_lookup(|k| (k == "QUERY_EMF").then(|| value.into()))
        .unwrap()
        .map(|e| e.with_sink(sink));
    (Observe::default().with_metrics(emitter), captured)
}

impl Served {
    fn token(&self, permissions: &[Permission]) -> String {
        self.signer
            .mint(&DevClaims::vehicle(vehicle(1), permissions))
            .unwrap()
    }

    /// POSTs `query` to `/query` with `authorization` and `extra` headers.
    async fn post(
        &self,
        authorization: Option<&str>,
        extra: &[(&str, &str)],
        query: &str,
    ) -> (u16, Value) {
        let mut req = http::Request::post("/query").header("content-type", "application/json");
        if let Some(a) = authorization {
            req = req.header("authorization", a);
        }
        for (k, v) in extra {
            req = req.header(*k, *v);
        }
        let body = Body::from(json!({ "query": query }).to_string());
        let resp = dq_graphql::router(Arc::clone(&self.state))
            .oneshot(req.body(body).unwrap())
            .await
            .unwrap();
        let (status, _, bytes) = read_response(resp).await;
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }
}

fn latest_query() -> String {
    format!(
        r#"{{ signalsLatest(subject: "{}") {{ lastSeen }} }}"#,
        vehicle(1)
    )
}

/// The one line `captured` holds, checked for the shape every `/query` line has.
fn one_line(captured: &Captured, dialect: &str) -> Value {
    let docs = captured.documents();
    assert_eq!(docs.len(), 1, "{docs:?}");
    let d = docs[0].clone();
    let directive = &d["_aws"]["CloudWatchMetrics"][0];
    assert_eq!(directive["Namespace"], "dq/query");
    assert_eq!(
        directive["Dimensions"],
        json!([["Stage", "Function"], ["Stage", "Dialect", "Code"]])
    );
    let names: Vec<&str> = directive["Metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["Name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["requests", "latency_ms", "graphql_errors"]);
    assert_eq!(directive["Metrics"][1]["Unit"], "Milliseconds");
    assert_eq!(d["Dialect"], dialect);
    assert_eq!(d["requests"], 1.0);
    assert!(d["latency_ms"].as_f64().unwrap() > 0.0, "{d}");
    assert!(d["Stage"].is_string() && d["Function"].is_string(), "{d}");
    d
}

#[tokio::test]
async fn query_lines_carry_dialect_and_code() {
    // dq: answered without errors.
    let (observe, captured) = metrics("1");
    let s = served(Dialect::Dq, observe).await;
    let token = s.token(&Permission::ALL);
    let (status, body) = s
        .post(Some(&format!("Bearer {token}")), &[], &latest_query())
        .await;
    assert_eq!(status, 200);
    assert!(body.get("errors").is_none(), "{body}");
    let d = one_line(&captured, "dq");
    assert_eq!(
        (&d["Code"], &d["graphql_errors"]),
        (&json!("OK"), &json!(0.0))
    );

    // dq: refused with 401 before GraphQL ran; the code is the rejection's.
    let (observe, captured) = metrics("true");
    let s = served(Dialect::Dq, observe).await;
    let (status, _) = s.post(Some("Bearer not.a.jwt"), &[], &latest_query()).await;
    assert_eq!(status, 401);
    let d = one_line(&captured, "dq");
    assert_eq!(
        (&d["Code"], &d["graphql_errors"]),
        (&json!("UNAUTHENTICATED"), &json!(0.0))
    );

    // telemetry: a token without the attestation grant is answered UNAUTHORIZED in the body.
    let (observe, captured) = metrics("yes");
    let s = served(Dialect::Telemetry, observe).await;
    let token = s.token(&Permission::ALL);
    let (status, body) = s
        .post(
            Some(&format!("Bearer {token}")),
            &[],
            "{ attestations(tokenId: 1) { id } }",
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        body["errors"][0]["extensions"]["code"], "UNAUTHORIZED",
        "{body}"
    );
    let d = one_line(&captured, "telemetry");
    assert_eq!(d["Code"], "UNAUTHORIZED");
    assert_eq!(
        d["graphql_errors"].as_f64(),
        Some(body["errors"].as_array().unwrap().len() as f64)
    );

    // fetch: a document that does not validate is 422; its errors carry no code.
    let (observe, captured) = metrics("1");
    let s = served(Dialect::Fetch, observe).await;
    let (status, _) = s.post(None, &[], "{ noSuchField }").await;
    assert_eq!(status, 422);
    let d = one_line(&captured, "fetch");
    assert_eq!(
        (&d["Code"], &d["graphql_errors"]),
        (&json!("UNPROCESSABLE_ENTITY"), &json!(1.0))
    );

    // Only /query is measured.
    dq_graphql::router(Arc::clone(&s.state))
        .oneshot(http::Request::get("/ready").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(captured.lines().len(), 1, "no line for /ready");
}

#[tokio::test]
async fn query_emf_off_writes_nothing() {
    for off in ["", "0", "false"] {
        let (observe, captured) = metrics(off);
        let s = served(Dialect::Dq, observe).await;
        let token = s.token(&Permission::ALL);
        let (status, _) = s
            .post(Some(&format!("Bearer {token}")), &[], &latest_query())
            .await;
        assert_eq!(status, 200);
        let (status, _) = s.post(Some("Bearer nope"), &[], &latest_query()).await;
        assert_eq!(status, 401);
        assert!(captured.lines().is_empty(), "QUERY_EMF={off:?}");
    }
    assert!(Observe::metrics_from_lookup(|_| Some("sometimes".into())).is_err());
}

#[tokio::test]
async fn span_fields_reach_the_logs_and_xray() {
    dq_testkit::logs::capture();
    let daemon = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    daemon
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let observe =
        Observe::default().with_xray(Some(Daemon::to(daemon.local_addr().unwrap()).unwrap()));
    let s = served(Dialect::Dq, observe).await;
    let token = s.token(&Permission::ALL);
    let trace = format!("Root={TRACE_ROOT};Parent=0123456789abcdef;Sampled=1");
    let (status, _) = s
        .post(
            Some(&format!("Bearer {token}")),
            &[("x-amzn-trace-id", trace.as_str())],
            &latest_query(),
        )
        .await;
    assert_eq!(status, 200);

    // The handler's log line carries the span's fields, the vehicle recorded after the JWT.
    let line = dq_testkit::logs::lines()
        .into_iter()
        .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
        .find(|l| {
            l["span"]["trace_id"] == TRACE_ROOT && l["fields"]["message"] == "graphql request"
        })
        .expect("a log line of the request");
    let span = &line["span"];
    assert_eq!(span["name"], "request");
    assert_eq!(span["dialect"], "dq");
    assert_eq!(span["vehicle"], vehicle(1));
    let request_id = span["request_id"].as_str().unwrap().to_string();
    assert!(uuid_like(&request_id), "{request_id}");

    // The subsegment: same trace, parent and annotations.
    let mut buf = vec![0u8; 65536];
    let n = daemon.recv(&mut buf).unwrap();
    let text = std::str::from_utf8(&buf[..n]).unwrap();
    let (header, doc) = text.split_once('\n').unwrap();
    assert_eq!(header, r#"{"format":"json","version":1}"#);
    let doc: Value = serde_json::from_str(doc).unwrap();
    assert_eq!(doc["trace_id"], TRACE_ROOT);
    assert_eq!(doc["parent_id"], "0123456789abcdef");
    assert_eq!(doc["http"]["response"]["status"], 200);
    assert_eq!(
        doc["annotations"],
        json!({"vehicle": vehicle(1), "request_id": request_id, "dialect": "dq", "code": "OK"})
    );
}

fn uuid_like(s: &str) -> bool {
    s.len() == 36 && s.bytes().filter(|b| *b == b'-').count() == 4
}
