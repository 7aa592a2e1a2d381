//! The three GraphQL dialects dq serves: its own, telemetry-api's and fetch-api's. Defined here,
//! at the bottom of the graph, so the comparison rules, `dqctl reconcile` and the graphql engine
//! (which adds what it serves differently in each, `dq_graphql::DialectExt`) name one enum.

/// A GraphQL dialect (the spellings of `GRAPHQL_DIALECT`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// dq's own dialect (`subject: String!`).
    #[default]
    Dq,
    /// telemetry-api's (`tokenId: Int!`, attestations, vinVCLatest).
    Telemetry,
    /// fetch-api's (`did: String!`, includeDeleted, indexes).
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

    /// The dialect `value` spells (surrounding white space ignored).
    ///
    /// # Errors
    /// `value` names no dialect: the text names `setting` (`GRAPHQL_DIALECT`, `--dialect`) and
    /// the accepted spellings.
    pub fn parse_setting(value: &str, setting: &str) -> Result<Dialect, String> {
        Dialect::ALL
            .into_iter()
            .find(|d| d.name() == value.trim())
            .ok_or_else(|| format!("{setting} must be dq, telemetry or fetch, not {value:?}"))
    }
}

impl std::str::FromStr for Dialect {
    type Err = String;

    fn from_str(s: &str) -> Result<Dialect, String> {
        Dialect::parse_setting(s, "dialect")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_spelling_and_names_the_setting_when_wrong() {
        for d in Dialect::ALL {
            assert_eq!(format!(" {} ", d.name()).parse::<Dialect>(), Ok(d));
        }
        assert_eq!(
            Dialect::parse_setting("graphql", "GRAPHQL_DIALECT"),
            Err("GRAPHQL_DIALECT must be dq, telemetry or fetch, not \"graphql\"".to_string())
        );
        assert_eq!(
            "graphql".parse::<Dialect>(),
            Err("dialect must be dq, telemetry or fetch, not \"graphql\"".to_string())
        );
    }
}
