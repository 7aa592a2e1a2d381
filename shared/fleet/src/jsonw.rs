//! Append-only JSON text helpers. Payloads are written straight into a `String` instead of going
//! through `serde_json::Value`, which keeps generation allocation-light (one buffer per payload).

use std::fmt::Write as _;

/// Milliseconds in a day.
pub(crate) const DAY_MS: i64 = 86_400_000;

/// Appends a finite number in shortest round-trip form; non-finite values (which JSON cannot
/// carry) are written as 0 so a payload can never become invalid.
pub(crate) fn num(out: &mut String, v: f64) {
    let v = if v.is_finite() { v } else { 0.0 };
    // Writing to a String cannot fail.
    let _ = write!(out, "{v}");
}

/// Appends an integer. Hand-rolled because `fmt` machinery dominates small-integer output.
pub(crate) fn int(out: &mut String, v: i64) {
    if v < 0 {
        out.push('-');
    }
    let mut n = v.unsigned_abs();
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend(buf[i..].iter().map(|&b| char::from(b)));
}

/// Appends an unsigned integer as uppercase hex without padding (Ruptela's signal encoding).
pub(crate) fn hex(out: &mut String, v: u64) {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    let mut n = v;
    let mut buf = [0u8; 16];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = DIGITS[(n & 0xf) as usize];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    out.extend(buf[i..].iter().map(|&b| char::from(b)));
}

/// Rounds to `decimals` places. The result prints as that decimal because the division by a power
/// of ten is correctly rounded.
pub(crate) fn round(v: f64, decimals: i32) -> f64 {
    let p = 10f64.powi(decimals);
    (v * p).round() / p
}

/// The elements of a JSON array or object being appended to a buffer, `,`-separated.
pub(crate) struct Elements<'a> {
    out: &'a mut String,
    first: bool,
}

impl<'a> Elements<'a> {
    /// Elements appended to `out`, whose array or object is already open.
    pub(crate) fn new(out: &'a mut String) -> Self {
        Elements { out, first: true }
    }

    /// The buffer, ready for the next element (after a `,` unless it is the first).
    pub(crate) fn next(&mut self) -> &mut String {
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
        self.out
    }
}

/// Appends a JSON string literal (quotes included), escaping what JSON requires.
pub(crate) fn string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Appends `YYYY-MM-DDTHH:MM:SS.mmmZ` for Unix milliseconds (no quotes).
pub(crate) fn rfc3339_ms(out: &mut String, ms: i64) {
    let days = ms.div_euclid(DAY_MS);
    let rem = ms.rem_euclid(DAY_MS);
    let (y, mo, d) = civil_from_days(days);
    let secs = rem / 1000;
    let _ = write!(
        out,
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        secs / 3600,
        (secs / 60) % 60,
        secs % 60,
        rem % 1000
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{DateTime, SecondsFormat};

    #[test]
    fn rfc3339_matches_chrono() {
        for ms in [
            0_i64,
            951_782_400_123,
            1_727_425_406_999,
            4_102_444_799_000,
            1_709_164_800_000,
        ] {
            let mut s = String::new();
            rfc3339_ms(&mut s, ms);
            let expect = DateTime::from_timestamp_millis(ms)
                .unwrap()
                .to_rfc3339_opts(SecondsFormat::Millis, true);
            assert_eq!(s, expect);
        }
    }

    #[test]
    fn rounding_prints_short() {
        let mut s = String::new();
        num(&mut s, round(0.1 + 0.2, 3));
        s.push(' ');
        num(&mut s, round(52.123_456_789, 6));
        s.push(' ');
        num(&mut s, f64::NAN);
        assert_eq!(s, "0.3 52.123457 0");
    }

    #[test]
    fn integers_match_fmt() {
        for v in [0_i64, 7, -7, 10, 1_748_824_063_606, i64::MIN, i64::MAX] {
            let mut s = String::new();
            int(&mut s, v);
            assert_eq!(s, v.to_string());
        }
        for v in [0_u64, 9, 10, 0x1F3F, u64::MAX] {
            let mut s = String::new();
            hex(&mut s, v);
            assert_eq!(s, format!("{v:X}"));
        }
    }

    #[test]
    fn escapes_strings() {
        let mut s = String::new();
        string(&mut s, "a\"b\\c\n");
        assert_eq!(s, r#""a\"b\\c\u000a""#);
    }
}
