//! Faults other than SIGKILL (issue 10), through the Lambda handler: the PostgreSQL catalog
//! restarted mid-pass, the same schedule tick invoked twice at once, and the deadline hit
//! mid-span. Each proves nothing is lost or duplicated (the decoded tables equal the oracle),
//! that the next invocation succeeds, and that the errors surfaced are clear and carry no
//! catalog password.
//!
//! Every log line of the binary (debug level, JSON) is captured, and each test asserts that no
//! catalog password, S3 secret key or blob key appears in it or in any error it saw.
//!
//! Figures go to stderr and, when `DQ_RELIABILITY_DIR` is set, to `<dir>/<test>.json`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dq_dinsim::{SeedOptions, Writer};
use dq_fleet::FleetConfig;
use dq_fn_materializer::{handler, Context};
use dq_lake::testing::{Backend, TestLake};
use dq_lake::{Lake, LakeConfig};
use dq_materialize::testing::{expected, stored_events, stored_signals};
use dq_materialize::Materializer;
use serde_json::{json, Value};

use crate::{cursor, lease_of, runtime};

/// A DBE1 blob key (32 bytes) for the sealed blobs of the S3 test.
const BLOB_KEY: &str = "ZWZnaGlqa2xtbm9wcXJzdHV2d3h5ent8fX5/gIGCg4Q=";
/// moto takes any credentials: a distinctive secret, so a leak would be found in the logs.
const S3_SECRET: &str = "dq-secret-7c1f9e2a4b";

fn scheduled() -> Value {
    serde_json::from_str(include_str!(
        "../../../../events/materializer-scheduled.json"
    ))
    .unwrap()
}

/// Seeds a small fleet (duplicates and tombstones included by the simulator's defaults).
fn seed(rt: &tokio::runtime::Runtime, lake: &Lake, vehicles: u32, days: u32) -> u64 {
    dq_lake::raw::ensure(lake).unwrap();
    dq_lake::progress::ensure(lake).unwrap();
    let opts = SeedOptions {
        fleet: FleetConfig {
            vehicles,
            days,
            ..FleetConfig::default()
        },
        ..SeedOptions::default()
    };
    rt.block_on(dq_dinsim::seed(&Writer::new(lake, None), &opts, |_| {}))
        .unwrap()
        .rows
}

/// A handler context with small windows, so a pass commits many times.
fn context(lake: Lake, lease: dq_lease::Lease) -> Context {
    let m = Materializer::builder(lake)
        .window(2_000, 4 << 20)
        .max_snapshot_span(2)
        .emf(false)
        .build()
        .unwrap();
    Context::new(m, lease)
}

/// The decoded tables equal the oracle over the raw rows: nothing lost, nothing twice.
fn assert_exactly_once(rt: &tokio::runtime::Runtime, lake: &Lake) -> (usize, usize) {
    let (want_signals, want_events) = expected(rt, lake, None);
    let (got_signals, got_events) = (stored_signals(lake), stored_events(lake));
    assert_eq!(got_signals.len(), want_signals.len(), "signal rows");
    assert!(
        got_signals == want_signals,
        "signal rows differ from the oracle"
    );
    assert!(
        got_events == want_events,
        "event rows differ from the oracle"
    );
    (got_signals.len(), got_events.len())
}

