//! Issue 18, items 1–2: privileges are checked before any SQL runs. A `signals` alias the
//! caller may not read stays out of the statement (its filter must not decide which buckets
//! exist), segment signal requests take their signals' privileges, and `dataSummary`'s event
//! parts take `events`' privileges.
//!
//! Statements are observed through DuckDB's query log on the served instance.

use crate::segments::drives;
use crate::*;
use dq_auth::Permission;
use dq_graphql::Limits;
use dq_lake::testing::{Backend, TestLake};
use serde_json::json;

/// The vehicle's token id (telemetry's `tokenId`).
const TOKEN_ID: u32 = 7101;
/// Bucket width: 10 minutes from `at(0)`; the window holds 12 buckets.
const BUCKETS: i64 = 12;
/// Buckets whose fix lies inside [`circle`] (the other fixes are thousands of km away).
const INSIDE: [i64; 2] = [2, 7];

/// Per bucket `b`, one sample at minute 1: a fix in buckets 0..8 (inside the circle in
/// [`INSIDE`]), a speed in buckets 0..6 (below 100) and 9..12 (150). So bucket 7 exists only
/// through the fix, buckets 9..12 only through the speed.
fn drive(subject: &str) -> Vec<RawEvent> {
    (0..BUCKETS)
        .filter_map(|b| {
            let t = at(b * 600 + 60);
            let mut items = Vec::new();
            if b < 8 {
                let (lat, lon) = if INSIDE.contains(&b) {
                    (40.0, -3.0)
                } else {
                    (10.0, 20.0)
                };
                items.push(item(
                    "currentLocationCoordinates",
                    t,
                    json!({"latitude": lat, "longitude": lon, "hdop": 1.0}),
                ));
            }
            match b {
                0..=5 => items.push(item("speed", t, json!(10.0 + b as f64))),
                9.. => items.push(item("speed", t, json!(150.0))),
                _ => {}
            }
            (!items.is_empty()).then(|| status(subject, SOURCE, &format!("s-{b:02}"), t, items))
        })
        .collect()
}

fn circle() -> &'static str {
    "{inCircle: {center: {latitude: 40.0, longitude: -3.0}, radius: 5}}"
}

/// A served lake plus a connection to the same DuckDB instance, whose query log sees every
/// statement a request runs.
struct Observed {
    // Declared first: closed before the fixture removes the lake.
    log: dq_lake::Conn,
    f: Fixture,
}

async fn observed(events: &[RawEvent]) -> Observed {
    let t = TestLake::new(Backend::File);
    seed(&t, events).await;
    let lake = t.open().unwrap();
    let log = lake.connect().unwrap();
    log.execute_batch("CALL enable_logging('QueryLog')")
        .unwrap();
    Observed {
        log,
        f: serve(t, lake, Limits::default(), None, None),
    }
}

impl Observed {
    /// Sends `query` in `dialect`; returns the answer and the statements it ran.
    async fn run(&self, dialect: Dialect, token: &str, query: &str) -> (Value, Vec<String>) {
        self.log
            .execute_batch("CALL truncate_duckdb_logs()")
            .unwrap();
        let (status, body) = self.f.gql_in(dialect, Some(token), query).await;
        assert_eq!(status, 200, "{body}");
        let mut stmt = self
            .log
            .prepare("SELECT message FROM duckdb_logs WHERE type = 'QueryLog'")
            .unwrap();
        let statements = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        (body, statements)
    }
}

/// True when the only statements logged are the log's own reads: the request ran no SQL.
fn ran_nothing(statements: &[String]) -> bool {
    statements.iter().all(|s| s.contains("duckdb_logs"))
}

