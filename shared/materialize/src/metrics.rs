//! Metrics as CloudWatch Embedded Metric Format lines on stdout (the Lambda log stream turns
//! them into metrics; no agent, no API call). Names follow dq-materializer §12.1 without the
//! Prometheus prefix; the namespace is [`NAMESPACE`].

use serde_json::{json, Map, Value};

use crate::summary::{RunSummary, SpanSummary};

/// The CloudWatch namespace.
pub const NAMESPACE: &str = "dq/materializer";

/// One metric value.
#[derive(Debug, Clone, PartialEq)]
pub struct Metric {
    /// Metric name.
    pub name: String,
    /// Value.
    pub value: f64,
    /// CloudWatch unit (`Count`, `Seconds`, …).
    pub unit: &'static str,
}

impl Metric {
    /// A metric.
    pub fn new(name: impl Into<String>, value: f64, unit: &'static str) -> Self {
        Self {
            name: name.into(),
            value,
            unit,
        }
    }
}

/// The EMF document for `metrics` at `timestamp_ms` in [`NAMESPACE`].
pub fn emf_line(metrics: &[Metric], timestamp_ms: i64) -> String {
    emf_line_in(NAMESPACE, metrics, timestamp_ms)
}

/// The EMF document for `metrics` at `timestamp_ms` in `namespace` (no dimensions: one series
/// per name). The one EMF encoder of dq: the graphql function's shadow metrics use it too.
pub fn emf_line_in(namespace: &str, metrics: &[Metric], timestamp_ms: i64) -> String {
    let mut doc = Map::new();
    let defs: Vec<Value> = metrics
        .iter()
        .map(|m| json!({"Name": m.name, "Unit": m.unit}))
        .collect();
    doc.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{"Namespace": namespace, "Dimensions": [[]], "Metrics": defs}],
        }),
    );
    for m in metrics {
        doc.insert(m.name.clone(), json!(m.value));
    }
    Value::Object(doc).to_string()
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

    #[test]
    fn emf_shape() {
        let line = emf_line(&[Metric::new("raw_rows", 3.0, "Count")], 1000);
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["raw_rows"], 3.0);
        assert_eq!(
            v["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"],
            "raw_rows"
        );
        assert_eq!(v["_aws"]["CloudWatchMetrics"][0]["Namespace"], NAMESPACE);
    }
}
