//! The signal operations dq and telemetry share: `signals` (aggregations), `signalsLatest`,
//! `availableSignals`, `dataSummary`, `signalsSnapshot` and `events`, and the signal fields of
//! `SignalAggregations` / `SignalCollection`. Each root resolver resolves the vehicle and runs its
//! gates in the request's dialect, runs the shared `query` operation, and maps the result with
//! the shared null/empty policy.

use crate::args::{
    array_filter, enum_arg, field, float_filter, location_filter, source_arg, string_filter,
    time_arg, vehicle, TokenIdCheck,
};
use crate::context::{auth_error, caller, run};
use crate::errors;
use crate::scalars::{location_value, number, object, time_value};
use async_graphql::dynamic::{FieldValue, ResolverContext};
use async_graphql::{Context, Error, Number, PathSegment, Result, Value};
use dq_auth::authz::APPROXIMATE_LOCATION_SIGNAL;
use dq_auth::Privilege;
use dq_query::aggregate::{
    approximate, AggregateRequest, Bucket, FloatAgg, FloatRequest, LocationAgg, LocationRequest,
    StringAgg, StringRequest,
};
use dq_query::events::{EventFilter, EventsRequest};
use dq_query::latest::{last_seen, LatestRow};
use dq_signals::ValueKind;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The stored signal every location request reads.
pub const COORDINATES: &str = "currentLocationCoordinates";

/// `events` requires both history privileges.
pub const EVENT_PRIVILEGES: [Privilege; 2] = [
    Privilege::VehicleNonLocationData,
    Privilege::VehicleAllTimeLocation,
];

/// Where an alias's answer lives in a [`Bucket`].
#[derive(Debug, Clone, Copy)]
enum Slot {
    Float(usize),
    String(usize),
    Location(usize),
    Approximate(usize),
}

/// One `SignalAggregations` object: a bucket plus the alias map shared by all buckets.
pub struct AggRow {
    /// The bucket's answers.
    pub bucket: Bucket,
    aliases: Arc<HashMap<String, Slot>>,
}

/// The `SignalCollection` parent: the subject's latest rows by name.
pub struct LatestData {
    rows: HashMap<String, LatestRow>,
    /// `lastSeen` (None = no data).
    pub last_seen_us: Option<i64>,
}

fn float_agg(s: &str) -> FloatAgg {
    // Unknown or absent: avg, as the original resolver.
    FloatAgg::from_name(s).unwrap_or(FloatAgg::Avg)
}

fn string_agg(s: &str) -> StringAgg {
    match s {
        "RAND" => StringAgg::Rand,
        "UNIQUE" => StringAgg::Unique,
        "FIRST" => StringAgg::First,
        "LAST" => StringAgg::Last,
        _ => StringAgg::Top,
    }
}

fn location_agg(s: &str) -> LocationAgg {
    match s {
        "AVG" => LocationAgg::Avg,
        "RAND" => LocationAgg::Rand,
        "LAST" => LocationAgg::Last,
        _ => LocationAgg::First,
    }
}

/// One aliased signal child of `signals`, before it joins the statement.
#[derive(Clone)]
enum AliasRequest {
    Float(FloatRequest),
    String(StringRequest),
    Location(LocationRequest),
    /// The approximate location: the exact coordinates, coarsened per bucket.
    Approximate(LocationRequest),
}

impl AliasRequest {
    /// Appends the request to `req`; returns where its answer will live in a bucket.
    fn push(self, req: &mut AggregateRequest) -> Slot {
        match self {
            AliasRequest::Float(r) => {
                req.floats.push(r);
                Slot::Float(req.floats.len() - 1)
            }
            AliasRequest::String(r) => {
                req.strings.push(r);
                Slot::String(req.strings.len() - 1)
            }
            AliasRequest::Location(r) => {
                req.locations.push(r);
                Slot::Location(req.locations.len() - 1)
            }
            AliasRequest::Approximate(r) => {
                req.locations.push(r);
                Slot::Approximate(req.locations.len() - 1)
            }
        }
    }
}

