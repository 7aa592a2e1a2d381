//! RFC 3339 parsing and formatting with Go's `time` package semantics.
//!
//! Go accepts an optional fraction of any length (digits past the ninth are truncated, not
//! rounded), requires `T`, and a `Z` or `±hh:mm` offset. Formatting follows `RFC3339Nano`
//! (trailing zeros of the fraction trimmed) and `RFC3339` (no fraction, truncated).
//!
//! It is also the one home of timestamp ↔ epoch-microsecond conversion: the lake stores µs,
//! and every crate that reads or writes it (decode, materialize, segments, rawquery) must floor
//! and range-check the same way.

use chrono::{DateTime, NaiveDate, SecondsFormat, TimeZone, Timelike, Utc};

/// Parses an RFC 3339 timestamp the way Go's `time.Parse(time.RFC3339Nano, s)` does for
/// well-formed input, returning it in UTC.
pub fn parse_rfc3339(s: &str) -> Option<DateTime<Utc>> {
    let b = s.as_bytes();
    if b.len() < 20 {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<u32> {
        let part = b.get(range)?;
        let mut v = 0u32;
        for &c in part {
            if !c.is_ascii_digit() {
                return None;
            }
            v = v * 10 + u32::from(c - b'0');
        }
        Some(v)
    };
    let separators = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if !separators.iter().all(|(i, want)| b.get(*i) == Some(want)) {
        return None;
    }
    let year = num(0..4)?;
    let month = num(5..7)?;
    let day = num(8..10)?;
    let hour = num(11..13)?;
    let minute = num(14..16)?;
    let second = num(17..19)?;
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let mut rest = b.get(19..)?;
    let mut nanos = 0u32;
    if let [b'.', fraction @ ..] = rest {
        let digits = fraction.iter().take_while(|c| c.is_ascii_digit()).count();
        // A dot without digits is left for the offset match to refuse.
        if digits > 0 {
            let (fraction, after) = fraction.split_at(digits);
            let mut scale = 100_000_000u32;
            for &c in fraction.iter().take(9) {
                nanos += u32::from(c - b'0') * scale;
                scale /= 10;
            }
            rest = after;
        }
    }
    let offset_secs: i64 = match rest {
        [b'Z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let digit = |c: u8| c.is_ascii_digit().then(|| i64::from(c - b'0'));
            let hh = digit(*h1)? * 10 + digit(*h2)?;
            let mm = digit(*m1)? * 10 + digit(*m2)?;
            if hh > 23 || mm > 59 {
                return None;
            }
            let secs = (hh * 60 + mm) * 60;
            if *sign == b'-' {
                -secs
            } else {
                secs
            }
        }
        _ => return None,
    };
    let date = NaiveDate::from_ymd_opt(i32::try_from(year).ok()?, month, day)?;
    let naive = date.and_hms_nano_opt(hour, minute, second, nanos)?;
    let utc = Utc.from_utc_datetime(&naive);
    utc.checked_sub_signed(chrono::Duration::seconds(offset_secs))
}

/// Formats like Go's `t.UTC().Format(time.RFC3339Nano)`: fraction only when non-zero, trailing
/// zeros trimmed, `Z` suffix.
pub fn format_rfc3339_nano(t: &DateTime<Utc>) -> String {
    let nanos = t.nanosecond() % 1_000_000_000;
    let base = t.format("%Y-%m-%dT%H:%M:%S").to_string();
    if nanos == 0 {
        return base + "Z";
    }
    let frac = format!("{nanos:09}");
    format!("{base}.{}Z", frac.trim_end_matches('0'))
}

/// Formats like Go's `t.UTC().Format(time.RFC3339)`: whole seconds (truncated), `Z` suffix.
pub fn format_rfc3339_secs(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Go's zero `time.Time` (0001-01-01T00:00:00Z), which dq stores as-is for missing timestamps.
pub fn go_zero_time() -> DateTime<Utc> {
    // Year 1 is inside chrono's range, so the fallback never triggers.
    Utc.with_ymd_and_hms(1, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// An epoch-microsecond value outside chrono's range (about ±262,000 years).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("time {0}µs since the epoch is out of range")]
pub struct OutOfRange(pub i64);

/// Microseconds since the Unix epoch, floored (Go `UnixMicro`).
pub fn micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

/// The instant `us` microseconds after the epoch, or [`OutOfRange`] (never a panic).
pub fn from_micros(us: i64) -> Result<DateTime<Utc>, OutOfRange> {
    DateTime::<Utc>::from_timestamp_micros(us).ok_or(OutOfRange(us))
}

/// The instant `us` microseconds after the epoch, saturating at the ends of chrono's range:
/// for arithmetic that must not fail on extreme inputs.
pub fn from_micros_saturating(us: i64) -> DateTime<Utc> {
    from_micros(us).unwrap_or(if us < 0 {
        DateTime::<Utc>::MIN_UTC
    } else {
        DateTime::<Utc>::MAX_UTC
    })
}

/// `t` floored to whole microseconds, as the µs lake columns store it.
pub fn truncate_micros(t: DateTime<Utc>) -> DateTime<Utc> {
    let sub_micro = i64::from(t.timestamp_subsec_nanos() % 1_000);
    t - chrono::TimeDelta::nanoseconds(sub_micro)
}

/// `t` floored to its whole second (toward the past), the precision of the dedup key.
pub fn truncate_secs(t: DateTime<Utc>) -> DateTime<Utc> {
    let us = micros(t);
    from_micros(us - us.rem_euclid(1_000_000)).unwrap_or(t)
}

/// A timestamp literal DuckDB casts to TIMESTAMPTZ exactly (µs, UTC). Only digits and
/// separators, so it is safe to splice into SQL.
pub fn sql_literal(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S%.6f+00").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micros_round_trip_and_floor() {
        let t = parse_rfc3339("2024-04-18T17:20:46.436008782Z").unwrap();
        assert_eq!(micros(t), 1_713_460_846_436_008);
        assert_eq!(from_micros(micros(t)), Ok(truncate_micros(t)));
        assert_eq!(truncate_micros(t).timestamp_subsec_nanos(), 436_008_000);
        // Before the epoch the floor goes toward the past.
        let before = from_micros(-1).unwrap();
        assert_eq!(micros(before), -1);
        assert_eq!(micros(truncate_secs(before)), -1_000_000);
        assert_eq!(
            micros(truncate_secs(from_micros(1_700_000_000_999_999).unwrap())),
            1_700_000_000_000_000
        );
    }

    #[test]
    fn out_of_range_micros_are_errors_not_panics() {
        assert_eq!(from_micros(i64::MAX), Err(OutOfRange(i64::MAX)));
        assert_eq!(from_micros(i64::MIN), Err(OutOfRange(i64::MIN)));
        assert_eq!(from_micros_saturating(i64::MAX), DateTime::<Utc>::MAX_UTC);
        assert_eq!(from_micros_saturating(i64::MIN), DateTime::<Utc>::MIN_UTC);
        assert_eq!(from_micros_saturating(0), DateTime::<Utc>::UNIX_EPOCH);
    }

    #[test]
    fn sql_literals_carry_microseconds_in_utc() {
        let t = parse_rfc3339("2024-04-18T19:20:46.1234567+02:00").unwrap();
        assert_eq!(sql_literal(t), "2024-04-18 17:20:46.123456+00");
    }

    #[test]
    fn parses_go_accepted_forms() {
        let t = parse_rfc3339("2024-04-18T17:20:46.436008782Z").unwrap();
        assert_eq!(t.timestamp_subsec_nanos(), 436_008_782);
        let t = parse_rfc3339("2024-04-18T19:20:46.1234567891+02:00").unwrap();
        assert_eq!(format_rfc3339_nano(&t), "2024-04-18T17:20:46.123456789Z");
        assert_eq!(format_rfc3339_secs(&t), "2024-04-18T17:20:46Z");
        let t = parse_rfc3339("0001-01-01T00:00:00Z").unwrap();
        assert_eq!(t, go_zero_time());
    }

    #[test]
    fn rejects_what_go_rejects() {
        for bad in [
            "2024-04-18 17:20:46Z",
            "2024-04-18T17:20:46",
            "2024-04-18t17:20:46Z",
            "2024-04-18T17:20:46z",
            "2024-02-30T00:00:00Z",
            "2024-04-18T24:00:00Z",
            "2024-04-18T17:20:46.Z",
            "2024-04-18T17:20:46+0200",
            "2024-04-18T17:20:46+24:00",
            "1713460823243",
        ] {
            assert!(parse_rfc3339(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn nano_format_trims_zeros() {
        let t = parse_rfc3339("2024-04-18T17:20:23.243000Z").unwrap();
        assert_eq!(format_rfc3339_nano(&t), "2024-04-18T17:20:23.243Z");
    }
}
