//! The default module: the catch-all for every source without a vendor module
//! (a port of dq's `defaultmodule.go`).
//!
//! Payloads are read the way Go's `encoding/json` fills a struct: field names match
//! case-insensitively, the LAST duplicate wins, and a type mismatch anywhere fails the whole
//! payload (zero items, one error).

use crate::error::DecodeError;
use crate::model::{Decoded, Event, Location, Signal, SignalValue};
use crate::util::{go_parse_float, payload};
use chrono::{DateTime, Utc};
use dq_cloudevent::json::{self, Value};
use dq_cloudevent::time::{go_zero_time, parse_rfc3339};
use dq_cloudevent::RawEvent;
use dq_signals::ValueKind;

/// One `signals[]` element after the structural pass.
struct RawSignal<'d, 'a> {
    name: &'d str,
    timestamp: DateTime<Utc>,
    value: Option<&'d Value<'a>>,
}

/// Decodes `{"signals":[{"name","timestamp","value"}]}` into catalog signals.
pub fn convert_signals(event: &RawEvent) -> Decoded<Signal> {
    let doc = match payload(event) {
        Ok(doc) => doc,
        Err(e) => return Decoded::failed(e),
    };
    let elements = match signal_elements(&doc) {
        Ok(elements) => elements,
        Err(e) => return Decoded::failed(e),
    };
    let mut out = Decoded {
        items: Vec::with_capacity(elements.len()),
        errors: Vec::new(),
    };
    for element in elements {
        match to_signal(&element) {
            Ok(signal) => out.items.push(signal),
            Err(e) => out.errors.push(e),
        }
    }
    out
}

/// The structural pass: everything Go's `json.Unmarshal` would reject fails the payload.
fn signal_elements<'d, 'a>(doc: &'d Value<'a>) -> Result<Vec<RawSignal<'d, 'a>>, DecodeError> {
    let signals = match doc {
        Value::Null => return Ok(Vec::new()),
        Value::Object(_) => doc.get_field("signals"),
        other => return Err(DecodeError::structure("", "object", other)),
    };
    let items = match signals {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(other) => return Err(DecodeError::structure("signals", "array", other)),
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            // Go dereferences a nil *defaultSignal here and the whole event is lost to a
            // recovered panic; a structural error has the same outcome without the panic.
            if !matches!(item, Value::Object(_)) {
                return Err(DecodeError::structure(
                    format!("signals.{i}"),
                    "object",
                    item,
                ));
            }
            let name = match item.get_field("name") {
                None | Some(Value::Null) => "",
                Some(Value::String(s)) => s.as_ref(),
                Some(other) => {
                    return Err(DecodeError::structure(
                        format!("signals.{i}.name"),
                        "string",
                        other,
                    ))
                }
            };
            let timestamp = go_time_field(item.get_field("timestamp"), || {
                format!("signals.{i}.timestamp")
            })?;
            let value = item.get_field("value");
            if let Some(Value::Number(raw)) = value {
                // Go decodes `any` numbers into float64 and rejects out-of-range literals.
                if value.and_then(Value::as_f64_finite).is_none() {
                    return Err(DecodeError::invalid(
                        format!("signals.{i}.value"),
                        *raw,
                        "number out of float64 range",
                    ));
                }
            }
            Ok(RawSignal {
                name,
                timestamp,
                value,
            })
        })
        .collect()
}

/// A `time.Time` struct field: absent or null is the zero time, otherwise an RFC 3339 string.
/// `path` is only built on error: this runs once per element on the hot path.
fn go_time_field(
    value: Option<&Value<'_>>,
    path: impl FnOnce() -> String,
) -> Result<DateTime<Utc>, DecodeError> {
    match value {
        None | Some(Value::Null) => Ok(go_zero_time()),
        Some(Value::String(s)) => parse_rfc3339(s)
            .ok_or_else(|| DecodeError::invalid(path(), s.as_ref(), "not an rfc 3339 time")),
        Some(other) => Err(DecodeError::structure(path(), "rfc 3339 string", other)),
    }
}

