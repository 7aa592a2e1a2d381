//! `segments` and `dailyActivity` through real GraphQL: shapes, summaries,
//! locations, the strict `after` cursor, validation texts, privileges and time zones.

use crate::*;
use dq_auth::Permission;
use serde_json::json;

/// Five 10-minute ignition segments `[1200k, 1200k + 600]` s after [`at`]`(0)`, each with a
/// fix at +60 s (latitude 10 + k), a speed of 20 + k at +120 s and a harsh-braking event
/// in the third one.
pub(crate) fn drives(subject: &str) -> Vec<RawEvent> {
    (0..5i64)
        .map(|k| {
            let t = |s: i64| at(k * 1200 + s);
            status(
                subject,
                SOURCE,
                &format!("drive-{k}"),
                t(600),
                vec![
                    item("isIgnitionOn", t(0), json!(1)),
                    item(
                        "currentLocationCoordinates",
                        t(60),
                        json!({"latitude": 10.0 + k as f64, "longitude": 20.0, "hdop": 1.0}),
                    ),
                    item("speed", t(120), json!(20.0 + k as f64)),
                    item("isIgnitionOn", t(600), json!(0)),
                ],
            )
        })
        .collect()
}

const FIELDS: &str = "start { timestamp value { latitude longitude hdop } } \
    end { timestamp value { latitude } } duration isOngoing startedBeforeRange \
    signals { name agg value } eventCounts { name count }";

fn segments_query(subject: &str, extra: &str) -> String {
    format!(
        r#"{{ segments(subject: "{subject}", from: "{}", to: "{}", mechanism: IGNITION_DETECTION,
              signalRequests: [{{name: "speed", agg: AVG}}],
              eventRequests: [{{name: "behavior.harshBraking"}}] {extra}) {{ {FIELDS} }} }}"#,
        rfc(at(-60)),
        rfc(at(6000)),
    )
}

fn ts(v: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(v.as_str().unwrap())
        .unwrap()
        .with_timezone(&Utc)
}

#[tokio::test]
async fn segments_summaries_and_pages() {
    let subject = vehicle(61);
    let f = fixture(&drives(&subject)).await;

    let all = f.data(&subject, &segments_query(&subject, "")).await;
    let all = all["segments"].as_array().unwrap().clone();
    assert_eq!(all.len(), 5, "{all:?}");
    for (k, s) in all.iter().enumerate() {
        let k = k as i64;
        assert_eq!(ts(&s["start"]["timestamp"]), at(k * 1200));
        assert_eq!(ts(&s["end"]["timestamp"]), at(k * 1200 + 600));
        assert_eq!(s["duration"], 600);
        assert_eq!(s["isOngoing"], false);
        assert_eq!(s["startedBeforeRange"], false);
        assert_eq!(s["start"]["value"]["latitude"], json!(10 + k));
        assert_eq!(s["start"]["value"]["hdop"], 1);
        assert_eq!(s["end"]["value"]["latitude"], json!(10 + k));
        // Defaults ∪ requests, sorted: speed AVG, speed MAX (no fuel/SoC/odometer data).
        assert_eq!(
            s["signals"],
            json!([
                {"name": "speed", "agg": "AVG", "value": 20 + k},
                {"name": "speed", "agg": "MAX", "value": 20 + k},
            ])
        );
        assert_eq!(
            s["eventCounts"],
            json!([{"name": "behavior.harshBraking", "count": 0}])
        );
    }

    // Pages of 2 with the strict `after` cursor: no repeats, no gaps.
    let mut paged = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..10 {
        let cursor = after
            .as_ref()
            .map(|a| format!(r#", after: "{a}""#))
            .unwrap_or_default();
        let page = f
            .data(
                &subject,
                &segments_query(&subject, &format!("limit: 2 {cursor}")),
            )
            .await;
        let page = page["segments"].as_array().unwrap().clone();
        assert!(page.len() <= 2);
        let Some(last) = page.last() else { break };
        after = Some(last["start"]["timestamp"].as_str().unwrap().to_string());
        paged.extend(page);
    }
    assert_eq!(paged, all);

    // limit: null → no truncation; the default is 100.
    let q = segments_query(&subject, "limit: null");
    assert_eq!(f.data(&subject, &q).await["segments"], json!(all));
}

#[tokio::test]
async fn segments_validation_and_privileges() {
    let subject = vehicle(62);
    let f = fixture(&drives(&subject)).await;
    let token = f.token(&subject, &ALL);

    for (extra, message) in [
        ("limit: 0", "limit must be between 1 and 200"),
        ("limit: 201", "limit must be between 1 and 200"),
        (
            "config: {maxGapSeconds: 10}",
            "maxGapSeconds must be between 60 and 3600",
        ),
    ] {
        let (status, body) = f.gql(Some(&token), &segments_query(&subject, extra)).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["errors"][0]["message"], message, "{body}");
        assert_eq!(body["errors"][0]["extensions"]["code"], "BAD_REQUEST");
        assert_eq!(body["data"], Value::Null);
    }
    // SDL default injection: `config: {}` carries 300/240/10/… — still valid and detects.
    let q = segments_query(&subject, "config: {}");
    assert_eq!(
        f.data(&subject, &q).await["segments"]
            .as_array()
            .unwrap()
            .len(),
        5
    );
    // An explicit null field falls back to the detector default (also valid).
    let q = segments_query(&subject, "config: {minSegmentDurationSeconds: null}");
    assert_eq!(
        f.data(&subject, &q).await["segments"]
            .as_array()
            .unwrap()
            .len(),
        5
    );

    // Both history privileges are required.
    let partial = f.token(&subject, &[Permission::GetNonLocationHistory]);
    let (_, body) = f.gql(Some(&partial), &segments_query(&subject, "")).await;
    assert!(body["errors"][0]["message"].is_string(), "{body}");
    assert_eq!(body["data"], Value::Null);
    // Another vehicle's token.
    let other = f.token(&vehicle(63), &ALL);
    let (_, body) = f.gql(Some(&other), &segments_query(&subject, "")).await;
    assert!(body["errors"].is_array(), "{body}");
}

fn daily_query(subject: &str, from: &str, to: &str, tz: &str) -> String {
    format!(
        r#"{{ dailyActivity(subject: "{subject}", from: "{from}", to: "{to}",
              mechanism: IGNITION_DETECTION, timezone: "{tz}") {{
            start {{ timestamp value {{ latitude }} }} end {{ timestamp value {{ latitude }} }}
            segmentCount duration signals {{ name agg value }} eventCounts {{ name count }} }} }}"#
    )
}