#[test]
fn postgres_restart_mid_pass() {
    dq_testkit::logs::capture();
    let rt = runtime();
    // A server of its own: restarting the shared one would fail every other test.
    let pg = dq_testkit::Postgres::start().unwrap();
    let dsn = pg.create_database("lake").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = LakeConfig::new(&dsn, Some(&dir.path().join("data").display().to_string()));
    cfg.extension_dir = dq_lake::testing::extension_dir();
    cfg.threads = Some(2);
    let raw = seed(&rt, &Lake::open(cfg.clone()).unwrap(), 8, 2);
    let ctx = context(
        Lake::open(cfg.clone()).unwrap(),
        dq_lease::Lease::local(dir.path().join("lease")),
    );

    // Restart the catalog server three times while passes run.
    let restarts = 3;
    let done = AtomicBool::new(false);
    let (failures, invocations) = {
        let (done, pg) = (&done, &pg);
        std::thread::scope(|scope| {
            let h = scope.spawn(move || {
                for _ in 0..restarts {
                    std::thread::sleep(Duration::from_millis(700));
                    pg.restart().unwrap();
                }
                done.store(true, Ordering::SeqCst);
            });
            let started = Instant::now();
            let (mut failures, mut invocations) = (Vec::new(), 0);
            loop {
                invocations += 1;
                let out = rt.block_on(handler(scheduled(), &ctx, "tick", None, true));
                match out {
                    Ok(v) if done.load(Ordering::SeqCst) && v["caught_up"] == true => break,
                    Ok(_) => {}
                    Err(e) => failures.push(format!("{}: {}", e.class, e.message)),
                }
                assert!(
                    started.elapsed() < Duration::from_secs(180),
                    "no successful pass within 3 minutes; errors: {failures:?}"
                );
            }
            h.join().unwrap();
            (failures, invocations)
        })
    };
    for f in &failures {
        assert!(f.len() > 10, "unclear error: {f}");
    }
    let log_lines = dq_testkit::logs::assert_no_secrets(&[pg.password()], &failures);
    let (signals, events) = assert_exactly_once(&rt, &Lake::open(cfg).unwrap());
    report(
        "materializer-postgres-restart",
        &json!({
            "raw_events": raw, "restarts": restarts, "invocations": invocations,
            "failed_invocations": failures.len(), "errors": dq_testkit::error_kinds(&failures),
            "signal_rows": signals, "event_rows": events, "lost": 0, "duplicated": 0,
            "log_lines_checked_for_secrets": log_lines,
        }),
    );
}

