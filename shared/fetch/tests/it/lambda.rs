//! The sample API Gateway events in `events/fetch-*.json` through the Lambda adapter: base64
//! gRPC-web bodies in, a binary (base64) gRPC-web reply with its trailer frame out, and the
//! IAM caller from the request context checked against the allow-list.
//!
//! The samples name the demo fleet's vehicles and one of its raw events (written by
//! tests/invoke/grpc_web_events.py, found in the demo lake by `make invoke-test`); this test
//! seeds its own lake under those subjects and ids, so each sample finds data here too.

use crate::grpc_web::{decode, Reply};
use crate::{at, big_payload, event, ids, runtime, subject, ALLOWED_ROLE, BLOB_KEY, ISSUER};
use dq_auth::dev::DevSigner;
use dq_auth::{GrpcAuthenticator, ServiceAllowList};
use dq_blob::{BlobConfig, BlobStore};
use dq_fetch::FetchApi;
use dq_lake::testing::{Backend, TestLake};
use dq_proto::grpc::{
    GetLatestCloudEventResponse, GetLatestIndexResponse, ListCloudEventsFromKeysResponse,
    ListCloudEventsResponse,
};
use dq_rawquery::{Db, Payloads};
use lambda_http::request::LambdaRequest;
use prost::Message;
use std::sync::{Arc, OnceLock};

/// The demo fleet's first and second vehicle (`dqctl seed --seed 7`).
const FIRST: u32 = 135114;
const SECOND: u32 = 135115;
/// The type `fetch-get-latest-cloud-event.json` asks for.
const LATEST_TYPE: &str = "dimo.fingerprint";
/// The demo event `fetch-list-cloud-events-from-index.json` names (the first vehicle's).
const INDEXED_ID: &str = "3MqkqzrA01ljZTLUFSf8p03j9xF";

/// A lake holding, under the samples' subjects: the indexed event, two events of
/// [`LATEST_TYPE`] (`fp` the newer), then `s2`, `s3` and `big` (the newest, sealed in the blob
/// store above the 300-byte threshold) of the first vehicle; `b1` of the second.
struct Demo {
    db: Arc<Db>,
    store: Arc<BlobStore>,
    signer: DevSigner,
    _lake: TestLake,
}