/// The aggregation a `SignalAggregations` child asks for; `None` for `timestamp` and
/// `__typename`.
fn alias_request(child: &async_graphql::SelectionField<'_>) -> Result<Option<AliasRequest>> {
    let name = child.name();
    let kind = if name == APPROXIMATE_LOCATION_SIGNAL {
        None
    } else {
        match dq_signals::signal(name) {
            Some(def) => Some(def.kind),
            None => return Ok(None),
        }
    };
    let args: HashMap<String, Value> = child
        .arguments()?
        .into_iter()
        .map(|(n, v)| (n.to_string(), v))
        .collect();
    let agg = enum_arg(&args, "agg")?;
    let filter = args.get("filter").filter(|v| **v != Value::Null);
    Ok(Some(match kind {
        None => AliasRequest::Approximate(LocationRequest {
            name: COORDINATES.into(),
            agg: location_agg(agg),
            filter: None,
        }),
        Some(ValueKind::Number) => AliasRequest::Float(FloatRequest {
            name: name.into(),
            agg: float_agg(agg),
            filter: filter.map(float_filter).transpose()?,
        }),
        Some(ValueKind::String) => AliasRequest::String(StringRequest {
            name: name.into(),
            agg: string_agg(agg),
        }),
        Some(ValueKind::Location) => AliasRequest::Location(LocationRequest {
            name: name.into(),
            agg: location_agg(agg),
            filter: filter.map(location_filter).transpose()?,
        }),
    }))
}

/// `signals`: one aggregation request per aliased signal child field the caller may read, one
/// SQL statement.
///
/// Privileges are checked before the statement is built: an alias the caller may not read
/// stays out of it, because its filter decides which buckets exist (a geofence or a speed
/// threshold would otherwise leak through the surviving `timestamp`s). Its field still
/// answers with its privilege error in every bucket the readable aliases produce.
pub async fn signals(ctx: &ResolverContext<'_>) -> Result<Option<FieldValue<'static>>> {
    let subject = vehicle(ctx, &[], TokenIdCheck::InvalidArgument)?;
    let interval = ctx.args.try_get("interval")?.string()?;
    let interval_us = dq_query::interval::parse_go_duration_us(interval)
        .map_err(|e| Error::new(format!("failed parsing interval: {e}")))?;
    let mut req = AggregateRequest {
        subject,
        source: source_arg(&ctx.args)?,
        interval_us,
        from_us: time_arg(&ctx.args, "from")?,
        to_us: time_arg(&ctx.args, "to")?,
        ..AggregateRequest::default()
    };
    // Every alias, readable or not, is validated as before: the answer to invalid input does
    // not depend on the caller's privileges.
    let mut checked = req.clone();
    let principal = caller(ctx.ctx);
    let mut keys = HashSet::new();
    let mut aliases = HashMap::new();
    let mut denied = None;
    for child in ctx.ctx.field().selection_set() {
        let key = child.alias().unwrap_or(child.name()).to_string();
        if keys.contains(&key) {
            continue;
        }
        let Some(alias) = alias_request(&child)? else {
            continue;
        };
        keys.insert(key.clone());
        alias.clone().push(&mut checked);
        match dq_auth::require_signal(principal, child.name()) {
            Ok(()) => {
                aliases.insert(key, alias.push(&mut req));
            }
            Err(e) => {
                denied.get_or_insert(e);
            }
        }
    }
    // Validation runs even when nothing is selected (the Go resolver validates first).
    checked.validate().map_err(errors::from_query)?;
    if aliases.is_empty() {
        // Nothing readable: no statement runs (its buckets would come from forbidden signals
        // alone), and the first forbidden field's error answers for the field.
        return match denied {
            Some(e) => Err(auth_error(ctx.ctx, &e)),
            None => Ok(None),
        };
    }
    let buckets = run(ctx.ctx, move |e| e.aggregate(&req)).await?;
    if buckets.is_empty() {
        return Ok(None);
    }
    let aliases = Arc::new(aliases);
    Ok(Some(FieldValue::list(buckets.into_iter().map(|bucket| {
        FieldValue::owned_any(AggRow {
            bucket,
            aliases: Arc::clone(&aliases),
        })
    }))))
}

/// A signal field of `SignalAggregations`: privilege check, then the alias's answer.
pub fn aggregated_field(
    ctx: &ResolverContext<'_>,
    name: &str,
) -> Result<Option<FieldValue<'static>>> {
    dq_auth::require_signal(caller(ctx.ctx), name).map_err(|e| auth_error(ctx.ctx, &e))?;
    let row = ctx.parent_value.try_downcast_ref::<AggRow>()?;
    let sel = ctx.ctx.field();
    let key = sel.alias().unwrap_or(sel.name());
    let b = &row.bucket;
    let value = match row.aliases.get(key) {
        Some(Slot::Float(i)) => b.floats.get(i).map(|v| number(*v)).transpose()?,
        Some(Slot::String(i)) => b.strings.get(i).map(|s| Value::String(s.clone())),
        Some(Slot::Location(i)) => b.locations.get(i).map(location_value).transpose()?,
        Some(Slot::Approximate(i)) => b
            .locations
            .get(i)
            .and_then(approximate)
            .map(|l| location_value(&l))
            .transpose()?,
        None => None,
    };
    Ok(value.map(FieldValue::value))
}

