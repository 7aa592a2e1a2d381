//! What decoders produce: signals and events.
//!
//! Every module stamps the raw event's id as `cloudEventId` and dq takes subject, source and
//! producer from the raw row, so those are not repeated per item; flattening (`rows`) adds them.

use crate::error::DecodeError;
use chrono::{DateTime, Utc};

pub use dq_signals::Location;

/// A signal value; which variant is used follows from the signal's catalog kind.
#[derive(Debug, Clone, PartialEq)]
pub enum SignalValue {
    /// Numeric and boolean (0/1) signals.
    Number(f64),
    /// String signals; string arrays are JSON-encoded.
    String(String),
    /// `currentLocationCoordinates`.
    Location(Location),
}

/// One decoded signal.
#[derive(Debug, Clone, PartialEq)]
pub struct Signal {
    /// JSON signal name (catalog or vendor-only name).
    pub name: &'static str,
    /// When the value was measured (not necessarily the CloudEvent time).
    pub timestamp: DateTime<Utc>,
    /// The value.
    pub value: SignalValue,
}

impl Signal {
    /// A numeric signal.
    pub fn number(name: &'static str, timestamp: DateTime<Utc>, value: f64) -> Self {
        Signal {
            name,
            timestamp,
            value: SignalValue::Number(value),
        }
    }

    /// A string signal.
    pub fn string(name: &'static str, timestamp: DateTime<Utc>, value: impl Into<String>) -> Self {
        Signal {
            name,
            timestamp,
            value: SignalValue::String(value.into()),
        }
    }

    /// A location signal (always `currentLocationCoordinates`).
    pub fn location(timestamp: DateTime<Utc>, latitude: f64, longitude: f64, hdop: f64) -> Self {
        Signal {
            name: dq_signals::names::CURRENT_LOCATION_COORDINATES,
            timestamp,
            value: SignalValue::Location(Location {
                latitude,
                longitude,
                hdop,
                heading: 0.0,
            }),
        }
    }

    /// The numeric value, if this is a number signal.
    pub fn as_number(&self) -> Option<f64> {
        match self.value {
            SignalValue::Number(n) => Some(n),
            _ => None,
        }
    }
}

/// One decoded vehicle event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Event name, one of the catalog's event names.
    pub name: &'static str,
    /// When it happened.
    pub timestamp: DateTime<Utc>,
    /// Duration in nanoseconds (0 if instantaneous).
    pub duration_ns: u64,
    /// A string holding JSON, or empty.
    pub metadata: String,
    /// Lowercase tags (never absent: empty means none).
    pub tags: Vec<String>,
}

/// A module's result: what decoded, and every per-field or whole-payload problem.
///
/// This is model-garage's `ConversionError{DecodedSignals, Errors}` made explicit: the items are
/// always kept (dq salvages partial decodes), and `errors` non-empty means the raw event counts
/// as one decode failure.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded<T> {
    /// Successfully decoded items, in module order.
    pub items: Vec<T>,
    /// Problems met on the way.
    pub errors: Vec<DecodeError>,
}

impl<T> Default for Decoded<T> {
    fn default() -> Self {
        Decoded {
            items: Vec::new(),
            errors: Vec::new(),
        }
    }
}

impl<T> Decoded<T> {
    /// Nothing decoded, one whole-payload error.
    pub fn failed(error: DecodeError) -> Self {
        Decoded {
            items: Vec::new(),
            errors: vec![error],
        }
    }
}
