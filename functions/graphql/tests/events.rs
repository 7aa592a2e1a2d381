//! Acceptance 5: every `events/graphql-*.json` API Gateway HTTP API v2 payload is deserialized
//! by lambda_http and answered by the router the Lambda serves; `telemetry-graphql-*` and
//! `fetch-graphql-*` by the routers of those dialects (issue 11). `__DEV_TOKEN__` in an event
//! stands for a development token minted here for the event's vehicle.
// Integration-test helpers fail their test by panicking, like the #[test] bodies clippy.toml exempts.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::panic, clippy::indexing_slicing)]

use dq_auth::dev::{DevClaims, DevSigner};
use dq_auth::Permission;
use dq_lake::testing::{Backend, TestLake};
use http_body_util::BodyExt;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use tower::ServiceExt;

/// The demo fleet's first vehicle, which the sample events name (telemetry `tokenId: 135114`
/// under the dialect's default chain and vehicle contract).
const VEHICLE: &str = "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:135114";

fn events_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../events")
}

/// Sends the event file `name` (with `token` for `__DEV_TOKEN__`) through `app` as lambda_http
/// decodes it; returns the status and body.
async fn answer(app: axum::Router, name: &str, token: &str) -> (u16, Vec<u8>) {
    let text = std::fs::read_to_string(events_dir().join(name))
        .unwrap()
        .replace("__DEV_TOKEN__", token);
    let request = lambda_http::request::from_str(&text)
        .unwrap_or_else(|e| panic!("{name}: not an API Gateway event: {e}"));
    let response = app.oneshot(request).await.unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, body.to_vec())
}

/// The routers of every dialect over one empty decoded lake, accepting `signer`'s tokens.
struct Routers {
    engine: Arc<dq_query::Engine>,
    db: Arc<dq_rawquery::Db>,
    signer: DevSigner,
    _lake: TestLake,
}

impl Routers {
    fn new() -> Routers {
        let t = TestLake::new(Backend::File);
        let lake = t.open().unwrap();
        dq_tables::schema::ensure(&lake).unwrap();
        let signer = DevSigner::generate("https://auth.dimo.test").unwrap();
        let (engine, db) = dq_graphql::http::share_lake(lake);
        Routers {
            engine: Arc::new(engine),
            db,
            signer,
            _lake: t,
        }
    }

    fn app(&self, dialect: dq_graphql::Dialect) -> axum::Router {
        let settings = dq_graphql::DialectSettings {
            storage_node_dev_license: Some([0x49; 20]),
            ..dq_graphql::DialectSettings::default()
        };
        let state = dq_graphql::AppState::new(
            dialect,
            settings,
            Arc::clone(&self.engine),
            Some(self.signer.validator().unwrap()),
            dq_graphql::Limits::default(),
        )
        .unwrap()
        .with_cloud_events(dq_graphql::cloud_events::CloudEvents {
            db: Arc::clone(&self.db),
            payloads: dq_rawquery::Payloads::new(None),
            store: None,
            links: None,
        });
        dq_graphql::router(Arc::new(state))
    }
}

