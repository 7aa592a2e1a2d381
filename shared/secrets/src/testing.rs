//! Test fixtures (feature `testing`): secrets in the shared moto server, created and rotated
//! from synchronous or asynchronous tests alike (the calls run on the crate's runtime).

use crate::{wait_on_runtime, AwsAccess, Error, SecretsClient};

/// Access settings for the shared moto server.
pub fn moto_access() -> AwsAccess {
    let moto = dq_testkit::shared_moto();
    AwsAccess {
        endpoint: Some(moto.endpoint()),
        region: Some(moto.region().to_owned()),
        credentials: Some((moto.access_key().to_owned(), moto.secret_key().to_owned())),
    }
}

/// A client of the shared moto server.
pub fn moto_client() -> SecretsClient {
    SecretsClient::new(moto_access())
}

/// Creates a secret with a unique name holding `value` and returns its ARN.
///
/// # Panics
/// When moto refuses (a broken test setup).
pub fn create_secret(value: &str) -> String {
    let client = moto_client();
    let value = value.to_owned();
    wait_on_runtime(async move {
        let out = client
            .sdk()
            .await
            .create_secret()
            .name(dq_testkit::unique_name("secret"))
            .secret_string(value)
            .send()
            .await
            .map_err(|e| setup_error("CreateSecret", e))?;
        Ok(out.arn().unwrap_or_default().to_owned())
    })
    .expect("create a secret in moto")
}

/// Stores `value` as the current version of secret `id` (a rotation).
///
/// # Panics
/// When moto refuses (a broken test setup).
pub fn put_secret_value(id: &str, value: &str) {
    let client = moto_client();
    let (id, value) = (id.to_owned(), value.to_owned());
    wait_on_runtime(async move {
        client
            .sdk()
            .await
            .put_secret_value()
            .secret_id(id)
            .secret_string(value)
            .send()
            .await
            .map_err(|e| setup_error("PutSecretValue", e))?;
        Ok(())
    })
    .expect("rotate a secret in moto")
}

fn setup_error(operation: &str, e: impl std::error::Error) -> Error {
    Error::Fetch {
        secret: operation.to_owned(),
        message: aws_sdk_secretsmanager::error::DisplayErrorContext(e).to_string(),
    }
}
