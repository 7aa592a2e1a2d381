//! DIDs and Ethereum addresses.
//!
//! Parsing follows cloudevent's `did.go`: exact part counts, decimal `uint64` chain ids,
//! `IsHexAddress` contracts (optional `0x`, 40 hex digits, any case) and non-negative decimal
//! token ids of any size. Formatting writes addresses in EIP-55 checksum case and token ids
//! without leading zeros, which is how din canonicalizes subjects.

use sha3::{Digest, Keccak256};
use std::fmt;
use std::str::FromStr;

/// Why a string is not the expected DID or address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DidError {
    /// Wrong number of `:`-separated parts.
    #[error("invalid did: expected {expected} ':'-separated parts")]
    PartCount {
        /// How many parts the method requires.
        expected: usize,
    },
    /// The prefix is not `did`.
    #[error("invalid did: prefix is not 'did'")]
    Prefix,
    /// The method is not the one being parsed.
    #[error("invalid did: method {0:?} is not {1:?}")]
    Method(String, &'static str),
    /// The chain id is not a decimal uint64.
    #[error("invalid did: chain id {0:?} is not a decimal uint64")]
    ChainId(String),
    /// The address is not `0x` + 40 hex digits.
    #[error("invalid address {0:?}")]
    Address(String),
    /// The token id is not a non-negative decimal integer.
    #[error("invalid did: token id {0:?} is not a non-negative decimal integer")]
    TokenId(String),
    /// The legacy `did:nft` last part is not `<contract>_<token>`.
    #[error("invalid did: nft part {0:?} is not <contract>_<token>")]
    NftPart(String),
}

/// Formats a 20-byte address in EIP-55 mixed-case checksum form (`0x` + 40 hex digits): a hex
/// letter is uppercased when the matching nibble of keccak256(lowercase hex) is >= 8.
pub fn eip55(addr: &[u8; 20]) -> String {
    let lower = hex::encode(addr);
    let hash = Keccak256::digest(lower.as_bytes());
    let mut out = String::with_capacity(42);
    out.push_str("0x");
    // Each hash byte covers two hex digits: its high nibble the first, its low nibble the second.
    for (pair, &byte) in lower.as_bytes().chunks(2).zip(hash.iter()) {
        for (&c, nibble) in pair.iter().zip([byte >> 4, byte & 0x0f]) {
            out.push(char::from(if nibble >= 8 {
                c.to_ascii_uppercase()
            } else {
                c
            }));
        }
    }
    out
}

/// Parses an address like go-ethereum's `IsHexAddress` + `HexToAddress`: optional `0x`/`0X`,
/// then exactly 40 hex digits in any case. No checksum validation.
pub fn parse_address(s: &str) -> Result<[u8; 20], DidError> {
    dq_config::registry::parse_address(s).map_err(|_| DidError::Address(s.to_string()))
}

fn parse_chain(s: &str) -> Result<u64, DidError> {
    // Go's ParseUint: ASCII digits only, no sign.
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(DidError::ChainId(s.to_string()));
    }
    s.parse().map_err(|_| DidError::ChainId(s.to_string()))
}

fn check_token(s: &str) -> Result<(), DidError> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(DidError::TokenId(s.to_string()));
    }
    Ok(())
}

fn parse_token(s: &str) -> Result<String, DidError> {
    check_token(s)?;
    let trimmed = s.trim_start_matches('0');
    Ok(if trimmed.is_empty() {
        "0".to_string()
    } else {
        trimmed.to_string()
    })
}

/// Splits `did:<method>:...` into exactly `N` parts without allocating.
fn split_did<'a, const N: usize>(
    s: &'a str,
    method: &'static str,
) -> Result<[&'a str; N], DidError> {
    let mut parts = [""; N];
    let mut it = s.split(':');
    for slot in &mut parts {
        *slot = it.next().ok_or(DidError::PartCount { expected: N })?;
    }
    if it.next().is_some() {
        return Err(DidError::PartCount { expected: N });
    }
    if parts[0] != "did" {
        return Err(DidError::Prefix);
    }
    if parts[1] != method {
        return Err(DidError::Method(parts[1].to_string(), method));
    }
    Ok(parts)
}

