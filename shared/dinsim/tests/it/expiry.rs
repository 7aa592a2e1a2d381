use chrono::Duration;
use dq_dinsim::maintain::expire;
use dq_dinsim::testing::tiny_retention;
use dq_dinsim::Writer;
use dq_lake::testing::Backend;
use dq_lake::{backend_tests, progress};

use crate::{at, din_lake, runtime, status};

backend_tests!(
    expiry_without_consumers_drops_the_feed,
    live_consumer_floor_holds_expiry
);

fn bundles(lake: &dq_lake::Lake, n: u32) {
    let rt = runtime();
    let writer = Writer::new(lake, None);
    for b in 0..n {
        let events: Vec<_> = (0..12u32)
            .map(|i| status(i, &format!("e{b}-{i}"), at(i64::from(b * 60 + i), 0), "{}"))
            .collect();
        rt.block_on(writer.write_bundle(&events)).unwrap();
    }
}

fn feed_error(lake: &dq_lake::Lake, from: i64) -> Option<String> {
    let head = progress::head(lake).unwrap();
    lake.conn()
        .query_row(
            "SELECT count(*) FROM ducklake_table_changes('lake', 'main', 'raw_events', ?, ?)",
            [from, head],
            |r| r.get::<_, i64>(0),
        )
        .err()
        .map(|e| e.to_string())
}

fn expiry_without_consumers_drops_the_feed(backend: Backend) {
    let (_t, lake) = din_lake(backend);
    let first = progress::head(&lake).unwrap() + 1;
    bundles(&lake, 3);
    assert_eq!(feed_error(&lake, first), None);
    let report = expire(&lake, tiny_retention()).unwrap();
    assert!(report.expired > 0 && !report.floor_binding);
    let err = feed_error(&lake, first).expect("expired start must fail");
    assert!(err.contains("No snapshot found"), "{err}");
    let n: i64 = lake
        .conn()
        .query_row("SELECT count(*) FROM lake.raw_events", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 36, "expiry never deletes rows");
}

fn live_consumer_floor_holds_expiry(backend: Backend) {
    let (_t, lake) = din_lake(backend);
    let first = progress::head(&lake).unwrap() + 1;
    bundles(&lake, 2);
    progress::record(&lake, "dq", first).unwrap();
    bundles(&lake, 1);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let report = expire(&lake, tiny_retention()).unwrap();
    assert_eq!(report.floor, Some(first));
    assert!(report.floor_binding);
    // Everything above the floor survives: a consumer resumes at cursor + 1.
    assert_eq!(feed_error(&lake, first + 1), None);
    // A stale consumer no longer holds it.
    progress::backdate(&lake, "dq", Duration::hours(2)).unwrap();
    let report = expire(&lake, tiny_retention()).unwrap();
    assert_eq!(report.floor, None);
    assert!(feed_error(&lake, first + 1).is_some());
}
