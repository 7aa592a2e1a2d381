//! Issue 20: a window slower than the lease TTL minus the check margin still commits (the lease
//! is renewed after the long read phase and renewed-and-rechecked when the pre-commit check says
//! "expiring"); before, the same slow window failed on every invocation.

use std::time::Duration;

use dq_cloudevent::RawRow;
use dq_dinsim::Writer;
use dq_lake::testing::{Backend, TestLake};
use dq_materialize::{LeaseSession, Outcome};

use crate::*;

#[test]
fn window_slower_than_lease_margin_commits() {
    let t = TestLake::new(Backend::File);
    let rt = runtime();
    let proxy = moto_proxy();
    let store = moto_store(&rt, &proxy);
    let key = "blobs/s/slow";
    put_payload(&rt, &store, key, at(1));
    let m = materializer(din_lake(&t), Some(store));
    let rows = vec![
        RawRow::from_event(&status(1, "inline", at(0), &[("speed", 2.0)])),
        blob_row("slow", key),
    ];
    Writer::new(m.lake(), None).commit(&rows).unwrap();
    // TTL 3 s, margin 2 s: a window taking 2 s leaves at most 1 s at the pre-commit check.
    let lease = dq_lease::Lease::local(t.path("materializer.lease"))
        .with_ttl(Duration::from_secs(3))
        .with_check_margin(Duration::from_secs(2));
    let session = rt.block_on(LeaseSession::acquire(lease)).unwrap();
    proxy.set(dq_testkit::Fault::Delay(Duration::from_millis(2_200)));
    let mut caught_up = false;
    for _ in 0..50 {
        let span = rt
            .block_on(m.run_span(Some(&session)))
            .unwrap_or_else(|e| panic!("a slow window must not fail the span: {e}"));
        match span.outcome {
            Outcome::Committed => {}
            Outcome::CaughtUp => {
                caught_up = true;
                break;
            }
            other => panic!("unexpected outcome {other:?}"),
        }
    }
    assert!(caught_up, "drained under the lease");
    let ids: Vec<String> = stored_signals(m.lake())
        .into_iter()
        .map(|r| r.cloud_event_id.to_string())
        .collect();
    assert_eq!(ids, ["inline", "slow"]);
}
