//! The dq dialect's executable schema (dq-query.md §1), built at runtime from the signal
//! catalog (`dq_signals::SIGNALS`, i.e. `shared/signals/data/signals.json`) so the 116 signal
//! fields × (aggregation, latest) and their privilege directives cannot drift from the
//! decoders' catalog.
//!
//! Shared object/input types are registered by [`register_shared`] so other dialects
//! (dialects.md §6.1) can include the same types under their own root `Query`.

use crate::cloud_events;
use crate::resolvers;
use crate::scalars;
use async_graphql::dynamic::{
    Directive, Enum, Field, FieldFuture, FieldValue, InputObject, InputValue, Object, Scalar,
    Schema, SchemaBuilder, SchemaError, TypeRef,
};
use async_graphql::{Name, Value};
use auth::authz::{APPROXIMATE_LOCATION_PRIVILEGES, APPROXIMATE_LOCATION_SIGNAL};
use dq_signals::{SignalDef, ValueKind, SIGNALS};

/// Complexity limit (gqlgen FixedComplexityLimit(100)).
pub const COMPLEXITY_LIMIT: usize = 100;

/// The stored signal every location request reads.
pub const COORDINATES: &str = "currentLocationCoordinates";

/// `@requiresAllOfPrivileges(privileges: [...])` / `@requiresOneOfPrivilege(...)`.
fn privilege_directive(name: &str, privileges: &[auth::Privilege]) -> Directive {
    Directive::new(name).argument(
        "privileges",
        Value::List(
            privileges
                .iter()
                .map(|p| Value::Enum(Name::new(p.graphql_name())))
                .collect(),
        ),
    )
}

