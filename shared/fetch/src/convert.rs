//! Wire ↔ native conversions of the FetchService contract:
//! `SearchOptions` → `AdvancedSearchOptions` → [`Filter`], and headers, indexes and events to
//! their protobuf messages (`pkg/grpc/common.go`).

use chrono::{DateTime, Utc};
use dq_cloudevent::event::CloudEventHeader;
use dq_proto::cloudevent as pb;
use dq_proto::grpc::{
    AdvancedSearchOptions, ArrayFilterOption, CloudEventIndex, ObjectInfo, SearchOptions,
    StringFilterOption,
};
use dq_rawquery::error::{FetchError, ReadErrorCode, Result};
use dq_rawquery::filter::{Filter, Order, StringFilter, TagFilter, Voiding, MAX_OR_DEPTH};
use dq_rawquery::search::{Event, Index};

/// The one gRPC mapping of a failed read's code; every RPC answers an error with it.
pub fn grpc_code(code: ReadErrorCode) -> tonic::Code {
    match code {
        ReadErrorCode::NotFound => tonic::Code::NotFound,
        ReadErrorCode::InvalidArgument => tonic::Code::InvalidArgument,
        ReadErrorCode::ResourceExhausted => tonic::Code::ResourceExhausted,
        ReadErrorCode::DeadlineExceeded => tonic::Code::DeadlineExceeded,
        ReadErrorCode::Internal => tonic::Code::Internal,
    }
}

/// `toAdvanced`: each set wrapper becomes `in: [value]`; bounds and order are copied.
pub fn to_advanced(o: &SearchOptions) -> AdvancedSearchOptions {
    let eq = |v: &Option<String>| {
        v.as_ref().map(|v| StringFilterOption {
            r#in: vec![v.clone()],
            ..Default::default()
        })
    };
    AdvancedSearchOptions {
        after: o.after,
        before: o.before,
        timestamp_asc: o.timestamp_asc,
        r#type: eq(&o.r#type),
        data_version: eq(&o.data_version),
        subject: eq(&o.subject),
        source: eq(&o.source),
        producer: eq(&o.producer),
        extras: eq(&o.extras),
        id: eq(&o.id),
        tags: None,
    }
}

/// The advanced options of a request: `advanced_options` when present (plain `options` are
/// then ignored), else the converted `options`, else none.
pub fn effective_options(
    options: Option<&SearchOptions>,
    advanced: Option<&AdvancedSearchOptions>,
) -> AdvancedSearchOptions {
    match (advanced, options) {
        (Some(a), _) => a.clone(),
        (None, Some(o)) => to_advanced(o),
        (None, None) => AdvancedSearchOptions::default(),
    }
}

/// Refuses an `or` alternative below [`MAX_OR_DEPTH`] (fetch-api silently dropped it, which
/// answers a different question than the one asked).
fn check_depth(field: &str, depth: usize) -> Result<()> {
    if depth > MAX_OR_DEPTH {
        return Err(FetchError::InvalidFilter(format!(
            "`{field}`: `or` clauses nest deeper than {MAX_OR_DEPTH} levels"
        )));
    }
    Ok(())
}

fn string_filter(field: &str, f: &StringFilterOption, depth: usize) -> Result<StringFilter> {
    check_depth(field, depth)?;
    Ok(StringFilter {
        include: f.r#in.clone(),
        exclude: f.not_in.clone(),
        or: f
            .or
            .iter()
            .map(|alt| string_filter(field, alt, depth + 1))
            .collect::<Result<_>>()?,
    })
}

fn tag_filter(f: &ArrayFilterOption, depth: usize) -> Result<TagFilter> {
    check_depth("tags", depth)?;
    Ok(TagFilter {
        contains_any: f.contains_any.clone(),
        contains_all: f.contains_all.clone(),
        not_contains_any: f.not_contains_any.clone(),
        not_contains_all: f.not_contains_all.clone(),
        or: f
            .or
            .iter()
            .map(|alt| tag_filter(alt, depth + 1))
            .collect::<Result<_>>()?,
    })
}

