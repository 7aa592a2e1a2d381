//! The CloudEvent header and the raw (undecoded) event: JSON in, JSON out.

use crate::gojson;
use crate::json::{self, Value};
use crate::time::{format_rfc3339_nano, format_rfc3339_secs, go_zero_time, parse_rfc3339};
use base64::Engine as _;
use chrono::{DateTime, Utc};

/// The CloudEvents spec version dq reads and writes; the decoder forces it regardless of input.
pub const SPEC_VERSION: &str = "1.0";

/// Top-level names that are header fields (or payload) and therefore never land in `extras`.
const KNOWN_FIELDS: [&str; 15] = [
    "specversion",
    "type",
    "source",
    "subject",
    "id",
    "time",
    "datacontenttype",
    "dataschema",
    "dataversion",
    "producer",
    "signature",
    "raweventid",
    "tags",
    "data",
    "data_base64",
];

/// A CloudEvent header.
#[derive(Debug, Clone, PartialEq)]
pub struct CloudEventHeader {
    /// Always `"1.0"` after parsing.
    pub spec_version: String,
    /// JSON `type`, e.g. [`crate::types::STATUS`].
    pub event_type: String,
    /// The connection (oracle) address; the decoder-module dispatch key.
    pub source: String,
    /// DID of what the event is about.
    pub subject: String,
    /// Producer-assigned id.
    pub id: String,
    /// Event time; Go's zero time (year 1) when absent.
    pub time: DateTime<Utc>,
    /// `datacontenttype`.
    pub data_content_type: String,
    /// `dataschema` (stored in raw_events `extras`).
    pub data_schema: String,
    /// `dataversion`, the second dispatch key inside modules.
    pub data_version: String,
    /// DID of the emitting device or oracle.
    pub producer: String,
    /// `signature` (stored in `extras`).
    pub signature: String,
    /// `raweventid` (stored in `extras`).
    pub raw_event_id: String,
    /// `tags` (stored in `extras`).
    pub tags: Vec<String>,
    /// Every other top-level member, values as Go's gjson `Value()` would hold them.
    pub extras: serde_json::Map<String, serde_json::Value>,
}

impl Default for CloudEventHeader {
    fn default() -> Self {
        Self {
            spec_version: SPEC_VERSION.to_string(),
            event_type: String::new(),
            source: String::new(),
            subject: String::new(),
            id: String::new(),
            time: go_zero_time(),
            data_content_type: String::new(),
            data_schema: String::new(),
            data_version: String::new(),
            producer: String::new(),
            signature: String::new(),
            raw_event_id: String::new(),
            tags: Vec::new(),
            extras: serde_json::Map::new(),
        }
    }
}

impl CloudEventHeader {
    /// The dedup identity `subject!time!type!source!id`. The time is UTC at
    /// whole-second precision, truncated, so sub-second differences collapse.
    pub fn key(&self) -> String {
        format!(
            "{}!{}!{}!{}!{}",
            self.subject,
            format_rfc3339_secs(&self.time),
            self.event_type,
            self.source,
            self.id
        )
    }
}

/// A CloudEvent whose payload is kept undecoded.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RawEvent {
    /// The header.
    pub header: CloudEventHeader,
    /// The `data` member's JSON text, verbatim (whitespace and duplicate keys kept).
    pub data: Option<String>,
    /// The `data_base64` member's text, verbatim (not decoded).
    pub data_base64: Option<String>,
}

/// Why a document is not a valid CloudEvent.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseError {
    /// Not JSON, or not a JSON object.
    #[error("cloudevent is not a json object: {0}")]
    Json(json::JsonError),
    /// `time` present but not a string.
    #[error("cloudevent time must be a string")]
    TimeNotString,
    /// `time` is not RFC 3339.
    #[error("cloudevent time is not rfc 3339: {0:?}")]
    InvalidTime(String),
    /// `data_base64` present but not a string.
    #[error("cloudevent data_base64 must be a string")]
    DataBase64NotString,
    /// `data_base64` is not standard base64.
    #[error("cloudevent data_base64 is not valid base64")]
    InvalidBase64,
    /// Both `data` and a non-empty `data_base64`.
    #[error("cloudevent has both data and data_base64")]
    BothDataForms,
    /// An extras number that does not fit a float64 (Go could not re-encode it).
    #[error("cloudevent member {0:?} holds a number outside float64 range")]
    NumberOutOfRange(String),
}

impl From<json::JsonError> for ParseError {
    fn from(e: json::JsonError) -> Self {
        ParseError::Json(e)
    }
}

impl ParseError {
    /// A stable, machine-readable reason for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            ParseError::Json(_) => "invalid_json",
            ParseError::TimeNotString => "time_not_string",
            ParseError::InvalidTime(_) => "invalid_time",
            ParseError::DataBase64NotString => "data_base64_not_string",
            ParseError::InvalidBase64 => "invalid_base64",
            ParseError::BothDataForms => "both_data_forms",
            ParseError::NumberOutOfRange(_) => "number_out_of_range",
        }
    }
}

