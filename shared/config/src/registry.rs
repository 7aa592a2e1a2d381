//! The vehicle registry pair: the chain and the vehicle NFT contract, read by the materializer
//! (its vehicle gate) and the GraphQL Lambda (the telemetry dialect's `tokenId` → DID).
//!
//! One parser, two documented readings of "unset" (docs/settings.toml): the gate is off
//! ([`VehicleRegistry::gate`]); DIDs use the production pair ([`VehicleRegistry::or_production`]).

use crate::Settings;

/// Chain of the vehicle NFT contract (Go's name).
pub const DIMO_REGISTRY_CHAIN_ID: &str = "DIMO_REGISTRY_CHAIN_ID";
/// Vehicle NFT contract (Go's name).
pub const VEHICLE_NFT_ADDRESS: &str = "VEHICLE_NFT_ADDRESS";
/// Production vehicle NFT contract (telemetry's `tokenId` maps to a subject under it).
pub const DEFAULT_VEHICLE_CONTRACT: [u8; 20] = [
    0xba, 0x57, 0x38, 0xa1, 0x8d, 0x83, 0xd4, 0x18, 0x47, 0xdf, 0xfb, 0xdc, 0x61, 0x01, 0xd3, 0x7c,
    0x69, 0xc9, 0xb0, 0xcf,
];
/// Production chain (Polygon).
pub const DEFAULT_CHAIN_ID: u64 = 137;

/// The pair as given; each half `None` when unset or malformed (then a problem is recorded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VehicleRegistry {
    /// [`DIMO_REGISTRY_CHAIN_ID`].
    pub chain_id: Option<u64>,
    /// [`VEHICLE_NFT_ADDRESS`].
    pub vehicle_contract: Option<[u8; 20]>,
}

impl VehicleRegistry {
    /// Reads both keys, recording malformed values in `settings`.
    pub fn read<F: Fn(&str) -> Option<String>>(settings: &mut Settings<F>) -> Self {
        VehicleRegistry {
            chain_id: settings.parsed(DIMO_REGISTRY_CHAIN_ID, |v| {
                v.parse::<u64>()
                    .map_err(|_| "not an unsigned integer".to_string())
            }),
            vehicle_contract: settings.parsed(VEHICLE_NFT_ADDRESS, parse_address),
        }
    }

    /// The pair for vehicle DIDs: each unset half is the production one.
    pub fn or_production(&self) -> (u64, [u8; 20]) {
        (
            self.chain_id.unwrap_or(DEFAULT_CHAIN_ID),
            self.vehicle_contract.unwrap_or(DEFAULT_VEHICLE_CONTRACT),
        )
    }

    /// The pair of a vehicle gate: `None` (gate off) without a contract or with the zero
    /// address; a contract needs a non-zero chain, else a problem is recorded in `settings`.
    pub fn gate<F: Fn(&str) -> Option<String>>(
        &self,
        settings: &mut Settings<F>,
    ) -> Option<(u64, [u8; 20])> {
        let contract = self.vehicle_contract.filter(|c| *c != [0; 20])?;
        match self.chain_id {
            Some(chain_id) if chain_id > 0 => Some((chain_id, contract)),
            _ => {
                settings.problem(format!(
                    "{DIMO_REGISTRY_CHAIN_ID}: required when {VEHICLE_NFT_ADDRESS} is set"
                ));
                None
            }
        }
    }
}

