//! `dq_lake::interruptible`: when a request is given up (its future dropped: the client went away,
//! or a deadline), the statement running on its pooled connection is interrupted at once, the
//! request starts no other statement, and the connection serves the next request.

use dq_lake::backend_tests;
use dq_lake::testing::{Backend, TestLake};
use dq_lake::{Error, Pool, SharedLake};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Runs for hours unless interrupted.
const HEAVY: &str = "SELECT count(*) FROM range(1000000000000) t(i) WHERE hash(i) % 7 = 0";

backend_tests!(a_dropped_request_is_interrupted_and_starts_nothing_more);

fn a_dropped_request_is_interrupted_and_starts_nothing_more(backend: Backend) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(dropped_request(backend));
}

async fn dropped_request(backend: Backend) {
    let t = TestLake::new(backend);
    let pool = Arc::new(Pool::new(Arc::new(SharedLake::new(t.open().unwrap())), 4));
    let (started_tx, started_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    let p = Arc::clone(&pool);
    let request = tokio::spawn(dq_lake::interruptible(move || {
        let pooled = p.checkout().unwrap();
        started_tx.send(pooled.conn().interrupt_handle()).ok();
        let out = pooled.conn().query_row(HEAVY, [], |r| r.get::<_, i64>(0));
        let ended = Instant::now();
        let error = out.as_ref().err().map(ToString::to_string);
        p.give_back(pooled, error.as_deref());
        // The request's next read, after it was given up.
        let next = p.checkout().map(drop);
        done_tx.send((out, ended, next)).ok();
    }));
    let handle = started_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The client goes away: the request's future is dropped.
    request.abort();
    let given_up = Instant::now();
    let Ok((out, ended, next)) = done_rx.recv_timeout(Duration::from_secs(3)) else {
        // Not interrupted: stop it by hand so the runtime can shut down, then fail.
        handle.interrupt();
        panic!("the statement kept running after its request was dropped");
    };
    let late = ended.saturating_duration_since(given_up);
    assert!(
        late < Duration::from_millis(100),
        "interrupted {late:?} after the drop"
    );
    let err = out.unwrap_err().to_string();
    assert!(err.contains("INTERRUPT"), "{err}");
    assert!(matches!(next, Err(Error::Interrupted)), "{next:?}");

    // The next request gets the same connection, and its statement runs.
    let p = Arc::clone(&pool);
    let (answer, same_connection) = dq_lake::interruptible(move || {
        let pooled = p.checkout().unwrap();
        let same = Arc::ptr_eq(&pooled.conn().interrupt_handle(), &handle);
        let answer: i64 = pooled
            .conn()
            .query_row("SELECT 42", [], |r| r.get(0))
            .unwrap();
        p.give_back(pooled, None);
        (answer, same)
    })
    .await
    .unwrap();
    assert_eq!(answer, 42);
    assert!(
        same_connection,
        "the interrupted connection went back to the pool"
    );
}