fn signal_privileges(def: &SignalDef) -> Vec<auth::Privilege> {
    def.privileges
        .iter()
        .map(|p| auth::Privilege::from(*p))
        .collect()
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
    let privs: Vec<&str> = signal_privileges(def)
        .iter()
        .map(|p| p.graphql_name())
        .collect();
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

fn nn(t: &str) -> TypeRef {
    TypeRef::named_nn(t)
}

fn opt(t: &str) -> TypeRef {
    TypeRef::named(t)
}

fn enum_type(name: &str, items: &[&str]) -> Enum {
    Enum::new(name).items(items.iter().copied())
}

/// Registers the types shared by the dialects: scalars, enums, inputs and value objects.
pub fn register_shared(builder: SchemaBuilder) -> SchemaBuilder {
    let privileges: Vec<&str> = auth::Privilege::ALL
        .iter()
        .map(|p| p.graphql_name())
        .collect();
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
        .register(Scalar::new("Time").validator(scalars::is_time))
        .register(Scalar::new("Uint64").validator(|v| matches!(v, Value::Number(n) if n.is_u64())))
        .register(Scalar::new("JSON"))
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
        .register(enum_type(
            "DetectionMechanism",
            &[
                "IGNITION_DETECTION",
                "FREQUENCY_ANALYSIS",
                "CHANGE_POINT_DETECTION",
                "IDLING",
                "REFUEL",
                "RECHARGE",
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

fn approximate_directive() -> Directive {
    privilege_directive("requiresOneOfPrivilege", &APPROXIMATE_LOCATION_PRIVILEGES)
}

/// `SignalAggregations`: `timestamp`, the approximate location, one field per signal.
fn signal_aggregations() -> Object {
    let mut obj = Object::new("SignalAggregations")
        .field(Field::new("timestamp", nn("Time"), |ctx| {
            FieldFuture::new(async move {
                let row = ctx.parent_value.try_downcast_ref::<resolvers::AggRow>()?;
                Ok(Some(FieldValue::value(scalars::time_value(
                    row.bucket.timestamp_us,
                ))))
            })
        }))
        .field(
            Field::new(APPROXIMATE_LOCATION_SIGNAL, opt("Location"), |ctx| {
                FieldFuture::new(async move {
                    let r = resolvers::aggregated_field(&ctx, APPROXIMATE_LOCATION_SIGNAL);
                    resolvers::nullable(&ctx, r)
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
                let r = resolvers::aggregated_field(&ctx, name);
                resolvers::nullable(&ctx, r)
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
                    &signal_privileges(def),
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
                let data = ctx
                    .parent_value
                    .try_downcast_ref::<resolvers::LatestData>()?;
                Ok(data
                    .last_seen_us
                    .map(|t| FieldValue::value(scalars::time_value(t))))
            })
        }))
        .field(
            Field::new(APPROXIMATE_LOCATION_SIGNAL, opt("SignalLocation"), |ctx| {
                FieldFuture::new(async move {
                    let r = resolvers::latest_field(&ctx, APPROXIMATE_LOCATION_SIGNAL);
                    resolvers::nullable(&ctx, r)
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
                    let r = resolvers::latest_field(&ctx, name);
                    resolvers::nullable(&ctx, r)
                })
            })
            .description(signal_description(def))
            .directive(privilege_directive(
                "requiresAllOfPrivileges",
                &signal_privileges(def),
            ))
            .directive(Directive::new("isSignal")),
        );
    }
    obj
}

fn subject_arg() -> InputValue {
    InputValue::new("subject", nn(TypeRef::STRING))
}

fn vehicle_token() -> Directive {
    Directive::new("requiresVehicleToken")
}

/// A non-null root field: errors propagate (the response's `data` becomes null, §4.7).
macro_rules! non_null_root {
    ($f:path) => {
        |ctx| {
            FieldFuture::new(async move {
                resolvers::mark_executed(&ctx);
                $f(&ctx).await
            })
        }
    };
}

/// The arguments and gates `segments` and `dailyActivity` share (§1.2).
fn segment_args(field: Field) -> Field {
    field
        .argument(subject_arg())
        .argument(InputValue::new("from", nn("Time")))
        .argument(InputValue::new("to", nn("Time")))
        .argument(InputValue::new("mechanism", nn("DetectionMechanism")))
        .argument(InputValue::new("config", opt("SegmentConfig")))
        .argument(InputValue::new(
            "signalRequests",
            TypeRef::named_nn_list("SegmentSignalRequest"),
        ))
        .argument(InputValue::new(
            "eventRequests",
            TypeRef::named_nn_list("SegmentEventRequest"),
        ))
        .directive(vehicle_token())
        .directive(privilege_directive(
            "requiresAllOfPrivileges",
            &resolvers::SEGMENT_PRIVILEGES,
        ))
}

/// The dq dialect's root `Query` (§1.2).
fn dq_query() -> Object {
    let filter = || InputValue::new("filter", opt("SignalFilter"));
    let ce_filter = || InputValue::new("filter", opt("CloudEventFilter"));
    Object::new("Query")
        .field(
            Field::new(
                "signals",
                TypeRef::named_nn_list("SignalAggregations"),
                |ctx| {
                    FieldFuture::new(async move {
                        let r = resolvers::signals(&ctx).await;
                        resolvers::nullable(&ctx, r)
                    })
                },
            )
            .argument(subject_arg())
            .argument(InputValue::new("interval", nn(TypeRef::STRING)))
            .argument(InputValue::new("from", nn("Time")))
            .argument(InputValue::new("to", nn("Time")))
            .argument(filter())
            .directive(vehicle_token()),
        )
        .field(
            Field::new("signalsLatest", opt("SignalCollection"), |ctx| {
                FieldFuture::new(async move {
                    let r = resolvers::signals_latest(&ctx).await;
                    resolvers::nullable(&ctx, r)
                })
            })
            .argument(subject_arg())
            .argument(filter())
            .directive(vehicle_token()),
        )
        .field(
            Field::new(
                "availableSignals",
                TypeRef::named_nn_list(TypeRef::STRING),
                |ctx| {
                    FieldFuture::new(async move {
                        let r = resolvers::available_signals(&ctx).await;
                        resolvers::nullable(&ctx, r)
                    })
                },
            )
            .argument(subject_arg())
            .argument(filter())
            .directive(vehicle_token()),
        )
        .field(
            Field::new("dataSummary", opt("DataSummary"), |ctx| {
                FieldFuture::new(async move {
                    let r = resolvers::data_summary(&ctx).await;
                    resolvers::nullable(&ctx, r)
                })
            })
            .argument(subject_arg())
            .argument(filter())
            .directive(vehicle_token()),
        )
        .field(
            Field::new("signalsSnapshot", opt("SignalsSnapshotResponse"), |ctx| {
                FieldFuture::new(async move {
                    let r = resolvers::signals_snapshot(&ctx).await;
                    resolvers::nullable(&ctx, r)
                })
            })
            .argument(subject_arg())
            .argument(filter())
            .directive(vehicle_token()),
        )
        .field(
            Field::new("events", TypeRef::named_nn_list("Event"), |ctx| {
                FieldFuture::new(async move {
                    let r = resolvers::events(&ctx).await;
                    resolvers::nullable(&ctx, r)
                })
            })
            .argument(subject_arg())
            .argument(InputValue::new("from", nn("Time")))
            .argument(InputValue::new("to", nn("Time")))
            .argument(InputValue::new("filter", opt("EventFilter")))
            .directive(vehicle_token())
            .directive(privilege_directive(
                "requiresAllOfPrivileges",
                &resolvers::EVENT_PRIVILEGES,
            )),
        )
        .field(
            segment_args(Field::new(
                "segments",
                TypeRef::named_nn_list_nn("Segment"),
                non_null_root!(resolvers::segments),
            ))
            .argument(InputValue::new("limit", opt(TypeRef::INT)).default_value(100))
            .argument(InputValue::new("after", opt("Time"))),
        )
        .field(
            segment_args(Field::new(
                "dailyActivity",
                TypeRef::named_nn_list_nn("DailyActivity"),
                non_null_root!(resolvers::daily_activity),
            ))
            .argument(InputValue::new("timezone", opt(TypeRef::STRING))),
        )
        .field(
            Field::new(
                "latestCloudEvent",
                nn("CloudEvent"),
                non_null_root!(cloud_events::latest_cloud_event),
            )
            .argument(subject_arg())
            .argument(ce_filter()),
        )
        .field(
            Field::new(
                "cloudEvents",
                TypeRef::named_nn_list_nn("CloudEvent"),
                non_null_root!(cloud_events::cloud_events),
            )
            .argument(subject_arg())
            .argument(InputValue::new("limit", opt(TypeRef::INT)).default_value(10))
            .argument(ce_filter()),
        )
        .field(
            Field::new(
                "availableCloudEventTypes",
                TypeRef::named_nn_list_nn("CloudEventTypeSummary"),
                non_null_root!(cloud_events::available_types),
            )
            .argument(subject_arg())
            .argument(ce_filter()),
        )
}

/// Builds the dq dialect's schema (no data attached; requests carry the engine and principal).
///
/// # Errors
/// A schema construction bug.
pub fn build() -> Result<Schema, SchemaError> {
    register_shared(Schema::build("Query", None, None))
        .register(dq_query())
        .limit_complexity(COMPLEXITY_LIMIT)
        .finish()
}
