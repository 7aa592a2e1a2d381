//! Issue 18 item 9: an S3 failure is logged as one short line — operation, HTTP status, S3's
//! code and message, the request id and the key — never as the SDK's multi-kilobyte dump of
//! the raw response (headers, body, connector internals). Against moto: a missing object and
//! an access S3 refuses (an archived object, 403 `InvalidObjectState`).

use crate::{at, event, fixture, lake_through, moto_bucket, moto_store, plain, request};
use dq_blob::BlobStore;
use dq_proto::grpc::SearchOptions;
use std::sync::Arc;
use tonic::Code;

/// The warning and error lines logged so far that name `key`.
fn lines_naming(key: &str) -> Vec<String> {
    dq_testkit::logs::lines()
        .into_iter()
        .filter(|l| l.contains(key))
        .filter(|l| l.contains(r#""level":"WARN""#) || l.contains(r#""level":"ERROR""#))
        .collect()
}

/// Exactly one line names `key`; it carries `code`, the status and a request id, and none of
/// the SDK's dump.
fn assert_one_line(key: &str, code: &str, status: &str) {
    let lines = lines_naming(key);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    let line = &lines[0];
    for want in [code, status, "(request id "] {
        assert!(line.contains(want), "{want} missing: {line}");
    }
    for dump in ["headers", "SdkBody", "Extensions", "ErrorMetadata", "<?xml"] {
        assert!(!line.contains(dump), "{dump} in: {line}");
    }
    assert!(line.len() < 1024, "{} bytes: {line}", line.len());
}

#[test]
fn s3_failures_are_logged_on_one_line() {
    dq_testkit::logs::capture();
    let f = fixture();
    let written = moto_bucket("s3logs");
    let store = moto_store(&written, None);
    let payload = format!(r#"{{"image":"{}"}}"#, "q".repeat(300));
    let (_t, db) = lake_through(
        &store,
        &[
            event(1, "miss", "dimo.status", at(1), &payload),
            event(1, "cold", "dimo.status", at(2), &payload),
        ],
    );
    let serve = |store: Arc<BlobStore>| f.client_over(&db, store);
    let by_id = |id: &str| SearchOptions {
        subject: Some(crate::subject(1)),
        id: Some(id.into()),
        ..Default::default()
    };
    let key_of = |id: &str| {
        let mut c = serve(Arc::clone(&store));
        let indexes =
            f.rt.block_on(c.list_indexes(request(plain::list_indexes(by_id(id), 1), None)))
                .unwrap()
                .into_inner()
                .indexes;
        indexes[0].data.as_ref().unwrap().key.clone()
    };
    let latest = |store: Arc<BlobStore>, id: &str| {
        let mut c = serve(store);
        f.rt.block_on(c.get_latest_cloud_event(request(plain::latest_event(by_id(id)), None)))
    };

    // A missing object: the event is served without its payload, and one warning says why.
    let miss = key_of("miss");
    assert!(miss.starts_with(dq_blob::DEFAULT_PREFIX), "{miss}");
    let got = latest(moto_store(&moto_bucket("s3logs"), None), "miss")
        .unwrap()
        .into_inner();
    assert!(got.cloud_event.unwrap().data.is_empty());
    assert_one_line(&miss, "NoSuchKey", "HTTP 404");

    // S3 refuses the read (the object was archived): INTERNAL with S3's code only, and one
    // error line with the rest.
    let cold = key_of("cold");
    let moto = dq_testkit::shared_moto();
    let auth = moto.auth_header("s3");
    let put = moto
        .request(
            "PUT",
            &format!("/{written}/{cold}"),
            &[("Authorization", &auth), ("x-amz-storage-class", "GLACIER")],
            b"archived",
        )
        .unwrap();
    assert!(put.is_success(), "{}", put.text());
    let e = latest(Arc::clone(&store), "cold").unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (
            Code::Internal,
            "failed to get latest object: blob store error: InvalidObjectState"
        )
    );
    assert_one_line(&cold, "InvalidObjectState", "HTTP 403");
}
