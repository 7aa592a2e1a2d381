//! The `S3_*` keys shared by the lake's data path and the blob store, and [`S3Config`], the
//! settings they make: one spelling and one reading for both.

use crate::Settings;

/// S3 region.
pub const S3_AWS_REGION: &str = "S3_AWS_REGION";
/// Static S3 access key id; unset = the AWS credential chain.
pub const S3_AWS_ACCESS_KEY_ID: &str = "S3_AWS_ACCESS_KEY_ID";
/// Static S3 secret key (sensitive).
pub const S3_AWS_SECRET_ACCESS_KEY: &str = "S3_AWS_SECRET_ACCESS_KEY";
/// S3 endpoint override (`http://host:port` → path style, no TLS).
pub const S3_ENDPOINT: &str = "S3_ENDPOINT";
/// KMS key ARN for SSE-KMS on PUTs.
pub const S3_KMS_KEY_ID: &str = "S3_KMS_KEY_ID";

/// S3 settings, read from the keys above by [`S3Config::read`].
#[derive(Clone, Default, PartialEq, Eq)]
pub struct S3Config {
    /// Region, if set.
    pub region: Option<String>,
    /// Static key id; `None` selects the credential chain.
    pub access_key_id: Option<String>,
    /// Static secret key.
    pub secret_access_key: Option<String>,
    /// Endpoint URL (`http://127.0.0.1:5000`) for S3-compatible stores (path-style addressing).
    pub endpoint: Option<String>,
    /// SSE-KMS key ARN for PUTs.
    pub kms_key_id: Option<String>,
}

impl S3Config {
    /// Reads the `S3_*` keys through `settings`.
    pub fn read<F: Fn(&str) -> Option<String>>(settings: &Settings<F>) -> Self {
        S3Config {
            region: settings.get(S3_AWS_REGION),
            access_key_id: settings.get(S3_AWS_ACCESS_KEY_ID),
            secret_access_key: settings.get(S3_AWS_SECRET_ACCESS_KEY),
            endpoint: settings.get(S3_ENDPOINT),
            kms_key_id: settings.get(S3_KMS_KEY_ID),
        }
    }
}

impl std::fmt::Debug for S3Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Config")
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field(
                "secret_access_key",
                &self.secret_access_key.as_ref().map(|_| "***"),
            )
            .field("endpoint", &self.endpoint)
            .field("kms_key_id", &self.kms_key_id)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pairs_lookup;

    #[test]
    fn reads_every_key_and_hides_the_secret() {
        let settings = Settings::new(pairs_lookup(&[
            (S3_AWS_REGION, "eu-west-1"),
            (S3_AWS_ACCESS_KEY_ID, "AK"),
            (S3_AWS_SECRET_ACCESS_KEY, " topsecret "),
            (S3_ENDPOINT, "http://127.0.0.1:9"),
            (S3_KMS_KEY_ID, ""),
        ]));
        let s3 = S3Config::read(&settings);
        assert_eq!(
            s3,
            S3Config {
                region: Some("eu-west-1".into()),
                access_key_id: Some("AK".into()),
                secret_access_key: Some("topsecret".into()),
                endpoint: Some("http://127.0.0.1:9".into()),
                kms_key_id: None,
            }
        );
        let debug = format!("{s3:?}");
        assert!(
            !debug.contains("topsecret") && debug.contains("***"),
            "{debug}"
        );
    }
}
