//! Fuzzes every decoder module and the CloudEvent parser. The first input byte picks the
//! routing (data version, event type); the rest is the payload.
#![no_main]

use dq_cloudevent::{types, RawEvent, RawRow};
use dq_decode::{decode_event, EventModule, SignalModule, VehicleGate};
use libfuzzer_sys::fuzz_target;

const DATA_VERSIONS: [&str; 7] = [
    "",
    "v2",
    "r/v0/s",
    "r/v0/loc",
    "r/v0/dtc",
    "r/v0/cmd",
    "fleet_telemetry/v1.0.0",
];

fuzz_target!(|input: &[u8]| {
    let Some((&selector, rest)) = input.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest).into_owned();
    if let Ok(event) = RawEvent::from_json(&text) {
        let _ = RawRow::from_event(&event).to_event_checked();
    }
    let mut event = RawEvent::default();
    event.header.data_version =
        DATA_VERSIONS[usize::from(selector) % DATA_VERSIONS.len()].to_string();
    event.header.event_type = if selector & 0x80 == 0 {
        types::STATUS
    } else {
        types::EVENTS
    }
    .to_string();
    event.header.subject =
        "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:1".to_string();
    event.data = Some(text);
    for module in [
        SignalModule::Default,
        SignalModule::AutoPi,
        SignalModule::HashDog,
        SignalModule::Ruptela,
        SignalModule::Tesla,
    ] {
        let _ = module.convert(&event);
    }
    for module in [EventModule::Default, EventModule::Ruptela] {
        let _ = module.convert(&event);
    }
    // A fixed clock keeps runs reproducible.
    let now = chrono::DateTime::from_timestamp(1_767_225_600, 0).unwrap_or_default();
    let _ = decode_event(&event, &VehicleGate::DISABLED, now);
});
