//! Acceptance 1: the Ruptela vector as a raw row → materializer → a real GraphQL execution of
//! `signalsLatest` returns the decoder's values (all 82 signals), `lastSeen` and timestamps.

use crate::*;
use dq_cloudevent::json::parse_object_members;

const RUPTELA: &str = "0xF26421509Efe92861a587482100c6d728aBf1CD0";

use dq_testkit::vector;

/// The vector run as dq's parity test does: type dimo.status, dataversion r/v0/s, the Ruptela
/// source, data = the raw `.data` text (its duplicate keys reach the decoder untouched).
fn ruptela_event() -> (RawEvent, String) {
    let text = vector("ruptela_full_status.json");
    let members = parse_object_members(&text).unwrap();
    let raw = |k: &str| members.iter().find(|m| m.key == k).unwrap().raw;
    let subject: String = serde_json::from_str(raw("subject")).unwrap();
    let time: String = serde_json::from_str(raw("time")).unwrap();
    let time = DateTime::parse_from_rfc3339(&time)
        .unwrap()
        .with_timezone(&Utc);
    let event =
        dq_dinsim::testing::EventBuilder::new(subject.clone(), "ruptela-1", "dimo.status", time)
            .source(RUPTELA)
            .data_version("r/v0/s")
            .producer(format!("{subject}-device"))
            .data(raw("data").to_string());
    (event, subject)
}

#[tokio::test]
async fn ruptela_parity_through_signals_latest() {
    let (event, subject) = ruptela_event();
    let f = fixture(&[event]).await;
    let expected: Vec<Value> =
        serde_json::from_str(&vector("ruptela_full_status.expected.json")).unwrap();
    // The complexity limit (100) allows ~25 signal fields per query, as in production.
    let mut latest = serde_json::Map::new();
    let mut chunks: Vec<Vec<String>> = Vec::new();
    for (i, s) in expected.iter().enumerate() {
        let name = s["name"].as_str().unwrap();
        let value = if s["value"].is_object() {
            "value { latitude longitude hdop }"
        } else {
            "value"
        };
        if i % 25 == 0 {
            chunks.push(vec!["lastSeen".to_string()]);
        }
        chunks
            .last_mut()
            .unwrap()
            .push(format!("{name} {{ timestamp {value} }}"));
    }
    chunks.push(vec![
        "currentLocationApproximateCoordinates { timestamp value { latitude longitude hdop } }"
            .into(),
    ]);
    for chunk in chunks {
        let query = format!(
            r#"{{ signalsLatest(subject: "{subject}") {{ {} }} }}"#,
            chunk.join(" ")
        );
        let data = f.data(&subject, &query).await;
        latest.extend(data["signalsLatest"].as_object().unwrap().clone());
    }
    let latest = Value::Object(latest);
    assert_eq!(latest["lastSeen"], "2024-09-27T08:33:26Z");
    for s in &expected {
        let name = s["name"].as_str().unwrap();
        assert_eq!(latest[name]["timestamp"], s["timestamp"], "{name}");
        assert_eq!(latest[name]["value"], s["value"], "{name}");
    }
    // The acceptance list, spelled out.
    assert_eq!(latest["speed"]["value"], 31.24609375);
    assert_eq!(latest["powertrainType"]["value"], "COMBUSTION");
    assert_eq!(
        latest["powertrainCombustionEngineEngineOilLevel"]["value"],
        "LOW"
    );
    assert_eq!(
        latest["chassisAxleRow1WheelLeftTirePressure"]["value"],
        262.00088
    );
    assert_eq!(
        latest["powertrainFuelSystemRelativeLevel"]["value"],
        19.200000000000003
    );
    let loc = &latest["currentLocationCoordinates"]["value"];
    assert_eq!(
        (&loc["latitude"], &loc["longitude"], &loc["hdop"]),
        (
            &Value::from(52.2721466),
            &Value::from(-0.9014316),
            &Value::from(0.6)
        )
    );
    // Approximate: an H3 resolution-6 cell centre near the fix, same hdop and timestamp.
    let approx = &latest["currentLocationApproximateCoordinates"];
    assert_eq!(approx["timestamp"], "2024-09-27T08:33:26Z");
    assert_eq!(approx["value"]["hdop"], 0.6);
    let lat = approx["value"]["latitude"].as_f64().unwrap();
    let lon = approx["value"]["longitude"].as_f64().unwrap();
    assert!((lat - 52.2721466).abs() < 0.05 && (lon + 0.9014316).abs() < 0.05);
    assert!(lat != 52.2721466 && lon != -0.9014316);
}
