//! REFUEL: large fuel-level rises, reported trough → peak.

use chrono::TimeDelta;

use crate::error::{Error, Result};
use crate::model::{LevelSample, Segment, TimeRange, Ts};
use crate::ranges::{merge, sample_at_or_before, to_segments};
use crate::source::{SignalSource, FUEL_LEVEL_SIGNAL};

use super::Detection;
use crate::time::{add, ceil_minute, secs_between};

/// Length of the rise scan window.
pub const WINDOW: TimeDelta = TimeDelta::minutes(5);
/// Detector default minimum relative rise, percent (exclusive).
pub const DEFAULT_MIN_RISE_PERCENT: i32 = 30;
/// Start levels below this are ignored (no division by ~0).
pub const MIN_FUEL_EPSILON: f64 = 1e-6;
/// Minimum absolute trough → peak rise, percentage points.
pub const MIN_ABSOLUTE_RISE: f64 = 20.0;
/// How far after the scan window the peak search goes.
pub const PEAK_SEARCH: TimeDelta = TimeDelta::minutes(30);
/// A next sample more than this below the current one ends the peak search.
pub const PEAK_STABILIZATION_DROP: f64 = 1.0;

/// Detects refuels. Reads fuel level over `[from − 5 min, to + 30 min)`; scans
/// `t = ceil_minute(from), +1 min, …` while `t + 5 min ≤ to`; a window whose level rises by more
/// than `minIncreasePercent (> 0) ?? 30` % (relative) yields trough → peak, accepted if the peak
/// follows the trough and rises ≥ 20 points, clamped to `[from, to]`, kept if ≥ minDuration.
/// Candidates are merged (gap 0) and clipped.
pub fn detect<S: SignalSource + ?Sized>(d: &Detection<'_, S>) -> Result<Vec<Segment>> {
    let min_rise = d
        .config
        .and_then(|c| c.min_increase_percent)
        .filter(|p| *p > 0)
        .unwrap_or(DEFAULT_MIN_RISE_PERCENT);
    let mut samples = d
        .source
        .level_samples(
            d.subject,
            FUEL_LEVEL_SIGNAL,
            add(d.from, -WINDOW),
            add(d.to, PEAK_SEARCH),
        )
        .map_err(Error::source("fuel samples"))?;
    samples.sort_by_key(|s| s.ts);
    let raw = scan(
        &samples,
        d.from,
        d.to,
        f64::from(min_rise),
        d.base.min_duration_seconds,
    );
    let merged = merge(
        raw,
        TimeDelta::zero(),
        d.base.min_duration_seconds,
        Some(d.from),
        Some(d.to),
        None,
    );
    Ok(to_segments(&merged, d.from))
}

fn scan(
    samples: &[LevelSample],
    from: Ts,
    to: Ts,
    min_rise: f64,
    min_duration: i64,
) -> Vec<TimeRange> {
    let mut raw = Vec::new();
    if samples.len() < 2 {
        return raw;
    }
    let mut t = ceil_minute(from);
    while add(t, WINDOW) <= to {
        let window_end = add(t, WINDOW);
        let start_level = sample_at_or_before(samples, t);
        let end_level = sample_at_or_before(samples, window_end);
        if start_level >= MIN_FUEL_EPSILON
            && (end_level - start_level) / start_level * 100.0 > min_rise
        {
            if let Some((trough, peak, rise)) = trough_and_peak(samples, t, window_end) {
                if peak > trough && rise >= MIN_ABSOLUTE_RISE {
                    let start = trough.max(from);
                    let end = peak.min(to);
                    if secs_between(start, end) >= min_duration {
                        raw.push(TimeRange::new(start, end));
                    }
                }
            }
        }
        let next = add(t, TimeDelta::minutes(1));
        if next <= t {
            break; // saturated at the end of time
        }
        t = next;
    }
    raw
}