impl RawEvent {
    /// Parses a CloudEvent in stored form: header fields at the top level, payload in `data`
    /// or `data_base64`. Header fields take their FIRST occurrence and must be JSON strings to
    /// count (anything else reads as empty), as with cloudevent's gjson-based decoder; repeated
    /// extras keys take the last one (Go map assignment).
    pub fn from_json(text: &str) -> Result<Self, ParseError> {
        let members = json::parse_object_members(text)?;
        let first = |name: &str| members.iter().find(|m| m.key == name);
        let string_field = |name: &str| {
            first(name)
                .and_then(|m| m.value.as_str())
                .unwrap_or_default()
                .to_string()
        };

        let mut header = CloudEventHeader {
            event_type: string_field("type"),
            source: string_field("source"),
            subject: string_field("subject"),
            id: string_field("id"),
            producer: string_field("producer"),
            data_content_type: string_field("datacontenttype"),
            data_schema: string_field("dataschema"),
            data_version: string_field("dataversion"),
            signature: string_field("signature"),
            raw_event_id: string_field("raweventid"),
            ..CloudEventHeader::default()
        };
        if let Some(m) = first("time") {
            let s = m.value.as_str().ok_or(ParseError::TimeNotString)?;
            header.time = parse_rfc3339(s).ok_or_else(|| ParseError::InvalidTime(s.to_string()))?;
        }
        if let Some(Value::Array(items)) = first("tags").map(|m| &m.value) {
            header.tags = items
                .iter()
                .map(|v| v.as_str().unwrap_or_default().to_string())
                .collect();
        }
        for m in &members {
            if KNOWN_FIELDS.contains(&m.key.as_ref()) {
                continue;
            }
            let value = m
                .value
                .to_serde()
                .ok_or_else(|| ParseError::NumberOutOfRange(m.key.to_string()))?;
            header.extras.insert(m.key.to_string(), value);
        }

        let data_base64 = match first("data_base64") {
            Some(m) => {
                let s = m.value.as_str().ok_or(ParseError::DataBase64NotString)?;
                base64::engine::general_purpose::STANDARD
                    .decode(s)
                    .map_err(|_| ParseError::InvalidBase64)?;
                Some(s.to_string())
            }
            None => None,
        };
        let data = first("data").map(|m| m.raw.to_string());
        // An empty data_base64 counts as absent, as in the Go decoder.
        let data_base64 = data_base64.filter(|s| !s.is_empty());
        if data.is_some() && data_base64.is_some() {
            return Err(ParseError::BothDataForms);
        }
        Ok(RawEvent {
            header,
            data,
            data_base64,
        })
    }

    /// The payload bytes: the `data` text, or the decoded `data_base64`.
    pub fn payload_bytes(&self) -> Option<Vec<u8>> {
        match (&self.data, &self.data_base64) {
            (Some(d), _) => Some(d.as_bytes().to_vec()),
            (None, Some(b)) => base64::engine::general_purpose::STANDARD.decode(b).ok(),
            (None, None) => None,
        }
    }

    /// Serializes in cloudevent's encoder order: specversion, type, source, subject, id, time,
    /// optional datacontenttype/dataschema/dataversion, producer, optional
    /// signature/raweventid/tags, extras (sorted), then `data` or `data_base64`.
    pub fn to_json(&self) -> String {
        let h = &self.header;
        let mut out = String::with_capacity(256 + self.data.as_ref().map_or(0, String::len));
        out.push_str("{\"specversion\":\"1.0\"");
        let field = |out: &mut String, key: &str, value: &str| {
            out.push_str(",\"");
            out.push_str(key);
            out.push_str("\":");
            gojson::write_string(out, value);
        };
        field(&mut out, "type", &h.event_type);
        field(&mut out, "source", &h.source);
        field(&mut out, "subject", &h.subject);
        field(&mut out, "id", &h.id);
        field(&mut out, "time", &format_rfc3339_nano(&h.time));
        for (key, value) in [
            ("datacontenttype", &h.data_content_type),
            ("dataschema", &h.data_schema),
            ("dataversion", &h.data_version),
        ] {
            if !value.is_empty() {
                field(&mut out, key, value);
            }
        }
        field(&mut out, "producer", &h.producer);
        for (key, value) in [("signature", &h.signature), ("raweventid", &h.raw_event_id)] {
            if !value.is_empty() {
                field(&mut out, key, value);
            }
        }
        if !h.tags.is_empty() {
            out.push_str(",\"tags\":");
            out.push_str(&gojson::marshal(&serde_json::Value::from(h.tags.clone())));
        }
        let mut extras: Vec<_> = h.extras.iter().collect();
        extras.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (k, v) in extras {
            out.push(',');
            gojson::write_string(&mut out, k);
            out.push(':');
            out.push_str(&gojson::marshal(v));
        }
        if let Some(b64) = &self.data_base64 {
            field(&mut out, "data_base64", b64);
        } else if let Some(data) = &self.data {
            let ct = &h.data_content_type;
            if is_json_content_type(ct) || (ct.is_empty() && json::parse(data).is_ok()) {
                out.push_str(",\"data\":");
                out.push_str(data);
            } else {
                // The Go encoder ships a non-JSON payload as base64, whatever member it came in.
                field(
                    &mut out,
                    "data_base64",
                    &base64::engine::general_purpose::STANDARD.encode(data),
                );
            }
        }
        out.push('}');
        out
    }
}

