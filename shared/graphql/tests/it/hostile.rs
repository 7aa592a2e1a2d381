//! Hostile input (issue 10): documents generated from the served schema — deep, wide, aliased,
//! huge literals, wrong types, garbage — and SQL metacharacters in every string argument. The
//! router must answer each with a GraphQL error or data: never a 5xx, never a panic, never an
//! engine error that shows the text reached SQL, and never a changed answer afterwards.
//!
//! Figures: see [`crate::report`].

use std::collections::BTreeMap;

use crate::*;
use serde_json::json;

use dq_testkit::XorShift as Rng;

/// Strings that would break a query built by concatenation.
pub const INJECTIONS: [&str; 12] = [
    "' OR '1'='1",
    "'; DROP TABLE lake.signals; --",
    "\" OR \"\"=\"",
    "x') UNION SELECT * FROM lake.raw_events --",
    "%' OR 1=1 --",
    "\\'; DELETE FROM lake.signals WHERE '1'='1",
    "did:erc721:137:0x0:1' OR subject LIKE '%",
    "$$; COPY lake.signals TO '/tmp/x'; $$",
    "?",
    "'||(SELECT current_setting('password'))||'",
    "\u{0}",
    "🚗'\n--",
];

/// Engine errors that would mean argument text reached SQL unescaped.
const SQL_LEAKS: [&str; 6] = [
    "Parser Error",
    "Binder Error",
    "Catalog Error",
    "syntax error",
    "Invalid Input Error",
    "unterminated quoted string",
];

