//! din simulator tests: bundles become snapshots with din's column contract (`bundles.rs`),
//! payloads move to the blob store (`blobs.rs`), expiry honours the consumer floor (`expiry.rs`).
//! Lake-touching bodies run against both catalog backends via `lake::backend_tests!`.

mod blobs;
mod bundles;
mod expiry;

use chrono::{DateTime, TimeZone, Utc};
use dq_cloudevent::event::{CloudEventHeader, RawEvent};
use lake::testing::{Backend, TestLake};
use lake::Lake;

pub const VEHICLE: &str = "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF";
pub const SOURCE: &str = "0xF26421509Efe92861a587482100c6d728aBf1CD0";

/// A status event of vehicle `token` at `time` with a small JSON payload.
pub fn status(token: u32, id: &str, time: DateTime<Utc>, data: &str) -> RawEvent {
    RawEvent {
        header: CloudEventHeader {
            event_type: "dimo.status".into(),
            source: SOURCE.into(),
            subject: format!("{VEHICLE}:{token}"),
            id: id.into(),
            time,
            data_content_type: "application/json".into(),
            data_version: "default/v1.0".into(),
            producer: format!("did:erc721:137:0x9c94C395cBcBDe662235E0A9d3bB87Ad708561BA:{token}"),
            ..Default::default()
        },
        data: Some(data.into()),
        data_base64: None,
    }
}

pub fn at(secs: i64, micros: u32) -> DateTime<Utc> {
    Utc.timestamp_opt(1_780_000_000 + secs, micros * 1000)
        .unwrap()
}

/// A fresh lake with `raw_events` created, as din leaves it after first boot.
pub fn din_lake(backend: Backend) -> (TestLake, Lake) {
    let t = TestLake::new(backend);
    let lake = t.open().unwrap();
    lake::raw::ensure(&lake).unwrap();
    lake::progress::ensure(&lake).unwrap();
    (t, lake)
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}
