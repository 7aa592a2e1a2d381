//! Root and signal-field resolvers of the signal operations dq and telemetry share
//! (dq-query.md §1.9, dialects.md §2.1): each root resolver resolves the vehicle and runs its
//! gates in the request's dialect, builds a dialect-neutral request, runs the shared `query`
//! operation off the async runtime, and maps the result with the shared null/empty policy
//! (§10).

use crate::dialect::{Dialect, DialectSettings};
use crate::errors;
use crate::scalars::{parse_time_us, time_value};
use crate::schema::COORDINATES;
use async_graphql::dynamic::{FieldValue, ObjectAccessor, ResolverContext};
use async_graphql::{Context, Error, Number, PathSegment, Result, Value};
use auth::authz::APPROXIMATE_LOCATION_SIGNAL;
use auth::{Principal, Privilege};
use dq_signals::ValueKind;
use query::activity::{DailyActivityQuery, SegmentsQuery, Summary};
use query::aggregate::{
    approximate, AggregateRequest, Bucket, FloatAgg, FloatRequest, Location, LocationAgg,
    LocationRequest, StringAgg, StringRequest,
};
use query::events::{EventFilter, EventsRequest};
use query::filter::{ArrayFilter, FloatFilter, LocationFilter, Point, StringFilter};
use query::latest::{last_seen, LatestRow};
use query::segments::config::InputValue as WireValue;
use query::segments::signals::{FloatAggregation, SignalRequest};
use query::segments::{
    DailyActivityRequest, Mechanism, SegmentConfig, SegmentConfigInput, SegmentsRequest, Ts,
};
use query::Engine;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// `events` requires both history privileges (§1.2).
pub const EVENT_PRIVILEGES: [Privilege; 2] = [
    Privilege::VehicleNonLocationData,
    Privilege::VehicleAllTimeLocation,
];

/// The authenticated caller of a request (`None` = no credentials), as request data.
#[derive(Debug, Clone, Default)]
pub struct Caller(pub Option<Principal>);

/// The request's deadline (MAX_REQUEST_DURATION), as request data.
#[derive(Debug, Clone, Copy)]
pub struct Deadline(pub tokio::time::Instant);

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

/// The request's authenticated caller, if any.
pub(crate) fn caller<'a>(ctx: &Context<'a>) -> Option<&'a Principal> {
    ctx.data_opt::<Caller>().and_then(|c| c.0.as_ref())
}

/// Runs a blocking engine call on the blocking pool, bounded by the request deadline; its
/// DuckDB statements are interrupted when the deadline passes or the request is dropped.
async fn run<T: Send + 'static>(
    ctx: &Context<'_>,
    f: impl FnOnce(&Engine) -> query::Result<T> + Send + 'static,
) -> Result<T> {
    let engine = Arc::clone(ctx.data::<Arc<Engine>>()?);
    let task = lake::interruptible(move || f(&engine));
    let joined = match ctx.data_opt::<Deadline>() {
        Some(d) => tokio::time::timeout_at(d.0, task)
            .await
            .map_err(|_| errors::timeout(Dialect::of(ctx)))?,
        None => task.await,
    };
    joined
        .map_err(|e| {
            tracing::error!(error = %e, "query task failed");
            errors::from_query(query::Error::Database {
                context: "query task".into(),
                message: e.to_string(),
            })
        })?
        .map_err(errors::from_query)
}

/// A `Float` output. Integral values print without a fraction (`5`, not `5.0`), as Go's `%g`
/// does below 1e21; NaN/Inf are a field error.
fn number(v: f64) -> Result<Value> {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        // Exact: |v| < 2^53.
        return Ok(Value::Number(Number::from(v as i64)));
    }
    Number::from_f64(v)
        .map(Value::Number)
        .ok_or_else(|| Error::new(format!("cannot represent {v} as a GraphQL Float")))
}

/// A GraphQL object value from `(key, value)` pairs, in order.
pub(crate) fn object(fields: Vec<(&str, Value)>) -> Value {
    Value::Object(
        fields
            .into_iter()
            .map(|(k, v)| (async_graphql::Name::new(k), v))
            .collect(),
    )
}

