//! Each dialect's root `Query`: the signal, event and segment operations dq and telemetry share
//! (their vehicle argument is the dialect's, [`DialectExt::vehicle_arg`]), dq's and fetch's
//! cloud-event operations, and telemetry's own. Every root field runs SQL under one of the
//! request's [`StatementSlots`].

use super::types::{nn, opt, privilege_directive};
use crate::cloud_events;
use crate::context::{mark_executed, nullable, StatementSlots};
use crate::dialect::{Dialect, DialectExt};
use crate::segments::{self, SEGMENT_PRIVILEGES};
use crate::signals::{self, EVENT_PRIVILEGES};
use crate::telemetry;
use async_graphql::dynamic::{Directive, Field, FieldFuture, InputValue, Object, TypeRef};

/// A non-null root field: errors propagate (the response's `data` becomes null). Every root
/// field runs SQL: it holds one of the request's [`StatementSlots`] while it runs.
macro_rules! non_null_root {
    ($f:path) => {
        |ctx| {
            FieldFuture::new(async move {
                mark_executed(&ctx);
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
                nullable(&ctx, r)
            })
        }
    };
}

/// The vehicle argument of a root field, first in every dialect: a DID (`String!`) or
/// telemetry's token id (`Int!`).
fn vehicle_arg(dialect: Dialect) -> InputValue {
    let ty = if dialect.vehicle_by_token_id() {
        TypeRef::INT
    } else {
        TypeRef::STRING
    };
    InputValue::new(dialect.vehicle_arg(), nn(ty))
}

fn vehicle_token() -> Directive {
    Directive::new("requiresVehicleToken")
}

/// A signal operation reading the latest rows: the vehicle, `filter`, the vehicle gate.
fn latest_rows_field(field: Field, dialect: Dialect) -> Field {
    field
        .argument(vehicle_arg(dialect))
        .argument(InputValue::new("filter", opt("SignalFilter")))
        .directive(vehicle_token())
}

/// The arguments and gates `segments` and `dailyActivity` share.
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
            &SEGMENT_PRIVILEGES,
        ))
}

/// The eight signal/event/segment operations dq and telemetry share.
fn vehicle_fields(query: Object, dialect: Dialect) -> Object {
    query
        .field(
            Field::new(
                "signals",
                TypeRef::named_nn_list("SignalAggregations"),
                nullable_root!(signals::signals),
            )
            .argument(vehicle_arg(dialect))
            .argument(InputValue::new("interval", nn(TypeRef::STRING)))
            .argument(InputValue::new("from", nn("Time")))
            .argument(InputValue::new("to", nn("Time")))
            .argument(InputValue::new("filter", opt("SignalFilter")))
            .directive(vehicle_token()),
        )
        .field(latest_rows_field(
            Field::new(
                "signalsLatest",
                opt("SignalCollection"),
                nullable_root!(signals::signals_latest),
            ),
            dialect,
        ))
        .field(latest_rows_field(
            Field::new(
                "availableSignals",
                TypeRef::named_nn_list(TypeRef::STRING),
                nullable_root!(signals::available_signals),
            ),
            dialect,
        ))
        .field(latest_rows_field(
            Field::new(
                "dataSummary",
                opt("DataSummary"),
                nullable_root!(signals::data_summary),
            ),
            dialect,
        ))
        .field(latest_rows_field(
            Field::new(
                "signalsSnapshot",
                opt("SignalsSnapshotResponse"),
                nullable_root!(signals::signals_snapshot),
            ),
            dialect,
        ))
        .field(
            Field::new(
                "events",
                TypeRef::named_nn_list("Event"),
                nullable_root!(signals::events),
            )
            .argument(vehicle_arg(dialect))
            .argument(InputValue::new("from", nn("Time")))
            .argument(InputValue::new("to", nn("Time")))
            .argument(InputValue::new("filter", opt("EventFilter")))
            .directive(vehicle_token())
            .directive(privilege_directive(
                "requiresAllOfPrivileges",
                &EVENT_PRIVILEGES,
            )),
        )
        .field(
            segment_args(
                Field::new(
                    "segments",
                    TypeRef::named_nn_list_nn("Segment"),
                    non_null_root!(segments::segments),
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
                    non_null_root!(segments::daily_activity),
                ),
                dialect,
            )
            .argument(InputValue::new("timezone", opt(TypeRef::STRING))),
        )
}