fn to_signal(element: &RawSignal<'_, '_>) -> Result<Signal, DecodeError> {
    let def = dq_signals::signal(element.name).ok_or_else(|| DecodeError::UnknownSignal {
        name: element.name.to_string(),
    })?;
    let field = || format!("{}.value", def.name);
    let value = match element.value {
        None | Some(Value::Null) => return Err(DecodeError::missing(field())),
        Some(v) => v,
    };
    let value = match def.kind {
        ValueKind::Number => match value {
            Value::Number(_) => SignalValue::Number(value.as_f64().unwrap_or_default()),
            Value::String(s) => SignalValue::Number(
                go_parse_float(s)
                    .ok_or_else(|| DecodeError::invalid(field(), s.as_ref(), "not a float64"))?,
            ),
            other => return Err(DecodeError::type_mismatch(field(), "number", other)),
        },
        ValueKind::String => match value {
            Value::String(s) => SignalValue::String(s.to_string()),
            other => return Err(DecodeError::type_mismatch(field(), "string", other)),
        },
        ValueKind::Location => SignalValue::Location(location(value, &field())?),
    };
    Ok(Signal {
        name: def.name,
        timestamp: element.timestamp,
        value,
    })
}

/// A location object: optional numeric `latitude`/`longitude`/`hdop` (missing → 0), read from
/// a Go map, so keys are exact and the last duplicate wins. `heading` is ignored.
fn location(value: &Value<'_>, field: &str) -> Result<Location, DecodeError> {
    let Value::Object(members) = value else {
        return Err(DecodeError::type_mismatch(field, "object", value));
    };
    let mut loc = Location::default();
    for (key, slot) in [
        ("latitude", &mut loc.latitude),
        ("longitude", &mut loc.longitude),
        ("hdop", &mut loc.hdop),
    ] {
        if let Some((_, v)) = members.iter().rev().find(|(k, _)| k == key) {
            *slot = v
                .as_f64()
                .ok_or_else(|| DecodeError::type_mismatch(format!("{field}.{key}"), "number", v))?;
        }
    }
    Ok(loc)
}

/// Decodes `{"events":[{"name","timestamp","durationNs","metadata","tags"}]}`.
pub fn convert_events(event: &RawEvent) -> Decoded<Event> {
    let doc = match payload(event) {
        Ok(doc) => doc,
        Err(e) => return Decoded::failed(e),
    };
    let elements = match event_elements(&doc) {
        Ok(elements) => elements,
        Err(e) => return Decoded::failed(e),
    };
    let mut out = Decoded::default();
    for (index, element) in elements.into_iter().enumerate() {
        match validate_event(index, element) {
            Ok(ev) => out.items.push(ev),
            Err(e) => out.errors.push(e),
        }
    }
    out
}

struct RawEventElement<'d> {
    name: &'d str,
    timestamp: DateTime<Utc>,
    duration_ns: u64,
    metadata: &'d str,
    tags: Vec<&'d str>,
}

fn event_elements<'d>(doc: &'d Value<'_>) -> Result<Vec<RawEventElement<'d>>, DecodeError> {
    let events = match doc {
        Value::Null => return Ok(Vec::new()),
        Value::Object(_) => doc.get_field("events"),
        other => return Err(DecodeError::structure("", "object", other)),
    };
    let items = match events {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(other) => return Err(DecodeError::structure("events", "array", other)),
    };
    let string_field =
        |item: &'d Value<'_>, key: &str, path: String| -> Result<&'d str, DecodeError> {
            match item.get_field(key) {
                None | Some(Value::Null) => Ok(""),
                Some(Value::String(s)) => Ok(s.as_ref()),
                Some(other) => Err(DecodeError::structure(path, "string", other)),
            }
        };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            // A null element decodes to a zero struct, which then fails validation by name.
            let item = match item {
                Value::Null => return Ok(RawEventElement::empty()),
                Value::Object(_) => item,
                other => {
                    return Err(DecodeError::structure(
                        format!("events.{i}"),
                        "object",
                        other,
                    ))
                }
            };
            let duration_ns = match item.get_field("durationNs") {
                None | Some(Value::Null) => 0,
                // Go's uint64 decode accepts plain non-negative integer literals only.
                Some(Value::Number(raw)) => raw.parse::<u64>().map_err(|_| {
                    DecodeError::invalid(format!("events.{i}.durationNs"), *raw, "not a uint64")
                })?,
                Some(other) => {
                    return Err(DecodeError::structure(
                        format!("events.{i}.durationNs"),
                        "number",
                        other,
                    ))
                }
            };
            let tags = match item.get_field("tags") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(tags)) => tags
                    .iter()
                    .enumerate()
                    .map(|(t, tag)| match tag {
                        Value::Null => Ok(""),
                        Value::String(s) => Ok(s.as_ref()),
                        other => Err(DecodeError::structure(
                            format!("events.{i}.tags.{t}"),
                            "string",
                            other,
                        )),
                    })
                    .collect::<Result<_, _>>()?,
                Some(other) => {
                    return Err(DecodeError::structure(
                        format!("events.{i}.tags"),
                        "array",
                        other,
                    ))
                }
            };
            Ok(RawEventElement {
                name: string_field(item, "name", format!("events.{i}.name"))?,
                timestamp: go_time_field(item.get_field("timestamp"), || {
                    format!("events.{i}.timestamp")
                })?,
                duration_ns,
                metadata: string_field(item, "metadata", format!("events.{i}.metadata"))?,
                tags,
            })
        })
        .collect()
}

