//! CloudWatch Embedded Metric Format: one JSON document per line, which the Lambda log stream
//! turns into metrics (no agent, no API call). [`encode`] writes one document; an [`Emitter`]
//! adds the namespace, dimension sets and the `Stage`/`Function` properties of the process and
//! hands the line to a [`Sink`] (stdout in Lambda, memory in tests).

use crate::origin::{Origin, FUNCTION, STAGE};
use serde_json::{json, Map, Value};
use std::io::Write as _;
use std::sync::{Arc, Mutex, PoisonError};

/// CloudWatch unit `Count`.
pub const COUNT: &str = "Count";
/// CloudWatch unit `Seconds`.
pub const SECONDS: &str = "Seconds";
/// CloudWatch unit `Milliseconds`.
pub const MILLISECONDS: &str = "Milliseconds";
/// CloudWatch unit `None` (gauges such as snapshot ids).
pub const NONE: &str = "None";

/// A dimension value EMF needs but the caller did not give: CloudWatch drops every metric of a
/// document whose dimension key has no value, so a missing one is spelled out instead.
pub const MISSING: &str = "unknown";

/// One metric value.
#[derive(Debug, Clone, PartialEq)]
pub struct Metric {
    /// Metric name.
    pub name: String,
    /// Value.
    pub value: f64,
    /// CloudWatch unit ([`COUNT`], [`SECONDS`], …).
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

/// The EMF document of `metrics` at `timestamp_ms` in `namespace`, aggregated over each of
/// `dimension_sets` (`[[]]` for one series per name). `properties` are written as top-level
/// strings; a key of a dimension set missing from them gets the value [`MISSING`]. Metric values
/// win over properties of the same name.
pub fn encode(
    namespace: &str,
    dimension_sets: &[Vec<String>],
    properties: &[(&str, &str)],
    metrics: &[Metric],
    timestamp_ms: i64,
) -> String {
    let mut doc = Map::new();
    let defs: Vec<Value> = metrics
        .iter()
        .map(|m| json!({"Name": m.name, "Unit": m.unit}))
        .collect();
    let sets: Vec<Value> = if dimension_sets.is_empty() {
        vec![json!([])]
    } else {
        dimension_sets.iter().map(|s| json!(s)).collect()
    };
    doc.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{"Namespace": namespace, "Dimensions": sets, "Metrics": defs}],
        }),
    );
    for (k, v) in properties {
        doc.insert((*k).to_string(), json!(v));
    }
    for key in dimension_sets.iter().flatten() {
        doc.entry(key.clone()).or_insert_with(|| json!(MISSING));
    }
    for m in metrics {
        // EMF values must be numbers: a NaN or infinite value (a bug upstream) would make the
        // whole document invalid, so it is written as 0 and the rest still lands.
        let v = if m.value.is_finite() { m.value } else { 0.0 };
        doc.insert(m.name.clone(), json!(v));
    }
    Value::Object(doc).to_string()
}

/// Where EMF lines go.
#[derive(Clone)]
pub struct Sink(Arc<dyn Fn(&str) + Send + Sync>);

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sink")
    }
}

impl Sink {
    /// Lines to stdout, the Lambda log stream. A closed stdout loses the line, never panics.
    pub fn stdout() -> Sink {
        Sink(Arc::new(|line: &str| {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
        }))
    }

    /// Lines to `f`.
    pub fn new(f: impl Fn(&str) + Send + Sync + 'static) -> Sink {
        Sink(Arc::new(f))
    }

    /// Lines kept in memory (tests), and the handle that reads them.
    pub fn memory() -> (Sink, Captured) {
        let captured = Captured::default();
        let lines = Arc::clone(&captured.0);
        let sink = Sink::new(move |line| {
            lines
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(line.to_string());
        });
        (sink, captured)
    }

    fn write(&self, line: &str) {
        (self.0)(line);
    }
}

/// The lines a [`Sink::memory`] received.
#[derive(Debug, Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<String>>>);

impl Captured {
    /// Every line so far, in order.
    pub fn lines(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Every line so far, parsed (a line that is not JSON becomes a JSON string).
    pub fn documents(&self) -> Vec<Value> {
        self.lines()
            .iter()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|_| Value::String(l.clone())))
            .collect()
    }
}

