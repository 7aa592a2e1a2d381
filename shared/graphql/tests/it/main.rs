//! dq-graphql integration tests: real GraphQL executions through the router over a lake the
//! materializer filled (file catalog; each test builds its own lake).
//!
//! - `sdl.rs`: the served SDL equals the committed file; every signal carries its privilege.
//! - `ruptela.rs`: acceptance 1 (Ruptela parity through `signalsLatest`).
//! - `aggregations.rs`: acceptance 2 (aggregations, filters, geofences vs independent math).
//! - `authn.rs`: acceptance 4 (token rejections, per-field privilege errors).
//! - `cloud_events.rs`: cloudEvents / latestCloudEvent / availableCloudEventTypes.
//! - `cloud_event_errors.rs`: their generic texts while the catalog is down (issue 18).
//! - `routes.rs`: routes, limits, error shapes, null vs empty.
//! - `segments.rs`: `segments` / `dailyActivity` (pages, summaries, validation, time zones).
//! - `hostile.rs`: generated hostile documents and SQL injection payloads (issue 10).
//! - `faults.rs`: the PostgreSQL catalog restarted under queries (issue 10).
//! - `dialects.rs`: the telemetry-api and fetch-api dialects over the same lake (issue 11).
//! - `shadow.rs`: shadow mode against a reference (issue 23).
//! - `graphql_core.rs`: SDL, examples and introspection checked by graphql-core (issue 18).
//! - `limits.rs`: SQL root fields in the complexity score (issue 18).
//! - `privileges.rs`: privileges checked before any SQL (signals, segments, dataSummary; issue 18).
//! - `mcp.rs`: `/mcp` through rmcp's client: tools, answers equal to /query's, auth (issue 23).
//! - `observe.rs`: `/query` EMF lines, request span fields, X-Ray subsegments (issue 22).
// Integration-test helpers fail their test by panicking, like the #[test] bodies clippy.toml exempts.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::panic, clippy::indexing_slicing)]

mod aggregations;
mod authn;
mod cloud_event_errors;
mod cloud_events;
mod dialects;
mod faults;
mod graphql_core;
mod hostile;
mod limits;
mod mcp;
mod observe;
mod privileges;
mod routes;
mod ruptela;
mod sdl;
mod segments;
mod shadow;

use axum::body::Body;
use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use dq_auth::dev::{DevClaims, DevSigner};
use dq_auth::Permission;
use dq_cloudevent::event::{CloudEventHeader, RawEvent};
use dq_graphql::{AppState, Dialect, Limits};
use dq_lake::testing::{Backend, TestLake};
use http_body_util::BodyExt;
use serde_json::Value;
use std::sync::Arc;
use tower::ServiceExt;

pub use dq_dinsim::testing::VEHICLE as CONTRACT;
pub const SOURCE: &str = "0x0Ac7C7A6d1E85f5e9B2B63C9D2E7D8f0c1b2A395";
pub const SOURCE_DID: &str = "did:ethr:137:0x0Ac7C7A6d1E85f5e9B2B63C9D2E7D8f0c1b2A395";
pub const OTHER_SOURCE: &str = "0x1234567890123456789012345678901234567890";
pub const ISSUER: &str = "https://auth.dimo.test";
/// The attester of VIN credentials in the telemetry deployment (`STORAGE_NODE_DEV_LICENSE`).
pub const STORAGE_NODE: &str = "0x49eAf63eD94FEf3d40692862Eee2C8dB416B1a5f";

pub fn vehicle(token: u32) -> String {
    format!("{CONTRACT}:{token}")
}

pub fn at(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_750_000_000 + secs, 0).unwrap()
}

