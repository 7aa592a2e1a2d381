//! Shared detector helpers: clip, merge, range → segment conversion.

use chrono::TimeDelta;

use crate::model::{ActiveWindow, LevelSample, Segment, TimeRange, Ts};
use crate::time::{add_secs, secs_between};

/// Clips `tr` to `[from, to]` (`None` = no bound). Kept when the clipped duration is
/// ≥ `min_duration`, or when the start was clipped and the ORIGINAL duration is; dropped when
/// clipping empties it (`end ≤ start`).
pub(crate) fn clip(
    tr: TimeRange,
    from: Option<Ts>,
    to: Option<Ts>,
    min_duration: i64,
) -> Option<TimeRange> {
    let original = secs_between(tr.start, tr.end);
    let mut out = tr;
    let mut clipped_start = false;
    if let Some(from) = from {
        if out.start < from {
            out.start = from;
            clipped_start = true;
        }
    }
    if let Some(to) = to {
        if out.end > to {
            out.end = to;
        }
    }
    if out.end <= out.start {
        return None;
    }
    if secs_between(out.start, out.end) < min_duration
        && (!clipped_start || original < min_duration)
    {
        return None;
    }
    Some(out)
}

/// Decides whether two ranges within the gap may merge (RECHARGE's odometer check).
pub(crate) type MergePredicate<'a> = &'a dyn Fn(&TimeRange, &TimeRange) -> bool;

/// Sorts by start and merges ranges whose gap `next.start − cur.end ≤ max_gap` (and
/// `should_merge` allows); each finished run goes through [`clip`].
pub(crate) fn merge(
    mut ranges: Vec<TimeRange>,
    max_gap: TimeDelta,
    min_duration: i64,
    from: Option<Ts>,
    to: Option<Ts>,
    should_merge: Option<MergePredicate<'_>>,
) -> Vec<TimeRange> {
    ranges.sort_by_key(|r| r.start);
    let mut out = Vec::new();
    let mut iter = ranges.into_iter();
    let Some(mut cur) = iter.next() else {
        return out;
    };
    for next in iter {
        let mut merge = next.start.signed_duration_since(cur.end) <= max_gap;
        if merge {
            if let Some(f) = should_merge {
                merge = f(&cur, &next);
            }
        }
        if merge {
            cur.end = cur.end.max(next.end);
        } else {
            out.extend(clip(cur, from, to, min_duration));
            cur = next;
        }
    }
    out.extend(clip(cur, from, to, min_duration));
    out
}

/// Closed segments; `startedBeforeRange = start ≤ from` (note `≤`).
pub(crate) fn to_segments(ranges: &[TimeRange], from: Ts) -> Vec<Segment> {
    ranges
        .iter()
        .map(|r| Segment {
            start: r.start,
            end: Some(r.end),
            duration_seconds: secs_between(r.start, r.end),
            is_ongoing: false,
            started_before_range: r.start <= from,
        })
        .collect()
}

/// FREQUENCY_ANALYSIS / CHANGE_POINT_DETECTION: window ends clamped to `to`, merged within
/// `max_gap`, clipped; the LAST run is ongoing iff `to − end ≤ max_gap` and `now − to ≤ max_gap`
/// (kept then only if `to − start ≥ min_duration`).
pub(crate) fn windows_to_segments(
    windows: &[ActiveWindow],
    from: Ts,
    to: Ts,
    max_gap_seconds: i64,
    min_duration: i64,
    now: Ts,
) -> Vec<Segment> {
    let ranges = windows
        .iter()
        .map(|w| TimeRange::new(w.start, w.end.min(to)))
        .collect();
    let max_gap = TimeDelta::try_seconds(max_gap_seconds).unwrap_or(TimeDelta::MAX);
    let merged = merge(ranges, max_gap, min_duration, Some(from), Some(to), None);
    let last = merged.len().saturating_sub(1);
    let mut out = Vec::with_capacity(merged.len());
    for (i, r) in merged.iter().enumerate() {
        let near_real_time = secs_le(r.end, to, max_gap) && secs_le(to, now, max_gap);
        if i == last && near_real_time {
            let duration = secs_between(r.start, to);
            if duration >= min_duration {
                out.push(Segment {
                    start: r.start,
                    end: None,
                    duration_seconds: duration,
                    is_ongoing: true,
                    started_before_range: r.start <= from,
                });
            }
        } else {
            out.extend(to_segments(std::slice::from_ref(r), from));
        }
    }
    out
}

/// `b − a ≤ gap` (exact, sub-second precision like Go's `Duration` compare).
fn secs_le(a: Ts, b: Ts, gap: TimeDelta) -> bool {
    b.signed_duration_since(a) <= gap
}

/// Value of the latest sample at or before `t`; 0 when there is none. `samples` ascending.
pub(crate) fn sample_at_or_before(samples: &[LevelSample], t: Ts) -> f64 {
    let idx = samples.partition_point(|s| s.ts <= t);
    idx.checked_sub(1)
        .and_then(|i| samples.get(i))
        .map_or(0.0, |s| s.value)
}

