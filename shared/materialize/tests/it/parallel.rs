//! Acceptance 2: two materializers run in parallel on one PostgreSQL catalog, with and without
//! the lease; every decodable event is decoded exactly once.

use std::sync::Arc;

use fleet::FleetConfig;
use lake::testing::{Backend, TestLake};
use materialize::{LeaseSession, Outcome};
use sim::{SeedOptions, Writer};

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
    materialize::schema::ensure(&seed_lake).unwrap();
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
    rt.block_on(sim::seed(&writer, &opts, |_| {})).unwrap();
    let lease_path = Arc::new(t.path("materializer.lease"));
    let workers: Vec<_> = (0..2)
        .map(|i| {
            let cfg = t.config.clone();
            let lease_path = Arc::clone(&lease_path);
            std::thread::spawn(move || {
                let rt = runtime();
                let m = materializer(lake::Lake::open(cfg).unwrap(), None);
                let mut moved = 0;
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(240);
                while std::time::Instant::now() < deadline {
                    let session = if with_lease {
                        let lease = lease::Lease::local(lease_path.as_path())
                            .for_invocation(&format!("worker-{i}"));
                        match rt.block_on(LeaseSession::acquire(lease)) {
                            Ok(s) => Some(s),
                            Err(lease::LeaseError::Held { .. }) => {
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
