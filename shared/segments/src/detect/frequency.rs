//! FREQUENCY_ANALYSIS: busy 60 s windows merged into segments.

use crate::config::{BaseConfig, DEFAULT_SIGNAL_COUNT_THRESHOLD};
use crate::error::{Error, Result};
use crate::model::Segment;
use crate::ranges::{minus_secs, windows_to_segments};
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
    let Detection {
        source,
        subject,
        from,
        to,
        config,
        now,
        ..
    } = *d;
    let base = BaseConfig::resolve(config);
    let threshold = config
        .and_then(|c| c.signal_count_threshold)
        .unwrap_or(DEFAULT_SIGNAL_COUNT_THRESHOLD);
    let spec = WindowSpec {
        window_seconds: WINDOW_SECONDS,
        // A non-positive threshold (only reachable by bypassing validation) admits every window.
        min_signal_count: u64::try_from(threshold).unwrap_or(0),
        min_distinct_signals: MIN_DISTINCT_SIGNALS,
    };
    let mut windows = source
        .windowed_signal_counts(subject, minus_secs(from, base.max_gap_seconds), to, spec)
        .map_err(Error::source("active windows"))?;
    windows.sort_by_key(|w| w.start);
    Ok(windows_to_segments(
        &windows,
        from,
        to,
        base.max_gap_seconds,
        base.min_duration_seconds,
        now,
    ))
}
