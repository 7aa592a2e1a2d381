//! GraphQL directives (dq) and the telemetry vehicle gate, with exact texts.

use crate::{principal, vehicle, VEHICLE_CONTRACT};
use dq_auth::dev::{DevClaims, DevSigner};
use dq_auth::{
    require_all_of, require_one_of, require_signal, require_vehicle_token,
    require_vehicle_token_id, validate_telemetry_asset, AuthError, Permission, Privilege, Surface,
    TokenRejection,
};

fn contract() -> [u8; 20] {
    dq_cloudevent::did::parse_address(VEHICLE_CONTRACT).unwrap()
}

#[test]
fn dq_vehicle_gate_is_an_exact_string_compare() {
    let p = principal(&vehicle(42), &[]);
    assert_eq!(require_vehicle_token(Some(&p), &vehicle(42)), Ok(()));
    let e = require_vehicle_token(None, &vehicle(42)).unwrap_err();
    assert_eq!(e.message(Surface::Dq), "unauthorized: jwt missing");
    for other in [
        vehicle(43),
        vehicle(42).to_lowercase(),
        format!("did:erc721:137:{VEHICLE_CONTRACT}:042"),
        String::new(),
    ] {
        let e = require_vehicle_token(Some(&p), &other).unwrap_err();
        assert_eq!(
            e.message(Surface::Dq),
            "unauthorized: DID in query does not match token claim"
        );
        assert_eq!(e.graphql_extension_code(Surface::Dq), None);
    }
}

#[test]
fn telemetry_vehicle_gate_decodes_the_asset() {
    let c = contract();
    // Lower-case contract and leading zeros in the asset are tolerated; chain is ignored.
    for asset in [
        vehicle(39718),
        format!(
            "did:erc721:80002:{}:039718",
            VEHICLE_CONTRACT.to_lowercase()
        ),
    ] {
        let p = principal(&asset, &[]);
        assert_eq!(require_vehicle_token_id(Some(&p), 39718, &c), Ok(()));
        let e = require_vehicle_token_id(Some(&p), 999999, &c).unwrap_err();
        assert_eq!(
            e.message(Surface::Telemetry),
            "unauthorized: unauthorized: token id does not match"
        );
        assert!(require_vehicle_token_id(Some(&p), -39718, &c).is_err());
    }
    let e = require_vehicle_token_id(None, 1, &c).unwrap_err();
    assert_eq!(e.message(Surface::Telemetry), "unauthorized: jwt missing");

    let other = "0x9c94C395cBcBDe662235E0A9d3bB87Ad708561BA";
    let p = principal(&format!("did:erc721:137:{}:1", other.to_lowercase()), &[]);
    let e = require_vehicle_token_id(Some(&p), 1, &c).unwrap_err();
    assert_eq!(
        e.message(Surface::Telemetry),
        format!("unauthorized: unauthorized: contract in claim is {other} instead of the required {VEHICLE_CONTRACT}")
    );
    // Account tokens land on the contract check.
    let p = principal(&format!("did:ethr:137:{other}"), &[]);
    assert!(matches!(
        require_vehicle_token_id(Some(&p), 1, &c),
        Err(AuthError::VehicleContractMismatch { .. })
    ));
}

#[test]
fn telemetry_rejects_tokens_whose_asset_is_no_erc721_or_ethr_did() {
    for ok in [
        vehicle(1),
        "did:ethr:137:0x9c94C395cBcBDe662235E0A9d3bB87Ad708561BA".into(),
    ] {
        assert_eq!(validate_telemetry_asset(&principal(&ok, &[])), Ok(()));
    }
    let signer = DevSigner::generate(crate::ISSUER).unwrap();
    let keys = signer.key_set().unwrap();
    for bad in [
        Some("did:nft:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF_1".to_string()),
        Some("garbage".into()),
        Some(String::new()),
        None,
    ] {
        let mut c = DevClaims::vehicle("x", &[]);
        c.asset = bad.clone();
        let p = signer
            .validator()
            .unwrap()
            .validate_sync(&signer.mint(&c).unwrap(), &keys)
            .unwrap();
        let e = validate_telemetry_asset(&p).unwrap_err();
        assert_eq!(e, AuthError::InvalidToken(TokenRejection::Asset), "{bad:?}");
        assert_eq!(e.code().http_status(), 401);
        assert_eq!(e.message(Surface::Http), "JWT is invalid.");
    }
}