impl RawEventElement<'_> {
    fn empty() -> Self {
        RawEventElement {
            name: "",
            timestamp: go_zero_time(),
            duration_ns: 0,
            metadata: "",
            tags: Vec::new(),
        }
    }
}

fn validate_event(index: usize, element: RawEventElement<'_>) -> Result<Event, DecodeError> {
    let reject = |why| DecodeError::InvalidEvent {
        index,
        name: element.name.to_string(),
        why,
    };
    if element.name.is_empty() {
        return Err(reject("name is empty"));
    }
    if element.timestamp == go_zero_time() {
        return Err(reject("timestamp is zero"));
    }
    let name = dq_signals::EVENT_NAMES
        .iter()
        .find(|n| **n == element.name)
        .ok_or_else(|| reject("unknown event name"))?;
    if !element.metadata.is_empty() && json::parse(element.metadata).is_err() {
        return Err(reject("metadata is not valid json"));
    }
    if element.tags.iter().any(|t| !is_lowercase(t)) {
        return Err(reject("tags must be lowercase"));
    }
    Ok(Event {
        name,
        timestamp: element.timestamp,
        duration_ns: element.duration_ns,
        metadata: element.metadata.to_string(),
        tags: element.tags.into_iter().map(str::to_string).collect(),
    })
}

