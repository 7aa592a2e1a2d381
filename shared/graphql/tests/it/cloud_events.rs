//! The cloud-event queries over raw_events: authorization, filters, limit, laziness,
//! the non-null `latestCloudEvent` error, type summaries.

use crate::*;
use serde_json::json;

#[tokio::test]
async fn cloud_event_queries() {
    let subject = vehicle(21);
    let mut events: Vec<RawEvent> = (0..3)
        .map(|k| {
            let t = at(k * 60);
            status(
                &subject,
                SOURCE,
                &format!("ce-{k}"),
                t,
                vec![item("speed", t, json!(k as f64))],
            )
        })
        .collect();
    let mut other_type = status(&subject, SOURCE, "ce-fp", at(500), vec![]);
    other_type.header.event_type = "dimo.fingerprint".into();
    other_type.data = Some(r#"{"vin":"1HGCM82633A004352"}"#.into());
    events.push(other_type);
    let f = fixture(&events).await;
    let raw = f.token(&subject, &[Permission::GetRawData]);

    let q = format!(
        r#"{{ cloudEvents(subject: "{subject}", filter: {{types: ["dimo.status"]}}) {{ header {{ id type source subject time specversion producer dataschema tags }} data }} }}"#
    );
    let (status, body) = f.gql(Some(&raw), &q).await;
    assert_eq!(status, 200, "{body}");
    let list = body["data"]["cloudEvents"].as_array().unwrap();
    let ids: Vec<&str> = list
        .iter()
        .map(|e| e["header"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["ce-2", "ce-1", "ce-0"], "newest first");
    assert_eq!(list[0]["header"]["time"], rfc(at(120)));
    assert_eq!(
        list[0]["header"]["dataschema"], "",
        "absent strings are empty, not null"
    );
    assert_eq!(list[0]["header"]["tags"], json!([]));
    assert_eq!(list[0]["data"]["signals"][0]["value"], 2.0);

    // limit, type filter, header-only selection, strict after.
    let q = format!(
        r#"{{ cloudEvents(subject: "{subject}", limit: 1, filter: {{type: "dimo.fingerprint"}}) {{ header {{ id }} dataUrl }} latest: cloudEvents(subject: "{subject}", filter: {{after: "{}"}}) {{ header {{ id }} }} }}"#,
        rfc(at(120))
    );
    let (_, body) = f.gql(Some(&raw), &q).await;
    assert_eq!(
        body["data"]["cloudEvents"],
        json!([{"header": {"id": "ce-fp"}, "dataUrl": null}])
    );
    assert_eq!(body["data"]["latest"], json!([{"header": {"id": "ce-fp"}}]));

    let q = format!(
        r#"{{ latestCloudEvent(subject: "{subject}", filter: {{type: "dimo.status"}}) {{ header {{ id }} data }} availableCloudEventTypes(subject: "{subject}") {{ type count firstSeen lastSeen }} }}"#
    );
    let (_, body) = f.gql(Some(&raw), &q).await;
    assert_eq!(
        body["data"]["latestCloudEvent"]["header"]["id"], "ce-2",
        "{body}"
    );
    assert_eq!(
        body["data"]["availableCloudEventTypes"],
        json!([
            {"type": "dimo.fingerprint", "count": 1, "firstSeen": rfc(at(500)), "lastSeen": rfc(at(500))},
            {"type": "dimo.status", "count": 3, "firstSeen": rfc(at(0)), "lastSeen": rfc(at(120))}
        ])
    );

    // No match: the non-null field fails the whole response.
    let q = format!(
        r#"{{ latestCloudEvent(subject: "{subject}", filter: {{type: "nope"}}) {{ header {{ id }} }} }}"#
    );
    let (status, body) = f.gql(Some(&raw), &q).await;
    assert_eq!(status, 200);
    assert_eq!(body["data"], Value::Null);
    assert_eq!(
        body["errors"][0]["message"],
        "cloud event not found: sql: no rows in result set"
    );

    // Authorization: raw-data permission, then own asset or paired device.
    let q = format!(r#"{{ cloudEvents(subject: "{subject}") {{ header {{ id }} }} }}"#);
    let (_, body) = f.gql(None, &q).await;
    assert_eq!(
        body["errors"][0]["message"],
        "unauthorized: no token claims"
    );
    let weak = f.token(&subject, &[Permission::GetNonLocationHistory]);
    let (_, body) = f.gql(Some(&weak), &q).await;
    assert_eq!(
        body["errors"][0]["message"],
        "unauthorized: token does not have required permission for this operation"
    );
    let both = f.token(
        &subject,
        &[
            Permission::GetNonLocationHistory,
            Permission::GetLocationHistory,
        ],
    );
    let (_, body) = f.gql(Some(&both), &q).await;
    assert_eq!(body["data"]["cloudEvents"].as_array().unwrap().len(), 4);
    let stranger = f.token(&vehicle(22), &[Permission::GetRawData]);
    let (_, body) = f.gql(Some(&stranger), &q).await;
    assert_eq!(
        body["errors"][0]["message"],
        "unauthorized: token does not have access to this subject"
    );
}

/// A device paired (per identity-api) to the token's vehicle is readable under its normalized
/// DID; an unpaired one is not.
#[tokio::test]
async fn device_link_through_identity_api() {
    const DEVICE_CONTRACT: &str = "0x9c94C395cBcBDe662235E0A9d3bB87Ad708561BA";
    let owner = vehicle(31);
    let device = format!("did:erc721:137:{DEVICE_CONTRACT}:7");
    let stray = format!("did:erc721:137:{DEVICE_CONTRACT}:8");
    // identity-api stand-in: device 7 is paired to the vehicle, device 8 to another one.
    let paired = owner.clone();
    let app = axum::Router::new().route(
        "/query",
        axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
            let paired = paired.clone();
            async move {
                let did = body["variables"]["did"].as_str().unwrap_or("").to_string();
                let vehicle = if did.ends_with(":7") { paired } else { vehicle(99) };
                axum::Json(json!({
                    "data": {"aftermarketDevice": null, "syntheticDevice": {"vehicle": {"tokenDID": vehicle}}},
                    "errors": [{"message": "aftermarket device not found"}]
                }))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/query", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let t = at(0);
    let events = vec![status(
        &device,
        SOURCE,
        "dev-1",
        t,
        vec![item("speed", t, json!(1.0))],
    )];
    let f = fixture_full(&events, Limits::default(), Some(url)).await;
    let token = f.token(&owner, &[Permission::GetRawData]);
    // The lower-case contract still finds the events stored under the EIP-55 DID.
    let q = format!(
        r#"{{ cloudEvents(subject: "{}") {{ header {{ id subject }} }} }}"#,
        device.to_lowercase()
    );
    let (_, body) = f.gql(Some(&token), &q).await;
    assert_eq!(
        body["data"]["cloudEvents"],
        json!([{"header": {"id": "dev-1", "subject": device}}]),
        "{body}"
    );
    let q = format!(r#"{{ cloudEvents(subject: "{stray}") {{ header {{ id }} }} }}"#);
    let (_, body) = f.gql(Some(&token), &q).await;
    assert_eq!(
        body["errors"][0]["message"],
        "unauthorized: token does not have access to this subject"
    );
    server.abort();
}

/// An externalized payload on S3 (moto) is served as a presigned `dataUrl` without `data`;
/// an inline one has `data` and no `dataUrl`.
#[tokio::test]
async fn externalized_payloads_are_presigned() {
    let moto = dq_testkit::shared_moto();
    let bucket = moto.create_unique_bucket("gqlblobs").unwrap();
    let cfg = dq_blob::BlobConfig {
        bucket: bucket.clone(),
        prefix: dq_blob::DEFAULT_PREFIX.into(),
        encryption_key: None,
        s3: moto.s3_config(),
    };
    let store = Arc::new(dq_blob::BlobStore::open(&cfg).await.unwrap());
    let subject = vehicle(51);
    let big = status(
        &subject,
        SOURCE,
        "big",
        at(60),
        (0..20).map(|k| item("speed", at(60), json!(k))).collect(),
    );
    let small = status(
        &subject,
        SOURCE,
        "small",
        at(0),
        vec![item("speed", at(0), json!(1.0))],
    );

    let (t, lake) = dq_dinsim::testing::din_lake(Backend::File);
    dq_tables::schema::ensure(&lake).unwrap();
    let report = dq_dinsim::Writer::new(&lake, Some(&store))
        .with_threshold(256)
        .write_bundle(&[big, small])
        .await
        .unwrap();
    assert_eq!(report.externalized, 1);
    let f = serve(t, lake, Limits::default(), None, Some(store));
    let token = f.token(&subject, &[Permission::GetRawData]);
    let q =
        format!(r#"{{ cloudEvents(subject: "{subject}") {{ header {{ id }} data dataUrl }} }}"#);
    let (_, body) = f.gql(Some(&token), &q).await;
    let list = body["data"]["cloudEvents"].as_array().unwrap();
    assert_eq!(list[0]["header"]["id"], "big", "{body}");
    assert_eq!(list[0]["data"], Value::Null);
    let url = list[0]["dataUrl"].as_str().unwrap();
    assert!(
        url.contains(&bucket) && url.contains("X-Amz-Signature"),
        "{url}"
    );
    assert!(url.contains("X-Amz-Expires=900"), "{url}");
    assert_eq!(list[1]["header"]["id"], "small");
    assert_eq!(list[1]["data"]["signals"][0]["value"], 1.0);
    assert_eq!(list[1]["dataUrl"], Value::Null);
    // The fetch dialect presigns the same blob, whatever is selected.
    let q = format!(r#"{{ cloudEvents(did: "{subject}") {{ header {{ id }} data dataUrl }} }}"#);
    let (_, fetch) = f.gql_in(dq_graphql::Dialect::Fetch, Some(&token), &q).await;
    let fetched = fetch["data"]["cloudEvents"].as_array().unwrap();
    assert_eq!(fetched[0]["data"], Value::Null, "{fetch}");
    assert!(fetched[0]["dataUrl"]
        .as_str()
        .unwrap()
        .contains("X-Amz-Signature"));
    assert_eq!(fetched[1], list[1]);
}
