//! Who each vehicle is: identity (DIDs, VIN, vendor), the car, where it lives and how it is used.
//! Everything here is a pure function of `(seed, index)` and the config.

use crate::config::Validated;
use crate::ids;
use crate::rng::{self, Purpose};
use crate::vendor::{DeviceKind, Vendor};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

/// Fuel of a combustion vehicle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Fuel {
    /// Petrol.
    Gasoline,
    /// Diesel.
    Diesel,
}

/// Drive train and energy store.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Powertrain {
    /// Internal combustion engine with a fuel tank.
    Combustion {
        /// Fuel type.
        fuel: Fuel,
        /// Tank size in litres.
        tank_liters: f64,
    },
    /// Battery electric vehicle.
    Electric {
        /// Usable battery capacity in kWh.
        battery_kwh: f64,
    },
}

impl Powertrain {
    /// Whether the vehicle is a battery EV.
    pub fn is_electric(&self) -> bool {
        matches!(self, Powertrain::Electric { .. })
    }

    /// Tank litres or battery kWh.
    pub fn capacity(&self) -> f64 {
        match *self {
            Powertrain::Combustion { tank_liters, .. } => tank_liters,
            Powertrain::Electric { battery_kwh } => battery_kwh,
        }
    }
}

/// Public metadata of one vehicle.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VehicleInfo {
    /// Position in the fleet (0-based).
    pub index: u32,
    /// The connection that reports it.
    pub vendor: Vendor,
    /// Vehicle NFT token id.
    pub token_id: u64,
    /// `did:erc721:<chain>:<vehicle contract>:<token>`; the `subject` of its events.
    pub subject: String,
    /// EIP-55 connection address; the `source` of its events.
    pub source: String,
    /// Device NFT token id (aftermarket or synthetic contract, see [`Vendor::device_kind`]).
    pub device_token_id: u64,
    /// The device DID; the `producer` of its events.
    pub producer: String,
    /// 17-character VIN with a valid check digit.
    pub vin: String,
    /// Manufacturer.
    pub make: &'static str,
    /// Model.
    pub model: &'static str,
    /// Model year.
    pub year: u16,
    /// Drive train.
    pub powertrain: Powertrain,
    /// Where the vehicle is parked at the start of the horizon.
    pub home_latitude: f64,
    /// Where the vehicle is parked at the start of the horizon.
    pub home_longitude: f64,
    /// The owner's fixed UTC offset; trip times follow this local clock.
    pub utc_offset_minutes: i32,
}

/// How a vehicle is used through the week.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Habit {
    /// Two commutes on weekdays plus errands; leisure trips at weekends.
    Commuter { commute_min: f64 },
    /// A few trips a day at random hours.
    Casual,
    /// A delivery van: many short trips during working hours, Monday to Saturday.
    Courier,
}

/// Hidden traits the simulation uses.
#[derive(Debug, Clone)]
pub(crate) struct Traits {
    pub habit: Habit,
    /// Litres or kWh per km at steady speed.
    pub per_km: f64,
    /// Litres per hour (ICE idle) or kW (EV auxiliaries) while the ignition is on.
    pub idle_rate: f64,
    pub home_alt_m: f64,
    /// Mean outdoor temperature at home (°C) and hemisphere sign for the seasons.
    pub climate_c: f64,
    pub hemisphere: f64,
    pub initial_odometer_km: f64,
    pub initial_energy_pct: f64,
    /// ICE: refuel when a trip ends below this fuel level.
    pub refuel_below_pct: f64,
    /// EV: home charger power, if the owner has one.
    pub home_charger_kw: Option<f64>,
    /// EV: plug in at a long stop (home wallbox) when below this state of charge.
    pub plug_below_pct: f64,
    /// EV: charge limit.
    pub charge_limit_pct: f64,
    /// Cold tyre pressures (kPa): front left, front right, rear left, rear right.
    pub tire_kpa: [f64; 4],
    /// Expected harsh manoeuvres per driving hour.
    pub harsh_per_hour: f64,
    pub idle_rpm: f64,
    /// Ruptela only: the device reads the CAN bus (OIDs 197/115/207/645) instead of OBD
    /// (94/96/98/114).
    pub can_bus: bool,
    /// Typical GPS horizontal dilution of precision.
    pub hdop: f64,
    /// How far (km) the vehicle roams before its heading bends back towards home.
    pub leash_km: f64,
    /// Device identifier used inside vendor payloads (LoRaWAN DevEUI, AutoPi unit id).
    pub device_serial: String,
}

