//! Argument parsing shared by the root resolvers: the vehicle argument and its gates, times,
//! `filter.source`, and GraphQL input values turned into the query crate's filters.

use crate::context::{auth_error, caller};
use crate::dialect::{Dialect, DialectExt, DialectSettings};
use crate::errors;
use crate::scalars::parse_time_us;
use async_graphql::dynamic::{ObjectAccessor, ResolverContext};
use async_graphql::{Error, Result, Value};
use dq_auth::Privilege;
use dq_query::filter::{ArrayFilter, FloatFilter, LocationFilter, Point, StringFilter};
use std::collections::HashMap;

/// How telemetry's resolvers reject a non-positive `tokenId` that passed the gate (only
/// services get that far).
#[derive(Debug, Clone, Copy)]
pub(crate) enum TokenIdCheck {
    /// signals, signalsLatest, events, signalsSnapshot.
    InvalidArgument,
    /// segments, dailyActivity.
    InvalidTokenId,
    /// availableSignals, dataSummary do not check (ids beyond 32 bits are still refused).
    None,
}

/// `vinVCLatest`'s subject: `@requiresAllOfPrivileges([VEHICLE_VIN_CREDENTIAL])`, then the
/// vehicle token.
pub(crate) fn vehicle_for_vin(ctx: &ResolverContext<'_>) -> Result<String> {
    vehicle(ctx, &[Privilege::VehicleVinCredential], TokenIdCheck::None)
}

/// The root field's vehicle subject after its gates, run in gqlgen's directive order (the last
/// listed runs first: `privileges`, then the vehicle token). The dialect names the argument
/// ([`DialectExt::vehicle_arg`]): a DID is compared with the token's asset; telemetry's `tokenId`
/// is compared with the decoded asset, then the DID is built from it.
pub(crate) fn vehicle(
    ctx: &ResolverContext<'_>,
    privileges: &[Privilege],
    check: TokenIdCheck,
) -> Result<String> {
    let caller = caller(ctx.ctx);
    if !privileges.is_empty() {
        dq_auth::require_all_of(caller, privileges).map_err(|e| auth_error(ctx.ctx, &e))?;
    }
    let dialect = Dialect::of(ctx.ctx);
    let arg = ctx.args.try_get(dialect.vehicle_arg())?;
    if !dialect.vehicle_by_token_id() {
        let subject = arg.string()?.to_string();
        dq_auth::require_vehicle_token(caller, &subject).map_err(|e| auth_error(ctx.ctx, &e))?;
        return Ok(subject);
    }
    let settings = DialectSettings::of(ctx.ctx);
    let token_id = arg.i64()?;
    dq_auth::require_vehicle_token_id(caller, token_id, &settings.vehicle_contract)
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

/// A required `Time` argument, in µs.
pub(crate) fn time_arg(args: &ObjectAccessor<'_>, name: &str) -> Result<i64> {
    let s = args.try_get(name)?.string()?;
    parse_time_us(s).ok_or_else(|| Error::new(format!("invalid Time {s:?}")))
}

/// `filter.source` (verbatim), if given.
pub(crate) fn source_arg(args: &ObjectAccessor<'_>) -> Result<Option<String>> {
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

/// An optional `Time` argument, in µs.
pub(crate) fn optional_time(args: &ObjectAccessor<'_>, name: &str) -> Result<Option<i64>> {
    match args.get(name) {
        Some(v) if !v.is_null() => time_arg(args, name).map(Some),
        _ => Ok(None),
    }
}

/// An object value's non-null field.
pub(crate) fn field<'v>(v: &'v Value, key: &str) -> Option<&'v Value> {
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

pub(crate) fn list(v: Option<&Value>) -> &[Value] {
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

pub(crate) fn opt_string(v: &Value, key: &str) -> Option<String> {
    match field(v, key) {
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    }
}

pub(crate) fn float_filter(v: &Value) -> Result<FloatFilter> {
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

pub(crate) fn location_filter(v: &Value) -> Result<LocationFilter> {
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

pub(crate) fn string_filter(v: &Value) -> StringFilter {
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

pub(crate) fn enum_arg<'v>(args: &'v HashMap<String, Value>, key: &str) -> Result<&'v str> {
    match args.get(key) {
        Some(Value::Enum(n)) => Ok(n.as_str()),
        Some(Value::String(s)) => Ok(s.as_str()),
        _ => Err(Error::new(format!("argument {key:?} is required"))),
    }
}
