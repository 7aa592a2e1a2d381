//! Flat decoded rows in `lake.signals` / `lake.events` column order.

use std::borrow::Cow;
use std::sync::Arc;

use crate::model::{Event, Signal, SignalValue};
use crate::post::truncate_micros;
use chrono::{DateTime, Utc};
use dq_cloudevent::{subject_bucket, types, RawEvent};

/// One `lake.signals` row; field order is the table's column order. The columns an event's rows
/// share are shared, not copied, and a decoded row's name is the decoder's own: a window decodes
/// ~10⁶ rows, and a copy of each string per row was most of its allocations.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalRow {
    /// Raw row subject.
    pub subject: Arc<str>,
    /// FNV-1a-32(subject) mod 256.
    pub subject_bucket: i32,
    /// Signal name.
    pub name: Cow<'static, str>,
    /// UTC, floored to µs.
    pub timestamp: DateTime<Utc>,
    /// Raw row source.
    pub source: Arc<str>,
    /// Raw row producer.
    pub producer: Arc<str>,
    /// Raw row id.
    pub cloud_event_id: Arc<str>,
    /// Numeric value, 0 otherwise.
    pub value_number: f64,
    /// String value, `''` otherwise.
    pub value_string: String,
    /// Location latitude, 0 otherwise.
    pub loc_lat: f64,
    /// Location longitude, 0 otherwise.
    pub loc_lon: f64,
    /// Location HDOP, 0 otherwise.
    pub loc_hdop: f64,
    /// Location heading (never set by any module), 0 otherwise.
    pub loc_heading: f64,
}

/// One `lake.events` row; field order is the table's column order.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    /// Raw row subject.
    pub subject: String,
    /// FNV-1a-32(subject) mod 256.
    pub subject_bucket: i32,
    /// Raw row source.
    pub source: String,
    /// Raw row producer.
    pub producer: String,
    /// Raw row id.
    pub cloud_event_id: String,
    /// Always `dimo.event`.
    pub event_type: String,
    /// The raw row's dataversion.
    pub data_version: String,
    /// Event name.
    pub name: String,
    /// UTC, floored to µs.
    pub timestamp: DateTime<Utc>,
    /// Duration in ns.
    pub duration_ns: u64,
    /// JSON text or empty.
    pub metadata: String,
    /// Tags, never absent.
    pub tags: Vec<String>,
}

/// Flattens an event's signals onto `out` (a batch's rows go straight into one vector, with no
/// vector per event to copy from); subject, source and producer come from the raw row, never the
/// decoder. The subject's bucket is hashed once per event, not per row.
pub fn push_signal_rows(out: &mut Vec<SignalRow>, raw: &RawEvent, signals: &[Signal]) {
    if signals.is_empty() {
        return;
    }
    let h = &raw.header;
    let head = Head {
        subject: h.subject.as_str().into(),
        subject_bucket: subject_bucket(&h.subject),
        source: h.source.as_str().into(),
        producer: h.producer.as_str().into(),
        cloud_event_id: h.id.as_str().into(),
    };
    out.extend(signals.iter().map(|s| signal_row(&head, s)));
}

/// The columns of an event's signal rows that come from the raw row.
struct Head {
    subject: Arc<str>,
    subject_bucket: i32,
    source: Arc<str>,
    producer: Arc<str>,
    cloud_event_id: Arc<str>,
}

fn signal_row(head: &Head, signal: &Signal) -> SignalRow {
    let (value_number, value_string, loc) = match &signal.value {
        SignalValue::Number(v) => (*v, String::new(), Default::default()),
        SignalValue::String(s) => (0.0, s.clone(), Default::default()),
        SignalValue::Location(l) => (0.0, String::new(), *l),
    };
    SignalRow {
        subject: Arc::clone(&head.subject),
        subject_bucket: head.subject_bucket,
        name: Cow::Borrowed(signal.name),
        timestamp: truncate_micros(signal.timestamp),
        source: Arc::clone(&head.source),
        producer: Arc::clone(&head.producer),
        cloud_event_id: Arc::clone(&head.cloud_event_id),
        value_number,
        value_string,
        loc_lat: loc.latitude,
        loc_lon: loc.longitude,
        loc_hdop: loc.hdop,
        loc_heading: loc.heading,
    }
}

/// Flattens an event.
pub fn event_row(raw: &RawEvent, event: &Event) -> EventRow {
    let h = &raw.header;
    EventRow {
        subject: h.subject.clone(),
        subject_bucket: subject_bucket(&h.subject),
        source: h.source.clone(),
        producer: h.producer.clone(),
        cloud_event_id: h.id.clone(),
        event_type: types::EVENT.to_string(),
        data_version: h.data_version.clone(),
        name: event.name.to_string(),
        timestamp: truncate_micros(event.timestamp),
        duration_ns: event.duration_ns,
        metadata: event.metadata.clone(),
        tags: event.tags.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dq_cloudevent::time::parse_rfc3339;

    fn raw() -> RawEvent {
        let mut raw = RawEvent::default();
        raw.header.subject = "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:1".into();
        raw.header.source = "src".into();
        raw.header.producer = "prod".into();
        raw.header.id = "id-1".into();
        raw.header.data_version = "r/v0/s".into();
        raw
    }

    #[test]
    fn signal_rows_take_identity_from_the_raw_row() {
        let ts = parse_rfc3339("2025-03-03T22:22:59.138863102Z").unwrap();
        let mut rows = Vec::new();
        push_signal_rows(
            &mut rows,
            &raw(),
            &[
                Signal::location(ts, 1.0, 2.0, 3.0),
                Signal::string("powertrainType", ts, "HYBRID"),
            ],
        );
        let [row, string] = rows.as_slice() else {
            panic!("two rows: {rows:?}");
        };
        assert_eq!((row.subject_bucket, string.subject_bucket), (219, 219));
        assert_eq!(
            (&*row.source, &*row.producer, &*row.cloud_event_id),
            ("src", "prod", "id-1")
        );
        assert_eq!(
            row.timestamp,
            parse_rfc3339("2025-03-03T22:22:59.138863Z").unwrap()
        );
        assert_eq!(
            (
                row.value_number,
                row.value_string.as_str(),
                row.loc_lat,
                row.loc_lon,
                row.loc_hdop
            ),
            (0.0, "", 1.0, 2.0, 3.0)
        );
        assert_eq!(
            (
                string.value_number,
                string.value_string.as_str(),
                string.loc_lat
            ),
            (0.0, "HYBRID", 0.0)
        );
    }

    #[test]
    fn event_rows() {
        let ev = Event {
            name: "safety.collision",
            timestamp: parse_rfc3339("2024-01-01T00:00:00.0000019Z").unwrap(),
            duration_ns: 7,
            metadata: "{}".into(),
            tags: vec![],
        };
        let row = event_row(&raw(), &ev);
        assert_eq!(row.event_type, "dimo.event");
        assert_eq!(row.data_version, "r/v0/s");
        assert_eq!(row.timestamp.timestamp_subsec_nanos(), 1000);
        assert!(row.tags.is_empty());
    }
}