struct Model {
    make: &'static str,
    model: &'static str,
    wmi: &'static str,
    powertrain: Powertrain,
    /// L/100 km or kWh/100 km.
    per_100km: f64,
}

const fn model(
    make: &'static str,
    model: &'static str,
    wmi: &'static str,
    powertrain: Powertrain,
    per_100km: f64,
) -> Model {
    Model {
        make,
        model,
        wmi,
        powertrain,
        per_100km,
    }
}

/// A combustion powertrain with a `tank`-litre tank.
const fn ice(fuel: Fuel, tank: f64) -> Powertrain {
    Powertrain::Combustion {
        fuel,
        tank_liters: tank,
    }
}

/// An electric powertrain with a `kwh` battery.
const fn ev(kwh: f64) -> Powertrain {
    Powertrain::Electric { battery_kwh: kwh }
}

use Fuel::{Diesel, Gasoline};

const GASOLINE_CARS: &[Model] = &[
    model("Toyota", "Camry", "4T1", ice(Gasoline, 60.0), 7.2),
    model("Honda", "Civic", "2HG", ice(Gasoline, 47.0), 6.6),
    model("Ford", "F-150", "1FT", ice(Gasoline, 98.0), 12.4),
    model("Volkswagen", "Golf", "WVW", ice(Gasoline, 50.0), 6.0),
    model("BMW", "320i", "WBA", ice(Gasoline, 59.0), 6.9),
    model("Chevrolet", "Silverado", "1GC", ice(Gasoline, 91.0), 12.8),
    model("Toyota", "RAV4", "2T3", ice(Gasoline, 55.0), 7.6),
    model("MINI", "Countryman", "WMW", ice(Gasoline, 51.0), 6.7),
];

const DIESEL_VANS: &[Model] = &[
    model("Mercedes-Benz", "Sprinter", "WDB", ice(Diesel, 71.0), 9.8),
    model("Mercedes-Benz", "Vito", "WDF", ice(Diesel, 57.0), 8.1),
    model("Volkswagen", "Crafter", "WV1", ice(Diesel, 75.0), 9.6),
    model("Ford", "Transit", "WF0", ice(Diesel, 80.0), 10.4),
];

const OTHER_EVS: &[Model] = &[
    model("Ford", "Mustang Mach-E", "3FM", ev(88.0), 19.6),
    model("Hyundai", "Ioniq 5", "KM8", ev(74.0), 17.4),
    model("Volkswagen", "ID.4", "WVG", ev(77.0), 18.1),
    model("Chevrolet", "Bolt EV", "1G1", ev(65.0), 16.4),
];

const TESLAS: &[Model] = &[
    model("Tesla", "Model 3", "5YJ", ev(75.0), 14.9),
    model("Tesla", "Model Y", "7SA", ev(75.0), 16.6),
    model("Tesla", "Model S", "5YJ", ev(95.0), 18.2),
    model("Tesla", "Model X", "5YJ", ev(95.0), 21.3),
];

struct Metro {
    lat: f64,
    lon: f64,
    utc_offset_min: i32,
    alt_m: f64,
    climate_c: f64,
}

const fn metro(lat: f64, lon: f64, utc_offset_min: i32, alt_m: f64, climate_c: f64) -> Metro {
    Metro {
        lat,
        lon,
        utc_offset_min,
        alt_m,
        climate_c,
    }
}

