//! Small Go-compatibility helpers shared by the modules.

use crate::error::DecodeError;
use chrono::{DateTime, Utc};
use dq_cloudevent::json::{self, Value};
use dq_cloudevent::RawEvent;

/// Parses the event's JSON payload. dq hands modules the `data` column only; a `data_base64`
/// row reaches them with an empty payload.
pub(crate) fn payload<'a>(event: &'a RawEvent) -> Result<Value<'a>, DecodeError> {
    json::parse(event.data.as_deref().unwrap_or_default()).map_err(|e| DecodeError::InvalidJson {
        detail: e.to_string(),
    })
}

/// Go `time.UnixMilli`.
pub(crate) fn unix_millis(ms: i64) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp_millis(ms)
}

/// Go `time.Unix(secs, 0)`.
pub(crate) fn unix_secs(secs: i64) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(secs, 0)
}

/// Go `strconv.ParseFloat(s, 64)` where an error means "rejected": decimal or `0x` hex-float
/// syntax, optional sign, `inf`/`infinity`/`nan` in any case (no sign on `nan`), and overflow
/// to ±Inf is an error rather than a value.
pub(crate) fn go_parse_float(s: &str) -> Option<f64> {
    let (negative, body) = match s.as_bytes().first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let sign = if negative { -1.0 } else { 1.0 };
    if body.eq_ignore_ascii_case("inf") || body.eq_ignore_ascii_case("infinity") {
        return Some(sign * f64::INFINITY);
    }
    if body.eq_ignore_ascii_case("nan") {
        return (body.len() == s.len()).then_some(f64::NAN);
    }
    if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        return parse_hex_float(hex).map(|v| sign * v);
    }
    let decimal_syntax = !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
        && body
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_digit() || b == b'.');
    if !decimal_syntax {
        return None;
    }
    let value: f64 = body.parse().ok()?;
    value.is_finite().then_some(sign * value)
}

/// The part after `0x` of a Go hex float: hex mantissa (optional point, `_` between digits)
/// and a mandatory binary `p` exponent. Mantissas beyond 15 significant hex digits are
/// truncated, which can differ from Go in the last bit.
fn parse_hex_float(s: &str) -> Option<f64> {
    let (mantissa, exponent) = s.split_once(['p', 'P'])?;
    let exponent: i32 = exponent.parse().ok()?;
    let mut value: u64 = 0;
    let mut digits = 0;
    let mut scale = 0i32;
    let mut seen_point = false;
    let mut any_digit = false;
    let mut prev_underscore = true;
    for c in mantissa.chars() {
        match c {
            '.' if !seen_point => {
                seen_point = true;
                prev_underscore = false;
            }
            '_' if !prev_underscore && !seen_point => prev_underscore = true,
            c => {
                let d = c.to_digit(16)?;
                any_digit = true;
                prev_underscore = false;
                if digits < 15 {
                    value = value * 16 + u64::from(d);
                    if value > 0 {
                        digits += 1;
                    }
                    if seen_point {
                        scale -= 4;
                    }
                } else if !seen_point {
                    scale += 4;
                }
            }
        }
    }
    if !any_digit || prev_underscore && mantissa.ends_with('_') {
        return None;
    }
    // Exact: at most 60 mantissa bits, scaled by a power of two.
    let v = (value as f64) * 2f64.powi(exponent.saturating_add(scale));
    v.is_finite().then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_float_matches_go() {
        let ok = [
            ("102", 102.0),
            ("-1.5e3", -1500.0),
            ("+.5", 0.5),
            ("5.", 5.0),
            ("0x1.8p1", 3.0),
            ("-0X10p-4", -1.0),
            ("0x1_0p0", 16.0),
            ("1e-400", 0.0),
        ];
        for (s, want) in ok {
            assert_eq!(go_parse_float(s), Some(want), "{s}");
        }
        assert_eq!(go_parse_float("Inf"), Some(f64::INFINITY));
        assert_eq!(go_parse_float("-infinity"), Some(f64::NEG_INFINITY));
        assert!(go_parse_float("NaN").is_some_and(f64::is_nan));
        for bad in [
            "", "abc", "1e400", "+nan", "0x1", "1_000", "--1", "1 ", " 1", "e5", "0x", "infinit",
        ] {
            assert_eq!(go_parse_float(bad).map(f64::to_bits), None, "{bad}");
        }
    }
}
