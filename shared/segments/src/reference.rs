//! Executable definitions of the [`crate::SignalSource`] reads, over rows that are already
//! deduplicated (one row per `(name, timestamp)`) and restricted to the read's time window.
//!
//! [`crate::memory::MemorySource`] is built on these; a SQL implementation must return the same
//! rows for the same data.

use chrono::TimeDelta;

use crate::model::{
    ActiveWindow, LevelSample, StateChange, TimeRange, Ts, WindowSpec, IGNITION_LOOKBACK_DAYS,
};
use crate::time::{add, add_secs, from_micros, micros};

/// [`crate::SignalSource::windowed_signal_counts`] over `(timestamp, name)` rows of every
/// signal. Rows outside `[from, to)` are ignored; a non-positive window yields nothing.
pub fn windowed_signal_counts<'a>(
    rows: impl IntoIterator<Item = (Ts, &'a str)>,
    from: Ts,
    to: Ts,
    spec: WindowSpec,
) -> Vec<ActiveWindow> {
    let Some(win_us) = spec
        .window_seconds
        .checked_mul(1_000_000)
        .filter(|w| *w > 0)
    else {
        return Vec::new();
    };
    let mut buckets: std::collections::BTreeMap<i64, (u64, std::collections::BTreeSet<&str>)> =
        std::collections::BTreeMap::new();
    for (ts, name) in rows {
        if ts < from || ts >= to {
            continue;
        }
        let start = micros(ts).div_euclid(win_us) * win_us;
        let entry = buckets.entry(start).or_default();
        entry.0 += 1;
        entry.1.insert(name);
    }
    buckets
        .into_iter()
        .filter(|(_, (count, names))| {
            *count >= spec.min_signal_count && names.len() as u64 >= spec.min_distinct_signals
        })
        .map(|(start_us, (count, names))| {
            let start = from_micros(start_us);
            ActiveWindow {
                start,
                end: add_secs(start, spec.window_seconds),
                signal_count: count,
                distinct_signal_count: names.len() as u64,
            }
        })
        .collect()
}

/// [`crate::SignalSource::ignition_state_changes`] for a detection over `[from, to)`.
///
/// `prior` is the latest reading strictly before `from − 30 days`; `readings` are the non-NULL
/// readings in `[from − 30 days, to)` (others are ignored), in any order.
pub fn ignition_state_changes(
    prior: Option<f64>,
    readings: &[LevelSample],
    from: Ts,
    to: Ts,
) -> Vec<StateChange> {
    let lookback = add(from, -TimeDelta::days(IGNITION_LOOKBACK_DAYS));
    let mut window: Vec<LevelSample> = readings
        .iter()
        .copied()
        .filter(|r| r.ts >= lookback && r.ts < to && !r.value.is_nan())
        .collect();
    window.sort_by_key(|r| r.ts);

    let mut prev = prior.filter(|v| !v.is_nan()).unwrap_or(0.0);
    let mut seed: Option<StateChange> = None;
    let mut out = Vec::new();
    for r in &window {
        if r.value != prev {
            let change = StateChange {
                ts: r.ts,
                new_state: r.value,
                prev_state: prev,
            };
            if r.ts < from {
                seed = Some(change);
            } else {
                out.push(change);
            }
        }
        prev = r.value;
    }
    if let Some(seed) = seed {
        out.insert(0, seed);
    }
    if out.is_empty() {
        if let (Some(first), Some(last)) = (window.first(), window.last()) {
            if last.value == 1.0 {
                out.push(StateChange::synthetic_on(first.ts));
            }
        }
    }
    out
}

