//! `/mcp` (issue 23) through the SDK's own client: rmcp over streamable HTTP to each dialect's
//! router served on 127.0.0.1. Initialize, the tool list (equal to the committed
//! `schema/mcp-tools.<dialect>.json`), every tool on a seeded lake answering what the same
//! GraphQL query answers on `/query`, data calls without a valid token or privilege answering
//! an MCP error and no data, and `/mcp` through a Lambda (API Gateway v2) event.

use crate::*;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt as _;
use serde_json::{json, Map};
use tower::ServiceExt as _;

type Client = RunningService<RoleClient, ()>;

/// Serves `state`'s router on a loopback port; returns its `/mcp` URL.
async fn serve_mcp(state: &Arc<AppState>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = dq_graphql::router(Arc::clone(state));
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{addr}/mcp")
}

/// An initialized MCP client of `url`, sending `token` as its bearer token.
async fn connect(url: &str, token: Option<&str>) -> Client {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
    if let Some(t) = token {
        config = config.auth_header(t.to_string());
    }
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap_or_else(|e| panic!("initialize {url}: {e}"))
}

async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

fn state_of(f: &Fixture, dialect: Dialect) -> &Arc<AppState> {
    match dialect {
        Dialect::Dq => &f.state,
        Dialect::Telemetry => &f.telemetry,
        Dialect::Fetch => &f.fetch,
    }
}

/// A GraphQL literal of a JSON argument; `agg` and `mechanism` values are enum values.
fn literal(key: &str, v: &Value) -> String {
    match v {
        Value::String(s) if key == "agg" || key == "mechanism" => s.clone(),
        Value::Object(m) => {
            let fields: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k}: {}", literal(k, v)))
                .collect();
            format!("{{{}}}", fields.join(", "))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(|i| literal(key, i)).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    }
}

/// Vehicle 1's drives (ignition, fixes, speeds) and a status with the other signals the
/// signal shortcuts select.
fn seeded(subject: &str) -> Vec<RawEvent> {
    let mut events = crate::segments::drives(subject);
    events.push(status(
        subject,
        SOURCE,
        "mcp-extra",
        at(700),
        vec![
            item(
                "powertrainTransmissionTravelledDistance",
                at(650),
                json!(12345.5),
            ),
            item("powertrainFuelSystemRelativeLevel", at(650), json!(61.0)),
            item("lowVoltageBatteryCurrentVoltage", at(650), json!(12.6)),
            item("exteriorAirTemperature", at(650), json!(18.5)),
        ],
    ));
    events
}