/// GraphQL string literal.
fn lit(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

struct Arg {
    name: String,
    /// Named type after unwrapping NON_NULL/LIST.
    ty: String,
    kind: String,
}

struct Field {
    name: String,
    args: Vec<Arg>,
    ty: String,
}

fn unwrap_type(t: &Value) -> (String, String) {
    let mut t = t;
    while t["name"].is_null() && !t["ofType"].is_null() {
        t = &t["ofType"];
    }
    (
        t["name"].as_str().unwrap_or("").to_string(),
        t["kind"].as_str().unwrap_or("").to_string(),
    )
}

/// Root fields with their argument types, and each object type's leaf (scalar/enum) fields.
async fn schema(
    f: &Fixture,
    dialect: Dialect,
    token: &str,
) -> (Vec<Field>, BTreeMap<String, Vec<String>>) {
    let (status, body) = f
        .gql_in(
            dialect,
            Some(token),
            "{ __schema { queryType { name } types { name kind fields { name args { name type { name kind ofType { name kind ofType { name kind ofType { name kind } } } } } type { name kind ofType { name kind ofType { name kind ofType { name kind } } } } } } } }",
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let mut leaves = BTreeMap::new();
    let mut roots = Vec::new();
    for t in body["data"]["__schema"]["types"].as_array().unwrap() {
        let tname = t["name"].as_str().unwrap_or("");
        let Some(fields) = t["fields"].as_array() else {
            continue;
        };
        let mut leaf = Vec::new();
        for fl in fields {
            let (ty, kind) = unwrap_type(&fl["type"]);
            let name = fl["name"].as_str().unwrap().to_string();
            let no_args = fl["args"].as_array().is_none_or(|a| a.is_empty());
            if (kind == "SCALAR" || kind == "ENUM") && no_args {
                leaf.push(name.clone());
            }
            if tname == "Query" {
                roots.push(Field {
                    name,
                    ty,
                    args: fl["args"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|a| {
                            let (ty, kind) = unwrap_type(&a["type"]);
                            Arg {
                                name: a["name"].as_str().unwrap().to_string(),
                                ty,
                                kind,
                            }
                        })
                        .collect(),
                });
            }
        }
        leaves.insert(tname.to_string(), leaf);
    }
    assert!(
        roots.len() >= 5,
        "introspection found {} roots",
        roots.len()
    );
    (roots, leaves)
}

/// A value for an argument: right type, wrong type, huge, injection or null.
fn value(rng: &mut Rng, arg: &Arg, subject: &str) -> String {
    let good = match (arg.name.as_str(), arg.ty.as_str()) {
        ("subject" | "did", _) => lit(subject),
        ("tokenId", _) => subject.rsplit(':').next().unwrap_or("1").to_string(),
        (_, "Address") => lit(rng.pick(&[SOURCE, "0x12", "not hex"])),
        (_, "Boolean") => rng.pick(&["true", "false"]).to_string(),
        (_, "Time") => lit(rng.pick(&["2025-06-15T00:00:00Z", "2025-06-16T00:00:00Z"])),
        ("interval", _) => lit(rng.pick(&["1h", "5m", "24h", "0s", "-1h", "1y"])),
        (_, "Int") => rng.pick(&["0", "1", "-1", "100", "2147483647"]).to_string(),
        (_, "String") => lit(rng.pick(&INJECTIONS)),
        (_, "DetectionMechanism") => rng
            .pick(&[
                "IGNITION_DETECTION",
                "IDLING",
                "ignitionDetection",
                "refuel",
            ])
            .to_string(),
        _ => "{}".to_string(),
    };
    match rng.below(8) {
        0 => "null".into(),
        1 => "123456789012345678901234567890".into(),
        2 => "1e400".into(),
        3 => lit(&"A".repeat(64 * 1024)),
        4 => lit(rng.pick(&INJECTIONS)),
        5 => format!("[{good}, {good}]"),
        6 if arg.kind == "INPUT_OBJECT" => format!(
            "{{ {}: {} }}",
            rng.pick(&["eq", "source", "name", "in", "notIn", "or", "bogus", "lt"]),
            lit(rng.pick(&INJECTIONS))
        ),
        _ => good,
    }
}

/// One generated document.
fn document(
    rng: &mut Rng,
    roots: &[Field],
    leaves: &BTreeMap<String, Vec<String>>,
    subject: &str,
) -> String {
    match rng.below(10) {
        // Deep: introspection nesting far past any real client.
        0 => {
            let depth = 10 + rng.below(40);
            let mut inner = "name".to_string();
            for _ in 0..depth {
                inner = format!("name ofType {{ {inner} }}");
            }
            format!("{{ __schema {{ types {{ fields {{ type {{ {inner} }} }} }} }} }}")
        }
        // Syntax garbage and truncation.
        1 => {
            let doc = "{ signals(subject: \"x\", interval: \"1h\", from: \"2025\") { timestamp } }";
            let cut = rng.below(doc.len());
            let mut s = doc[..cut].to_string();
            s.push_str(rng.pick(&["{{{{", "}", "\"", "@", "...", "\u{0}", "query Q($a: ) {}"]));
            s
        }
        // Fragment cycles and unknown directives.
        2 => "query { ...A } fragment A on Query { ...B } fragment B on Query { ...A }".into(),
        _ => {
            let field = &roots[rng.below(roots.len())];
            let mut args = Vec::new();
            for a in &field.args {
                if rng.below(5) > 0 {
                    args.push(format!("{}: {}", a.name, value(rng, a, subject)));
                }
            }
            let leaf = leaves.get(&field.ty).cloned().unwrap_or_default();
            let mut sel = vec!["__typename".to_string()];
            for _ in 0..rng.below(6) {
                if let Some(l) = (!leaf.is_empty()).then(|| rng.pick(&leaf)) {
                    sel.push(l);
                }
            }
            // Wide: many aliases of the same field.
            let aliases = if rng.below(4) == 0 {
                50 + rng.below(400)
            } else {
                1
            };
            let args = if args.is_empty() {
                String::new()
            } else {
                format!("({})", args.join(", "))
            };
            let body = sel.join(" ");
            let one = |i: usize| format!("a{i}: {}{args} {{ {body} }}", field.name);
            let scalar = |i: usize| format!("a{i}: {}{args}", field.name);
            let is_leaf = leaves.get(&field.ty).is_none_or(|l| l.is_empty())
                && !leaves.contains_key(&field.ty);
            let parts: Vec<String> = (0..aliases)
                .map(|i| if is_leaf { scalar(i) } else { one(i) })
                .collect();
            format!("{{ {} }}", parts.join(" "))
        }
    }
}

async fn seeded_lake() -> (Fixture, String) {
    let subject = vehicle(77);
    let events: Vec<RawEvent> = (0..20)
        .map(|k| {
            let t = at(k * 600);
            status(
                &subject,
                SOURCE,
                &format!("h-{k}"),
                t,
                vec![
                    item("speed", t, json!(k as f64)),
                    item("powertrainType", t, json!("COMBUSTION")),
                ],
            )
        })
        .collect();
    (fixture(&events).await, subject)
}

fn baseline_query(subject: &str) -> String {
    format!(
        r#"{{ signals(subject: "{subject}", interval: "1h", from: "{}", to: "{}") {{ timestamp speed(agg: AVG) }}
             dataSummary(subject: "{subject}") {{ numberOfSignals availableSignals }}
             signalsLatest(subject: "{subject}") {{ speed {{ timestamp value }} }} }}"#,
        rfc(at(-3600)),
        rfc(at(20 * 600 + 3600))
    )
}

