//! Each RPC through a tonic client over HTTP/2, with its edge cases.

use crate::{at, big_payload, fixture, ids, options, plain, request, subject, ts};
use dq_proto::grpc::{
    AdvancedSearchOptions, CloudEventIndex, GetLatestCloudEventRequest,
    ListCloudEventsFromKeysRequest, ListCloudEventsRequest, ListIndexesRequest, ObjectInfo,
    SearchOptions, StringFilterOption,
};
use std::sync::Arc;
use std::time::Duration;
use tonic::Code;

fn subjects(list: &[String]) -> Option<StringFilterOption> {
    Some(StringFilterOption {
        r#in: list.to_vec(),
        ..Default::default()
    })
}

#[test]
fn list_indexes_limits_and_keys() {
    let f = fixture();
    let mut c = f.client(f.strict);
    let token = f.owner();
    let list = |limit: i32| {
        let mut c = c.clone();
        f.rt.block_on(c.list_indexes(request(
            ListIndexesRequest {
                options: Some(options(1)),
                limit,
                advanced_options: None,
            },
            Some(&token),
        )))
        .unwrap()
        .into_inner()
        .indexes
    };
    let three = list(3);
    let key_ids: Vec<&str> = three
        .iter()
        .map(|i| i.header.as_ref().unwrap().id.as_str())
        .collect();
    assert_eq!(key_ids, ["t2", "t1", "big"]);
    assert_eq!(
        three[0].data.as_ref().unwrap().key,
        format!("lake://{}/t2", subject(1))
    );
    assert!(three[2]
        .data
        .as_ref()
        .unwrap()
        .key
        .starts_with("cloudevent/blobs/"));
    // limit ≤ 0 → 1; > 1000 → 1000 (all nine here).
    assert_eq!(list(0).len(), 1);
    assert_eq!(list(-4).len(), 1);
    assert_eq!(list(5000).len(), 9);
    // Zero rows → NOT_FOUND.
    let err =
        f.rt.block_on(c.list_indexes(request(
            plain::list_indexes(
                SearchOptions {
                    before: Some(ts(at(-1_000_000_000))),
                    ..options(1)
                },
                10,
            ),
            Some(&token),
        )))
        .unwrap_err();
    assert_eq!(
        (err.code(), err.message()),
        (Code::NotFound, "no index keys found")
    );
}

#[test]
fn latest_index_and_event() {
    let f = fixture();
    let mut c = f.client(f.strict);
    let token = f.owner();
    // Newest first even when ascending order is asked for.
    let latest =
        f.rt.block_on(c.get_latest_index(request(
            plain::latest_index(SearchOptions {
                timestamp_asc: Some(true),
                ..options(1)
            }),
            Some(&token),
        )))
        .unwrap()
        .into_inner();
    let header = latest.index.unwrap().header.unwrap();
    assert_eq!(
        (header.id.as_str(), header.spec_version.as_str()),
        ("t2", "1.0")
    );
    assert_eq!(header.time, Some(ts(at(70))));
    // Binary inline payload → data_base64.
    let bin =
        f.rt.block_on(c.get_latest_cloud_event(request(
            plain::latest_event(SearchOptions {
                r#type: Some("dimo.raw.image".into()),
                ..options(1)
            }),
            Some(&token),
        )))
        .unwrap()
        .into_inner()
        .cloud_event
        .unwrap();
    assert!(bin.data.is_empty() && !bin.data_base64.is_empty());
    assert_eq!(bin.header.as_ref().unwrap().data_content_type, "image/png");
    // Sealed blob payload → downloaded and decrypted into data.
    let big =
        f.rt.block_on(c.get_latest_cloud_event(request(
            GetLatestCloudEventRequest {
                options: None,
                advanced_options: Some(AdvancedSearchOptions {
                    subject: subjects(&[subject(1)]),
                    id: subjects(&["big".into()]),
                    ..Default::default()
                }),
            },
            Some(&token),
        )))
        .unwrap()
        .into_inner()
        .cloud_event
        .unwrap();
    assert_eq!(big.data, big_payload().into_bytes());
    // No match → NOT_FOUND for both.
    let token9 = f.bearer(9, &[dq_auth::Permission::GetRawData]);
    let e =
        f.rt.block_on(c.get_latest_index(request(plain::latest_index(options(9)), Some(&token9))))
            .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(
        e.message().starts_with("no index key Found"),
        "{}",
        e.message()
    );
    let e = f
        .rt
        .block_on(c.get_latest_cloud_event(request(plain::latest_event(options(9)), Some(&token9))))
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
}

