//! The DBE1 key read from Secrets Manager (moto) opens what the plaintext key sealed.

use std::collections::HashMap;

use dq_blob::{
    BlobConfig, BlobError, BlobStore, BLOB_BUCKET, BLOB_ENCRYPTION_KEY,
    BLOB_ENCRYPTION_KEY_SECRET_ARN, MAX_OBJECT_SIZE,
};
use dq_secrets::testing::{create_secret, moto_client};

const KEY: &str = "KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=";

async fn config(env: &[(&str, &str)]) -> Result<BlobConfig, BlobError> {
    let env: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    BlobConfig::from_lookup_with_secrets(|k| env.get(k).cloned(), &moto_client()).await
}

#[tokio::test]
async fn a_key_from_a_secret_opens_a_blob_sealed_with_the_plaintext_key() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().display().to_string();
    let sealer = BlobStore::open(
        &config(&[(BLOB_BUCKET, &root), (BLOB_ENCRYPTION_KEY, KEY)])
            .await
            .unwrap(),
    )
    .await
    .unwrap();
    let payload = b"a payload din externalized".to_vec();
    let key = sealer.new_key("did:erc721:137:0xabc:1", chrono::Utc::now());
    sealer.put(&key, &payload).await.unwrap();
    let on_disk = std::fs::read(dir.path().join(&key)).unwrap();
    assert!(
        on_disk.starts_with(dq_blob::dbe1::MAGIC),
        "the object is sealed"
    );

    for secret in [format!(r#"{{"key": "{KEY}"}}"#), format!("{KEY}\n")] {
        let arn = create_secret(&secret);
        let cfg = config(&[(BLOB_BUCKET, &root), (BLOB_ENCRYPTION_KEY_SECRET_ARN, &arn)])
            .await
            .unwrap();
        assert_eq!(cfg.encryption_key.as_deref(), Some(KEY));
        assert!(!format!("{cfg:?}").contains(KEY));
        let reader = BlobStore::open(&cfg).await.unwrap();
        assert_eq!(reader.get(&key, MAX_OBJECT_SIZE).await.unwrap(), payload);
    }

    // A keyless reader is refused: the secret is what opens it.
    let keyless = BlobStore::open(&config(&[(BLOB_BUCKET, &root)]).await.unwrap())
        .await
        .unwrap();
    assert!(keyless.get(&key, MAX_OBJECT_SIZE).await.is_err());
}

#[tokio::test]
async fn both_key_sources_are_a_config_error_naming_both() {
    let err = config(&[
        (BLOB_BUCKET, "/tmp/unused"),
        (BLOB_ENCRYPTION_KEY, KEY),
        (
            BLOB_ENCRYPTION_KEY_SECRET_ARN,
            "arn:aws:secretsmanager:us-east-1:1:secret:k",
        ),
    ])
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(BLOB_ENCRYPTION_KEY)
            && err.contains(BLOB_ENCRYPTION_KEY_SECRET_ARN)
            && err.contains("not both"),
        "{err}"
    );
    assert!(!err.contains(KEY), "{err}");
}

#[tokio::test]
async fn an_unreadable_key_secret_names_the_setting() {
    let err = config(&[
        (BLOB_BUCKET, "/tmp/unused"),
        (
            BLOB_ENCRYPTION_KEY_SECRET_ARN,
            "arn:aws:secretsmanager:us-east-1:1:secret:none",
        ),
    ])
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(BLOB_ENCRYPTION_KEY_SECRET_ARN) && err.contains("secret:none"),
        "{err}"
    );
}