/// US metros (fixed standard-time offsets; DST is not modelled).
const US: &[Metro] = &[
    metro(30.2672, -97.7431, -360, 150.0, 21.0),   // Austin
    metro(39.7392, -104.9903, -420, 1600.0, 11.0), // Denver
    metro(34.0522, -118.2437, -480, 90.0, 19.0),   // Los Angeles
    metro(41.8781, -87.6298, -360, 180.0, 10.5),   // Chicago
    metro(40.7128, -74.0060, -300, 10.0, 13.0),    // New York
    metro(25.7617, -80.1918, -300, 2.0, 25.5),     // Miami
    metro(43.6532, -79.3832, -300, 76.0, 9.0),     // Toronto
];

/// European metros.
const EU: &[Metro] = &[
    metro(52.5200, 13.4050, 60, 34.0, 10.0),  // Berlin
    metro(48.1351, 11.5820, 60, 520.0, 9.0),  // Munich
    metro(54.6872, 25.2797, 120, 112.0, 7.0), // Vilnius
    metro(51.5072, -0.1276, 0, 11.0, 11.5),   // London
    metro(41.3874, 2.1686, 60, 12.0, 17.0),   // Barcelona
];

/// Santiago de Chile: Kaufmann's market.
const SANTIAGO: &[Metro] = &[metro(-33.4489, -70.6693, -240, 570.0, 15.0)];

fn pick<'a, T>(rng: &mut ChaCha8Rng, items: &'a [T]) -> &'a T {
    &items[rng.gen_range(0..items.len())]
}

/// The vendor of vehicle `index`. The first vehicles cover every vendor with a non-zero weight
/// once (in a seed-dependent order), so small mixed fleets exercise every decoder; the rest draw
/// by weight.
pub(crate) fn vendor_for(v: &Validated, index: u32) -> Vendor {
    let mix = &v.config.vendor_mix;
    let mut present: Vec<Vendor> = Vendor::ALL
        .iter()
        .copied()
        .filter(|&x| mix.weight(x) > 0)
        .collect();
    present.sort_by_key(|&x| rng::key(v.config.seed, 0, Purpose::Vendor, x as i64));
    if let Some(&vendor) = present.get(index as usize) {
        return vendor;
    }
    let mut r = rng::stream(v.config.seed, index, Purpose::Vendor, 0);
    let mut ticket = r.gen_range(0..mix.total().max(1));
    for &vendor in &Vendor::ALL {
        let w = u64::from(mix.weight(vendor));
        if ticket < w {
            return vendor;
        }
        ticket -= w;
    }
    present.first().copied().unwrap_or(Vendor::Default)
}

/// Fleet-wide token id bases: contiguous blocks so ids are unique within a fleet and look like
/// mid-range production ids.
fn token_bases(seed: u64) -> (u64, u64) {
    let vehicle = 1_000 + rng::key(seed, 0, Purpose::Fleet, 1) % 150_000;
    let device = 10_000 + rng::key(seed, 0, Purpose::Fleet, 2) % 40_000;
    (vehicle, device)
}