#[test]
fn list_cloud_events_filters() {
    let f = fixture();
    let c = f.client(f.strict);
    let token = f.owner();
    let list = |options: Option<SearchOptions>, advanced: Option<AdvancedSearchOptions>| {
        let mut c = c.clone();
        f.rt.block_on(c.list_cloud_events(request(
            ListCloudEventsRequest {
                options,
                limit: 100,
                advanced_options: advanced,
            },
            Some(&token),
        )))
        .map(|r| r.into_inner().cloud_events)
    };
    // Strict after/before, ascending.
    let window = list(
        Some(SearchOptions {
            after: Some(ts(at(0))),
            before: Some(ts(at(50))),
            timestamp_asc: Some(true),
            ..options(1)
        }),
        None,
    )
    .unwrap();
    assert_eq!(ids(&window), ["a2", "a3", "a3"]);
    assert_eq!(window[0].data, br#"{"n":2}"#);
    // Advanced options win over plain ones; the token's subject replaces a client not_in.
    let advanced = AdvancedSearchOptions {
        subject: Some(StringFilterOption {
            r#in: vec![subject(1)],
            not_in: vec![subject(1)],
            or: vec![],
        }),
        r#type: subjects(&["dimo.fingerprint".into()]),
        ..Default::default()
    };
    let got = list(Some(options(2)), Some(advanced.clone())).unwrap();
    assert_eq!(ids(&got), ["a3"]);
    assert_eq!(got[0].data, br#"{"vin":"X"}"#);
    // Voided events never appear.
    let voided = list(
        None,
        Some(AdvancedSearchOptions {
            id: subjects(&["v1".into(), "tomb-1".into()]),
            ..advanced.clone()
        }),
    )
    .unwrap_err();
    assert_eq!(
        (voided.code(), voided.message()),
        (Code::NotFound, "no cloud events found")
    );
    // `or` is served (issue 18; shared/fetch/tests/it/or_filters.rs has the semantics): an
    // empty alternative restricts nothing.
    let or = list(
        None,
        Some(AdvancedSearchOptions {
            source: Some(StringFilterOption {
                or: vec![StringFilterOption::default()],
                ..Default::default()
            }),
            ..advanced
        }),
    )
    .unwrap();
    assert_eq!(ids(&or), ["a3"]);
}

#[test]
fn cloud_events_from_index() {
    let f = fixture();
    let mut c = f.client(f.strict);
    let token = f.owner();
    let mut indexes =
        f.rt.block_on(c.list_indexes(request(plain::list_indexes(options(1), 100), Some(&token))))
            .unwrap()
            .into_inner()
            .indexes;
    indexes.reverse();
    indexes.push(indexes[0].clone());
    let from = |indexes: Vec<CloudEventIndex>| {
        let mut c = c.clone();
        f.rt.block_on(c.list_cloud_events_from_index(request(
            ListCloudEventsFromKeysRequest { indexes },
            Some(&token),
        )))
    };
    let events = from(indexes.clone()).unwrap().into_inner().cloud_events;
    assert_eq!(
        ids(&events),
        ["old", "a1", "a2", "a3", "a3", "bin", "big", "t1", "t2", "old"]
    );
    assert_eq!(events[6].data, big_payload().into_bytes());
    // Caps and key validation → INVALID_ARGUMENT.
    let many = vec![indexes[0].clone(); 1001];
    let e = from(many).unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (Code::InvalidArgument, "too many indexes: 1001 (max 1000)")
    );
    for key in ["", "cloudevent/blobs/../../etc/passwd", ".."] {
        let mut bad = indexes.clone();
        bad[1].data = Some(ObjectInfo { key: key.into() });
        let e = from(bad).unwrap_err();
        assert_eq!(
            (e.code(), e.message()),
            (Code::InvalidArgument, "invalid index key"),
            "{key:?}"
        );
    }
    // An index with no row fails the call.
    let mut missing = indexes[0].clone();
    missing.header.as_mut().unwrap().id = "nope".into();
    let e = from(vec![indexes[1].clone(), missing]).unwrap_err();
    assert_eq!(e.code(), Code::Internal);
    assert!(
        e.message().contains("cloud event not found"),
        "{}",
        e.message()
    );
    // Nothing asked, nothing returned.
    assert!(from(vec![]).unwrap().into_inner().cloud_events.is_empty());
}

#[test]
fn trusted_callers_search_unscoped_with_the_floor() {
    let f = fixture();
    let mut c = f.client(f.trusted);
    let all =
        f.rt.block_on(c.list_indexes(request(
            ListIndexesRequest {
                options: None,
                limit: 1000,
                advanced_options: None,
            },
            None,
        )))
        .unwrap()
        .into_inner()
        .indexes;
    assert_eq!(all.len(), 9, "everything but `old` (400-day floor)");
}

#[test]
fn budget_and_deadline() {
    let f = fixture();
    let budget = dq_fetch::FetchApi::new(
        Arc::clone(&f.seeded.db),
        dq_rawquery::Payloads::new(Some(Arc::clone(&f.seeded.store))).with_budget(100),
        dq_auth::GrpcAuthenticator::new(None, false).trust_unauthenticated(true),
    );
    let mut c = f.client(f.serve(budget));
    let e =
        f.rt.block_on(c.list_cloud_events(request(plain::list_events(options(1), 10), None)))
            .unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted);
    assert!(
        e.message().contains("256 MiB per-call budget"),
        "{}",
        e.message()
    );

    let slow = f.api(true).with_max_deadline(Duration::from_nanos(1));
    let mut c = f.client(f.serve(slow));
    let e =
        f.rt.block_on(c.list_indexes(request(plain::list_indexes(options(1), 10), None)))
            .unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e:?}");
}
