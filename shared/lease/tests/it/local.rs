//! The lock-file lease: across handles in one process (each opens its own file description, so
//! their `flock`s conflict) and across processes.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use dq_lease::{Lease, LeaseConfig, LeaseError, LostReason, ManualClock, DEFAULT_CHECK_MARGIN};

use crate::support::{clock, held_by, lost_reason, TTL};

/// Names the lock file a child process should hold; see [`child_holder`].
const CHILD_PATH_ENV: &str = "DQ_LEASE_TEST_CHILD_PATH";

fn lease_file(dir: &tempfile::TempDir) -> std::path::PathBuf {
    dir.path().join("materializer.lease")
}

#[tokio::test]
async fn a_second_handle_is_refused_until_the_first_releases() {
    let dir = tempfile::tempdir().unwrap();
    let path = lease_file(&dir);
    let clock = clock();
    let first = Lease::local(&path).with_clock(clock.clone());
    let second = Lease::local(&path).with_clock(clock.clone());

    let first_guard = first.acquire(TTL).await.unwrap();
    assert_eq!(first_guard.fence(), 1);
    assert_eq!(held_by(second.acquire(TTL).await), first.holder());
    // The OS lock does not expire with the clock: the holder is alive.
    clock.advance(TTL * 10);
    assert_eq!(held_by(second.acquire(TTL).await), first.holder());

    // Our own re-acquire keeps the fence.
    let again = first.acquire(TTL).await.unwrap();
    assert_eq!(again.fence(), first_guard.fence());

    first.release(&again).await.unwrap();
    assert_eq!(lost_reason(first.check(&again).await), LostReason::NotHeld);
    let second_guard = second.acquire(TTL).await.unwrap();
    assert_eq!(second_guard.fence(), 2);
    second.check(&second_guard).await.unwrap();
    // Releasing the lost lease again is not an error and does not disturb the holder.
    first.release(&again).await.unwrap();
    second.check(&second_guard).await.unwrap();
}

#[tokio::test]
async fn dropping_the_handle_releases_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = lease_file(&dir);
    let first = Lease::local(&path);
    let first_guard = first.acquire(TTL).await.unwrap();
    let clone = first.clone();
    drop(first);
    // A clone keeps the lock.
    let second = Lease::local(&path);
    assert_eq!(held_by(second.acquire(TTL).await), clone.holder());
    clone.check(&first_guard).await.unwrap();
    drop(clone);
    let second_guard = second.acquire(TTL).await.unwrap();
    assert!(second_guard.fence() > first_guard.fence());
}

#[tokio::test]
async fn invocation_handles_exclude_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let base = Lease::local(lease_file(&dir));
    let first = base.for_invocation("req-1");
    let second = base.for_invocation("req-2");
    let guard = first.acquire(TTL).await.unwrap();
    assert_eq!(held_by(second.acquire(TTL).await), first.holder());
    // A guard is only good with the handle that acquired it.
    assert_eq!(lost_reason(second.check(&guard).await), LostReason::NotHeld);
    first.check(&guard).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_acquires_have_exactly_one_winner() {
    let dir = tempfile::tempdir().unwrap();
    let path = lease_file(&dir);
    let handles: Vec<Lease> = (0..8).map(|_| Lease::local(&path)).collect();
    let tasks: Vec<_> = handles
        .iter()
        .cloned()
        .map(|handle| tokio::spawn(async move { handle.acquire(TTL).await }))
        .collect();
    let mut winners = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => winners += 1,
            Err(LeaseError::Held { .. }) => {}
            Err(other) => panic!("unexpected error: {other}"),
        }
    }
    assert_eq!(winners, 1);
}

#[tokio::test]
async fn check_refuses_inside_the_margin_and_renew_restores_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let lease = Lease::local(lease_file(&dir)).with_clock(clock.clone());
    let guard = lease.acquire(TTL).await.unwrap();
    clock.advance(TTL - DEFAULT_CHECK_MARGIN);
    assert!(matches!(
        lease.check(&guard).await,
        Err(LeaseError::Expiring { .. })
    ));
    let renewed = lease.renew(&guard, TTL).await.unwrap();
    assert_eq!(renewed.fence(), guard.fence());
    lease.check(&renewed).await.unwrap();
}