// ------------------------------------------------------------------------------------------
// signalsLatest
// ------------------------------------------------------------------------------------------

/// `signalsLatest`: the subject's rollup rows; fields pick theirs (always a non-null object).
pub async fn signals_latest(ctx: &ResolverContext<'_>) -> Result<Option<FieldValue<'static>>> {
    let subject = vehicle(ctx, &[], TokenIdCheck::InvalidArgument)?;
    let source = source_arg(&ctx.args)?
        .map(|s| dq_query::source_address(&s))
        .transpose()
        .map_err(errors::from_query)?;
    let rows = run(ctx.ctx, move |e| {
        e.latest_rows(&subject, source.as_deref(), None)
    })
    .await?;
    let last_seen_us = last_seen(&rows);
    Ok(Some(FieldValue::owned_any(LatestData {
        rows: rows.into_iter().map(|r| (r.name.clone(), r)).collect(),
        last_seen_us,
    })))
}

fn signal_value(ts_us: i64, value: Value) -> Value {
    object(vec![("timestamp", time_value(ts_us)), ("value", value)])
}

/// A signal field of `SignalCollection`.
pub fn latest_field(ctx: &ResolverContext<'_>, name: &str) -> Result<Option<FieldValue<'static>>> {
    dq_auth::require_signal(caller(ctx.ctx), name).map_err(|e| auth_error(ctx.ctx, &e))?;
    let data = ctx.parent_value.try_downcast_ref::<LatestData>()?;
    if name == APPROXIMATE_LOCATION_SIGNAL {
        let Some(row) = data.rows.get(COORDINATES) else {
            return Ok(None);
        };
        return Ok(approximate(&row.location)
            .map(|l| location_value(&l))
            .transpose()?
            .map(|v| FieldValue::value(signal_value(row.loc_ts_us, v))));
    }
    let (Some(row), Some(def)) = (data.rows.get(name), dq_signals::signal(name)) else {
        return Ok(None);
    };
    let value = match def.kind {
        ValueKind::Number => signal_value(row.timestamp_us, number(row.value_number)?),
        ValueKind::String => {
            signal_value(row.timestamp_us, Value::String(row.value_string.clone()))
        }
        ValueKind::Location => signal_value(row.loc_ts_us, location_value(&row.location)?),
    };
    Ok(Some(FieldValue::value(value)))
}

// ------------------------------------------------------------------------------------------
// availableSignals, dataSummary, signalsSnapshot
// ------------------------------------------------------------------------------------------

/// Rows for the list-style queries (`filter.source` is not validated here, unlike in
/// `signalsLatest`: the original API was asymmetric).
async fn list_rows(
    ctx: &ResolverContext<'_>,
    check: TokenIdCheck,
) -> Result<(String, Vec<LatestRow>)> {
    let subject = vehicle(ctx, &[], check)?;
    let rows = subject_rows(ctx, &subject).await?;
    Ok((subject, rows))
}

/// The subject's latest rows, narrowed by `filter.source` (not validated).
async fn subject_rows(ctx: &ResolverContext<'_>, subject: &str) -> Result<Vec<LatestRow>> {
    let source = source_arg(&ctx.args)?.map(|s| dq_query::lenient_source(&s));
    let s = subject.to_string();
    run(ctx.ctx, move |e| e.latest_rows(&s, source.as_deref(), None)).await
}

fn readable(ctx: &Context<'_>, name: &str) -> bool {
    caller(ctx).is_some_and(|p| dq_auth::may_read_signal(p, name))
}

/// `availableSignals`: null when the subject has no names, `[]` when all are filtered out.
pub async fn available_signals(ctx: &ResolverContext<'_>) -> Result<Option<FieldValue<'static>>> {
    let (_, rows) = list_rows(ctx, TokenIdCheck::None).await?;
    if rows.is_empty() {
        return Ok(None);
    }
    let names: Vec<FieldValue> = rows
        .iter()
        .filter(|r| dq_signals::signal(&r.name).is_some() && readable(ctx.ctx, &r.name))
        .map(|r| FieldValue::value(Value::String(r.name.clone())))
        .collect();
    Ok(Some(FieldValue::list(names)))
}

/// The response keys under which the field's selection asks for child `name`.
fn selected_keys(ctx: &ResolverContext<'_>, name: &str) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for child in ctx.ctx.field().selection_set() {
        let key = child.alias().unwrap_or(child.name());
        if child.name() == name && !keys.iter().any(|k| k == key) {
            keys.push(key.to_string());
        }
    }
    keys
}

/// `dataSummary`.
///
/// Event summaries are event data, so they take `events`' privileges: without them a selected
/// `eventDataSummary` fails with `events`' error (at its own path; being non-null, it nulls
/// the summary) before any SQL runs, and the overall `firstSeen` / `lastSeen` come from the
/// signal rows alone, so they carry no event time.
pub async fn data_summary(ctx: &ResolverContext<'_>) -> Result<Option<FieldValue<'static>>> {
    let subject = vehicle(ctx, &[], TokenIdCheck::None)?;
    let events_allowed = match dq_auth::require_all_of(caller(ctx.ctx), &EVENT_PRIVILEGES) {
        Ok(()) => true,
        Err(e) => {
            let keys = selected_keys(ctx, "eventDataSummary");
            if !keys.is_empty() {
                for key in keys {
                    let mut error = ctx.ctx.set_error_path(
                        auth_error(ctx.ctx, &e).into_server_error(ctx.ctx.item.pos),
                    );
                    error.path.push(PathSegment::Field(key));
                    ctx.ctx.add_error(error);
                }
                return Ok(None);
            }
            false
        }
    };
    let rows = subject_rows(ctx, &subject).await?;
    let events = if events_allowed {
        run(ctx.ctx, move |e| e.event_summaries(&subject)).await?
    } else {
        Vec::new()
    };
    let first = rows
        .iter()
        .map(|r| r.first_seen_us)
        .chain(events.iter().map(|e| e.first_seen_us))
        .min();
    let last = rows
        .iter()
        .map(|r| r.last_seen_us)
        .chain(events.iter().map(|e| e.last_seen_us))
        .max();
    let kept: Vec<&LatestRow> = rows
        .iter()
        .filter(|r| dq_signals::signal(&r.name).is_some() && readable(ctx.ctx, &r.name))
        .collect();
    let total: i64 = kept.iter().map(|r| r.count).sum();
    let uint = |n: i64| Value::Number(Number::from(u64::try_from(n).unwrap_or(0)));
    let summary = object(vec![
        ("numberOfSignals", uint(total)),
        (
            "availableSignals",
            Value::List(kept.iter().map(|r| Value::String(r.name.clone())).collect()),
        ),
        (
            "firstSeen",
            time_value(first.unwrap_or_else(|| chrono::Utc::now().timestamp_micros())),
        ),
        // No data at all: Go's zero-ish sentinel 1900-01-01.
        (
            "lastSeen",
            time_value(last.unwrap_or(-2_208_988_800_000_000)),
        ),
        (
            "signalDataSummary",
            Value::List(
                kept.iter()
                    .map(|r| {
                        object(vec![
                            ("name", Value::String(r.name.clone())),
                            ("numberOfSignals", uint(r.count)),
                            ("firstSeen", time_value(r.first_seen_us)),
                            ("lastSeen", time_value(r.last_seen_us)),
                        ])
                    })
                    .collect(),
            ),
        ),
        (
            "eventDataSummary",
            Value::List(
                events
                    .iter()
                    .map(|e| {
                        object(vec![
                            ("name", Value::String(e.name.clone())),
                            ("numberOfEvents", uint(e.count)),
                            ("firstSeen", time_value(e.first_seen_us)),
                            ("lastSeen", time_value(e.last_seen_us)),
                        ])
                    })
                    .collect(),
            ),
        ),
    ]);
    Ok(Some(FieldValue::value(summary)))
}

fn latest_signal(name: &str, ts_us: i64, kind: (&str, Value)) -> Value {
    object(vec![
        ("name", Value::String(name.to_string())),
        ("timestamp", time_value(ts_us)),
        kind,
    ])
}

/// `signalsSnapshot`: content-typed latest values, the approximate location appended last,
/// then privilege filtered; `signals` is `[]` when empty.
pub async fn signals_snapshot(ctx: &ResolverContext<'_>) -> Result<Option<FieldValue<'static>>> {
    let (_, rows) = list_rows(ctx, TokenIdCheck::InvalidArgument).await?;
    let mut out: Vec<(String, Value)> = Vec::new();
    for r in rows
        .iter()
        .filter(|r| dq_signals::signal(&r.name).is_some())
    {
        let v = if r.has_fix() {
            latest_signal(
                &r.name,
                r.loc_ts_us,
                ("valueLocation", location_value(&r.location)?),
            )
        } else if !r.value_string.is_empty() {
            latest_signal(
                &r.name,
                r.timestamp_us,
                ("valueString", Value::String(r.value_string.clone())),
            )
        } else {
            latest_signal(
                &r.name,
                r.timestamp_us,
                ("valueNumber", number(r.value_number)?),
            )
        };
        out.push((r.name.clone(), v));
    }
    if let Some(row) = rows.iter().find(|r| r.name == COORDINATES) {
        if let Some(approx) = approximate(&row.location) {
            out.push((
                APPROXIMATE_LOCATION_SIGNAL.to_string(),
                latest_signal(
                    APPROXIMATE_LOCATION_SIGNAL,
                    row.loc_ts_us,
                    ("valueLocation", location_value(&approx)?),
                ),
            ));
        }
    }
    let signals: Vec<Value> = out
        .into_iter()
        .filter(|(name, _)| readable(ctx.ctx, name))
        .map(|(_, v)| v)
        .collect();
    let last = last_seen(&rows).map(time_value).unwrap_or(Value::Null);
    Ok(Some(FieldValue::value(object(vec![
        ("lastSeen", last),
        ("signals", Value::List(signals)),
    ]))))
}

// ------------------------------------------------------------------------------------------
// events
// ------------------------------------------------------------------------------------------

/// `events`: newest first, `[]` when none.
pub async fn events(ctx: &ResolverContext<'_>) -> Result<Option<FieldValue<'static>>> {
    let subject = vehicle(ctx, &EVENT_PRIVILEGES, TokenIdCheck::InvalidArgument)?;
    let filter = match ctx.args.get("filter") {
        Some(f) if !f.is_null() => {
            let v = f.as_value();
            EventFilter {
                name: field(v, "name").map(string_filter),
                source: field(v, "source").map(string_filter),
                tags: field(v, "tags").map(array_filter),
            }
        }
        _ => EventFilter::default(),
    };
    let req = EventsRequest {
        subject,
        from_us: time_arg(&ctx.args, "from")?,
        to_us: time_arg(&ctx.args, "to")?,
        filter,
    };
    let events = run(ctx.ctx, move |e| e.events(&req)).await?;
    let items: Vec<FieldValue> = events
        .into_iter()
        .map(|e| {
            FieldValue::value(object(vec![
                ("timestamp", time_value(e.timestamp_us)),
                ("name", Value::String(e.name)),
                ("source", Value::String(e.source)),
                (
                    "durationNs",
                    Value::Number(Number::from(
                        i64::try_from(e.duration_ns).unwrap_or(i64::MAX),
                    )),
                ),
                (
                    "metadata",
                    if e.metadata.is_empty() {
                        Value::Null
                    } else {
                        Value::String(e.metadata)
                    },
                ),
            ]))
        })
        .collect();
    Ok(Some(FieldValue::list(items)))
}
