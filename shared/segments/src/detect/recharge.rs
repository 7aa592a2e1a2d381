//! RECHARGE: state-of-charge rises while the vehicle stands still.

use chrono::TimeDelta;

use crate::error::{Error, Result};
use crate::model::{LevelSample, Segment, TimeRange};
use crate::ranges::{first_last_in, merge, to_segments};
use crate::source::{SignalSource, ODOMETER_SIGNAL, SOC_SIGNAL};

use super::Detection;
use crate::time::secs_between;

/// Detector default minimum duration, seconds (shorter than the other detectors' 240).
pub const DEFAULT_MIN_DURATION_SECONDS: i64 = 60;
/// Detector default minimum trough → peak rise of the smoothed SoC, points.
pub const DEFAULT_MIN_RISE: f64 = 1.0;
/// Centered moving-average window of the SoC smoothing, samples.
pub const SMOOTH_WINDOW: usize = 11;
/// Fewest SoC samples the detector works with (`SMOOTH_WINDOW + 2`).
pub const MIN_SOC_SAMPLES: usize = SMOOTH_WINDOW + 2;
/// Odometer increase still counted as standing still, km.
pub const ODOMETER_EPSILON_KM: f64 = 0.5;
/// Largest gap between two sessions merged into one.
pub const SESSION_GAP_MAX: TimeDelta = TimeDelta::hours(2);

/// Detects recharges. `minDuration = minSegmentDurationSeconds ?? 60`, `minRise =
/// minIncreasePercent (> 0) ?? 1.0`. Reads SoC and odometer over `[from, to)`; needs ≥ 13 SoC
/// samples. Smoothed trough → peak rises are kept if raw SoC rose inside them and the odometer
/// (when it has samples inside) moved ≤ 0.5 km; consecutive sessions ≤ 2 h apart merge when the
/// odometer between them moved ≤ 0.5 km. No clipping; `startedBeforeRange = start ≤ from`.
pub fn detect<S: SignalSource + ?Sized>(d: &Detection<'_, S>) -> Result<Vec<Segment>> {
    let min_rise = d
        .config
        .and_then(|c| c.min_increase_percent)
        .filter(|p| *p > 0)
        .map_or(DEFAULT_MIN_RISE, f64::from);

    let mut soc = d
        .source
        .level_samples(d.subject, SOC_SIGNAL, d.from, d.to)
        .map_err(Error::source("SoC samples"))?;
    if soc.len() < MIN_SOC_SAMPLES {
        return Ok(Vec::new());
    }
    let mut odo = d
        .source
        .level_samples(d.subject, ODOMETER_SIGNAL, d.from, d.to)
        .map_err(Error::source("odometer samples"))?;
    soc.sort_by_key(|s| s.ts);
    odo.sort_by_key(|s| s.ts);

    let smoothed = smooth(&soc, SMOOTH_WINDOW);
    let candidates = trough_to_peak_ranges(&smoothed, min_rise, d.base.min_duration_seconds);
    let stationary: Vec<TimeRange> = candidates
        .into_iter()
        .filter(|r| {
            let soc_rose = first_last_in(&soc, r.start, r.end).is_some_and(|(a, b)| b > a);
            let odo_still = first_last_in(&odo, r.start, r.end)
                .is_none_or(|(a, b)| b - a <= ODOMETER_EPSILON_KM);
            soc_rose && odo_still
        })
        .collect();
    let same_place = |a: &TimeRange, b: &TimeRange| match (
        first_last_in(&odo, a.start, a.end),
        first_last_in(&odo, b.start, b.end),
    ) {
        (Some((_, a_end)), Some((b_start, _))) => (b_start - a_end).abs() <= ODOMETER_EPSILON_KM,
        _ => false,
    };
    let merged = merge(
        stationary,
        SESSION_GAP_MAX,
        d.base.min_duration_seconds,
        None,
        None,
        Some(&same_place),
    );
    Ok(to_segments(&merged, d.from))
}

/// Centered moving average over `window` samples (`2·(window/2)+1` for an even window),
/// timestamped at the center sample; the input unchanged when `window ≤ 1` or there are no
/// more samples than the window.
pub(crate) fn smooth(samples: &[LevelSample], window: usize) -> Vec<LevelSample> {
    if window <= 1 || samples.len() <= window {
        return samples.to_vec();
    }
    let half = window / 2;
    let width = 2 * half + 1;
    samples
        .windows(width)
        .filter_map(|w| {
            let sum: f64 = w.iter().map(|s| s.value).sum();
            Some(LevelSample::new(w.get(half)?.ts, sum / width as f64))
        })
        .collect()
}