/// Go's `tag == strings.ToLower(tag)`, per character.
fn is_lowercase(tag: &str) -> bool {
    tag.chars().all(|c| {
        let mut lower = c.to_lowercase();
        lower.next() == Some(c) && lower.next().is_none()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(data: &str) -> RawEvent {
        RawEvent {
            data: Some(data.to_string()),
            ..RawEvent::default()
        }
    }

    const TS: &str = "2024-12-01T15:31:12.378075897Z";

    fn sig(name: &str, value: &str) -> String {
        format!(r#"{{"signals":[{{"timestamp":"{TS}","name":"{name}","value":{value}}}]}}"#)
    }

    #[test]
    fn numbers_accept_numeric_strings_but_not_bools() {
        let out = convert_signals(&event(&sig("speed", "\"102\"")));
        assert_eq!(out.items[0].as_number(), Some(102.0));
        let out = convert_signals(&event(&sig("isIgnitionOn", "true")));
        assert_eq!(
            (out.items.len(), out.errors[0].reason()),
            (0, "type_mismatch")
        );
        let out = convert_signals(&event(&sig("speed", "\"NaN\"")));
        assert!(out.items[0].as_number().is_some_and(f64::is_nan));
        let out = convert_signals(&event(&sig("speed", "\"fast\"")));
        assert_eq!(out.errors[0].reason(), "invalid_value");
    }

    #[test]
    fn strings_are_not_stringified() {
        let out = convert_signals(&event(&sig("powertrainType", "1")));
        assert_eq!(out.errors[0].reason(), "type_mismatch");
    }

    #[test]
    fn unknown_and_missing_values_are_per_element_errors() {
        let data = format!(
            r#"{{"signals":[{{"timestamp":"{TS}","name":"currentLocationLatitude","value":1}},
                {{"timestamp":"{TS}","name":"speed","value":null}},{{"timestamp":"{TS}","name":"speed","value":1}}]}}"#
        );
        let out = convert_signals(&event(&data));
        assert_eq!(out.items.len(), 1);
        let reasons: Vec<_> = out.errors.iter().map(DecodeError::reason).collect();
        assert_eq!(reasons, ["unknown_signal", "missing_field"]);
    }

    #[test]
    fn location_reads_optional_numbers_last_wins() {
        let out = convert_signals(&event(&sig(
            "currentLocationCoordinates",
            r#"{"latitude":1,"latitude":2,"hdop":3,"heading":9,"Longitude":5}"#,
        )));
        assert_eq!(
            out.items[0].value,
            SignalValue::Location(Location {
                latitude: 2.0,
                longitude: 0.0,
                hdop: 3.0,
                heading: 0.0
            })
        );
        let out = convert_signals(&event(&sig(
            "currentLocationCoordinates",
            r#"{"latitude":"1"}"#,
        )));
        assert_eq!(out.errors[0].reason(), "type_mismatch");
    }

    #[test]
    fn struct_decode_rules_fail_the_whole_payload() {
        for bad in [
            "[]",
            r#"{"signals":{}}"#,
            r#"{"signals":[1]}"#,
            r#"{"signals":[null]}"#,
            r#"{"signals":[{"name":1}]}"#,
            r#"{"signals":[{"name":"speed","timestamp":"yesterday","value":1}]}"#,
            r#"{"signals":[{"name":"speed","timestamp":1,"value":1}]}"#,
            r#"{"signals":[{"name":"speed","value":1e400}]}"#,
            "not json",
        ] {
            let out = convert_signals(&event(bad));
            assert!(
                out.items.is_empty() && out.errors.len() == 1,
                "{bad}: {out:?}"
            );
        }
        for empty in ["null", "{}", r#"{"signals":null}"#, r#"{"signals":[]}"#] {
            assert_eq!(
                convert_signals(&event(empty)),
                Decoded::default(),
                "{empty}"
            );
        }
    }

    #[test]
    fn field_names_fold_case_and_last_duplicate_wins() {
        let data = r#"{"SIGNALS":[{"Name":"speed","NAME":"powertrainRange","value":7}]}"#;
        let out = convert_signals(&event(data));
        assert_eq!(out.items[0].name, "powertrainRange");
        assert_eq!(
            out.items[0].timestamp,
            go_zero_time(),
            "a missing timestamp is the zero time"
        );
    }

    #[test]
    fn events_validation() {
        let data = r#"{"events":[
            {"name":"behavior.harshBraking","timestamp":"2024-01-01T00:00:00Z","durationNs":5,"metadata":"{\"a\":1}","tags":["x"]},
            {"name":"","timestamp":"2024-01-01T00:00:00Z"},
            {"name":"behavior.harshBraking"},
            {"name":"harsh_braking","timestamp":"2024-01-01T00:00:00Z"},
            {"name":"safety.collision","timestamp":"2024-01-01T00:00:00Z","metadata":"{"},
            {"name":"safety.collision","timestamp":"2024-01-01T00:00:00Z","tags":["Bad"]},
            null,
            {"name":"safety.collision","timestamp":"2024-01-01T00:00:00Z"}
        ]}"#;
        let out = convert_events(&event(data));
        assert_eq!(out.items.len(), 2);
        assert_eq!(out.items[0].duration_ns, 5);
        assert_eq!(out.items[0].tags, ["x"]);
        assert!(out.items[1].tags.is_empty());
        assert_eq!(out.errors.len(), 6);
        assert!(out.errors.iter().all(|e| e.reason() == "invalid_event"));
    }

    #[test]
    fn events_struct_rules() {
        for bad in [
            r#"{"events":[{"durationNs":-1}]}"#,
            r#"{"events":[{"durationNs":1.5}]}"#,
            r#"{"events":[{"tags":[1]}]}"#,
        ] {
            let out = convert_events(&event(bad));
            assert!(
                out.items.is_empty() && out.errors[0].reason() == "bad_structure"
                    || out.errors[0].reason() == "invalid_value",
                "{bad}"
            );
        }
    }
}
