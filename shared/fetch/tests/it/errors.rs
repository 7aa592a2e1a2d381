//! Issue 18 item 8: what FetchService tells a client when a read fails. Errors about the
//! request keep their texts (clients match on them); a lake or blob-store failure answers a
//! generic text — DuckDB's and S3's messages name the catalog host, port, database and user,
//! or the bucket, key and response — and the detail goes to the log.

use crate::{fixture, options, plain, request};
use dq_blob::{BlobError, S3Failure};
use dq_rawquery::FetchError;
use std::sync::Arc;
use std::time::Duration;
use tonic::Code;

const KEY: &str =
    "cloudevent/blobs/did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:1/2026/06/01/k";

fn s3(status: u16, code: &str) -> S3Failure {
    S3Failure {
        operation: "GetObject",
        status: Some(status),
        code: Some(code.into()),
        message: Some("from bucket dq-prod-blobs".into()),
        request_id: Some("REQ1".into()),
    }
}

/// Every text a client sees for each kind of failure. The first group are the texts kept as
/// they were, because clients match on them; the second the generic texts that replaced
/// DuckDB's and S3's messages.
#[test]
fn client_texts_kept_and_generic() {
    let kept: Vec<(FetchError, &str)> = vec![
        // latestCloudEvent's and ListCloudEventsFromIndex's "no row".
        (
            FetchError::NotFound,
            "cloud event not found: sql: no rows in result set",
        ),
        (
            FetchError::TooManyIndexes(1001),
            "too many indexes: 1001 (max 1000)",
        ),
        (FetchError::InvalidIndexKey, "invalid index key"),
        (
            FetchError::BudgetExceeded,
            "total payload size exceeds the 256 MiB per-call budget: request fewer indexes per call",
        ),
        (
            FetchError::Deadline(Duration::from_secs(30)),
            "deadline exceeded after 30s",
        ),
        (
            FetchError::InvalidFilter("`tags`: `or` clauses nest deeper than 5 levels".into()),
            "invalid advanced search options: `tags`: `or` clauses nest deeper than 5 levels",
        ),
        // S3's error code stays in a blob-store failure (rewards-api matches `NoSuchKey` in an
        // INTERNAL blob miss); nothing else of S3's answer does.
        (
            FetchError::Blob(BlobError::NotFound {
                key: KEY.into(),
                s3: Some(Box::new(s3(404, "NoSuchKey"))),
            }),
            "blob not found: NoSuchKey",
        ),
        (
            FetchError::Blob(BlobError::S3 {
                key: KEY.into(),
                failure: Box::new(s3(403, "AccessDenied")),
            }),
            "blob store error: AccessDenied",
        ),
        (
            FetchError::Blob(BlobError::S3 {
                key: KEY.into(),
                failure: Box::new(s3(503, "SlowDown")),
            }),
            "blob store error: SlowDown",
        ),
    ];
    for (e, want) in &kept {
        assert_eq!(e.client_message(), *want, "{e:?}");
    }
    let generic: Vec<(FetchError, &str)> = vec![
        (
            FetchError::Lake(dq_lake::Error::Duckdb {
                context: "search raw_events".into(),
                message: "IO Error: Unable to connect to Postgres at \"host=db.internal port=5432 \
                          dbname=lake user=dq_reader password=***\""
                    .into(),
            }),
            "failed to query db",
        ),
        (
            FetchError::Blob(BlobError::S3 {
                key: KEY.into(),
                failure: Box::new(S3Failure {
                    operation: "GetObject",
                    status: None,
                    code: None,
                    message: Some("dispatch failure: dq-prod-blobs.s3.amazonaws.com".into()),
                    request_id: None,
                }),
            }),
            "blob store error: unavailable",
        ),
        (
            FetchError::Blob(BlobError::Transient {
                key: KEY.into(),
                message: "/var/blobs: permission denied".into(),
            }),
            "blob store error: unavailable",
        ),
        (
            FetchError::Blob(BlobError::SealedNoKey { key: KEY.into() }),
            "cloud event payload could not be decrypted",
        ),
        (
            FetchError::Blob(BlobError::Oversize {
                key: KEY.into(),
                size: 60 << 20,
                limit: 50 << 20,
            }),
            "cloud event payload is 62914560 bytes, over the 52428800-byte limit",
        ),
        (
            FetchError::NoBlobStore { key: KEY.into() },
            "cloud event payload is in the blob store but no blob store is configured",
        ),
        (
            FetchError::Internal("lake read task failed: panicked".into()),
            "internal error",
        ),
    ];
    for (e, want) in &generic {
        let text = e.client_message();
        assert_eq!(text, *want, "{e:?}");
        for detail in [
            "db.internal",
            "5432",
            "dq_reader",
            "dq-prod-blobs",
            KEY,
            "/var",
        ] {
            assert!(!text.contains(detail), "{text}");
        }
    }
}

/// The PostgreSQL catalog goes away under a served FetchService: every RPC answers INTERNAL
/// with its documented context and the generic text, never DuckDB's message; the detail is in
/// the log, without the password.
#[test]
fn catalog_down_answers_generic_texts() {
    dq_testkit::logs::capture();
    let f = fixture();
    // A server of its own: stopping the shared one would fail every other test.
    let pg = dq_testkit::Postgres::start().unwrap();
    let dsn = pg.create_database("lake").unwrap();
    let seeded = crate::seeded_on(dq_dinsim::testing::lake_on_postgres(&dsn));
    let c = f.client_over(&seeded.db, Arc::clone(&seeded.store));
    let index = {
        let mut c = c.clone();
        f.rt.block_on(c.list_indexes(request(plain::list_indexes(options(1), 1), None)))
            .unwrap()
            .into_inner()
            .indexes
    };
    assert_eq!(index.len(), 1);

    pg.stop_server().unwrap();
    let contexts = [
        "failed to get latest index",
        "failed to list indexes",
        "failed to get latest cloud event",
        "failed to get objects",
        "failed to get objects",
    ];
    let answers = f.every_rpc(&c, &options(1), 10, index, None);
    assert_eq!(answers.len(), contexts.len());
    let port = pg.port().to_string();
    let mut texts = Vec::new();
    for (context, answer) in contexts.into_iter().zip(answers) {
        let e = answer.expect_err(context);
        assert_eq!(
            (e.code(), e.message()),
            (
                Code::Internal,
                format!("{context}: failed to query db").as_str()
            ),
            "{e:?}"
        );
        assert!(!e.message().contains(&port), "{}", e.message());
        texts.push(e.message().to_string());
    }
    let logged = dq_testkit::logs::lines()
        .into_iter()
        .filter(|l| l.contains("FetchService call failed"))
        .count();
    assert!(logged >= 5, "{logged} failure lines logged");
    dq_testkit::logs::assert_no_secrets(&[pg.password()], &texts);
}
