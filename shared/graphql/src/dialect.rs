//! The three GraphQL dialects one engine serves (dialects.md §1, §6): dq's own, telemetry-api's
//! and fetch-api's. A deployment serves one dialect per host (`GRAPHQL_DIALECT`), so each
//! existing client keeps its URL and queries. Resolvers read the [`Dialect`] and its
//! [`DialectSettings`] from the schema's data to pick argument names, gates, enum spellings,
//! null policies and error texts; everything else is shared.

use async_graphql::Context;
use dq_cloudevent::did::parse_address;
use dq_cloudevent::eip55;
use query::segments::Mechanism;

/// A GraphQL dialect.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// dq's own dialect (`subject: String!`, dq-query.md §1).
    #[default]
    Dq,
    /// telemetry-api's (`tokenId: Int!`, attestations, vinVCLatest; dialects.md §2).
    Telemetry,
    /// fetch-api's (`did: String!`, includeDeleted, indexes; dialects.md §3).
    Fetch,
}

impl Dialect {
    /// Every dialect, for tests and tooling.
    pub const ALL: [Dialect; 3] = [Dialect::Dq, Dialect::Telemetry, Dialect::Fetch];

    /// The setting's spelling (`dq`, `telemetry`, `fetch`).
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Dq => "dq",
            Dialect::Telemetry => "telemetry",
            Dialect::Fetch => "fetch",
        }
    }

    /// The committed SDL of the dialect (`schema/<name>.graphql`); a test asserts the served
    /// schema equals it.
    pub fn sdl(self) -> &'static str {
        match self {
            Dialect::Dq => include_str!("../schema/dq.graphql"),
            Dialect::Telemetry => include_str!("../schema/telemetry.graphql"),
            Dialect::Fetch => include_str!("../schema/fetch.graphql"),
        }
    }

    /// The error-text surface of the `auth` crate.
    pub fn surface(self) -> auth::Surface {
        match self {
            Dialect::Dq => auth::Surface::Dq,
            Dialect::Telemetry => auth::Surface::Telemetry,
            Dialect::Fetch => auth::Surface::Fetch,
        }
    }

    /// The dialect of the request's schema (dq when none is attached).
    pub fn of(ctx: &Context<'_>) -> Dialect {
        ctx.data_opt::<Dialect>().copied().unwrap_or_default()
    }
}

impl std::str::FromStr for Dialect {
    type Err = String;

    fn from_str(s: &str) -> Result<Dialect, String> {
        Dialect::ALL
            .into_iter()
            .find(|d| d.name() == s.trim())
            .ok_or_else(|| format!("GRAPHQL_DIALECT must be dq, telemetry or fetch, not {s:?}"))
    }
}

/// A `DetectionMechanism` value as the dialect spells it: UPPER_SNAKE in dq, camelCase in
/// telemetry (dialects.md §2.2).
pub fn mechanism_name(dialect: Dialect, m: Mechanism) -> &'static str {
    match (dialect, m) {
        (Dialect::Telemetry, Mechanism::IgnitionDetection) => "ignitionDetection",
        (Dialect::Telemetry, Mechanism::FrequencyAnalysis) => "frequencyAnalysis",
        (Dialect::Telemetry, Mechanism::ChangePointDetection) => "changePointDetection",
        (Dialect::Telemetry, Mechanism::Idling) => "idling",
        (Dialect::Telemetry, Mechanism::Refuel) => "refuel",
        (Dialect::Telemetry, Mechanism::Recharge) => "recharge",
        (_, m) => m.as_str(),
    }
}

/// The mechanism a dialect's enum value names.
pub fn mechanism(dialect: Dialect, name: &str) -> Option<Mechanism> {
    Mechanism::ALL
        .into_iter()
        .find(|m| mechanism_name(dialect, *m) == name)
}

/// A shared text that names mechanisms (the dailyActivity rejection, §2.3) in the dialect's
/// spelling.
pub fn spell_mechanisms(dialect: Dialect, text: &str) -> String {
    Mechanism::ALL.into_iter().fold(text.to_string(), |t, m| {
        t.replace(m.as_str(), mechanism_name(dialect, m))
    })
}

/// Production vehicle NFT contract (dialects.md §2.3).
pub const DEFAULT_VEHICLE_CONTRACT: &str = "0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF";
/// Production chain (Polygon).
pub const DEFAULT_CHAIN_ID: u64 = 137;
/// The data version of attestation-api's VIN credentials (dialects.md §2.6).
pub const DEFAULT_VIN_DATA_VERSION: &str = "vin/v1.0";

/// What the telemetry dialect needs beyond dq's settings (dialects.md §6.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DialectSettings {
    /// `DIMO_REGISTRY_CHAIN_ID`: the chain of vehicle DIDs built from `tokenId`.
    pub chain_id: u64,
    /// `VEHICLE_NFT_ADDRESS`: the contract of vehicle DIDs and of the vehicle gate.
    pub vehicle_contract: [u8; 20],
    /// `STORAGE_NODE_DEV_LICENSE`: the attester of VIN credentials (`vinVCLatest`); required
    /// by the telemetry dialect.
    pub storage_node_dev_license: Option<[u8; 20]>,
    /// `VIN_DATA_VERSION`.
    pub vin_data_version: String,
}

impl Default for DialectSettings {
    fn default() -> Self {
        DialectSettings {
            chain_id: DEFAULT_CHAIN_ID,
            vehicle_contract: parse_address(DEFAULT_VEHICLE_CONTRACT).unwrap_or([0; 20]),
            storage_node_dev_license: None,
            vin_data_version: DEFAULT_VIN_DATA_VERSION.to_string(),
        }
    }
}

