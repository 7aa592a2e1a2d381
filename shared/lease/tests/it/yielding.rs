//! Yield requests on both backends: a waiter asks the holder to yield and gets the lease when the
//! holder releases; a holder that does not yield keeps it and the waiter's wait expires.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dq_lease::{Lease, LeaseError, LeaseGuard, ManualClock};

use crate::support::{clock, dynamo_lease, TTL};

/// The lease of `backend` (`dynamodb` on moto or `file` in `dir`), on `clock`.
async fn lease_on(backend: &str, dir: &tempfile::TempDir, clock: &Arc<ManualClock>) -> Lease {
    match backend {
        "dynamodb" => dynamo_lease(clock).await.0,
        _ => Lease::local(dir.path().join("materializer.lease")).with_clock(clock.clone()),
    }
}

/// Invocation `drain` holding the lease of `backend` (on a clock of its own) and invocation
/// `maintenance` that wants it: the lease file's directory (kept while the test runs), the
/// holder, the waiter and the holder's guard.
async fn contest(backend: &str) -> (tempfile::TempDir, Lease, Lease, LeaseGuard) {
    let dir = tempfile::tempdir().unwrap();
    let lease = lease_on(backend, &dir, &clock()).await;
    let holder = lease.for_invocation("drain");
    let waiter = lease.for_invocation("maintenance");
    let held = holder.acquire(TTL).await.unwrap();
    (dir, holder, waiter, held)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_asks_the_holder_to_yield_and_gets_the_lease() {
    for backend in ["dynamodb", "file"] {
        let (_dir, holder, waiter, held) = contest(backend).await;
        assert_eq!(held.yield_requested_by(), None, "{backend}");

        let waiting = {
            let waiter = waiter.clone();
            tokio::spawn(async move { waiter.acquire_waiting(TTL, Duration::from_secs(30)).await })
        };
        // The holder learns of the request at a renewal, and releases at its next boundary.
        let started = Instant::now();
        let mut guard = held.clone();
        while guard.yield_requested_by().is_none() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "{backend}: no yield request seen"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
            guard = holder.renew(&guard, TTL).await.unwrap();
        }
        assert_eq!(
            guard.yield_requested_by(),
            Some(waiter.holder()),
            "{backend}"
        );
        assert_eq!(
            guard.fence(),
            held.fence(),
            "{backend}: a request is no takeover"
        );
        holder.check(&guard).await.unwrap();
        holder.release(&guard).await.unwrap();

        let taken = waiting.await.unwrap().unwrap();
        assert_eq!(taken.holder(), waiter.holder(), "{backend}");
        assert!(taken.fence() > held.fence(), "{backend}");
        // The request was addressed to the previous holder: the new one does not see it.
        let renewed = waiter.renew(&taken, TTL).await.unwrap();
        assert_eq!(renewed.yield_requested_by(), None, "{backend}");
        waiter.release(&renewed).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_the_holder_does_not_answer_expires_clearly() {
    for backend in ["dynamodb", "file"] {
        let (_dir, holder, waiter, held) = contest(backend).await;

        // No wait: today's immediate refusal.
        match waiter.acquire_waiting(TTL, Duration::ZERO).await {
            Err(LeaseError::Held { holder: by, .. }) => assert_eq!(by, holder.holder()),
            other => panic!("{backend}: expected Held, got {other:?}"),
        }

        let started = Instant::now();
        let refused = waiter.acquire_waiting(TTL, Duration::from_secs(1)).await;
        let waited = started.elapsed();
        let error = refused.expect_err("the holder never yields");
        match &error {
            LeaseError::WaitExpired {
                holder: by,
                expires_at,
                ..
            } => {
                assert_eq!(by, holder.holder(), "{backend}");
                assert_eq!(*expires_at, held.expires_at(), "{backend}");
            }
            other => panic!("{backend}: expected WaitExpired, got {other:?}"),
        }
        assert!(waited >= Duration::from_secs(1), "{backend}: {waited:?}");
        assert!(waited < Duration::from_secs(10), "{backend}: {waited:?}");
        assert!(!error.is_transient());
        assert_eq!(error.label(), "wait_expired");
        let message = error.to_string();
        assert!(
            message.contains(holder.holder()) && message.contains("did not yield"),
            "{backend}: {message}"
        );

        // The waiter withdrew its request when it gave up: the holder is left alone.
        let renewed = holder.renew(&held, TTL).await.unwrap();
        assert_eq!(renewed.yield_requested_by(), None, "{backend}");
        holder.check(&renewed).await.unwrap();
    }
}

#[tokio::test]
async fn a_free_lease_is_taken_at_once_by_a_waiter() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let lease = lease_on("file", &dir, &clock)
        .await
        .with_wait(Duration::from_secs(30));
    assert_eq!(lease.wait(), Duration::from_secs(30));
    let waiter = lease.for_invocation("maintenance");
    assert_eq!(
        waiter.wait(),
        Duration::from_secs(30),
        "handles keep the wait"
    );
    let started = Instant::now();
    let guard = waiter.acquire_waiting(TTL, waiter.wait()).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(guard.yield_requested_by(), None);
}