fn location_value(l: &Location) -> Result<Value> {
    Ok(object(vec![
        ("latitude", number(l.latitude)?),
        ("longitude", number(l.longitude)?),
        ("hdop", number(l.hdop)?),
    ]))
}

/// Set once a resolver runs: the request passed parsing and validation (for the 422 rule).
#[derive(Debug, Default)]
pub struct Executed(pub std::sync::atomic::AtomicBool);

/// Records that execution started.
pub fn mark_executed(ctx: &ResolverContext<'_>) {
    if let Some(e) = ctx.ctx.data_opt::<Arc<Executed>>() {
        e.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A nullable field's failure: null plus an error carrying the field's path (async-graphql's
/// dynamic executor would otherwise drop the key, or the whole object, and the path).
pub fn nullable(
    ctx: &ResolverContext<'_>,
    result: Result<Option<FieldValue<'static>>>,
) -> Result<Option<FieldValue<'static>>> {
    mark_executed(ctx);
    result.or_else(|e| {
        let error = ctx
            .ctx
            .set_error_path(e.into_server_error(ctx.ctx.item.pos));
        ctx.ctx.add_error(error);
        Ok(None)
    })
}

/// An auth rule's failure in the request dialect's words.
fn auth_error(ctx: &Context<'_>, e: &auth::AuthError) -> Error {
    errors::from_auth(Dialect::of(ctx), e)
}

/// How telemetry's resolvers reject a non-positive `tokenId` that passed the gate (dialects.md
/// §2.3; only services get that far).
#[derive(Debug, Clone, Copy)]
enum TokenIdCheck {
    /// signals, signalsLatest, events, signalsSnapshot.
    InvalidArgument,
    /// segments, dailyActivity.
    InvalidTokenId,
    /// availableSignals, dataSummary do not check (ids beyond 32 bits are still refused).
    None,
}

/// `vinVCLatest`'s subject: `@requiresAllOfPrivileges([VEHICLE_VIN_CREDENTIAL])`, then the
/// vehicle token (dialects.md §2.6).
pub(crate) fn vehicle_for_vin(ctx: &ResolverContext<'_>) -> Result<String> {
    vehicle(ctx, &[Privilege::VehicleVinCredential], TokenIdCheck::None)
}

/// The root field's vehicle subject after its gates, run in gqlgen's directive order (the last
/// listed runs first: `privileges`, then the vehicle token; dialects.md §2.1). dq reads
/// `subject` and compares it with the token's asset; telemetry builds the DID from `tokenId`
/// and compares the decoded asset (§2.3, §2.4).
fn vehicle(
    ctx: &ResolverContext<'_>,
    privileges: &[Privilege],
    check: TokenIdCheck,
) -> Result<String> {
    let caller = caller(ctx.ctx);
    if !privileges.is_empty() {
        auth::require_all_of(caller, privileges).map_err(|e| auth_error(ctx.ctx, &e))?;
    }
    if Dialect::of(ctx.ctx) != Dialect::Telemetry {
        let subject = ctx.args.try_get("subject")?.string()?.to_string();
        auth::require_vehicle_token(caller, &subject).map_err(|e| auth_error(ctx.ctx, &e))?;
        return Ok(subject);
    }
    let settings = DialectSettings::of(ctx.ctx);
    let token_id = ctx.args.try_get("tokenId")?.i64()?;
    auth::require_vehicle_token_id(caller, token_id, &settings.vehicle_contract)
        .map_err(|e| auth_error(ctx.ctx, &e))?;
    let invalid = match check {
        TokenIdCheck::InvalidArgument => {
            "invalid argument: tokenID is not a positive integer".to_string()
        }
        TokenIdCheck::InvalidTokenId | TokenIdCheck::None => format!("invalid tokenID: {token_id}"),
    };
    match u32::try_from(token_id) {
        Ok(0) if !matches!(check, TokenIdCheck::None) => Err(errors::bad_request(invalid)),
        Ok(id) => Ok(settings.vehicle_did(id)),
        // The original wraps such ids silently; they could never pass a token's gate anyway.
        Err(_) => Err(errors::bad_request(invalid)),
    }
}

fn time_arg(args: &ObjectAccessor<'_>, name: &str) -> Result<i64> {
    let s = args.try_get(name)?.string()?;
    parse_time_us(s).ok_or_else(|| Error::new(format!("invalid Time {s:?}")))
}

/// `filter.source` (verbatim), if given.
fn source_arg(args: &ObjectAccessor<'_>) -> Result<Option<String>> {
    match args.get("filter") {
        Some(f) if !f.is_null() => Ok(f
            .object()?
            .get("source")
            .filter(|s| !s.is_null())
            .map(|s| s.string().map(str::to_string))
            .transpose()?),
        _ => Ok(None),
    }
}

// ------------------------------------------------------------------------------------------
// Input conversion (GraphQL values → query filters)
// ------------------------------------------------------------------------------------------

fn field<'v>(v: &'v Value, key: &str) -> Option<&'v Value> {
    match v {
        Value::Object(m) => m.get(key).filter(|x| **x != Value::Null),
        _ => None,
    }
}

