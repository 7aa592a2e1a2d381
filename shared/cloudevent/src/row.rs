//! The `lake.raw_events` row form din writes and its inverse (the event dq decodes).

use crate::event::{CloudEventHeader, RawEvent, SPEC_VERSION};
use crate::{gojson, json, types};
use chrono::{DateTime, DurationRound, TimeDelta, Utc};

/// One `lake.raw_events` row, columns in table order.
#[derive(Debug, Clone, PartialEq)]
pub struct RawRow {
    /// Column 1: header `subject`.
    pub subject: String,
    /// Column 2: header `time`, UTC, truncated to milliseconds.
    pub time: DateTime<Utc>,
    /// Column 3: header `type`.
    pub event_type: String,
    /// Column 4: header `id`.
    pub id: String,
    /// Column 5: header `source`.
    pub source: String,
    /// Column 6: header `producer` (`''` when absent).
    pub producer: String,
    /// Column 7: header `datacontenttype`.
    pub data_content_type: String,
    /// Column 8: header `dataversion`.
    pub data_version: String,
    /// Column 9: non-column header fields as Go-marshalled JSON; `{}` when none.
    pub extras: String,
    /// Column 10: the raw JSON payload text, when the event used `data`.
    pub data: Option<String>,
    /// Column 11: the ASCII bytes of the base64 text exactly as received (not decoded).
    pub data_base64: Option<Vec<u8>>,
    /// Column 12: blob object key when the payload was externalized.
    pub data_index_key: Option<String>,
    /// Column 13: the voided event id, only on `dimo.tombstone` rows.
    pub voids_id: Option<String>,
}

/// What happened to the `extras` column when a row was turned back into an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtrasStatus {
    /// NULL, empty or `{}`: nothing to restore.
    Empty,
    /// Parsed and restored into the header.
    Restored,
    /// Not a JSON object: dropped, the event still decodes (dq counts this as an error).
    Malformed,
    /// `tags` held non-string elements: those were dropped, the rest restored. Go dq panics
    /// here, recovers and counts an error; dq-rust keeps the string tags instead.
    NonStringTags,
}

impl ExtrasStatus {
    /// True when the row should be counted as a (non-fatal) error.
    pub fn is_error(self) -> bool {
        matches!(self, ExtrasStatus::Malformed | ExtrasStatus::NonStringTags)
    }
}

impl RawRow {
    /// Builds the row din writes for an event (din `fillRowArgs`).
    pub fn from_event(event: &RawEvent) -> RawRow {
        let h = &event.header;
        let data_base64 = event.data_base64.as_ref().filter(|s| !s.is_empty());
        let data = match data_base64 {
            Some(_) => None,
            None => event.data.clone().filter(|d| !d.is_empty()),
        };
        let voids_id = if h.event_type == types::TOMBSTONE {
            event.data.as_deref().and_then(tombstone_target)
        } else {
            None
        };
        RawRow {
            subject: h.subject.clone(),
            time: truncate(h.time, TimeDelta::milliseconds(1)),
            event_type: h.event_type.clone(),
            id: h.id.clone(),
            source: h.source.clone(),
            producer: h.producer.clone(),
            data_content_type: h.data_content_type.clone(),
            data_version: h.data_version.clone(),
            extras: extras_json(h),
            data,
            data_base64: data_base64.map(|s| s.as_bytes().to_vec()),
            data_index_key: None,
            voids_id,
        }
    }

    /// Rebuilds the event dq decodes (dq `scanRawEvent`); see [`RawRow::to_event_checked`].
    pub fn to_event(&self) -> RawEvent {
        self.to_event_checked().0
    }

