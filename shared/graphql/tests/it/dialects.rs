//! Issue 11: the telemetry-api and fetch-api dialects over one lake, next to dq's. Each suite
//! runs representative documents of its dialect (every root field, every aggregation kind,
//! both mechanism spellings, attestations with filters, vinVCLatest, indexes/latestIndex,
//! includeDeleted on and off) and checks answers and the dialect's exact errors; the same
//! questions asked in two dialects must return the same data.

use crate::segments::drives;
use crate::*;
use dq_auth::Permission;
use serde_json::json;

/// telemetry's parity vehicle.
const TOKEN: u32 = 39718;
/// An attester of plain attestations.
const ATTESTER: &str = "0x0000000000000000000000000000000000000000";
/// Another attester: its tombstones void nothing of `ATTESTER`'s under fetch's rule.
const OTHER_ATTESTER: &str = "0x52fD9Dc294066792785CcD85eFB9A0Bd48DE01E4";
const ACCOUNT: &str = "did:ethr:137:0x9c94C395cBcBDe662235E0A9d3bB87Ad708561BA";
const RECORDED_BY: &str = "did:nft:137:0x9c94C395cBcBDe662235E0A9d3bB87Ad708561BA_31653";

fn attestation(
    subject: &str,
    source: &str,
    id: &str,
    time: DateTime<Utc>,
    tags: &[&str],
    data: Value,
) -> RawEvent {
    RawEvent {
        header: CloudEventHeader {
            spec_version: "1.0".into(),
            event_type: "dimo.attestation".into(),
            source: source.into(),
            subject: subject.into(),
            id: id.into(),
            time,
            data_content_type: "application/json".into(),
            producer: format!("{subject}-producer"),
            signature: format!("0x{}", "cd".repeat(65)),
            tags: tags.iter().map(|t| t.to_string()).collect(),
            ..Default::default()
        },
        data: Some(data.to_string()),
        data_base64: None,
    }
}

/// attestation-api's VIN credential for `vin`, recorded at `recorded_at`.
fn vin_vc(subject: &str, id: &str, time: DateTime<Utc>, vin: &str) -> RawEvent {
    let mut e = attestation(
        subject,
        STORAGE_NODE,
        id,
        time,
        &["vehicle.vin", "vehicle"],
        json!({
            "validFrom": "2024-11-08T03:54:51Z",
            "validTo": "2024-11-10T00:00:00Z",
            "credentialSubject": {
                "vehicleIdentificationNumber": vin,
                "recordedBy": RECORDED_BY,
                "recordedAt": "2024-11-08T00:40:29Z",
                "vehicleContractAddress": "eth:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF",
                "vehicleTokenId": TOKEN,
            }
        }),
    );
    e.header.data_version = "vin/v1.0".into();
    e.header.producer = RECORDED_BY.into();
    e
}

/// The lake: drives with a fuel type and a harsh-braking event; attestations A (voided by its
/// own attester), B (a "tombstone" from another attester names it), an orphan tombstone, two
/// VIN credentials, and one attestation about an account.
fn events(v: &str) -> (Vec<RawEvent>, [RawEvent; 2]) {
    let mut all = drives(v);
    all.push(status(
        v,
        SOURCE,
        "fuel",
        at(700),
        vec![item("obdFuelTypeName", at(700), json!("GASOLINE"))],
    ));
    let mut harsh = status(v, SOURCE, "ev-1", at(2400 + 300), vec![]);
    harsh.header.event_type = "dimo.events".into();
    harsh.data = Some(
        json!({"events": [{"name": "behavior.harshBraking", "timestamp": rfc(at(2400 + 300)),
                            "durationNs": 5, "metadata": "{\"k\":1}", "tags": ["a"]}]})
        .to_string(),
    );
    all.push(harsh);
    let a = attestation(v, ATTESTER, "att-a", at(100), &["tag1"], json!({"a": 1}));
    let b = attestation(
        v,
        ATTESTER,
        "att-b",
        at(200),
        &["tag2", "vehicle"],
        json!({"b": 2}),
    );
    all.extend([
        a.clone(),
        b.clone(),
        vin_vc(v, "vin-old", at(50), "OLDVIN0000000000X"),
        vin_vc(v, "vin-new", at(300), "3eMCZ5AN5PM647548"),
        attestation(ACCOUNT, ATTESTER, "att-acct", at(150), &[], json!({"c": 3})),
        dq_dinsim::tombstone(&a, ATTESTER, "tomb-a", at(400), "wrong"),
        dq_dinsim::tombstone(&b, OTHER_ATTESTER, "tomb-b", at(410), "not mine"),
        dq_dinsim::tombstone(
            &attestation(v, ATTESTER, "no-such-id", at(0), &[], json!({})),
            ATTESTER,
            "tomb-orphan",
            at(420),
            "orphan",
        ),
    ]);
    (all, [a, b])
}

