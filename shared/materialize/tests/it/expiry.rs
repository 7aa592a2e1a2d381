//! Acceptance 5: with a tiny retention din expires the feed; the cursor skips only the
//! unretained prefix (counted), and `backfill` recovers those rows idempotently.

use chrono::{TimeZone, Utc};
use dq_dinsim::maintain::expire;
use dq_dinsim::Writer;
use dq_lake::backend_tests;
use dq_lake::testing::{Backend, TestLake};

use crate::*;

backend_tests!(expired_feed_skips_prefix_and_backfill_recovers);

fn expired_feed_skips_prefix_and_backfill_recovers(backend: Backend) {
    let t = TestLake::new(backend);
    let rt = runtime();
    let m = materializer(din_lake(&t), None);
    let writer = Writer::new(m.lake(), None);
    for b in 0..4i64 {
        let events: Vec<_> = (0..5u32)
            .map(|i| {
                status(
                    i,
                    &format!("e{b}-{i}"),
                    at(b * 100 + i64::from(i)),
                    &[("speed", b as f64)],
                )
            })
            .collect();
        rt.block_on(writer.write_bundle(&events)).unwrap();
    }
    let report = expire(m.lake(), dq_dinsim::testing::tiny_retention()).unwrap();
    assert!(report.expired > 0);
    let oldest = dq_lake::progress::snapshots(m.lake()).unwrap()[0].id;
    let run = drain(&rt, &m);
    assert_eq!(run.cursor_resets, 1, "{run:?}");
    assert_eq!(
        run.skipped_snapshots,
        oldest - 1,
        "only the unretained prefix is skipped"
    );
    let decoded = count(m.lake(), "SELECT count(*) FROM lake.signals");
    assert!(
        decoded < 20,
        "expired rows are not decoded by the feed ({decoded})"
    );

    let range = (
        Utc.timestamp_opt(0, 0).unwrap(),
        Utc.timestamp_opt(4_000_000_000, 0).unwrap(),
    );
    let b = rt.block_on(m.backfill(range.0, range.1, None)).unwrap();
    assert_eq!(b.counts.raw_rows, 20);
    assert_eq!(b.counts.signal_rows as i64, 20 - decoded);
    assert_eq!(count(m.lake(), "SELECT count(*) FROM lake.signals"), 20);
    let again = rt.block_on(m.backfill(range.0, range.1, None)).unwrap();
    assert_eq!(again.counts.signal_rows, 0, "backfill is idempotent");
    assert!(m.audit().unwrap().clean);
    assert!(rt.block_on(m.backfill(range.1, range.0, None)).is_err());
}