/// Deleting the file under a holder would let a second process lock a new file; the holder
/// notices on its next check and stops.
#[tokio::test]
async fn a_replaced_lock_file_fences_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let path = lease_file(&dir);
    let first = Lease::local(&path);
    let guard = first.acquire(TTL).await.unwrap();
    std::fs::remove_file(&path).unwrap();
    let second = Lease::local(&path);
    second.acquire(TTL).await.unwrap();
    assert_eq!(lost_reason(first.check(&guard).await), LostReason::Missing);
    assert_eq!(
        lost_reason(first.renew(&guard, TTL).await),
        LostReason::NotHeld
    );
}

#[tokio::test]
async fn an_unreadable_file_restarts_the_fence_from_the_clock() {
    let dir = tempfile::tempdir().unwrap();
    let path = lease_file(&dir);
    std::fs::write(&path, "fence=12\nholder=torn").unwrap();
    let clock = Arc::new(ManualClock::at_secs(1_800_000_000));
    let lease = Lease::local(&path).with_clock(clock);
    let guard = lease.acquire(TTL).await.unwrap();
    assert_eq!(guard.fence(), 1_800_000_000_000);
}

#[tokio::test]
async fn a_missing_directory_is_an_io_error() {
    let lease = Lease::local("/nonexistent-dir-for-dq-lease/materializer.lease");
    let error = lease.acquire(TTL).await.unwrap_err();
    assert_eq!(error.label(), "io", "{error}");
    assert!(!error.is_transient());
}

#[tokio::test]
async fn an_unset_table_selects_the_lock_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = lease_file(&dir);
    let lease = Lease::from_config(&LeaseConfig::default(), &path)
        .await
        .unwrap();
    assert!(lease.is_local());
    assert_eq!(lease.ttl(), Duration::from_secs(120));
    let guard = lease.acquire(lease.ttl()).await.unwrap();
    assert_eq!(guard.lease_id(), path.display().to_string());
    lease.create_table_if_missing().await.unwrap();
}

/// The fence is persisted in the file: it grows across processes, and a crashed holder's lock
/// is released by the OS.
#[tokio::test]
async fn the_fence_grows_across_processes_and_a_crash_frees_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = lease_file(&dir);
    let parent = Lease::local(&path);
    let first = parent.acquire(TTL).await.unwrap();
    parent.release(&first).await.unwrap();

    let mut child = spawn_child_holder(&path);
    let (child_holder, child_fence) = read_child_acquisition(&mut child);
    assert!(
        child_fence > first.fence(),
        "{child_fence} > {}",
        first.fence()
    );
    assert_eq!(held_by(parent.acquire(TTL).await), child_holder);

    // The child dies without releasing.
    child.kill().unwrap();
    child.wait().unwrap();
    let after_crash = parent.acquire(TTL).await.unwrap();
    assert!(after_crash.fence() > child_fence);
}

fn spawn_child_holder(path: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "local::child_holder",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_PATH_ENV, path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Reads the child's `acquired <holder> <fence>` line.
fn read_child_acquisition(child: &mut Child) -> (String, u64) {
    let stdout = child.stdout.take().unwrap();
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        // libtest prints `test local::child_holder ... ` on the same line first.
        if let Some((_, rest)) = line.split_once("acquired ") {
            let (holder, fence) = rest.split_once(' ').unwrap();
            return (holder.to_owned(), fence.parse().unwrap());
        }
    }
    panic!("the child exited without acquiring the lease");
}

/// Not a test on its own: when [`CHILD_PATH_ENV`] is set (by the test above, which runs this
/// binary again), acquires the lease on that path, reports it and holds it until killed or
/// until stdin closes.
#[tokio::test]
async fn child_holder() {
    let Some(path) = std::env::var_os(CHILD_PATH_ENV) else {
        return;
    };
    let lease = Lease::local(path);
    let guard = lease.acquire(TTL).await.unwrap();
    println!("acquired {} {}", guard.holder(), guard.fence());
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    // Stdin closed (the parent went away): hold a little longer, then exit without releasing.
    tokio::time::sleep(Duration::from_millis(10)).await;
}
