//! The GraphQL types of the schemas, registered in shared sets — [`register_signal_types`] (dq,
//! telemetry) and [`register_cloud_event_types`] (dq, fetch) — plus each dialect's own types.
//! The signal fields are generated from the signal catalog (`dq_signals::SIGNALS`, i.e.
//! `shared/signals/data/signals.json`) so the signal fields × (aggregation, latest) and their
//! privilege directives cannot drift from the decoders' catalog.

use crate::context::nullable;
use crate::dialect::{Dialect, DialectExt};
use crate::scalars;
use crate::signals::{aggregated_field, latest_field, AggRow, LatestData};
use async_graphql::dynamic::{
    Directive, Enum, Field, FieldFuture, FieldValue, InputObject, InputValue, Object, Scalar,
    SchemaBuilder, TypeRef,
};
use async_graphql::{Name, Value};
use dq_auth::authz::{APPROXIMATE_LOCATION_PRIVILEGES, APPROXIMATE_LOCATION_SIGNAL};
use dq_query::segments::Mechanism;
use dq_signals::{SignalDef, ValueKind, SIGNALS};

/// `@requiresAllOfPrivileges(privileges: [...])` / `@requiresOneOfPrivilege(...)`.
pub(super) fn privilege_directive(name: &str, privileges: &[dq_auth::Privilege]) -> Directive {
    Directive::new(name).argument(
        "privileges",
        Value::List(
            privileges
                .iter()
                .map(|p| Value::Enum(Name::new(p.as_str())))
                .collect(),
        ),
    )
}

fn signal_description(def: &SignalDef) -> String {
    let mut lines = vec![format!("{} ({})", def.vss_path, def.vss_datatype)];
    if let Some(u) = def.unit {
        lines.push(format!("Unit: '{u}'"));
    }
    if let Some(m) = def.min {
        lines.push(format!("Min: {m}"));
    }
    if let Some(m) = def.max {
        lines.push(format!("Max: {m}"));
    }
    let privs: Vec<&str> = def.privileges.iter().map(|p| p.as_str()).collect();
    lines.push(format!("Required Privileges: [{}]", privs.join(" ")));
    lines.join("\n")
}

