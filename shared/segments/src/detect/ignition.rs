//! IGNITION_DETECTION: debounced `isIgnitionOn` ON/OFF pairs.

use chrono::TimeDelta;

use crate::error::{Error, Result};
use crate::model::{Segment, StateChange, Ts};
use crate::source::SignalSource;

use super::Detection;
use crate::time::secs_between;

/// Detects ignition segments. `minIdle = maxGapSeconds ?? 300`, `minDuration =
/// minSegmentDurationSeconds ?? 240`. Starts are NOT clipped to `from` (a segment may begin
/// before the range and its duration counts from its true start); `startedBeforeRange =
/// start < from` (strict); an open segment at the end is ongoing with duration `to − start`.
pub fn detect<S: SignalSource + ?Sized>(d: &Detection<'_, S>) -> Result<Vec<Segment>> {
    let mut changes = d
        .source
        .ignition_state_changes(d.subject, d.from, d.to)
        .map_err(Error::source("ignition state changes"))?;
    changes.sort_by_key(|c| c.ts);
    Ok(build_segments(
        &changes,
        d.from,
        d.to,
        d.base.max_gap_seconds,
        d.base.min_duration_seconds,
    ))
}

/// Drops every OFF whose next ON follows within `< min_idle` seconds; keeps every ON. Values
/// other than 0/1 are neither and are dropped.
pub(crate) fn filter_noise(changes: &[StateChange], min_idle: i64) -> Vec<StateChange> {
    let min_idle = TimeDelta::try_seconds(min_idle).unwrap_or(TimeDelta::MAX);
    let mut out = Vec::with_capacity(changes.len());
    let mut next_on: Option<Ts> = None;
    // Walk backwards so the next ON after each OFF is known in O(1).
    for c in changes.iter().rev() {
        if c.new_state == 1.0 {
            out.push(*c);
            next_on = Some(c.ts);
        } else if c.new_state == 0.0 {
            let noise = next_on.is_some_and(|on| on.signed_duration_since(c.ts) < min_idle);
            if !noise {
                out.push(*c);
            }
        }
    }
    out.reverse();
    out
}

/// Pairs ON/OFF after [`filter_noise`]: an ON opens a segment when none is open and its
/// previous state is not 1; an OFF closes it (kept if `≥ min_duration`).
pub(crate) fn build_segments(
    changes: &[StateChange],
    from: Ts,
    to: Ts,
    min_idle: i64,
    min_duration: i64,
) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut open: Option<Ts> = None;
    for c in filter_noise(changes, min_idle) {
        if c.new_state == 1.0 {
            if open.is_none() && c.prev_state != 1.0 {
                open = Some(c.ts);
            }
        } else if let Some(start) = open.take() {
            let duration = secs_between(start, c.ts);
            if duration >= min_duration {
                out.push(Segment {
                    start,
                    end: Some(c.ts),
                    duration_seconds: duration,
                    is_ongoing: false,
                    started_before_range: start < from,
                });
            }
        }
    }
    if let Some(start) = open {
        let duration = secs_between(start, to);
        if duration >= min_duration {
            out.push(Segment {
                start,
                end: None,
                duration_seconds: duration,
                is_ongoing: true,
                started_before_range: start < from,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::m;

    fn on(i: i64) -> StateChange {
        StateChange {
            ts: m(i),
            new_state: 1.0,
            prev_state: 0.0,
        }
    }
    fn off(i: i64) -> StateChange {
        StateChange {
            ts: m(i),
            new_state: 0.0,
            prev_state: 1.0,
        }
    }

    #[test]
    fn simple_segment_duration_600() {
        let s = build_segments(&[on(0), off(10)], m(0), m(60), 300, 240);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].duration_seconds, 600);
        assert_eq!(s[0].end, Some(m(10)));
        assert!(!s[0].is_ongoing && !s[0].started_before_range);
    }

    #[test]
    fn short_off_is_debounced_into_one_segment() {
        // OFF at 10, ON again at 12 (< 5 min): one segment 0 → 30.
        let s = build_segments(&[on(0), off(10), on(12), off(30)], m(0), m(60), 300, 240);
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].start, s[0].end), (m(0), Some(m(30))));
    }

    #[test]
    fn off_exactly_min_idle_before_next_on_is_kept() {
        let s = build_segments(&[on(0), off(10), on(15), off(30)], m(0), m(60), 300, 240);
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn ongoing_and_started_before_range() {
        let s = build_segments(&[on(-20)], m(0), m(60), 300, 240);
        assert_eq!(s.len(), 1);
        assert!(s[0].is_ongoing && s[0].end.is_none());
        assert!(s[0].started_before_range);
        assert_eq!(s[0].start, m(-20), "ignition starts are not clipped");
        assert_eq!(s[0].duration_seconds, 80 * 60);
        // start == from is NOT before the range for ignition (strict <).
        assert!(!build_segments(&[on(0)], m(0), m(60), 300, 240)[0].started_before_range);
    }

    #[test]
    fn short_segments_and_on_with_prev_on_are_dropped() {
        assert!(build_segments(&[on(0), off(3)], m(0), m(60), 300, 240).is_empty());
        let cont = StateChange {
            ts: m(0),
            new_state: 1.0,
            prev_state: 1.0,
        };
        assert!(build_segments(&[cont, off(30)], m(0), m(60), 300, 240).is_empty());
        assert!(build_segments(&[], m(0), m(60), 300, 240).is_empty());
    }

    #[test]
    fn multiple_segments() {
        let s = build_segments(
            &[on(0), off(10), on(20), off(40), on(50)],
            m(0),
            m(60),
            300,
            240,
        );
        assert_eq!(s.len(), 3);
        assert!(s[2].is_ongoing);
        assert_eq!(s[2].duration_seconds, 600);
    }

    #[test]
    fn filter_noise_cases() {
        assert!(filter_noise(&[], 300).is_empty());
        assert_eq!(filter_noise(&[on(0), on(1)], 300).len(), 2);
        assert_eq!(filter_noise(&[on(0), off(1), on(10)], 300).len(), 3);
        assert_eq!(filter_noise(&[on(0), off(10)], 300).len(), 2);
        assert_eq!(
            filter_noise(&[on(0), off(1), on(3)], 300),
            vec![on(0), on(3)]
        );
        let odd = StateChange {
            ts: m(5),
            new_state: 0.5,
            prev_state: 0.0,
        };
        assert_eq!(filter_noise(&[on(0), odd], 300), vec![on(0)]);
    }
}