/// `filterFromAdvanced`: the search filter, `or` alternatives included on every field
/// (`(in AND not_in) OR or₁ OR …`, the rule of [`StringFilter`] and [`TagFilter`]).
///
/// # Errors
/// [`FetchError::InvalidFilter`] for `or` clauses nested deeper than [`MAX_OR_DEPTH`].
pub fn filter_from_advanced(o: &AdvancedSearchOptions) -> Result<Filter> {
    let string = |field: &str, f: &Option<StringFilterOption>| {
        f.as_ref()
            .map_or(Ok(StringFilter::default()), |f| string_filter(field, f, 0))
    };
    Ok(Filter {
        after: o.after.as_ref().map(from_timestamp),
        before: o.before.as_ref().map(from_timestamp),
        order: if o.timestamp_asc == Some(true) {
            Order::Ascending
        } else {
            Order::Descending
        },
        subject: string("subject", &o.subject)?,
        event_type: string("type", &o.r#type)?,
        data_version: string("data_version", &o.data_version)?,
        source: string("source", &o.source)?,
        producer: string("producer", &o.producer)?,
        extras: string("extras", &o.extras)?,
        id: string("id", &o.id)?,
        tags: o
            .tags
            .as_ref()
            .map_or(Ok(TagFilter::default()), |t| tag_filter(t, 0))?,
        // gRPC keeps dq's rule: every voided row is hidden, whatever its source.
        voiding: Voiding::HideTombstones,
    })
}

/// A protobuf timestamp as UTC (out-of-range values saturate to the representable range).
pub fn from_timestamp(t: &prost_types::Timestamp) -> DateTime<Utc> {
    let nanos = u32::try_from(t.nanos.clamp(0, 999_999_999)).unwrap_or(0);
    DateTime::from_timestamp(t.seconds, nanos).unwrap_or(if t.seconds < 0 {
        DateTime::<Utc>::MIN_UTC
    } else {
        DateTime::<Utc>::MAX_UTC
    })
}

fn to_timestamp(t: &DateTime<Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.timestamp(),
        nanos: i32::try_from(t.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

/// The wire header: extras as JSON-encoded bytes per key, tags always a list.
pub fn header_to_proto(h: &CloudEventHeader) -> pb::CloudEventHeader {
    pb::CloudEventHeader {
        id: h.id.clone(),
        source: h.source.clone(),
        producer: h.producer.clone(),
        spec_version: h.spec_version.clone(),
        subject: h.subject.clone(),
        time: Some(to_timestamp(&h.time)),
        r#type: h.event_type.clone(),
        data_content_type: h.data_content_type.clone(),
        data_schema: h.data_schema.clone(),
        data_version: h.data_version.clone(),
        extras: h
            .extras
            .iter()
            .map(|(k, v)| (k.clone(), dq_cloudevent::gojson::marshal(v).into_bytes()))
            .collect(),
        tags: h.tags.clone(),
        signature: h.signature.clone(),
        raw_event_id: h.raw_event_id.clone(),
    }
}

/// A client-sent header as far as payload resolution needs it (subject, id, and the fields of
/// the header key); extras are not read back.
pub fn header_from_proto(h: &pb::CloudEventHeader) -> CloudEventHeader {
    CloudEventHeader {
        id: h.id.clone(),
        source: h.source.clone(),
        producer: h.producer.clone(),
        subject: h.subject.clone(),
        time: h
            .time
            .as_ref()
            .map(from_timestamp)
            .unwrap_or(DateTime::<Utc>::UNIX_EPOCH),
        event_type: h.r#type.clone(),
        data_content_type: h.data_content_type.clone(),
        data_version: h.data_version.clone(),
        ..CloudEventHeader::default()
    }
}

/// `CloudEventIndex{header, data.key}`.
pub fn index_to_proto(i: &Index) -> CloudEventIndex {
    CloudEventIndex {
        header: Some(header_to_proto(&i.header)),
        data: Some(ObjectInfo { key: i.key.clone() }),
    }
}

/// A client-sent index.
pub fn index_from_proto(i: &CloudEventIndex) -> Index {
    Index {
        header: i.header.as_ref().map(header_from_proto).unwrap_or_default(),
        key: i.data.as_ref().map(|d| d.key.clone()).unwrap_or_default(),
    }
}

/// `CloudEvent{header, data | data_base64}`.
pub fn event_to_proto(e: Event) -> pb::CloudEvent {
    pb::CloudEvent {
        header: Some(header_to_proto(&e.header)),
        data: e.data,
        data_base64: e.data_base64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_options_become_single_value_in_lists() {
        let o = SearchOptions {
            subject: Some("did:a".into()),
            r#type: Some("dimo.status".into()),
            timestamp_asc: Some(true),
            after: Some(prost_types::Timestamp {
                seconds: 10,
                nanos: 0,
            }),
            ..Default::default()
        };
        let f = filter_from_advanced(&effective_options(Some(&o), None)).unwrap();
        assert_eq!(f.subject, StringFilter::eq("did:a"));
        assert_eq!(f.event_type, StringFilter::eq("dimo.status"));
        assert!(f.source.is_empty());
        assert_eq!(f.order, Order::Ascending);
        assert_eq!(f.after.map(|t| t.timestamp()), Some(10));
        // Advanced options win when both are set.
        let a = AdvancedSearchOptions {
            id: Some(StringFilterOption {
                r#in: vec!["x".into()],
                not_in: vec!["y".into()],
                or: vec![],
            }),
            ..Default::default()
        };
        let f = filter_from_advanced(&effective_options(Some(&o), Some(&a))).unwrap();
        assert!(f.subject.is_empty());
        assert_eq!(f.id.exclude, ["y"]);
    }

    /// `depth` levels of `or`, each with one value.
    fn nested_strings(depth: usize) -> StringFilterOption {
        (0..depth).fold(
            StringFilterOption {
                r#in: vec!["leaf".into()],
                ..Default::default()
            },
            |inner, i| StringFilterOption {
                r#in: vec![i.to_string()],
                or: vec![inner],
                ..Default::default()
            },
        )
    }

    #[test]
    fn or_is_served_on_every_field_up_to_the_bound() {
        let a = AdvancedSearchOptions {
            source: Some(StringFilterOption {
                r#in: vec!["s1".into()],
                not_in: vec![],
                or: vec![StringFilterOption {
                    not_in: vec!["s2".into()],
                    ..Default::default()
                }],
            }),
            tags: Some(ArrayFilterOption {
                contains_any: vec!["t".into()],
                or: vec![ArrayFilterOption {
                    contains_all: vec!["u".into()],
                    ..Default::default()
                }],
                ..Default::default()
            }),
            id: Some(nested_strings(MAX_OR_DEPTH)),
            ..Default::default()
        };
        let f = filter_from_advanced(&a).unwrap();
        assert_eq!(f.source.include, ["s1"]);
        assert_eq!(f.source.or[0].exclude, ["s2"]);
        assert_eq!(f.tags.or[0].contains_all, ["u"]);
        let mut depth = 0;
        let mut level = &f.id;
        while let Some(next) = level.or.first() {
            depth += 1;
            level = next;
        }
        assert_eq!(
            (depth, level.include.as_slice()),
            (MAX_OR_DEPTH, &["leaf".to_string()][..])
        );
    }

    #[test]
    fn or_deeper_than_the_bound_is_an_invalid_argument() {
        let a = AdvancedSearchOptions {
            producer: Some(nested_strings(MAX_OR_DEPTH + 1)),
            ..Default::default()
        };
        let e = filter_from_advanced(&a).unwrap_err();
        assert!(matches!(e, FetchError::InvalidFilter(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            "invalid advanced search options: `producer`: `or` clauses nest deeper than 5 levels"
        );
        let tags =
            (0..=MAX_OR_DEPTH).fold(ArrayFilterOption::default(), |inner, _| ArrayFilterOption {
                or: vec![inner],
                ..Default::default()
            });
        let a = AdvancedSearchOptions {
            tags: Some(tags),
            ..Default::default()
        };
        assert!(matches!(
            filter_from_advanced(&a),
            Err(FetchError::InvalidFilter(_))
        ));
    }

    #[test]
    fn extras_are_json_per_key() {
        let mut h = CloudEventHeader::default();
        h.extras.insert("n".into(), serde_json::json!(1.5));
        h.extras.insert("s".into(), serde_json::json!("<a>"));
        let p = header_to_proto(&h);
        assert_eq!(p.extras["n"], b"1.5");
        assert_eq!(p.extras["s"], br#""\u003ca\u003e""#);
        assert!(p.tags.is_empty());
        assert_eq!(p.spec_version, "1.0");
    }
}
