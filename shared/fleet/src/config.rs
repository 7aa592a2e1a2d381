//! Fleet configuration: what callers give ([`FleetConfig`]) and its validated form.

use crate::vendor::{
    Vendor, PROD_AFTERMARKET_CONTRACT, PROD_CHAIN_ID, PROD_SYNTHETIC_CONTRACT,
    PROD_VEHICLE_CONTRACT,
};
use chrono::{DateTime, TimeZone, Utc};
use dq_cloudevent::did::{eip55, parse_address};
use serde::Serialize;

/// Largest fleet accepted; keeps token ids and per-vehicle state bounded.
pub const MAX_VEHICLES: u32 = 1_000_000;
/// Longest horizon accepted, in days.
pub const MAX_DAYS: u32 = 3_660;
/// Driving emission rate ceiling: the kinematics step once per second, so 60/min is one payload
/// per simulated second.
pub const MAX_SIGNALS_PER_MINUTE: u32 = 60;
/// KSUID timestamps start at this Unix second; earlier fleets could not mint real ids.
const KSUID_EPOCH_S: i64 = 1_400_000_000;
/// KSUID timestamps are 32-bit seconds past their epoch.
const KSUID_LAST_S: i64 = KSUID_EPOCH_S + u32::MAX as i64;

/// Errors from building a fleet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A configuration value is out of range or malformed.
    #[error("invalid fleet config `{field}`: {reason}")]
    InvalidConfig {
        /// The [`FleetConfig`] field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

/// Crate result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Relative weights of the vendors in a fleet. Every vendor with a non-zero weight is
/// guaranteed to appear once the fleet has at least as many vehicles as such vendors; beyond
/// that, vehicles draw a vendor with these weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct VendorMix {
    /// Default-module oracle (ICE and non-Tesla EVs).
    pub default: u32,
    /// Ruptela aftermarket devices.
    pub ruptela: u32,
    /// Kaufmann (Ruptela protocol) synthetic devices.
    pub kaufmann: u32,
    /// AutoPi aftermarket devices.
    pub autopi: u32,
    /// HashDog / Macaron LoRaWAN devices.
    pub hashdog: u32,
    /// Tesla Fleet API polling.
    pub tesla_api: u32,
    /// Tesla Fleet Telemetry streaming.
    pub tesla_telemetry: u32,
}

impl Default for VendorMix {
    /// A realistic connected fleet: aftermarket devices dominate, Teslas are a large EV share.
    fn default() -> Self {
        Self {
            default: 15,
            ruptela: 25,
            kaufmann: 10,
            autopi: 20,
            hashdog: 5,
            tesla_api: 10,
            tesla_telemetry: 15,
        }
    }
}

impl VendorMix {
    /// A mix with only `vendor`.
    pub fn only(vendor: Vendor) -> Self {
        let mut mix = Self {
            default: 0,
            ruptela: 0,
            kaufmann: 0,
            autopi: 0,
            hashdog: 0,
            tesla_api: 0,
            tesla_telemetry: 0,
        };
        *mix.weight_mut(vendor) = 1;
        mix
    }

    /// The weight of `vendor`.
    pub fn weight(&self, vendor: Vendor) -> u32 {
        match vendor {
            Vendor::Default => self.default,
            Vendor::Ruptela => self.ruptela,
            Vendor::Kaufmann => self.kaufmann,
            Vendor::AutoPi => self.autopi,
            Vendor::HashDog => self.hashdog,
            Vendor::TeslaApi => self.tesla_api,
            Vendor::TeslaTelemetry => self.tesla_telemetry,
        }
    }

    fn weight_mut(&mut self, vendor: Vendor) -> &mut u32 {
        match vendor {
            Vendor::Default => &mut self.default,
            Vendor::Ruptela => &mut self.ruptela,
            Vendor::Kaufmann => &mut self.kaufmann,
            Vendor::AutoPi => &mut self.autopi,
            Vendor::HashDog => &mut self.hashdog,
            Vendor::TeslaApi => &mut self.tesla_api,
            Vendor::TeslaTelemetry => &mut self.tesla_telemetry,
        }
    }

    /// Sum of all weights (as u64 so it cannot overflow).
    pub fn total(&self) -> u64 {
        Vendor::ALL.iter().map(|&v| u64::from(self.weight(v))).sum()
    }
}

/// What to generate. Every field has a production-like default ([`FleetConfig::default`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetConfig {
    /// Number of vehicles.
    pub vehicles: u32,
    /// Length of the horizon in days, starting at [`FleetConfig::start`].
    pub days: u32,
    /// Status payloads per minute while a vehicle drives (1..=60).
    pub signals_per_minute: u32,
    /// Master seed; the same seed and config give byte-identical output.
    pub seed: u64,
    /// Start of the horizon (truncated to whole milliseconds).
    pub start: DateTime<Utc>,
    /// Chain id in every DID.
    pub chain_id: u64,
    /// Vehicle NFT contract (subjects); any case, written EIP-55.
    pub vehicle_contract: String,
    /// Aftermarket device NFT contract (AutoPi, Ruptela, HashDog producers).
    pub aftermarket_contract: String,
    /// Synthetic device NFT contract (Tesla, Kaufmann and default-oracle producers).
    pub synthetic_contract: String,
    /// Vendor weights.
    pub vendor_mix: VendorMix,
}