/// First and last sample values inside `[start, end]`. `samples` ascending.
pub(crate) fn first_last_in(samples: &[LevelSample], start: Ts, end: Ts) -> Option<(f64, f64)> {
    let lo = samples.partition_point(|s| s.ts < start);
    let hi = samples.partition_point(|s| s.ts <= end);
    let inside = samples.get(lo..hi)?;
    Some((inside.first()?.value, inside.last()?.value))
}

/// `t` minus `seconds`, saturating.
pub(crate) fn minus_secs(t: Ts, seconds: i64) -> Ts {
    add_secs(t, seconds.saturating_neg())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    fn m(i: i64) -> Ts {
        Utc.with_ymd_and_hms(2025, 1, 1, 10, 0, 0).unwrap() + TimeDelta::minutes(i)
    }
    fn r(a: i64, b: i64) -> TimeRange {
        TimeRange::new(m(a), m(b))
    }

    #[test]
    fn clip_keeps_started_before_segments_by_original_duration() {
        // 10 min run, clipped to 2 min at the front: kept (original ≥ 4 min).
        assert_eq!(clip(r(0, 10), Some(m(8)), None, 240), Some(r(8, 10)));
        // Clipped at the END to 2 min: dropped (only start clipping earns the exception).
        assert_eq!(clip(r(0, 10), None, Some(m(2)), 240), None);
        // Emptied by clipping.
        assert_eq!(clip(r(0, 10), Some(m(10)), None, 0), None);
        // No bounds.
        assert_eq!(clip(r(0, 4), None, None, 240), Some(r(0, 4)));
        assert_eq!(clip(r(0, 3), None, None, 240), None);
    }

    #[test]
    fn merge_rules() {
        let gap = TimeDelta::zero();
        assert_eq!(
            merge(
                vec![r(5, 15), r(0, 10)],
                gap,
                0,
                Some(m(0)),
                Some(m(30)),
                None
            ),
            vec![r(0, 15)]
        );
        assert_eq!(
            merge(
                vec![r(0, 5), r(10, 15)],
                gap,
                0,
                Some(m(0)),
                Some(m(30)),
                None
            )
            .len(),
            2
        );
        assert!(merge(vec![r(0, 1)], gap, 240, Some(m(0)), Some(m(30)), None).is_empty());
        // Touching ranges merge at gap 0; gap exactly max_gap merges.
        assert_eq!(
            merge(vec![r(0, 5), r(5, 10)], gap, 0, None, None, None),
            vec![r(0, 10)]
        );
        assert_eq!(
            merge(
                vec![r(0, 5), r(10, 15)],
                TimeDelta::minutes(5),
                0,
                None,
                None,
                None
            ),
            vec![r(0, 15)]
        );
        let never = |_: &TimeRange, _: &TimeRange| false;
        assert_eq!(
            merge(vec![r(0, 5), r(5, 10)], gap, 0, None, None, Some(&never)).len(),
            2
        );
        assert!(merge(Vec::new(), gap, 0, None, None, None).is_empty());
    }

    #[test]
    fn to_segments_started_before_is_inclusive() {
        let s = to_segments(&[r(0, 5), r(1, 5)], m(0));
        assert!(s[0].started_before_range);
        assert!(!s[1].started_before_range);
        assert_eq!(s[0].duration_seconds, 300);
    }

    fn w(a: i64, b: i64) -> ActiveWindow {
        ActiveWindow {
            start: m(a),
            end: m(b),
            signal_count: 20,
            distinct_signal_count: 2,
        }
    }

    #[test]
    fn windows_ongoing_only_near_real_time() {
        // Run ends 1 min before `to`, `to` is now → ongoing, duration to `to`.
        let s = windows_to_segments(&[w(0, 59)], m(0), m(60), 300, 60, m(60));
        assert_eq!(s.len(), 1);
        assert!(s[0].is_ongoing && s[0].end.is_none());
        assert_eq!(s[0].duration_seconds, 3600);
        // Ends 10 min before `to` → closed.
        let s = windows_to_segments(&[w(0, 50)], m(0), m(60), 300, 60, m(60));
        assert!(!s[0].is_ongoing);
        assert_eq!(s[0].end, Some(m(50)));
        // Historical query (`now` far after `to`) → closed even if the run reaches `to`.
        let s = windows_to_segments(&[w(0, 60)], m(0), m(60), 300, 60, m(600));
        assert!(!s[0].is_ongoing);
    }

    #[test]
    fn window_end_is_clamped_to_to() {
        let s = windows_to_segments(&[w(0, 10)], m(0), m(5), 300, 60, m(1000));
        assert_eq!(s[0].end, Some(m(5)));
        assert_eq!(s[0].duration_seconds, 300);
    }

    #[test]
    fn sample_lookups() {
        let s = [
            LevelSample::new(m(0), 10.0),
            LevelSample::new(m(5), 50.0),
            LevelSample::new(m(10), 90.0),
        ];
        assert_eq!(sample_at_or_before(&s, m(4)), 10.0);
        assert_eq!(sample_at_or_before(&s, m(5)), 50.0);
        assert_eq!(sample_at_or_before(&s, m(-1)), 0.0);
        assert_eq!(first_last_in(&s, m(0), m(10)), Some((10.0, 90.0)));
        assert_eq!(first_last_in(&s, m(1), m(4)), None);
        assert_eq!(first_last_in(&[], m(0), m(10)), None);
    }
}
