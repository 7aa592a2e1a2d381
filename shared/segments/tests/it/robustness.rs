//! No input makes a detector panic: unvalidated configs, NaN/∞ values, extreme times.

use chrono::{DateTime, TimeDelta, Utc};
use dq_segments::detect::{detect, Detection};
use dq_segments::memory::MemorySource;
use dq_segments::model::LevelSample;
use dq_segments::source::{
    ENGINE_SPEED_SIGNAL, FUEL_LEVEL_SIGNAL, IGNITION_SIGNAL, ODOMETER_SIGNAL, SOC_SIGNAL,
};
use dq_segments::{Mechanism, SegmentConfig};
use proptest::prelude::*;

use crate::m;

fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => -10.0f64..3000.0,
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(0.0),
        1 => Just(1.0),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn detectors_never_panic(
        rows in proptest::collection::vec((0usize..5, -200i64..200, value()), 0..120),
        cfg in proptest::array::uniform5(proptest::option::of(any::<i32>())),
        from in -100i64..100,
        len in -10i64..300,
        now in -100i64..1000,
    ) {
        let names = [IGNITION_SIGNAL, ENGINE_SPEED_SIGNAL, FUEL_LEVEL_SIGNAL, SOC_SIGNAL, ODOMETER_SIGNAL];
        let mut src = MemorySource::new();
        for (n, t, v) in rows {
            src.push_samples(names[n], [LevelSample::new(m(t), v)]);
        }
        let config = SegmentConfig {
            max_gap_seconds: cfg[0],
            min_segment_duration_seconds: cfg[1],
            signal_count_threshold: cfg[2],
            max_idle_rpm: cfg[3],
            min_increase_percent: cfg[4],
        };
        for mech in Mechanism::ALL {
            let d = Detection::new(mech, &src, "s", m(from), m(from + len), Some(&config), m(now));
            let _ = detect(&d);
        }
    }
}

#[test]
fn extreme_instants_do_not_panic() {
    let mut src = MemorySource::new();
    src.push_samples(
        FUEL_LEVEL_SIGNAL,
        [LevelSample::new(DateTime::<Utc>::MAX_UTC, 10.0)],
    );
    let min = DateTime::<Utc>::MIN_UTC;
    let max = DateTime::<Utc>::MAX_UTC;
    for mech in Mechanism::ALL {
        let _ = detect(&Detection::new(
            mech,
            &src,
            "s",
            min,
            min + TimeDelta::hours(1),
            None,
            max,
        ));
        let _ = detect(&Detection::new(
            mech,
            &src,
            "s",
            max - TimeDelta::hours(1),
            max,
            None,
            max,
        ));
    }
}
