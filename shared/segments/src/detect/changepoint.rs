//! CHANGE_POINT_DETECTION: CUSUM over the busy windows.

use crate::error::Result;
use crate::model::{ActiveWindow, Segment};
use crate::source::SignalSource;

use super::frequency::merged_windows;
use super::Detection;

/// Fixed row threshold of the windows fed to CUSUM (the config threshold is ignored).
pub const SIGNAL_COUNT_THRESHOLD: u64 = 10;
/// CUSUM baseline: expected rows per window when idle.
pub const CUSUM_BASELINE: f64 = 1.0;
/// CUSUM drift (allowed deviation).
pub const CUSUM_DRIFT: f64 = 0.5;
/// A window is active while the CUSUM statistic is above this.
pub const CUSUM_THRESHOLD: f64 = 5.0;

/// Detects change-point segments: the frequency windows with fixed thresholds 10 / 2, CUSUM
/// `S = max(0, S + count − 1.0 − 0.5)`, windows with `S > 5` merged like FREQUENCY_ANALYSIS.
pub fn detect<S: SignalSource + ?Sized>(d: &Detection<'_, S>) -> Result<Vec<Segment>> {
    merged_windows(
        d,
        SIGNAL_COUNT_THRESHOLD,
        "window signal counts",
        |windows| cusum(&windows),
    )
}

/// The windows, in order, at which the CUSUM statistic exceeds [`CUSUM_THRESHOLD`].
pub(crate) fn cusum(windows: &[ActiveWindow]) -> Vec<ActiveWindow> {
    let mut s = 0.0_f64;
    windows
        .iter()
        .filter(|w| {
            s = (s + w.signal_count as f64 - CUSUM_BASELINE - CUSUM_DRIFT).max(0.0);
            s > CUSUM_THRESHOLD
        })
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::m;
    use chrono::TimeDelta;

    fn windows(counts: &[u64]) -> Vec<ActiveWindow> {
        counts
            .iter()
            .enumerate()
            .map(|(i, &c)| {
                let start = m(i as i64);
                ActiveWindow {
                    start,
                    end: start + TimeDelta::minutes(1),
                    signal_count: c,
                    distinct_signal_count: 2,
                }
            })
            .collect()
    }

    #[test]
    fn high_counts_are_active_low_counts_are_not() {
        assert_eq!(cusum(&windows(&[20, 25, 30])).len(), 3);
        assert!(cusum(&windows(&[1, 2, 1, 2])).is_empty());
    }

    #[test]
    fn statistic_accumulates_and_decays() {
        // 4 → S=2.5; 4 → S=5.0 (not > 5); 4 → S=7.5 active; 1 → S=7.0 still active.
        let active = cusum(&windows(&[4, 4, 4, 1]));
        assert_eq!(active.len(), 2);
        assert_eq!(active[0].signal_count, 4);
        assert_eq!(active[1].signal_count, 1);
    }
}