    /// Rebuilds the event and reports what happened to `extras`. Malformed extras are dropped,
    /// never fatal: a poison row must not stop the materializer.
    pub fn to_event_checked(&self) -> (RawEvent, ExtrasStatus) {
        let mut header = CloudEventHeader {
            spec_version: SPEC_VERSION.to_string(),
            event_type: self.event_type.clone(),
            source: self.source.clone(),
            subject: self.subject.clone(),
            id: self.id.clone(),
            time: self.time,
            data_content_type: self.data_content_type.clone(),
            data_version: self.data_version.clone(),
            producer: self.producer.clone(),
            ..CloudEventHeader::default()
        };
        let status = restore_extras(&self.extras, &mut header);
        let data_base64 = self
            .data_base64
            .as_ref()
            .filter(|b| !b.is_empty())
            .map(|b| String::from_utf8_lossy(b).into_owned());
        let data = match data_base64 {
            Some(_) => None,
            None => self.data.clone(),
        };
        (
            RawEvent {
                header,
                data,
                data_base64,
            },
            status,
        )
    }
}

fn truncate(t: DateTime<Utc>, unit: TimeDelta) -> DateTime<Utc> {
    // duration_trunc only fails for spans beyond ±262,000 years, which DateTime cannot hold.
    t.duration_trunc(unit).unwrap_or(t)
}

/// `data.voidsId` of a tombstone, when it is a non-empty string (din `attest.go`).
fn tombstone_target(data: &str) -> Option<String> {
    let doc = json::parse(data).ok()?;
    let id = doc.get_field("voidsId")?.as_str()?;
    (!id.is_empty()).then(|| id.to_string())
}

/// cloudevent `AddNonColumnFieldsToExtras` + Go `json.Marshal`, `{}` when empty.
fn extras_json(h: &CloudEventHeader) -> String {
    let mut extras = h.extras.clone();
    for (key, value) in [
        ("dataschema", &h.data_schema),
        ("signature", &h.signature),
        ("raweventid", &h.raw_event_id),
    ] {
        if !value.is_empty() {
            extras.insert(key.to_string(), serde_json::Value::String(value.clone()));
        }
    }
    if !h.tags.is_empty() {
        extras.insert("tags".to_string(), serde_json::Value::from(h.tags.clone()));
    }
    gojson::marshal_map(&extras)
}

