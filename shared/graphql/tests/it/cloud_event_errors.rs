//! Issue 18 item 8: the cloud-event fields while the PostgreSQL catalog is down answer their
//! dialect's generic text — dq `failed to query db` with INTERNAL_SERVER_ERROR (as the signal
//! fields), fetch the same text without a code (fetch-api had none), telemetry's
//! `attestations` `internal error` — never DuckDB's message, which names the catalog's host,
//! port, database and user. The detail goes to the log, without the password.

use crate::*;
use dq_auth::Permission;
use serde_json::json;

fn attestation(subject: &str, id: &str, time: DateTime<Utc>) -> RawEvent {
    RawEvent {
        header: CloudEventHeader {
            spec_version: "1.0".into(),
            event_type: "dimo.attestation".into(),
            source: SOURCE.into(),
            subject: subject.into(),
            id: id.into(),
            time,
            data_content_type: "application/json".into(),
            ..Default::default()
        },
        data: Some(json!({"ok": true}).to_string()),
        data_base64: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_down_answers_generic_texts() {
    dq_testkit::logs::capture();
    // A server of its own: stopping the shared one would fail every other test.
    let pg = dq_testkit::Postgres::start().unwrap();
    let dsn = pg.create_database("lake").unwrap();
    let t = dq_dinsim::testing::lake_on_postgres(&dsn);
    let token_id = 7;
    let subject = vehicle(token_id);
    let events = vec![
        status(
            &subject,
            SOURCE,
            "s-1",
            at(0),
            vec![item("speed", at(0), json!(1.0))],
        ),
        attestation(&subject, "att-1", at(10)),
    ];
    let f = fixture_in(t, &events, Limits::default(), None).await;
    let raw = f.token(&subject, &[Permission::GetRawData]);
    let mut claims = dq_auth::dev::DevClaims::vehicle(&subject, &[]);
    claims.cloud_events = Some(json!({"events": [
        {"event_type": "dimo.attestation", "source": "*", "ids": ["*"], "tags": []}
    ]}));
    let grant = f.signer.mint(&claims).unwrap();

    let documents = [
        (
            Dialect::Dq,
            &raw,
            format!(r#"{{ cloudEvents(subject: "{subject}", limit: 3) {{ header {{ id }} }} }}"#),
        ),
        (
            Dialect::Dq,
            &raw,
            format!(r#"{{ availableCloudEventTypes(subject: "{subject}") {{ type count }} }}"#),
        ),
        (
            Dialect::Fetch,
            &raw,
            format!(r#"{{ cloudEvents(did: "{subject}") {{ header {{ id }} }} }}"#),
        ),
        (
            Dialect::Fetch,
            &raw,
            format!(r#"{{ latestIndex(did: "{subject}") {{ indexKey }} }}"#),
        ),
        (
            Dialect::Telemetry,
            &grant,
            format!(r#"{{ attestations(tokenId: {token_id}) {{ id }} }}"#),
        ),
    ];
    // Every document answers before the catalog goes away.
    for (dialect, token, query) in &documents {
        let (status, body) = f.gql_in(*dialect, Some(token.as_str()), query).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.get("errors").is_none(), "{query}\n{body}");
    }

    pg.stop_server().unwrap();
    let port = pg.port().to_string();
    let mut texts = Vec::new();
    for (dialect, token, query) in &documents {
        let (status, body) = f.gql_in(*dialect, Some(token.as_str()), query).await;
        assert_eq!(status, 200, "{body}");
        let e = &body["errors"][0];
        let (message, code) = (
            e["message"].as_str().unwrap_or_default(),
            &e["extensions"]["code"],
        );
        let want: (&str, Value) = match dialect {
            Dialect::Dq => ("failed to query db", json!("INTERNAL_SERVER_ERROR")),
            Dialect::Fetch => ("failed to query db", Value::Null),
            Dialect::Telemetry => ("internal error", json!("INTERNAL_SERVER_ERROR")),
        };
        assert_eq!((message, code.clone()), (want.0, want.1), "{query}\n{body}");
        assert!(!body.to_string().contains(&port), "{body}");
        texts.push(body.to_string());
    }
    dq_testkit::logs::assert_no_secrets(&[pg.password()], &texts);
}
