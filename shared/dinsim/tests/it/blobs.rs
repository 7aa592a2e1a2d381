use base64::Engine;
use dq_blob::{BlobConfig, BlobStore, MAX_OBJECT_SIZE};
use dq_dinsim::Writer;
use dq_lake::progress;
use dq_lake::testing::Backend;

use crate::{at, din_lake, runtime, status};
use dq_dinsim::testing::inserted_rows;

const KEY: &str = "KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=";

fn local_store(dir: &std::path::Path, sealed: bool) -> BlobConfig {
    let mut cfg = BlobConfig::local(dir);
    cfg.encryption_key = sealed.then(|| KEY.to_owned());
    cfg
}

fn s3_store(sealed: bool) -> BlobConfig {
    let moto = dq_testkit::shared_moto();
    let bucket = moto.create_unique_bucket("blobs").unwrap();
    BlobConfig {
        bucket,
        prefix: dq_blob::DEFAULT_PREFIX.into(),
        encryption_key: sealed.then(|| KEY.to_owned()),
        s3: moto.s3_config(),
    }
}

/// Payloads over the threshold land in the store before their row; the row keeps only the key
/// and the content type; the blob opens back to the exact payload (decoded bytes for base64).
fn externalizes_and_round_trips(cfg: BlobConfig) {
    let (_t, lake) = din_lake(Backend::File);
    let rt = runtime();
    let store = rt.block_on(BlobStore::open(&cfg)).unwrap();
    let writer = Writer::new(&lake, Some(&store)).with_threshold(64);
    let big_json = format!(r#"{{"blob": "{}"}}"#, "x".repeat(200));
    let mut b64 = status(2, "b64", at(1, 0), "");
    b64.data = None;
    let binary: Vec<u8> = (0..=255u8).cycle().take(300).collect();
    b64.data_base64 = Some(base64::engine::general_purpose::STANDARD.encode(&binary));
    b64.header.data_content_type = "image/png".into();
    let events = vec![
        status(1, "big", at(0, 0), &big_json),
        b64,
        status(3, "small", at(2, 0), "{}"),
    ];
    let start = progress::head(&lake).unwrap();
    let report = rt.block_on(writer.write_bundle(&events)).unwrap();
    assert_eq!(report.externalized, 2);
    let rows = inserted_rows(&lake, start + 1, start + 1);
    for (id, expected, content_type) in [
        ("big", big_json.as_bytes(), "application/json"),
        ("b64", &binary[..], "image/png"),
    ] {
        let row = rows.iter().find(|r| r.id == id).unwrap();
        assert_eq!(
            (row.data.as_deref(), row.data_base64.as_deref()),
            (None, None)
        );
        assert_eq!(row.data_content_type, content_type);
        let key = row.data_index_key.as_deref().unwrap();
        assert!(
            key.starts_with(&format!("cloudevent/blobs/{}/", row.subject)),
            "{key}"
        );
        assert_eq!(
            rt.block_on(store.get(key, MAX_OBJECT_SIZE)).unwrap(),
            expected
        );
    }
    let small = rows.iter().find(|r| r.id == "small").unwrap();
    assert!(small.data_index_key.is_none() && small.data.is_some());

    // A sealed store writes DBE1 objects that a keyless reader refuses as poison.
    if cfg.encryption_key.is_some() {
        let keyless = BlobConfig {
            encryption_key: None,
            ..cfg.clone()
        };
        let keyless = rt.block_on(BlobStore::open(&keyless)).unwrap();
        let key = rows
            .iter()
            .find(|r| r.id == "big")
            .unwrap()
            .data_index_key
            .clone()
            .unwrap();
        let err = rt.block_on(keyless.get(&key, MAX_OBJECT_SIZE)).unwrap_err();
        assert_eq!(err.reason(), "sealed_no_key");
    }
}

#[test]
fn local_plain() {
    let dir = tempfile::tempdir().unwrap();
    externalizes_and_round_trips(local_store(dir.path(), false));
}

#[test]
fn local_sealed() {
    let dir = tempfile::tempdir().unwrap();
    externalizes_and_round_trips(local_store(dir.path(), true));
}

#[test]
fn s3_plain() {
    externalizes_and_round_trips(s3_store(false));
}

#[test]
fn s3_sealed() {
    externalizes_and_round_trips(s3_store(true));
}

#[test]
fn missing_blob_and_oversize_are_poison() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let store = rt
        .block_on(BlobStore::open(&local_store(dir.path(), false)))
        .unwrap();
    let err = rt
        .block_on(store.get("cloudevent/blobs/x/2026/01/01/none", 10))
        .unwrap_err();
    assert_eq!((err.reason(), err.is_poison()), ("missing", true));
    rt.block_on(store.put("cloudevent/blobs/x/2026/01/01/big", &[0; 11]))
        .unwrap();
    let err = rt
        .block_on(store.get("cloudevent/blobs/x/2026/01/01/big", 10))
        .unwrap_err();
    assert_eq!((err.reason(), err.is_poison()), ("oversize", true));
    let moto = s3_store(false);
    let s3 = rt.block_on(BlobStore::open(&moto)).unwrap();
    let err = rt
        .block_on(s3.get("cloudevent/blobs/x/2026/01/01/none", 10))
        .unwrap_err();
    assert_eq!((err.reason(), err.is_poison()), ("missing", true));
}

#[test]
fn over_threshold_without_a_store_is_an_error() {
    let (_t, lake) = din_lake(Backend::File);
    let writer = Writer::new(&lake, None).with_threshold(4);
    let err = runtime()
        .block_on(writer.write_bundle(&[status(1, "big", at(0, 0), "{\"a\":1}")]))
        .unwrap_err();
    assert!(err.to_string().contains("BLOB_BUCKET"), "{err}");
}