/// Every shortcut of every dialect answers exactly what `/query` answers for the same root
/// field, selection and arguments written as literals; `<prefix>_query` answers what
/// `/query` answers for its document and variables; `<prefix>_get_schema` answers the
/// condensed schema.
#[tokio::test]
async fn every_tool_answers_as_graphql_does() {
    let subject = vehicle(1);
    let f = fixture(&seeded(&subject)).await;
    let token = f.token(&subject, &Permission::ALL);
    for dialect in Dialect::ALL {
        let url = serve_mcp(state_of(&f, dialect)).await;
        let client = connect(&url, Some(&token)).await;
        let info = client.peer_info().expect("initialized");
        let server = info.server_info.clone().expect("server info");
        assert_eq!(server.name, dq_graphql::mcp::server_name(dialect));
        assert_eq!(server.version, "0.1.0");

        let prefix = dq_graphql::mcp::tool_prefix(dialect);
        let (mechanism, vehicle_arg) = match dialect {
            Dialect::Dq => ("IGNITION_DETECTION", ("subject", json!(subject))),
            Dialect::Telemetry => ("ignitionDetection", ("tokenId", json!(1))),
            Dialect::Fetch => ("IGNITION_DETECTION", ("did", json!(subject))),
        };
        let candidates = [
            vehicle_arg.clone(),
            ("interval", json!("5m")),
            ("from", json!(rfc(at(-60)))),
            ("to", json!(rfc(at(6000)))),
            ("mechanism", json!(mechanism)),
            ("signalRequests", json!([{"name": "speed", "agg": "MAX"}])),
            ("limit", json!(3)),
        ];
        let tools = client.list_all_tools().await.unwrap();
        let mut shortcuts = 0;
        for tool in &tools {
            let Some(shortcut) = dq_graphql::mcp::SHORTCUTS
                .iter()
                .find(|s| format!("{prefix}_{}", s.name) == tool.name)
            else {
                continue;
            };
            shortcuts += 1;
            let properties = &tool.input_schema["properties"];
            let args: Map<String, Value> = candidates
                .iter()
                .filter(|(k, _)| properties.get(*k).is_some())
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect();
            let literals: Vec<String> = args
                .iter()
                .map(|(k, v)| format!("{k}: {}", literal(k, v)))
                .collect();
            let selection = match shortcut.selection {
                "" => String::new(),
                s => format!(" {{ {s} }}"),
            };
            let query = format!(
                "{{ {}({}){selection} }}",
                shortcut.field,
                literals.join(", ")
            );
            let (status, expected) = f.gql_in(dialect, Some(&token), &query).await;
            assert_eq!(status, 200, "{query}: {expected}");
            assert!(expected.get("errors").is_none(), "{query}: {expected}");
            let result = call(&client, &tool.name, Value::Object(args)).await;
            assert_eq!(
                result.is_error,
                Some(false),
                "{}: {}",
                tool.name,
                text(&result)
            );
            assert_eq!(
                result.structured_content.as_ref(),
                Some(&expected),
                "{}",
                tool.name
            );
            assert_eq!(
                serde_json::from_str::<Value>(&text(&result)).unwrap(),
                expected
            );
        }
        let expected_shortcuts = match dialect {
            Dialect::Dq => 11,
            Dialect::Telemetry => 8,
            Dialect::Fetch => 5,
        };
        assert_eq!(shortcuts, expected_shortcuts, "{dialect:?}");

        // The answers are not vacuous: the seeded data shows through the shortcuts.
        if dialect != Dialect::Fetch {
            let vehicle = Value::Object(Map::from_iter([(
                vehicle_arg.0.to_string(),
                vehicle_arg.1.clone(),
            )]));
            let latest = call(&client, &format!("{prefix}_get_latest_signals"), vehicle).await;
            let latest = &latest.structured_content.unwrap()["data"]["signalsLatest"];
            assert_eq!(latest["speed"]["value"].as_f64(), Some(24.0), "{latest}");
            assert_eq!(
                latest["powertrainTransmissionTravelledDistance"]["value"].as_f64(),
                Some(12345.5),
                "{latest}"
            );
        }

        // The query tool: any document with variables, as /query answers it.
        let (document, variables, literal_query) = match dialect {
            Dialect::Dq => (
                "query($s: String!) { signalsLatest(subject: $s) { lastSeen speed { timestamp value } } }",
                json!({"s": subject}),
                format!(r#"{{ signalsLatest(subject: "{subject}") {{ lastSeen speed {{ timestamp value }} }} }}"#),
            ),
            Dialect::Telemetry => (
                "query($t: Int!) { signalsLatest(tokenId: $t) { lastSeen speed { timestamp value } } }",
                json!({"t": 1}),
                "{ signalsLatest(tokenId: 1) { lastSeen speed { timestamp value } } }".to_string(),
            ),
            Dialect::Fetch => (
                "query($d: String!) { availableCloudEventTypes(did: $d) { type count } }",
                json!({"d": subject}),
                format!(r#"{{ availableCloudEventTypes(did: "{subject}") {{ type count }} }}"#),
            ),
        };
        let (_, expected) = f.gql_in(dialect, Some(&token), &literal_query).await;
        assert!(expected.get("errors").is_none(), "{expected}");
        let result = call(
            &client,
            &format!("{prefix}_query"),
            json!({"query": document, "variables": variables}),
        )
        .await;
        assert_eq!(result.is_error, Some(false), "{}", text(&result));
        assert_eq!(result.structured_content, Some(expected));

        let schema = call(&client, &format!("{prefix}_get_schema"), json!({})).await;
        assert_eq!(schema.is_error, Some(false));
        let schema = text(&schema);
        assert!(schema.contains("\ntype Query {\n"), "{schema}");
        if dialect != Dialect::Fetch {
            assert!(schema.contains("=== SIGNAL FIELDS"), "{schema}");
        }
        client.cancel().await.unwrap();
    }
}

/// True when a GraphQL `data` carries no value: null, or an object of nulls.
fn no_data(answer: &Value) -> bool {
    match &answer["data"] {
        Value::Null => true,
        Value::Object(fields) => fields.values().all(Value::is_null),
        _ => false,
    }
}

/// A data call without a token, with another vehicle's token, without the privilege or with an
/// invalid token gets an MCP error result and no data; schema tools need no token.
#[tokio::test]
async fn unauthorized_data_calls_get_an_mcp_error_and_no_data() {
    let subject = vehicle(1);
    let f = fixture(&seeded(&subject)).await;
    let url = serve_mcp(&f.state).await;
    let latest = json!({"subject": subject});
    let events = json!({"subject": subject, "from": rfc(at(-60)), "to": rfc(at(6000))});
    let query = json!({
        "query": "query($s: String!) { signalsLatest(subject: $s) { speed { value } } }",
        "variables": {"s": subject},
    });

    let anonymous = connect(&url, None).await;
    assert!(anonymous.list_all_tools().await.unwrap().len() > 2);
    let schema = call(&anonymous, "dq_get_schema", json!({})).await;
    assert_eq!(schema.is_error, Some(false));
    for (tool, args) in [("dq_get_latest_signals", &latest), ("dq_query", &query)] {
        let result = call(&anonymous, tool, args.clone()).await;
        assert_eq!(result.is_error, Some(true), "{tool}: {}", text(&result));
        let answer = result.structured_content.unwrap();
        assert!(no_data(&answer), "{tool}: {answer}");
        assert_eq!(answer["errors"][0]["message"], "unauthorized: jwt missing");
    }
    anonymous.cancel().await.unwrap();

    let stranger = f.token(&vehicle(2), &Permission::ALL);
    let client = connect(&url, Some(&stranger)).await;
    let result = call(&client, "dq_get_latest_signals", latest.clone()).await;
    assert_eq!(result.is_error, Some(true));
    let answer = result.structured_content.unwrap();
    assert!(no_data(&answer), "{answer}");
    assert_eq!(
        answer["errors"][0]["message"],
        "unauthorized: DID in query does not match token claim"
    );
    client.cancel().await.unwrap();

    // Non-location data only: events need the location-history privilege too.
    let partial = f.token(&subject, &[Permission::GetNonLocationHistory]);
    let client = connect(&url, Some(&partial)).await;
    let result = call(&client, "dq_get_events", events).await;
    assert_eq!(result.is_error, Some(true));
    let answer = result.structured_content.unwrap();
    assert!(no_data(&answer), "{answer}");
    assert!(
        answer["errors"][0]["message"]
            .as_str()
            .unwrap()
            .starts_with("unauthorized: missing required privilege"),
        "{answer}"
    );
    client.cancel().await.unwrap();

    // A token that does not validate is refused with /query's 401 before MCP runs: no
    // initialize, no tool list, no call.
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.clone());
    config = config.auth_header("not-a-jwt".to_string());
    let refused = ().serve(StreamableHttpClientTransport::from_config(config)).await;
    assert!(
        refused.is_err(),
        "an invalid token initialized an MCP session"
    );
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let target = url.clone();
    let answer = tokio::task::spawn_blocking(move || {
        dq_testkit::http::request(
            "POST",
            &target,
            &[
                ("authorization", "Bearer not-a-jwt"),
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
            ],
            list.as_bytes(),
        )
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(
        (answer.status, answer.text().as_str()),
        (401, r#"{"message":"JWT is invalid."}"#)
    );

    // Unknown tools and arguments are protocol errors.
    let client = connect(&url, Some(&partial)).await;
    let unknown = client
        .call_tool(CallToolRequestParams::new("dq_get_everything"))
        .await;
    assert!(unknown.is_err(), "{unknown:?}");
    let Value::Object(args) = json!({"subject": subject, "vin": "x"}) else {
        unreachable!()
    };
    let bad = client
        .call_tool(CallToolRequestParams::new("dq_get_latest_signals").with_arguments(args))
        .await;
    assert!(bad.is_err(), "{bad:?}");
    client.cancel().await.unwrap();
}

/// Each dialect's tool list, as a client lists it, equals `schema/mcp-tools.<dialect>.json`
/// (rerun with `UPDATE_MCP_TOOLS=1` to rewrite the files, then review the diff).
#[tokio::test]
async fn tool_lists_equal_committed_files() {
    let f = fixture(&[]).await;
    for dialect in Dialect::ALL {
        let url = serve_mcp(state_of(&f, dialect)).await;
        let client = connect(&url, None).await;
        let tools = client.list_all_tools().await.unwrap();
        let prefix = format!("{}_", dq_graphql::mcp::tool_prefix(dialect));
        assert!(tools.iter().all(|t| t.name.starts_with(&prefix)));
        let listed = serde_json::to_string_pretty(&tools).unwrap() + "\n";
        let file = format!("schema/mcp-tools.{}.json", dialect.name());
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(&file);
        if std::env::var_os("UPDATE_MCP_TOOLS").is_some() {
            std::fs::write(&path, &listed).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            listed == committed,
            "the {dialect:?} tool list differs from {file} (rerun with UPDATE_MCP_TOOLS=1 and review the diff)"
        );
        client.cancel().await.unwrap();
    }
}

/// An API Gateway v2 event for POST /mcp, as lambda_http hands it to the router.
fn mcp_event(body: &Value, protocol: Option<&str>) -> lambda_http::Request {
    let mut headers = json!({
        "host": "graphql.dq.example",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
    });
    if let Some(p) = protocol {
        headers["mcp-protocol-version"] = json!(p);
    }
    let event = json!({
        "version": "2.0",
        "routeKey": "ANY /mcp",
        "rawPath": "/mcp",
        "rawQueryString": "",
        "headers": headers,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "dqgraphql1",
            "domainName": "graphql.dq.example",
            "domainPrefix": "graphql",
            "http": {
                "method": "POST",
                "path": "/mcp",
                "protocol": "HTTP/1.1",
                "sourceIp": "203.0.113.7",
                "userAgent": "mcp-client"
            },
            "requestId": "mcp-1",
            "routeKey": "ANY /mcp",
            "stage": "$default",
            "time": "02/Dec/2026:22:00:00 +0000",
            "timeEpoch": 1796248800000u64
        },
        "isBase64Encoded": false,
        "body": body.to_string(),
    });
    lambda_http::request::from_str(&event.to_string()).unwrap()
}

/// `request` through a fresh router of `state` (a Lambda instance): status and JSON body;
/// asserts the answer is plain JSON without a session.
async fn answer_event(state: &Arc<AppState>, request: lambda_http::Request) -> (u16, Value) {
    let response = dq_graphql::router(Arc::clone(state))
        .oneshot(request)
        .await
        .unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert!(headers.get("mcp-session-id").is_none(), "{headers:?}");
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    assert!(
        content_type.starts_with("application/json"),
        "{content_type}: {}",
        String::from_utf8_lossy(&body)
    );
    (status, serde_json::from_slice(&body).unwrap())
}

/// In Lambda, `/mcp` answers each POST on its own: a plain JSON body and no session header, so
/// a tool call needs no earlier request on the same instance.
#[tokio::test]
async fn lambda_events_are_answered_statelessly() {
    let f = fixture(&[]).await;
    let answer = |request| answer_event(&f.state, request);
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "lambda-test", "version": "1"}
        }
    });
    let (status, body) = answer(mcp_event(&initialize, None)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["serverInfo"]["name"], "DIMO Query", "{body}");
    // What the demo's curl sends: tools/list alone, no protocol header.
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let (status, body) = answer(mcp_event(&list, None)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["result"]["tools"][0]["name"], "dq_get_schema",
        "{body}"
    );
    let call = json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "dq_get_schema", "arguments": {}}
    });
    let (status, body) = answer(mcp_event(&call, Some("2025-06-18"))).await;
    assert_eq!(status, 200, "{body}");
    let content: Vec<ContentBlock> =
        serde_json::from_value(body["result"]["content"].clone()).unwrap();
    let schema = content[0]
        .as_text()
        .map(|t| t.text.clone())
        .unwrap_or_default();
    assert!(schema.contains("\ntype Query {\n"), "{body}");
}
