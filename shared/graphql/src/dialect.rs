//! The three GraphQL dialects one engine serves: dq's own, telemetry-api's
//! and fetch-api's. A deployment serves one dialect per host (`GRAPHQL_DIALECT`), so each
//! existing client keeps its URL and queries. Resolvers read the [`Dialect`] and its
//! [`DialectSettings`] from the schema's data to pick argument names, gates, enum spellings,
//! null policies and error texts; everything else is shared.

use async_graphql::Context;
use dq_cloudevent::eip55;
use dq_config::registry::parse_address;
use dq_config::{Settings, VehicleRegistry};
use dq_query::segments::Mechanism;
use dq_rawquery::Voiding;

pub use dq_reconcile::Dialect;

/// What the engine serves differently in each [`Dialect`] (the enum itself is dq-reconcile's,
/// shared with the comparison rules and `dqctl reconcile`).
pub trait DialectExt: Sized {
    /// The committed SDL of the dialect (`schema/<name>.graphql`); a test asserts the served
    /// schema equals it.
    fn sdl(self) -> &'static str;

    /// The error-text surface of the `auth` crate.
    fn surface(self) -> dq_auth::Surface;

    /// The dialect of the request's schema (dq when none is attached).
    fn of(ctx: &Context<'_>) -> Self;

    /// The argument that names the vehicle (or the subject of cloud events) in root fields:
    /// `subject` (dq), `tokenId` (telemetry), `did` (fetch).
    fn vehicle_arg(self) -> &'static str;

    /// Whether the vehicle argument is an NFT token id (`Int!`, the DID built from it) rather
    /// than a DID (`String!`).
    fn vehicle_by_token_id(self) -> bool;

    /// Whether cloud-event reads take `includeDeleted` (fetch-api's argument).
    fn offers_include_deleted(self) -> bool;

    /// The tombstone policy of a cloud-event read: fetch voids only events whose tombstone
    /// comes from the same source, and nothing with `includeDeleted: true`; dq hides every
    /// tombstoned event.
    fn voiding(self, include_deleted: bool) -> Voiding;

    /// Whether `latestCloudEvent` answers `null` when nothing matches (fetch: aliased
    /// per-source lookups must not null each other) rather than an error (dq: non-null).
    fn latest_may_be_null(self) -> bool;

    /// Whether errors carry an `extensions.code` (fetch-api's had none).
    fn codes_errors(self) -> bool;

    /// A `DetectionMechanism` value as the dialect spells it: UPPER_SNAKE in dq, camelCase in
    /// telemetry.
    fn mechanism_name(self, m: Mechanism) -> &'static str;

    /// The mechanism a dialect's enum value names.
    fn mechanism(self, name: &str) -> Option<Mechanism>;

    /// A shared text that names mechanisms (the dailyActivity rejection) in the dialect's
    /// spelling.
    fn spell_mechanisms(self, text: &str) -> String;
}

impl DialectExt for Dialect {
    fn sdl(self) -> &'static str {
        match self {
            Dialect::Dq => include_str!("../schema/dq.graphql"),
            Dialect::Telemetry => include_str!("../schema/telemetry.graphql"),
            Dialect::Fetch => include_str!("../schema/fetch.graphql"),
        }
    }

    fn surface(self) -> dq_auth::Surface {
        match self {
            Dialect::Dq => dq_auth::Surface::Dq,
            Dialect::Telemetry => dq_auth::Surface::Telemetry,
            Dialect::Fetch => dq_auth::Surface::Fetch,
        }
    }

    fn of(ctx: &Context<'_>) -> Dialect {
        ctx.data_opt::<Dialect>().copied().unwrap_or_default()
    }

