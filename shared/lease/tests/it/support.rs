//! Helpers shared by the test modules.

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use dq_lease::{Lease, LeaseConfig, LeaseError, LeaseGuard, ManualClock};

/// The TTL most tests acquire with.
pub const TTL: Duration = Duration::from_secs(60);

/// A config for a fresh table on the shared moto server.
pub fn moto_config() -> LeaseConfig {
    moto_config_on(dq_testkit::shared_moto())
}

/// A config for a fresh table on `moto`.
pub fn moto_config_on(moto: &dq_testkit::Moto) -> LeaseConfig {
    LeaseConfig {
        table: Some(dq_testkit::unique_name("lease")),
        endpoint: Some(moto.endpoint()),
        region: moto.region().to_owned(),
        access_key_id: Some(moto.access_key().to_owned()),
        secret_access_key: Some(moto.secret_key().to_owned()),
        ..LeaseConfig::default()
    }
}

/// A lease on a freshly created moto table, on `clock`, and the table's name.
pub async fn dynamo_lease(clock: &Arc<ManualClock>) -> (Lease, String) {
    let cfg = moto_config();
    let lease = Lease::from_config(&cfg, "/nonexistent/unused.lease")
        .await
        .expect("build the dynamodb lease");
    lease
        .create_table_if_missing()
        .await
        .expect("create the lease table");
    let table = cfg.table.unwrap_or_default();
    (lease.with_clock(clock.clone()), table)
}

/// Invocation `req` holding the lease of a fresh moto table, on `clock`; its guard and the
/// table's name.
pub async fn held_lease(clock: &Arc<ManualClock>) -> (Lease, LeaseGuard, String) {
    let (lease, table) = dynamo_lease(clock).await;
    let lease = lease.for_invocation("req");
    let guard = lease.acquire(TTL).await.expect("acquire the free lease");
    (lease, guard, table)
}

/// Deletes the lease's item from `table` behind its back, as TTL does to an abandoned one.
pub async fn delete_item(table: &str) {
    raw_client()
        .delete_item()
        .table_name(table)
        .key(
            dq_lease::TABLE_KEY,
            AttributeValue::S("dq-materializer".into()),
        )
        .send()
        .await
        .expect("delete the lease item");
}

/// A plain SDK client for moto, to look at or tamper with the table behind the lease's back.
pub fn raw_client() -> aws_sdk_dynamodb::Client {
    use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
    let moto = dq_testkit::shared_moto();
    let conf = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(moto.region()))
        .credentials_provider(Credentials::new(
            moto.access_key(),
            moto.secret_key(),
            None,
            None,
            "moto",
        ))
        .endpoint_url(moto.endpoint())
        .build();
    aws_sdk_dynamodb::Client::from_conf(conf)
}

/// A manual clock at the current time, shared by every handle of a test.
pub fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::starting_now())
}

/// The holder named by a `Held` refusal; fails the test on anything else.
pub fn held_by<T: std::fmt::Debug>(result: dq_lease::Result<T>) -> String {
    match result {
        Err(LeaseError::Held { holder, .. }) => holder,
        other => panic!("expected Held, got {other:?}"),
    }
}

/// The reason of a `Lost` error; fails the test on anything else.
pub fn lost_reason<T: std::fmt::Debug>(result: dq_lease::Result<T>) -> dq_lease::LostReason {
    match result {
        Err(LeaseError::Lost { reason, .. }) => reason,
        other => panic!("expected Lost, got {other:?}"),
    }
}
