//! Ground truth: what each vehicle actually did, as data, so detector tests can compare what dq
//! derives from the generated events against what happened.

use chrono::{DateTime, Utc};
use serde::Serialize;

/// A WGS-84 position.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GeoPoint {
    /// Degrees north.
    pub latitude: f64,
    /// Degrees east.
    pub longitude: f64,
}

/// One trip: ignition on to ignition off.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Trip {
    /// Ignition on (the first payload of the trip carries this time).
    pub start: DateTime<Utc>,
    /// Ignition off (the last payload of the trip carries this time).
    pub end: DateTime<Utc>,
    /// Distance driven, from the odometer.
    pub distance_km: f64,
    /// Odometer at ignition on.
    pub start_odometer_km: f64,
    /// Odometer at ignition off.
    pub end_odometer_km: f64,
    /// Where the trip started.
    pub start_location: GeoPoint,
    /// Where the trip ended.
    pub end_location: GeoPoint,
    /// Highest speed reached.
    pub max_speed_kmh: f64,
    /// Fuel level or state of charge at ignition on (percent).
    pub start_energy_pct: f64,
    /// Fuel level or state of charge at ignition off (percent).
    pub end_energy_pct: f64,
}

/// How energy was added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum EnergyStopKind {
    /// A combustion vehicle filled its tank.
    Refuel,
    /// An EV charged on AC (home wallbox).
    AcCharge,
    /// An EV fast-charged on DC.
    DcFastCharge,
}

/// One refuel or charging episode, while parked with the ignition off.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnergyStop {
    /// Kind of stop.
    pub kind: EnergyStopKind,
    /// When energy started flowing.
    pub start: DateTime<Utc>,
    /// When it stopped (target reached or the car left).
    pub end: DateTime<Utc>,
    /// Fuel level / state of charge before (percent).
    pub start_level_pct: f64,
    /// Fuel level / state of charge after (percent).
    pub end_level_pct: f64,
    /// Litres (refuel) or kWh (charging) added.
    pub added: f64,
    /// Where.
    pub location: GeoPoint,
}

/// A period during which the vehicle reports diagnostic trouble codes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DtcEpisode {
    /// The codes, e.g. `P0420`.
    pub codes: Vec<String>,
    /// First ignition on with the codes set.
    pub start: DateTime<Utc>,
    /// Ignition on at which they were cleared; `None` if still active at the horizon end.
    pub end: Option<DateTime<Utc>>,
}

/// Kinds of discrete vehicle events (default event names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum VehicleEventKind {
    /// `behavior.harshBraking`.
    HarshBraking,
    /// `behavior.extremeBraking`.
    ExtremeBraking,
    /// `behavior.harshAcceleration`.
    HarshAcceleration,
    /// `behavior.harshCornering`.
    HarshCornering,
    /// `security.engineBlock` (Kaufmann remote immobiliser).
    EngineBlock,
    /// `security.engineUnblock`.
    EngineUnblock,
}

impl VehicleEventKind {
    /// The event name dq stores.
    pub fn name(self) -> &'static str {
        match self {
            VehicleEventKind::HarshBraking => "behavior.harshBraking",
            VehicleEventKind::ExtremeBraking => "behavior.extremeBraking",
            VehicleEventKind::HarshAcceleration => "behavior.harshAcceleration",
            VehicleEventKind::HarshCornering => "behavior.harshCornering",
            VehicleEventKind::EngineBlock => "security.engineBlock",
            VehicleEventKind::EngineUnblock => "security.engineUnblock",
        }
    }
}

/// One discrete event. Behaviour events happen while driving; only vendors whose decoders emit
/// events (default, Ruptela, Kaufmann) report them, and Ruptela reports them at the time of the
/// next status payload (its decoder stamps the header time), up to one payload interval later.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VehicleEvent {
    /// What happened.
    pub kind: VehicleEventKind,
    /// When it happened.
    pub time: DateTime<Utc>,
    /// Speed at that moment.
    pub speed_kmh: f64,
}

/// Everything one vehicle did over the horizon.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VehiclePlan {
    /// The vehicle's index.
    pub index: u32,
    /// Trips in time order.
    pub trips: Vec<Trip>,
    /// Refuel and charging episodes in time order.
    pub energy_stops: Vec<EnergyStop>,
    /// Diagnostic trouble code episodes in time order.
    pub dtc_episodes: Vec<DtcEpisode>,
    /// Behaviour and security events in time order.
    pub events: Vec<VehicleEvent>,
}