fn demo() -> &'static Demo {
    static D: OnceLock<Demo> = OnceLock::new();
    D.get_or_init(|| {
        let (test_lake, lake) = dq_dinsim::testing::din_lake(Backend::File);
        let mut cfg = BlobConfig::local(test_lake.path("blobs"));
        cfg.encryption_key = Some(BLOB_KEY.into());
        let rt = runtime();
        let store = Arc::new(rt.block_on(BlobStore::open(&cfg)).unwrap());
        let events = [
            event(FIRST, INDEXED_ID, "dimo.status", at(0), r#"{"n":1}"#),
            event(FIRST, "fp-old", LATEST_TYPE, at(5), r#"{"vin":"old"}"#),
            event(SECOND, "b1", "dimo.status", at(15), r#"{"n":"b"}"#),
            event(FIRST, "fp", LATEST_TYPE, at(25), r#"{"vin":"new"}"#),
            event(FIRST, "s2", "dimo.status", at(30), r#"{"n":2}"#),
            event(FIRST, "s3", "dimo.status", at(40), r#"{"n":3}"#),
            event(FIRST, "big", "dimo.status", at(50), &big_payload()),
        ];
        let writer = dq_dinsim::Writer::new(&lake, Some(store.as_ref())).with_threshold(300);
        rt.block_on(writer.write_bundle(&events)).unwrap();
        Demo {
            db: Arc::new(Db::new(lake)),
            store,
            signer: DevSigner::generate(ISSUER).unwrap(),
            _lake: test_lake,
        }
    })
}

fn sample(name: &str) -> serde_json::Value {
    let path = dq_testkit::workspace_root().join("events").join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// Runs one event through the adapter (IAM allow-list [`ALLOWED_ROLE`], tokens otherwise) and
/// decodes the reply as a client would.
fn invoke(event: serde_json::Value) -> Reply {
    let d = demo();
    let auth = GrpcAuthenticator::new(Some(d.signer.validator().unwrap()), false)
        .with_allow_list(ServiceAllowList::from_arns([ALLOWED_ROLE]).unwrap());
    let api = FetchApi::new(
        Arc::clone(&d.db),
        Payloads::new(Some(Arc::clone(&d.store))),
        auth,
    );
    let request: LambdaRequest = serde_json::from_value(event).unwrap();
    let request: lambda_http::Request = request.into();
    let router = dq_fetch::server::router(api);
    runtime().block_on(async {
        let response = dq_fetch::lambda::handle(router, request).await.unwrap();
        let response = lambda_http::IntoResponse::into_response(response).await;
        assert_eq!(response.status(), 200);
        let (parts, body) = response.into_parts();
        // Binary content types go back base64-encoded (isBase64Encoded).
        let lambda_http::Body::Binary(bytes) = body else {
            panic!("expected a binary body, got {body:?}");
        };
        decode(&parts.headers, &bytes)
    })
}

#[test]
fn sample_events_find_their_data() {
    let reply = invoke(sample("fetch-list-cloud-events.json"));
    assert_eq!(reply.status, 0, "{reply:?}");
    let list = ListCloudEventsResponse::decode(reply.data.unwrap().as_slice()).unwrap();
    assert_eq!(ids(&list.cloud_events), ["big", "s3", "s2"]);
    assert_eq!(list.cloud_events[0].data, big_payload().into_bytes());

    let reply = invoke(sample("fetch-get-latest-cloud-event.json"));
    assert_eq!(reply.status, 0, "{reply:?}");
    let latest = GetLatestCloudEventResponse::decode(reply.data.unwrap().as_slice()).unwrap();
    let event = latest.cloud_event.unwrap();
    let header = event.header.unwrap();
    assert_eq!(
        (header.id.as_str(), header.r#type.as_str()),
        ("fp", LATEST_TYPE)
    );
    assert_eq!(event.data, br#"{"vin":"new"}"#);

    let reply = invoke(sample("fetch-get-latest-index.json"));
    assert_eq!(reply.status, 0, "{reply:?}");
    let index = GetLatestIndexResponse::decode(reply.data.unwrap().as_slice())
        .unwrap()
        .index
        .unwrap();
    assert_eq!(index.header.unwrap().subject, subject(SECOND));
    assert_eq!(
        index.data.unwrap().key,
        format!(
            "{}{}/b1",
            dq_rawquery::search::LAKE_KEY_PREFIX,
            subject(SECOND)
        )
    );

    let reply = invoke(sample("fetch-list-cloud-events-from-index.json"));
    assert_eq!(reply.status, 0, "{reply:?}");
    let from = ListCloudEventsFromKeysResponse::decode(reply.data.unwrap().as_slice()).unwrap();
    assert_eq!(ids(&from.cloud_events), [INDEXED_ID]);
    assert_eq!(from.cloud_events[0].data, br#"{"n":1}"#);
}

#[test]
fn only_allow_listed_iam_callers_are_served() {
    let mut event = sample("fetch-list-cloud-events.json");
    event["requestContext"]["authorizer"]["iam"]["userArn"] =
        "arn:aws:sts::123456789012:assumed-role/some-other-app/session".into();
    let reply = invoke(event.clone());
    assert_eq!(
        (reply.status, reply.message.as_str()),
        (7, "caller is not allowed")
    );
    assert!(reply.data.is_none());
    // No IAM context: the SigV4 `authorization` header is not a token, and nothing is served.
    event["requestContext"]
        .as_object_mut()
        .unwrap()
        .remove("authorizer");
    let reply = invoke(event.clone());
    assert_eq!(
        (reply.status, reply.message.as_str()),
        (16, "invalid token")
    );
    event["headers"]
        .as_object_mut()
        .unwrap()
        .remove("authorization");
    let reply = invoke(event);
    assert_eq!(
        (reply.status, reply.message.as_str()),
        (16, "no token claims")
    );
    assert!(reply.data.is_none());
}
