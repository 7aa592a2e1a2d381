use chrono::Duration;
use dq_lake::testing::{Backend, TestLake};
use dq_lake::{backend_tests, progress};

backend_tests!(floor_is_the_min_of_live_consumers);

fn floor_is_the_min_of_live_consumers(backend: Backend) {
    let t = TestLake::new(backend);
    let lake = t.open().unwrap();
    progress::ensure(&lake).unwrap();
    progress::ensure(&lake).unwrap();
    assert_eq!(progress::floor(&lake, Duration::hours(1)).unwrap(), None);
    progress::record(&lake, "dq", 7).unwrap();
    progress::record(&lake, "other", 4).unwrap();
    progress::record(&lake, "dq", 9).unwrap();
    let rows = progress::list(&lake).unwrap();
    assert_eq!(
        rows.iter()
            .map(|r| (r.consumer.as_str(), r.snapshot_id))
            .collect::<Vec<_>>(),
        [("dq", 9), ("other", 4)]
    );
    assert_eq!(progress::floor(&lake, Duration::hours(1)).unwrap(), Some(4));
    progress::backdate(&lake, "other", Duration::hours(2)).unwrap();
    assert_eq!(progress::floor(&lake, Duration::hours(1)).unwrap(), Some(9));
}
