//! Metrics as CloudWatch Embedded Metric Format lines (encoded by `dq-metrics`, written to
//! stdout; the Lambda log stream turns them into metrics). Names are the Go materializer's
//! without the Prometheus prefix; the namespace is [`NAMESPACE`], aggregated per stage and per
//! stage and function ([`DIMENSIONS`]), so stages sharing an account stay apart.

pub use dq_metrics::Metric;
use dq_metrics::{Emitter, Origin};

use crate::summary::{RunSummary, SpanSummary};

/// The CloudWatch namespace.
pub const NAMESPACE: &str = "dq/materializer";

/// The dimension sets of every line: `[Stage]` and `[Stage, Function]`.
pub const DIMENSIONS: &[&[&str]] = &[&["Stage"], &["Stage", "Function"]];

/// The materializer's emitter: [`NAMESPACE`], [`DIMENSIONS`], `Stage`/`Function` from the
/// environment, lines to stdout.
pub fn emitter() -> Emitter {
    Emitter::new(NAMESPACE, DIMENSIONS, Origin::from_env())
}

/// The metrics of one span.
pub fn span_metrics(s: &SpanSummary) -> Vec<Metric> {
    use crate::Outcome;
    let c = &s.counts;
    let mut m = vec![
        Metric::new(
            "batches",
            f64::from(u8::from(s.outcome == Outcome::Committed)),
            "Count",
        ),
        Metric::new("raw_rows", c.raw_rows as f64, "Count"),
        Metric::new("signal_rows", c.signal_rows as f64, "Count"),
        Metric::new("event_rows", c.event_rows as f64, "Count"),
        Metric::new("decode_failures", c.decode_failures as f64, "Count"),
        // Windows DuckLake refused at commit and that ran again (shards racing, din's
        // maintenance): a steady rise means the shards mostly wait on each other.
        Metric::new("window_conflicts", c.conflicts as f64, "Count"),
        Metric::new("commit_lag_seconds", s.commit_lag_seconds, "Seconds"),
        Metric::new("cursor_snapshot_id", s.to as f64, "None"),
        Metric::new("head_snapshot_id", s.head as f64, "None"),
        Metric::new(
            "cursor_resets",
            f64::from(u8::from(s.outcome == Outcome::CursorReset)),
            "Count",
        ),
    ];
    if let Some(lag) = s.lag_seconds {
        m.push(Metric::new("lag_seconds", lag, "Seconds"));
    }
    for (reason, n) in &c.poison {
        m.push(Metric::new(format!("poison_{reason}"), *n as f64, "Count"));
    }
    m
}

/// Lease events (`lease_acquired`, `lease_refused`, `lease_lost`) of one invocation.
pub fn lease_metric(name: &'static str) -> Vec<Metric> {
    vec![Metric::new(name, 1.0, "Count")]
}

/// A run's totals.
pub fn run_metrics(r: &RunSummary) -> Vec<Metric> {
    vec![
        Metric::new("spans", r.spans as f64, "Count"),
        Metric::new("raw_rows_total", r.counts.raw_rows as f64, "Count"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn emf_shape() {
        let (sink, captured) = dq_metrics::Sink::memory();
        let e = emitter().with_sink(sink);
        e.emit_at(&[], &lease_metric("lease_acquired"), 1000);
        let v = &captured.documents()[0];
        assert_eq!(v["lease_acquired"], 1.0);
        let directive = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], NAMESPACE);
        assert_eq!(directive["Metrics"][0]["Name"], "lease_acquired");
        assert_eq!(
            directive["Dimensions"],
            json!([["Stage"], ["Stage", "Function"]])
        );
        assert_eq!(v["Stage"], e.origin().stage);
        assert_eq!(v["Function"], e.origin().function);
    }
}