/// The arguments of a cloud-event operation: the subject, `limit` for the lists, `filter`, and
/// `includeDeleted` where the dialect offers it.
fn cloud_event_args(field: Field, dialect: Dialect, limit: bool) -> Field {
    let mut field = field.argument(vehicle_arg(dialect));
    if limit {
        field = field.argument(InputValue::new("limit", opt(TypeRef::INT)).default_value(10));
    }
    field = field.argument(InputValue::new("filter", opt("CloudEventFilter")));
    if dialect.offers_include_deleted() {
        field = field.argument(
            InputValue::new("includeDeleted", opt(TypeRef::BOOLEAN)).default_value(false),
        );
    }
    field
}

/// The cloud-event operations dq and fetch share: `latestCloudEvent` (nullable where
/// [`DialectExt::latest_may_be_null`]), `cloudEvents` and `availableCloudEventTypes`.
fn cloud_event_fields(query: Object, dialect: Dialect) -> Object {
    let latest = if dialect.latest_may_be_null() {
        Field::new(
            "latestCloudEvent",
            opt("CloudEvent"),
            nullable_root!(cloud_events::latest_cloud_event),
        )
    } else {
        Field::new(
            "latestCloudEvent",
            nn("CloudEvent"),
            non_null_root!(cloud_events::latest_cloud_event),
        )
    };
    query
        .field(cloud_event_args(latest, dialect, false))
        .field(cloud_event_args(
            Field::new(
                "cloudEvents",
                TypeRef::named_nn_list_nn("CloudEvent"),
                non_null_root!(cloud_events::cloud_events),
            ),
            dialect,
            true,
        ))
        .field(cloud_event_args(
            Field::new(
                "availableCloudEventTypes",
                TypeRef::named_nn_list_nn("CloudEventTypeSummary"),
                non_null_root!(cloud_events::available_types),
            ),
            dialect,
            false,
        ))
}

/// The dq dialect's root `Query`.
pub(super) fn dq_query() -> Object {
    cloud_event_fields(
        vehicle_fields(Object::new("Query"), Dialect::Dq),
        Dialect::Dq,
    )
}

/// telemetry-api's root `Query`: the shared operations, `attestations` and `vinVCLatest`.
pub(super) fn telemetry_query() -> Object {
    vehicle_fields(Object::new("Query"), Dialect::Telemetry)
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
            .argument(vehicle_arg(Dialect::Telemetry))
            .directive(vehicle_token())
            .directive(privilege_directive(
                "requiresAllOfPrivileges",
                &[dq_auth::Privilege::VehicleVinCredential],
            )),
        )
}

/// fetch-api's root `Query`: the index lookups and the cloud-event operations.
pub(super) fn fetch_query() -> Object {
    let dialect = Dialect::Fetch;
    let indexes = Object::new("Query")
        .field(cloud_event_args(
            Field::new(
                "latestIndex",
                opt("CloudEventIndex"),
                nullable_root!(cloud_events::latest_index),
            ),
            dialect,
            false,
        ))
        .field(cloud_event_args(
            Field::new(
                "indexes",
                TypeRef::named_nn_list_nn("CloudEventIndex"),
                non_null_root!(cloud_events::indexes),
            ),
            dialect,
            true,
        ));
    cloud_event_fields(indexes, dialect)
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_graphql::dynamic::ResolverContext;
    use async_graphql::dynamic::{FieldValue, Schema};
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
