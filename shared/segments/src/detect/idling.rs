//! IDLING: runs of idle engine speed.
//!
//! Detection is rpm-only; the caller drops segments whose `speed` MAX summary is > 0 afterwards
//! ([`crate::SegmentList::finish`]).

use crate::config::DEFAULT_MAX_IDLE_RPM;
use crate::error::{Error, Result};
use crate::model::Segment;
use crate::ranges::{clip, to_segments};
use crate::source::{SignalSource, ENGINE_SPEED_SIGNAL};

use super::Detection;

/// Detects idle segments: raw runs of `0 < rpm ≤ maxIdleRpm ?? 1000` over `[from − maxGap, to)`
/// (split by a non-idle reading or a gap `> maxGap`), each clipped to `[from, to]` with the
/// minDuration rule; `startedBeforeRange = start ≤ from`. `signalCountThreshold` is unused.
pub fn detect<S: SignalSource + ?Sized>(d: &Detection<'_, S>) -> Result<Vec<Segment>> {
    let max_idle_rpm = d
        .config
        .and_then(|c| c.max_idle_rpm)
        .unwrap_or(DEFAULT_MAX_IDLE_RPM);
    let mut runs = d
        .source
        .idle_runs(
            d.subject,
            ENGINE_SPEED_SIGNAL,
            d.read_from(),
            d.to,
            f64::from(max_idle_rpm),
            d.base.max_gap_seconds,
        )
        .map_err(Error::source("idle runs"))?;
    runs.sort_by_key(|r| r.start);
    let kept: Vec<_> = runs
        .into_iter()
        .filter_map(|r| clip(r, Some(d.from), Some(d.to), d.base.min_duration_seconds))
        .collect();
    Ok(to_segments(&kept, d.from))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SegmentConfig;
    use crate::model::Mechanism;
    use crate::testing::{m, over, source};

    fn run(
        samples: &[(i64, f64)],
        from: i64,
        to: i64,
        config: Option<&SegmentConfig>,
    ) -> Vec<Segment> {
        let src = source(&[(ENGINE_SPEED_SIGNAL, samples)]);
        detect(&over(Mechanism::Idling, &src, from, to, config)).unwrap()
    }

    #[test]
    fn boundary_rpm_is_idle_and_one_above_is_not() {
        let at: Vec<_> = (0..=10).map(|i| (i, 1000.0)).collect();
        assert_eq!(run(&at, 0, 60, None).len(), 1);
        let above: Vec<_> = (0..=10).map(|i| (i, 1001.0)).collect();
        assert!(run(&above, 0, 60, None).is_empty());
    }

    #[test]
    fn gap_within_max_gap_keeps_one_run() {
        let s = run(
            &[(0, 700.0), (1, 700.0), (2, 700.0), (6, 700.0), (10, 700.0)],
            0,
            60,
            None,
        );
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].start, s[0].end), (m(0), Some(m(10))));
    }

    #[test]
    fn six_minute_gap_splits() {
        let s = run(
            &[(0, 700.0), (5, 700.0), (11, 700.0), (16, 700.0)],
            0,
            60,
            None,
        );
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn rpm_zero_is_engine_off_not_idle() {
        let zeros: Vec<_> = (0..=10).map(|i| (i, 0.0)).collect();
        assert!(run(&zeros, 0, 60, None).is_empty());
    }

    #[test]
    fn clipping_and_started_before_range() {
        let all: Vec<_> = (0..=10).map(|i| (i, 700.0)).collect();
        let s = run(&all, 3, 60, None);
        assert_eq!(s[0].start, m(3));
        assert!(s[0].started_before_range);
        // Reads are half-open `[.., to)`: the reading AT `to` is not part of the run.
        let s = run(&all, 0, 7, None);
        assert_eq!(s[0].end, Some(m(6)));
        // Only 2 min visible but 10 min long and started before `from` → kept.
        let s = run(&all, 8, 60, None);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].duration_seconds, 120);
    }

    #[test]
    fn max_idle_rpm_from_config() {
        let s: Vec<_> = (0..=10).map(|i| (i, 1500.0)).collect();
        let c = SegmentConfig {
            max_idle_rpm: Some(2000),
            ..Default::default()
        };
        assert_eq!(run(&s, 0, 60, Some(&c)).len(), 1);
    }

    #[test]
    fn non_idle_reading_breaks_run() {
        let mut s: Vec<_> = (0..=11).map(|i| (i, 700.0)).collect();
        s[5].1 = 3000.0;
        assert_eq!(run(&s, 0, 60, None).len(), 2);
    }
}
