//! Secrets against a real Secrets Manager API (moto): fetch, field extraction, re-fetch after a
//! rotation, the blocking re-fetch from threads with and without a runtime.

use dq_secrets::testing::{create_secret, moto_client, put_secret_value};
use dq_secrets::Error;

#[tokio::test]
async fn reads_a_json_field_and_a_plain_secret() {
    let client = moto_client();
    let json = create_secret(r#"{"dsn": "host=h password=pwJSON1", "ro": "x"}"#);
    let secret = client.fetch(&json, Some("dsn")).await.unwrap();
    assert_eq!(secret.value(), "host=h password=pwJSON1");
    assert_eq!(secret.id(), json);
    assert!(!format!("{secret:?}").contains("pwJSON1"));

    let plain = create_secret("c2VjcmV0LWtleQ==\n");
    let secret = client.fetch(&plain, Some("key")).await.unwrap();
    assert_eq!(secret.value(), "c2VjcmV0LWtleQ==");
}

#[tokio::test]
async fn a_missing_secret_or_field_is_a_clear_error() {
    let client = moto_client();
    let err = client
        .fetch(
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:nope",
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Fetch { .. }), "{err}");
    assert!(err.to_string().contains("secret:nope"), "{err}");

    let arn = create_secret(r#"{"password": "pwFIELD1"}"#);
    let err = client
        .fetch(&arn, Some("dsn"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`dsn` is missing") && !err.contains("pwFIELD1"),
        "{err}"
    );
}

#[tokio::test]
async fn refresh_fetches_once_per_refused_value() {
    let arn = create_secret(r#"{"dsn": "A"}"#);
    let secret = moto_client().fetch(&arn, Some("dsn")).await.unwrap();
    put_secret_value(&arn, r#"{"dsn": "B"}"#);
    assert_eq!(secret.refresh("A").await.unwrap(), "B");
    assert_eq!(secret.clone().value(), "B", "clones share the cache");

    // A second caller that saw `A` refused gets `B` without a call: the secret has moved on to
    // `C` in Secrets Manager, and `C` is only read once `B` is refused.
    put_secret_value(&arn, r#"{"dsn": "C"}"#);
    assert_eq!(secret.refresh("A").await.unwrap(), "B");
    assert_eq!(secret.refresh("B").await.unwrap(), "C");
    // Refused but unchanged: the same value comes back, and the caller stops there.
    assert_eq!(secret.refresh("C").await.unwrap(), "C");
}

#[test]
fn refresh_blocking_works_with_and_without_a_runtime() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let arn = create_secret("one");
    let secret = rt.block_on(moto_client().fetch(&arn, None)).unwrap();
    put_secret_value(&arn, "two");

    // A plain thread, no runtime anywhere.
    let s = secret.clone();
    let got = std::thread::spawn(move || s.refresh_blocking("one"))
        .join()
        .unwrap()
        .unwrap();
    assert_eq!(got, "two");

    // A blocking thread of a current-thread runtime whose only thread is waiting on it.
    put_secret_value(&arn, "three");
    let s = secret.clone();
    let got = rt
        .block_on(
            async move { tokio::task::spawn_blocking(move || s.refresh_blocking("two")).await },
        )
        .unwrap()
        .unwrap();
    assert_eq!(got, "three");
}
