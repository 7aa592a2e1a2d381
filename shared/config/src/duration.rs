//! Go `time.ParseDuration`: the one parser of Go duration strings, for every duration setting
//! and for `signals(interval:)` (the Go services took both in this form).

use std::time::Duration;

/// A Go duration in nanoseconds, within Go's `int64` range.
///
/// # Errors
/// The Go error text: `time: invalid duration "<s>"` (or `unknown unit`/`missing unit`).
fn parse_go_duration_ns(s: &str) -> Result<i64, String> {
    let invalid = || format!("time: invalid duration {}", go_quote(s));
    let mut rest = s;
    let mut negative = false;
    if let Some(r) = rest.strip_prefix('-') {
        negative = true;
        rest = r;
    } else if let Some(r) = rest.strip_prefix('+') {
        rest = r;
    }
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    // Integer math: the whole part and the fraction separately, as Go does.
    let mut total_ns: i128 = 0;
    while !rest.is_empty() {
        let digits_end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (whole, after) = rest.split_at(digits_end);
        let (frac, after) = match after.strip_prefix('.') {
            Some(a) => {
                let end = a.find(|c: char| !c.is_ascii_digit()).unwrap_or(a.len());
                a.split_at(end)
            }
            None => ("", after),
        };
        if whole.is_empty() && frac.is_empty() {
            return Err(invalid());
        }
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_end);
        let unit_ns: i128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(format!("time: missing unit in duration {}", go_quote(s))),
            other => {
                return Err(format!(
                    "time: unknown unit {} in duration {}",
                    go_quote(other),
                    go_quote(s)
                ))
            }
        };
        let whole: i128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| invalid())?
        };
        let mut part = whole.checked_mul(unit_ns).ok_or_else(invalid)?;
        let mut scale = unit_ns;
        for d in frac.bytes() {
            if scale < 10 {
                break;
            }
            scale /= 10;
            part += i128::from(d - b'0') * scale;
        }
        total_ns = total_ns.checked_add(part).ok_or_else(invalid)?;
        if total_ns > i128::from(i64::MAX) {
            return Err(invalid());
        }
        rest = next;
    }
    let ns = i64::try_from(total_ns).map_err(|_| invalid())?;
    Ok(if negative { -ns } else { ns })
}

/// Parses a Go duration string into whole microseconds (truncating toward zero); negative
/// durations are allowed (`-1s`).
///
/// # Errors
/// The Go error text: `time: invalid duration "<s>"` (or `unknown unit`/`missing unit`).
pub fn parse_go_duration_us(s: &str) -> Result<i64, String> {
    parse_go_duration_ns(s).map(|ns| ns / 1_000)
}

/// A duration setting: a non-negative Go duration (`15s`, `1h30m`, `2.5s`, `500ms`, `8760h`,
/// `0`); a bare number other than `0` has no unit and is refused, as in Go.
///
/// # Errors
/// The Go error text, or that the duration is negative.
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let ns = parse_go_duration_ns(s)?;
    u64::try_from(ns)
        .map(Duration::from_nanos)
        .map_err(|_| format!("negative duration {}", go_quote(s)))
}

/// A duration setting that also takes whole seconds without a unit (`120` = `120s`), for the
/// settings documented that way (`MATERIALIZER_LEASE_TTL`); anything else as
/// [`parse_go_duration`].
///
/// # Errors
/// As [`parse_go_duration`].
pub fn parse_seconds_or_go_duration(s: &str) -> Result<Duration, String> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse()
            .map(Duration::from_secs)
            .map_err(|_| format!("time: invalid duration {}", go_quote(s)));
    }
    parse_go_duration(s)
}

/// Go's `%q` for the ASCII strings that reach here (quotes and backslashes escaped).
fn go_quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_grammar() {
        assert_eq!(parse_go_duration_us("1h"), Ok(3_600_000_000));
        assert_eq!(parse_go_duration_us("1.5h"), Ok(5_400_000_000));
        assert_eq!(parse_go_duration_us("2h45m"), Ok(9_900_000_000));
        assert_eq!(parse_go_duration_us("300ms"), Ok(300_000));
        assert_eq!(parse_go_duration_us("500ns"), Ok(0));
        assert_eq!(parse_go_duration_us("1500ns"), Ok(1));
        assert_eq!(parse_go_duration_us("0"), Ok(0));
        assert_eq!(parse_go_duration_us("-1s"), Ok(-1_000_000));
        assert_eq!(parse_go_duration_us("-1500ns"), Ok(-1));
        assert_eq!(parse_go_duration_us("+2s"), Ok(2_000_000));
        assert_eq!(parse_go_duration_us("1µs"), Ok(1));
        assert_eq!(parse_go_duration_us("1μs"), Ok(1));
        assert_eq!(parse_go_duration_us("1us"), Ok(1));
        assert_eq!(parse_go_duration_us(".5s"), Ok(500_000));
        assert_eq!(
            parse_go_duration_us("1d"),
            Err("time: unknown unit \"d\" in duration \"1d\"".into())
        );
        assert_eq!(
            parse_go_duration_us("15"),
            Err("time: missing unit in duration \"15\"".into())
        );
        assert_eq!(
            parse_go_duration_us("abc"),
            Err("time: invalid duration \"abc\"".into())
        );
        assert_eq!(
            parse_go_duration_us(""),
            Err("time: invalid duration \"\"".into())
        );
        assert!(parse_go_duration_us("9999999999h").is_err());
    }

    /// Every form the materializer's, the lease's and the cloud-event parser accepted.
    #[test]
    fn settings_durations() {
        let secs = Duration::from_secs;
        for (text, want) in [
            ("8760h", secs(8760 * 3600)),
            ("1h30m", secs(5400)),
            ("15s", secs(15)),
            ("120s", secs(120)),
            ("2m", secs(120)),
            ("1h", secs(3600)),
            ("1m30s", secs(90)),
            ("2.5s", Duration::from_millis(2500)),
            ("1.5h", secs(5400)),
            ("250ms", Duration::from_millis(250)),
            ("1500ms", Duration::from_millis(1500)),
            ("1500ns", Duration::from_nanos(1500)),
            ("3us", Duration::from_micros(3)),
            ("3µs", Duration::from_micros(3)),
            ("0", Duration::ZERO),
        ] {
            assert_eq!(parse_go_duration(text), Ok(want), "{text}");
            assert_eq!(parse_seconds_or_go_duration(text), Ok(want), "{text}");
        }
        for bad in ["", "15", "x", "s", "-3", "-1s", "2d", "ten", "5s3", "m5"] {
            assert!(parse_go_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_go_duration("-1s"),
            Err("negative duration \"-1s\"".into())
        );
    }

    #[test]
    fn whole_seconds_without_a_unit() {
        assert_eq!(
            parse_seconds_or_go_duration("120"),
            Ok(Duration::from_secs(120))
        );
        assert_eq!(parse_seconds_or_go_duration("0"), Ok(Duration::ZERO));
        for bad in [
            "",
            "s",
            "-3",
            "2d",
            "ten",
            "5s3",
            "m5",
            "99999999999999999999",
        ] {
            assert!(parse_seconds_or_go_duration(bad).is_err(), "{bad}");
        }
    }
}