#[tokio::test]
async fn every_graphql_event_is_answered() {
    let routers = Routers::new();
    let signer = &routers.signer;
    let app = |dialect| routers.app(dialect);
    let token = signer
        .mint(&DevClaims::vehicle(
            VEHICLE,
            &[
                Permission::GetNonLocationHistory,
                Permission::GetLocationHistory,
                Permission::GetRawData,
            ],
        ))
        .unwrap();
    // The other dialects' events, through their own routers.
    for (prefix, dialect) in [
        ("telemetry-graphql-", dq_graphql::Dialect::Telemetry),
        ("fetch-graphql-", dq_graphql::Dialect::Fetch),
    ] {
        let names: Vec<String> = std::fs::read_dir(events_dir())
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with(prefix) && n.ends_with(".json"))
            .collect();
        assert!(!names.is_empty(), "no {prefix} events");
        for name in names {
            let (status, body) = answer(app(dialect), &name, &token).await;
            let json = serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null);
            assert_eq!(status, 200, "{name}: {json}");
            assert!(json.get("errors").is_none(), "{name}: {json}");
            let expected = match dialect {
                dq_graphql::Dialect::Telemetry => {
                    serde_json::json!({"signalsLatest": {"lastSeen": null, "speed": null}})
                }
                _ => serde_json::json!({"cloudEvents": []}),
            };
            assert_eq!(json["data"], expected, "{name}");
        }
    }
    let app = app(dq_graphql::Dialect::Dq);
    let mut names: Vec<String> = std::fs::read_dir(events_dir())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("graphql-") && n.ends_with(".json"))
        .collect();
    names.sort();
    assert_eq!(names.len(), 6, "{names:?}");
    for name in names {
        let (status, body) = answer(app.clone(), &name, &token).await;
        let text = String::from_utf8_lossy(&body).to_string();
        let json = serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null);
        match name.as_str() {
            "graphql-playground.json" => {
                assert_eq!(status, 200);
                assert!(text.contains("<title>GraphiQL"), "{name}");
            }
            "graphql-ready.json" => assert_eq!((status, text.as_str()), (200, "ok")),
            "graphql-query-get.json" => {
                assert_eq!(status, 200, "{text}");
                assert_eq!(json["data"]["__typename"], "Query");
            }
            "graphql-query-post.json" => {
                assert_eq!(status, 200, "{text}");
                assert!(json.get("errors").is_none(), "{text}");
                assert_eq!(
                    json["data"]["signalsLatest"],
                    serde_json::json!({"lastSeen": null, "speed": null})
                );
            }
            "graphql-query-post-base64.json" => {
                assert_eq!(status, 200, "{text}");
                assert_eq!(json["data"]["availableSignals"], Value::Null, "{text}");
            }
            "graphql-query-invalid-token.json" => {
                assert_eq!(status, 401);
                assert_eq!(json, serde_json::json!({"message": "JWT is invalid."}));
            }
            other => panic!("no expectation for {other}"),
        }
    }
}

/// POSTs `query` to `app` with `token`; returns the status and the JSON body.
async fn post(app: axum::Router, token: &str, query: &str) -> (u16, Value) {
    let request = http::Request::post("/query")
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {token}"))
        .body(axum::body::Body::from(
            serde_json::json!({ "query": query }).to_string(),
        ))
        .unwrap();
    let response = app.oneshot(request).await.unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// The demo's token (what `make demo` prints) answers every dialect's cloud-event roots and
/// signal roots without a grant or privilege error, so each documented query can be tried.
#[tokio::test]
async fn demo_tokens_answer_every_documented_root() {
    let routers = Routers::new();
    let token = routers.signer.mint(&DevClaims::demo(VEHICLE)).unwrap();
    let cases = [
        (dq_graphql::Dialect::Telemetry, "{ attestations(tokenId: 135114) { id time } }"),
        (
            dq_graphql::Dialect::Telemetry,
            "{ attestations(tokenId: 135114, filter: {source: \"0x49eAf63eD94FEf3d40692862Eee2C8dB416B1a5f\"}) { id } }",
        ),
        (dq_graphql::Dialect::Telemetry, "{ vinVCLatest(tokenId: 135114) { vin } }"),
        (
            dq_graphql::Dialect::Telemetry,
            "{ signalsLatest(tokenId: 135114) { lastSeen currentLocationApproximateCoordinates { timestamp } } }",
        ),
        (
            dq_graphql::Dialect::Fetch,
            &format!("{{ cloudEvents(did: \"{VEHICLE}\", limit: 3) {{ header {{ id }} }} }}"),
        ),
        (
            dq_graphql::Dialect::Fetch,
            &format!("{{ latestCloudEvent(did: \"{VEHICLE}\") {{ header {{ id }} }} }}"),
        ),
        (
            dq_graphql::Dialect::Dq,
            &format!("{{ cloudEvents(subject: \"{VEHICLE}\", limit: 3) {{ header {{ id }} }} }}"),
        ),
        (
            dq_graphql::Dialect::Dq,
            &format!("{{ signalsLatest(subject: \"{VEHICLE}\") {{ lastSeen currentLocationCoordinates {{ timestamp }} }} }}"),
        ),
    ];
    for (dialect, query) in cases {
        let (status, body) = post(routers.app(dialect), &token, query).await;
        assert_eq!(status, 200, "{dialect:?} {query}: {body}");
        assert!(body.get("errors").is_none(), "{dialect:?} {query}: {body}");
    }
}
