//! The same service as gRPC-web: HTTP/1.1 POST, `application/grpc-web+proto`, the reply a data
//! frame then a trailer frame (or the status in the headers for trailers-only errors).

use crate::{fixture, ids, options, plain, subject};
use bytes::Bytes;
use dq_proto::grpc::{GetLatestIndexResponse, ListCloudEventsResponse};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use prost::Message;
use std::collections::HashMap;
use std::net::SocketAddr;

/// A decoded gRPC-web reply.
#[derive(Debug)]
pub struct Reply {
    pub status: i32,
    pub message: String,
    pub data: Option<Vec<u8>>,
    pub trailers: HashMap<String, String>,
}

/// Frames a message: flag 0, big-endian length, bytes.
pub fn frame(message: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8];
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// Splits a reply body into its data frame and trailer frame; a `grpc-status` header (a
/// trailers-only reply) counts like a trailer.
pub fn decode(headers: &http::HeaderMap, body: &[u8]) -> Reply {
    let mut trailers: HashMap<String, String> = headers
        .iter()
        .filter(|(k, _)| k.as_str().starts_with("grpc-"))
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string()))
        .collect();
    let mut data = None;
    let mut rest = body;
    while rest.len() >= 5 {
        let flag = rest[0];
        let len = u32::from_be_bytes(rest[1..5].try_into().unwrap()) as usize;
        let payload = &rest[5..5 + len];
        if flag & 0x80 != 0 {
            for line in std::str::from_utf8(payload).unwrap().split("\r\n") {
                if let Some((k, v)) = line.split_once(':') {
                    trailers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
                }
            }
        } else {
            assert!(data.is_none(), "one message per unary reply");
            data = Some(payload.to_vec());
        }
        rest = &rest[5 + len..];
    }
    assert!(rest.is_empty(), "trailing bytes in a gRPC-web body");
    Reply {
        status: trailers["grpc-status"].parse().unwrap(),
        message: percent_decode(trailers.get("grpc-message").map_or("", String::as_str)),
        data,
        trailers,
    }
}

/// `grpc-message` is percent-encoded on the wire.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

/// POSTs one gRPC-web call over HTTP/1.1.
pub fn call(addr: SocketAddr, method: &str, message: &[u8], authorization: Option<&str>) -> Reply {
    let f = fixture();
    f.rt.block_on(async {
        let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
        let mut req = http::Request::post(format!("http://{addr}/grpc.FetchService/{method}"))
            .header("content-type", "application/grpc-web+proto")
            .header("accept", "application/grpc-web+proto")
            .header("x-grpc-web", "1");
        if let Some(a) = authorization {
            req = req.header("authorization", a);
        }
        let resp = client
            .request(req.body(Full::new(Bytes::from(frame(message)))).unwrap())
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.version(), http::Version::HTTP_11);
        assert!(resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/grpc-web"));
        let (parts, body) = resp.into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        decode(&parts.headers, &body)
    })
}

#[test]
fn list_cloud_events_over_grpc_web() {
    let f = fixture();
    let req = plain::list_events(options(1), 3);
    let reply = call(
        f.strict,
        "ListCloudEvents",
        &req.encode_to_vec(),
        Some(&f.owner()),
    );
    assert_eq!(reply.status, 0, "{reply:?}");
    let resp = ListCloudEventsResponse::decode(reply.data.unwrap().as_slice()).unwrap();
    assert_eq!(ids(&resp.cloud_events), ["t2", "t1", "big"]);
    assert_eq!(resp.cloud_events[2].data, crate::big_payload().into_bytes());
}

#[test]
fn latest_index_and_errors_over_grpc_web() {
    let f = fixture();
    let req = plain::latest_index(options(2));
    let owner2 = f.bearer(2, &[dq_auth::Permission::GetRawData]);
    let reply = call(
        f.strict,
        "GetLatestIndex",
        &req.encode_to_vec(),
        Some(&owner2),
    );
    assert_eq!(reply.status, 0, "{reply:?}");
    let resp = GetLatestIndexResponse::decode(reply.data.unwrap().as_slice()).unwrap();
    let index = resp.index.unwrap();
    assert_eq!(index.header.unwrap().subject, subject(2));
    assert_eq!(index.data.unwrap().key, format!("lake://{}/b1", subject(2)));

    // Failures carry no message, only the status.
    let reply = call(f.strict, "GetLatestIndex", &req.encode_to_vec(), None);
    assert_eq!(
        (reply.status, reply.message.as_str()),
        (16, "no token claims")
    );
    assert!(reply.data.is_none());
    let reply = call(
        f.strict,
        "GetLatestIndex",
        &req.encode_to_vec(),
        Some(&f.owner()),
    );
    assert_eq!(reply.status, 7, "{reply:?}");
    assert!(reply.data.is_none());
    let nine = f.bearer(9, &[dq_auth::Permission::GetRawData]);
    let req9 = plain::latest_index(options(9));
    let reply = call(
        f.strict,
        "GetLatestIndex",
        &req9.encode_to_vec(),
        Some(&nine),
    );
    assert_eq!(reply.status, 5, "{reply:?}");
    assert!(reply.trailers.contains_key("grpc-status"));
}
