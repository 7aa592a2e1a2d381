//! Externalized payloads on S3 (moto), DBE1-sealed: fetched and decrypted over gRPC; a blob
//! that is gone yields the event with an empty payload; a wrong key fails the call.

use crate::{
    at, event, fixture, lake_through, moto_bucket, moto_store, options, plain, request, BLOB_KEY,
};
use dq_blob::BlobStore;
use std::sync::Arc;
use tonic::Code;

#[test]
fn sealed_blobs_on_s3() {
    let f = fixture();
    let written = moto_bucket("fetch");
    let store = moto_store(&written, Some(BLOB_KEY));
    let payload = format!(r#"{{"image":"{}"}}"#, "q".repeat(300));
    let (_t, db) = lake_through(&store, &[event(1, "s3", "dimo.status", at(1), &payload)]);
    let latest = |store: Arc<BlobStore>| {
        let mut c = f.client_over(&db, store);
        f.rt.block_on(c.get_latest_cloud_event(request(plain::latest_event(options(1)), None)))
    };
    let got = latest(Arc::clone(&store)).unwrap().into_inner();
    assert_eq!(got.cloud_event.unwrap().data, payload.as_bytes());

    // Another bucket: the object is missing → the event with an empty payload.
    let empty = latest(moto_store(&moto_bucket("fetch"), Some(BLOB_KEY)))
        .unwrap()
        .into_inner()
        .cloud_event
        .unwrap();
    assert_eq!(empty.header.unwrap().id, "s3");
    assert!(empty.data.is_empty());

    // The right bucket without the key (or with another key): the sealed blob does not open.
    let other_key = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";
    for key in [None, Some(other_key)] {
        let e = latest(moto_store(&written, key)).unwrap_err();
        assert_eq!(e.code(), Code::Internal);
        assert!(
            e.message().starts_with("failed to get latest object: "),
            "{}",
            e.message()
        );
    }
}