/// Every trough → peak rise of the curve (a rise closes when the curve turns down, or at the
/// end), kept if it rises ≥ `min_rise` and lasts ≥ `min_duration` seconds.
pub(crate) fn trough_to_peak_ranges(
    samples: &[LevelSample],
    min_rise: f64,
    min_duration: i64,
) -> Vec<TimeRange> {
    #[derive(PartialEq)]
    enum Dir {
        Flat,
        Up,
        Down,
    }
    let mut out = Vec::new();
    let mut dir = Dir::Flat;
    let (mut trough, mut peak) = (0usize, 0usize);
    let close = |trough: usize, peak: usize, out: &mut Vec<TimeRange>| {
        if let (Some(t), Some(p)) = (samples.get(trough), samples.get(peak)) {
            if p.value - t.value >= min_rise && secs_between(t.ts, p.ts) >= min_duration {
                out.push(TimeRange::new(t.ts, p.ts));
            }
        }
    };
    // Sample `i` and its successor `i + 1`.
    for (i, (prev, cur)) in samples.iter().zip(samples.iter().skip(1)).enumerate() {
        let diff = cur.value - prev.value;
        if diff > 0.0 {
            if dir == Dir::Down {
                trough = i;
            }
            dir = Dir::Up;
            peak = i + 1;
        } else if diff < 0.0 {
            if dir == Dir::Up {
                close(trough, peak, &mut out);
            }
            dir = Dir::Down;
        }
    }
    if dir == Dir::Up {
        close(trough, peak, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemorySource;
    use crate::model::Mechanism;
    use crate::testing::{charging, m, over, samples, source};

    #[test]
    fn smoothing_window_3() {
        let out = smooth(
            &samples(&[(0, 10.0), (1, 20.0), (2, 30.0), (3, 40.0), (4, 50.0)]),
            3,
        );
        let values: Vec<f64> = out.iter().map(|x| x.value).collect();
        assert_eq!(values, vec![20.0, 30.0, 40.0]);
        assert_eq!(out[0].ts, m(1));
    }

    #[test]
    fn smoothing_window_larger_than_input_is_identity() {
        let input = samples(&[(0, 10.0), (1, 20.0)]);
        assert_eq!(smooth(&input, 5), input);
    }

    #[test]
    fn trough_to_peak_finds_each_rise() {
        let curve = samples(&[
            (0, 50.0),
            (1, 40.0),
            (2, 45.0),
            (3, 60.0),
            (4, 55.0),
            (5, 56.0),
            (6, 70.0),
        ]);
        let r = trough_to_peak_ranges(&curve, 1.0, 0);
        assert_eq!(
            r,
            vec![TimeRange::new(m(1), m(3)), TimeRange::new(m(4), m(6))]
        );
        assert!(trough_to_peak_ranges(&[], 1.0, 61).is_empty());
        assert!(trough_to_peak_ranges(&samples(&[(0, 10.0)]), 1.0, 61).is_empty());
        assert!(trough_to_peak_ranges(&samples(&[(0, 50.0), (2, 50.5)]), 1.0, 0).is_empty());
    }

    #[test]
    fn golden_soc_rise_with_stationary_odometer_is_600s() {
        let src = source(&charging(0.0));
        let segs = detect(&over(Mechanism::Recharge, &src, 0, 21, None)).unwrap();
        assert_eq!(segs.len(), 1);
        assert_eq!((segs[0].start, segs[0].end), (m(5), Some(m(15))));
        assert_eq!(segs[0].duration_seconds, 600);
        assert!(!segs[0].is_ongoing && !segs[0].started_before_range);
    }

    #[test]
    fn moving_odometer_rejects_the_rise() {
        let src = source(&charging(1.0));
        assert!(detect(&over(Mechanism::Recharge, &src, 0, 21, None))
            .unwrap()
            .is_empty());
    }

    #[test]
    fn too_few_samples_is_empty() {
        let mut src = MemorySource::new();
        src.push_samples(
            SOC_SIGNAL,
            (0..12).map(|i| LevelSample::new(m(i), 20.0 + 3.0 * i as f64)),
        );
        assert!(detect(&over(Mechanism::Recharge, &src, 0, 21, None))
            .unwrap()
            .is_empty());
    }
}
