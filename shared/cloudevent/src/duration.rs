//! Go `time.ParseDuration`, truncated to whole microseconds: the one parser of Go duration
//! strings, for `signals(interval:)` and every duration setting (Go services took both in this form).

/// Parses a Go duration string into whole microseconds (truncating toward zero).
///
/// # Errors
/// The Go error text: `time: invalid duration "<s>"` (or `unknown unit`/`missing unit`).
pub fn parse_go_duration_us(s: &str) -> Result<i64, String> {
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
    // Accumulate in nanoseconds as f64-free integer math: whole part and fraction separately.
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
    let us = i64::try_from(total_ns / 1_000).map_err(|_| invalid())?;
    Ok(if negative { -us } else { us })
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
        assert_eq!(parse_go_duration_us("1µs"), Ok(1));
        assert_eq!(parse_go_duration_us(".5s"), Ok(500_000));
        assert_eq!(
            parse_go_duration_us("1d"),
            Err("time: unknown unit \"d\" in duration \"1d\"".into())
        );
        assert_eq!(
            parse_go_duration_us("abc"),
            Err("time: invalid duration \"abc\"".into())
        );
        assert_eq!(
            parse_go_duration_us(""),
            Err("time: invalid duration \"\"".into())
        );
    }
}