/// An object whose parent value is a GraphQL object value: each field reads its own key.
fn value_object(name: &str, fields: &[(&'static str, TypeRef)]) -> Object {
    fields.iter().fold(Object::new(name), |obj, (field, ty)| {
        let key = *field;
        obj.field(Field::new(key, ty.clone(), move |ctx| {
            FieldFuture::new(async move {
                let v = match ctx.parent_value.as_value() {
                    Some(Value::Object(map)) => map.get(key).cloned(),
                    _ => None,
                };
                Ok(v.filter(|v| *v != Value::Null).map(FieldValue::value))
            })
        }))
    })
}

/// A non-null named type.
pub(super) fn nn(t: &str) -> TypeRef {
    TypeRef::named_nn(t)
}

/// A nullable named type.
pub(super) fn opt(t: &str) -> TypeRef {
    TypeRef::named(t)
}

fn enum_type(name: &str, items: &[&str]) -> Enum {
    Enum::new(name).items(items.iter().copied())
}

/// Registers the types dq and telemetry share: scalars, the signal, event
/// and segment types, `Privilege`. `DetectionMechanism` is per dialect ([`detection_mechanism`]).
pub fn register_signal_types(builder: SchemaBuilder) -> SchemaBuilder {
    let privileges: Vec<&str> = dq_auth::Privilege::ALL.iter().map(|p| p.as_str()).collect();
    let float_filter = InputObject::new("SignalFloatFilter")
        .field(InputValue::new("eq", opt(TypeRef::FLOAT)))
        .field(InputValue::new("neq", opt(TypeRef::FLOAT)))
        .field(InputValue::new("gt", opt(TypeRef::FLOAT)))
        .field(InputValue::new("lt", opt(TypeRef::FLOAT)))
        .field(InputValue::new("gte", opt(TypeRef::FLOAT)))
        .field(InputValue::new("lte", opt(TypeRef::FLOAT)))
        .field(InputValue::new(
            "notIn",
            TypeRef::named_nn_list(TypeRef::FLOAT),
        ))
        .field(InputValue::new(
            "in",
            TypeRef::named_nn_list(TypeRef::FLOAT),
        ))
        .field(InputValue::new(
            "or",
            TypeRef::named_nn_list("SignalFloatFilter"),
        ));
    let string_filter = InputObject::new("StringValueFilter")
        .field(InputValue::new("eq", opt(TypeRef::STRING)))
        .field(InputValue::new("neq", opt(TypeRef::STRING)))
        .field(InputValue::new(
            "notIn",
            TypeRef::named_nn_list(TypeRef::STRING),
        ))
        .field(InputValue::new(
            "in",
            TypeRef::named_nn_list(TypeRef::STRING),
        ))
        .field(InputValue::new("startsWith", opt(TypeRef::STRING)))
        .field(InputValue::new(
            "or",
            TypeRef::named_nn_list("StringValueFilter"),
        ));
    let array_filter = [
        "containsAny",
        "containsAll",
        "notContainsAny",
        "notContainsAll",
    ]
    .iter()
    .fold(InputObject::new("StringArrayFilter"), |o, f| {
        o.field(InputValue::new(*f, TypeRef::named_nn_list(TypeRef::STRING)))
    })
    .field(InputValue::new(
        "or",
        TypeRef::named_nn_list("StringArrayFilter"),
    ));
    builder
        .register(time_scalar())
        .register(Scalar::new("Uint64").validator(|v| matches!(v, Value::Number(n) if n.is_u64())))
        .register(enum_type("Privilege", &privileges))
        .register(enum_type(
            "FloatAggregation",
            &["AVG", "MED", "MAX", "MIN", "RAND", "FIRST", "LAST"],
        ))
        .register(enum_type(
            "LocationAggregation",
            &["AVG", "RAND", "FIRST", "LAST"],
        ))
        .register(enum_type(
            "StringAggregation",
            &["RAND", "TOP", "UNIQUE", "FIRST", "LAST"],
        ))
        .register(
            InputObject::new("SignalFilter").field(InputValue::new("source", opt(TypeRef::STRING))),
        )
        .register(float_filter)
        .register(
            InputObject::new("FilterLocation")
                .field(InputValue::new("latitude", nn(TypeRef::FLOAT)))
                .field(InputValue::new("longitude", nn(TypeRef::FLOAT))),
        )
        .register(
            InputObject::new("InCircleFilter")
                .field(InputValue::new("center", nn("FilterLocation")))
                .field(InputValue::new("radius", nn(TypeRef::FLOAT))),
        )
        .register(
            InputObject::new("SignalLocationFilter")
                .field(InputValue::new(
                    "inPolygon",
                    TypeRef::named_nn_list("FilterLocation"),
                ))
                .field(InputValue::new("inCircle", opt("InCircleFilter"))),
        )
        .register(string_filter)
        .register(array_filter)
        .register(
            InputObject::new("EventFilter")
                .field(InputValue::new("name", opt("StringValueFilter")))
                .field(InputValue::new("source", opt("StringValueFilter")))
                .field(InputValue::new("tags", opt("StringArrayFilter"))),
        )
        .register(value_object(
            "Location",
            &[
                ("latitude", nn(TypeRef::FLOAT)),
                ("longitude", nn(TypeRef::FLOAT)),
                ("hdop", nn(TypeRef::FLOAT)),
            ],
        ))
        .register(value_object(
            "SignalFloat",
            &[("timestamp", nn("Time")), ("value", nn(TypeRef::FLOAT))],
        ))
        .register(value_object(
            "SignalString",
            &[("timestamp", nn("Time")), ("value", nn(TypeRef::STRING))],
        ))
        .register(value_object(
            "SignalLocation",
            &[("timestamp", nn("Time")), ("value", nn("Location"))],
        ))
        .register(value_object(
            "LatestSignal",
            &[
                ("name", nn(TypeRef::STRING)),
                ("timestamp", nn("Time")),
                ("valueNumber", opt(TypeRef::FLOAT)),
                ("valueString", opt(TypeRef::STRING)),
                ("valueLocation", opt("Location")),
            ],
        ))
        .register(value_object(
            "SignalsSnapshotResponse",
            &[
                ("lastSeen", opt("Time")),
                ("signals", TypeRef::named_nn_list_nn("LatestSignal")),
            ],
        ))
        .register(value_object(
            "DataSummary",
            &[
                ("numberOfSignals", nn("Uint64")),
                (
                    "availableSignals",
                    TypeRef::named_nn_list_nn(TypeRef::STRING),
                ),
                ("firstSeen", nn("Time")),
                ("lastSeen", nn("Time")),
                (
                    "signalDataSummary",
                    TypeRef::named_nn_list_nn("SignalDataSummary"),
                ),
                (
                    "eventDataSummary",
                    TypeRef::named_nn_list_nn("EventDataSummary"),
                ),
            ],
        ))
        .register(value_object(
            "SignalDataSummary",
            &[
                ("name", nn(TypeRef::STRING)),
                ("numberOfSignals", nn("Uint64")),
                ("firstSeen", nn("Time")),
                ("lastSeen", nn("Time")),
            ],
        ))
        .register(value_object(
            "EventDataSummary",
            &[
                ("name", nn(TypeRef::STRING)),
                ("numberOfEvents", nn("Uint64")),
                ("firstSeen", nn("Time")),
                ("lastSeen", nn("Time")),
            ],
        ))
        .register(value_object(
            "Event",
            &[
                ("timestamp", nn("Time")),
                ("name", nn(TypeRef::STRING)),
                ("source", nn(TypeRef::STRING)),
                ("durationNs", nn(TypeRef::INT)),
                ("metadata", opt(TypeRef::STRING)),
            ],
        ))
        .register(
            InputObject::new("SegmentSignalRequest")
                .field(InputValue::new("name", nn(TypeRef::STRING)))
                .field(InputValue::new("agg", nn("FloatAggregation"))),
        )
        .register(
            InputObject::new("SegmentEventRequest")
                .field(InputValue::new("name", nn(TypeRef::STRING))),
        )
        .register(
            InputObject::new("SegmentConfig")
                .field(InputValue::new("maxGapSeconds", opt(TypeRef::INT)).default_value(300))
                .field(
                    InputValue::new("minSegmentDurationSeconds", opt(TypeRef::INT))
                        .default_value(240),
                )
                .field(InputValue::new("signalCountThreshold", opt(TypeRef::INT)).default_value(10))
                .field(InputValue::new("maxIdleRpm", opt(TypeRef::INT)).default_value(1000))
                .field(InputValue::new("minIncreasePercent", opt(TypeRef::INT)).default_value(15)),
        )
        .register(value_object(
            "SignalAggregationValue",
            &[
                ("name", nn(TypeRef::STRING)),
                ("agg", nn(TypeRef::STRING)),
                ("value", nn(TypeRef::FLOAT)),
            ],
        ))
        .register(value_object(
            "EventCount",
            &[("name", nn(TypeRef::STRING)), ("count", nn(TypeRef::INT))],
        ))
        .register(value_object(
            "Segment",
            &[
                ("start", nn("SignalLocation")),
                ("end", opt("SignalLocation")),
                ("duration", nn(TypeRef::INT)),
                ("isOngoing", nn(TypeRef::BOOLEAN)),
                ("startedBeforeRange", nn(TypeRef::BOOLEAN)),
                ("signals", TypeRef::named_nn_list("SignalAggregationValue")),
                ("eventCounts", TypeRef::named_nn_list("EventCount")),
            ],
        ))
        .register(value_object(
            "DailyActivity",
            &[
                ("start", opt("SignalLocation")),
                ("end", opt("SignalLocation")),
                ("segmentCount", nn(TypeRef::INT)),
                ("duration", nn(TypeRef::INT)),
                (
                    "signals",
                    TypeRef::named_nn_list_nn("SignalAggregationValue"),
                ),
                ("eventCounts", TypeRef::named_nn_list_nn("EventCount")),
            ],
        ))
        .register(signal_aggregations())
        .register(signal_collection())
}

/// The `Time` scalar (RFC 3339).
pub(super) fn time_scalar() -> Scalar {
    Scalar::new("Time").validator(scalars::is_time)
}

/// `DetectionMechanism` in the dialect's spelling; both map onto one internal `Mechanism`
/// ([`DialectExt::mechanism`]).
pub(super) fn detection_mechanism(dialect: Dialect) -> Enum {
    let names: Vec<&str> = Mechanism::ALL
        .iter()
        .map(|m| dialect.mechanism_name(*m))
        .collect();
    enum_type("DetectionMechanism", &names)
}

/// Registers the types dq and fetch share: `JSON` and the cloud-event
/// types.
pub fn register_cloud_event_types(builder: SchemaBuilder) -> SchemaBuilder {
    builder
        .register(Scalar::new("JSON"))
        .register(
            InputObject::new("CloudEventFilter")
                .field(InputValue::new("id", opt(TypeRef::STRING)))
                .field(InputValue::new("type", opt(TypeRef::STRING)))
                .field(InputValue::new(
                    "types",
                    TypeRef::named_nn_list(TypeRef::STRING),
                ))
                .field(InputValue::new("dataversion", opt(TypeRef::STRING)))
                .field(InputValue::new("source", opt(TypeRef::STRING)))
                .field(InputValue::new("producer", opt(TypeRef::STRING)))
                .field(InputValue::new("before", opt("Time")))
                .field(InputValue::new("after", opt("Time"))),
        )
        .register(value_object(
            "CloudEventHeader",
            &[
                ("specversion", nn(TypeRef::STRING)),
                ("type", nn(TypeRef::STRING)),
                ("source", nn(TypeRef::STRING)),
                ("subject", nn(TypeRef::STRING)),
                ("id", nn(TypeRef::STRING)),
                ("time", nn("Time")),
                ("datacontenttype", opt(TypeRef::STRING)),
                ("dataschema", opt(TypeRef::STRING)),
                ("dataversion", opt(TypeRef::STRING)),
                ("producer", nn(TypeRef::STRING)),
                ("signature", opt(TypeRef::STRING)),
                ("raweventid", opt(TypeRef::STRING)),
                ("tags", TypeRef::named_nn_list_nn(TypeRef::STRING)),
            ],
        ))
        .register(value_object(
            "CloudEvent",
            &[
                ("header", nn("CloudEventHeader")),
                ("data", opt("JSON")),
                ("dataBase64", opt(TypeRef::STRING)),
                ("dataUrl", opt(TypeRef::STRING)),
            ],
        ))
        .register(value_object(
            "CloudEventTypeSummary",
            &[
                ("type", nn(TypeRef::STRING)),
                ("count", nn(TypeRef::INT)),
                ("firstSeen", nn("Time")),
                ("lastSeen", nn("Time")),
            ],
        ))
}

fn approximate_directive() -> Directive {
    privilege_directive("requiresOneOfPrivilege", &APPROXIMATE_LOCATION_PRIVILEGES)
}

/// `SignalAggregations`: `timestamp`, the approximate location, one field per signal.
fn signal_aggregations() -> Object {
    let mut obj = Object::new("SignalAggregations")
        .field(Field::new("timestamp", nn("Time"), |ctx| {
            FieldFuture::new(async move {
                let row = ctx.parent_value.try_downcast_ref::<AggRow>()?;
                Ok(Some(FieldValue::value(scalars::time_value(
                    row.bucket.timestamp_us,
                ))))
            })
        }))
        .field(
            Field::new(APPROXIMATE_LOCATION_SIGNAL, opt("Location"), |ctx| {
                FieldFuture::new(async move {
                    let r = aggregated_field(&ctx, APPROXIMATE_LOCATION_SIGNAL);
                    nullable(&ctx, r)
                })
            })
            .argument(InputValue::new("agg", nn("LocationAggregation")))
            .directive(approximate_directive()),
        );
    for def in SIGNALS.iter() {
        let name = def.name;
        let (ty, agg, filter) = match def.kind {
            ValueKind::Number => (
                TypeRef::FLOAT,
                "FloatAggregation",
                Some("SignalFloatFilter"),
            ),
            ValueKind::String => (TypeRef::STRING, "StringAggregation", None),
            ValueKind::Location => (
                "Location",
                "LocationAggregation",
                Some("SignalLocationFilter"),
            ),
        };
        let mut field = Field::new(name, opt(ty), move |ctx| {
            FieldFuture::new(async move {
                let r = aggregated_field(&ctx, name);
                nullable(&ctx, r)
            })
        })
        .description(signal_description(def))
        .argument(InputValue::new("agg", nn(agg)));
        if let Some(f) = filter {
            field = field.argument(InputValue::new("filter", opt(f)));
        }
        obj = obj.field(
            field
                .directive(privilege_directive(
                    "requiresAllOfPrivileges",
                    def.privileges,
                ))
                .directive(Directive::new("isSignal"))
                .directive(Directive::new("hasAggregation")),
        );
    }
    obj
}

/// `SignalCollection`: `lastSeen`, the approximate location, one field per signal.
fn signal_collection() -> Object {
    let mut obj = Object::new("SignalCollection")
        .field(Field::new("lastSeen", opt("Time"), |ctx| {
            FieldFuture::new(async move {
                let data = ctx.parent_value.try_downcast_ref::<LatestData>()?;
                Ok(data
                    .last_seen_us
                    .map(|t| FieldValue::value(scalars::time_value(t))))
            })
        }))
        .field(
            Field::new(APPROXIMATE_LOCATION_SIGNAL, opt("SignalLocation"), |ctx| {
                FieldFuture::new(async move {
                    let r = latest_field(&ctx, APPROXIMATE_LOCATION_SIGNAL);
                    nullable(&ctx, r)
                })
            })
            .directive(approximate_directive()),
        );
    for def in SIGNALS.iter() {
        let name = def.name;
        let ty = match def.kind {
            ValueKind::Number => "SignalFloat",
            ValueKind::String => "SignalString",
            ValueKind::Location => "SignalLocation",
        };
        obj = obj.field(
            Field::new(name, opt(ty), move |ctx| {
                FieldFuture::new(async move {
                    let r = latest_field(&ctx, name);
                    nullable(&ctx, r)
                })
            })
            .description(signal_description(def))
            .directive(privilege_directive(
                "requiresAllOfPrivileges",
                def.privileges,
            ))
            .directive(Directive::new("isSignal")),
        );
    }
    obj
}

/// telemetry-api's own types: `Address`, `Attestation`, `AttestationFilter`, `VINVC`.
pub(super) fn register_telemetry_types(builder: SchemaBuilder) -> SchemaBuilder {
    builder
        .register(Scalar::new("Address").description(
            "A 20-byte Ethereum address, encoded as a checksummed hex string with 0x prefix.",
        ))
        .register(value_object(
            "Attestation",
            &[
                ("id", nn(TypeRef::STRING)),
                ("vehicleTokenId", nn(TypeRef::INT)),
                ("time", nn("Time")),
                ("attestation", nn(TypeRef::STRING)),
                ("type", nn(TypeRef::STRING)),
                ("source", nn("Address")),
                ("dataVersion", nn(TypeRef::STRING)),
                ("producer", opt(TypeRef::STRING)),
                ("signature", nn(TypeRef::STRING)),
                ("tags", TypeRef::named_nn_list(TypeRef::STRING)),
            ],
        ))
        .register(
            InputObject::new("AttestationFilter")
                .field(InputValue::new("id", opt(TypeRef::STRING)))
                .field(InputValue::new("source", opt("Address")))
                .field(InputValue::new("dataVersion", opt(TypeRef::STRING)))
                .field(InputValue::new("producer", opt(TypeRef::STRING)))
                .field(InputValue::new("before", opt("Time")))
                .field(InputValue::new("after", opt("Time")))
                .field(InputValue::new("limit", opt(TypeRef::INT)))
                .field(InputValue::new("cursor", opt("Time")))
                .field(InputValue::new("tags", opt("StringArrayFilter"))),
        )
        .register(value_object(
            "VINVC",
            &[
                ("vehicleTokenId", opt(TypeRef::INT)),
                ("vin", opt(TypeRef::STRING)),
                ("recordedBy", opt(TypeRef::STRING)),
                ("recordedAt", opt("Time")),
                ("countryCode", opt(TypeRef::STRING)),
                ("vehicleContractAddress", opt(TypeRef::STRING)),
                ("validFrom", opt("Time")),
                ("validTo", opt("Time")),
                ("rawVC", nn(TypeRef::STRING)),
            ],
        ))
}

/// fetch-api's own type, `CloudEventIndex`.
pub(super) fn register_fetch_types(builder: SchemaBuilder) -> SchemaBuilder {
    builder.register(value_object(
        "CloudEventIndex",
        &[
            ("header", nn("CloudEventHeader")),
            ("indexKey", nn(TypeRef::STRING)),
        ],
    ))
}
