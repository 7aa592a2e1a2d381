//! `signals(interval:)` takes a Go duration; the one parser lives in `dq_cloudevent::duration`.

pub use dq_cloudevent::duration::parse_go_duration_us;
