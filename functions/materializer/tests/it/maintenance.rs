//! The maintenance function's path to the lease (issue 22), through the handler: with
//! `MATERIALIZER_LEASE_WAIT` a maintenance action waits for a held lease, never past its
//! deadline minus the drain margin, and a holder that does not yield gets it a clear error (not
//! a silent skip); without a wait the answer is today's skip.

use std::time::{Duration, Instant};

use dq_fn_materializer::{handler, Context};
use dq_lake::testing::Backend;
use dq_materialize::Materializer;
use serde_json::json;

use crate::{lease_of, runtime};

#[test]
fn a_wait_the_holder_does_not_answer_fails_clearly() {
    let rt = runtime();
    for backend in ["dynamodb", "file"] {
        let (t, lake) = dq_dinsim::testing::din_lake(Backend::File);
        let m = Materializer::builder(lake).emf(false).build().unwrap();
        let lease = lease_of(&rt, backend, t.path("materializer.lease"));
        let ctx = Context::new(m, lease.clone().with_wait(Duration::from_secs(2)));
        // A holder that never renews, so never sees the request: a drain stuck in one window.
        let stuck = lease.for_invocation("stuck-drain");
        let held = rt.block_on(stuck.acquire(stuck.ttl())).unwrap();
        let prune = json!({"action": "prune", "retention": "8760h"});

        let started = Instant::now();
        let err = rt
            .block_on(handler(prune.clone(), &ctx, "maintenance", None, false))
            .expect_err("the holder never yields");
        let waited = started.elapsed();
        assert_eq!(err.class, "lease_wait", "{backend}: {err}");
        assert!(
            err.message.contains(stuck.holder()) && err.message.contains("did not yield"),
            "{backend}: {err}"
        );
        assert!(err.message.contains("waited 2s"), "{backend}: {err}");
        assert!(waited >= Duration::from_secs(2), "{backend}: {waited:?}");

        // The wait never eats the drain margin (30 s): 1.5 s before the deadline's margin, it
        // waits 1.5 s.
        let deadline = Instant::now() + Duration::from_millis(31_500);
        let err = rt
            .block_on(handler(
                prune.clone(),
                &ctx,
                "maintenance",
                Some(deadline),
                false,
            ))
            .expect_err("the holder never yields");
        assert_eq!(err.class, "lease_wait", "{backend}: {err}");
        assert!(err.message.contains("waited 1s"), "{backend}: {err}");

        // `materialize` never waits: the holder does the same work.
        let started = Instant::now();
        let out = rt
            .block_on(handler(
                json!({"action": "materialize"}),
                &ctx,
                "tick",
                None,
                false,
            ))
            .unwrap();
        assert_eq!(out["skipped"], "lease held by a peer", "{backend}: {out}");
        assert!(started.elapsed() < Duration::from_secs(2), "{backend}");

        // Without a wait, a maintenance action is skipped at once, as before (one lake open on
        // the file catalog at a time).
        drop(ctx);
        let m = Materializer::builder(t.open().unwrap())
            .emf(false)
            .build()
            .unwrap();
        let no_wait = Context::new(m, lease.clone());
        let out = rt
            .block_on(handler(prune, &no_wait, "maintenance", None, false))
            .unwrap();
        assert_eq!(out["skipped"], "lease held by a peer", "{backend}: {out}");
        assert_eq!(out["held_by"], stuck.holder(), "{backend}: {out}");

        // The holder was left alone.
        rt.block_on(stuck.check(&held)).unwrap();
        rt.block_on(stuck.release(&held)).unwrap();
    }
}
