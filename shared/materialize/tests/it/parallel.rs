//! Acceptance 2: two materializers run in parallel on one PostgreSQL catalog, with and without
//! the lease; every decodable event is decoded exactly once.

use std::sync::Arc;

use dq_dinsim::{SeedOptions, Writer};
use dq_fleet::FleetConfig;
use dq_lake::testing::{Backend, TestLake};
use dq_materialize::{LeaseSession, Outcome};

use crate::*;

#[test]
fn two_materializers_without_lease() {
    parallel(false);
}

#[test]
fn two_materializers_with_lease() {
    parallel(true);
}

fn parallel(with_lease: bool) {
    let t = TestLake::new(Backend::Postgres);
    let rt = runtime();
    let seed_lake = din_lake(&t);
    dq_tables::schema::ensure(&seed_lake).unwrap();
    let writer = Writer::new(&seed_lake, None);
    let opts = SeedOptions {
        fleet: FleetConfig {
            vehicles: 2,
            days: 1,
            ..FleetConfig::default()
        },
        bundle_window: std::time::Duration::from_secs(3600),
        duplicate_every: 4,
        tombstone_every: 30,
        ..SeedOptions::default()
    };
    // No blob store: keep every payload inline.
    let writer = writer.with_threshold(usize::MAX);
    rt.block_on(dq_dinsim::seed(&writer, &opts, |_| {}))
        .unwrap();
    let lease_path = Arc::new(t.path("materializer.lease"));
    let workers: Vec<_> = (0..2)
        .map(|i| {
            let cfg = t.config.clone();
            let lease_path = Arc::clone(&lease_path);
            std::thread::spawn(move || {
                let rt = runtime();
                let m = materializer(dq_lake::Lake::open(cfg).unwrap(), None);
                let mut moved = 0;
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(240);
                while std::time::Instant::now() < deadline {
                    let session = if with_lease {
                        let lease = dq_lease::Lease::local(lease_path.as_path())
                            .for_invocation(&format!("worker-{i}"));
                        match rt.block_on(LeaseSession::acquire(lease)) {
                            Ok(s) => Some(s),
                            Err(dq_lease::LeaseError::Held { .. }) => {
                                std::thread::sleep(std::time::Duration::from_millis(20));
                                continue;
                            }
                            Err(e) => panic!("{e}"),
                        }
                    } else {
                        None
                    };
                    let span = rt.block_on(m.run_span(session.as_ref()));
                    if let Some(s) = &session {
                        rt.block_on(s.release()).unwrap();
                    }
                    match span {
                        Ok(s) if s.outcome == Outcome::CaughtUp => return moved,
                        Ok(s) if s.outcome == Outcome::Moved => moved += 1,
                        Ok(_) => {}
                        // A conflict surfacing outside the commit is a lost race too.
                        Err(e) if e.to_string().to_lowercase().contains("conflict") => moved += 1,
                        Err(e) => panic!("worker {i}: {e}"),
                    }
                }
                panic!("worker {i} did not catch up");
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    drop(seed_lake);
    let m = materializer(t.open().unwrap(), None);
    drain(&rt, &m);
    let (signals, events) = expected(&rt, m.lake(), None);
    assert_eq!(stored_signals(m.lake()), signals);
    assert_eq!(stored_events(m.lake()), events);
    let audit = m.audit().unwrap();
    assert!(audit.clean, "{audit:?}");
}

/// Item 10 of issue 18: a leased writer drains a span of several windows; at a random point a
/// writer that bypasses the lease with another fencing token (a takeover after expiry, a second
/// stack, a local run) starts on the same span and drains to the end, while the first keeps going
/// until it loses a race (its drain then stops, as a Lambda invocation's does). Each run adds a
/// fleet of fresh subjects, so the writers' first windows have no rollup row to delete: only the
/// progress-row fence makes DuckLake abort one of two concurrent windows. After every run nothing
/// is duplicated and the rollups equal their recompute; at the end the decoded tables equal the
/// oracle. `DQ_FENCE_SEED` replays a sequence (the seed is printed).
#[test]
fn a_lease_bypassing_writer_taking_over_mid_span_duplicates_nothing() {
    const RUNS: u64 = 20;
    let seed: u64 = std::env::var("DQ_FENCE_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs()
        });
    eprintln!("fencing: {RUNS} runs, DQ_FENCE_SEED={seed}");
    let mut rng = dq_testkit::XorShift::new(seed);
    let t = TestLake::new(Backend::Postgres);
    let rt = runtime();
    let seed_lake = din_lake(&t);
    dq_tables::schema::ensure(&seed_lake).unwrap();
    let writer = Writer::new(&seed_lake, None).with_threshold(usize::MAX);
    // Small windows and one span per run: every run is one span of several windows.
    let build = || {
        Materializer::builder(t.open().unwrap())
            .window(40, 1 << 20)
            .chunk_rows(16)
            .max_snapshot_span(1_000)
            .emf(false)
            .build()
            .unwrap()
    };
    // Each writer has its own DuckDB instance (a `Materializer` is Send, not Sync): moved into
    // its thread for a run and handed back.
    let (mut first, mut second) = (build(), build());
    let lease = dq_lease::Lease::local(t.path("materializer.lease"));
    let started = std::time::Instant::now();
    let mut figures = Vec::new();
    for run in 0..RUNS {
        let opts = SeedOptions {
            fleet: FleetConfig {
                vehicles: 1,
                days: 1,
                signals_per_minute: 1,
                seed: seed.wrapping_add(run),
                ..FleetConfig::default()
            },
            bundle_window: std::time::Duration::from_secs(3 * 3600),
            duplicate_every: 3,
            ..SeedOptions::default()
        };
        rt.block_on(dq_dinsim::seed(&writer, &opts, |_| {}))
            .unwrap();
        let delay = std::time::Duration::from_millis(rng.below(300) as u64);
        let token = 1_000 + rng.below(1_000) as i64;
        let session = rt
            .block_on(LeaseSession::acquire(lease.for_invocation("first")))
            .unwrap();
        let ((a, m_a), (b, m_b)) = std::thread::scope(|scope| {
            let session = &session;
            let a = scope.spawn(move || {
                let run = runtime().block_on(first.drain(None, Some(session)));
                (run.unwrap(), first)
            });
            let b = scope.spawn(move || {
                std::thread::sleep(delay);
                let rt = runtime();
                let out = until_caught_up(|| {
                    rt.block_on(dq_materialize::testing::run_span_bypassing_lease(
                        &second, token,
                    ))
                });
                (out, second)
            });
            (a.join().unwrap(), b.join().unwrap())
        });
        (first, second) = (m_a, m_b);
        rt.block_on(session.release()).unwrap();
        let duplicated = duplicate_rows(first.lake());
        assert_eq!(
            duplicated,
            (0, 0),
            "run {run} (DQ_FENCE_SEED={seed}, second writer after {delay:?}): duplicated (signal, event) rows"
        );
        figures.push((delay.as_millis(), a.counts.windows, a.moved, b));
    }
    eprintln!(
        "fencing: {:.1}s; per run (delay ms, first's windows, first lost, (second's lost spans, windows)): {figures:?}",
        started.elapsed().as_secs_f64()
    );
    drop(seed_lake);
    let audit = first.audit().unwrap();
    assert!(audit.clean, "DQ_FENCE_SEED={seed}: {audit:?}");
    let (signals, events) = expected(&rt, first.lake(), None);
    assert_eq!(
        stored_signals(first.lake()),
        signals,
        "DQ_FENCE_SEED={seed}"
    );
    assert_eq!(stored_events(first.lake()), events, "DQ_FENCE_SEED={seed}");
}

/// Decoded rows at rest more than once under their write key: `(signals, events)`.
fn duplicate_rows(lake: &dq_lake::Lake) -> (i64, i64) {
    let dup = |table: &str, key: &str| {
        count(
            lake,
            &format!(
                "SELECT coalesce(sum(c - 1), 0)::BIGINT FROM (SELECT count(*) AS c FROM lake.{table} \
                 GROUP BY {key} HAVING count(*) > 1)"
            ),
        )
    };
    (
        dup("signals", "subject, name, \"timestamp\", cloud_event_id"),
        dup(
            "events",
            "subject, \"timestamp\", name, source, cloud_event_id",
        ),
    )
}

/// Runs spans until caught up, pausing briefly after a lost race (a later tick):
/// `(spans lost to a peer, windows committed)`.
fn until_caught_up(
    mut span: impl FnMut() -> dq_materialize::Result<dq_materialize::SpanSummary>,
) -> (u64, u64) {
    let (mut lost, mut windows) = (0, 0);
    for _ in 0..200 {
        match span() {
            Ok(s) if s.outcome == Outcome::CaughtUp => return (lost, windows),
            Ok(s) => {
                windows += s.counts.windows;
                if s.outcome == Outcome::Moved {
                    lost += 1;
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
            }
            // A conflict surfacing outside the window commit is a lost race too.
            Err(e) if e.to_string().to_lowercase().contains("conflict") => lost += 1,
            Err(e) => panic!("{e}"),
        }
    }
    panic!("no catch-up in 200 spans");
}
