//! Tests of the throwaway moto servers.

use std::time::Duration;

use dq_testkit::{shared_moto, unique_name, Moto};

use crate::support::{eventually, process_is_gone};

const JSON_1_0: &str = "application/x-amz-json-1.0";

#[test]
fn created_bucket_is_listed() {
    let moto = shared_moto();
    let bucket = unique_name("bucket");
    moto.create_bucket(&bucket).unwrap();

    let auth = moto.auth_header("s3");
    let listing = moto
        .request("GET", "/", &[("Authorization", &auth)], b"")
        .unwrap();
    assert_eq!(listing.status, 200);
    assert!(
        listing.text().contains(&format!("<Name>{bucket}</Name>")),
        "{}",
        listing.text()
    );

    let error = moto.create_bucket("Not_Valid").unwrap_err();
    assert!(error.to_string().contains("invalid bucket name"), "{error}");
}

#[test]
fn dynamodb_answers_list_tables_with_a_dummy_signature() {
    let moto = shared_moto();
    let auth = moto.auth_header("dynamodb");
    let call = |target: &str, body: &str| {
        let target = format!("DynamoDB_20120810.{target}");
        moto.request(
            "POST",
            "/",
            &[
                ("Authorization", &auth),
                ("X-Amz-Target", &target),
                ("Content-Type", JSON_1_0),
            ],
            body.as_bytes(),
        )
        .unwrap()
    };

    let listing = call("ListTables", "{}");
    assert_eq!(listing.status, 200, "{}", listing.text());
    assert!(
        listing.text().contains("\"TableNames\""),
        "{}",
        listing.text()
    );

    let table = unique_name("table");
    let create = call(
        "CreateTable",
        &format!(
            r#"{{"TableName":"{table}","KeySchema":[{{"AttributeName":"pk","KeyType":"HASH"}}],
               "AttributeDefinitions":[{{"AttributeName":"pk","AttributeType":"S"}}],
               "BillingMode":"PAY_PER_REQUEST"}}"#
        ),
    );
    assert_eq!(create.status, 200, "{}", create.text());
    assert!(call("ListTables", "{}").text().contains(&table));
}

#[test]
fn reset_wipes_state_and_drop_kills_the_server() {
    let moto = Moto::start().unwrap();
    assert_eq!(moto.region(), "us-east-1");
    assert!(moto.endpoint().ends_with(&format!(":{}", moto.port())));
    moto.create_bucket("before-reset").unwrap();
    moto.reset().unwrap();
    let auth = moto.auth_header("s3");
    let listing = moto
        .request("GET", "/", &[("Authorization", &auth)], b"")
        .unwrap();
    assert!(
        !listing.text().contains("before-reset"),
        "{}",
        listing.text()
    );

    let pid = moto.pid();
    let endpoint = moto.endpoint();
    let dir = moto
        .log_path()
        .parent()
        .expect("instance dir")
        .to_path_buf();
    drop(moto);
    assert!(!dir.exists(), "drop removes the instance directory");
    assert!(eventually(Duration::from_secs(5), || process_is_gone(pid)));
    assert!(dq_testkit::http::request("GET", &endpoint, &[], b"").is_err());
}

#[test]
fn missing_venv_error_says_to_run_make_venv() {
    let error = dq_testkit::Error::MotoMissing {
        path: "/nowhere/bin/moto_server".into(),
    };
    assert!(error.to_string().contains("make venv"), "{error}");
}