/// The metric writer of one component: namespace, dimension sets, the process's
/// [`Origin`] (written as the `Stage` and `Function` properties of every line) and the sink.
/// Cheap to clone.
#[derive(Debug, Clone)]
pub struct Emitter {
    namespace: Arc<str>,
    dimension_sets: Arc<[Vec<String>]>,
    origin: Origin,
    sink: Sink,
}

impl Emitter {
    /// Lines in `namespace` aggregated over `dimension_sets`, from `origin`, to stdout.
    pub fn new(namespace: &str, dimension_sets: &[&[&str]], origin: Origin) -> Emitter {
        Emitter {
            namespace: namespace.into(),
            dimension_sets: dimension_sets
                .iter()
                .map(|set| set.iter().map(|k| (*k).to_string()).collect())
                .collect(),
            origin,
            sink: Sink::stdout(),
        }
    }

    /// The same lines to `sink`.
    pub fn with_sink(mut self, sink: Sink) -> Emitter {
        self.sink = sink;
        self
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Where the lines say they come from.
    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// Writes `metrics` with `properties` (beside `Stage` and `Function`), stamped now.
    pub fn emit(&self, properties: &[(&str, &str)], metrics: &[Metric]) {
        self.emit_at(properties, metrics, now_ms());
    }

    /// Writes `metrics` with `properties` at `timestamp_ms`. Nothing is written for no metrics.
    pub fn emit_at(&self, properties: &[(&str, &str)], metrics: &[Metric], timestamp_ms: i64) {
        if metrics.is_empty() {
            return;
        }
        let mut props = Vec::with_capacity(properties.len() + 2);
        props.push((STAGE, self.origin.stage.as_str()));
        props.push((FUNCTION, self.origin.function.as_str()));
        props.extend_from_slice(properties);
        self.sink.write(&encode(
            &self.namespace,
            &self.dimension_sets,
            &props,
            metrics,
            timestamp_ms,
        ));
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_shape() {
        let line = encode(
            "dq/test",
            &[vec!["Stage".into()], vec!["Stage".into(), "Dialect".into()]],
            &[("Stage", "prod"), ("Extra", "x")],
            &[
                Metric::new("requests", 1.0, COUNT),
                Metric::new("bad", f64::NAN, COUNT),
            ],
            1000,
        );
        let v: Value = serde_json::from_str(&line).unwrap();
        let directive = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(v["_aws"]["Timestamp"], 1000);
        assert_eq!(directive["Namespace"], "dq/test");
        assert_eq!(
            directive["Dimensions"],
            json!([["Stage"], ["Stage", "Dialect"]])
        );
        assert_eq!(
            directive["Metrics"],
            json!([{"Name": "requests", "Unit": "Count"}, {"Name": "bad", "Unit": "Count"}])
        );
        assert_eq!(v["requests"], 1.0);
        assert_eq!(
            v["bad"], 0.0,
            "a non-finite value must not break the document"
        );
        assert_eq!((&v["Stage"], &v["Extra"]), (&json!("prod"), &json!("x")));
        assert_eq!(v["Dialect"], MISSING, "every dimension key carries a value");
    }

    #[test]
    fn no_dimensions_is_one_empty_set() {
        let v: Value =
            serde_json::from_str(&encode("n", &[], &[], &[Metric::new("m", 2.0, NONE)], 5))
                .unwrap();
        assert_eq!(v["_aws"]["CloudWatchMetrics"][0]["Dimensions"], json!([[]]));
    }

    #[test]
    fn emitter_adds_origin_and_writes_to_its_sink() {
        let (sink, captured) = Sink::memory();
        let origin = Origin {
            stage: "dev".into(),
            function: "dq-dev-graphql".into(),
        };
        let e = Emitter::new("dq/query", &[&["Stage", "Function"]], origin).with_sink(sink);
        e.emit_at(&[("Code", "OK")], &[Metric::new("requests", 1.0, COUNT)], 7);
        e.emit(&[], &[]);
        let docs = captured.documents();
        assert_eq!(docs.len(), 1, "an empty metric list writes nothing");
        assert_eq!(docs[0]["Stage"], "dev");
        assert_eq!(docs[0]["Function"], "dq-dev-graphql");
        assert_eq!(docs[0]["Code"], "OK");
        assert_eq!(
            docs[0]["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([["Stage", "Function"]])
        );
    }
}
