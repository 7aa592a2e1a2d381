//! Runs every shared test vector through the built `dqctl decode` binary.
//!
//! Vectors are read at test time from the repository's `tests/vectors/` (or `DQ_VECTORS_DIR`, see
//! `dq_testkit::vectors_dir`). Each input is turned into the stored-form CloudEvent the manifest's
//! `entry` describes (vendor source address, type, dataversion) by editing only the top-level
//! members, so payload bytes (and their duplicate keys) reach the decoder untouched.
// Integration-test helpers fail their test by panicking, like the #[test] bodies clippy.toml exempts.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::panic, clippy::indexing_slicing)]

use chrono::{DateTime, Utc};
use dq_cloudevent::json::parse_object_members;
use dq_cloudevent::time::parse_rfc3339;
use serde_json::Value;
use std::io::Write as _;
use std::process::{Command, Output, Stdio};

const AUTOPI: &str = "0x5e31bBc786D7bEd95216383787deA1ab0f1c1897";
const RUPTELA: &str = "0xF26421509Efe92861a587482100c6d728aBf1CD0";
const TESLA: &str = "0xc4035Fecb1cc906130423EF05f9C20977F643722";

use dq_testkit::vector as read;

/// Rewrites top-level members of a CloudEvent document textually: `overrides` replace (or add)
/// string members; `rename` moves a member's raw value under a new key.
fn stored_form(input: &str, overrides: &[(&str, &str)], rename: &[(&str, &str)]) -> String {
    let members = parse_object_members(input).expect("vector input is a JSON object");
    let mut parts: Vec<String> = Vec::new();
    for m in &members {
        if overrides.iter().any(|(k, _)| *k == m.key) {
            continue;
        }
        let key = rename
            .iter()
            .find(|(from, _)| *from == m.key)
            .map_or(m.key.as_ref(), |(_, to)| to);
        parts.push(format!("{}:{}", serde_json::to_string(key).unwrap(), m.raw));
    }
    for (k, v) in overrides {
        parts.push(format!(
            "{}:{}",
            serde_json::to_string(k).unwrap(),
            serde_json::to_string(v).unwrap()
        ));
    }
    format!("{{{}}}", parts.join(","))
}

fn dqctl(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dqctl"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn dqctl");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    child.wait_with_output().expect("dqctl output")
}