/// A 20-byte hex address setting, with or without `0x`.
///
/// # Errors
/// Anything that is not 40 hex digits.
pub fn parse_address(value: &str) -> Result<[u8; 20], String> {
    let digits = value
        .strip_prefix("0x")
        .or_else(|| value.strip_prefix("0X"))
        .unwrap_or(value);
    let mut out = [0u8; 20];
    if digits.len() != 40 || hex::decode_to_slice(digits, &mut out).is_err() {
        return Err("not a 20-byte hex address".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pairs_lookup;

    const AMOY: &str = "0x45fbCD3ef7361d156e8b16F5538AE36DEdf61Da8";

    /// What one environment yields: the pair read, the gate, the problems recorded.
    struct Read {
        registry: VehicleRegistry,
        gate: Option<(u64, [u8; 20])>,
        problems: Vec<String>,
    }

    fn read(pairs: &[(&str, &str)]) -> Read {
        let mut s = Settings::new(pairs_lookup(pairs));
        let registry = VehicleRegistry::read(&mut s);
        let gate = registry.gate(&mut s);
        Read {
            registry,
            gate,
            problems: s.problems().to_vec(),
        }
    }

    #[test]
    fn unset_is_gate_off_and_production_dids() {
        let Read {
            registry: r,
            gate,
            problems,
        } = read(&[]);
        assert_eq!(r, VehicleRegistry::default());
        assert_eq!(gate, None);
        assert!(problems.is_empty());
        assert_eq!(
            r.or_production(),
            (
                137,
                parse_address("0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF").unwrap()
            )
        );
    }

    #[test]
    fn a_full_pair_is_both() {
        let Read {
            registry: r,
            gate,
            problems,
        } = read(&[
            (DIMO_REGISTRY_CHAIN_ID, " 80002 "),
            (VEHICLE_NFT_ADDRESS, AMOY),
        ]);
        let pair = (80002, parse_address(AMOY).unwrap());
        assert_eq!((gate, r.or_production()), (Some(pair), pair));
        assert!(problems.is_empty());
    }

    #[test]
    fn the_gate_needs_a_chain_and_a_non_zero_contract() {
        let Read {
            registry: r,
            gate,
            problems,
        } = read(&[(VEHICLE_NFT_ADDRESS, AMOY)]);
        assert_eq!(gate, None);
        assert_eq!(
            problems,
            ["DIMO_REGISTRY_CHAIN_ID: required when VEHICLE_NFT_ADDRESS is set"]
        );
        // DIDs take the production chain for the missing half.
        assert_eq!(r.or_production().0, 137);
        let Read {
            registry: _,
            gate,
            problems,
        } = read(&[(DIMO_REGISTRY_CHAIN_ID, "0"), (VEHICLE_NFT_ADDRESS, AMOY)]);
        assert_eq!(gate, None);
        assert_eq!(problems.len(), 1);
        let zero = "0x0000000000000000000000000000000000000000";
        let Read {
            registry: _,
            gate,
            problems,
        } = read(&[(VEHICLE_NFT_ADDRESS, zero)]);
        assert_eq!((gate, problems.len()), (None, 0));
    }

    #[test]
    fn malformed_values_are_named() {
        let Read {
            registry: r,
            gate,
            problems,
        } = read(&[
            (DIMO_REGISTRY_CHAIN_ID, "-1"),
            (VEHICLE_NFT_ADDRESS, "0x12"),
        ]);
        assert_eq!((r, gate), (VehicleRegistry::default(), None));
        assert_eq!(
            problems,
            [
                "DIMO_REGISTRY_CHAIN_ID: not an unsigned integer",
                "VEHICLE_NFT_ADDRESS: not a 20-byte hex address"
            ]
        );
        let Read {
            registry: _,
            gate,
            problems,
        } = read(&[(DIMO_REGISTRY_CHAIN_ID, "x"), (VEHICLE_NFT_ADDRESS, AMOY)]);
        assert_eq!(gate, None);
        assert_eq!(
            problems,
            [
                "DIMO_REGISTRY_CHAIN_ID: not an unsigned integer",
                "DIMO_REGISTRY_CHAIN_ID: required when VEHICLE_NFT_ADDRESS is set"
            ]
        );
    }

    #[test]
    fn addresses_with_or_without_prefix() {
        assert_eq!(parse_address(AMOY), parse_address(&AMOY[2..]));
        assert_eq!(
            parse_address(&AMOY.replace("0x", "0X")),
            parse_address(AMOY)
        );
        assert!(parse_address("0xzz").is_err());
    }
}
