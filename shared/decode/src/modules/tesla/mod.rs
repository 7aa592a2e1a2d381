//! Tesla: Fleet API `vehicle_data` JSON and Fleet Telemetry protobuf.
//! `dataversion == fleet_telemetry/v1.0.0` selects telemetry; anything else is the Fleet API.

mod api;
mod proto;
mod telemetry;

use crate::model::{Decoded, Signal};
use dq_cloudevent::RawEvent;

/// `dataversion` of Fleet Telemetry payloads.
pub const DATA_VERSION_TELEMETRY: &str = "fleet_telemetry/v1.0.0";

/// Miles to kilometres (model-garage `unit` package).
const MILES_TO_KM: f64 = 1.609344;

/// Decodes a Tesla row; there is no type, producer or subject gate.
pub fn convert_signals(event: &RawEvent) -> Decoded<Signal> {
    if event.header.data_version == DATA_VERSION_TELEMETRY {
        telemetry::convert_signals(event)
    } else {
        api::convert_signals(event)
    }
}