fn every_permission() -> Vec<Permission> {
    let mut p = ALL.to_vec();
    p.push(Permission::GetRawData);
    p
}

/// A token for `subject` with every permission and a wildcard attestation grant.
fn token_for(f: &Fixture, subject: &str) -> String {
    let mut claims = dq_auth::dev::DevClaims::vehicle(subject, &every_permission());
    claims.cloud_events =
        Some(json!({"events": [{"event_type": "*", "source": "*", "ids": ["*"]}]}));
    f.signer.mint(&claims).unwrap()
}

#[tokio::test]
async fn generated_documents_never_fail_the_server() {
    let (f, subject) = seeded_lake().await;
    let token = token_for(&f, &subject);
    let before = f.data(&subject, &baseline_query(&subject)).await;
    let mut rng = Rng::new(0x5eed_1234_abcd_0001);
    let mut figures = serde_json::Map::new();
    // Every dialect's own schema drives its documents (issue 11).
    for (dialect, documents) in [
        (Dialect::Dq, 600),
        (Dialect::Telemetry, 200),
        (Dialect::Fetch, 200),
    ] {
        let (roots, leaves) = schema(&f, dialect, &token).await;
        let mut by_status: BTreeMap<u16, usize> = BTreeMap::new();
        let (mut with_errors, mut with_data) = (0, 0);
        for _ in 0..documents {
            let doc = document(&mut rng, &roots, &leaves, &subject);
            let (status, body) = answer_without_sql_errors(&f, dialect, &token, &doc).await;
            *by_status.entry(status).or_default() += 1;
            if body.get("errors").is_some() {
                with_errors += 1;
            }
            if body.get("data").is_some_and(|d| !d.is_null()) {
                with_data += 1;
            }
        }
        assert!(
            with_data > 0,
            "{dialect:?}: no document was answered with data"
        );
        figures.insert(
            dialect.name().into(),
            json!({
                "documents": documents,
                "by_http_status": by_status,
                "answers_with_errors": with_errors,
                "answers_with_data": with_data,
                "server_errors": 0,
            }),
        );
    }
    assert_eq!(
        f.data(&subject, &baseline_query(&subject)).await,
        before,
        "answers changed"
    );
    report("graphql-hostile", &Value::Object(figures));
}

/// Sends `doc`; asserts no 5xx and no engine error text; returns the status and answer.
async fn answer_without_sql_errors(
    f: &Fixture,
    dialect: Dialect,
    token: &str,
    doc: &str,
) -> (u16, Value) {
    let (status, body) = f.gql_in(dialect, Some(token), doc).await;
    assert!(status < 500, "HTTP {status} for {doc:.300}: {body}");
    let text = body.to_string();
    for leak in SQL_LEAKS {
        assert!(!text.contains(leak), "{leak} for {doc:.300}: {text:.500}");
    }
    (status, body)
}