fn decode(args: &[&str], stdin: &str) -> Value {
    let out = dqctl(args, stdin);
    assert!(
        out.status.success(),
        "dqctl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("dqctl prints JSON")
}

/// A comparable item: name, instant, and the value (numbers compared as f64).
#[derive(Debug, PartialEq)]
enum Item {
    Signal {
        name: String,
        at: DateTime<Utc>,
        value: Val,
    },
    Event {
        name: String,
        at: DateTime<Utc>,
        duration_ns: u64,
        metadata: String,
        tags: Vec<String>,
    },
}

#[derive(Debug, PartialEq)]
enum Val {
    Num(f64),
    Str(String),
    Loc(f64, f64, f64),
}

fn item(v: &Value) -> Item {
    let name = v["name"].as_str().expect("name").to_string();
    let at =
        parse_rfc3339(v["timestamp"].as_str().expect("timestamp")).expect("rfc 3339 timestamp");
    if v.get("durationNs").is_some() {
        return Item::Event {
            name,
            at,
            duration_ns: v["durationNs"].as_u64().expect("durationNs"),
            metadata: v["metadata"].as_str().expect("metadata").to_string(),
            tags: v["tags"]
                .as_array()
                .expect("tags")
                .iter()
                .map(|t| t.as_str().expect("tag").to_string())
                .collect(),
        };
    }
    let value = match &v["value"] {
        Value::Number(n) => Val::Num(n.as_f64().expect("f64")),
        Value::String(s) => Val::Str(s.clone()),
        Value::Object(o) => Val::Loc(
            o["latitude"].as_f64().unwrap(),
            o["longitude"].as_f64().unwrap(),
            o["hdop"].as_f64().unwrap(),
        ),
        other => panic!("unexpected value {other}"),
    };
    Item::Signal { name, at, value }
}

fn sorted(items: &[Value]) -> Vec<Item> {
    let mut items: Vec<Item> = items.iter().map(item).collect();
    items.sort_by_key(|i| format!("{i:?}"));
    items
}

fn assert_same(got: &Value, expected_file: &str) {
    let expected: Value =
        serde_json::from_str(&read(expected_file)).expect("expected file is JSON");
    let expected = sorted(expected.as_array().expect("expected list"));
    let key = if matches!(expected.first(), Some(Item::Event { .. })) {
        "events"
    } else {
        "signals"
    };
    let got = sorted(got[key].as_array().expect("output list"));
    assert_eq!(got.len(), expected.len(), "item count for {expected_file}");
    for (g, e) in got.iter().zip(&expected) {
        assert_eq!(g, e, "{expected_file}");
    }
}

fn module_only(input: &str) -> Value {
    decode(&["decode", "--module-only"], input)
}

#[test]
fn ruptela_full_status() {
    let input = stored_form(
        &read("ruptela_full_status.json"),
        &[("source", RUPTELA), ("type", "dimo.status")],
        &[("ds", "dataversion")],
    );
    let out = module_only(&input);
    assert_same(&out, "ruptela_full_status.expected.json");
    assert_eq!(out["errors"], serde_json::json!([]));
}

#[test]
fn ruptela_dtc() {
    let input = stored_form(
        &read("ruptela_dtc.json"),
        &[("source", RUPTELA), ("type", "dimo.status")],
        &[("ds", "dataversion")],
    );
    assert_same(&module_only(&input), "ruptela_dtc.expected.json");
}

#[test]
fn ruptela_events_all() {
    let input = stored_form(
        &read("ruptela_events_all.json"),
        &[("source", RUPTELA), ("type", "dimo.events")],
        &[],
    );
    assert_same(&module_only(&input), "ruptela_events_all.expected.json");
}

#[test]
fn autopi_full_v2() {
    let input = stored_form(&read("autopi_full_v2.json"), &[("source", AUTOPI)], &[]);
    assert_same(&module_only(&input), "autopi_full_v2.expected.json");
}

#[test]
fn autopi_full_v2_materialized() {
    let input = stored_form(&read("autopi_full_v2.json"), &[("source", AUTOPI)], &[]);
    // The vector's subject lives on chain 1; gate on that chain and the production vehicle NFT.
    let out = decode(&["decode", "--chain-id", "1"], &input);
    assert_eq!(out["route"], "signals:autopi");
    assert_same(&out, "autopi_full_v2.materialized.expected.json");
}

#[test]
fn default_multi_types() {
    assert_same(
        &module_only(&read("default_multi_types.json")),
        "default_multi_types.expected.json",
    );
}

#[test]
fn default_partial_invalid() {
    let out = module_only(&read("default_partial_invalid.json"));
    assert_same(&out, "default_partial_invalid.expected.json");
    assert_eq!(out["errors"][0]["reason"], "unknown_signal");
}

#[test]
fn tesla_api_full() {
    let input = stored_form(&read("tesla_api_full.json"), &[("source", TESLA)], &[]);
    assert_same(&module_only(&input), "tesla_api_full.expected.json");
}

#[test]
fn tesla_telemetry_location() {
    let input = stored_form(
        &read("tesla_telemetry_location.json"),
        &[("source", TESLA)],
        &[],
    );
    assert_same(
        &module_only(&input),
        "tesla_telemetry_location.expected.json",
    );
}

#[test]
fn every_manifest_vector_has_a_test() {
    let manifest: Value = serde_json::from_str(&read("index.json")).expect("index.json");
    let ids: Vec<&str> = manifest
        .as_array()
        .expect("manifest list")
        .iter()
        .filter_map(|v| v["id"].as_str())
        .collect();
    let covered = [
        "ruptela_full_status",
        "ruptela_dtc",
        "ruptela_events_all",
        "autopi_full_v2",
        "default_multi_types",
        "default_partial_invalid",
        "tesla_api_full",
        "tesla_telemetry_location",
    ];
    for id in ids {
        assert!(
            covered.contains(&id),
            "vector {id} has no test in cli/dqctl/tests/vectors.rs"
        );
    }
}

#[test]
fn materialized_path_applies_the_vehicle_gate() {
    // The default vectors' subject is on chain 80003, so production settings gate it out.
    let out = decode(&["decode"], &read("default_multi_types.json"));
    assert_eq!(out["route"], "gated:wrong_chain");
    assert_eq!(out["signals"], serde_json::json!([]));
    let out = decode(&["decode", "--no-gate"], &read("default_multi_types.json"));
    assert_eq!(out["route"], "signals:default");
    assert_eq!(out["signals"].as_array().map(Vec::len), Some(3));
}

#[test]
fn unreadable_input_exits_2() {
    let out = dqctl(&["decode"], "not json");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a CloudEvent"));
    let out = dqctl(&["decode", "/nonexistent/event.json"], "");
    assert_eq!(out.status.code(), Some(2));
}
