//! The executable schema of each dialect (dq-query.md §1, dialects.md §2.1, §3.1, §6.1), built
//! at runtime from the signal catalog (`dq_signals::SIGNALS`, i.e.
//! `shared/signals/data/signals.json`) so the 116 signal fields × (aggregation, latest) and
//! their privilege directives cannot drift from the decoders' catalog.
//!
//! Types are registered in shared sets — [`register_signal_types`] (dq, telemetry) and
//! [`register_cloud_event_types`] (dq, fetch) — under one root `Query` per dialect, whose
//! fields differ only in the vehicle argument and the dialect-only operations.

use crate::cloud_events;
use crate::complexity::QueryLimits;
use crate::dialect::Dialect;
use crate::directives;
use crate::http::StatementSlots;
use crate::resolvers;
use crate::scalars;
use crate::telemetry;
use async_graphql::dynamic::{
    Directive, Enum, Field, FieldFuture, FieldValue, InputObject, InputValue, Object, Scalar,
    Schema, SchemaBuilder, SchemaError, TypeRef,
};
use async_graphql::{Name, Value};
use auth::authz::{APPROXIMATE_LOCATION_PRIVILEGES, APPROXIMATE_LOCATION_SIGNAL};
use dq_signals::{SignalDef, ValueKind, SIGNALS};
use query::segments::Mechanism;

/// The SDL of `schema` as committed (`schema/<dialect>.graphql`): async-graphql's export, then
/// the declarations of the directives it applies ([`directives::applied`]).
pub fn export_sdl(schema: &Schema) -> String {
    let mut sdl = schema.sdl();
    for declaration in directives::applied(&sdl) {
        sdl.push_str(&declaration.sdl());
        sdl.push('\n');
    }
    sdl
}

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

