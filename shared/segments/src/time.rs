//! Saturating time arithmetic: detectors must not panic on extreme inputs.

use chrono::{DateTime, TimeDelta, Utc};

use crate::model::Ts;

/// `t + seconds`, saturating at the ends of chrono's range.
pub(crate) fn add_secs(t: Ts, seconds: i64) -> Ts {
    add(
        t,
        TimeDelta::try_seconds(seconds).unwrap_or(if seconds < 0 {
            TimeDelta::MIN
        } else {
            TimeDelta::MAX
        }),
    )
}

/// `t + d`, saturating at the ends of chrono's range.
pub(crate) fn add(t: Ts, d: TimeDelta) -> Ts {
    t.checked_add_signed(d).unwrap_or(if d < TimeDelta::zero() {
        DateTime::<Utc>::MIN_UTC
    } else {
        DateTime::<Utc>::MAX_UTC
    })
}

/// Whole seconds from `a` to `b`, truncated toward zero (Go `int(d.Seconds())`).
pub(crate) fn secs_between(a: Ts, b: Ts) -> i64 {
    b.signed_duration_since(a).num_seconds()
}

// Epoch-µs conversion is dq-cloudevent's one definition; detectors need the saturating form.
pub(crate) use dq_cloudevent::time::{from_micros_saturating as from_micros, micros};

/// The first whole minute at or after `t` (Go `Truncate(time.Minute)` then `+1m` if before).
pub(crate) fn ceil_minute(t: Ts) -> Ts {
    const MINUTE_NS: i64 = 60_000_000_000;
    let secs = t.timestamp();
    let floor_secs = secs.div_euclid(60) * 60;
    let floor = DateTime::<Utc>::from_timestamp(floor_secs, 0).unwrap_or(t);
    if floor < t {
        add(floor, TimeDelta::nanoseconds(MINUTE_NS))
    } else {
        floor
    }
}