/// [`crate::SignalSource::idle_runs`] over one signal's samples (ascending).
pub fn idle_runs(
    samples: &[LevelSample],
    max_idle_rpm: f64,
    max_gap_seconds: i64,
) -> Vec<TimeRange> {
    let max_gap = TimeDelta::try_seconds(max_gap_seconds).unwrap_or(TimeDelta::MAX);
    let mut runs = Vec::new();
    let mut run: Option<TimeRange> = None;
    for s in samples {
        let idle = s.value > 0.0 && s.value <= max_idle_rpm;
        match (&mut run, idle) {
            (None, true) => run = Some(TimeRange::new(s.ts, s.ts)),
            (Some(r), true) if s.ts.signed_duration_since(r.end) > max_gap => {
                runs.push(*r);
                run = Some(TimeRange::new(s.ts, s.ts));
            }
            (Some(r), true) => r.end = s.ts,
            (Some(r), false) => {
                runs.push(*r);
                run = None;
            }
            (None, false) => {}
        }
    }
    runs.extend(run);
    runs
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    fn t(s: i64) -> Ts {
        Utc.timestamp_opt(1_767_225_600 + s, 0).unwrap()
    }

    #[test]
    fn windows_are_epoch_aligned_not_from_aligned() {
        let spec = WindowSpec {
            window_seconds: 60,
            min_signal_count: 1,
            min_distinct_signals: 1,
        };
        // from = :30 — the bucket still starts at :00.
        let w = windowed_signal_counts(
            [(t(45), "a"), (t(59), "b"), (t(61), "a")],
            t(30),
            t(120),
            spec,
        );
        assert_eq!(w.len(), 2);
        assert_eq!(w[0].start, t(0));
        assert_eq!(w[0].end, t(60));
        assert_eq!((w[0].signal_count, w[0].distinct_signal_count), (2, 2));
        assert_eq!(w[1].start, t(60));
    }

    #[test]
    fn windows_apply_both_thresholds() {
        let spec = WindowSpec {
            window_seconds: 60,
            min_signal_count: 3,
            min_distinct_signals: 2,
        };
        let rows = [
            (t(1), "a"),
            (t(2), "a"),
            (t(3), "a"),
            (t(61), "a"),
            (t(62), "b"),
            (t(63), "b"),
        ];
        let w = windowed_signal_counts(rows, t(0), t(600), spec);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].start, t(60));
    }

    #[test]
    fn ignition_seed_is_latest_transition_before_from() {
        let day = 86_400;
        let r = |s, v| LevelSample::new(t(s), v);
        let from = t(40 * day);
        let readings = [
            r(11 * day, 1.0),
            r(12 * day, 0.0),
            r(39 * day, 1.0),
            r(40 * day + 10, 0.0),
        ];
        let c = ignition_state_changes(None, &readings, from, t(41 * day));
        assert_eq!(c.len(), 2);
        assert_eq!(
            (c[0].ts, c[0].new_state, c[0].prev_state),
            (t(39 * day), 1.0, 0.0)
        );
        assert_eq!(c[1].ts, t(40 * day + 10));
    }

    #[test]
    fn ignition_continuously_on_yields_synthetic_on() {
        let r = |s, v| LevelSample::new(t(s), v);
        let c = ignition_state_changes(Some(1.0), &[r(100, 1.0), r(200, 1.0)], t(150), t(300));
        assert_eq!(
            c,
            vec![StateChange {
                ts: t(100),
                new_state: 1.0,
                prev_state: 0.0
            }]
        );
        // Continuously off: nothing.
        assert!(ignition_state_changes(Some(0.0), &[r(100, 0.0)], t(150), t(300)).is_empty());
    }

    #[test]
    fn idle_runs_break_on_non_idle_and_gaps() {
        let m = |i: i64, v| LevelSample::new(t(i * 60), v);
        let s = [
            m(0, 700.0),
            m(1, 700.0),
            m(2, 0.0),
            m(3, 700.0),
            m(10, 700.0),
            m(11, 1000.0),
            m(12, 1001.0),
        ];
        let runs = idle_runs(&s, 1000.0, 300);
        assert_eq!(
            runs,
            vec![
                TimeRange::new(t(0), t(60)),
                TimeRange::new(t(180), t(180)),
                TimeRange::new(t(600), t(660)),
            ]
        );
    }
}
