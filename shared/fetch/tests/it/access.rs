//! FetchService authorization over the wire: nobody unauthenticated is served, and a token reads
//! only its subject.

use crate::{fixture, options, plain, request, subject, Fixture};
use dq_auth::Permission;
use dq_proto::grpc::{
    AdvancedSearchOptions, CloudEventIndex, ListIndexesRequest, ObjectInfo, SearchOptions,
};
use tonic::Code;

/// Calls every RPC for `search` (and an index of `search`'s subject) with `authorization`;
/// returns each outcome as `(code, message)`.
fn every_rpc(
    f: &Fixture,
    search: SearchOptions,
    authorization: Option<&str>,
) -> Vec<(Code, String)> {
    let c = f.client(f.strict);
    let index = CloudEventIndex {
        header: Some(dq_proto::cloudevent::CloudEventHeader {
            subject: search.subject.clone().unwrap_or_default(),
            id: "a1".into(),
            ..Default::default()
        }),
        data: Some(ObjectInfo {
            key: format!("lake://{}/a1", subject(1)),
        }),
    };
    f.every_rpc(&c, &search, 5, vec![index], authorization)
        .into_iter()
        .map(|r| match r {
            Ok(()) => (Code::Ok, String::new()),
            Err(s) => (s.code(), s.message().to_string()),
        })
        .collect()
}

fn all(code: Code, message: &str) -> Vec<(Code, String)> {
    vec![(code, message.to_string()); 5]
}

#[test]
fn owner_is_served() {
    let f = fixture();
    assert_eq!(
        every_rpc(f, options(1), Some(&f.owner())),
        all(Code::Ok, "")
    );
    // The history pair is raw-data access too.
    let pair = f.bearer(
        1,
        &[
            Permission::GetLocationHistory,
            Permission::GetNonLocationHistory,
        ],
    );
    assert_eq!(every_rpc(f, options(1), Some(&pair)), all(Code::Ok, ""));
}

#[test]
fn unauthenticated_and_expired_are_refused() {
    let f = fixture();
    assert_eq!(
        every_rpc(f, options(1), None),
        all(Code::Unauthenticated, "no token claims")
    );
    assert_eq!(
        every_rpc(f, options(1), Some(&f.expired())),
        all(Code::Unauthenticated, "invalid token")
    );
    assert_eq!(
        every_rpc(f, options(1), Some("Bearer not.a.jwt")),
        all(Code::Unauthenticated, "invalid token")
    );
}

#[test]
fn wrong_subject_and_missing_permission_are_refused() {
    let f = fixture();
    let other = f.bearer(2, &[Permission::GetRawData]);
    assert_eq!(
        every_rpc(f, options(1), Some(&other)),
        all(Code::PermissionDenied, "no access to subject")
    );
    let no_raw = f.bearer(1, &[Permission::GetLocationHistory]);
    assert_eq!(
        every_rpc(f, options(1), Some(&no_raw)),
        all(Code::PermissionDenied, "token lacks raw-data permission")
    );
    // No subject at all: every search RPC needs one.
    let got = every_rpc(f, SearchOptions::default(), Some(&f.owner()));
    assert_eq!(
        got[..4].to_vec(),
        vec![(Code::PermissionDenied, "subject is required".to_string()); 4]
    );
    // Advanced options: one foreign subject among own ones refuses the call.
    let mut c = f.client(f.strict);
    let e =
        f.rt.block_on(c.list_indexes(crate::request(
            ListIndexesRequest {
                options: None,
                limit: 5,
                advanced_options: Some(AdvancedSearchOptions {
                    subject: Some(dq_proto::grpc::StringFilterOption {
                        r#in: vec![subject(1), subject(2)],
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
            },
            Some(&f.owner()),
        )))
        .unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (Code::PermissionDenied, "no access to subject")
    );
}

use dq_dinsim::testing::PRODUCER as DEVICE;

/// identity-api stand-in: devices 5 and 7 are paired to vehicle 1 (7 answers after a second),
/// device 6 to vehicle 2.
struct Links;

impl dq_auth::DeviceLinks for Links {
    fn paired_vehicle<'a>(&'a self, device_did: &'a str) -> dq_auth::LinkFuture<'a> {
        Box::pin(async move {
            let token = device_did.rsplit(':').next().unwrap_or_default();
            if token == "7" {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
            Ok(match token {
                "5" | "7" => Some(subject(1)),
                "6" => Some(subject(2)),
                _ => None,
            })
        })
    }
}

/// ListIndexes (five at most) for any `subject` string.
fn list_request(subject: &str) -> ListIndexesRequest {
    let search = SearchOptions {
        subject: Some(subject.into()),
        ..Default::default()
    };
    plain::list_indexes(search, 5)
}

fn list_indexes(
    f: &Fixture,
    c: &mut dq_proto::grpc::fetch_service_client::FetchServiceClient<tonic::transport::Channel>,
    subject: &str,
) -> Result<usize, tonic::Status> {
    f.rt.block_on(c.list_indexes(request(list_request(subject), Some(&f.owner()))))
        .map(|r| r.into_inner().indexes.len())
}

#[test]
fn linked_devices_and_the_in_flight_limit() {
    let f = fixture();
    let api = f
        .api(false)
        .with_device_links(std::sync::Arc::new(Links))
        .with_concurrency_limit(1);
    let addr = f.serve(api);
    let mut c = f.client(addr);
    // A device paired to the token's vehicle is readable (it has no events: NOT_FOUND, not
    // PERMISSION_DENIED); one paired elsewhere, or a non-DID, is not.
    let e = list_indexes(f, &mut c, &format!("{DEVICE}:5")).unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e:?}");
    for other in [format!("{DEVICE}:6"), "not-a-did".to_string()] {
        let e = list_indexes(f, &mut c, &other).unwrap_err();
        assert_eq!(
            (e.code(), e.message()),
            (Code::PermissionDenied, "no access to subject")
        );
    }
    // While one call holds the only slot (its identity lookup takes a second), another is
    // refused after a short wait; once it is done, calls are admitted again.
    let slow = {
        let mut c = c.clone();
        let token = f.owner();
        f.rt.spawn(async move {
            c.list_indexes(request(list_request(&format!("{DEVICE}:7")), Some(&token)))
                .await
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    let e = list_indexes(f, &mut c, &subject(1)).unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (
            Code::ResourceExhausted,
            "server is at its concurrent-request limit; retry shortly"
        )
    );
    let first = f.rt.block_on(slow).unwrap().unwrap_err();
    assert_eq!(first.code(), Code::NotFound);
    assert_eq!(list_indexes(f, &mut c, &subject(1)).unwrap(), 5);
}
