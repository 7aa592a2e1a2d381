//! Per-signal privilege filtering for availableSignals / dataSummary / signalsSnapshot.

use crate::{principal, vehicle};
use dq_auth::authz::APPROXIMATE_LOCATION_SIGNAL;
use dq_auth::{filter_signals, may_read_signal, Permission};

const LOCATION: [&str; 3] = [
    "currentLocationCoordinates",
    "currentLocationAltitude",
    "currentLocationHeading",
];

#[test]
fn privilege_matrix() {
    let cases: [(&[Permission], [bool; 6]); 5] = [
        // coordinates, altitude, heading, approximate, speed, unknown
        (&[], [false, false, false, false, false, false]),
        (
            &[Permission::GetNonLocationHistory],
            [false, false, false, false, true, false],
        ),
        (
            &[Permission::GetLocationHistory],
            [true, true, true, true, false, false],
        ),
        (
            &[Permission::GetApproximateLocation],
            [false, false, false, true, false, false],
        ),
        (
            &[
                Permission::GetCurrentLocation,
                Permission::GetRawData,
                Permission::ExecuteCommands,
            ],
            [false, false, false, false, false, false],
        ),
    ];
    for (perms, expected) in cases {
        let p = principal(&vehicle(7), perms);
        let names = [
            LOCATION[0],
            LOCATION[1],
            LOCATION[2],
            APPROXIMATE_LOCATION_SIGNAL,
            "speed",
            "notASignal",
        ];
        let got: Vec<bool> = names.iter().map(|n| may_read_signal(&p, n)).collect();
        assert_eq!(got, expected, "{perms:?}");
    }
}

#[test]
fn every_catalog_signal_is_either_location_or_non_location() {
    let non_loc = principal(&vehicle(7), &[Permission::GetNonLocationHistory]);
    let loc = principal(&vehicle(7), &[Permission::GetLocationHistory]);
    for s in dq_signals::SIGNALS.iter() {
        let is_location = LOCATION.contains(&s.name);
        assert_eq!(may_read_signal(&loc, s.name), is_location, "{}", s.name);
        assert_eq!(
            may_read_signal(&non_loc, s.name),
            !is_location,
            "{}",
            s.name
        );
    }
}

#[test]
fn filter_keeps_order_and_drops_what_is_hidden() {
    let p = principal(&vehicle(7), &[Permission::GetNonLocationHistory]);
    let rows = vec![
        ("speed", 3),
        ("currentLocationCoordinates", 9),
        ("powertrainType", 1),
        ("bogus", 4),
        (APPROXIMATE_LOCATION_SIGNAL, 2),
    ];
    let kept = filter_signals(&p, rows, |r| r.0);
    assert_eq!(kept, [("speed", 3), ("powertrainType", 1)]);
    assert!(filter_signals(&p, Vec::<&str>::new(), |r| r).is_empty());
}
