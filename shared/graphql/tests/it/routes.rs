//! The HTTP surface: routes, error shapes and status codes, the timeout, the body cap, the
//! list-style queries and their null-vs-empty policy, events.

use crate::*;
use serde_json::json;

fn get(uri: &str) -> http::Request<Body> {
    http::Request::get(uri).body(Body::empty()).unwrap()
}

#[tokio::test]
async fn routes_and_error_shapes() {
    let subject = vehicle(5);
    let t = at(0);
    let f = fixture(&[status(
        &subject,
        SOURCE,
        "r-1",
        t,
        vec![item("speed", t, json!(7.5))],
    )])
    .await;

    // GraphiQL, self-contained (no CDN), under a CSP that admits only its inline scripts.
    let (status, headers, body) = f.send(get("/")).await;
    assert_eq!(status, 200);
    let page = String::from_utf8_lossy(&body);
    assert!(page.contains("<title>GraphiQL · dq, dq dialect</title>"));
    assert!(!page.contains("<script src") && !page.contains("cdn.jsdelivr"));
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    assert_eq!(header("content-type"), "text/html; charset=utf-8");
    assert!(
        header("content-security-policy").starts_with("default-src 'none'; script-src 'sha256-")
    );
    let (status, _, body) = f.send(get("/anything/else")).await;
    assert_eq!(status, 200, "GraphiQL is the catch-all");
    assert!(String::from_utf8_lossy(&body).contains("GraphiQL"));
    let (_, _, body) = f.send_to(dq_graphql::Dialect::Telemetry, get("/")).await;
    assert!(
        String::from_utf8_lossy(&body).contains("<title>GraphiQL · dq, telemetry dialect</title>")
    );

    let req = http::Request::options("/query")
        .body(Body::empty())
        .unwrap();
    let (status, headers, _) = f.send(req).await;
    assert_eq!(status, 200);
    assert!(headers
        .iter()
        .any(|(k, v)| k == "allow" && v.contains("POST")));

    let (status, _, body) = f.send(get("/ready")).await;
    assert_eq!((status, body.as_slice()), (200, b"ok".as_slice()));

    // GET /query with the query string.
    let token = f.token(&subject, &ALL);
    let q = format!(r#"{{ signalsLatest(subject: "{subject}") {{ speed {{ value }} }} }}"#);
    let uri = format!("/query?query={}", urlencode(&q));
    let req = http::Request::get(uri)
        .header("authorization", format!("Bearer {token}"))
        .body(Body::empty())
        .unwrap();
    let (status, _, body) = f.send(req).await;
    assert_eq!(status, 200);
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["data"]["signalsLatest"]["speed"]["value"], 7.5);

    // Validation failures are 422 with a GraphQL error body.
    let (status, body) = f.gql(Some(&token), "{ nope }").await;
    assert_eq!(status, 422, "{body}");
    assert!(body["errors"][0]["message"]
        .as_str()
        .unwrap()
        .contains("nope"));

    // Complexity over 100 is refused before execution.
    let fields: Vec<String> = dq_signals::SIGNALS
        .iter()
        .filter(|s| s.kind == dq_signals::ValueKind::Number)
        .take(40)
        .map(|s| format!("{} {{ timestamp value }}", s.name))
        .collect();
    let q = format!(
        r#"{{ signalsLatest(subject: "{subject}") {{ {} }} }}"#,
        fields.join(" ")
    );
    let (status, body) = f.gql(Some(&token), &q).await;
    assert_eq!(
        (status, &body["errors"][0]["message"]),
        (422, &json!("Query is too complex."))
    );

    // Bodies over 4 MiB are refused.
    let big = vec![b' '; dq_graphql::http::BODY_LIMIT + 1];
    let req = http::Request::post("/query")
        .header("content-type", "application/json")
        .body(Body::from(big))
        .unwrap();
    let (status, _, _) = f.send(req).await;
    assert_eq!(status, 413);

    // A request past its deadline gets the SERVICE_UNAVAILABLE shape.
    let slow = fixture_with(
        &[],
        Limits {
            max_request_duration: std::time::Duration::from_nanos(1),
            ..Limits::default()
        },
    )
    .await;
    let token = slow.token(&subject, &ALL);
    let (status, body) = slow
        .gql(
            Some(&token),
            &format!(r#"{{ availableSignals(subject: "{subject}") }}"#),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["errors"][0]["message"],
        "request exceeded or is estimated to exceed the maximum execution time"
    );
    assert_eq!(
        body["errors"][0]["extensions"]["code"],
        "SERVICE_UNAVAILABLE"
    );
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test]
async fn lists_summaries_snapshot_and_events() {
    let subject = vehicle(9);
    let (t0, t1) = (at(0), at(60));
    let mut ev = status(&subject, SOURCE, "ev-1", t0, vec![]);
    ev.header.event_type = "dimo.events".into();
    ev.data = Some(
        json!({"events": [
            {"name": "behavior.harshBraking", "timestamp": rfc(t0), "durationNs": 5, "metadata": "{\"k\":1}", "tags": ["a", "b"]},
            {"name": "safety.collision", "timestamp": rfc(t1), "tags": []}
        ]})
        .to_string(),
    );
    let events = vec![
        status(
            &subject,
            SOURCE,
            "s-1",
            t0,
            vec![
                item("speed", t0, json!(10.0)),
                item("powertrainType", t0, json!("HYBRID")),
                item(
                    "currentLocationCoordinates",
                    t0,
                    json!({"latitude": 1.5, "longitude": 2.5, "hdop": 0.9}),
                ),
            ],
        ),
        status(
            &subject,
            SOURCE,
            "s-2",
            t1,
            vec![item("speed", t1, json!(20.0))],
        ),
        ev,
    ];
    let f = fixture(&events).await;

    let q = format!(
        r#"{{ availableSignals(subject: "{subject}") dataSummary(subject: "{subject}") {{ numberOfSignals availableSignals firstSeen lastSeen signalDataSummary {{ name numberOfSignals firstSeen lastSeen }} eventDataSummary {{ name numberOfEvents }} }} }}"#
    );
    let data = f.data(&subject, &q).await;
    assert_eq!(
        data["availableSignals"],
        json!(["currentLocationCoordinates", "powertrainType", "speed"])
    );
    let ds = &data["dataSummary"];
    assert_eq!(ds["numberOfSignals"], 4);
    assert_eq!(ds["firstSeen"], rfc(t0));
    assert_eq!(ds["lastSeen"], rfc(t1));
    assert_eq!(
        ds["signalDataSummary"][2],
        json!({"name": "speed", "numberOfSignals": 2, "firstSeen": rfc(t0), "lastSeen": rfc(t1)})
    );
    assert_eq!(
        ds["eventDataSummary"],
        json!([{"name": "behavior.harshBraking", "numberOfEvents": 1}, {"name": "safety.collision", "numberOfEvents": 1}])
    );

    // Privilege filtering: a non-location token; [] when everything is filtered, null when
    // the subject has no names at all.
    // (eventDataSummary needs the event privileges this token lacks: privileges.rs.)
    let token = f.token(&subject, &[Permission::GetNonLocationHistory]);
    let no_events = q.replace(" eventDataSummary { name numberOfEvents }", "");
    let (_, body) = f.gql(Some(&token), &no_events).await;
    assert_eq!(
        body["data"]["availableSignals"],
        json!(["powertrainType", "speed"])
    );
    assert_eq!(body["data"]["dataSummary"]["numberOfSignals"], 3);
    let token = f.token(&subject, &[Permission::GetApproximateLocation]);
    let (_, body) = f
        .gql(
            Some(&token),
            &format!(r#"{{ availableSignals(subject: "{subject}") }}"#),
        )
        .await;
    assert_eq!(body["data"]["availableSignals"], json!([]));
    let other = vehicle(10);
    let data = f
        .data(&other, &format!(r#"{{ availableSignals(subject: "{other}") dataSummary(subject: "{other}") {{ lastSeen numberOfSignals }} signalsSnapshot(subject: "{other}") {{ lastSeen signals {{ name }} }} signalsLatest(subject: "{other}") {{ lastSeen speed {{ value }} }} }}"#))
        .await;
    assert_eq!(data["availableSignals"], Value::Null);
    assert_eq!(data["dataSummary"]["lastSeen"], "1900-01-01T00:00:00Z");
    assert_eq!(
        data["signalsSnapshot"],
        json!({"lastSeen": null, "signals": []})
    );
    assert_eq!(
        data["signalsLatest"],
        json!({"lastSeen": null, "speed": null})
    );

    // Snapshot: typed by content, approximate appended last.
    let q = format!(
        r#"{{ signalsSnapshot(subject: "{subject}") {{ lastSeen signals {{ name timestamp valueNumber valueString valueLocation {{ latitude longitude hdop }} }} }} }}"#
    );
    let data = f.data(&subject, &q).await;
    let snap = &data["signalsSnapshot"];
    assert_eq!(snap["lastSeen"], rfc(t1));
    let names: Vec<&str> = snap["signals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "currentLocationCoordinates",
            "powertrainType",
            "speed",
            "currentLocationApproximateCoordinates"
        ]
    );
    assert_eq!(
        snap["signals"][0]["valueLocation"],
        json!({"latitude": 1.5, "longitude": 2.5, "hdop": 0.9})
    );
    assert_eq!(snap["signals"][1]["valueString"], "HYBRID");
    assert_eq!(
        snap["signals"][2],
        json!({"name": "speed", "timestamp": rfc(t1), "valueNumber": 20, "valueString": null, "valueLocation": null})
    );

    // Events: newest first, filters, metadata null when empty, validation.
    let ev_q = |filter: &str| {
        format!(
            r#"{{ events(subject: "{subject}", from: "{}", to: "{}"{filter}) {{ timestamp name source durationNs metadata }} }}"#,
            rfc(at(0)),
            rfc(at(3600))
        )
    };
    let data = f.data(&subject, &ev_q("")).await;
    assert_eq!(
        data["events"],
        json!([
            {"timestamp": rfc(t1), "name": "safety.collision", "source": SOURCE, "durationNs": 0, "metadata": null},
            {"timestamp": rfc(t0), "name": "behavior.harshBraking", "source": SOURCE, "durationNs": 5, "metadata": "{\"k\":1}"}
        ])
    );
    let data = f
        .data(
            &subject,
            &ev_q(r#", filter: {name: {startsWith: "behavior."}}"#),
        )
        .await;
    assert_eq!(data["events"].as_array().unwrap().len(), 1);
    let data = f
        .data(
            &subject,
            &ev_q(r#", filter: {tags: {containsAll: ["a", "b"], or: [{containsAny: ["zzz"]}]}}"#),
        )
        .await;
    assert_eq!(data["events"][0]["name"], "behavior.harshBraking");
    let data = f
        .data(
            &subject,
            &ev_q(r#", filter: {name: {eq: "safety.collision"}, or: []}"#).replace(", or: []", ""),
        )
        .await;
    assert_eq!(data["events"].as_array().unwrap().len(), 1);
    let token = f.token(&subject, &ALL);
    let (_, body) = f
        .gql(Some(&token), &ev_q(r#", filter: {name: {eq: "harsh"}}"#))
        .await;
    assert_eq!(body["errors"][0]["extensions"]["code"], "BAD_REQUEST");
    let data = f
        .data(
            &subject,
            &format!(
                r#"{{ events(subject: "{subject}", from: "{}", to: "{}") {{ name }} }}"#,
                rfc(at(7200)),
                rfc(at(9000))
            ),
        )
        .await;
    assert_eq!(data["events"], json!([]));
}

/// The function's init ([`dq_graphql::http::preload`]) loads the file listing of every table a
/// request reads, on the production catalog, and the first request finds each one: nothing is
/// listed again.
#[tokio::test]
async fn init_preloads_every_listing_a_request_reads() {
    use dq_lake::files::ListingSource;
    let subject = vehicle(6);
    let t = TestLake::new(Backend::Postgres);
    let at0 = at(0);
    seed(
        &t,
        &[status(
            &subject,
            SOURCE,
            "r-1",
            at0,
            vec![item("speed", at0, json!(7.5))],
        )],
    )
    .await;
    let (engine, db) = dq_graphql::http::share_lake(t.open().unwrap());
    dq_graphql::http::preload(&engine, &db);
    let reports = engine.list_files(Some(&[])).unwrap();
    let tables: Vec<_> = reports.iter().map(|r| r.table).collect();
    assert_eq!(
        tables,
        ["signals", "events", "signals_latest", "events_latest"]
    );
    for r in &reports {
        assert_eq!((r.source, r.usable), (ListingSource::Cached, true), "{r:?}");
    }
    // On PostgreSQL the rollups are listed whole, the time-partitioned tables by head only.
    let whole: Vec<_> = reports.iter().map(|r| (r.table, r.complete)).collect();
    assert_eq!(
        whole,
        [
            ("signals", false),
            ("events", false),
            ("signals_latest", true),
            ("events_latest", true)
        ]
    );
    let raw = db.preload_listing().expect("raw_events listed");
    assert_eq!((raw.source, raw.usable), (ListingSource::Cached, true));
    // Nor is the rollup's existence asked again: the latest values are one statement.
    let reads = engine.reads();
    let latest = engine.latest_rows(&subject, None, None).unwrap();
    assert_eq!(latest.len(), 1);
    assert_eq!(engine.reads() - reads, 1);
}