impl Default for FleetConfig {
    /// 200 vehicles for 30 days from Monday 2025-06-02, 6 payloads/min while driving, on the
    /// production chain and contracts.
    fn default() -> Self {
        Self {
            vehicles: 200,
            days: 30,
            signals_per_minute: 6,
            seed: 42,
            start: Utc
                .with_ymd_and_hms(2025, 6, 2, 0, 0, 0)
                .single()
                .unwrap_or(DateTime::UNIX_EPOCH),
            chain_id: PROD_CHAIN_ID,
            vehicle_contract: PROD_VEHICLE_CONTRACT.to_string(),
            aftermarket_contract: PROD_AFTERMARKET_CONTRACT.to_string(),
            synthetic_contract: PROD_SYNTHETIC_CONTRACT.to_string(),
            vendor_mix: VendorMix::default(),
        }
    }
}

/// A checked config with derived values.
#[derive(Debug, Clone)]
pub(crate) struct Validated {
    pub config: FleetConfig,
    pub start_ms: i64,
    pub end_ms: i64,
    /// Milliseconds between status payloads while driving.
    pub interval_ms: i64,
}

fn invalid(field: &'static str, reason: impl Into<String>) -> Error {
    Error::InvalidConfig {
        field,
        reason: reason.into(),
    }
}

fn canonical_contract(field: &'static str, value: &str) -> Result<String> {
    parse_address(value)
        .map(|bytes| eip55(&bytes))
        .map_err(|e| invalid(field, e.to_string()))
}

impl FleetConfig {
    /// Checks ranges and canonicalises the contracts to EIP-55.
    pub(crate) fn validate(&self) -> Result<Validated> {
        let mut config = self.clone();
        if config.vehicles > MAX_VEHICLES {
            return Err(invalid("vehicles", format!("at most {MAX_VEHICLES}")));
        }
        if config.days == 0 || config.days > MAX_DAYS {
            return Err(invalid("days", format!("must be 1..={MAX_DAYS}")));
        }
        if config.signals_per_minute == 0 || config.signals_per_minute > MAX_SIGNALS_PER_MINUTE {
            return Err(invalid(
                "signals_per_minute",
                format!("must be 1..={MAX_SIGNALS_PER_MINUTE}"),
            ));
        }
        if config.vendor_mix.total() == 0 {
            return Err(invalid("vendor_mix", "all weights are zero"));
        }
        config.vehicle_contract = canonical_contract("vehicle_contract", &config.vehicle_contract)?;
        config.aftermarket_contract =
            canonical_contract("aftermarket_contract", &config.aftermarket_contract)?;
        config.synthetic_contract =
            canonical_contract("synthetic_contract", &config.synthetic_contract)?;
        let start_ms = config.start.timestamp_millis();
        let end_ms = start_ms + i64::from(config.days) * crate::jsonw::DAY_MS;
        if start_ms / 1000 < KSUID_EPOCH_S || end_ms / 1000 >= KSUID_LAST_S {
            return Err(invalid(
                "start",
                "horizon must lie between 2014-05-13 and 2150 (KSUID range)",
            ));
        }
        config.start = DateTime::from_timestamp_millis(start_ms).unwrap_or(config.start);
        let interval_ms = 60_000 / i64::from(config.signals_per_minute);
        Ok(Validated {
            config,
            start_ms,
            end_ms,
            interval_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate() {
        let v = FleetConfig::default().validate().unwrap();
        assert_eq!(v.config.vehicle_contract, PROD_VEHICLE_CONTRACT);
        assert_eq!(v.interval_ms, 10_000);
        assert_eq!(v.end_ms - v.start_ms, 30 * 86_400_000);
    }

    #[test]
    fn contracts_are_canonicalised() {
        let cfg = FleetConfig {
            vehicle_contract: PROD_VEHICLE_CONTRACT.to_lowercase(),
            ..FleetConfig::default()
        };
        assert_eq!(
            cfg.validate().unwrap().config.vehicle_contract,
            PROD_VEHICLE_CONTRACT
        );
    }

    #[test]
    fn rejects_bad_values() {
        let bad = [
            FleetConfig {
                days: 0,
                ..FleetConfig::default()
            },
            FleetConfig {
                signals_per_minute: 61,
                ..FleetConfig::default()
            },
            FleetConfig {
                aftermarket_contract: "0x123".into(),
                ..FleetConfig::default()
            },
            FleetConfig {
                vendor_mix: VendorMix {
                    default: 0,
                    ..VendorMix::only(Vendor::Default)
                },
                ..FleetConfig::default()
            },
            FleetConfig {
                start: DateTime::UNIX_EPOCH,
                ..FleetConfig::default()
            },
        ];
        for cfg in bad {
            assert!(cfg.validate().is_err(), "{cfg:?}");
        }
    }
}