    fn vehicle_arg(self) -> &'static str {
        match self {
            Dialect::Dq => "subject",
            Dialect::Telemetry => "tokenId",
            Dialect::Fetch => "did",
        }
    }

    fn vehicle_by_token_id(self) -> bool {
        self == Dialect::Telemetry
    }

    fn offers_include_deleted(self) -> bool {
        self == Dialect::Fetch
    }

    fn voiding(self, include_deleted: bool) -> Voiding {
        match (self.offers_include_deleted(), include_deleted) {
            (false, _) => Voiding::HideTombstones,
            (true, false) => Voiding::SourceMatched,
            (true, true) => Voiding::None,
        }
    }

    fn latest_may_be_null(self) -> bool {
        self == Dialect::Fetch
    }

    fn codes_errors(self) -> bool {
        self != Dialect::Fetch
    }

    fn mechanism_name(self, m: Mechanism) -> &'static str {
        match (self, m) {
            (Dialect::Telemetry, Mechanism::IgnitionDetection) => "ignitionDetection",
            (Dialect::Telemetry, Mechanism::FrequencyAnalysis) => "frequencyAnalysis",
            (Dialect::Telemetry, Mechanism::ChangePointDetection) => "changePointDetection",
            (Dialect::Telemetry, Mechanism::Idling) => "idling",
            (Dialect::Telemetry, Mechanism::Refuel) => "refuel",
            (Dialect::Telemetry, Mechanism::Recharge) => "recharge",
            (_, m) => m.as_str(),
        }
    }

    fn mechanism(self, name: &str) -> Option<Mechanism> {
        Mechanism::ALL
            .into_iter()
            .find(|m| self.mechanism_name(*m) == name)
    }

    fn spell_mechanisms(self, text: &str) -> String {
        Mechanism::ALL.into_iter().fold(text.to_string(), |t, m| {
            t.replace(m.as_str(), self.mechanism_name(m))
        })
    }
}

/// The data version of attestation-api's VIN credentials.
pub const DEFAULT_VIN_DATA_VERSION: &str = "vin/v1.0";

/// What the telemetry dialect needs beyond dq's settings.
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
        // Unset, vehicle DIDs are the production registry's.
        let (chain_id, vehicle_contract) = VehicleRegistry::default().or_production();
        DialectSettings {
            chain_id,
            vehicle_contract,
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
        let mut settings = Settings::new(lookup);
        let dialect = match settings
            .get("GRAPHQL_DIALECT")
            .map(|v| Dialect::parse_setting(&v, "GRAPHQL_DIALECT"))
        {
            None => Dialect::Dq,
            Some(Ok(d)) => d,
            Some(Err(e)) => {
                settings.problem(e);
                Dialect::Dq
            }
        };
        let (chain_id, vehicle_contract) = VehicleRegistry::read(&mut settings).or_production();
        let mut s = DialectSettings {
            chain_id,
            vehicle_contract,
            ..DialectSettings::default()
        };
        s.storage_node_dev_license = settings.parsed("STORAGE_NODE_DEV_LICENSE", parse_address);
        if let Some(v) = settings.get("VIN_DATA_VERSION") {
            s.vin_data_version = v;
        }
        if dialect == Dialect::Telemetry
            && s.storage_node_dev_license.is_none()
            && settings.get("STORAGE_NODE_DEV_LICENSE").is_none()
        {
            settings.problem("STORAGE_NODE_DEV_LICENSE: required by the telemetry dialect");
        }
        settings.check()?;
        Ok((dialect, s))
    }

    /// The vehicle DID of a telemetry `tokenId`.
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

    use dq_config::pairs_lookup as env;

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
                assert_eq!(d.mechanism(d.mechanism_name(m)), Some(m));
            }
        }
        assert_eq!(Dialect::Telemetry.mechanism("IDLING"), None);
        assert_eq!(Dialect::Dq.mechanism("idling"), None);
        assert_eq!(
            Dialect::Telemetry.spell_mechanisms(
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
        assert!(
            e.contains(r#"GRAPHQL_DIALECT must be dq, telemetry or fetch, not "graphql""#),
            "{e}"
        );
    }
}
