//! Turns [`Sample`]s into the CloudEvents din would store for each vendor: the payload shape the
//! vendor's decoder module expects and the header fan-out its ingest module
//! produces.

mod default;
mod ruptela;
mod tesla;
mod v2;

use crate::ids;
use crate::life::{Sample, SampleSink};
use crate::rng::{self, Purpose};
use crate::vehicle::{Traits, VehicleInfo};
use crate::vendor::{Vendor, JSON_CONTENT_TYPE};
use chrono::DateTime;
use dq_cloudevent::event::SPEC_VERSION;
use dq_cloudevent::{CloudEventHeader, RawEvent};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Per-vehicle encoder state that persists across chunks.
pub(crate) struct Emitter<'f> {
    info: &'f VehicleInfo,
    traits: &'f Traits,
    /// Ids, signatures and measurement noise; never feeds back into the simulation.
    rng: ChaCha8Rng,
    /// Ruptela GPS fixes waiting for the next `r/v0/loc` batch.
    fixes: Vec<ruptela::Fix>,
    /// Payloads sent so far (LoRaWAN frame counter, AutoPi uptime proxy).
    frames: u64,
    /// LoRaWAN device address written into HashDog payloads.
    device_address: String,
    /// Reusable protobuf buffers for Tesla Fleet Telemetry.
    proto: Vec<u8>,
    proto_inner: Vec<u8>,
}

/// A [`SampleSink`] that encodes into an output vector.
pub(crate) struct EmitSink<'a, 'f> {
    pub emitter: &'a mut Emitter<'f>,
    pub out: &'a mut Vec<RawEvent>,
}

impl SampleSink for EmitSink<'_, '_> {
    fn accept(&mut self, sample: &Sample<'_>) {
        self.emitter.emit(sample, self.out);
    }
}

impl<'f> Emitter<'f> {
    pub(crate) fn new(seed: u64, info: &'f VehicleInfo, traits: &'f Traits) -> Self {
        let mut rng = rng::stream(seed, info.index, Purpose::Emit, 0);
        let device_address = format!("0x{}", ids::hex_upper(&rng.gen::<[u8; 20]>()));
        Self {
            info,
            traits,
            rng,
            fixes: Vec::new(),
            frames: 0,
            device_address,
            proto: Vec::with_capacity(512),
            proto_inner: Vec::with_capacity(64),
        }
    }

    fn emit(&mut self, sample: &Sample<'_>, out: &mut Vec<RawEvent>) {
        match self.info.vendor {
            Vendor::Default => default::encode(self, sample, out),
            Vendor::Ruptela | Vendor::Kaufmann => ruptela::encode(self, sample, out),
            Vendor::AutoPi => v2::encode_autopi(self, sample, out),
            Vendor::HashDog => v2::encode_hashdog(self, sample, out),
            Vendor::TeslaApi => tesla::encode_api(self, sample, out),
            Vendor::TeslaTelemetry => tesla::encode_telemetry(self, sample, out),
        }
    }

    fn ksuid(&mut self, time_ms: i64) -> String {
        ids::ksuid(time_ms, &mut self.rng)
    }

    fn signature(&mut self) -> String {
        ids::signature(&mut self.rng)
    }

    /// A uniform draw in [-1, 1) for small measurement noise.
    fn rand_unit(&mut self) -> f64 {
        self.rng.gen_range(-1.0..1.0)
    }

    /// GPS measurement noise of a couple of metres, in degrees of latitude / longitude.
    fn gps_noise(&mut self, lat: f64) -> (f64, f64) {
        const M_PER_DEG: f64 = 111_320.0;
        let n = self.rng.gen_range(-2.0..2.0) / M_PER_DEG;
        let e = self.rng.gen_range(-2.0..2.0) / (M_PER_DEG * lat.to_radians().cos().max(0.1));
        (n, e)
    }

    /// A header as din stores it: EIP-55 source, canonical DIDs, JSON content type.
    fn header(
        &self,
        event_type: &str,
        id: String,
        time_ms: i64,
        data_version: &str,
        subject: &str,
        signature: &str,
    ) -> CloudEventHeader {
        CloudEventHeader {
            spec_version: SPEC_VERSION.to_string(),
            event_type: event_type.to_string(),
            source: self.info.source.clone(),
            subject: subject.to_string(),
            id,
            time: DateTime::from_timestamp_millis(time_ms).unwrap_or(DateTime::UNIX_EPOCH),
            data_content_type: JSON_CONTENT_TYPE.to_string(),
            data_schema: String::new(),
            data_version: data_version.to_string(),
            producer: self.info.producer.clone(),
            signature: signature.to_string(),
            raw_event_id: String::new(),
            tags: Vec::new(),
            extras: serde_json::Map::new(),
        }
    }
}

/// Pushes one row per header, all sharing `data` (cloned for all but the last).
fn fan_out(out: &mut Vec<RawEvent>, headers: Vec<CloudEventHeader>, data: String) {
    let n = headers.len();
    let mut data = Some(data);
    for (i, header) in headers.into_iter().enumerate() {
        let payload = if i + 1 == n {
            data.take()
        } else {
            data.clone()
        };
        out.push(RawEvent {
            header,
            data: payload,
            data_base64: None,
        });
    }
}
