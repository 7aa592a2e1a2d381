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
    let Detection {
        source,
        subject,
        from,
        to,
        config,
        ..
    } = *d;
    let min_duration = config
        .and_then(|c| c.min_segment_duration_seconds)
        .map_or(DEFAULT_MIN_DURATION_SECONDS, i64::from);
    let min_rise = config
        .and_then(|c| c.min_increase_percent)
        .filter(|p| *p > 0)
        .map_or(DEFAULT_MIN_RISE, f64::from);

    let mut soc = source
        .level_samples(subject, SOC_SIGNAL, from, to)
        .map_err(Error::source("SoC samples"))?;
    if soc.len() < MIN_SOC_SAMPLES {
        return Ok(Vec::new());
    }
    let mut odo = source
        .level_samples(subject, ODOMETER_SIGNAL, from, to)
        .map_err(Error::source("odometer samples"))?;
    soc.sort_by_key(|s| s.ts);
    odo.sort_by_key(|s| s.ts);

    let smoothed = smooth(&soc, SMOOTH_WINDOW);
    let candidates = trough_to_peak_ranges(&smoothed, min_rise, min_duration);
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
        min_duration,
        None,
        None,
        Some(&same_place),
    );
    Ok(to_segments(&merged, from))
}

/// Centered moving average over `window` samples (`2·(window/2)+1` for an even window),
/// timestamped at the center sample; the input unchanged when `window ≤ 1` or there are no
/// more samples than the window.
pub(crate) fn smooth(samples: &[LevelSample], window: usize) -> Vec<LevelSample> {
    if window <= 1 || samples.len() <= window {
        return samples.to_vec();
    }
    let half = window / 2;
    let denom = (2 * half + 1) as f64;
    (half..samples.len() - half)
        .map(|i| {
            let sum: f64 = samples[i - half..=i + half].iter().map(|s| s.value).sum();
            LevelSample::new(samples[i].ts, sum / denom)
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
        let (t, p) = (&samples[trough], &samples[peak]);
        if p.value - t.value >= min_rise && secs_between(t.ts, p.ts) >= min_duration {
            out.push(TimeRange::new(t.ts, p.ts));
        }
    };
    for i in 1..samples.len() {
        let diff = samples[i].value - samples[i - 1].value;
        if diff > 0.0 {
            if dir == Dir::Down {
                trough = i - 1;
            }
            dir = Dir::Up;
            peak = i;
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
    use crate::detect::testing::{m, over, s};
    use crate::memory::MemorySource;

    /// SoC rising 3 points a minute for 20 minutes, the odometer at `odometer(minute)`.
    fn rising_soc(odometer: impl Fn(i64) -> f64) -> MemorySource {
        let mut src = MemorySource::new();
        src.push_samples(
            SOC_SIGNAL,
            (0..=20).map(|i| LevelSample::new(m(i), 20.0 + 3.0 * i as f64)),
        );
        src.push_samples(
            ODOMETER_SIGNAL,
            (0..=20).map(|i| LevelSample::new(m(i), odometer(i))),
        );
        src
    }

    #[test]
    fn smoothing_window_3() {
        let out = smooth(
            &s(&[(0, 10.0), (1, 20.0), (2, 30.0), (3, 40.0), (4, 50.0)]),
            3,
        );
        let values: Vec<f64> = out.iter().map(|x| x.value).collect();
        assert_eq!(values, vec![20.0, 30.0, 40.0]);
        assert_eq!(out[0].ts, m(1));
    }

    #[test]
    fn smoothing_window_larger_than_input_is_identity() {
        let input = s(&[(0, 10.0), (1, 20.0)]);
        assert_eq!(smooth(&input, 5), input);
    }

    #[test]
    fn trough_to_peak_finds_each_rise() {
        let curve = s(&[
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
        assert!(trough_to_peak_ranges(&s(&[(0, 10.0)]), 1.0, 61).is_empty());
        assert!(trough_to_peak_ranges(&s(&[(0, 50.0), (2, 50.5)]), 1.0, 0).is_empty());
    }

    #[test]
    fn golden_soc_rise_with_stationary_odometer_is_600s() {
        let src = rising_soc(|_| 1000.0);
        let segs = detect(&over(&src, 0, 21, None)).unwrap();
        assert_eq!(segs.len(), 1);
        assert_eq!((segs[0].start, segs[0].end), (m(5), Some(m(15))));
        assert_eq!(segs[0].duration_seconds, 600);
        assert!(!segs[0].is_ongoing && !segs[0].started_before_range);
    }

    #[test]
    fn moving_odometer_rejects_the_rise() {
        let src = rising_soc(|i| 1000.0 + i as f64);
        assert!(detect(&over(&src, 0, 21, None)).unwrap().is_empty());
    }

    #[test]
    fn too_few_samples_is_empty() {
        let mut src = MemorySource::new();
        src.push_samples(
            SOC_SIGNAL,
            (0..12).map(|i| LevelSample::new(m(i), 20.0 + 3.0 * i as f64)),
        );
        assert!(detect(&over(&src, 0, 21, None)).unwrap().is_empty());
    }
}
