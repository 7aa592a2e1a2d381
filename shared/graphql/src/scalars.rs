//! Wire formats of output values: `Time` in as RFC3339, out as RFC3339 with trailing
//! fractional zeros trimmed and a `Z` suffix; `Float` numbers; objects built in key order.

use async_graphql::{Error, Number, Result, Value};
use chrono::{DateTime, SecondsFormat, Utc};
use dq_query::aggregate::Location;

/// Parses a `Time` input (RFC3339 / RFC3339Nano with any offset) into µs since the epoch
/// (floor, as Go's `UnixMicro` for post-epoch times).
pub fn parse_time_us(s: &str) -> Option<i64> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc).timestamp_micros())
}

/// Formats µs as Go's RFC3339Nano in UTC (`2024-01-02T03:04:05.5Z`).
pub fn format_time_us(us: i64) -> String {
    let t = DateTime::<Utc>::from_timestamp_micros(us).unwrap_or_default();
    let s = t.to_rfc3339_opts(SecondsFormat::Nanos, true);
    // "….500000000Z" → "….5Z"; "….000000000Z" → "…Z".
    match s.strip_suffix('Z').and_then(|b| b.split_once('.')) {
        Some((whole, frac)) => {
            let frac = frac.trim_end_matches('0');
            if frac.is_empty() {
                format!("{whole}Z")
            } else {
                format!("{whole}.{frac}Z")
            }
        }
        None => s,
    }
}

/// A `Time` output value.
pub fn time_value(us: i64) -> Value {
    Value::String(format_time_us(us))
}

/// Validator of the `Time` scalar.
pub fn is_time(v: &Value) -> bool {
    matches!(v, Value::String(s) if parse_time_us(s).is_some())
}

/// A `Float` output. Integral values print without a fraction (`5`, not `5.0`), as Go's `%g`
/// does below 1e21; NaN/Inf are a field error.
pub(crate) fn number(v: f64) -> Result<Value> {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        // Exact: |v| < 2^53.
        return Ok(Value::Number(Number::from(v as i64)));
    }
    Number::from_f64(v)
        .map(Value::Number)
        .ok_or_else(|| Error::new(format!("cannot represent {v} as a GraphQL Float")))
}

/// A GraphQL object value from `(key, value)` pairs, in order.
pub(crate) fn object(fields: Vec<(&str, Value)>) -> Value {
    Value::Object(
        fields
            .into_iter()
            .map(|(k, v)| (async_graphql::Name::new(k), v))
            .collect(),
    )
}

/// A `Location` output.
pub(crate) fn location_value(l: &Location) -> Result<Value> {
    Ok(object(vec![
        ("latitude", number(l.latitude)?),
        ("longitude", number(l.longitude)?),
        ("hdop", number(l.hdop)?),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_round_trip() {
        assert_eq!(format_time_us(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_time_us(1_500_000), "1970-01-01T00:00:01.5Z");
        assert_eq!(parse_time_us("1970-01-01T00:00:01.5Z"), Some(1_500_000));
        assert_eq!(parse_time_us("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(parse_time_us("yesterday"), None);
    }
}