#[tokio::test]
async fn injection_payloads_reach_no_sql() {
    let (f, subject) = seeded_lake().await;
    let before = f.data(&subject, &baseline_query(&subject)).await;
    let (from, to) = (rfc(at(-3600)), rfc(at(20 * 600 + 3600)));
    let mut requests = 0;
    for p in INJECTIONS {
        let q = lit(p);
        // The payload as the subject, with a token minted for that very subject: the gate lets it
        // through, so only parameterized SQL keeps it harmless.
        let as_subject = [
            format!(
                r#"{{ signals(subject: {q}, interval: "1h", from: "{from}", to: "{to}") {{ timestamp speed(agg: AVG) }} }}"#
            ),
            format!(r#"{{ signalsLatest(subject: {q}) {{ lastSeen speed {{ value }} }} }}"#),
            format!(r#"{{ availableSignals(subject: {q}) }}"#),
            format!(r#"{{ dataSummary(subject: {q}) {{ numberOfSignals }} }}"#),
            format!(r#"{{ signalsSnapshot(subject: {q}) {{ lastSeen }} }}"#),
            format!(r#"{{ events(subject: {q}, from: "{from}", to: "{to}") {{ name }} }}"#),
            format!(
                r#"{{ segments(subject: {q}, from: "{from}", to: "{to}", mechanism: IGNITION_DETECTION) {{ duration }} }}"#
            ),
            format!(r#"{{ cloudEvents(subject: {q}) {{ header {{ id }} }} }}"#),
            format!(r#"{{ availableCloudEventTypes(subject: {q}) {{ type count }} }}"#),
        ];
        let token = f.token(p, &every_permission());
        for doc in &as_subject {
            requests += 1;
            let text = answer_without_sql_errors(&f, Dialect::Dq, &token, doc)
                .await
                .1
                .to_string();
            // Nothing of the real vehicle leaks to the injected subject.
            assert!(!text.contains("h-1"), "{doc}: {text}");
        }
        // The payload in every other string argument, as the real vehicle's owner.
        let s = &subject;
        let in_arguments = [
            format!(
                r#"{{ signals(subject: "{s}", interval: {q}, from: "{from}", to: "{to}") {{ timestamp }} }}"#
            ),
            format!(
                r#"{{ signals(subject: "{s}", interval: "1h", from: "{from}", to: "{to}", filter: {{source: {q}}}) {{ timestamp speed(agg: AVG) }} }}"#
            ),
            format!(
                r#"{{ signalsLatest(subject: "{s}", filter: {{source: {q}}}) {{ speed {{ value }} }} }}"#
            ),
            format!(
                r#"{{ events(subject: "{s}", from: "{from}", to: "{to}", filter: {{name: {{eq: {q}, startsWith: {q}}}, source: {{in: [{q}]}}, tags: {{containsAny: [{q}]}}}}) {{ name }} }}"#
            ),
            format!(
                r#"{{ dailyActivity(subject: "{s}", from: "{from}", to: "{to}", mechanism: IGNITION_DETECTION, timezone: {q}) {{ duration }} }}"#
            ),
            format!(
                r#"{{ segments(subject: "{s}", from: "{from}", to: "{to}", mechanism: IGNITION_DETECTION, signalRequests: [{{name: {q}, agg: AVG}}], eventRequests: [{{name: {q}}}]) {{ duration }} }}"#
            ),
            format!(
                r#"{{ cloudEvents(subject: "{s}", filter: {{type: {q}, source: {q}, id: {q}, producer: {q}}}) {{ header {{ id }} }} }}"#
            ),
            format!(
                r#"{{ signals(subject: "{s}", interval: "1h", from: "{from}", to: "{to}") {{ powertrainType(agg: TOP) speed(agg: AVG, filter: {{or: [{{gt: 1}}]}}) }} }}"#
            ),
        ];
        let token = f.token(s, &every_permission());
        for doc in &in_arguments {
            requests += 1;
            answer_without_sql_errors(&f, Dialect::Dq, &token, doc).await;
        }
        // The dialects' own string arguments (issue 11).
        let token = token_for(&f, s);
        let token_id = s.rsplit(':').next().unwrap();
        let telemetry = [
            format!(
                r#"{{ attestations(tokenId: {token_id}, filter: {{id: {q}, dataVersion: {q}, producer: {q}, tags: {{containsAny: [{q}], or: [{{notContainsAll: [{q}]}}]}}}}) {{ id }} }}"#
            ),
            format!(r#"{{ attestations(subject: {q}) {{ id }} }}"#),
            format!(r#"{{ attestations(tokenId: {token_id}, filter: {{source: {q}}}) {{ id }} }}"#),
            format!(
                r#"{{ dailyActivity(tokenId: {token_id}, from: "{from}", to: "{to}", mechanism: ignitionDetection, timezone: {q}) {{ duration }} }}"#
            ),
        ];
        for doc in &telemetry {
            requests += 1;
            answer_without_sql_errors(&f, Dialect::Telemetry, &token, doc).await;
        }
        let fetch = [
            format!(
                r#"{{ indexes(did: "{s}", filter: {{type: {q}, types: [{q}], dataversion: {q}, source: {q}, id: {q}, producer: {q}}}, includeDeleted: true) {{ indexKey }} }}"#
            ),
            format!(
                r#"{{ latestIndex(did: {q}) {{ indexKey }} latestCloudEvent(did: {q}) {{ data }} }}"#
            ),
            format!(
                r#"{{ availableCloudEventTypes(did: "{s}", filter: {{source: {q}}}) {{ type }} }}"#
            ),
        ];
        for doc in &fetch {
            requests += 1;
            answer_without_sql_errors(&f, Dialect::Fetch, &token, doc).await;
        }
    }
    assert_eq!(
        f.data(&subject, &baseline_query(&subject)).await,
        before,
        "answers changed"
    );
    report(
        "graphql-injection",
        &json!({"payloads": INJECTIONS.len(), "requests": requests, "server_errors": 0, "answers_changed": false}),
    );
}