/// `did:erc721:<chainId>:<contract>:<tokenId>`: an NFT (vehicle, aftermarket or synthetic
/// device).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Erc721Did {
    /// Chain id (137 in production).
    pub chain_id: u64,
    /// NFT contract address.
    pub contract: [u8; 20],
    /// Token id as a canonical decimal string (arbitrary size, no leading zeros).
    pub token_id: String,
}

impl Erc721Did {
    /// Parses either the `did:erc721:` form (5 parts) or the legacy `did:nft:` form (4 parts),
    /// choosing by part count like cloudevent's `DecodeERC721orNFTDID`.
    pub fn parse_erc721_or_nft(s: &str) -> Result<Self, DidError> {
        if s.split(':').count() == 4 {
            Self::parse_legacy_nft(s)
        } else {
            s.parse()
        }
    }

    /// Parses the legacy `did:nft:<chainId>:<contract>_<tokenId>` form.
    pub fn parse_legacy_nft(s: &str) -> Result<Self, DidError> {
        let p = split_did::<4>(s, "nft")?;
        let (contract, token) = match p[3].split('_').collect::<Vec<_>>().as_slice() {
            [c, t] => (*c, *t),
            _ => return Err(DidError::NftPart(p[3].to_string())),
        };
        Ok(Self {
            chain_id: parse_chain(p[2])?,
            contract: parse_address(contract)?,
            token_id: parse_token(token)?,
        })
    }

    /// Validates a `did:erc721:` DID and returns its chain id and contract without allocating
    /// (the vehicle gate runs this for every status row).
    pub fn parse_chain_and_contract(s: &str) -> Result<(u64, [u8; 20]), DidError> {
        let p = split_did::<5>(s, "erc721")?;
        check_token(p[4])?;
        Ok((parse_chain(p[2])?, parse_address(p[3])?))
    }

    /// Formats the legacy `did:nft:` form.
    pub fn to_legacy_nft(&self) -> String {
        format!(
            "did:nft:{}:{}_{}",
            self.chain_id,
            eip55(&self.contract),
            self.token_id
        )
    }
}

impl FromStr for Erc721Did {
    type Err = DidError;

    fn from_str(s: &str) -> Result<Self, DidError> {
        let p = split_did::<5>(s, "erc721")?;
        Ok(Self {
            chain_id: parse_chain(p[2])?,
            contract: parse_address(p[3])?,
            token_id: parse_token(p[4])?,
        })
    }
}

impl fmt::Display for Erc721Did {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "did:erc721:{}:{}:{}",
            self.chain_id,
            eip55(&self.contract),
            self.token_id
        )
    }
}

macro_rules! address_did {
    ($name:ident, $method:literal, $doc:literal) => {
        #[doc = $doc]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub struct $name {
            /// Chain id.
            pub chain_id: u64,
            /// The address.
            pub address: [u8; 20],
        }

        impl FromStr for $name {
            type Err = DidError;

            fn from_str(s: &str) -> Result<Self, DidError> {
                let p = split_did::<4>(s, $method)?;
                Ok(Self {
                    chain_id: parse_chain(p[2])?,
                    address: parse_address(p[3])?,
                })
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(
                    f,
                    concat!("did:", $method, ":{}:{}"),
                    self.chain_id,
                    eip55(&self.address)
                )
            }
        }
    };
}

address_did!(
    EthrDid,
    "ethr",
    "`did:ethr:<chainId>:<address>`: an Ethereum account (attestation subjects)."
);
address_did!(
    Erc20Did,
    "erc20",
    "`did:erc20:<chainId>:<address>`: an ERC-20 token contract."
);

#[cfg(test)]
mod tests {
    use super::*;

    const VEHICLE: &str = "0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF";

