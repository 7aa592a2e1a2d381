//! `dqctl reconcile` end to end: the built binary against two dq servers on 127.0.0.1, each over
//! its own lake seeded from the same fixture, the reference's with injected differences — one per
//! vehicle so each shows in its own documents: a changed value (vehicle 1), a missing row
//! (vehicle 2), floats moved within the epsilon (vehicle 3) and a list whose order matters
//! reversed (vehicle 4). Every injected difference must be reported at its path, the
//! within-epsilon one never.
//!
//! dq orders `events` itself, so no lake can make a server answer them out of order: the
//! reference router reverses `data.events` in its answers instead (the only difference not made
//! in the lake).
// Integration-test helpers fail their test by panicking, like the #[test] bodies clippy.toml exempts.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::panic, clippy::indexing_slicing)]

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use dq_auth::dev::{DevClaims, DevSigner};
use dq_auth::Permission;
use dq_cloudevent::event::RawEvent;
use dq_graphql::{Dialect, Limits};
use dq_lake::testing::{Backend, TestLake};
use serde_json::{json, Value};
use std::sync::Arc;

use dq_dinsim::testing::{EventBuilder, VEHICLE as CONTRACT};
const SOURCE: &str = "0x0Ac7C7A6d1E85f5e9B2B63C9D2E7D8f0c1b2A395";
const ISSUER: &str = "https://auth.dimo.test";
const PERMISSIONS: [Permission; 3] = [
    Permission::GetNonLocationHistory,
    Permission::GetLocationHistory,
    Permission::GetApproximateLocation,
];

fn vehicle(n: u32) -> String {
    format!("{CONTRACT}:{n}")
}

fn at(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_750_000_000 + secs, 0).unwrap()
}

fn rfc(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

fn event(subject: &str, id: &str, time: DateTime<Utc>, event_type: &str, data: Value) -> RawEvent {
    EventBuilder::new(subject, id, event_type, time)
        .source(SOURCE)
        .data(data.to_string())
}

/// Six status events a minute apart per vehicle, and three harsh-driving events for vehicle 4.
/// `speed(v, k)` is the k-th speed of vehicle v; `keep(v, k)` drops rows.
fn fleet(speed: impl Fn(u32, i64) -> f64, keep: impl Fn(u32, i64) -> bool) -> Vec<RawEvent> {
    let mut out = Vec::new();
    for v in 1..=4 {
        let subject = vehicle(v);
        for k in 0..6 {
            if !keep(v, k) {
                continue;
            }
            let t = at(60 * k);
            let items = json!({"signals": [
                {"name": "speed", "timestamp": rfc(t), "value": speed(v, k)},
                {"name": "powertrainTransmissionTravelledDistance", "timestamp": rfc(t), "value": 1000.0 + k as f64},
            ]});
            out.push(event(
                &subject,
                &format!("s{v}-{k}"),
                t,
                "dimo.status",
                items,
            ));
        }
    }
    const NAMES: [&str; 3] = [
        "behavior.harshBraking",
        "behavior.harshAcceleration",
        "behavior.harshCornering",
    ];
    let events: Vec<Value> = (0..3)
        .map(|k| {
            json!({"name": NAMES[k as usize], "timestamp": rfc(at(30 + 90 * k)),
                   "durationNs": 5 + k, "metadata": "{\"k\":1}"})
        })
        .collect();
    out.push(event(
        &vehicle(4),
        "ev-4",
        at(400),
        "dimo.events",
        json!({ "events": events }),
    ));
    out
}

fn base_speed(v: u32, k: i64) -> f64 {
    10.5 + f64::from(v) + 1.25 * k as f64
}

/// A lake holding `events`, decoded by the materializer.
async fn lake_of(events: &[RawEvent]) -> (TestLake, dq_lake::Lake) {
    let t = TestLake::new(Backend::File);
    {
        let lake = dq_dinsim::testing::open_din_lake(&t);
        let m = dq_materialize::Materializer::builder(lake)
            .emf(false)
            .build()
            .unwrap();
        dq_dinsim::Writer::new(m.lake(), None)
            .write_bundle(events)
            .await
            .unwrap();
        dq_materialize::testing::drain_until_caught_up(&m).await;
    }
    let lake = t.open().unwrap();
    (t, lake)
}

/// Serves `lake` (dq dialect) on a free 127.0.0.1 port; `rewrite` layers the router.
async fn serve(
    lake: dq_lake::Lake,
    signer: &DevSigner,
    rewrite: impl FnOnce(axum::Router) -> axum::Router,
) -> String {
    let state = dq_graphql::testing::state(
        Dialect::Dq,
        lake,
        signer.validator().unwrap(),
        Limits::default(),
    )
    .unwrap();
    serve_router(rewrite(dq_graphql::router(Arc::new(state)))).await
}

/// Serves `app` on a free 127.0.0.1 port; returns the URL of its `/query`.
async fn serve_router(app: axum::Router) -> String {
    let addr = dq_graphql::testing::serve(app).await.unwrap();
    format!("http://{addr}/query")
}

/// The reference's one answer-level difference: `data.events` reversed.
async fn reverse_events(req: Request, next: Next) -> Response {
    let resp = next.run(req).await;
    let (parts, body) = resp.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let mut json: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(_) => return Response::from_parts(parts, Body::from(bytes)),
    };
    if let Some(events) = json
        .pointer_mut("/data/events")
        .and_then(Value::as_array_mut)
    {
        events.reverse();
    }
    let mut parts = parts;
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(json.to_string()))
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