/// True for `application/json` and any `+json` media type (parameters ignored).
pub fn is_json_content_type(content_type: &str) -> bool {
    let media = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    media == "application/json" || media.ends_with("+json")
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"{
        "id": "2fHb", "id": "ignored-second", "source": "0xAb", "specversion": "0.3",
        "subject": "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:1",
        "time": "2024-04-18T17:20:46.436008782Z", "type": "dimo.status", "producer": 7,
        "dataversion": "v2", "signature": "0x72", "tags": ["a", 1, "b"],
        "vendor": {"z": 1, "a": "<&>"}, "vendor": "last wins", "n": 1.0,
        "data": { "x" : [1, 2] }
    }"#;

    #[test]
    fn parses_header_extras_and_raw_data() {
        let ev = RawEvent::from_json(DOC).unwrap();
        let h = &ev.header;
        assert_eq!(h.spec_version, "1.0");
        assert_eq!(h.id, "2fHb");
        assert_eq!(h.producer, "", "non-string header fields read as empty");
        assert_eq!(h.tags, ["a", "", "b"]);
        assert_eq!(h.extras.len(), 2);
        assert_eq!(h.extras["vendor"], "last wins");
        assert_eq!(ev.data.as_deref(), Some(r#"{ "x" : [1, 2] }"#));
        assert_eq!(ev.data_base64, None);
    }

    #[test]
    fn key_is_second_precision_utc() {
        let ev = RawEvent::from_json(DOC).unwrap();
        assert_eq!(
            ev.header.key(),
            "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:1!2024-04-18T17:20:46Z!dimo.status!0xAb!2fHb"
        );
        let shifted = RawEvent::from_json(r#"{"time":"2024-04-18T19:20:46.999+02:00"}"#).unwrap();
        assert!(shifted.header.key().contains("!2024-04-18T17:20:46Z!"));
    }

    #[test]
    fn round_trips_through_encoder_order() {
        let ev = RawEvent::from_json(DOC).unwrap();
        let text = ev.to_json();
        assert_eq!(
            text,
            concat!(
                r#"{"specversion":"1.0","type":"dimo.status","source":"0xAb","#,
                r#""subject":"did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:1","id":"2fHb","#,
                r#""time":"2024-04-18T17:20:46.436008782Z","dataversion":"v2","producer":"","signature":"0x72","#,
                r#""tags":["a","","b"],"n":1,"vendor":"last wins","data":{ "x" : [1, 2] }}"#
            )
        );
        assert_eq!(RawEvent::from_json(&text).unwrap(), ev);
    }

    #[test]
    fn data_base64_rules() {
        let ev = RawEvent::from_json(r#"{"data_base64":"aGk="}"#).unwrap();
        assert_eq!(ev.data_base64.as_deref(), Some("aGk="));
        assert_eq!(ev.payload_bytes().unwrap(), b"hi");
        assert!(ev.to_json().ends_with(r#","data_base64":"aGk="}"#));
        let both = RawEvent::from_json(r#"{"data":{},"data_base64":"aGk="}"#).unwrap_err();
        assert_eq!(both.reason(), "both_data_forms");
        assert_eq!(
            RawEvent::from_json(r#"{"data_base64":1}"#)
                .unwrap_err()
                .reason(),
            "data_base64_not_string"
        );
        assert_eq!(
            RawEvent::from_json(r#"{"data_base64":"!!"}"#)
                .unwrap_err()
                .reason(),
            "invalid_base64"
        );
        // An empty data_base64 next to data is not a conflict.
        assert_eq!(
            RawEvent::from_json(r#"{"data":null,"data_base64":""}"#)
                .unwrap()
                .data
                .as_deref(),
            Some("null")
        );
    }

    #[test]
    fn non_json_content_type_is_written_as_base64() {
        let ev = RawEvent::from_json(r#"{"datacontenttype":"image/png","data":"xy"}"#).unwrap();
        assert!(ev.to_json().ends_with(r#""data_base64":"Inh5Ig=="}"#));
        assert!(is_json_content_type(
            "application/cloudevents+json; charset=utf-8"
        ));
        assert!(!is_json_content_type("text/plain"));
    }

    #[test]
    fn time_rules() {
        assert_eq!(
            RawEvent::from_json(r#"{"time":1}"#).unwrap_err().reason(),
            "time_not_string"
        );
        assert_eq!(
            RawEvent::from_json(r#"{"time":"yesterday"}"#)
                .unwrap_err()
                .reason(),
            "invalid_time"
        );
        assert_eq!(
            RawEvent::from_json("{}").unwrap().header.time,
            go_zero_time()
        );
        assert_eq!(
            RawEvent::from_json("[]").unwrap_err().reason(),
            "invalid_json"
        );
    }
}