/// Trough: from the last sample at/before `rise_start`, walk back while values strictly
/// decrease (the local minimum nearest the rise). Peak: from the first sample at/after
/// `rise_end`, walk forward up to 30 min after it keeping the running max (`≥`), stopping early
/// at a sample whose successor drops by more than 1.0 (that sample is the peak).
/// Returns `(trough ts, peak ts, peak − trough)`.
pub(crate) fn trough_and_peak(
    samples: &[LevelSample],
    rise_start: Ts,
    rise_end: Ts,
) -> Option<(Ts, Ts, f64)> {
    let deadline = add(rise_end, PEAK_SEARCH);

    let start_idx = samples
        .partition_point(|s| s.ts <= rise_start)
        .saturating_sub(1);
    let last = samples.len().checked_sub(1)?;
    let mut trough: Option<&LevelSample> = None;
    for s in samples.iter().take(start_idx.min(last) + 1).rev() {
        match trough {
            Some(t) if s.value >= t.value => break,
            _ => trough = Some(s),
        }
    }

    let peak_start = samples.partition_point(|s| s.ts < rise_end);
    let mut peak: Option<&LevelSample> = None;
    let mut rest = samples.iter().skip(peak_start).peekable();
    while let Some(s) = rest.next() {
        if s.ts > deadline {
            break;
        }
        if peak.is_none_or(|p| s.value >= p.value) {
            peak = Some(s);
        }
        if let Some(next) = rest.peek() {
            if next.ts <= deadline && next.value < s.value - PEAK_STABILIZATION_DROP {
                peak = Some(s);
                break;
            }
        }
    }

    let (t, p) = (trough?, peak?);
    Some((t.ts, p.ts, p.value - t.value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{m, samples, FUEL_BASIC_RISE};

    #[test]
    fn trough_min3_peak_min7_abs_rise_60() {
        let curve = samples(&FUEL_BASIC_RISE);
        let (t, p, rise) = trough_and_peak(&curve, m(3), m(7)).unwrap();
        assert_eq!((t, p, rise), (m(3), m(7), 60.0));
    }

    #[test]
    fn trough_walks_back_to_local_minimum() {
        let curve = samples(&[(0, 50.0), (1, 30.0), (2, 20.0), (3, 25.0), (8, 80.0)]);
        let (t, _, _) = trough_and_peak(&curve, m(3), m(8)).unwrap();
        // The sample at/before rise start is min 3 (25): it walks back to min 2 (20), stops at 1.
        assert_eq!(t, m(2));
    }

    #[test]
    fn flat_trough_stops_at_sample_nearest_the_rise() {
        let curve = samples(&[(0, 20.0), (1, 20.0), (2, 20.0), (3, 20.0), (8, 80.0)]);
        let (t, _, _) = trough_and_peak(&curve, m(3), m(8)).unwrap();
        assert_eq!(t, m(3));
    }

    #[test]
    fn stabilization_drop_ends_peak_search() {
        // 80 at min 6, next drops to 78 (> 1.0 below) → peak is min 6 even though 90 follows.
        let curve = samples(&[(0, 20.0), (5, 70.0), (6, 80.0), (7, 78.0), (8, 90.0)]);
        let (_, p, rise) = trough_and_peak(&curve, m(0), m(5)).unwrap();
        assert_eq!(p, m(6));
        assert_eq!(rise, 60.0);
    }

    #[test]
    fn peak_search_capped_at_30_minutes() {
        let curve = samples(&[(0, 10.0), (5, 60.0), (60, 95.0)]);
        let (t, p, _) = trough_and_peak(&curve, m(0), m(5)).unwrap();
        assert_eq!((t, p), (m(0), m(5)));
    }

    #[test]
    fn single_sample_has_no_rise() {
        let curve = samples(&[(0, 50.0)]);
        let r = trough_and_peak(&curve, m(0), m(5));
        assert!(r.is_none_or(|(t, p, rise)| t == p || rise == 0.0));
        assert!(trough_and_peak(&[], m(0), m(5)).is_none());
    }

    #[test]
    fn golden_basic_rise_is_one_420s_segment() {
        let curve = samples(&FUEL_BASIC_RISE);
        let raw = scan(&curve, m(0), m(60), 30.0, 240);
        let merged = merge(raw, TimeDelta::zero(), 240, Some(m(0)), Some(m(60)), None);
        let segs = to_segments(&merged, m(0));
        assert_eq!(segs.len(), 1);
        assert_eq!((segs[0].start, segs[0].end), (m(0), Some(m(7))));
        assert_eq!(segs[0].duration_seconds, 420);
        assert!(segs[0].started_before_range);
    }
}