/// The vehicle argument in `dialect`.
fn vehicle_arg(dialect: Dialect) -> String {
    match dialect {
        Dialect::Telemetry => format!("tokenId: {TOKEN_ID}"),
        _ => format!(r#"subject: "{}""#, vehicle(TOKEN_ID)),
    }
}

fn signals_query(dialect: Dialect, fields: &str) -> String {
    format!(
        r#"{{ signals({}, interval: "10m", from: "{}", to: "{}") {{ {fields} }} }}"#,
        vehicle_arg(dialect),
        rfc(at(0)),
        rfc(at(BUCKETS * 600)),
    )
}

/// The AllOf privilege text of `dialect`.
fn missing(dialect: Dialect, permission: &str) -> String {
    match dialect {
        Dialect::Telemetry => format!("unauthorized: missing required privilege(s) {permission}"),
        _ => format!("unauthorized: missing required privilege {permission}"),
    }
}

fn bucket_times(body: &Value) -> Vec<i64> {
    body["data"]["signals"]
        .as_array()
        .map(|buckets| {
            buckets
                .iter()
                .map(|b| {
                    let t = DateTime::parse_from_rfc3339(b["timestamp"].as_str().unwrap()).unwrap();
                    (t.timestamp() - at(0).timestamp()) / 600
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `with` = `without` plus the forbidden `alias` fields: the same buckets and values, the
/// alias null in each with its privilege error at its path, nothing else.
fn assert_same_but_denied(with: &Value, without: &Value, alias: &str, message: &str) {
    assert!(without.get("errors").is_none(), "{without}");
    let mut stripped = with["data"]["signals"].clone();
    let buckets = stripped.as_array_mut().expect("buckets");
    for b in buckets.iter_mut() {
        let b = b.as_object_mut().unwrap();
        assert_eq!(b.remove(alias), Some(Value::Null), "{with}");
    }
    let count = buckets.len();
    assert_eq!(stripped, without["data"]["signals"], "{with}\n{without}");
    let errors = with["errors"].as_array().expect("errors");
    assert_eq!(errors.len(), count, "{with}");
    for (i, e) in errors.iter().enumerate() {
        assert_eq!(e["message"], message, "{with}");
        assert_eq!(e["path"], json!(["signals", i, alias]), "{with}");
    }
}

#[tokio::test]
async fn forbidden_signal_filters_decide_no_bucket() {
    let subject = vehicle(TOKEN_ID);
    let o = observed(&drive(&subject)).await;
    let non_location = o.f.token(&subject, &[Permission::GetNonLocationHistory]);
    let location = o.f.token(&subject, &[Permission::GetLocationHistory]);
    let approximate = o.f.token(&subject, &[Permission::GetApproximateLocation]);
    let everything = o.f.token(&subject, &ALL);
    let geofence = format!(
        "currentLocationCoordinates(agg: FIRST, filter: {}) {{ latitude }}",
        circle()
    );
    let fast = "speed(agg: MAX, filter: {gt: 100})";

    for dialect in [Dialect::Dq, Dialect::Telemetry] {
        let no_location_history = missing(dialect, "privilege:GetLocationHistory");
        let no_history = missing(dialect, "privilege:GetNonLocationHistory");

        // A speed reader's geofence: bucket 7 (inside the circle, no speed) must not appear.
        let plain = signals_query(dialect, "timestamp speed(agg: MAX)");
        let fenced = signals_query(dialect, &format!("timestamp speed(agg: MAX) {geofence}"));
        let (without, _) = o.run(dialect, &non_location, &plain).await;
        let (with, statements) = o.run(dialect, &non_location, &fenced).await;
        assert_eq!(bucket_times(&without), [0, 1, 2, 3, 4, 5, 9, 10, 11]);
        assert_same_but_denied(
            &with,
            &without,
            "currentLocationCoordinates",
            &no_location_history,
        );
        assert!(
            statements.iter().any(|s| s.contains("'speed'")),
            "the readable alias is read: {statements:?}"
        );
        assert!(
            !statements
                .iter()
                .any(|s| s.contains("currentLocationCoordinates")),
            "the forbidden alias reached SQL: {statements:?}"
        );

        // Nothing readable but `timestamp`: no statement runs, no bucket answers, and the
        // field carries the forbidden field's error.
        let (bare, _) = o
            .run(dialect, &non_location, &signals_query(dialect, "timestamp"))
            .await;
        assert_eq!(bare["data"]["signals"], Value::Null, "{bare}");
        let (with, statements) = o
            .run(
                dialect,
                &non_location,
                &signals_query(dialect, &format!("timestamp {geofence}")),
            )
            .await;
        assert_eq!(with["data"]["signals"], Value::Null, "{with}");
        assert_eq!(
            with["errors"],
            json!([{"message": no_location_history, "path": ["signals"],
                    "locations": with["errors"][0]["locations"]}]),
            "{with}"
        );
        assert!(ran_nothing(&statements), "{statements:?}");

        // A location reader's speed threshold: buckets 9..12 (fast, no fix) must not appear.
        let plain = signals_query(
            dialect,
            "timestamp currentLocationCoordinates(agg: LAST) { latitude }",
        );
        let thresholded = signals_query(
            dialect,
            &format!("timestamp currentLocationCoordinates(agg: LAST) {{ latitude }} {fast}"),
        );
        let (without, _) = o.run(dialect, &location, &plain).await;
        let (with, statements) = o.run(dialect, &location, &thresholded).await;
        assert_eq!(bucket_times(&without), (0..8).collect::<Vec<_>>());
        assert_same_but_denied(&with, &without, "speed", &no_history);
        assert!(
            !statements.iter().any(|s| s.contains("'speed'")),
            "the forbidden alias reached SQL: {statements:?}"
        );

        // The approximate location alone: neither the exact geofence nor the threshold shapes
        // the buckets (the exact field reads the same stored signal as the approximate one).
        let plain = signals_query(
            dialect,
            "timestamp currentLocationApproximateCoordinates(agg: LAST) { latitude }",
        );
        let (without, _) = o.run(dialect, &approximate, &plain).await;
        assert_eq!(bucket_times(&without), (0..8).collect::<Vec<_>>());
        let (with, statements) = o
            .run(
                dialect,
                &approximate,
                &signals_query(
                    dialect,
                    &format!("timestamp currentLocationApproximateCoordinates(agg: LAST) {{ latitude }} {fast}"),
                ),
            )
            .await;
        assert_same_but_denied(&with, &without, "speed", &no_history);
        assert!(
            !statements.iter().any(|s| s.contains("'speed'")),
            "{statements:?}"
        );
        let (with, _) = o
            .run(
                dialect,
                &approximate,
                &signals_query(
                    dialect,
                    &format!("timestamp currentLocationApproximateCoordinates(agg: LAST) {{ latitude }} {geofence}"),
                ),
            )
            .await;
        assert_same_but_denied(
            &with,
            &without,
            "currentLocationCoordinates",
            &no_location_history,
        );

        // A caller allowed to read every alias still gets the buckets the filters produce.
        let (all, _) = o
            .run(
                dialect,
                &everything,
                &signals_query(dialect, &format!("timestamp {geofence} {fast}")),
            )
            .await;
        assert!(all.get("errors").is_none(), "{all}");
        let mut expected: Vec<i64> = INSIDE.to_vec();
        expected.extend(9..BUCKETS);
        assert_eq!(bucket_times(&all), expected);
    }
}

#[tokio::test]
async fn segment_signal_requests_take_their_signals_privileges() {
    // The segment gate needs both history privileges, which today imply every catalog signal's
    // privileges (and the approximate location's): any name passes the per-request check for
    // a caller that passed the gate. Pin that, so a signal with another privilege cannot be
    // added without the check refusing it (the refusal itself is unit-tested beside it).
    for def in dq_signals::SIGNALS.iter() {
        for p in def.privileges {
            assert!(
                dq_graphql::segments::SEGMENT_PRIVILEGES.contains(p),
                "{} needs {p:?}, which the segment gate does not imply",
                def.name
            );
        }
    }
    let subject = vehicle(TOKEN_ID);
    let f = fixture(&drives(&subject)).await;
    let token = f.token(
        &subject,
        &[
            Permission::GetNonLocationHistory,
            Permission::GetLocationHistory,
        ],
    );
    let requests = "signalRequests: [{name: \"speed\", agg: MAX}, \
        {name: \"currentLocationCoordinates\", agg: FIRST}, \
        {name: \"currentLocationApproximateCoordinates\", agg: LAST}, {name: \"noSuchSignal\", agg: AVG}]";
    for q in [
        format!(
            r#"{{ segments(subject: "{subject}", from: "{}", to: "{}", mechanism: IGNITION_DETECTION, {requests}) {{ duration signals {{ name agg value }} }} }}"#,
            rfc(at(-60)),
            rfc(at(6000)),
        ),
        format!(
            r#"{{ dailyActivity(subject: "{subject}", from: "{}", to: "{}", mechanism: IGNITION_DETECTION, {requests}) {{ duration signals {{ name agg value }} }} }}"#,
            "2025-06-15T00:00:00Z", "2025-06-16T00:00:00Z",
        ),
    ] {
        let (status, body) = f.gql(Some(&token), &q).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.get("errors").is_none(), "{body}");
    }
}

/// Signals at minutes 10..20, `dimo.events` events before and after them.
fn with_events(subject: &str) -> Vec<RawEvent> {
    let mut all = vec![
        status(
            subject,
            SOURCE,
            "s-1",
            at(600),
            vec![item("speed", at(600), json!(10.0))],
        ),
        status(
            subject,
            SOURCE,
            "s-2",
            at(1200),
            vec![item("speed", at(1200), json!(20.0))],
        ),
    ];
    for (id, secs) in [("ev-early", 0), ("ev-late", 3000)] {
        let mut e = status(subject, SOURCE, id, at(secs), vec![]);
        e.header.event_type = "dimo.events".into();
        e.data = Some(
            json!({"events": [{"name": "behavior.harshBraking", "timestamp": rfc(at(secs)),
                                "durationNs": 5, "metadata": "{}", "tags": []}]})
            .to_string(),
        );
        all.push(e);
    }
    all
}

#[tokio::test]
async fn data_summary_event_parts_take_the_event_privileges() {
    let subject = vehicle(TOKEN_ID);
    let o = observed(&with_events(&subject)).await;
    let everything = o.f.token(&subject, &ALL);
    let non_location = o.f.token(&subject, &[Permission::GetNonLocationHistory]);
    for dialect in [Dialect::Dq, Dialect::Telemetry] {
        let vehicle = vehicle_arg(dialect);
        let summary = |fields: &str| format!("{{ dataSummary({vehicle}) {{ {fields} }} }}");
        let seen = summary("firstSeen lastSeen numberOfSignals");
        let events = summary("eventDataSummary { name numberOfEvents firstSeen lastSeen }");

        // Allowed: the overall times include the events, as before.
        let (body, _) = o.run(dialect, &everything, &seen).await;
        assert_eq!(
            body["data"]["dataSummary"],
            json!({"firstSeen": rfc(at(0)), "lastSeen": rfc(at(3000)), "numberOfSignals": 2}),
            "{body}"
        );
        let (body, statements) = o.run(dialect, &everything, &events).await;
        assert!(
            statements.iter().any(|s| s.contains("lake.events")),
            "the log sees the event read: {statements:?}"
        );
        assert_eq!(
            body["data"]["dataSummary"]["eventDataSummary"],
            json!([{"name": "behavior.harshBraking", "numberOfEvents": 2,
                    "firstSeen": rfc(at(0)), "lastSeen": rfc(at(3000))}]),
            "{body}"
        );

        // Without the event privileges: the overall times come from the signals alone, and
        // no statement reads events.
        let (body, statements) = o.run(dialect, &non_location, &seen).await;
        assert!(body.get("errors").is_none(), "{body}");
        assert_eq!(
            body["data"]["dataSummary"],
            json!({"firstSeen": rfc(at(600)), "lastSeen": rfc(at(1200)), "numberOfSignals": 2}),
            "{body}"
        );
        assert!(
            !statements.iter().any(|s| s.contains("lake.events")),
            "{statements:?}"
        );

        // eventDataSummary fails as `events` does for the same caller, at its own path
        // (non-null, so the summary is null), before any SQL.
        let (refused, _) = o
            .run(
                dialect,
                &non_location,
                &format!(
                    r#"{{ events({vehicle}, from: "{}", to: "{}") {{ name }} }}"#,
                    rfc(at(-60)),
                    rfc(at(3600))
                ),
            )
            .await;
        let expected = &refused["errors"][0];
        assert_eq!(
            expected["message"],
            missing(dialect, "privilege:GetLocationHistory"),
            "{refused}"
        );
        for (fields, key) in [
            ("firstSeen eventDataSummary { name }", "eventDataSummary"),
            ("numberOfSignals e: eventDataSummary { name }", "e"),
        ] {
            let (body, statements) = o.run(dialect, &non_location, &summary(fields)).await;
            assert_eq!(body["data"]["dataSummary"], Value::Null, "{body}");
            let errors = body["errors"].as_array().expect("errors");
            assert_eq!(errors.len(), 1, "{body}");
            assert_eq!(errors[0]["message"], expected["message"], "{body}");
            assert_eq!(
                errors[0].get("extensions"),
                expected.get("extensions"),
                "{body}"
            );
            assert_eq!(errors[0]["path"], json!(["dataSummary", key]), "{body}");
            assert!(ran_nothing(&statements), "{statements:?}");
        }
    }
}
