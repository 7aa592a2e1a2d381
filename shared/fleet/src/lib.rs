//! Deterministic synthetic connected-vehicle fleet: the CloudEvents that vendors' devices and
//! integrations would push through din, for the din simulator, tests and benchmarks.
//!
//! This crate owns *what a fleet says*: vehicle identities (DIDs, VINs, vendors), their daily
//! life, and the vendor payloads and header fan-out din would store. It does not touch a database
//! or the network, and it does not decode (that is `dq-decode`); the din simulator writes these
//! events into the lake.
//!
//! # Determinism
//! Output is a pure function of [`FleetConfig`]: the same config gives byte-identical events.
//! Every random decision draws from a ChaCha8 stream keyed by `(seed, vehicle, purpose, n)`, so a
//! vehicle's life does not depend on the fleet size, the horizon length or the chunk size used to
//! stream it, and [`Fleet::vehicle_plan`] replays exactly the life that [`Fleet::chunks`] encodes.
//!
//! # Vehicles
//! Vehicle `i` gets a vendor from [`VendorMix`] (the first vehicles cover every vendor with a
//! non-zero weight once, so any mixed fleet of 7+ vehicles exercises every decoder), a vehicle
//! token id and a device token id from seed-derived contiguous blocks, a make/model/year with a
//! valid VIN, a home in a metro area that suits the vendor (Kaufmann vans in Santiago, HashDog in
//! the US, the rest across US and EU metros) with its fixed UTC offset, and habits:
//! - commuters: two weekday commutes (07:00–08:45 and 16:30–18:30 local, 12–45 min), 0–2
//!   evening errands, 0–3 leisure trips at weekends and an occasional 1.5–3 h highway trip;
//! - casual drivers: 0–3 trips a day between 09:00 and 20:00;
//! - couriers (Kaufmann and diesel Ruptela vans): 6–11 short trips on weekdays, a few on
//!   Saturdays.
//!
//! Tesla vendors get Teslas; the default oracle gets 40 % non-Tesla EVs; aftermarket devices are
//! on combustion cars (Ruptela 35 % diesel vans).
//!
//! # Daily life
//! - **Trips** run at one-second resolution: 10–60 s idling after ignition on (engine rpm at
//!   idle), cruise segments (urban 30–80 km/h, highway 95–130 km/h), traffic stops, junction turns,
//!   comfortable acceleration (≤ 1.6 m/s²) and braking (≤ 2.2 m/s²), and a full stop before
//!   ignition off. Harsh braking / acceleration / cornering and rare extreme braking happen at
//!   0.05–1.2 per hour depending on the driver, with the matching speed or heading change.
//! - **GPS** is dead-reckoned from speed and heading each second, so successive fixes are as far
//!   apart as the odometer says; headings bend back home beyond a 12–40 km leash. Reported
//!   positions carry ±2 m noise and a plausible hdop.
//! - **Odometer** only grows; **fuel** drains with distance, acceleration and idling, **state of
//!   charge** with distance and auxiliaries (with some regeneration when braking).
//! - **Refuel**: a combustion car ending a trip below its threshold (12–28 %) stops for 4–9 min
//!   and fills to 75–100 %. **Charging**: an EV below 25 % DC fast-charges (50–150 kW) to 80 %; an
//!   EV below its plug-in threshold (50–80 %) with a wallbox (7.2 or 11 kW) AC-charges during any
//!   stop of 5 h or more (overnight, a working day) up to its 80/90 % limit; both stop 10 min
//!   before the next trip.
//! - **Trouble codes**: at about 0.6 % of ignitions a vehicle raises 1–2 codes that persist for
//!   1–10 days (not for Tesla vendors, which report none).
//! - **Kaufmann** vans are occasionally immobilised overnight (engine block, then unblock).
//!
//! # Emission
//! While driving, a vehicle sends `signals_per_minute` status payloads per minute, plus one at
//! ignition on and one at ignition off; parked, a heartbeat every 30–60 min; while charging, one
//! every 15 min (AC) or 3 min (DC) plus one when charging ends; after a refuel, one payload.
//! Ruptela devices also log a GPS fix every 5 s and send them as `r/v0/loc` batches about every
//! minute. Each payload fans out into the rows din would store: the vehicle
//! status, plus fingerprint, events and device-level copies where the vendor's ingest module
//! makes them. Headers are din-canonical: EIP-55 `source` (the vendor's
//! connection address), `did:erc721` subject (vehicle NFT) and producer (aftermarket or synthetic
//! device NFT), KSUID ids, `application/json`, the vendor's `dataversion`, times in whole
//! milliseconds. Ids follow each ingest module: default and Tesla copies share one KSUID, Ruptela
//! status and fingerprint share one while its events row gets another, and AutoPi / HashDog mint
//! one per header.
//!
//! | vendor | rows per payload | `dataversion` | producer |
//! |---|---|---|---|
//! | default oracle | status (+ fingerprint at ignition on, + events) | none | synthetic |
//! | Ruptela / Kaufmann | `r/v0/s` status (+ fingerprint, + events); `r/v0/loc`, `r/v0/dtc` status; `r/v0/cmd` events | `r/v0/*` | aftermarket / synthetic |
//! | AutoPi | vehicle + device status; fingerprint message at ignition on | `v2` | aftermarket |
//! | HashDog | vehicle + device status (+ fingerprint on VIN frames) | `v2` | aftermarket |
//! | Tesla Fleet API | status + fingerprint | `fleet_api/v1.0.0` | synthetic |
//! | Tesla Fleet Telemetry | status + fingerprint | `fleet_telemetry/v1.0.0` | synthetic |
//!
//! Tesla Fleet Telemetry protobuf travels the way the decoder reads it: inline
//! JSON `data` of the form `{"payloads":["<base64 Payload>"]}`, not `data_base64`; dq does not
//! base64-decode `data_base64` status payloads before decoding.
//!
//! Generation runs at roughly 400–450k events/s on one core in release builds (200 vehicles,
//! 7 days ≈ 1M events in ≈ 2.2 s, ~720 B of payload per event).
//!
//! # Layout
//! - [`config`]: [`FleetConfig`], [`VendorMix`], [`Error`].
//! - [`vendor`]: [`Vendor`] and the source / contract / `dataversion` constants.
//! - [`plan`]: ground truth ([`VehiclePlan`]: trips, energy stops, DTC episodes, events).
//! - `vehicle`: identities and traits; `schedule`: daily trips; `drive`: the speed profile;
//!   `sim`: the per-vehicle state machine; `encode`: vendor payloads and headers; `stream`:
//!   time-windowed merging ([`Chunks`]).
#![warn(missing_docs)]
// A simulator: lookups into fixed tables by in-range (often random) indexes; a broken invariant
// stops the run rather than producing a wrong fleet.
#![allow(clippy::indexing_slicing)]

