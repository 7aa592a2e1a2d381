//! The sample API Gateway events in `events/fetch-*.json` through the Lambda adapter: base64
//! gRPC-web bodies in, a binary (base64) gRPC-web reply with its trailer frame out, and the
//! IAM caller from the request context checked against the allow-list.

use crate::grpc_web::{decode, Reply};
use crate::{big_payload, fixture, ids, subject};
use lambda_http::request::LambdaRequest;
use prost::Message;
use proto::grpc::{
    GetLatestCloudEventResponse, GetLatestIndexResponse, ListCloudEventsFromKeysResponse,
    ListCloudEventsResponse,
};

fn sample(name: &str) -> serde_json::Value {
    let path = testkit::workspace_root().join("events").join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// Runs one event through the adapter and decodes the reply as a client would.
fn invoke(event: serde_json::Value) -> Reply {
    let f = fixture();
    let request: LambdaRequest = serde_json::from_value(event).unwrap();
    let request: lambda_http::Request = request.into();
    let router = fetch::server::router(f.api(false));
    f.rt.block_on(async {
        let response = fetch::lambda::handle(router, request).await.unwrap();
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
fn sample_events_decode() {
    let reply = invoke(sample("fetch-list-cloud-events.json"));
    assert_eq!(reply.status, 0, "{reply:?}");
    let list = ListCloudEventsResponse::decode(reply.data.unwrap().as_slice()).unwrap();
    assert_eq!(ids(&list.cloud_events), ["t2", "t1", "big"]);
    assert_eq!(list.cloud_events[2].data, big_payload().into_bytes());

    let reply = invoke(sample("fetch-get-latest-cloud-event.json"));
    assert_eq!(reply.status, 0, "{reply:?}");
    let latest = GetLatestCloudEventResponse::decode(reply.data.unwrap().as_slice()).unwrap();
    let event = latest.cloud_event.unwrap();
    assert_eq!(event.header.unwrap().id, "bin");
    assert!(!event.data_base64.is_empty());

    let reply = invoke(sample("fetch-get-latest-index.json"));
    assert_eq!(reply.status, 0, "{reply:?}");
    let index = GetLatestIndexResponse::decode(reply.data.unwrap().as_slice())
        .unwrap()
        .index
        .unwrap();
    assert_eq!(index.header.unwrap().subject, subject(2));

    let reply = invoke(sample("fetch-list-cloud-events-from-index.json"));
    assert_eq!(reply.status, 0, "{reply:?}");
    let from = ListCloudEventsFromKeysResponse::decode(reply.data.unwrap().as_slice()).unwrap();
    assert_eq!(ids(&from.cloud_events), ["a1"]);
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
