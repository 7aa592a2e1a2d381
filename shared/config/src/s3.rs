//! The `S3_*` keys shared by the lake's data path and the blob store (one spelling for both).

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