async fn dqctl(args: &[&str]) -> Run {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_dqctl"))
        .arg("reconcile")
        .args(args)
        .env_remove("RECONCILE_TOKEN")
        .output()
        .await
        .expect("run dqctl");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn line<'a>(run: &'a Run, document: &str, v: u32) -> &'a str {
    let label = format!(" {document} [{}]", vehicle(v));
    run.stdout
        .lines()
        .find(|l| l.contains(&format!("{label}:")) || l.ends_with(&label))
        .unwrap_or_else(|| panic!("no line for{label}:\n{}", run.stdout))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reports_every_injected_difference_and_not_the_within_epsilon_one() {
    let signer = DevSigner::generate(ISSUER).unwrap();
    let candidate_events = fleet(base_speed, |_, _| true);
    let reference_events = fleet(
        |v, k| match (v, k) {
            (1, 5) => 99.5,                             // changed value
            (3, _) => base_speed(v, k) * (1.0 + 1e-13), // within the epsilon
            _ => base_speed(v, k),
        },
        |v, k| !(v == 2 && k == 3), // missing row
    );
    let (_ct, candidate_lake) = lake_of(&candidate_events).await;
    let (_rt, reference_lake) = lake_of(&reference_events).await;
    let candidate = serve(candidate_lake, &signer, |r| r).await;
    let reference = serve(reference_lake, &signer, |r| {
        r.layer(axum::middleware::from_fn(reverse_events))
    })
    .await;

    // The within-epsilon floats are really different on the wire.
    let v3 = vehicle(3);
    let token3 = signer.mint(&DevClaims::vehicle(&v3, &PERMISSIONS)).unwrap();
    let client = reqwest::Client::new();
    let mut speeds = Vec::new();
    for url in [reference.as_str(), candidate.as_str()] {
        let body: Value = client
            .post(url)
            .bearer_auth(&token3)
            .json(&json!({"query": format!("{{ signalsLatest(subject: \"{v3}\") {{ speed {{ value }} }} }}")}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        speeds.push(
            body["data"]["signalsLatest"]["speed"]["value"]
                .as_f64()
                .unwrap(),
        );
    }
    assert_ne!(speeds[0], speeds[1], "the fixture moves vehicle 3's floats");

    let tokens: Vec<String> = (1..=4)
        .map(|v| {
            signer
                .mint(&DevClaims::vehicle(vehicle(v), &PERMISSIONS))
                .unwrap()
        })
        .collect();
    let vehicles = (1..=4).map(vehicle).collect::<Vec<_>>().join(",");
    let (from, to) = (rfc(at(-3600)), rfc(at(7200)));
    let mut args = vec![
        "--reference",
        reference.as_str(),
        "--candidate",
        candidate.as_str(),
        "--vehicles",
        vehicles.as_str(),
        "--from",
        from.as_str(),
        "--to",
        to.as_str(),
        "--quiet",
    ];
    for t in &tokens {
        args.extend(["--token", t.as_str()]);
    }
    let run = dqctl(&args).await;
    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    for t in &tokens {
        assert!(!run.stdout.contains(t.as_str()) && !run.stderr.contains(t.as_str()));
    }

    let changed = line(&run, "signals-latest", 1);
    assert!(
        changed.starts_with("MISMATCH") && changed.contains("data.signalsLatest.speed.value:"),
        "{changed}"
    );
    assert!(changed.contains("99.5"), "{changed}");
    let missing = line(&run, "cloud-events", 2);
    assert!(
        missing.starts_with("MISMATCH")
            && missing.contains("data.cloudEvents[")
            && missing.contains("length"),
        "{missing}"
    );
    let reordered = line(&run, "events", 4);
    assert!(
        reordered.starts_with("MISMATCH") && reordered.contains("data.events[0]"),
        "{reordered}"
    );
    for l in run
        .stdout
        .lines()
        .filter(|l| l.contains(&format!("[{v3}]")))
    {
        assert!(
            l.starts_with("match "),
            "within the epsilon is a match: {l}"
        );
    }
    assert!(line(&run, "available-signals", 1).starts_with("match "));
    assert!(
        line(&run, "events", 1).starts_with("match "),
        "an empty list reversed is equal"
    );
    assert!(
        run.stdout.contains("reconcile (dq): 44 compared"),
        "{}",
        run.stdout
    );

    // The same server on both sides: everything matches, exit 0.
    let mut same = args.clone();
    same[1] = candidate.as_str();
    let run = dqctl(&same).await;
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);

    // An unreachable reference is a mismatch with a clear reason, not a crash.
    let closed = format!(
        "http://127.0.0.1:{}/query",
        dq_testkit::free_port().unwrap()
    );
    let mut down = args.clone();
    down[1] = closed.as_str();
    let run = dqctl(&down).await;
    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    let first = run.stdout.lines().next().unwrap_or_default();
    assert!(
        first.contains("(request): reference unreachable"),
        "{first}"
    );
    assert!(
        !run.stdout.contains(closed.as_str()),
        "URLs stay out of the report"
    );
}

#[tokio::test]
async fn non_json_answers_and_bad_arguments() {
    // A "reference" that answers HTML.
    let app = axum::Router::new().fallback(|| async {
        (
            axum::http::StatusCode::BAD_GATEWAY,
            "<html>Bad Gateway</html>",
        )
    });
    let url = serve_router(app).await;
    let docs = tempfile::tempdir().unwrap();
    std::fs::write(docs.path().join("types.graphql"), "{ __typename }").unwrap();
    let dir = docs.path().display().to_string();
    // The HTML server on both sides, over the documents in `docs`.
    let against_itself = |extra: &[&'static str]| {
        let mut args = vec![
            "--reference",
            url.as_str(),
            "--candidate",
            url.as_str(),
            "--documents",
            dir.as_str(),
        ];
        args.extend_from_slice(extra);
        args
    };
    let run = dqctl(&against_itself(&["--token", "secret-token", "--quiet"])).await;
    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("MISMATCH  types: (request): reference HTTP 502 with a non-JSON body"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("secret-token") && !run.stderr.contains("secret-token"));

    std::fs::write(
        docs.path().join("vars.graphql"),
        "query Q($other: Int) { __typename }",
    )
    .unwrap();
    let run = dqctl(&against_itself(&[])).await;
    assert_eq!(run.code, Some(2));
    assert!(run.stderr.contains("declares $other"), "{}", run.stderr);
    let run = dqctl(&["--reference", "ftp://x", "--candidate", url.as_str()]).await;
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr.contains("--reference must be an http(s) URL"),
        "{}",
        run.stderr
    );
}
