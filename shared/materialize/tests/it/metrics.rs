//! EMF lines of a drain (issue 22): namespace `dq/materializer`, dimension sets `[Stage]` and
//! `[Stage, Function]`, the `Stage`/`Function` properties, the span metrics; none with EMF off.

use crate::{at, din_lake, runtime, status};
use dq_lake::testing::{Backend, TestLake};
use dq_materialize::Materializer;
use dq_metrics::{Origin, Sink};
use serde_json::json;

#[test]
fn drain_lines_carry_stage_and_function() {
    let rt = runtime();
    let drain = |emf: bool| {
        let t = TestLake::new(Backend::File);
        let (sink, captured) = Sink::memory();
        let m = Materializer::builder(din_lake(&t))
            .emf(emf)
            .metrics_sink(sink)
            .build()
            .unwrap();
        let events = [
            status(1, "m1", at(0), &[("speed", 10.0)]),
            status(2, "m2", at(1), &[("speed", 20.0)]),
        ];
        rt.block_on(dq_dinsim::Writer::new(m.lake(), None).write_bundle(&events))
            .unwrap();
        for _ in 0..20 {
            if rt.block_on(m.drain(None, None)).unwrap().caught_up {
                break;
            }
        }
        captured.documents()
    };
    assert!(
        drain(false).is_empty(),
        "MATERIALIZER_EMF off writes nothing"
    );

    let docs = drain(true);
    assert!(!docs.is_empty());
    let origin = Origin::from_env();
    for d in &docs {
        let directive = &d["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], "dq/materializer", "{d}");
        assert_eq!(
            directive["Dimensions"],
            json!([["Stage"], ["Stage", "Function"]]),
            "{d}"
        );
        assert_eq!(d["Stage"], origin.stage, "{d}");
        assert_eq!(d["Function"], origin.function, "{d}");
    }
    // The run's totals and the span's counts, names unchanged.
    let total: f64 = docs.iter().filter_map(|d| d["raw_rows"].as_f64()).sum();
    assert_eq!(total, 2.0, "{docs:?}");
    assert!(docs.iter().any(|d| d["raw_rows_total"] == 2.0), "{docs:?}");
    let signals: f64 = docs.iter().filter_map(|d| d["signal_rows"].as_f64()).sum();
    assert!(signals >= 2.0, "{docs:?}");
}