fn as_f64(v: &Value) -> Result<f64> {
    match v {
        Value::Number(n) => n.as_f64().ok_or_else(|| Error::new("invalid Float")),
        _ => Err(Error::new("expected a Float")),
    }
}

fn list(v: Option<&Value>) -> &[Value] {
    match v {
        Some(Value::List(items)) => items,
        _ => &[],
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    list(v)
        .iter()
        .filter_map(|x| match x {
            Value::String(s) => Some(s.clone()),
            _ => None,
        })
        .collect()
}

fn opt_string(v: &Value, key: &str) -> Option<String> {
    match field(v, key) {
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    }
}

fn float_filter(v: &Value) -> Result<FloatFilter> {
    let opt = |k: &str| field(v, k).map(as_f64).transpose();
    Ok(FloatFilter {
        eq: opt("eq")?,
        neq: opt("neq")?,
        gt: opt("gt")?,
        lt: opt("lt")?,
        gte: opt("gte")?,
        lte: opt("lte")?,
        not_in: list(field(v, "notIn"))
            .iter()
            .map(as_f64)
            .collect::<Result<_>>()?,
        in_: list(field(v, "in"))
            .iter()
            .map(as_f64)
            .collect::<Result<_>>()?,
        or: list(field(v, "or"))
            .iter()
            .map(float_filter)
            .collect::<Result<_>>()?,
    })
}

fn point(v: &Value) -> Result<Point> {
    Ok(Point {
        latitude: field(v, "latitude")
            .map(as_f64)
            .transpose()?
            .unwrap_or(f64::NAN),
        longitude: field(v, "longitude")
            .map(as_f64)
            .transpose()?
            .unwrap_or(f64::NAN),
    })
}

fn location_filter(v: &Value) -> Result<LocationFilter> {
    let in_polygon = match field(v, "inPolygon") {
        Some(p) => Some(list(Some(p)).iter().map(point).collect::<Result<_>>()?),
        None => None,
    };
    let in_circle = match field(v, "inCircle") {
        Some(c) => Some((
            field(c, "center").map(point).transpose()?.unwrap_or(Point {
                latitude: f64::NAN,
                longitude: f64::NAN,
            }),
            field(c, "radius")
                .map(as_f64)
                .transpose()?
                .unwrap_or(f64::NAN),
        )),
        None => None,
    };
    Ok(LocationFilter {
        in_polygon,
        in_circle,
    })
}

fn string_filter(v: &Value) -> StringFilter {
    StringFilter {
        eq: opt_string(v, "eq"),
        neq: opt_string(v, "neq"),
        not_in: strings(field(v, "notIn")),
        in_: strings(field(v, "in")),
        starts_with: opt_string(v, "startsWith"),
        or: list(field(v, "or")).iter().map(string_filter).collect(),
    }
}

pub(crate) fn array_filter(v: &Value) -> ArrayFilter {
    ArrayFilter {
        contains_any: strings(field(v, "containsAny")),
        contains_all: strings(field(v, "containsAll")),
        not_contains_any: strings(field(v, "notContainsAny")),
        not_contains_all: strings(field(v, "notContainsAll")),
        or: list(field(v, "or")).iter().map(array_filter).collect(),
    }
}

fn enum_arg<'v>(args: &'v HashMap<String, Value>, key: &str) -> Result<&'v str> {
    match args.get(key) {
        Some(Value::Enum(n)) => Ok(n.as_str()),
        Some(Value::String(s)) => Ok(s.as_str()),
        _ => Err(Error::new(format!("argument {key:?} is required"))),
    }
}

