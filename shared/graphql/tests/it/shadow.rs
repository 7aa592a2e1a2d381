//! Shadow mode (issue 23): sampled live requests re-sent to a reference and compared. The live
//! answer is the unshadowed router's, byte for byte, however the reference behaves; a slow or
//! saturated reference drops comparisons (never counted as matches), a different answer counts
//! as mismatched, an unreachable one as failed.

use crate::{at, fixture, item, read_response, status, vehicle, ALL, SOURCE};
use axum::body::Body;
use dq_graphql::shadow::{Shadow, ShadowConfig, ShadowTotals};
use dq_graphql::Dialect;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tower::ServiceExt;

async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/query", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

fn shadow(url: &str, max_in_flight: usize) -> Arc<Shadow> {
    let config = ShadowConfig {
        reference_url: url.parse().unwrap(),
        sample_rate: 1.0,
        max_in_flight,
        timeout: Duration::from_secs(10),
        epsilon: dq_reconcile::DEFAULT_EPSILON,
    };
    Arc::new(Shadow::new(Dialect::Dq, config).unwrap())
}

/// Waits (bounded, 20 s) until `shadow`'s totals reach `want`.
async fn totals_reach(shadow: &Shadow, want: ShadowTotals) {
    for _ in 0..800 {
        if shadow.totals() == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(shadow.totals(), want);
}

async fn call(router: axum::Router, token: &str, query: &str) -> (u16, Vec<u8>) {
    let req = http::Request::post("/query")
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {token}"))
        .body(Body::from(json!({ "query": query }).to_string()))
        .unwrap();
    // Generous for a loaded CI machine: the blocked reference never answers until released, so
    // any bound proves the live answer does not wait for it.
    let resp = tokio::time::timeout(Duration::from_secs(30), router.oneshot(req))
        .await
        .expect("the live answer never waits for the reference")
        .unwrap();
    let (status, _, body) = read_response(resp).await;
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_answers_are_unaffected_and_outcomes_are_counted() {
    let v = vehicle(7);
    let f = fixture(&[status(
        &v,
        SOURCE,
        "s1",
        at(60),
        vec![item("speed", at(60), json!(42.5))],
    )])
    .await;
    let token = f.token(&v, &ALL);
    let query = format!("{{ signalsLatest(subject: \"{v}\") {{ lastSeen speed {{ value }} }} }}");
    let plain = || dq_graphql::router(Arc::clone(&f.state));
    let expected = call(plain(), &token, &query).await;
    assert_eq!(expected.0, 200);

    // Reference = the same dq router: matched.
    let same = shadow(&serve(plain()).await, 4);
    assert_eq!(
        call(Arc::clone(&same).wrap(plain()), &token, &query).await,
        expected
    );
    totals_reach(
        &same,
        ShadowTotals {
            matched: 1,
            ..Default::default()
        },
    )
    .await;

    // A reference answering something else: mismatched, live answer still dq's.
    let other = axum::Router::new().fallback(|| async {
        axum::Json(json!({"data": {"signalsLatest": {"lastSeen": null, "speed": {"value": 41.0}}}}))
    });
    let differs = shadow(&serve(other).await, 4);
    assert_eq!(
        call(Arc::clone(&differs).wrap(plain()), &token, &query).await,
        expected
    );
    totals_reach(
        &differs,
        ShadowTotals {
            mismatched: 1,
            ..Default::default()
        },
    )
    .await;

    // A reference that does not answer until released, one comparison slot: the first request
    // holds the slot, the second is dropped; both live answers return at once.
    let release = Arc::new(Semaphore::new(0));
    let gate = Arc::clone(&release);
    let dq_router = plain();
    let slow = axum::Router::new().fallback(move |req: axum::extract::Request| {
        let gate = Arc::clone(&gate);
        let dq_router = dq_router.clone();
        async move {
            let _open = gate.acquire().await;
            dq_router.oneshot(req).await.unwrap()
        }
    });
    let saturated = shadow(&serve(slow).await, 1);
    let wrapped = Arc::clone(&saturated).wrap(plain());
    assert_eq!(call(wrapped.clone(), &token, &query).await, expected);
    assert_eq!(call(wrapped, &token, &query).await, expected);
    totals_reach(
        &saturated,
        ShadowTotals {
            dropped: 1,
            ..Default::default()
        },
    )
    .await;
    release.add_permits(1);
    totals_reach(
        &saturated,
        ShadowTotals {
            dropped: 1,
            matched: 1,
            ..Default::default()
        },
    )
    .await;

    // An unreachable reference: failed, never matched.
    let closed = format!(
        "http://127.0.0.1:{}/query",
        dq_testkit::free_port().unwrap()
    );
    let down = shadow(&closed, 4);
    assert_eq!(
        call(Arc::clone(&down).wrap(plain()), &token, &query).await,
        expected
    );
    totals_reach(
        &down,
        ShadowTotals {
            failed: 1,
            ..Default::default()
        },
    )
    .await;
}