/// Two execution environments handle the same schedule tick, on the DynamoDB lease (moto) and on
/// the lock file: the second invocation starts while the first is mid-drain (its first span
/// committed, its lease held) and is refused by that holder, before the first one ends.
#[test]
fn the_same_tick_invoked_twice() {
    let rt = runtime();
    let mut figures = Vec::new();
    for backend in ["dynamodb", "file"] {
        let t = TestLake::new(Backend::Postgres);
        let raw = seed(&rt, &t.open().unwrap(), 6, 1);
        let lease = lease_of(&rt, backend, t.path("lease"));
        // Two execution environments: each its own materializer, one lease between them.
        let first = Arc::new(context(t.open().unwrap(), lease.clone()));
        let second = context(t.open().unwrap(), lease);
        let observer = t.open().unwrap();
        let started = Instant::now();
        let running = {
            let first = Arc::clone(&first);
            rt.spawn(async move {
                let out = handler(scheduled(), &first, "tick-1", None, true).await;
                (out, Instant::now())
            })
        };
        // The first invocation holds the lease from its start to its end; once its first span
        // has moved the cursor it is mid-drain.
        while cursor(&observer) == 0 {
            assert!(
                !running.is_finished(),
                "{backend}: the first invocation ended before its first span committed"
            );
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "{backend}: no span committed"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let refused = rt
            .block_on(handler(scheduled(), &second, "tick-1", None, true))
            .unwrap_or_else(|e| panic!("{backend}: {}: {}", e.class, e.message));
        let refused_at = Instant::now();
        let (ran, ran_until) = rt.block_on(running).unwrap();
        let ran = ran.unwrap_or_else(|e| panic!("{backend}: {}: {}", e.class, e.message));
        assert!(!ran["skipped"].is_string(), "{backend}: {ran}");
        assert_eq!(ran["caught_up"], true, "{backend}: {ran}");
        assert!(
            ran["lease"]["backend"]
                .as_str()
                .is_some_and(|b| b.starts_with(&format!("{backend}:"))),
            "{backend}: {ran}"
        );
        assert_eq!(
            refused["skipped"], "lease held by a peer",
            "{backend}: {refused}"
        );
        assert_eq!(
            refused["held_by"], ran["lease"]["holder"],
            "{backend}: refused by someone else than the running invocation: {refused} / {ran}"
        );
        assert!(
            refused_at < ran_until,
            "{backend}: the second invocation did not overlap the first"
        );
        // Both ticks done: nothing is left, nothing was decoded twice.
        let next = rt
            .block_on(handler(scheduled(), &second, "tick-2", None, true))
            .unwrap_or_else(|e| panic!("{backend}: {}: {}", e.class, e.message));
        assert!(!next["skipped"].is_string(), "{backend}: {next}");
        assert_eq!(next["raw_rows"], 0, "{backend}: {next}");
        let (signals, events) = assert_exactly_once(&rt, &t.open().unwrap());
        figures.push(json!({
            "lease": backend, "raw_events": raw, "invocations": 3, "skipped_by_lease": 1,
            "refused_while_running_ms": (ran_until - refused_at).as_millis() as u64,
            "signal_rows": signals, "event_rows": events, "lost": 0, "duplicated": 0,
        }));
    }
    report("materializer-double-invoke", &json!({ "runs": figures }));
}

#[test]
fn deadline_hit_mid_span() {
    let rt = runtime();
    let t = TestLake::new(Backend::File);
    let raw = seed(&rt, &t.open().unwrap(), 8, 2);
    let ctx = context(t.open().unwrap(), dq_lease::Lease::local(t.path("lease")));
    // The drain stops at the deadline minus its safety margin (30 s); 50 ms past that, the
    // stop lands inside the first span: the span in flight commits, no new one starts.
    let margin = dq_materialize::Config::default().drain_margin;
    let started = Instant::now();
    let mut invocations = 0;
    loop {
        invocations += 1;
        let deadline = Instant::now() + margin + Duration::from_millis(50);
        let out = rt
            .block_on(handler(scheduled(), &ctx, "tick", Some(deadline), true))
            .unwrap_or_else(|e| panic!("{}: {}", e.class, e.message));
        if out["caught_up"] == true {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(180), "{out}");
    }
    assert!(
        invocations > 1,
        "one invocation drained everything: no deadline was hit"
    );
    let (signals, events) = assert_exactly_once(&rt, &t.open().unwrap());
    report(
        "materializer-deadline",
        &json!({
            "raw_events": raw, "invocations": invocations,
            "signal_rows": signals, "event_rows": events, "lost": 0, "duplicated": 0,
        }),
    );
}

/// S3 and DynamoDB through a fault-injecting proxy in front of moto: 5xx, throttling and slow
/// answers. A failed dependency fails the invocation with a clear, classed error and commits
/// nothing; a transient blob failure aborts the pass instead of counting poison; once the proxy
/// passes again the next invocation drains everything exactly once (a blob wrongly counted as
/// poison would be missing from the decoded rows).
#[test]
fn s3_and_dynamodb_faults() {
    use dq_blob::{BlobConfig, BlobStore};
    use dq_testkit::{Fault, FaultProxy};

    dq_testkit::logs::capture();
    let rt = runtime();
    let moto = dq_testkit::shared_moto();
    let upstream = std::net::SocketAddr::from(([127, 0, 0, 1], moto.port()));
    let (dynamo, s3) = (
        FaultProxy::start(upstream).unwrap(),
        FaultProxy::start(upstream).unwrap(),
    );
    let bucket = dq_testkit::unique_name("faults");
    moto.create_bucket(&bucket).unwrap();
    let store = Arc::new(
        rt.block_on(BlobStore::open(&BlobConfig {
            bucket: bucket.clone(),
            prefix: "blobs/".into(),
            s3: dq_blob::S3Config {
                region: Some(moto.region().into()),
                access_key_id: Some(moto.access_key().into()),
                secret_access_key: Some(S3_SECRET.into()),
                endpoint: Some(s3.endpoint()),
                kms_key_id: None,
            },
            encryption_key: Some(BLOB_KEY.into()),
        }))
        .unwrap(),
    );
    let lease = rt
        .block_on(dq_lease::Lease::from_config(
            &dq_lease::LeaseConfig {
                table: Some(dq_testkit::unique_name("lease")),
                endpoint: Some(dynamo.endpoint()),
                region: moto.region().to_owned(),
                access_key_id: Some(moto.access_key().to_owned()),
                secret_access_key: Some(S3_SECRET.to_owned()),
                ..dq_lease::LeaseConfig::default()
            },
            "/nonexistent/unused.lease",
        ))
        .unwrap();
    rt.block_on(lease.create_table_if_missing()).unwrap();

    // PostgreSQL: the checks read the lake from a second DuckDB instance while the handler's
    // materializer keeps its own open, which a file catalog does not support.
    let t = TestLake::new(Backend::Postgres);
    let raw = {
        let lake = dq_dinsim::testing::open_din_lake(&t);
        let opts = SeedOptions {
            fleet: FleetConfig {
                vehicles: 4,
                days: 1,
                ..FleetConfig::default()
            },
            ..SeedOptions::default()
        };
        // Payloads over 1.5 KiB go to S3 (through the proxy, passing for now).
        let writer = Writer::new(&lake, Some(&store)).with_threshold(1536);
        rt.block_on(dq_dinsim::seed(&writer, &opts, |_| {}))
            .unwrap()
            .rows
    };
    let blobs_written = s3.requests();
    assert!(blobs_written > 0, "the fleet wrote no blob");
    let m = Materializer::builder(t.open().unwrap())
        .blobs(Some(Arc::clone(&store)))
        .window(2_000, 4 << 20)
        .emf(false)
        .build()
        .unwrap();
    let ctx = Context::new(m, lease);
    let mut errors = Vec::new();

    let mut outcomes = Vec::new();
    let cases: [(&str, &FaultProxy, Fault); 5] = [
        ("dynamodb 5xx", &dynamo, Fault::dynamo_5xx()),
        ("dynamodb throttling", &dynamo, Fault::dynamo_throttle()),
        ("s3 5xx", &s3, Fault::s3_5xx()),
        ("s3 slow down", &s3, Fault::s3_slow_down()),
        (
            "dynamodb slow",
            &dynamo,
            Fault::Delay(Duration::from_millis(1500)),
        ),
    ];
    for (name, proxy, fault) in cases {
        let before = stored_signals(&t.open().unwrap()).len();
        let injected = proxy.injected();
        proxy.set(fault.clone());
        let started = Instant::now();
        let out = rt.block_on(handler(scheduled(), &ctx, name, None, true));
        let took = started.elapsed();
        proxy.set(Fault::Pass);
        let injected = proxy.injected() - injected;
        assert!(injected > 0, "{name}: the proxy saw no request");
        let outcome = match (&fault, out) {
            (Fault::Delay(_), Ok(v)) => format!(
                "served slowly: caught up {}, {} raw rows, {} signal rows, poison {}",
                v["caught_up"], v["raw_rows"], v["signal_rows"], v["poison"]
            ),
            (Fault::Delay(_), Err(e)) => {
                panic!("{name}: a slow answer failed the run: {}", e.message)
            }
            (_, Ok(v)) => panic!("{name}: the run succeeded through the fault: {v}"),
            (_, Err(e)) => {
                errors.push(e.message.clone());
                assert!(
                    e.message.len() > 10 && e.class != "panic",
                    "{name}: unclear error {}: {}",
                    e.class,
                    e.message
                );
                // Without the lease nothing runs; a blob failure aborts the pass where it is
                // (earlier spans stay committed, the failed one is retried whole).
                if name.starts_with("dynamodb") {
                    assert_eq!(
                        stored_signals(&t.open().unwrap()).len(),
                        before,
                        "{name}: rows committed without the lease"
                    );
                }
                format!("{}: {}", e.class, e.message)
            }
        };
        outcomes.push(json!({"fault": name, "requests_faulted": injected, "ms": took.as_millis() as u64, "outcome": outcome}));
    }
    // Healthy again: everything drains, nothing poisoned by the transient failures.
    let out = rt
        .block_on(handler(scheduled(), &ctx, "healthy", None, true))
        .unwrap_or_else(|e| panic!("{}: {}", e.class, e.message));
    assert_eq!(out["caught_up"], true, "{out}");
    let lake = t.open().unwrap();
    let (want, want_events) = expected(&rt, &lake, Some(&store));
    let got = stored_signals(&lake);
    assert!(
        got == want,
        "signal rows differ from the oracle: {} stored, {} expected; outcomes {outcomes:?}; last run {out}",
        got.len(),
        want.len()
    );
    assert!(
        stored_events(&lake) == want_events,
        "event rows differ from the oracle"
    );
    let log_lines = dq_testkit::logs::assert_no_secrets(&[S3_SECRET, BLOB_KEY], &errors);
    report(
        "materializer-s3-dynamodb-faults",
        &json!({
            "raw_events": raw, "blob_requests_at_seed": blobs_written, "faults": outcomes,
            "signal_rows": want.len(), "lost": 0, "duplicated": 0,
            "log_lines_checked_for_secrets": log_lines,
        }),
    );
}

fn report(name: &str, figures: &Value) {
    dq_testkit::report_figures(name, &serde_json::to_string_pretty(figures).unwrap());
}
