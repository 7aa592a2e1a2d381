//! FREQUENCY_ANALYSIS: busy 60 s windows merged into segments.

use crate::config::DEFAULT_SIGNAL_COUNT_THRESHOLD;
use crate::error::{Error, Result};
use crate::model::{ActiveWindow, Segment};
use crate::ranges::windows_to_segments;
use crate::source::{SignalSource, WindowSpec};

use super::Detection;

/// Window width of both windowed detectors, seconds.
pub const WINDOW_SECONDS: i64 = 60;
/// Minimum distinct signal names in an active window.
pub const MIN_DISTINCT_SIGNALS: u64 = 2;

/// Detects frequency segments: windows over `[from − maxGap, to)` with
/// `count ≥ signalCountThreshold ?? 10` and `distinct ≥ 2`, merged within `maxGap`, clipped to
/// `[from, to]`; the last run may be ongoing (near real time relative to `now`).
pub fn detect<S: SignalSource + ?Sized>(d: &Detection<'_, S>) -> Result<Vec<Segment>> {
    let threshold = d
        .config
        .and_then(|c| c.signal_count_threshold)
        .unwrap_or(DEFAULT_SIGNAL_COUNT_THRESHOLD);
    // A non-positive threshold (only reachable by bypassing validation) admits every window.
    let min_signal_count = u64::try_from(threshold).unwrap_or(0);
    merged_windows(d, min_signal_count, "active windows", |windows| windows)
}

/// The windows over `[from − maxGap, to)` with `≥ min_signal_count` rows and `≥ 2` distinct
/// names, in order, passed through `active` and merged within `maxGap` into segments clipped to
/// `[from, to]`. `read` names the read in a source error.
pub(crate) fn merged_windows<S: SignalSource + ?Sized>(
    d: &Detection<'_, S>,
    min_signal_count: u64,
    read: &'static str,
    active: impl FnOnce(Vec<ActiveWindow>) -> Vec<ActiveWindow>,
) -> Result<Vec<Segment>> {
    let spec = WindowSpec {
        window_seconds: WINDOW_SECONDS,
        min_signal_count,
        min_distinct_signals: MIN_DISTINCT_SIGNALS,
    };
    let mut windows = d
        .source
        .windowed_signal_counts(d.subject, d.read_from(), d.to, spec)
        .map_err(Error::source(read))?;
    windows.sort_by_key(|w| w.start);
    Ok(windows_to_segments(
        &active(windows),
        d.from,
        d.to,
        d.base.max_gap_seconds,
        d.base.min_duration_seconds,
        d.now,
    ))
}
