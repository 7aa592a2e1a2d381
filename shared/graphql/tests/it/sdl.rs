//! Acceptance 3: the served SDL equals the committed schema file, and every catalog signal
//! carries its privilege directive on both object types.

#[test]
fn served_sdl_equals_committed_file() {
    let served = graphql::schema::build().unwrap().sdl();
    if std::env::var_os("UPDATE_SDL").is_some() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schema/dq.graphql");
        std::fs::write(path, &served).unwrap();
    }
    assert!(
        served == graphql::SDL,
        "served SDL differs from schema/dq.graphql (rerun with UPDATE_SDL=1 and review the diff)"
    );
}

/// The block of `type <name> { … }` in the SDL.
fn type_block<'a>(sdl: &'a str, name: &str) -> &'a str {
    let start = sdl.find(&format!("type {name} {{")).unwrap();
    let end = sdl[start..].find("\n}").unwrap();
    &sdl[start..start + end]
}

#[test]
fn every_signal_carries_its_privilege_directive() {
    let sdl = graphql::SDL;
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
