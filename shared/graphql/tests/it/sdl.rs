//! Acceptance 3: the served SDL equals the committed schema file, and every catalog signal
//! carries its privilege directive on both object types.

use dq_graphql::DialectExt;

#[test]
fn served_sdl_equals_committed_file() {
    for dialect in dq_graphql::Dialect::ALL {
        let served = dq_graphql::schema::export_sdl(
            &dq_graphql::schema::build(dialect, dq_graphql::DialectSettings::default()).unwrap(),
        );
        let file = format!("schema/{}.graphql", dialect.name());
        if std::env::var_os("UPDATE_SDL").is_some() {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(&file);
            std::fs::write(path, &served).unwrap();
        }
        assert!(
            served == dialect.sdl(),
            "served SDL differs from {file} (rerun with UPDATE_SDL=1 and review the diff)"
        );
    }
}

/// The root fields of a dialect's committed SDL.
fn root_fields(sdl: &str) -> Vec<&str> {
    type_block(sdl, "Query")
        .lines()
        .skip(1)
        .filter_map(|l| l.trim().split(['(', ':']).next())
        .filter(|f| !f.is_empty())
        .collect()
}

/// Each dialect's root fields, and nothing of another dialect leaks in.
#[test]
fn each_dialect_has_exactly_its_root_fields() {
    use dq_graphql::Dialect;
    let shared = [
        "signals",
        "signalsLatest",
        "availableSignals",
        "dataSummary",
        "signalsSnapshot",
        "events",
        "segments",
        "dailyActivity",
    ];
    let mut dq = shared.to_vec();
    dq.extend([
        "latestCloudEvent",
        "cloudEvents",
        "availableCloudEventTypes",
    ]);
    let mut telemetry = shared.to_vec();
    telemetry.extend(["attestations", "vinVCLatest"]);
    let fetch = vec![
        "latestIndex",
        "indexes",
        "latestCloudEvent",
        "cloudEvents",
        "availableCloudEventTypes",
    ];
    assert_eq!(root_fields(Dialect::Dq.sdl()), dq);
    assert_eq!(root_fields(Dialect::Telemetry.sdl()), telemetry);
    assert_eq!(root_fields(Dialect::Fetch.sdl()), fetch);
    let t = Dialect::Telemetry.sdl();
    assert!(t.contains("signalsLatest(tokenId: Int!, filter: SignalFilter): SignalCollection"));
    assert!(t.contains("enum DetectionMechanism {\n\tignitionDetection"));
    assert!(!t.contains("CloudEvent") && !t.contains("subject: String!"));
    let f = Dialect::Fetch.sdl();
    assert!(f.contains("latestCloudEvent(did: String!, filter: CloudEventFilter, includeDeleted: Boolean = false): CloudEvent\n"));
    assert!(!f.contains("Privilege") && !f.contains("Signal"));
    // The signal types are byte-identical between dq and telemetry.
    for ty in ["SignalAggregations", "SignalCollection", "Segment"] {
        assert_eq!(type_block(Dialect::Dq.sdl(), ty), type_block(t, ty), "{ty}");
    }
}

/// The block of `type <name> { … }` in the SDL.
fn type_block<'a>(sdl: &'a str, name: &str) -> &'a str {
    let start = sdl.find(&format!("type {name} {{")).unwrap();
    let end = sdl[start..].find("\n}").unwrap();
    &sdl[start..start + end]
}

#[test]
fn every_signal_carries_its_privilege_directive() {
    let sdl = dq_graphql::Dialect::Dq.sdl();
    assert_eq!(dq_signals::SIGNALS.len(), 116);
    for ty in ["SignalAggregations", "SignalCollection"] {
        let block = type_block(sdl, ty);
        for def in dq_signals::SIGNALS.iter() {
            let privileges: Vec<&str> = def.privileges.iter().map(|p| p.as_str()).collect();
            let directive = format!(
                "@requiresAllOfPrivileges(privileges: [{}])",
                privileges.join(", ")
            );
            let line = block
                .lines()
                .find(|l| l.trim_start().starts_with(def.name) && l.contains(':'))
                .filter(|l| {
                    let rest = &l.trim_start()[def.name.len()..];
                    rest.starts_with('(') || rest.starts_with(':')
                })
                .unwrap_or_else(|| panic!("{ty}.{} missing", def.name));
            assert!(line.contains(&directive), "{ty}.{}: {line}", def.name);
        }
        assert!(block.contains("currentLocationApproximateCoordinates"));
    }
    assert!(sdl.contains(
        "@requiresOneOfPrivilege(privileges: [VEHICLE_APPROXIMATE_LOCATION, VEHICLE_ALL_TIME_LOCATION])"
    ));
}
