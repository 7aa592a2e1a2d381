//! Typed decode problems. Each says which field and why, and has a stable [`DecodeError::reason`]
//! so a materializer can count poison by reason without parsing messages.

use chrono::{DateTime, Utc};
use dq_cloudevent::json::Value;

/// Why (part of) a payload did not decode, or why post-processing dropped a signal.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DecodeError {
    /// The payload is not valid JSON (or is absent).
    #[error("payload is not valid json: {detail}")]
    InvalidJson {
        /// Parser message.
        detail: String,
    },
    /// The payload's shape is wrong where the whole decode depends on it.
    #[error("payload field {path}: expected {expected}, found {found}")]
    Structure {
        /// Dotted path of the offending value (empty for the root).
        path: String,
        /// What the decoder needs there.
        expected: &'static str,
        /// What the payload had.
        found: &'static str,
    },
    /// A required field is absent.
    #[error("field {field} is missing")]
    MissingField {
        /// Dotted path of the missing field.
        field: String,
    },
    /// A field has the wrong JSON type for its signal.
    #[error("field {field}: expected {expected}, found {found}")]
    TypeMismatch {
        /// Dotted path of the field.
        field: String,
        /// Expected JSON type.
        expected: &'static str,
        /// Actual JSON type.
        found: &'static str,
    },
    /// A field has the right type but an unusable value.
    #[error("field {field}: invalid value {value:?}: {why}")]
    InvalidValue {
        /// Dotted path of the field.
        field: String,
        /// The offending value, as text.
        value: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A value is a "not available" sentinel where the decoder reports that as an error
    /// (Ruptela location elements).
    #[error("field {field}: value not available")]
    NotAvailable {
        /// Dotted path of the field.
        field: String,
    },
    /// The default module only accepts catalog signal names.
    #[error("signal {name:?} is not a defined signal name")]
    UnknownSignal {
        /// The rejected name.
        name: String,
    },
    /// An event element was rejected.
    #[error("event {index} ({name:?}): {why}")]
    InvalidEvent {
        /// Position in the payload's event list.
        index: usize,
        /// Its name, possibly empty.
        name: String,
        /// Why it was rejected.
        why: &'static str,
    },
    /// The module does not handle this `dataversion`.
    #[error("unsupported data version {data_version:?}")]
    UnsupportedDataVersion {
        /// The header's dataversion.
        data_version: String,
    },
    /// model-garage has no implementation for this conversion (it panics there).
    #[error("field {field}: conversion to {signal} is not implemented upstream")]
    NotImplemented {
        /// The payload field.
        field: String,
        /// The signal it would feed.
        signal: &'static str,
    },
    /// A protobuf payload did not parse.
    #[error("payload {index}: invalid protobuf: {detail}")]
    Protobuf {
        /// Index in the payload list.
        index: usize,
        /// Decoder message.
        detail: String,
    },
    /// A timestamp cannot be represented.
    #[error("field {field}: timestamp out of range")]
    TimestampOutOfRange {
        /// Dotted path of the field.
        field: String,
    },
    /// Post-processing: the signal is more than the allowed skew in the future.
    #[error("signal {name} has future timestamp {timestamp}")]
    FutureTimestamp {
        /// Signal name.
        name: &'static str,
        /// Its timestamp.
        timestamp: DateTime<Utc>,
    },
    /// Post-processing: a latitude/longitude pair is not a valid WGS-84 position (or is 0,0).
    #[error("invalid coordinates ({latitude}, {longitude}) at {timestamp}")]
    InvalidCoordinates {
        /// Latitude.
        latitude: f64,
        /// Longitude.
        longitude: f64,
        /// Start of the triple.
        timestamp: DateTime<Utc>,
    },
    /// Post-processing: a latitude without a longitude or vice versa.
    #[error("unpaired {name} at {timestamp}")]
    UnpairedCoordinate {
        /// `currentLocationLatitude` or `currentLocationLongitude`.
        name: &'static str,
        /// Start of the triple.
        timestamp: DateTime<Utc>,
    },
    /// Post-processing: NaN or ±Inf cannot be stored.
    #[error("signal {name} has a non-finite value")]
    NonFinite {
        /// Signal name.
        name: &'static str,
    },
}

impl DecodeError {
    /// A stable, machine-readable reason (metric label).
    pub fn reason(&self) -> &'static str {
        match self {
            DecodeError::InvalidJson { .. } => "invalid_json",
            DecodeError::Structure { .. } => "bad_structure",
            DecodeError::MissingField { .. } => "missing_field",
            DecodeError::TypeMismatch { .. } => "type_mismatch",
            DecodeError::InvalidValue { .. } => "invalid_value",
            DecodeError::NotAvailable { .. } => "not_available",
            DecodeError::UnknownSignal { .. } => "unknown_signal",
            DecodeError::InvalidEvent { .. } => "invalid_event",
            DecodeError::UnsupportedDataVersion { .. } => "unsupported_data_version",
            DecodeError::NotImplemented { .. } => "not_implemented",
            DecodeError::Protobuf { .. } => "invalid_protobuf",
            DecodeError::TimestampOutOfRange { .. } => "timestamp_out_of_range",
            DecodeError::FutureTimestamp { .. } => "future_timestamp",
            DecodeError::InvalidCoordinates { .. } => "invalid_coordinates",
            DecodeError::UnpairedCoordinate { .. } => "unpaired_coordinate",
            DecodeError::NonFinite { .. } => "non_finite_value",
        }
    }

    pub(crate) fn structure(
        path: impl Into<String>,
        expected: &'static str,
        found: &Value<'_>,
    ) -> Self {
        DecodeError::Structure {
            path: path.into(),
            expected,
            found: found.kind(),
        }
    }

    pub(crate) fn type_mismatch(
        field: impl Into<String>,
        expected: &'static str,
        found: &Value<'_>,
    ) -> Self {
        DecodeError::TypeMismatch {
            field: field.into(),
            expected,
            found: found.kind(),
        }
    }

    pub(crate) fn missing(field: impl Into<String>) -> Self {
        DecodeError::MissingField {
            field: field.into(),
        }
    }

    pub(crate) fn invalid(
        field: impl Into<String>,
        value: impl Into<String>,
        why: &'static str,
    ) -> Self {
        DecodeError::InvalidValue {
            field: field.into(),
            value: value.into(),
            why,
        }
    }
}