#[tokio::test]
async fn daily_activity_days_in_a_zone() {
    let subject = vehicle(64);
    let f = fixture(&drives(&subject)).await;
    // at(0) = 2025-06-15T15:06:40Z = 11:06 in New York (EDT, UTC−4).
    let q = daily_query(
        &subject,
        "2025-06-14T12:00:00Z",
        "2025-06-16T12:00:00Z",
        "America/New_York",
    );
    let days = f.data(&subject, &q).await["dailyActivity"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(days.len(), 3);
    let starts: Vec<String> = days
        .iter()
        .map(|d| d["start"]["timestamp"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        starts,
        [
            "2025-06-14T04:00:00Z",
            "2025-06-15T04:00:00Z",
            "2025-06-16T04:00:00Z"
        ]
    );
    assert_eq!(days[1]["segmentCount"], 5);
    assert_eq!(days[1]["duration"], 3000);
    assert_eq!(days[1]["start"]["value"]["latitude"], 10);
    assert_eq!(days[1]["end"]["value"]["latitude"], 14);
    assert_eq!(days[1]["end"]["timestamp"], "2025-06-16T04:00:00Z");
    assert_eq!(days[0]["segmentCount"], 0);
    assert_eq!(
        days[0]["start"]["value"]["latitude"], 0,
        "no fix before: (0,0)"
    );
    assert_eq!(days[0]["signals"], json!([]));
    assert_eq!(days[0]["eventCounts"], json!([]));
    // The day after: no segments, gap-filled from the last fix of the day before.
    assert_eq!(days[2]["segmentCount"], 0);
    assert_eq!(days[2]["start"]["value"]["latitude"], 14);
    assert!(days[1]["signals"]
        .as_array()
        .unwrap()
        .contains(&json!({"name": "speed", "agg": "MAX", "value": 24})));

    // Across the spring DST change in Berlin: a 23-hour day.
    let q = daily_query(
        &subject,
        "2025-03-29T12:00:00Z",
        "2025-03-31T12:00:00Z",
        "Europe/Berlin",
    );
    let days = f.data(&subject, &q).await["dailyActivity"].clone();
    let bounds: Vec<(&str, &str)> = days
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["start"]["timestamp"].as_str().unwrap(),
                d["end"]["timestamp"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        bounds,
        [
            ("2025-03-28T23:00:00Z", "2025-03-29T23:00:00Z"),
            ("2025-03-29T23:00:00Z", "2025-03-30T22:00:00Z"),
            ("2025-03-30T22:00:00Z", "2025-03-31T22:00:00Z"),
        ]
    );

    let token = f.token(&subject, &ALL);
    let bad = daily_query(
        &subject,
        "2025-06-14T12:00:00Z",
        "2025-06-15T12:00:00Z",
        "Nowhere/City",
    );
    let (_, body) = f.gql(Some(&token), &bad).await;
    assert_eq!(
        body["errors"][0]["message"],
        "invalid timezone \"Nowhere/City\": unknown time zone Nowhere/City"
    );
    let idling = q.replace("IGNITION_DETECTION", "IDLING");
    let (_, body) = f.gql(Some(&token), &idling).await;
    assert_eq!(
        body["errors"][0]["message"],
        "dailyActivity does not accept mechanism IDLING; use IGNITION_DETECTION, FREQUENCY_ANALYSIS, or CHANGE_POINT_DETECTION"
    );
}