fn float_agg(s: &str) -> FloatAgg {
    match s {
        "MED" => FloatAgg::Med,
        "MAX" => FloatAgg::Max,
        "MIN" => FloatAgg::Min,
        "RAND" => FloatAgg::Rand,
        "FIRST" => FloatAgg::First,
        "LAST" => FloatAgg::Last,
        // Unknown/default: avg (§2.5).
        _ => FloatAgg::Avg,
    }
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

// ------------------------------------------------------------------------------------------
// signals
// ------------------------------------------------------------------------------------------

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
    let interval_us = query::interval::parse_go_duration_us(interval)
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
        match auth::require_signal(principal, child.name()) {
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
    auth::require_signal(caller(ctx.ctx), name).map_err(|e| auth_error(ctx.ctx, &e))?;
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
        .map(|s| query::source_address(&s))
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
    auth::require_signal(caller(ctx.ctx), name).map_err(|e| auth_error(ctx.ctx, &e))?;
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

/// Rows for the list-style queries (source not validated: §1.9 asymmetry).
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
    let source = source_arg(&ctx.args)?.map(|s| query::lenient_source(&s));
    let s = subject.to_string();
    run(ctx.ctx, move |e| e.latest_rows(&s, source.as_deref(), None)).await
}

fn readable(ctx: &Context<'_>, name: &str) -> bool {
    caller(ctx).is_some_and(|p| auth::may_read_signal(p, name))
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
    let events_allowed = match auth::require_all_of(caller(ctx.ctx), &EVENT_PRIVILEGES) {
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

// ------------------------------------------------------------------------------------------
// segments / dailyActivity (§3)
// ------------------------------------------------------------------------------------------

/// `segments` and `dailyActivity` require both history privileges (§1.2).
pub const SEGMENT_PRIVILEGES: [Privilege; 2] = [
    Privilege::VehicleAllTimeLocation,
    Privilege::VehicleNonLocationData,
];

fn mechanism_arg(ctx: &ResolverContext<'_>) -> Result<Mechanism> {
    let arg = ctx.args.try_get("mechanism")?;
    let name = arg.enum_name()?;
    crate::dialect::mechanism(Dialect::of(ctx.ctx), name)
        .ok_or_else(|| errors::bad_request(format!("unknown mechanism {name}")))
}

/// One `SegmentConfig` field as the wire has it (omitted / `null` / value).
fn config_field(v: &Value, key: &str) -> Result<WireValue<i32>> {
    let Value::Object(m) = v else {
        return Ok(WireValue::Absent);
    };
    Ok(match m.get(key) {
        None => WireValue::Absent,
        Some(Value::Null) => WireValue::Null,
        Some(Value::Number(n)) => WireValue::Value(
            n.as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .ok_or_else(|| Error::new(format!("{key} is not a 32-bit Int")))?,
        ),
        Some(_) => return Err(Error::new(format!("{key} must be an Int"))),
    })
}

/// `config`: `None` when absent or `null`; otherwise with gqlgen's SDL default injection.
fn config_arg(args: &ObjectAccessor<'_>) -> Result<Option<SegmentConfig>> {
    match args.get("config") {
        Some(c) if !c.is_null() => {
            let v = c.as_value();
            Ok(Some(
                SegmentConfigInput {
                    max_gap_seconds: config_field(v, "maxGapSeconds")?,
                    min_segment_duration_seconds: config_field(v, "minSegmentDurationSeconds")?,
                    signal_count_threshold: config_field(v, "signalCountThreshold")?,
                    max_idle_rpm: config_field(v, "maxIdleRpm")?,
                    min_increase_percent: config_field(v, "minIncreasePercent")?,
                }
                .materialize(),
            ))
        }
        _ => Ok(None),
    }
}

fn segment_agg(s: &str) -> Result<FloatAggregation> {
    Ok(match s {
        "AVG" => FloatAggregation::Avg,
        "MED" => FloatAggregation::Med,
        "MAX" => FloatAggregation::Max,
        "MIN" => FloatAggregation::Min,
        "RAND" => FloatAggregation::Rand,
        "FIRST" => FloatAggregation::First,
        "LAST" => FloatAggregation::Last,
        other => return Err(Error::new(format!("unknown FloatAggregation {other}"))),
    })
}

/// `signalRequests`. Each named signal's value reaches the answer, so it takes that signal
/// field's privileges, checked here, before any SQL runs.
fn signal_requests_arg(ctx: &ResolverContext<'_>) -> Result<Vec<SignalRequest>> {
    let v = ctx.args.get("signalRequests").map(|a| a.as_value().clone());
    let requests = list(v.as_ref())
        .iter()
        .map(|r| {
            let name = opt_string(r, "name").unwrap_or_default();
            let agg = match field(r, "agg") {
                Some(Value::Enum(n)) => segment_agg(n.as_str())?,
                Some(Value::String(s)) => segment_agg(s)?,
                _ => return Err(Error::new("agg is required")),
            };
            Ok(SignalRequest::new(name, agg))
        })
        .collect::<Result<Vec<_>>>()?;
    require_signal_requests(caller(ctx.ctx), &requests).map_err(|e| auth_error(ctx.ctx, &e))?;
    Ok(requests)
}

/// Every requested signal must be readable by `caller` (names that are no signal pass: they
/// select no rows).
fn require_signal_requests(
    caller: Option<&Principal>,
    requests: &[SignalRequest],
) -> std::result::Result<(), auth::AuthError> {
    requests
        .iter()
        .try_for_each(|r| auth::require_signal(caller, &r.name))
}

fn event_names_arg(args: &ObjectAccessor<'_>) -> Vec<String> {
    let v = args.get("eventRequests").map(|a| a.as_value().clone());
    list(v.as_ref())
        .iter()
        .filter_map(|r| opt_string(r, "name"))
        .collect()
}

fn optional_time(args: &ObjectAccessor<'_>, name: &str) -> Result<Option<i64>> {
    match args.get(name) {
        Some(v) if !v.is_null() => time_arg(args, name).map(Some),
        _ => Ok(None),
    }
}

fn to_ts(us: i64) -> Result<Ts> {
    chrono::DateTime::from_timestamp_micros(us).ok_or_else(|| Error::new("time out of range"))
}

fn summary_values(summary: &Summary) -> Result<(Value, Value)> {
    let signals = summary
        .signals
        .iter()
        .map(|s| {
            Ok(object(vec![
                ("name", Value::String(s.name.clone())),
                ("agg", Value::String(s.agg.as_str().to_string())),
                ("value", number(s.value)?),
            ]))
        })
        .collect::<Result<Vec<_>>>()?;
    let counts = summary
        .event_counts
        .iter()
        .map(|(name, n)| {
            object(vec![
                ("name", Value::String(name.clone())),
                ("count", Value::Number(Number::from(*n))),
            ])
        })
        .collect();
    Ok((Value::List(signals), Value::List(counts)))
}

fn signal_location(t: Ts, l: &Location) -> Result<Value> {
    Ok(object(vec![
        ("timestamp", time_value(t.timestamp_micros())),
        ("value", location_value(l)?),
    ]))
}

/// `segments` (§3.1).
pub async fn segments(ctx: &ResolverContext<'_>) -> Result<Option<FieldValue<'static>>> {
    let subject = vehicle(ctx, &SEGMENT_PRIVILEGES, TokenIdCheck::InvalidTokenId)?;
    let limit = match ctx.args.get("limit") {
        None => Some(query::segments::pipeline::DEFAULT_LIMIT),
        Some(v) if v.is_null() => None,
        // Out-of-i32 values fail the 1..200 check.
        Some(v) => Some(i32::try_from(v.i64()?).unwrap_or(0)),
    };
    let q = SegmentsQuery {
        request: SegmentsRequest {
            subject,
            from: to_ts(time_arg(&ctx.args, "from")?)?,
            to: to_ts(time_arg(&ctx.args, "to")?)?,
            mechanism: mechanism_arg(ctx)?,
            config: config_arg(&ctx.args)?,
            limit,
            after: optional_time(&ctx.args, "after")?.map(to_ts).transpose()?,
        },
        signal_requests: signal_requests_arg(ctx)?,
        event_names: event_names_arg(&ctx.args),
    };
    let now = chrono::Utc::now();
    let items = run(ctx.ctx, move |e| e.segments(&q, now)).await?;
    let values = items
        .iter()
        .map(|s| {
            let (signals, counts) = summary_values(&s.summary)?;
            let end = match (s.segment.end, &s.end_location) {
                (Some(t), Some(l)) => signal_location(t, l)?,
                _ => Value::Null,
            };
            Ok(FieldValue::value(object(vec![
                (
                    "start",
                    signal_location(s.segment.start, &s.start_location)?,
                ),
                ("end", end),
                (
                    "duration",
                    Value::Number(Number::from(s.segment.duration_seconds)),
                ),
                ("isOngoing", Value::Boolean(s.segment.is_ongoing)),
                (
                    "startedBeforeRange",
                    Value::Boolean(s.segment.started_before_range),
                ),
                ("signals", signals),
                ("eventCounts", counts),
            ])))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(FieldValue::list(values)))
}

/// `dailyActivity` (§3.5).
pub async fn daily_activity(ctx: &ResolverContext<'_>) -> Result<Option<FieldValue<'static>>> {
    let subject = vehicle(ctx, &SEGMENT_PRIVILEGES, TokenIdCheck::InvalidTokenId)?;
    let timezone = match ctx.args.get("timezone") {
        Some(v) if !v.is_null() => Some(v.string()?.to_string()),
        _ => None,
    };
    let q = DailyActivityQuery {
        request: DailyActivityRequest {
            subject,
            from: to_ts(time_arg(&ctx.args, "from")?)?,
            to: to_ts(time_arg(&ctx.args, "to")?)?,
            mechanism: mechanism_arg(ctx)?,
            config: config_arg(&ctx.args)?,
            timezone,
        },
        signal_requests: signal_requests_arg(ctx)?,
        event_names: event_names_arg(&ctx.args),
    };
    let now = chrono::Utc::now();
    let dialect = Dialect::of(ctx.ctx);
    let days = run(ctx.ctx, move |e| e.daily_activity(&q, now))
        .await
        .map_err(|mut e| {
            // The rejection of IDLING/REFUEL/RECHARGE names mechanisms (§2.3).
            e.message = crate::dialect::spell_mechanisms(dialect, &e.message);
            e
        })?;
    let values = days
        .iter()
        .map(|d| {
            let (signals, counts) = summary_values(&d.summary)?;
            let count = i64::try_from(d.segment_count).unwrap_or(i64::MAX);
            Ok(FieldValue::value(object(vec![
                ("start", signal_location(d.day.start, &d.start_location)?),
                ("end", signal_location(d.day.end, &d.end_location)?),
                ("segmentCount", Value::Number(Number::from(count))),
                ("duration", Value::Number(Number::from(d.duration_seconds))),
                ("signals", signals),
                ("eventCounts", counts),
            ])))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(FieldValue::list(values)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use auth::{AuthError, Permission, PermissionSet, TokenPrincipal};

    fn holding(permissions: &[Permission]) -> Principal {
        Principal::Token(TokenPrincipal {
            token_subject: None,
            asset: None,
            permissions: permissions.iter().copied().collect::<PermissionSet>(),
            cloud_events: None,
            expires_at: 0,
        })
    }

    #[test]
    fn segment_signal_requests_need_their_signals_privileges() {
        let non_location = holding(&[Permission::GetNonLocationHistory]);
        let request = |name: &str| [SignalRequest::new(name, FloatAggregation::Max)];
        assert_eq!(
            require_signal_requests(Some(&non_location), &request("currentLocationCoordinates")),
            Err(AuthError::MissingPrivilege {
                missing: Permission::GetLocationHistory
            })
        );
        assert!(matches!(
            require_signal_requests(Some(&non_location), &request(APPROXIMATE_LOCATION_SIGNAL)),
            Err(AuthError::MissingAnyPrivilege { .. })
        ));
        assert_eq!(
            require_signal_requests(Some(&non_location), &request("speed")),
            Ok(())
        );
        // Not a signal: no rows, nothing to protect.
        assert_eq!(
            require_signal_requests(Some(&non_location), &request("noSuchSignal")),
            Ok(())
        );
    }
}