/// cloudevent `RestoreNonColumnFields` over the stored extras text.
fn restore_extras(text: &str, header: &mut CloudEventHeader) -> ExtrasStatus {
    if text.is_empty() || text == "{}" {
        return ExtrasStatus::Empty;
    }
    let Some(serde_json::Value::Object(mut extras)) =
        json::parse(text).ok().and_then(|v| v.to_serde())
    else {
        return ExtrasStatus::Malformed;
    };
    extras.remove("specversion");
    let mut status = ExtrasStatus::Restored;
    for (key, slot) in [
        ("dataschema", &mut header.data_schema),
        ("signature", &mut header.signature),
        ("raweventid", &mut header.raw_event_id),
    ] {
        if let Some(serde_json::Value::String(s)) = extras.remove(key) {
            *slot = s;
        }
    }
    if let Some(serde_json::Value::Array(items)) = extras.remove("tags") {
        if items.iter().any(|t| !t.is_string()) {
            status = ExtrasStatus::NonStringTags;
        }
        header.tags = items
            .into_iter()
            .filter_map(|t| t.as_str().map(str::to_string))
            .collect();
    }
    header.extras = extras;
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::parse_rfc3339;

    fn event(doc: &str) -> RawEvent {
        RawEvent::from_json(doc).unwrap()
    }

    #[test]
    fn truncates_time_to_millis() {
        let row = RawRow::from_event(&event(r#"{"time":"2024-04-18T19:20:46.436999999+02:00"}"#));
        assert_eq!(row.time, parse_rfc3339("2024-04-18T17:20:46.436Z").unwrap());
    }

    #[test]
    fn empty_columns_are_empty_strings_and_extras_is_braces() {
        let row = RawRow::from_event(&event(r#"{"type":"dimo.status","data":{"a":1}}"#));
        assert_eq!(row.producer, "");
        assert_eq!(row.data_version, "");
        assert_eq!(row.extras, "{}");
        assert_eq!(row.data.as_deref(), Some(r#"{"a":1}"#));
        assert_eq!(
            (row.data_base64, row.data_index_key, row.voids_id),
            (None, None, None)
        );
    }

    #[test]
    fn extras_are_go_marshalled() {
        let row = RawRow::from_event(&event(
            r#"{"signature":"0x1","tags":["t<1>"],"dataschema":"s","raweventid":"r",
                "zeta":{"b":1e21,"a":0.0000001,"c":"a&b\u2028"},"alpha":[1,2.50,100000000000000000000]}"#,
        ));
        assert_eq!(
            row.extras,
            concat!(
                r#"{"alpha":[1,2.5,100000000000000000000],"dataschema":"s","raweventid":"r","signature":"0x1","#,
                r#""tags":["t\u003c1\u003e"],"zeta":{"a":1e-7,"b":1e+21,"c":"a\u0026b\u2028"}}"#
            )
        );
    }

    #[test]
    fn base64_is_stored_as_ascii_text() {
        let row = RawRow::from_event(&event(
            r#"{"datacontenttype":"image/png","data_base64":"aGk="}"#,
        ));
        assert_eq!(row.data_base64.as_deref(), Some(b"aGk=".as_slice()));
        assert_eq!(row.data, None);
        let back = row.to_event();
        assert_eq!(back.data_base64.as_deref(), Some("aGk="));
        assert_eq!(back.data, None);
    }

    #[test]
    fn tombstone_sets_voids_id() {
        let row = RawRow::from_event(&event(
            r#"{"type":"dimo.tombstone","data":{"voidsId":"abc","reason":"x"}}"#,
        ));
        assert_eq!(row.voids_id.as_deref(), Some("abc"));
        let not_tomb =
            RawRow::from_event(&event(r#"{"type":"dimo.status","data":{"voidsId":"abc"}}"#));
        assert_eq!(not_tomb.voids_id, None);
        let empty =
            RawRow::from_event(&event(r#"{"type":"dimo.tombstone","data":{"voidsId":""}}"#));
        assert_eq!(empty.voids_id, None);
    }

    #[test]
    fn round_trip_restores_header_fields() {
        let original = event(
            r#"{"type":"dimo.status","source":"0x1","subject":"s","id":"i","time":"2024-01-01T00:00:00.5Z",
                "producer":"p","datacontenttype":"application/json","dataversion":"v2","signature":"0xsig",
                "dataschema":"sch","raweventid":"raw","tags":["a","b"],"vendor":{"k":[1]},"data":{"x":1}}"#,
        );
        let (back, status) = RawRow::from_event(&original).to_event_checked();
        assert_eq!(status, ExtrasStatus::Restored);
        assert_eq!(back, original);
    }

    #[test]
    fn malformed_extras_are_dropped_not_fatal() {
        let mut row = RawRow::from_event(&event(r#"{"id":"x","data":{}}"#));
        for bad in ["not json", "[1]", "{\"n\":1e400}"] {
            row.extras = bad.to_string();
            let (ev, status) = row.to_event_checked();
            assert_eq!(status, ExtrasStatus::Malformed, "{bad}");
            assert!(status.is_error());
            assert!(ev.header.extras.is_empty());
            assert_eq!(ev.header.id, "x");
        }
    }

    #[test]
    fn non_string_tags_are_dropped_and_reported() {
        let mut row = RawRow::from_event(&event("{}"));
        row.extras = r#"{"tags":["a",42,"b"],"specversion":"1.0","signature":7}"#.to_string();
        let (ev, status) = row.to_event_checked();
        assert_eq!(status, ExtrasStatus::NonStringTags);
        assert_eq!(ev.header.tags, ["a", "b"]);
        assert_eq!(ev.header.signature, "");
        assert!(ev.header.extras.is_empty());
    }
}
