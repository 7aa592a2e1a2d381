//! Property tests: arbitrary bytes and arbitrary JSON fed to every module and to the whole
//! pipeline never panic, and every problem comes back as a typed error with a stable reason.

use dq_cloudevent::{types, RawEvent};
use dq_decode::modules::ruptela::{DS_COMMAND, DS_DTC, DS_LOCATION, DS_STATUS};
use dq_decode::modules::tesla::DATA_VERSION_TELEMETRY;
use dq_decode::{decode_event, Decoded, EventModule, SignalModule, VehicleGate};
use proptest::prelude::*;

const SIGNAL_MODULES: [SignalModule; 5] = [
    SignalModule::Default,
    SignalModule::AutoPi,
    SignalModule::HashDog,
    SignalModule::Ruptela,
    SignalModule::Tesla,
];
const DATA_VERSIONS: [&str; 6] = [
    "",
    "v2",
    DS_STATUS,
    DS_LOCATION,
    DS_DTC,
    DATA_VERSION_TELEMETRY,
];

fn event(data: String, data_version: &str, event_type: &str) -> RawEvent {
    let mut ev = RawEvent::default();
    ev.header.event_type = event_type.to_string();
    ev.header.data_version = data_version.to_string();
    ev.header.subject = "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:1".to_string();
    ev.header.producer = "did:erc721:137:0x9c94C395cBcBDe662235E0A9d3bB87Ad708561BA:2".to_string();
    ev.data = Some(data);
    ev
}

fn check<T>(decoded: &Decoded<T>) {
    for e in &decoded.errors {
        assert!(!e.reason().is_empty());
        assert!(!e.to_string().is_empty());
    }
}

/// Runs the payload through every module under every routing key.
fn run_everything(data: &str) {
    for dv in DATA_VERSIONS {
        let status = event(data.to_string(), dv, types::STATUS);
        for module in SIGNAL_MODULES {
            check(&module.convert(&status));
        }
        let events = event(
            data.to_string(),
            if dv.is_empty() { DS_COMMAND } else { dv },
            types::EVENTS,
        );
        for module in [EventModule::Default, EventModule::Ruptela] {
            check(&module.convert(&events));
        }
        let _ = decode_event(&status, &VehicleGate::DISABLED, chrono::Utc::now());
    }
}

/// Arbitrary JSON values, numbers included as literals so overflow and precision cases occur.
fn json_value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_string()),
        any::<bool>().prop_map(|b| b.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| format!("{f:e}")),
        Just("1e400".to_string()),
        "[0-9A-Fa-f]{0,10}".prop_map(|s| format!("\"{s}\"")),
        ".{0,12}".prop_map(|s| serde_json::Value::String(s).to_string()),
        Just("\"2024-09-27T08:33:26Z\"".to_string()),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let keys = prop_oneof![
            Just("signals".to_string()),
            Just("vehicle".to_string()),
            Just("name".to_string()),
            Just("timestamp".to_string()),
            Just("value".to_string()),
            Just("events".to_string()),
            Just("location".to_string()),
            Just("payloads".to_string()),
            Just("pos".to_string()),
            Just("dtc_codes".to_string()),
            Just("charge_state".to_string()),
            "[0-9]{1,4}",
            "[a-z]{1,6}",
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((keys, inner), 0..6).prop_map(|kv| {
                let members: Vec<String> = kv
                    .into_iter()
                    .map(|(k, v)| format!("\"{k}\":{v}"))
                    .collect();
                format!("{{{}}}", members.join(","))
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        run_everything(&String::from_utf8_lossy(&bytes));
        let _ = RawEvent::from_json(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn arbitrary_json_never_panics(doc in json_value()) {
        run_everything(&doc);
    }

    #[test]
    fn shaped_payloads_never_panic(inner in json_value(), hex in "[0-9A-F]{1,18}", oid in prop::sample::select(vec!["95", "409", "518", "520", "1232", "99", "359", "964", "29", "985"])) {
        for doc in [
            format!(r#"{{"vehicle":{{"signals":[{{"name":"oil","timestamp":1,"value":{inner}}},{{"name":"charging","timestamp":{inner},"value":true}}]}}}}"#),
            format!(r#"{{"signals":{{"{oid}":"{hex}","135":"{hex}","136":{inner}}},"pos":{inner},"dtc_codes":{inner}}}"#),
            format!(r#"{{"location":[{{"ts":{inner},"spd":"{hex}","alt":{inner},"lat":{inner},"lon":1}}]}}"#),
            format!(r#"{{"signals":[{{"name":"currentLocationCoordinates","timestamp":"2024-01-01T00:00:00Z","value":{inner}}}]}}"#),
            format!(r#"{{"events":[{{"name":"safety.collision","timestamp":"2024-01-01T00:00:00Z","durationNs":{inner},"metadata":{inner},"tags":{inner}}}]}}"#),
            format!(r#"{{"drive_state":{{"latitude":{inner},"longitude":{inner},"power":{inner},"timestamp":{inner}}}}}"#),
        ] {
            run_everything(&doc);
        }
    }

    #[test]
    fn arbitrary_protobuf_never_panics(blobs in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 0..4)) {
        use base64::Engine as _;
        let encoded: Vec<String> = blobs.iter().map(|b| format!("\"{}\"", base64::engine::general_purpose::STANDARD.encode(b))).collect();
        let doc = format!(r#"{{"payloads":[{}]}}"#, encoded.join(","));
        let ev = event(doc, DATA_VERSION_TELEMETRY, types::STATUS);
        check(&SignalModule::Tesla.convert(&ev));
    }
}