pub fn rfc(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// One signal item of a default-module status payload.
pub fn item(name: &str, t: DateTime<Utc>, value: Value) -> Value {
    serde_json::json!({"name": name, "timestamp": rfc(t), "value": value})
}

/// A default-module status event from `source`.
pub fn status(
    subject: &str,
    source: &str,
    id: &str,
    time: DateTime<Utc>,
    items: Vec<Value>,
) -> RawEvent {
    dq_dinsim::testing::EventBuilder::new(subject, id, "dimo.status", time)
        .source(source)
        .data(serde_json::json!({ "signals": items }).to_string())
}

/// A lake holding `events` after the materializer drained them, served by a router whose
/// tokens come from `signer`.
pub struct Fixture {
    _lake: TestLake,
    /// The dq dialect.
    pub state: Arc<AppState>,
    /// The telemetry-api dialect over the same lake.
    pub telemetry: Arc<AppState>,
    /// The fetch-api dialect over the same lake.
    pub fetch: Arc<AppState>,
    pub signer: DevSigner,
}

pub async fn fixture(events: &[RawEvent]) -> Fixture {
    fixture_with(events, Limits::default()).await
}

pub async fn fixture_with(events: &[RawEvent], limits: Limits) -> Fixture {
    fixture_full(events, limits, None).await
}

/// As [`fixture`], with identity-api at `identity_url` for device links.
pub async fn fixture_full(
    events: &[RawEvent],
    limits: Limits,
    identity_url: Option<String>,
) -> Fixture {
    fixture_in(TestLake::new(Backend::File), events, limits, identity_url).await
}

/// As [`fixture_full`], on the given (not yet created) lake.
pub async fn fixture_in(
    t: TestLake,
    events: &[RawEvent],
    limits: Limits,
    identity_url: Option<String>,
) -> Fixture {
    seed(&t, events).await;
    let links = identity_url.map(|u| {
        Arc::new(dq_auth::remote::IdentityApi::new(reqwest::Client::new(), u))
            as Arc<dyn dq_auth::DeviceLinks>
    });
    let lake = t.open().unwrap();
    serve(t, lake, limits, links, None)
}

/// Writes `events` into the (not yet created) lake `t` and drains them through the
/// materializer.
pub async fn seed(t: &TestLake, events: &[RawEvent]) {
    let lake = dq_dinsim::testing::open_din_lake(t);
    let m = dq_materialize::Materializer::builder(lake)
        .emf(false)
        .build()
        .unwrap();
    if !events.is_empty() {
        dq_dinsim::Writer::new(m.lake(), None)
            .write_bundle(events)
            .await
            .unwrap();
    }
    dq_materialize::testing::drain_until_caught_up(&m).await;
}

/// Serves `lake` (opened from `t`) in every dialect: one engine, one state per dialect.
pub fn serve(
    t: TestLake,
    lake: dq_lake::Lake,
    limits: Limits,
    links: Option<Arc<dyn dq_auth::DeviceLinks>>,
    store: Option<Arc<dq_blob::BlobStore>>,
) -> Fixture {
    let (engine, db) = dq_graphql::http::share_lake(lake);
    let engine = Arc::new(engine);
    let signer = DevSigner::generate(ISSUER).unwrap();
    let state = |dialect| {
        let settings = dq_graphql::DialectSettings {
            storage_node_dev_license: Some(
                dq_cloudevent::did::parse_address(STORAGE_NODE).unwrap(),
            ),
            ..dq_graphql::DialectSettings::default()
        };
        let state = AppState::new(
            dialect,
            settings,
            Arc::clone(&engine),
            Some(signer.validator().unwrap()),
            limits,
        )
        .unwrap()
        .with_cloud_events(dq_graphql::cloud_events::CloudEvents::new(
            Arc::clone(&db),
            store.clone(),
            links.clone(),
        ));
        Arc::new(state)
    };
    Fixture {
        _lake: t,
        state: state(Dialect::Dq),
        telemetry: state(Dialect::Telemetry),
        fetch: state(Dialect::Fetch),
        signer,
    }
}

/// Every permission a vehicle token can carry.
pub const ALL: [Permission; 3] = [
    Permission::GetNonLocationHistory,
    Permission::GetLocationHistory,
    Permission::GetApproximateLocation,
];

impl Fixture {
    pub fn token(&self, subject: &str, permissions: &[Permission]) -> String {
        self.signer
            .mint(&DevClaims::vehicle(subject, permissions))
            .unwrap()
    }

    /// Sends a raw HTTP request through the dq router.
    pub async fn send(&self, req: http::Request<Body>) -> (u16, Vec<(String, String)>, Vec<u8>) {
        self.send_to(Dialect::Dq, req).await
    }

    /// Sends a raw HTTP request through the router of `dialect`.
    pub async fn send_to(
        &self,
        dialect: Dialect,
        req: http::Request<Body>,
    ) -> (u16, Vec<(String, String)>, Vec<u8>) {
        let state = match dialect {
            Dialect::Dq => &self.state,
            Dialect::Telemetry => &self.telemetry,
            Dialect::Fetch => &self.fetch,
        };
        let resp = dq_graphql::router(Arc::clone(state))
            .oneshot(req)
            .await
            .unwrap();
        read_response(resp).await
    }

    /// POSTs a dq GraphQL query with an optional bearer token; returns status and JSON body.
    pub async fn gql(&self, token: Option<&str>, query: &str) -> (u16, Value) {
        self.gql_in(Dialect::Dq, token, query).await
    }

    /// POSTs a GraphQL query to the `dialect` deployment.
    pub async fn gql_in(&self, dialect: Dialect, token: Option<&str>, query: &str) -> (u16, Value) {
        let mut req = http::Request::post("/query").header("content-type", "application/json");
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let body = serde_json::json!({ "query": query }).to_string();
        let (status, _, body) = self
            .send_to(dialect, req.body(Body::from(body)).unwrap())
            .await;
        let json = serde_json::from_slice(&body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into()));
        (status, json)
    }

    /// A query as the vehicle's owner with every permission; asserts no errors.
    pub async fn data(&self, subject: &str, query: &str) -> Value {
        let token = self.token(subject, &ALL);
        let (status, body) = self.gql(Some(&token), query).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.get("errors").is_none(), "{body}");
        body["data"].clone()
    }
}

/// A router's answer: status, headers and the whole body.
pub async fn read_response(
    resp: axum::response::Response,
) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let status = resp.status().as_u16();
    let headers = resp
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    let body = resp
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    (status, headers, body)
}

/// Floats compare with a relative tolerance (SQL sums in another order than the test).
pub fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// Reports a reliability figure ([`dq_testkit::report_figures`]).
pub fn report(name: &str, figures: &Value) {
    dq_testkit::report_figures(name, &serde_json::to_string_pretty(figures).unwrap());
}
