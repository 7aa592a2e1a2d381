//! Trusted networks (issue 22): the FetchService callers that run inside the VPC
//! (telemetry-api, attestation-api, rewards-api, identity-api) speak plaintext gRPC with no
//! token. When dq's fetch binary runs as a long-lived service, a caller whose TCP peer address
//! lies in one of these networks is served as a service, the way the VPC trusts it today.
//!
//! Only the peer of the accepted TCP connection is ever matched: a header such as
//! `X-Forwarded-For` is written by the client and proves nothing.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// One IPv4 or IPv6 network: an address with its host bits zero and a prefix length of at least
/// one bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

/// Why a network was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid network {entry:?}: {reason}")]
pub struct InvalidCidr {
    /// The entry as configured.
    pub entry: String,
    /// What is wrong with it.
    pub reason: String,
}

/// The mask of the top `prefix` bits of a `bits`-bit address.
fn mask(prefix: u8, bits: u32) -> u128 {
    match u32::from(prefix) {
        0 => 0,
        p => (u128::MAX << (128 - p)) >> (128 - bits),
    }
}

fn to_bits(ip: IpAddr) -> (u128, u32) {
    match ip {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32),
        IpAddr::V6(v6) => (u128::from(v6), 128),
    }
}

impl Cidr {
    /// True when `ip` lies in this network. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, how
    /// a dual-stack listener reports an IPv4 peer) is matched as the IPv4 address it carries.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let (net, bits) = to_bits(self.network);
        let (addr, addr_bits) = to_bits(ip.to_canonical());
        bits == addr_bits && addr & mask(self.prefix, bits) == net
    }
}

impl FromStr for Cidr {
    type Err = InvalidCidr;

    /// `a.b.c.d/n` or `x:…:y/n`; a bare address is the network of that one host.
    fn from_str(entry: &str) -> Result<Cidr, InvalidCidr> {
        let refuse = |reason: String| InvalidCidr {
            entry: entry.to_string(),
            reason,
        };
        let (addr, prefix) = match entry.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (entry, None),
        };
        let network: IpAddr = addr.parse().map_err(|_| {
            refuse("not an IPv4 or IPv6 network (e.g. 10.0.0.0/16, fd00::/8)".into())
        })?;
        let (bits_value, bits) = to_bits(network);
        let max = u8::try_from(bits).unwrap_or(u8::MAX);
        let prefix = match prefix {
            None => max,
            Some(p) => p.parse::<u8>().ok().filter(|p| *p <= max).ok_or_else(|| {
                refuse(format!(
                    "the prefix length must be a number from 1 to {max}"
                ))
            })?,
        };
        if prefix == 0 {
            return Err(refuse(
                "a /0 network trusts every address, so anyone who can reach the listener would \
                 read every vehicle's data without a token; list the VPC subnets the callers \
                 run in instead"
                    .into(),
            ));
        }
        if let IpAddr::V6(v6) = network {
            if v6.to_ipv4_mapped().is_some() {
                return Err(refuse(
                    "is an IPv4-mapped IPv6 network; write it as IPv4 (a.b.c.d/n)".into(),
                ));
            }
        }
        let host_bits = bits_value & !mask(prefix, bits);
        if host_bits != 0 {
            let masked = match network {
                IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(
                    u32::try_from(bits_value & mask(prefix, bits)).unwrap_or_default(),
                )),
                IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(bits_value & mask(prefix, bits))),
            };
            return Err(refuse(format!(
                "has host bits set; the network is {masked}/{prefix}"
            )));
        }
        Ok(Cidr { network, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// The networks whose callers FetchService serves without a token (`FETCH_GRPC_TRUSTED_CIDRS`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedNetworks {
    networks: Vec<Cidr>,
}

impl TrustedNetworks {
    /// No network is trusted.
    pub fn empty() -> TrustedNetworks {
        TrustedNetworks::default()
    }

    /// Parses a comma or whitespace separated list of networks.
    ///
    /// # Errors
    /// [`InvalidCidr`] for the first entry refused, or when the list names no network.
    pub fn parse(list: &str) -> Result<TrustedNetworks, InvalidCidr> {
        let networks = list
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty())
            .map(Cidr::from_str)
            .collect::<Result<Vec<_>, _>>()?;
        if networks.is_empty() {
            return Err(InvalidCidr {
                entry: list.to_string(),
                reason: "lists no network".into(),
            });
        }
        Ok(TrustedNetworks { networks })
    }

    /// True when no network is trusted.
    pub fn is_empty(&self) -> bool {
        self.networks.is_empty()
    }

    /// The networks, in configured order.
    pub fn networks(&self) -> &[Cidr] {
        &self.networks
    }

    /// The first network holding `peer`, the TCP peer address of an accepted connection.
    pub fn find(&self, peer: IpAddr) -> Option<&Cidr> {
        self.networks.iter().find(|n| n.contains(peer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn masks() {
        assert_eq!(mask(8, 32), 0xff00_0000);
        assert_eq!(mask(32, 32), 0xffff_ffff);
        assert_eq!(mask(1, 128), 1 << 127);
        assert_eq!(mask(128, 128), u128::MAX);
    }

    #[test]
    fn contains_matches_the_family_and_the_prefix() {
        let net: Cidr = "10.0.0.0/8".parse().unwrap();
        assert!(net.contains(ip("10.255.1.2")));
        assert!(!net.contains(ip("11.0.0.0")));
        assert!(net.contains(ip("::ffff:10.1.2.3")));
        assert!(!net.contains(ip("::a01:203")));
        let v6: Cidr = "fd00:ab::/32".parse().unwrap();
        assert!(v6.contains(ip("fd00:ab:1::9")));
        assert!(!v6.contains(ip("fd00:ac::1")));
        assert!(!v6.contains(ip("10.0.0.1")));
    }
}