/// Registers the types dq and telemetry share (dialects.md §2.2): scalars, the signal, event
/// and segment types, `Privilege`. `DetectionMechanism` is per dialect ([`detection_mechanism`]).
pub fn register_signal_types(builder: SchemaBuilder) -> SchemaBuilder {
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

fn time_scalar() -> Scalar {
    Scalar::new("Time").validator(scalars::is_time)
}

/// `DetectionMechanism` in the dialect's spelling (dialects.md §2.2); both map onto one
/// internal `Mechanism` ([`crate::dialect::mechanism`]).
fn detection_mechanism(dialect: Dialect) -> Enum {
    let names: Vec<&str> = Mechanism::ALL
        .iter()
        .map(|m| crate::dialect::mechanism_name(dialect, *m))
        .collect();
    enum_type("DetectionMechanism", &names)
}

/// Registers the types dq and fetch share (dialects.md §3.1): `JSON` and the cloud-event
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

/// The vehicle argument of the signal operations: `subject: String!` (dq) or `tokenId: Int!`
/// (telemetry), same position (dialects.md §2.1).
fn vehicle_arg(dialect: Dialect) -> InputValue {
    match dialect {
        Dialect::Telemetry => InputValue::new("tokenId", nn(TypeRef::INT)),
        _ => InputValue::new("subject", nn(TypeRef::STRING)),
    }
}

fn vehicle_token() -> Directive {
    Directive::new("requiresVehicleToken")
}

/// A non-null root field: errors propagate (the response's `data` becomes null, §4.7). Every
/// root field runs SQL: it holds one of the request's [`StatementSlots`] while it runs.
macro_rules! non_null_root {
    ($f:path) => {
        |ctx| {
            FieldFuture::new(async move {
                resolvers::mark_executed(&ctx);
                let _slot = StatementSlots::acquire(ctx.ctx).await?;
                $f(&ctx).await
            })
        }
    };
}

/// A nullable root field: an error nulls only this field. Holds a statement slot as
/// `non_null_root` does.
macro_rules! nullable_root {
    ($f:path) => {
        |ctx| {
            FieldFuture::new(async move {
                let r = async {
                    let _slot = StatementSlots::acquire(ctx.ctx).await?;
                    $f(&ctx).await
                }
                .await;
                resolvers::nullable(&ctx, r)
            })
        }
    };
}

/// The arguments and gates `segments` and `dailyActivity` share (§1.2).
fn segment_args(field: Field, dialect: Dialect) -> Field {
    field
        .argument(vehicle_arg(dialect))
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

/// The eight signal/event/segment operations dq and telemetry share (dialects.md §2.1).
fn vehicle_fields(query: Object, dialect: Dialect) -> Object {
    let filter = || InputValue::new("filter", opt("SignalFilter"));
    query
        .field(
            Field::new(
                "signals",
                TypeRef::named_nn_list("SignalAggregations"),
                nullable_root!(resolvers::signals),
            )
            .argument(vehicle_arg(dialect))
            .argument(InputValue::new("interval", nn(TypeRef::STRING)))
            .argument(InputValue::new("from", nn("Time")))
            .argument(InputValue::new("to", nn("Time")))
            .argument(filter())
            .directive(vehicle_token()),
        )
        .field(
            Field::new(
                "signalsLatest",
                opt("SignalCollection"),
                nullable_root!(resolvers::signals_latest),
            )
            .argument(vehicle_arg(dialect))
            .argument(filter())
            .directive(vehicle_token()),
        )
        .field(
            Field::new(
                "availableSignals",
                TypeRef::named_nn_list(TypeRef::STRING),
                nullable_root!(resolvers::available_signals),
            )
            .argument(vehicle_arg(dialect))
            .argument(filter())
            .directive(vehicle_token()),
        )
        .field(
            Field::new(
                "dataSummary",
                opt("DataSummary"),
                nullable_root!(resolvers::data_summary),
            )
            .argument(vehicle_arg(dialect))
            .argument(filter())
            .directive(vehicle_token()),
        )
        .field(
            Field::new(
                "signalsSnapshot",
                opt("SignalsSnapshotResponse"),
                nullable_root!(resolvers::signals_snapshot),
            )
            .argument(vehicle_arg(dialect))
            .argument(filter())
            .directive(vehicle_token()),
        )
        .field(
            Field::new(
                "events",
                TypeRef::named_nn_list("Event"),
                nullable_root!(resolvers::events),
            )
            .argument(vehicle_arg(dialect))
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
            segment_args(
                Field::new(
                    "segments",
                    TypeRef::named_nn_list_nn("Segment"),
                    non_null_root!(resolvers::segments),
                ),
                dialect,
            )
            .argument(InputValue::new("limit", opt(TypeRef::INT)).default_value(100))
            .argument(InputValue::new("after", opt("Time"))),
        )
        .field(
            segment_args(
                Field::new(
                    "dailyActivity",
                    TypeRef::named_nn_list_nn("DailyActivity"),
                    non_null_root!(resolvers::daily_activity),
                ),
                dialect,
            )
            .argument(InputValue::new("timezone", opt(TypeRef::STRING))),
        )
}

/// The dq dialect's root `Query` (§1.2).
fn dq_query() -> Object {
    let subject = || InputValue::new("subject", nn(TypeRef::STRING));
    let ce_filter = || InputValue::new("filter", opt("CloudEventFilter"));
    vehicle_fields(Object::new("Query"), Dialect::Dq)
        .field(
            Field::new(
                "latestCloudEvent",
                nn("CloudEvent"),
                non_null_root!(cloud_events::latest_cloud_event),
            )
            .argument(subject())
            .argument(ce_filter()),
        )
        .field(
            Field::new(
                "cloudEvents",
                TypeRef::named_nn_list_nn("CloudEvent"),
                non_null_root!(cloud_events::cloud_events),
            )
            .argument(subject())
            .argument(InputValue::new("limit", opt(TypeRef::INT)).default_value(10))
            .argument(ce_filter()),
        )
        .field(
            Field::new(
                "availableCloudEventTypes",
                TypeRef::named_nn_list_nn("CloudEventTypeSummary"),
                non_null_root!(cloud_events::available_types),
            )
            .argument(subject())
            .argument(ce_filter()),
        )
}

/// telemetry-api's root `Query` (dialects.md §2.1) and its own types (§2.2).
fn register_telemetry(builder: SchemaBuilder) -> SchemaBuilder {
    let query = vehicle_fields(Object::new("Query"), Dialect::Telemetry)
        .field(
            Field::new(
                "attestations",
                TypeRef::named_list("Attestation"),
                nullable_root!(telemetry::attestations),
            )
            .argument(InputValue::new("tokenId", opt(TypeRef::INT)))
            .argument(InputValue::new("subject", opt(TypeRef::STRING)))
            .argument(InputValue::new("filter", opt("AttestationFilter"))),
        )
        .field(
            Field::new(
                "vinVCLatest",
                opt("VINVC"),
                nullable_root!(telemetry::vin_vc_latest),
            )
            .argument(InputValue::new("tokenId", nn(TypeRef::INT)))
            .directive(vehicle_token())
            .directive(privilege_directive(
                "requiresAllOfPrivileges",
                &[auth::Privilege::VehicleVinCredential],
            )),
        );
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
        .register(query)
}

/// fetch-api's root `Query` (dialects.md §3.1) and `CloudEventIndex`.
fn register_fetch(builder: SchemaBuilder) -> SchemaBuilder {
    let did = || InputValue::new("did", nn(TypeRef::STRING));
    let ce_filter = || InputValue::new("filter", opt("CloudEventFilter"));
    let include_deleted =
        || InputValue::new("includeDeleted", opt(TypeRef::BOOLEAN)).default_value(false);
    let limit = || InputValue::new("limit", opt(TypeRef::INT)).default_value(10);
    let query = Object::new("Query")
        .field(
            Field::new(
                "latestIndex",
                opt("CloudEventIndex"),
                nullable_root!(cloud_events::latest_index),
            )
            .argument(did())
            .argument(ce_filter())
            .argument(include_deleted()),
        )
        .field(
            Field::new(
                "indexes",
                TypeRef::named_nn_list_nn("CloudEventIndex"),
                non_null_root!(cloud_events::indexes),
            )
            .argument(did())
            .argument(limit())
            .argument(ce_filter())
            .argument(include_deleted()),
        )
        .field(
            Field::new(
                "latestCloudEvent",
                opt("CloudEvent"),
                nullable_root!(cloud_events::latest_cloud_event),
            )
            .argument(did())
            .argument(ce_filter())
            .argument(include_deleted()),
        )
        .field(
            Field::new(
                "cloudEvents",
                TypeRef::named_nn_list_nn("CloudEvent"),
                non_null_root!(cloud_events::cloud_events),
            )
            .argument(did())
            .argument(limit())
            .argument(ce_filter())
            .argument(include_deleted()),
        )
        .field(
            Field::new(
                "availableCloudEventTypes",
                TypeRef::named_nn_list_nn("CloudEventTypeSummary"),
                non_null_root!(cloud_events::available_types),
            )
            .argument(did())
            .argument(ce_filter())
            .argument(include_deleted()),
        );
    builder
        .register(value_object(
            "CloudEventIndex",
            &[
                ("header", nn("CloudEventHeader")),
                ("indexKey", nn(TypeRef::STRING)),
            ],
        ))
        .register(query)
}

/// Builds a dialect's schema. Requests carry the engine, cloud-event backend and principal;
/// the schema carries the dialect and its settings.
///
/// # Errors
/// A schema construction bug.
pub fn build(
    dialect: Dialect,
    settings: crate::dialect::DialectSettings,
) -> Result<Schema, SchemaError> {
    let builder = Schema::build("Query", None, None)
        .data(dialect)
        .data(settings);
    let builder = match dialect {
        Dialect::Dq => register_cloud_event_types(register_signal_types(builder))
            .register(detection_mechanism(dialect))
            .register(dq_query()),
        Dialect::Telemetry => register_telemetry(register_signal_types(builder))
            .register(detection_mechanism(dialect)),
        Dialect::Fetch => {
            register_fetch(register_cloud_event_types(builder.register(time_scalar())))
        }
    };
    // The declared directives answered in introspection are those the finished schema applies.
    let declared = directives::DeclaredDirectives::default();
    let schema = builder
        .extension(QueryLimits)
        .extension(declared.clone())
        .finish()?;
    declared.set(directives::applied(&schema.sdl()));
    Ok(schema)
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_graphql::dynamic::ResolverContext;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static RUNNING: AtomicUsize = AtomicUsize::new(0);
    static PEAK: AtomicUsize = AtomicUsize::new(0);

    /// A root resolver that records how many run at once.
    async fn probe(_: &ResolverContext<'_>) -> async_graphql::Result<Option<FieldValue<'static>>> {
        let now = RUNNING.fetch_add(1, Ordering::SeqCst) + 1;
        PEAK.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        RUNNING.fetch_sub(1, Ordering::SeqCst);
        Ok(Some(FieldValue::value(1)))
    }

    /// Issue 18 item 6: a request's root fields run at most its statement slots at once.
    #[tokio::test]
    async fn root_fields_share_the_request_statement_slots() {
        let query = Object::new("Query")
            .field(Field::new(
                "nullable",
                opt(TypeRef::INT),
                nullable_root!(probe),
            ))
            .field(Field::new(
                "strict",
                nn(TypeRef::INT),
                non_null_root!(probe),
            ));
        let schema = Schema::build("Query", None, None)
            .register(query)
            .finish()
            .unwrap();
        let doc = "{ a: nullable b: nullable c: nullable d: strict e: strict f: strict }";
        let request = async_graphql::Request::new(doc).data(StatementSlots::new(2));
        let response = schema.execute(request).await;
        assert!(response.errors.is_empty(), "{:?}", response.errors);
        assert_eq!(PEAK.load(Ordering::SeqCst), 2);
    }
}