pub mod config;
mod drive;
mod encode;
mod ids;
mod jsonw;
mod life;
pub mod plan;
mod rng;
mod schedule;
mod stream;
mod vehicle;
pub mod vendor;

pub use config::{Error, FleetConfig, Result, VendorMix};
pub use plan::{
    DtcEpisode, EnergyStop, EnergyStopKind, GeoPoint, Trip, VehicleEvent, VehicleEventKind,
    VehiclePlan,
};
pub use stream::Chunks;
pub use vehicle::{Fuel, Powertrain, VehicleInfo};
pub use vendor::Vendor;

use chrono::{DateTime, Utc};
use config::Validated;
use vehicle::Traits;

/// A generated fleet: vehicle metadata up front, events streamed on demand.
pub struct Fleet {
    validated: Validated,
    vehicles: Vec<VehicleInfo>,
    traits: Vec<Traits>,
}

impl Fleet {
    /// Validates `config` and derives every vehicle's identity. Cheap: no event is generated.
    pub fn new(config: FleetConfig) -> Result<Self> {
        let validated = config.validate()?;
        let (vehicles, traits) = (0..validated.config.vehicles)
            .map(|i| vehicle::build(&validated, i))
            .unzip();
        Ok(Self {
            validated,
            vehicles,
            traits,
        })
    }

    /// The effective configuration (contracts in EIP-55 form, start truncated to milliseconds).
    pub fn config(&self) -> &FleetConfig {
        &self.validated.config
    }

    /// Start of the horizon.
    pub fn start(&self) -> DateTime<Utc> {
        self.validated.config.start
    }

    /// End of the horizon (exclusive).
    pub fn end(&self) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(self.validated.end_ms)
            .unwrap_or(self.validated.config.start)
    }

    /// Every vehicle's metadata, indexed by vehicle index.
    pub fn vehicles(&self) -> &[VehicleInfo] {
        &self.vehicles
    }

    /// The ground truth of vehicle `index` over the whole horizon (`None` if out of range).
    /// Replays the same simulation as [`Fleet::chunks`] without encoding, so it costs a few
    /// milliseconds per vehicle-month.
    pub fn vehicle_plan(&self, index: u32) -> Option<VehiclePlan> {
        let i = usize::try_from(index).ok()?;
        let (info, traits) = (self.vehicles.get(i)?, self.traits.get(i)?);
        life::VehicleSim::new(&self.validated, info, traits, true).into_plan()
    }

    /// Streams the whole fleet as consecutive windows of length `chunk` (at least 1 ms). Each
    /// item holds the events of every vehicle whose time falls in the window, in time order.
    pub fn chunks(&self, chunk: std::time::Duration) -> Chunks<'_> {
        let ms = i64::try_from(chunk.as_millis()).unwrap_or(i64::MAX);
        Chunks::new(self, ms)
    }

    /// An estimate of the total number of events [`Fleet::chunks`] yields, for progress bars.
    /// It counts the schedules without simulating; expect it within about ±15 %.
    pub fn estimated_events(&self) -> u64 {
        let v = &self.validated;
        let interval_s = v.interval_ms as f64 / 1000.0;
        let days = f64::from(v.config.days);
        let mut total = 0.0;
        for (info, traits) in self.vehicles.iter().zip(&self.traits) {
            let st = life::schedule_stats(v, info, traits);
            let trips = st.trips as f64;
            let driving = st.driving_payloads as f64;
            let heartbeats = st.parked_hours / 0.75;
            // Charging sessions add a handful of payloads per day to EVs.
            let charging = if info.powertrain.is_electric() {
                5.0 * days
            } else {
                0.0
            };
            let payloads = driving + heartbeats + charging;
            total += match info.vendor {
                Vendor::Default => payloads + trips,
                Vendor::Ruptela | Vendor::Kaufmann => {
                    let batches = st.driving_minutes * 60.0 / (60.0 + interval_s / 2.0) + trips;
                    payloads + trips + batches
                }
                Vendor::AutoPi => 2.0 * payloads + 2.0 * trips,
                Vendor::HashDog => 2.0 * payloads + trips,
                Vendor::TeslaApi | Vendor::TeslaTelemetry => 2.0 * payloads,
            };
        }
        total.round() as u64
    }
}
