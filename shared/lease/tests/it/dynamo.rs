//! The DynamoDB lease against moto.

use std::time::Duration;

use aws_sdk_dynamodb::types::TimeToLiveStatus;
use dq_lease::{Lease, LeaseConfig, LeaseError, LostReason, DEFAULT_CHECK_MARGIN};

use crate::support::{
    clock, delete_item, dynamo_lease, held_lease, lost_reason, moto_config, raw_client, TTL,
};

/// The whole life of a contested lease: refusal, expiry, takeover with a higher fence, fencing of
/// the old holder, release and re-acquisition.
#[tokio::test]
async fn a_peer_is_refused_then_takes_over_after_expiry_and_fences_the_first() {
    let clock = clock();
    let (lease, _) = dynamo_lease(&clock).await;
    let first = lease.for_invocation("req-1");
    let second = lease.for_invocation("req-2");

    let first_guard = first.acquire(TTL).await.unwrap();
    assert_eq!(first_guard.holder(), first.holder());
    first.check(&first_guard).await.unwrap();

    // A peer is running: refused, with who and until when.
    match second.acquire(TTL).await {
        Err(LeaseError::Held {
            holder, expires_at, ..
        }) => {
            assert_eq!(holder, first.holder());
            assert_eq!(expires_at, first_guard.expires_at());
        }
        other => panic!("expected Held, got {other:?}"),
    }

    // Re-acquiring our own lease keeps the fence.
    let again = first.acquire(TTL).await.unwrap();
    assert_eq!(again.fence(), first_guard.fence());

    // The first holder stalls past its TTL; the peer takes over with a higher fence.
    clock.advance(TTL + Duration::from_secs(1));
    let second_guard = second.acquire(TTL).await.unwrap();
    assert!(
        second_guard.fence() > first_guard.fence(),
        "{} > {}",
        second_guard.fence(),
        first_guard.fence()
    );

    // The first holder can neither renew nor pass the pre-commit check.
    let taken_over = LostReason::TakenOver {
        holder: second.holder().to_owned(),
        fence: second_guard.fence(),
    };
    assert_eq!(
        lost_reason(first.renew(&first_guard, TTL).await),
        taken_over
    );
    assert_eq!(lost_reason(first.check(&first_guard).await), taken_over);
    // Releasing a lost lease is not an error, and leaves the new holder alone.
    first.release(&first_guard).await.unwrap();
    second.check(&second_guard).await.unwrap();

    // Release, then the first invocation's handle gets it back immediately, with a new fence.
    second.release(&second_guard).await.unwrap();
    assert_eq!(
        lost_reason(second.check(&second_guard).await),
        LostReason::Released
    );
    let third_guard = first.acquire(TTL).await.unwrap();
    assert!(third_guard.fence() > second_guard.fence());
    assert_eq!(
        lost_reason(second.renew(&second_guard, TTL).await),
        LostReason::TakenOver {
            holder: first.holder().to_owned(),
            fence: third_guard.fence(),
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_acquires_leave_exactly_one_holder() {
    // DynamoDB evaluates each conditional update atomically and lets one of these through; moto
    // does not serialize them across its request threads, and under load two can both succeed
    // (seen about one run in four). What the protocol guarantees on either is checked: exactly
    // one of the acquirers can renew, every other one finds the lease lost or was refused.
    let clock = clock();
    let (lease, _) = dynamo_lease(&clock).await;
    let tasks: Vec<_> = (0..8)
        .map(|n| {
            let handle = lease.for_invocation(&format!("req-{n}"));
            tokio::spawn(async move {
                let acquired = handle.acquire(TTL).await;
                (handle, acquired)
            })
        })
        .collect();
    let mut winners = Vec::new();
    let mut refused = 0;
    for task in tasks {
        match task.await.unwrap() {
            (handle, Ok(guard)) => winners.push((handle, guard)),
            (_, Err(LeaseError::Held { .. })) => refused += 1,
            (_, Err(other)) => panic!("unexpected error: {other}"),
        }
    }
    assert!(!winners.is_empty(), "nobody acquired a free lease");
    assert_eq!(winners.len() + refused, 8);
    let mut renewed = 0;
    for (handle, guard) in &winners {
        let renewal = handle.renew(guard, TTL).await;
        if renewal.is_ok() {
            renewed += 1;
        } else {
            // Panics unless the lease reads as lost.
            lost_reason(renewal);
        }
    }
    assert_eq!(
        renewed,
        1,
        "{} acquirers, {renewed} could renew",
        winners.len()
    );
}

#[tokio::test]
async fn check_refuses_inside_the_margin_and_renew_restores_it() {
    let clock = clock();
    let (lease, guard, _) = held_lease(&clock).await;

    clock.advance(TTL - DEFAULT_CHECK_MARGIN);
    match lease.check(&guard).await {
        Err(error @ LeaseError::Expiring { .. }) => assert!(!error.is_transient()),
        other => panic!("expected Expiring, got {other:?}"),
    }
    let renewed = lease.renew(&guard, TTL).await.unwrap();
    assert_eq!(renewed.fence(), guard.fence());
    assert!(renewed.expires_at() > guard.expires_at());
    lease.check(&renewed).await.unwrap();
}

/// An expired lease that nobody took is still fenced by our token: renewing keeps the fence.
#[tokio::test]
async fn an_expired_lease_nobody_took_can_be_renewed() {
    let clock = clock();
    let (lease, guard, _) = held_lease(&clock).await;
    clock.advance(TTL * 2);
    let renewed = lease.renew(&guard, TTL).await.unwrap();
    assert_eq!(renewed.fence(), guard.fence());
    lease.check(&renewed).await.unwrap();
}

/// TTL deletes an abandoned item; the next fence must still be higher than every earlier one.
#[tokio::test]
async fn the_fence_stays_monotonic_when_ttl_deletes_the_item() {
    let clock = clock();
    let (lease, table) = dynamo_lease(&clock).await;
    let first = lease.for_invocation("req-1");
    let second = lease.for_invocation("req-2");
    let mut fence = 0;
    for _ in 0..3 {
        let guard = first.acquire(TTL).await.unwrap();
        assert!(guard.fence() > fence);
        first.release(&guard).await.unwrap();
        fence = guard.fence();
    }
    // The item outlives its expiry, then TTL deletes it.
    clock.advance(TTL);
    delete_item(&table).await;
    let guard = second.acquire(TTL).await.unwrap();
    assert!(guard.fence() > fence, "{} > {fence}", guard.fence());
}

#[tokio::test]
async fn a_deleted_item_is_reported_missing() {
    let clock = clock();
    let (lease, guard, table) = held_lease(&clock).await;
    delete_item(&table).await;
    assert_eq!(lost_reason(lease.check(&guard).await), LostReason::Missing);
    assert_eq!(
        lost_reason(lease.renew(&guard, TTL).await),
        LostReason::Missing
    );
    lease.release(&guard).await.unwrap();
}

#[tokio::test]
async fn create_table_is_idempotent_and_enables_ttl_on_expires_at() {
    let clock = clock();
    let (lease, table) = dynamo_lease(&clock).await;
    lease.create_table_if_missing().await.unwrap();
    let ttl = raw_client()
        .describe_time_to_live()
        .table_name(&table)
        .send()
        .await
        .unwrap();
    let description = ttl.time_to_live_description().unwrap();
    assert_eq!(description.attribute_name(), Some(dq_lease::TTL_ATTRIBUTE));
    assert_eq!(
        description.time_to_live_status(),
        Some(&TimeToLiveStatus::Enabled)
    );
}

#[tokio::test]
async fn a_missing_table_is_a_permanent_error() {
    let lease = Lease::from_config(&moto_config(), "/unused").await.unwrap();
    match lease.acquire(TTL).await {
        Err(error @ LeaseError::Dynamo { .. }) => {
            assert!(!error.is_transient(), "{error}");
            let LeaseError::Dynamo { code, .. } = &error else {
                unreachable!()
            };
            assert_eq!(code.as_deref(), Some("ResourceNotFoundException"));
        }
        other => panic!("expected a dynamodb error, got {other:?}"),
    }
}

#[tokio::test]
async fn an_unreachable_endpoint_is_transient() {
    let port = dq_testkit::free_port().unwrap();
    let cfg = LeaseConfig {
        endpoint: Some(format!("http://127.0.0.1:{port}")),
        ..moto_config()
    };
    let lease = Lease::from_config(&cfg, "/unused").await.unwrap();
    let error = lease.acquire(TTL).await.unwrap_err();
    assert!(error.is_transient(), "{error}");
    assert_eq!(error.label(), "dynamo");
}

#[tokio::test]
async fn the_plain_constructor_works_with_any_client() {
    let clock = clock();
    let (_, table) = dynamo_lease(&clock).await;
    let lease = Lease::dynamo(raw_client(), &table, "other-catalog").with_clock(clock.clone());
    assert_eq!(lease.to_string(), format!("dynamodb:{table}/other-catalog"));
    let guard = lease.acquire(TTL).await.unwrap();
    assert_eq!(guard.lease_id(), "other-catalog");
    lease.check(&guard).await.unwrap();
    lease.release(&guard).await.unwrap();
}
