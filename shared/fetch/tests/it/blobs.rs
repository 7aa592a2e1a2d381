//! Externalized payloads on S3 (moto), DBE1-sealed: fetched and decrypted over gRPC; a blob
//! that is gone yields the event with an empty payload; a wrong key fails the call.

use crate::{at, event, fixture, options, request, runtime, BLOB_KEY};
use dq_blob::{BlobConfig, BlobStore};
use dq_fetch::FetchApi;
use dq_lake::testing::Backend;
use dq_proto::grpc::GetLatestCloudEventRequest;
use dq_rawquery::{Db, Payloads};
use std::sync::Arc;
use tonic::Code;

fn s3_store(bucket: &str, key: Option<&str>) -> Arc<BlobStore> {
    let moto = dq_testkit::shared_moto();
    let cfg = BlobConfig {
        bucket: bucket.into(),
        prefix: dq_blob::DEFAULT_PREFIX.into(),
        encryption_key: key.map(str::to_string),
        region: Some(moto.region().into()),
        access_key_id: Some(moto.access_key().into()),
        secret_access_key: Some(moto.secret_key().into()),
        endpoint: Some(moto.endpoint()),
        kms_key_id: None,
    };
    Arc::new(runtime().block_on(BlobStore::open(&cfg)).unwrap())
}

fn bucket() -> String {
    let name = dq_testkit::unique_name("fetch")
        .to_lowercase()
        .replace('_', "-");
    dq_testkit::shared_moto().create_bucket(&name).unwrap();
    name
}

#[test]
fn sealed_blobs_on_s3() {
    let f = fixture();
    let (_t, lake) = dq_dinsim::testing::din_lake(Backend::File);
    let written = bucket();
    let store = s3_store(&written, Some(BLOB_KEY));
    let payload = format!(r#"{{"image":"{}"}}"#, "q".repeat(300));
    let rt = runtime();
    rt.block_on(
        dq_dinsim::Writer::new(&lake, Some(&store))
            .with_threshold(64)
            .write_bundle(&[event(1, "s3", "dimo.status", at(1), &payload)]),
    )
    .unwrap();
    let db = Arc::new(Db::new(lake));
    let latest = |store: Arc<BlobStore>| {
        let api = FetchApi::new(
            Arc::clone(&db),
            Payloads::new(Some(store)),
            dq_auth::GrpcAuthenticator::new(None, false).trust_unauthenticated(true),
        );
        let mut c = f.client(f.serve(api));
        f.rt.block_on(c.get_latest_cloud_event(request(
            GetLatestCloudEventRequest {
                options: Some(options(1)),
                advanced_options: None,
            },
            None,
        )))
    };
    let got = latest(Arc::clone(&store)).unwrap().into_inner();
    assert_eq!(got.cloud_event.unwrap().data, payload.as_bytes());

    // Another bucket: the object is missing → the event with an empty payload.
    let empty = latest(s3_store(&bucket(), Some(BLOB_KEY)))
        .unwrap()
        .into_inner()
        .cloud_event
        .unwrap();
    assert_eq!(empty.header.unwrap().id, "s3");
    assert!(empty.data.is_empty());

    // The right bucket without the key (or with another key): the sealed blob does not open.
    let other_key = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";
    for key in [None, Some(other_key)] {
        let e = latest(s3_store(&written, key)).unwrap_err();
        assert_eq!(e.code(), Code::Internal);
        assert!(
            e.message().starts_with("failed to get latest object: "),
            "{}",
            e.message()
        );
    }
}
