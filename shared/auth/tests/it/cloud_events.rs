//! Cloud-event authorization (dq and fetch GraphQL dialects): raw-data rule, own asset,
//! identity-linked devices with DID normalization.

use crate::{device, principal, vehicle, Links, DEVICE_CONTRACT};
use dq_auth::{authorize_cloud_events, AuthError, Permission, Principal, SubjectDenial, Surface};

fn raw() -> Principal {
    principal(&vehicle(42), &[Permission::GetRawData])
}

fn linked() -> Links {
    let mut links = Links::default();
    links.pairs.insert(device(7), vehicle(42));
    links.pairs.insert(device(8), vehicle(99));
    links
}

#[tokio::test]
async fn no_claims_and_missing_raw_data() {
    let e = authorize_cloud_events(None, &vehicle(42), None)
        .await
        .unwrap_err();
    for s in [Surface::Dq, Surface::Fetch] {
        assert_eq!(e.message(s), "unauthorized: no token claims");
    }
    for perms in [
        &[Permission::GetLocationHistory][..],
        &[Permission::GetNonLocationHistory],
        &[
            Permission::GetCurrentLocation,
            Permission::GetApproximateLocation,
        ],
    ] {
        let p = principal(&vehicle(42), perms);
        let e = authorize_cloud_events(Some(&p), &vehicle(42), None)
            .await
            .unwrap_err();
        assert_eq!(
            e.message(Surface::Fetch),
            "unauthorized: token does not have required permission for this operation"
        );
    }
    let both = principal(
        &vehicle(42),
        &[
            Permission::GetLocationHistory,
            Permission::GetNonLocationHistory,
        ],
    );
    assert!(authorize_cloud_events(Some(&both), &vehicle(42), None)
        .await
        .is_ok());
}

#[tokio::test]
async fn own_asset_is_searched_verbatim_any_method() {
    let a = authorize_cloud_events(Some(&raw()), &vehicle(42), None)
        .await
        .unwrap();
    assert_eq!(
        (a.requested.as_str(), a.search.as_str()),
        (vehicle(42).as_str(), vehicle(42).as_str())
    );
    // Any string equal to the asset is accepted as is (and simply matches nothing if odd).
    let odd = principal("did:ethr:137:not-hex", &[Permission::GetRawData]);
    let a = authorize_cloud_events(Some(&odd), "did:ethr:137:not-hex", None)
        .await
        .unwrap();
    assert_eq!(a.search, "did:ethr:137:not-hex");
}

#[tokio::test]
async fn linked_device_is_normalized_then_searched() {
    let links = linked();
    let messy = format!("did:erc721:137:{}:007", DEVICE_CONTRACT.to_lowercase());
    let a = authorize_cloud_events(Some(&raw()), &messy, Some(&links))
        .await
        .unwrap();
    assert_eq!(a.requested, messy);
    assert_eq!(a.search, device(7), "EIP-55 contract, canonical token id");
}

#[tokio::test]
async fn every_other_subject_is_denied_with_one_text() {
    let links = linked();
    let failing = Links {
        fail: true,
        ..Links::default()
    };
    let cases: Vec<(String, Option<&Links>, SubjectDenial)> = vec![
        (vehicle(43), Some(&links), SubjectDenial::NotLinked),
        (device(8), Some(&links), SubjectDenial::NotLinked),
        (device(9), Some(&links), SubjectDenial::NotLinked),
        (device(7), None, SubjectDenial::NoIdentityClient),
        (
            "did:ethr:137:0x9c94C395cBcBDe662235E0A9d3bB87Ad708561BA".into(),
            Some(&links),
            SubjectDenial::NotErc721,
        ),
        (
            format!("did:nft:137:{DEVICE_CONTRACT}_7"),
            Some(&links),
            SubjectDenial::NotErc721,
        ),
        (String::new(), Some(&links), SubjectDenial::NotErc721),
        (
            device(7),
            Some(&failing),
            SubjectDenial::LookupFailed("identity-api returned 502".into()),
        ),
    ];
    for (subject, links, reason) in cases {
        let e = authorize_cloud_events(Some(&raw()), &subject, links.map(|l| l as _))
            .await
            .unwrap_err();
        assert_eq!(
            e,
            AuthError::SubjectDenied {
                subject: subject.clone(),
                reason
            }
        );
        assert_eq!(
            e.message(Surface::Fetch),
            "unauthorized: token does not have access to this subject"
        );
        assert_eq!(e.graphql_extension_code(Surface::Fetch), None);
    }
    // A token without an asset cannot borrow a device link to "nothing".
    let no_asset = principal("", &[Permission::GetRawData]);
    let mut unpaired = Links::default();
    unpaired.pairs.insert(device(1), String::new());
    assert!(
        authorize_cloud_events(Some(&no_asset), &device(1), Some(&unpaired))
            .await
            .is_err()
    );
}

/// telemetry `attestations` grant matching.
#[test]
fn attestation_grants() {
    use crate::{signer, validator};
    use dq_auth::dev::DevClaims;
    use dq_auth::{authorize_attestations, AttestationRequest};
    use serde_json::json;

    const SRC: &str = "0x9c94C395cBcBDe662235E0A9d3bB87Ad708561BA";
    let with = |ce: Option<serde_json::Value>| {
        let mut c = DevClaims::vehicle(vehicle(42), &[]);
        c.cloud_events = ce;
        validator()
            .validate_sync(&signer().mint(&c).unwrap(), &signer().key_set().unwrap())
            .unwrap()
    };
    let req = |subject: &str, source: Option<&'static str>, id: Option<&'static str>| {
        (subject.to_string(), source, id)
    };
    let wildcard = with(Some(
        json!({"events": [{"event_type": "*", "source": "*", "ids": ["*"]}]}),
    ));
    let narrow = with(Some(json!({"events": [
        {"event_type": "dimo.attestation", "source": SRC, "ids": ["a1"], "tags": ["x"]},
        {"event_type": "dimo.status", "source": "*", "ids": ["*"]}
    ]})));
    let empty = with(Some(json!({"events": null})));
    let absent = with(None);
    let cases = [
        (&wildcard, req(&vehicle(42), None, None), true),
        (&wildcard, req(&vehicle(42), Some(SRC), Some("zz")), true),
        (&wildcard, req(&vehicle(43), None, None), false),
        (&narrow, req(&vehicle(42), Some(SRC), Some("a1")), true),
        (&narrow, req(&vehicle(42), None, Some("a1")), false),
        (&narrow, req(&vehicle(42), Some(SRC), None), false),
        (&narrow, req(&vehicle(42), Some(SRC), Some("a2")), false),
        (&empty, req(&vehicle(42), None, None), false),
        (&absent, req(&vehicle(42), None, None), false),
    ];
    for (p, (subject, source, id), ok) in cases {
        let r = authorize_attestations(
            Some(p),
            &AttestationRequest {
                subject: &subject,
                source,
                id,
            },
        );
        assert_eq!(r.is_ok(), ok, "{subject} {source:?} {id:?}");
        if let Err(e) = r {
            assert_eq!(e.message(Surface::Telemetry), "invalid claims");
        }
    }
    assert!(authorize_attestations(
        None,
        &AttestationRequest {
            subject: "x",
            source: None,
            id: None
        }
    )
    .is_err());
}
