use super::*;

const SUBJECT: &str = "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:33";

fn event(ds: &str, data: &str) -> RawEvent {
    let mut ev = RawEvent::default();
    ev.header.event_type = types::STATUS.into();
    ev.header.data_version = ds.into();
    ev.header.subject = SUBJECT.into();
    ev.header.time = parse_rfc3339("2024-09-27T08:33:26Z").unwrap();
    ev.data = Some(data.to_string());
    ev
}

fn status_signals(signals: &str) -> Decoded<Signal> {
    convert_signals(&event(
        DS_STATUS,
        &format!(r#"{{"signals":{{{signals}}}}}"#),
    ))
}

fn value_of(d: &Decoded<Signal>, name: &str) -> Option<SignalValue> {
    d.items
        .iter()
        .find(|s| s.name == name)
        .map(|s| s.value.clone())
}

#[test]
fn priority_and_first_duplicate_wins() {
    let d = status_signals(r#""645":"8","645":"FFFFFFFF","114":"10""#);
    assert_eq!(
        value_of(&d, n::POWERTRAIN_TRANSMISSION_TRAVELLED_DISTANCE),
        Some(SignalValue::Number(8.0))
    );
    let d = status_signals(r#""645":"FFFFFFFF","114":"10""#);
    assert_eq!(
        value_of(&d, n::POWERTRAIN_TRANSMISSION_TRAVELLED_DISTANCE),
        Some(SignalValue::Number(0.08))
    );
}

#[test]
fn ignition_off_turns_on_ignore_zero() {
    let d = status_signals(r#""95":"0""#);
    assert_eq!(value_of(&d, n::SPEED), Some(SignalValue::Number(0.0)));
    let d = status_signals(r#""95":"0","409":"0""#);
    assert_eq!(value_of(&d, n::SPEED), None);
    assert_eq!(
        value_of(&d, n::IS_IGNITION_ON),
        Some(SignalValue::Number(0.0))
    );
}

#[test]
fn helper_rules() {
    let d = status_signals(
        r#""347":"2","313":"4","518":"FE","29":"3A98","985":"0","38":"5","405":"1""#,
    );
    assert_eq!(
        value_of(&d, n::BODY_LIGHTS_IS_AIRBAG_WARNING_ON),
        Some(SignalValue::Number(1.0))
    );
    assert_eq!(
        value_of(&d, n::CHASSIS_BRAKE_ABS_IS_WARNING_ON),
        None,
        "CAN status 4 is not found"
    );
    assert_eq!(
        value_of(&d, n::BODY_TRUNK_FRONT_IS_OPEN),
        Some(SignalValue::Number(1.0))
    );
    assert_eq!(
        value_of(&d, n::CABIN_DOOR_ROW1_DRIVER_SIDE_IS_OPEN),
        Some(SignalValue::Number(0.0))
    );
    assert_eq!(
        value_of(&d, n::LOW_VOLTAGE_BATTERY_CURRENT_VOLTAGE),
        Some(SignalValue::Number(15.0))
    );
    assert_eq!(
        value_of(&d, n::OBD_IS_PLUGGED_IN),
        Some(SignalValue::Number(1.0))
    );
    assert_eq!(
        value_of(&d, n::OBD_IS_PTO_ACTIVE),
        Some(SignalValue::Number(1.0))
    );
    assert_eq!(
        value_of(&d, n::OBD_IS_ENGINE_BLOCKED),
        Some(SignalValue::Number(0.0))
    );
    let unplugged = status_signals(r#""29":"3A98","985":"1""#);
    assert_eq!(
        value_of(&unplugged, n::LOW_VOLTAGE_BATTERY_CURRENT_VOLTAGE),
        None
    );
}

#[test]
fn enums() {
    let d = status_signals(r#""99":"A","359":"F","964":"4B""#);
    assert_eq!(
        value_of(&d, n::OBD_FUEL_TYPE_NAME),
        Some(SignalValue::String("BIFUEL RUNNING METHANOL".into()))
    );
    assert_eq!(
        value_of(&d, n::POWERTRAIN_TYPE),
        Some(SignalValue::String("COMBUSTION".into()))
    );
    assert_eq!(
        value_of(&d, n::POWERTRAIN_TRANSMISSION_RETARDER_TORQUE_MODE),
        Some(SignalValue::String("NOT AVAILABLE".into()))
    );
    assert_eq!(
        value_of(&d, n::POWERTRAIN_COMBUSTION_ENGINE_ENGINE_OIL_LEVEL),
        Some(SignalValue::String("HIGH".into()))
    );
    let d = status_signals(r#""99":"12""#);
    assert_eq!(
        value_of(&d, n::POWERTRAIN_TYPE),
        Some(SignalValue::String("HYBRID".into()))
    );
    assert_eq!(
        value_of(&status_signals(r#""99":"0""#), n::OBD_FUEL_TYPE_NAME),
        None
    );
}

#[test]
fn errors_are_silenced_by_a_not_found_source() {
    // 97 fails to parse but 89 is the sentinel: model-garage reports nothing.
    let d = status_signals(r#""97":"zz","89":"FFFF""#);
    assert!(d.errors.is_empty());
    assert_eq!(value_of(&d, n::EXTERIOR_AIR_TEMPERATURE), None);
    let d = status_signals(r#""97":"zz""#);
    assert_eq!(d.errors.len(), 1);
    assert_eq!(d.errors[0].reason(), "invalid_value");
    let d = status_signals(r#""97":40"#);
    assert_eq!(d.errors[0].reason(), "type_mismatch");
}

#[test]
fn pos_and_coordinates() {
    let d = convert_signals(&event(
        DS_STATUS,
        r#"{"pos":{"alt":32768,"dir":36001,"hdop":255,"lat":522721466,"lon":-9014316,"spd":12}}"#,
    ));
    assert_eq!(value_of(&d, n::CURRENT_LOCATION_ALTITUDE), None);
    assert_eq!(value_of(&d, n::CURRENT_LOCATION_HEADING), None);
    assert_eq!(value_of(&d, n::SPEED), Some(SignalValue::Number(12.0)));
    let loc = d
        .items
        .iter()
        .find(|s| s.name == n::CURRENT_LOCATION_COORDINATES)
        .unwrap();
    assert_eq!(loc.timestamp, event(DS_STATUS, "").header.time);
    assert_eq!(
        loc.value,
        Signal::location(loc.timestamp, 52.2721466, -0.9014316, 0.0).value
    );
    let d = convert_signals(&event(DS_STATUS, r#"{"pos":{"lat":-2147483648,"lon":1}}"#));
    assert!(d.items.is_empty() && d.errors.is_empty());
    let d = convert_signals(&event(DS_STATUS, r#"{"pos":{"lat":"1","lon":1}}"#));
    assert_eq!(d.errors[0].reason(), "type_mismatch");
}

#[test]
fn gates_and_dispatch() {
    assert_eq!(convert_signals(&event(DS_DEVICE, "{}")), Decoded::default());
    assert_eq!(
        convert_signals(&event(DS_BATTERY, "{}")),
        Decoded::default()
    );
    let mut not_status = event(DS_STATUS, r#"{"signals":{"95":"10"}}"#);
    not_status.header.event_type = types::EVENTS.into();
    assert_eq!(convert_signals(&not_status), Decoded::default());
    assert_eq!(
        convert_signals(&event(DS_COMMAND, "{}")).errors[0].reason(),
        "unsupported_data_version"
    );
    assert_eq!(
        convert_signals(&event("", "{}")).errors[0].reason(),
        "unsupported_data_version"
    );
}

#[test]
fn location_payload() {
    let d = convert_signals(&event(
        DS_LOCATION,
        r#"{"location":[
            {"ts":1727426006,"lat":522721466,"lon":-9014316,"alt":1048,"dir":7370,"spd":"1F","hdop":6},
            {"ts":"2024-09-27T08:33:30Z","alt":32768,"spd":65535},
            {"lat":1,"lon":1},
            7
        ]}"#,
    ));
    let first_ts = unix_secs(1_727_426_006).unwrap();
    let at = |ts| {
        d.items
            .iter()
            .filter(move |s| s.timestamp == ts)
            .map(|s| (s.name, s.value.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        at(first_ts),
        [
            (n::CURRENT_LOCATION_ALTITUDE, SignalValue::Number(104.8)),
            (n::CURRENT_LOCATION_HEADING, SignalValue::Number(73.7)),
            (n::SPEED, SignalValue::Number(31.0)),
            (
                n::CURRENT_LOCATION_COORDINATES,
                Signal::location(first_ts, 52.2721466, -0.9014316, 0.6).value
            ),
        ]
    );
    let reasons: Vec<_> = d.errors.iter().map(DecodeError::reason).collect();
    assert_eq!(
        reasons,
        [
            "not_available",
            "not_available",
            "missing_field",
            "bad_structure"
        ]
    );
    let mut bad_subject = event(DS_LOCATION, r#"{"location":[]}"#);
    bad_subject.header.subject = "did:nft:1:0x0_1".into();
    assert_eq!(
        convert_signals(&bad_subject).errors[0].reason(),
        "invalid_value"
    );
    assert_eq!(
        convert_signals(&event(DS_LOCATION, r#"{"location":null}"#)),
        Decoded::default()
    );
    assert_eq!(
        convert_signals(&event(DS_LOCATION, "{}")).errors[0].reason(),
        "missing_field"
    );
}

#[test]
fn dtc_payload_and_empty_quirk() {
    let d = convert_signals(&event(
        DS_DTC,
        r#"{"dtc_codes":[{"code":"P0101"},{"id":"7E8"},{"code":"P<2>"}]}"#,
    ));
    assert_eq!(
        d.items[0].value,
        SignalValue::String(r#"["P0101","P\u003c2\u003e"]"#.into())
    );
    assert!(d.errors.is_empty());
    for empty in [r#"{"dtc_codes":[]}"#, "{}", r#"{"dtc_codes":[1]}"#] {
        let d = convert_signals(&event(DS_DTC, empty));
        assert_eq!(
            d.items,
            [Signal::string(
                n::OBD_DTC_LIST,
                event(DS_DTC, "").header.time,
                ""
            )],
            "{empty}"
        );
        assert_eq!(d.errors.len(), 1);
    }
}

fn events(ds: &str, signals: &str) -> Decoded<Event> {
    convert_events(&event(ds, &format!(r#"{{"signals":{{{signals}}}}}"#)))
}

#[test]
fn behaviour_events() {
    let d = events("", r#""135":"35","136":"A","143":"7","405":"1""#);
    let got: Vec<_> = d
        .items
        .iter()
        .map(|e| (e.name, e.metadata.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (ev::BEHAVIOR_HARSH_BRAKING, r#"{"counterValue":5}"#),
            (ev::BEHAVIOR_EXTREME_BRAKING, r#"{"counterValue":3}"#),
            (ev::BEHAVIOR_HARSH_ACCELERATION, r#"{"counterValue":10}"#),
            (ev::BEHAVIOR_HARSH_CORNERING, r#"{"counterValue":7}"#),
        ]
    );
    assert!(events("", r#""135":"0","136":"00","143":"""#)
        .items
        .is_empty());
    let d = events("", r#""135":"100","136":"zz","143":"1""#);
    assert_eq!(d.items.len(), 1);
    assert_eq!(d.errors.len(), 2);
}

#[test]
fn engine_block_only_for_commands() {
    let block = events(DS_COMMAND, r#""405":"1""#);
    assert_eq!(block.items[0].name, ev::SECURITY_ENGINE_BLOCK);
    assert_eq!(block.items[0].metadata, "");
    assert_eq!(
        events(DS_COMMAND, r#""405":"0""#).items[0].name,
        ev::SECURITY_ENGINE_UNBLOCK
    );
}

#[test]
fn events_struct_decode_is_strict_and_last_wins() {
    assert_eq!(
        events("", r#""135":35"#).errors[0].reason(),
        "bad_structure"
    );
    assert_eq!(
        events("", r#""143":"1","143":"2""#).items[0].metadata,
        r#"{"counterValue":2}"#
    );
    assert!(
        events("", r#""137":5"#).errors.is_empty(),
        "unknown keys are ignored"
    );
}

#[test]
fn oid_index_matches_gjson_lookups() {
    // Non-canonical keys never match "95"; an array is indexed by position.
    let d = status_signals(r#""095":"10","95 ":"11","+95":"12""#);
    assert_eq!(value_of(&d, n::SPEED), None);
    let mut ev = event(DS_STATUS, "");
    let mut items = vec!["\"0\""; 96];
    items[95] = "\"1F\"";
    ev.data = Some(format!(r#"{{"signals":[{}]}}"#, items.join(",")));
    assert_eq!(
        value_of(&convert_signals(&ev), n::SPEED),
        Some(SignalValue::Number(31.0))
    );
}