    #[test]
    fn eip55_matches_known_checksums() {
        for known in [
            VEHICLE,
            "0x9c94C395cBcBDe662235E0A9d3bB87Ad708561BA",
            "0x4804e8D1661cd1a1e5dDdE1ff458A7f878c0aC6D",
            "0xF26421509Efe92861a587482100c6d728aBf1CD0",
            "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
        ] {
            let addr = parse_address(&known.to_lowercase()).unwrap();
            assert_eq!(eip55(&addr), known);
        }
    }

    #[test]
    fn erc721_round_trip_canonicalizes() {
        let did: Erc721Did = format!("did:erc721:137:{}:007", VEHICLE.to_lowercase())
            .parse()
            .unwrap();
        assert_eq!(did.chain_id, 137);
        assert_eq!(did.token_id, "7");
        assert_eq!(did.to_string(), format!("did:erc721:137:{VEHICLE}:7"));
        let big: Erc721Did = format!("did:erc721:1:{VEHICLE}:123456789012345678901234567890")
            .parse()
            .unwrap();
        assert_eq!(big.token_id, "123456789012345678901234567890");
    }

    #[test]
    fn erc721_rejections() {
        let bad = [
            format!("did:erc721:137:{VEHICLE}"),
            format!("did:erc721:137:{VEHICLE}:1:2"),
            format!("DID:erc721:137:{VEHICLE}:1"),
            format!("did:nft:137:{VEHICLE}:1"),
            format!("did:erc721:-1:{VEHICLE}:1"),
            format!("did:erc721:+1:{VEHICLE}:1"),
            format!("did:erc721:18446744073709551616:{VEHICLE}:1"),
            "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0c:1".to_string(),
            "did:erc721:137:0xZA5738a18d83D41847dfFbDC6101d37C69c9B0cF:1".to_string(),
            format!("did:erc721:137:{VEHICLE}:-1"),
            format!("did:erc721:137:{VEHICLE}:"),
        ];
        for s in bad {
            assert!(s.parse::<Erc721Did>().is_err(), "{s}");
        }
    }

    #[test]
    fn chain_and_contract_fast_path_validates_everything() {
        let (chain, contract) =
            Erc721Did::parse_chain_and_contract(&format!("did:erc721:137:{VEHICLE}:1")).unwrap();
        assert_eq!((chain, eip55(&contract)), (137, VEHICLE.to_string()));
        assert!(
            Erc721Did::parse_chain_and_contract(&format!("did:erc721:137:{VEHICLE}:x")).is_err()
        );
        assert!(
            Erc721Did::parse_chain_and_contract(&format!("did:erc721:137:{VEHICLE}:1:2")).is_err()
        );
    }

    #[test]
    fn legacy_nft_is_rewritten_to_erc721() {
        let did =
            Erc721Did::parse_erc721_or_nft(&format!("did:nft:137:{}_42", VEHICLE.to_lowercase()))
                .unwrap();
        assert_eq!(did.to_string(), format!("did:erc721:137:{VEHICLE}:42"));
        assert_eq!(did.to_legacy_nft(), format!("did:nft:137:{VEHICLE}_42"));
        assert!(Erc721Did::parse_erc721_or_nft(&format!("did:nft:137:{VEHICLE}_4_2")).is_err());
        assert!(Erc721Did::parse_erc721_or_nft(&format!("did:erc721:137:{VEHICLE}:42")).is_ok());
    }

    #[test]
    fn ethr_and_erc20() {
        let ethr: EthrDid = format!(
            "did:ethr:137:{}",
            VEHICLE.to_uppercase().replace("0X", "0x")
        )
        .parse()
        .unwrap();
        assert_eq!(ethr.to_string(), format!("did:ethr:137:{VEHICLE}"));
        let erc20: Erc20Did = format!("did:erc20:1:{VEHICLE}").parse().unwrap();
        assert_eq!(erc20.to_string(), format!("did:erc20:1:{VEHICLE}"));
        assert!(format!("did:erc20:1:{VEHICLE}").parse::<EthrDid>().is_err());
    }
}
