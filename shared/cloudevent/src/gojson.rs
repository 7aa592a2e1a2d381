//! JSON text exactly as Go's `encoding/json.Marshal` writes it for an `any` value.
//!
//! din stores `extras` this way: map keys sorted byte-wise at every level, no
//! whitespace, HTML-safe escaping (`<`, `>`, `&` as `\u003c` …), U+2028/U+2029 escaped, and every
//! number rendered as a float64 with Go's `strconv` rules.

use serde_json::Value;
use std::fmt::Write as _;

/// Serializes `value` as Go's `json.Marshal` would after a gjson `Value()` round trip.
pub fn marshal(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

/// Serializes an object (map) as Go would, keys sorted.
pub fn marshal_map(map: &serde_json::Map<String, Value>) -> String {
    let mut out = String::new();
    write_map(&mut out, map);
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        // serde_json numbers are finite; Go holds every JSON number as float64 here.
        Value::Number(n) => out.push_str(&format_float(n.as_f64().unwrap_or(0.0))),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => write_map(out, map),
    }
}

fn write_map(out: &mut String, map: &serde_json::Map<String, Value>) {
    // Sort explicitly: the map's own order depends on serde_json's `preserve_order` feature.
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    out.push('{');
    for (i, (k, v)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(out, k);
        out.push(':');
        write_value(out, v);
    }
    out.push('}');
}

/// Writes a JSON string with Go's default (HTML-safe) escaping.
pub fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            // Go 1.22+ uses the short forms for backspace and form feed.
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Formats a finite float64 like Go's `encoding/json`: shortest round-trip digits, plain
/// decimal for 1e-6 <= |f| < 1e21, otherwise exponent form with `e-7` / `e+21` exponents.
pub fn format_float(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        // Rust's `{:e}` is shortest round-trip too; Go writes a sign on positive exponents.
        let s = format!("{f:e}");
        match s.split_once('e') {
            Some((mantissa, exp)) if !exp.starts_with('-') => format!("{mantissa}e+{exp}"),
            _ => s,
        }
    } else {
        format!("{f}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_follow_go() {
        let cases: [(f64, &str); 14] = [
            (0.0, "0"),
            (-0.0, "-0"),
            (1.0, "1"),
            (2419200.0, "2419200"),
            (0.1, "0.1"),
            (19.200000000000003, "19.200000000000003"),
            (1e20, "100000000000000000000"),
            (1e21, "1e+21"),
            (1.5e300, "1.5e+300"),
            (0.000001, "0.000001"),
            (0.0000015, "0.0000015"),
            (1e-7, "1e-7"),
            (-1.25e-10, "-1.25e-10"),
            (9007199254740993.0, "9007199254740992"),
        ];
        for (f, want) in cases {
            assert_eq!(format_float(f), want, "{f:?}");
        }
    }

    #[test]
    fn strings_use_html_safe_escaping() {
        let mut out = String::new();
        write_string(
            &mut out,
            "<a&b>\"\\\n\r\t\u{8}\u{c}\u{1}\u{7f}\u{2028}\u{2029}é",
        );
        assert_eq!(
            out,
            r#""\u003ca\u0026b\u003e\"\\\n\r\t\b\f\u0001\u007f\u2028\u2029é""#
                .replace("\\u007f", "\u{7f}")
        );
    }

    #[test]
    fn maps_sorted_recursively_and_numbers_as_floats() {
        let v =
            json!({"b": {"z": 1, "a": [true, null, 12345678901234567890u64]}, "a": "x", "B": 1.5});
        assert_eq!(
            marshal(&v),
            r#"{"B":1.5,"a":"x","b":{"a":[true,null,12345678901234567000],"z":1}}"#
        );
    }
}