#[test]
fn privilege_directives_texts_per_dialect() {
    let p = principal(&vehicle(1), &[Permission::GetNonLocationHistory]);
    assert_eq!(
        require_all_of(Some(&p), &[Privilege::VehicleNonLocationData]),
        Ok(())
    );
    let e = require_all_of(
        Some(&p),
        &[
            Privilege::VehicleNonLocationData,
            Privilege::VehicleAllTimeLocation,
            Privilege::VehicleRawData,
        ],
    )
    .unwrap_err();
    assert_eq!(
        e.message(Surface::Dq),
        "unauthorized: missing required privilege privilege:GetLocationHistory"
    );
    assert_eq!(
        e.message(Surface::Telemetry),
        "unauthorized: missing required privilege(s) privilege:GetLocationHistory"
    );
    let e = require_one_of(
        Some(&p),
        &[
            Privilege::VehicleApproximateLocation,
            Privilege::VehicleAllTimeLocation,
        ],
    )
    .unwrap_err();
    let text = "unauthorized: requires at least one of the following privileges [privilege:GetApproximateLocation privilege:GetLocationHistory]";
    assert_eq!(e.message(Surface::Dq), text);
    assert_eq!(e.message(Surface::Telemetry), text);
    assert_eq!(
        require_one_of(
            Some(&p),
            &[
                Privilege::VehicleCommands,
                Privilege::VehicleNonLocationData
            ]
        ),
        Ok(())
    );
    for e in [
        require_all_of(None, &[]).unwrap_err(),
        require_one_of(None, &[Privilege::VehicleRawData]).unwrap_err(),
    ] {
        assert_eq!(e.message(Surface::Dq), "unauthorized: jwt missing");
    }
}

#[test]
fn every_catalog_signal_field_carries_its_directive() {
    let none = principal(&vehicle(1), &[]);
    let non_loc = principal(&vehicle(1), &[Permission::GetNonLocationHistory]);
    let loc = principal(&vehicle(1), &[Permission::GetLocationHistory]);
    for s in dq_signals::SIGNALS.iter() {
        assert!(require_signal(Some(&none), s.name).is_err(), "{}", s.name);
        let location = s
            .privileges
            .contains(&dq_signals::Privilege::VehicleAllTimeLocation);
        assert_eq!(
            require_signal(Some(&non_loc), s.name).is_ok(),
            !location,
            "{}",
            s.name
        );
        assert_eq!(
            require_signal(Some(&loc), s.name).is_ok(),
            location,
            "{}",
            s.name
        );
    }
    let e = require_signal(Some(&none), "speed").unwrap_err();
    assert_eq!(
        e.message(Surface::Dq),
        "unauthorized: missing required privilege privilege:GetNonLocationHistory"
    );
    let e =
        require_signal(Some(&non_loc), dq_auth::authz::APPROXIMATE_LOCATION_SIGNAL).unwrap_err();
    assert!(matches!(e, AuthError::MissingAnyPrivilege { .. }));
    let approx = principal(&vehicle(1), &[Permission::GetApproximateLocation]);
    assert_eq!(
        require_signal(Some(&approx), dq_auth::authz::APPROXIMATE_LOCATION_SIGNAL),
        Ok(())
    );
    assert_eq!(
        require_signal(Some(&loc), dq_auth::authz::APPROXIMATE_LOCATION_SIGNAL),
        Ok(())
    );
    // Non-signal fields have no directive.
    assert_eq!(require_signal(None, "lastSeen"), Ok(()));
}