fn telemetry_token(f: &Fixture, asset: &str, permissions: &[Permission]) -> String {
    let mut claims = dq_auth::dev::DevClaims::vehicle(asset, permissions);
    claims.cloud_events = Some(json!({"events": [
        {"event_type": "dimo.attestation", "source": "*", "ids": ["*"], "tags": []}
    ]}));
    f.signer.mint(&claims).unwrap()
}

fn every_permission() -> Vec<Permission> {
    let mut p = ALL.to_vec();
    p.extend([Permission::GetVinCredential, Permission::GetRawData]);
    p
}

/// Data of a request that must succeed.
async fn ok(f: &Fixture, dialect: Dialect, token: &str, query: &str) -> Value {
    let (status, body) = f.gql_in(dialect, Some(token), query).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.get("errors").is_none(), "{query}\n{body}");
    body["data"].clone()
}

/// The first error's message and code of a request answered with errors.
async fn error(f: &Fixture, dialect: Dialect, token: &str, query: &str) -> (String, Value) {
    let (status, body) = f.gql_in(dialect, Some(token), query).await;
    assert_eq!(status, 200, "{body}");
    let e = &body["errors"][0];
    assert!(e.is_object(), "{query}\n{body}");
    (
        e["message"].as_str().unwrap().to_string(),
        e["extensions"]["code"].clone(),
    )
}

/// The signal documents both dq and telemetry answer, with `{vehicle}` standing for the
/// dialect's vehicle argument.
fn signal_documents() -> Vec<String> {
    let from = rfc(at(-3600));
    let to = rfc(at(7200));
    vec![
        format!(
            r#"{{ signals({{vehicle}}, interval: "20m", from: "{from}", to: "{to}") {{ timestamp
                 avg: speed(agg: AVG) med: speed(agg: MED) max: speed(agg: MAX) min: speed(agg: MIN)
                 first: speed(agg: FIRST) last: speed(agg: LAST) rand: speed(agg: RAND)
                 fast: speed(agg: AVG, filter: {{gt: 21.5}})
                 loc: currentLocationCoordinates(agg: FIRST) {{ latitude longitude hdop }}
                 locAvg: currentLocationCoordinates(agg: AVG) {{ latitude }}
                 approx: currentLocationApproximateCoordinates(agg: LAST) {{ latitude longitude }}
                 fuel: obdFuelTypeName(agg: TOP) fuelLast: obdFuelTypeName(agg: LAST) }} }}"#
        ),
        r#"{ signalsLatest({vehicle}) { lastSeen speed { timestamp value }
             currentLocationCoordinates { value { latitude longitude } }
             currentLocationApproximateCoordinates { value { latitude } }
             obdFuelTypeName { value } } }"#
            .to_string(),
        r#"{ availableSignals({vehicle}) }"#.to_string(),
        r#"{ signalsSnapshot({vehicle}) { lastSeen signals { name timestamp valueNumber valueString valueLocation { latitude } } } }"#.to_string(),
        r#"{ dataSummary({vehicle}) { numberOfSignals availableSignals firstSeen lastSeen
             signalDataSummary { name numberOfSignals } eventDataSummary { name numberOfEvents } } }"#
            .to_string(),
        format!(
            r#"{{ events({{vehicle}}, from: "{from}", to: "{to}") {{ timestamp name source durationNs metadata }} }}"#
        ),
        format!(
            r#"{{ segments({{vehicle}}, from: "{from}", to: "{to}", mechanism: {{IGNITION}},
                 signalRequests: [{{name: "speed", agg: MAX}}], eventRequests: [{{name: "behavior.harshBraking"}}], limit: 3) {{
                 start {{ timestamp value {{ latitude }} }} end {{ timestamp }} duration isOngoing
                 signals {{ name agg value }} eventCounts {{ name count }} }} }}"#
        ),
        format!(
            r#"{{ dailyActivity({{vehicle}}, from: "{from}", to: "{to}", mechanism: {{IGNITION}}, timezone: "America/New_York") {{
                 segmentCount duration start {{ timestamp }} signals {{ name agg value }} }} }}"#
        ),
    ]
}

