//! The connections (vendor integrations) a synthetic vehicle can report through, with the
//! constants that route their events to a decoder module.

use serde::Serialize;

/// AutoPi connection address.
pub const AUTOPI_SOURCE: &str = "0x5e31bBc786D7bEd95216383787deA1ab0f1c1897";
/// Ruptela connection address.
pub const RUPTELA_SOURCE: &str = "0xF26421509Efe92861a587482100c6d728aBf1CD0";
/// Kaufmann connection address (Ruptela protocol, synthetic devices).
pub const KAUFMANN_SOURCE: &str = "0x8D8cDB2B26423c8fDbb27321aF20b4659Ce919fD";
/// HashDog / Macaron (LoRaWAN) connection address.
pub const HASHDOG_SOURCE: &str = "0x4c674ddE8189aEF6e3b58F5a36d7438b2b1f6Bc2";
/// Tesla connection address (Fleet API and Fleet Telemetry share it).
pub const TESLA_SOURCE: &str = "0xc4035Fecb1cc906130423EF05f9C20977F643722";
/// The synthetic oracle that speaks the default-module format. Any address that is not a
/// registered module key routes to the default module; this one is fleet-made.
pub const DEFAULT_ORACLE_SOURCE: &str = "0x0Ac7C7A6d1E85f5e9B2B63C9D2E7D8f0c1b2A395";

/// Production chain id (Polygon).
pub const PROD_CHAIN_ID: u64 = 137;
/// Production vehicle NFT contract.
pub const PROD_VEHICLE_CONTRACT: &str = "0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF";
/// Production aftermarket device NFT contract.
pub const PROD_AFTERMARKET_CONTRACT: &str = "0x9c94C395cBcBDe662235E0A9d3bB87Ad708561BA";
/// Production synthetic device NFT contract.
pub const PROD_SYNTHETIC_CONTRACT: &str = "0x4804e8D1661cd1a1e5dDdE1ff458A7f878c0aC6D";

/// Ruptela status `dataversion`.
pub const RUPTELA_STATUS_DS: &str = "r/v0/s";
/// Ruptela location batch `dataversion`.
pub const RUPTELA_LOCATION_DS: &str = "r/v0/loc";
/// Ruptela DTC `dataversion`.
pub const RUPTELA_DTC_DS: &str = "r/v0/dtc";
/// Ruptela command (engine block) `dataversion`.
pub const RUPTELA_CMD_DS: &str = "r/v0/cmd";
/// AutoPi / HashDog `dataversion`.
pub const V2_DATA_VERSION: &str = "v2";
/// Tesla Fleet API `dataversion` (tesla-oracle's legacy poller).
pub const TESLA_API_DATA_VERSION: &str = "fleet_api/v1.0.0";
/// Tesla Fleet Telemetry `dataversion`; the decoder switches to protobuf on it.
pub const TESLA_TELEMETRY_DATA_VERSION: &str = "fleet_telemetry/v1.0.0";
/// The only content type connection payloads use.
pub const JSON_CONTENT_TYPE: &str = "application/json";

/// A vehicle's connection: which device or integration reports it, and so which payload shape,
/// source address and decoder module its events get.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Vendor {
    /// A synthetic oracle sending the default-module `{"signals":[...],"events":[...]}` shape.
    Default,
    /// Ruptela aftermarket device: hex OID status, location batches, DTCs, event counters.
    Ruptela,
    /// Kaufmann (Ruptela protocol under its own source, synthetic-device producer).
    Kaufmann,
    /// AutoPi aftermarket device: V2 `vehicle.signals` list.
    AutoPi,
    /// HashDog / Macaron LoRaWAN device: V2 list with a frame header.
    HashDog,
    /// Tesla Fleet API `vehicle_data` polling JSON.
    TeslaApi,
    /// Tesla Fleet Telemetry: base64 protobuf `Payload`s in a JSON wrapper.
    TeslaTelemetry,
}

/// Which NFT contract a vendor's producer DID lives on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum DeviceKind {
    /// A physical aftermarket device (AutoPi, Ruptela, HashDog).
    Aftermarket,
    /// A synthetic device minted for a software integration (Tesla, Kaufmann, default oracles).
    Synthetic,
}

impl Vendor {
    /// Every vendor, in a fixed order.
    pub const ALL: [Vendor; 7] = [
        Vendor::Default,
        Vendor::Ruptela,
        Vendor::Kaufmann,
        Vendor::AutoPi,
        Vendor::HashDog,
        Vendor::TeslaApi,
        Vendor::TeslaTelemetry,
    ];

    /// A short stable name.
    pub fn name(self) -> &'static str {
        match self {
            Vendor::Default => "default",
            Vendor::Ruptela => "ruptela",
            Vendor::Kaufmann => "kaufmann",
            Vendor::AutoPi => "autopi",
            Vendor::HashDog => "hashdog",
            Vendor::TeslaApi => "tesla_api",
            Vendor::TeslaTelemetry => "tesla_telemetry",
        }
    }

    /// The EIP-55 connection address din stamps as `source`; decoders dispatch on it.
    pub fn source(self) -> &'static str {
        match self {
            Vendor::Default => DEFAULT_ORACLE_SOURCE,
            Vendor::Ruptela => RUPTELA_SOURCE,
            Vendor::Kaufmann => KAUFMANN_SOURCE,
            Vendor::AutoPi => AUTOPI_SOURCE,
            Vendor::HashDog => HASHDOG_SOURCE,
            Vendor::TeslaApi | Vendor::TeslaTelemetry => TESLA_SOURCE,
        }
    }

    /// Which contract the producer DID uses.
    pub fn device_kind(self) -> DeviceKind {
        match self {
            Vendor::Ruptela | Vendor::AutoPi | Vendor::HashDog => DeviceKind::Aftermarket,
            Vendor::Default | Vendor::Kaufmann | Vendor::TeslaApi | Vendor::TeslaTelemetry => {
                DeviceKind::Synthetic
            }
        }
    }

    /// Whether the vendor's decoder produces `dimo.events` rows (default events and Ruptela
    /// counters); the others never send behaviour events.
    pub fn reports_events(self) -> bool {
        matches!(self, Vendor::Default | Vendor::Ruptela | Vendor::Kaufmann)
    }

    /// Whether the vendor reports a diagnostic trouble code list or count.
    pub fn reports_dtcs(self) -> bool {
        !matches!(self, Vendor::TeslaApi | Vendor::TeslaTelemetry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dq_cloudevent::did::{eip55, parse_address};

    #[test]
    fn addresses_are_eip55() {
        let all = [
            AUTOPI_SOURCE,
            RUPTELA_SOURCE,
            KAUFMANN_SOURCE,
            HASHDOG_SOURCE,
            TESLA_SOURCE,
            DEFAULT_ORACLE_SOURCE,
            PROD_VEHICLE_CONTRACT,
            PROD_AFTERMARKET_CONTRACT,
            PROD_SYNTHETIC_CONTRACT,
        ];
        for address in all {
            let canonical = eip55(&parse_address(address).unwrap());
            assert_eq!(address, canonical);
        }
    }
}