impl DialectSettings {
    /// Reads the dialect and its settings from `lookup` (the environment in production).
    ///
    /// # Errors
    /// Every invalid value at once; a telemetry dialect without `STORAGE_NODE_DEV_LICENSE`.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<(Dialect, DialectSettings), String> {
        let get = |k: &str| lookup(k).filter(|v| !v.trim().is_empty());
        let mut bad = Vec::new();
        let dialect = match get("GRAPHQL_DIALECT").map(|v| v.parse::<Dialect>()) {
            None => Dialect::Dq,
            Some(Ok(d)) => d,
            Some(Err(e)) => {
                bad.push(e);
                Dialect::Dq
            }
        };
        let mut s = DialectSettings::default();
        if let Some(v) = get("DIMO_REGISTRY_CHAIN_ID") {
            match v.trim().parse() {
                Ok(c) => s.chain_id = c,
                Err(_) => bad.push("DIMO_REGISTRY_CHAIN_ID: not an unsigned integer".into()),
            }
        }
        let address = |key: &str, bad: &mut Vec<String>| -> Option<[u8; 20]> {
            let v = get(key)?;
            match parse_address(v.trim()) {
                Ok(a) => Some(a),
                Err(_) => {
                    bad.push(format!("{key}: not a 20-byte hex address"));
                    None
                }
            }
        };
        if let Some(a) = address("VEHICLE_NFT_ADDRESS", &mut bad) {
            s.vehicle_contract = a;
        }
        s.storage_node_dev_license = address("STORAGE_NODE_DEV_LICENSE", &mut bad);
        if let Some(v) = get("VIN_DATA_VERSION") {
            s.vin_data_version = v.trim().to_string();
        }
        if dialect == Dialect::Telemetry
            && s.storage_node_dev_license.is_none()
            && get("STORAGE_NODE_DEV_LICENSE").is_none()
        {
            bad.push("STORAGE_NODE_DEV_LICENSE: required by the telemetry dialect".into());
        }
        if bad.is_empty() {
            Ok((dialect, s))
        } else {
            Err(bad.join("; "))
        }
    }

    /// The vehicle DID of a telemetry `tokenId` (dialects.md §2.3).
    pub fn vehicle_did(&self, token_id: u32) -> String {
        format!(
            "did:erc721:{}:{}:{token_id}",
            self.chain_id,
            eip55(&self.vehicle_contract)
        )
    }

    /// The settings of the request's schema (defaults when none are attached).
    pub fn of<'a>(ctx: &Context<'a>) -> std::borrow::Cow<'a, DialectSettings> {
        match ctx.data_opt::<DialectSettings>() {
            Some(s) => std::borrow::Cow::Borrowed(s),
            None => std::borrow::Cow::Owned(DialectSettings::default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn defaults_to_dq_with_production_vehicles() {
        let (d, s) = DialectSettings::from_lookup(env(&[])).unwrap();
        assert_eq!(d, Dialect::Dq);
        assert_eq!(
            s.vehicle_did(39718),
            "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:39718"
        );
        assert_eq!(s.vin_data_version, "vin/v1.0");
    }

    #[test]
    fn telemetry_needs_the_storage_node_license() {
        let e = DialectSettings::from_lookup(env(&[("GRAPHQL_DIALECT", "telemetry")])).unwrap_err();
        assert!(e.contains("STORAGE_NODE_DEV_LICENSE"), "{e}");
        let (d, s) = DialectSettings::from_lookup(env(&[
            ("GRAPHQL_DIALECT", "telemetry"),
            (
                "STORAGE_NODE_DEV_LICENSE",
                "0x49eaf63ed94fef3d40692862eee2c8db416b1a5f",
            ),
            ("DIMO_REGISTRY_CHAIN_ID", "80002"),
            (
                "VEHICLE_NFT_ADDRESS",
                "0x45fbCD3ef7361d156e8b16F5538AE36DEdf61Da8",
            ),
        ]))
        .unwrap();
        assert_eq!(d, Dialect::Telemetry);
        assert_eq!(
            s.vehicle_did(7),
            "did:erc721:80002:0x45fbCD3ef7361d156e8b16F5538AE36DEdf61Da8:7"
        );
        assert_eq!(
            eip55(&s.storage_node_dev_license.unwrap()),
            "0x49eAf63eD94FEf3d40692862Eee2C8dB416B1a5f"
        );
    }

    #[test]
    fn mechanisms_round_trip_in_each_spelling() {
        for d in Dialect::ALL {
            for m in Mechanism::ALL {
                assert_eq!(mechanism(d, mechanism_name(d, m)), Some(m));
            }
        }
        assert_eq!(mechanism(Dialect::Telemetry, "IDLING"), None);
        assert_eq!(mechanism(Dialect::Dq, "idling"), None);
        assert_eq!(
            spell_mechanisms(
                Dialect::Telemetry,
                "dailyActivity does not accept mechanism IDLING; use IGNITION_DETECTION, FREQUENCY_ANALYSIS, or CHANGE_POINT_DETECTION"
            ),
            "dailyActivity does not accept mechanism idling; use ignitionDetection, frequencyAnalysis, or changePointDetection"
        );
    }

    #[test]
    fn reports_every_bad_value() {
        let e = DialectSettings::from_lookup(env(&[
            ("GRAPHQL_DIALECT", "graphql"),
            ("DIMO_REGISTRY_CHAIN_ID", "-1"),
            ("VEHICLE_NFT_ADDRESS", "0x12"),
        ]))
        .unwrap_err();
        for key in [
            "GRAPHQL_DIALECT",
            "DIMO_REGISTRY_CHAIN_ID",
            "VEHICLE_NFT_ADDRESS",
        ] {
            assert!(e.contains(key), "{e}");
        }
    }
}