/// Builds vehicle `index`.
pub(crate) fn build(v: &Validated, index: u32) -> (VehicleInfo, Traits) {
    let cfg = &v.config;
    let vendor = vendor_for(v, index);
    let mut r = rng::stream(cfg.seed, index, Purpose::Profile, 0);

    let model = match vendor {
        Vendor::TeslaApi | Vendor::TeslaTelemetry => pick(&mut r, TESLAS),
        Vendor::Kaufmann => pick(&mut r, DIESEL_VANS),
        Vendor::Ruptela if r.gen_bool(0.35) => pick(&mut r, DIESEL_VANS),
        Vendor::Default if r.gen_bool(0.4) => pick(&mut r, OTHER_EVS),
        _ => pick(&mut r, GASOLINE_CARS),
    };
    let place = match vendor {
        Vendor::Kaufmann => pick(&mut r, SANTIAGO),
        Vendor::Ruptela if r.gen_bool(0.6) => pick(&mut r, EU),
        Vendor::HashDog => pick(&mut r, US),
        _ if r.gen_bool(0.7) => pick(&mut r, US),
        _ => pick(&mut r, EU),
    };
    let year = r.gen_range(2015..=2025u16);
    let vin = ids::vin(model.wmi, year, &mut r);

    // Home within ~15 km of the metro centre.
    let home_lat = place.lat + r.gen_range(-0.13..0.13);
    let home_lon = place.lon + r.gen_range(-0.13..0.13) / place.lat.to_radians().cos();

    let habit = match vendor {
        Vendor::Kaufmann => Habit::Courier,
        Vendor::Ruptela
            if matches!(
                model.powertrain,
                Powertrain::Combustion {
                    fuel: Fuel::Diesel,
                    ..
                }
            ) =>
        {
            Habit::Courier
        }
        _ if r.gen_bool(0.7) => Habit::Commuter {
            commute_min: r.gen_range(12.0..45.0),
        },
        _ => Habit::Casual,
    };
    let electric = model.powertrain.is_electric();
    let cold_kpa = if electric {
        r.gen_range(275.0..295.0)
    } else {
        r.gen_range(220.0..250.0)
    };
    let tire_kpa = [0; 4].map(|_| cold_kpa + r.gen_range(-6.0..6.0));
    let traits = Traits {
        habit,
        per_km: model.per_100km / 100.0 * r.gen_range(0.9..1.1),
        idle_rate: if electric {
            r.gen_range(0.3..0.8)
        } else {
            r.gen_range(0.6..1.1)
        },
        home_alt_m: (place.alt_m + r.gen_range(-20.0..40.0)).max(1.0),
        climate_c: place.climate_c,
        hemisphere: if place.lat < 0.0 { -1.0 } else { 1.0 },
        initial_odometer_km: f64::from(2025 - year.min(2025)) * r.gen_range(9_000.0..18_000.0)
            + r.gen_range(500.0..9_000.0),
        initial_energy_pct: r.gen_range(35.0..95.0),
        refuel_below_pct: r.gen_range(12.0..28.0),
        home_charger_kw: if r.gen_bool(0.85) {
            Some(if r.gen_bool(0.5) { 7.2 } else { 11.0 })
        } else {
            None
        },
        plug_below_pct: r.gen_range(50.0..80.0),
        charge_limit_pct: if r.gen_bool(0.7) { 80.0 } else { 90.0 },
        tire_kpa,
        harsh_per_hour: r.gen_range(0.05..1.2),
        idle_rpm: r.gen_range(680.0..820.0),
        can_bus: r.gen_bool(0.5),
        hdop: r.gen_range(0.6..1.4),
        leash_km: r.gen_range(12.0..40.0),
        device_serial: ids::hex_upper(&r.gen::<[u8; 8]>()),
    };

    let (vehicle_base, device_base) = token_bases(cfg.seed);
    let token_id = vehicle_base + u64::from(index);
    let device_token_id = device_base + u64::from(index);
    let device_contract = match vendor.device_kind() {
        DeviceKind::Aftermarket => &cfg.aftermarket_contract,
        DeviceKind::Synthetic => &cfg.synthetic_contract,
    };
    let info = VehicleInfo {
        index,
        vendor,
        token_id,
        subject: format!(
            "did:erc721:{}:{}:{}",
            cfg.chain_id, cfg.vehicle_contract, token_id
        ),
        source: vendor.source().to_string(),
        device_token_id,
        producer: format!(
            "did:erc721:{}:{}:{}",
            cfg.chain_id, device_contract, device_token_id
        ),
        vin,
        make: model.make,
        model: model.model,
        year,
        powertrain: model.powertrain,
        home_latitude: home_lat,
        home_longitude: home_lon,
        utc_offset_minutes: place.utc_offset_min,
    };
    (info, traits)
}