fn in_dialect(doc: &str, dialect: Dialect, subject: &str) -> String {
    match dialect {
        Dialect::Telemetry => doc
            .replace("{vehicle}", &format!("tokenId: {TOKEN}"))
            .replace("{IGNITION}", "ignitionDetection"),
        _ => doc
            .replace("{vehicle}", &format!("subject: \"{subject}\""))
            .replace("{IGNITION}", "IGNITION_DETECTION"),
    }
}

#[tokio::test]
async fn telemetry_answers_what_dq_answers() {
    let v = vehicle(TOKEN);
    let (lake, _) = events(&v);
    let f = fixture(&lake).await;
    let token = telemetry_token(&f, &v, &every_permission());
    for doc in signal_documents() {
        let dq = ok(&f, Dialect::Dq, &token, &in_dialect(&doc, Dialect::Dq, &v)).await;
        let telemetry = ok(
            &f,
            Dialect::Telemetry,
            &token,
            &in_dialect(&doc, Dialect::Telemetry, &v),
        )
        .await;
        assert_eq!(dq, telemetry, "{doc}");
        let root = dq.as_object().unwrap().values().next().unwrap();
        assert!(!root.is_null() && root != &json!([]), "empty answer: {doc}");
    }
    // The fixture answers what it was seeded with.
    let latest = ok(
        &f,
        Dialect::Telemetry,
        &token,
        &format!("{{ signalsLatest(tokenId: {TOKEN}) {{ speed {{ value }} obdFuelTypeName {{ value }} }} }}"),
    )
    .await;
    assert_eq!(
        latest,
        json!({"signalsLatest": {"speed": {"value": 24}, "obdFuelTypeName": {"value": "GASOLINE"}}})
    );
    let segments = ok(
        &f,
        Dialect::Telemetry,
        &token,
        &in_dialect(&signal_documents()[6], Dialect::Telemetry, &v),
    )
    .await;
    assert_eq!(segments["segments"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn telemetry_errors_and_enums() {
    let v = vehicle(TOKEN);
    let (lake, _) = events(&v);
    let f = fixture(&lake).await;
    let token = telemetry_token(&f, &v, &every_permission());
    let from = rfc(at(-3600));
    let to = rfc(at(7200));

    // The other spelling of the mechanism enum is a validation error (HTTP 422) both ways.
    let seg = |vehicle: &str, mechanism: &str| {
        format!(
            r#"{{ segments({vehicle}, from: "{from}", to: "{to}", mechanism: {mechanism}) {{ duration }} }}"#
        )
    };
    let tid = format!("tokenId: {TOKEN}");
    let sub = format!("subject: \"{v}\"");
    let (status, _) = f
        .gql_in(
            Dialect::Telemetry,
            Some(&token),
            &seg(&tid, "FREQUENCY_ANALYSIS"),
        )
        .await;
    assert_eq!(status, 422);
    let (status, _) = f
        .gql_in(Dialect::Dq, Some(&token), &seg(&sub, "frequencyAnalysis"))
        .await;
    assert_eq!(status, 422);
    let freq = ok(
        &f,
        Dialect::Telemetry,
        &token,
        &seg(&tid, "frequencyAnalysis"),
    )
    .await;
    let dq_freq = ok(&f, Dialect::Dq, &token, &seg(&sub, "FREQUENCY_ANALYSIS")).await;
    assert_eq!(freq, dq_freq);
    // dq's argument names are not telemetry's.
    let (status, _) = f
        .gql_in(
            Dialect::Telemetry,
            Some(&token),
            &format!(r#"{{ signalsLatest({sub}) {{ lastSeen }} }}"#),
        )
        .await;
    assert_eq!(status, 422);
    // dailyActivity's rejection names the mechanisms as the dialect spells them.
    let (message, code) = error(
        &f,
        Dialect::Telemetry,
        &token,
        &format!(r#"{{ dailyActivity({tid}, from: "{from}", to: "{to}", mechanism: idling) {{ duration }} }}"#),
    )
    .await;
    assert_eq!(
        message,
        "dailyActivity does not accept mechanism idling; use ignitionDetection, frequencyAnalysis, or changePointDetection"
    );
    assert_eq!(code, "BAD_REQUEST");

    // The vehicle gate compares the decoded asset: token id, then contract.
    let latest = format!("{{ signalsLatest({tid}) {{ lastSeen }} }}");
    let other = telemetry_token(&f, &vehicle(999_999), &every_permission());
    let (message, code) = error(&f, Dialect::Telemetry, &other, &latest).await;
    assert_eq!(
        message,
        "unauthorized: unauthorized: token id does not match"
    );
    assert_eq!(code, Value::Null);
    let foreign = telemetry_token(
        &f,
        &format!("did:erc721:137:{OTHER_SOURCE}:{TOKEN}"),
        &every_permission(),
    );
    let (message, _) = error(&f, Dialect::Telemetry, &foreign, &latest).await;
    assert_eq!(
        message,
        format!(
            "unauthorized: unauthorized: contract in claim is {OTHER_SOURCE} instead of the required 0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF"
        )
    );
    // A lower-case asset decodes to the same vehicle.
    let lower = telemetry_token(&f, &v.to_lowercase(), &every_permission());
    ok(&f, Dialect::Telemetry, &lower, &latest).await;
    // Privilege texts: AllOf says "privilege(s)", OneOf as dq.
    let no_history = telemetry_token(&f, &v, &[Permission::GetLocationHistory]);
    let (message, _) = error(
        &f,
        Dialect::Telemetry,
        &no_history,
        &format!("{{ signalsLatest({tid}) {{ speed {{ value }} }} }}"),
    )
    .await;
    assert_eq!(
        message,
        "unauthorized: missing required privilege(s) privilege:GetNonLocationHistory"
    );
    let nothing = telemetry_token(&f, &v, &[]);
    let (message, _) = error(
        &f,
        Dialect::Telemetry,
        &nothing,
        &format!("{{ signalsLatest({tid}) {{ currentLocationApproximateCoordinates {{ value {{ latitude }} }} }} }}"),
    )
    .await;
    assert_eq!(
        message,
        "unauthorized: requires at least one of the following privileges [privilege:GetApproximateLocation privilege:GetLocationHistory]"
    );
    // Both directives failing: the privilege check runs first (gqlgen order).
    let (message, _) = error(
        &f,
        Dialect::Telemetry,
        &telemetry_token(&f, &vehicle(1), &[]),
        &format!(r#"{{ events({tid}, from: "{from}", to: "{to}") {{ name }} }}"#),
    )
    .await;
    assert_eq!(
        message,
        "unauthorized: missing required privilege(s) privilege:GetNonLocationHistory"
    );
    // Bad arguments keep the shared texts.
    let (message, code) = error(
        &f,
        Dialect::Telemetry,
        &token,
        &format!(
            r#"{{ signals({tid}, interval: "soon", from: "{from}", to: "{to}") {{ timestamp }} }}"#
        ),
    )
    .await;
    assert!(message.starts_with("failed parsing interval"), "{message}");
    assert_eq!(code, Value::Null);
    let (status, _) = f
        .gql_in(
            Dialect::Telemetry,
            Some(&token),
            r#"{ signalsLatest(tokenId: "39718") { lastSeen } }"#,
        )
        .await;
    assert_eq!(status, 422);

    // An asset that is neither a vehicle nor an account DID invalidates the token (HTTP 401).
    let nft = telemetry_token(&f, RECORDED_BY, &every_permission());
    let (status, body) = f.gql_in(Dialect::Telemetry, Some(&nft), &latest).await;
    assert_eq!((status, body), (401, json!({"message": "JWT is invalid."})));
    // dq accepts any asset string.
    let (status, _) = f
        .gql_in(
            Dialect::Dq,
            Some(&nft),
            &format!("{{ signalsLatest({sub}) {{ lastSeen }} }}"),
        )
        .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn telemetry_attestations_and_vin_credentials() {
    let v = vehicle(TOKEN);
    let (lake, [a, _]) = events(&v);
    let f = fixture(&lake).await;
    let token = telemetry_token(&f, &v, &every_permission());
    let fields =
        "id vehicleTokenId time attestation type source dataVersion producer signature tags";
    let list = |args: &str| {
        let args = if args.is_empty() {
            String::new()
        } else {
            format!("({args})")
        };
        format!("{{ attestations{args} {{ {fields} }} }}")
    };
    let ids = |data: &Value| -> Vec<String> {
        data["attestations"]
            .as_array()
            .map(|l| {
                l.iter()
                    .map(|a| a["id"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };

    // Newest first, voided ones included (no tombstone suppression), tombstones never.
    let all = ok(
        &f,
        Dialect::Telemetry,
        &token,
        &list(&format!("tokenId: {TOKEN}")),
    )
    .await;
    assert_eq!(ids(&all), ["vin-new", "att-b", "att-a", "vin-old"]);
    let first_a = &all["attestations"][2];
    assert_eq!(first_a["vehicleTokenId"], TOKEN);
    assert_eq!(first_a["time"], rfc(at(100)));
    assert_eq!(first_a["source"], ATTESTER);
    assert_eq!(first_a["dataVersion"], "");
    assert_eq!(first_a["producer"], format!("{v}-producer"));
    assert_eq!(first_a["tags"], json!(["tag1"]));
    let encoded: Value = serde_json::from_str(first_a["attestation"].as_str().unwrap()).unwrap();
    assert_eq!(
        encoded,
        json!({
            "specversion": "1.0", "type": "dimo.attestation", "source": ATTESTER,
            "subject": v, "id": "att-a", "time": rfc(at(100)),
            "datacontenttype": "application/json", "producer": format!("{v}-producer"),
            "signature": a.header.signature, "tags": ["tag1"], "data": {"a": 1}
        })
    );
    // Filters: source (any case), tags with an `or`, the exclusive lower-bound cursor, limit.
    let q = |filter: &str| list(&format!("tokenId: {TOKEN}, filter: {{{filter}}}"));
    let lower = ATTESTER.to_lowercase();
    let by_tags = ok(
        &f,
        Dialect::Telemetry,
        &token,
        &q(&format!(
            r#"source: "{lower}", tags: {{containsAny: ["tag1"], or: [{{containsAll: ["tag2", "vehicle"]}}]}}"#
        )),
    )
    .await;
    assert_eq!(ids(&by_tags), ["att-b", "att-a"]);
    let nested = ok(
        &f,
        Dialect::Telemetry,
        &token,
        &q(r#"tags: {containsAll: ["nope"], or: [{containsAny: ["nope"], or: [{containsAny: ["vehicle.vin"]}]}]}"#),
    )
    .await;
    assert_eq!(ids(&nested), ["vin-new", "vin-old"]);
    let after_cursor = ok(
        &f,
        Dialect::Telemetry,
        &token,
        &q(&format!(r#"cursor: "{}""#, rfc(at(100)))),
    )
    .await;
    assert_eq!(ids(&after_cursor), ["vin-new", "att-b"]);
    let newest = ok(&f, Dialect::Telemetry, &token, &q("limit: 1")).await;
    assert_eq!(ids(&newest), ["vin-new"]);
    let vin_only = ok(
        &f,
        Dialect::Telemetry,
        &token,
        &q(&format!(
            r#"dataVersion: "vin/v1.0", before: "{}""#,
            rfc(at(400))
        )),
    )
    .await;
    assert_eq!(ids(&vin_only), ["vin-new", "vin-old"], "{vin_only}");
    // Nothing matching is null, not [].
    let none = ok(&f, Dialect::Telemetry, &token, &q(r#"producer: "nobody""#)).await;
    assert_eq!(none, json!({"attestations": null}));
    // An account subject: the asset is the ethr DID; vehicleTokenId is 0.
    let account = telemetry_token(&f, ACCOUNT, &[]);
    let acct = ok(
        &f,
        Dialect::Telemetry,
        &account,
        &list(&format!(r#"subject: "{ACCOUNT}""#)),
    )
    .await;
    assert_eq!(ids(&acct), ["att-acct"]);
    assert_eq!(acct["attestations"][0]["vehicleTokenId"], 0);
    assert_eq!(acct["attestations"][0]["tags"], Value::Null);

    // Errors: argument check first, then the grants ("invalid claims", code UNAUTHORIZED).
    let (message, code) = error(&f, Dialect::Telemetry, &token, &list("")).await;
    assert_eq!(
        (message.as_str(), code),
        ("asset or tokenId is required", json!("BAD_REQUEST"))
    );
    let no_grant = f.token(&v, &every_permission());
    let (message, code) = error(
        &f,
        Dialect::Telemetry,
        &no_grant,
        &list(&format!("tokenId: {TOKEN}")),
    )
    .await;
    assert_eq!(
        (message.as_str(), code),
        ("invalid claims", json!("UNAUTHORIZED"))
    );
    let (message, _) = error(
        &f,
        Dialect::Telemetry,
        &token,
        &list(&format!("tokenId: {TOKEN}, subject: \"{ACCOUNT}\"")),
    )
    .await;
    assert_eq!(message, "invalid claims");
    let (status, body) = f
        .gql_in(Dialect::Telemetry, Some(&token), &q(r#"source: "0x12""#))
        .await;
    assert_eq!(status, 200);
    assert_eq!(body["data"], json!({"attestations": null}));
    assert_eq!(body["errors"][0]["message"], "not a valid hex address");
    assert_eq!(
        body["errors"][0]["path"],
        json!(["attestations", "filter", "source"])
    );

    // vinVCLatest: the newest credential from the storage node, decoded.
    let vc_fields = "vehicleTokenId vin recordedBy recordedAt countryCode vehicleContractAddress validFrom validTo rawVC";
    let vin = format!("{{ vinVCLatest(tokenId: {TOKEN}) {{ {vc_fields} }} }}");
    let vc = ok(&f, Dialect::Telemetry, &token, &vin).await;
    let vc = &vc["vinVCLatest"];
    assert_eq!(vc["vin"], "3eMCZ5AN5PM647548");
    assert_eq!(vc["vehicleTokenId"], TOKEN);
    assert_eq!(vc["recordedBy"], RECORDED_BY);
    assert_eq!(vc["recordedAt"], "2024-11-08T00:40:29Z");
    assert_eq!(vc["countryCode"], Value::Null);
    assert_eq!(
        vc["vehicleContractAddress"],
        "eth:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF"
    );
    assert_eq!(vc["validFrom"], "2024-11-08T03:54:51Z");
    assert_eq!(vc["validTo"], "2024-11-10T00:00:00Z");
    let raw: Value = serde_json::from_str(vc["rawVC"].as_str().unwrap()).unwrap();
    assert_eq!(raw["id"], "vin-new");
    assert_eq!(raw["dataversion"], "vin/v1.0");
    assert_eq!(raw["data"]["credentialSubject"]["vehicleTokenId"], TOKEN);
    // None for another vehicle: null without error.
    let other = vehicle(7);
    let other_token = telemetry_token(&f, &other, &every_permission());
    let none = ok(
        &f,
        Dialect::Telemetry,
        &other_token,
        "{ vinVCLatest(tokenId: 7) { vin } }",
    )
    .await;
    assert_eq!(none, json!({"vinVCLatest": null}));
    // Privilege first, then the vehicle gate.
    let (message, _) = error(&f, Dialect::Telemetry, &telemetry_token(&f, &v, &ALL), &vin).await;
    assert_eq!(
        message,
        "unauthorized: missing required privilege(s) privilege:GetVINCredential"
    );
    let (message, _) = error(&f, Dialect::Telemetry, &other_token, &vin).await;
    assert_eq!(
        message,
        "unauthorized: unauthorized: token id does not match"
    );
}

#[tokio::test]
async fn fetch_dialect_tombstones_indexes_and_nulls() {
    let v = vehicle(TOKEN);
    let (lake, _) = events(&v);
    let f = fixture(&lake).await;
    let token = f.token(&v, &[Permission::GetRawData]);
    let ids = |list: &Value| -> Vec<String> {
        list.as_array()
            .unwrap()
            .iter()
            .map(|e| e["header"]["id"].as_str().unwrap().to_string())
            .collect()
    };
    let list = |args: &str| {
        format!(r#"{{ cloudEvents(did: "{v}", limit: 50, {args}) {{ header {{ id }} }} }}"#)
    };
    let attestations = r#"filter: {type: "dimo.attestation", source: "0x0000000000000000000000000000000000000000"}"#;

    // Source-matched voiding: A is voided by its own attester; B's "tombstone" came from
    // another attester and voids nothing; tombstones stay visible.
    let shown = ok(&f, Dialect::Fetch, &token, &list(attestations)).await;
    assert_eq!(ids(&shown["cloudEvents"]), ["att-b"]);
    let deleted = ok(
        &f,
        Dialect::Fetch,
        &token,
        &list(&format!("{attestations}, includeDeleted: true")),
    )
    .await;
    assert_eq!(ids(&deleted["cloudEvents"]), ["att-b", "att-a"]);
    let with_tombstones = ok(
        &f,
        Dialect::Fetch,
        &token,
        &list(r#"filter: {types: ["dimo.attestation", "dimo.tombstone"], source: "0x0000000000000000000000000000000000000000"}"#),
    )
    .await;
    assert_eq!(
        ids(&with_tombstones["cloudEvents"]),
        ["tomb-orphan", "tomb-a", "att-b"]
    );
    // dq's rule hides every named target and the tombstones themselves.
    let dq = ok(
        &f,
        Dialect::Dq,
        &token,
        &format!(
            r#"{{ cloudEvents(subject: "{v}", limit: 50, {attestations}) {{ header {{ id }} }} }}"#
        ),
    )
    .await;
    assert_eq!(ids(&dq["cloudEvents"]), Vec::<String>::new());

    // Indexes: header-only, with the gRPC surface's keys.
    let idx = ok(
        &f,
        Dialect::Fetch,
        &token,
        &format!(r#"{{ indexes(did: "{v}", limit: 2, filter: {{type: "dimo.attestation"}}) {{ header {{ id source tags }} indexKey }}
                     latestIndex(did: "{v}", filter: {{type: "dimo.attestation"}}, includeDeleted: true) {{ header {{ id }} indexKey }} }}"#),
    )
    .await;
    assert_eq!(
        idx["indexes"],
        json!([
            {"header": {"id": "vin-new", "source": STORAGE_NODE, "tags": ["vehicle.vin", "vehicle"]}, "indexKey": format!("lake://{v}/vin-new")},
            {"header": {"id": "att-b", "source": ATTESTER, "tags": ["tag2", "vehicle"]}, "indexKey": format!("lake://{v}/att-b")},
        ])
    );
    assert_eq!(idx["latestIndex"]["header"]["id"], "vin-new");
    // Aliased per-source lookups: an empty source is null and does not null its sibling.
    let (status, body) = f
        .gql_in(
            Dialect::Fetch,
            Some(&token),
            &format!(
                r#"{{ vin: latestCloudEvent(did: "{v}", filter: {{source: "{STORAGE_NODE}"}}) {{ header {{ id }} data }}
                     none: latestCloudEvent(did: "{v}", filter: {{source: "0x000000000000000000000000000000000000dEaD"}}) {{ header {{ id }} }}
                     vinIndex: latestIndex(did: "{v}", filter: {{source: "{STORAGE_NODE}"}}) {{ header {{ id }} }}
                     noIndex: latestIndex(did: "{v}", filter: {{source: "0x000000000000000000000000000000000000dEaD"}}) {{ header {{ id }} }} }}"#
            ),
        )
        .await;
    assert_eq!(status, 200);
    assert!(body.get("errors").is_none(), "{body}");
    assert_eq!(body["data"]["vin"]["header"]["id"], "vin-new");
    assert_eq!(
        body["data"]["vin"]["data"]["credentialSubject"]["vehicleIdentificationNumber"],
        "3eMCZ5AN5PM647548"
    );
    assert_eq!(body["data"]["none"], Value::Null);
    assert_eq!(body["data"]["vinIndex"]["header"]["id"], "vin-new");
    assert_eq!(body["data"]["noIndex"], Value::Null);
    // dq: the same miss is an error and nulls the whole data.
    let (message, _) = error(
        &f,
        Dialect::Dq,
        &token,
        &format!(r#"{{ latestCloudEvent(subject: "{v}", filter: {{source: "0x000000000000000000000000000000000000dEaD"}}) {{ header {{ id }} }} }}"#),
    )
    .await;
    assert!(message.contains("not found"), "{message}");

    // Type summaries follow includeDeleted; tombstones count as their own type.
    let types = |extra: &str| {
        format!(
            r#"{{ availableCloudEventTypes(did: "{v}", filter: {{source: "{ATTESTER}"}}{extra}) {{ type count }} }}"#
        )
    };
    let summary = ok(&f, Dialect::Fetch, &token, &types("")).await;
    assert_eq!(
        summary["availableCloudEventTypes"],
        json!([{"type": "dimo.attestation", "count": 1}, {"type": "dimo.tombstone", "count": 2}])
    );
    let summary = ok(&f, Dialect::Fetch, &token, &types(", includeDeleted: true")).await;
    assert_eq!(
        summary["availableCloudEventTypes"][0],
        json!({"type": "dimo.attestation", "count": 2})
    );
    // An empty list is [] and includeDeleted: null means false.
    let empty = ok(
        &f,
        Dialect::Fetch,
        &token,
        &format!(r#"{{ indexes(did: "{v}", filter: {{type: "nothing"}}, includeDeleted: null) {{ indexKey }} }}"#),
    )
    .await;
    assert_eq!(empty, json!({"indexes": []}));

    // Errors: fetch-api's texts, no extensions; dq's argument name is a validation error.
    let stranger = f.token(&vehicle(1), &[Permission::GetRawData]);
    let (status, body) = f.gql_in(Dialect::Fetch, Some(&stranger), &list("")).await;
    assert_eq!(status, 200);
    assert_eq!(body["data"], Value::Null);
    assert_eq!(
        body["errors"][0]["message"],
        "unauthorized: token does not have access to this subject"
    );
    assert!(body["errors"][0].get("extensions").is_none(), "{body}");
    let (message, _) = error(&f, Dialect::Fetch, &f.token(&v, &ALL[..1]), &list("")).await;
    assert_eq!(
        message,
        "unauthorized: token does not have required permission for this operation"
    );
    let (status, _) = f
        .gql_in(
            Dialect::Fetch,
            Some(&token),
            &format!(r#"{{ cloudEvents(subject: "{v}") {{ header {{ id }} }} }}"#),
        )
        .await;
    assert_eq!(status, 422);
    // Bad arguments: wrong types are validation errors (HTTP 422) as in gqlgen.
    for doc in [
        "{ cloudEvents(did: 5) { header { id } } }".to_string(),
        format!(r#"{{ indexes(did: "{v}", limit: "ten") {{ indexKey }} }}"#),
        format!(r#"{{ latestIndex(did: "{v}", includeDeleted: "yes") {{ indexKey }} }}"#),
    ] {
        let (status, body) = f.gql_in(Dialect::Fetch, Some(&token), &doc).await;
        assert_eq!(status, 422, "{doc}: {body}");
    }
}

/// The same question in two dialects returns the same data (acceptance 2): fetch and dq agree
/// where their tombstone rules coincide (status events), telemetry and dq on every signal
/// operation (above).
#[tokio::test]
async fn fetch_answers_what_dq_answers() {
    let v = vehicle(TOKEN);
    let (lake, _) = events(&v);
    let f = fixture(&lake).await;
    let token = f.token(&v, &[Permission::GetRawData]);
    let docs = [
        r#"{ cloudEvents({vehicle}, limit: 4, filter: {type: "dimo.status", after: "2025-06-15T15:00:00Z"}) { header { id type time source producer tags } data } }"#,
        r#"{ latestCloudEvent({vehicle}, filter: {type: "dimo.status"}) { header { id time } data dataBase64 dataUrl } }"#,
        r#"{ availableCloudEventTypes({vehicle}, filter: {type: "dimo.status"}) { type count firstSeen lastSeen } }"#,
    ];
    for doc in docs {
        let dq = ok(
            &f,
            Dialect::Dq,
            &token,
            &doc.replace("{vehicle}", &format!("subject: \"{v}\"")),
        )
        .await;
        let fetch = ok(
            &f,
            Dialect::Fetch,
            &token,
            &doc.replace("{vehicle}", &format!("did: \"{v}\"")),
        )
        .await;
        assert_eq!(dq, fetch, "{doc}");
        assert_ne!(dq.to_string(), r#"{"cloudEvents":[]}"#);
    }
}
