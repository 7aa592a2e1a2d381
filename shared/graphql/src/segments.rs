//! `segments` and `dailyActivity`: the segment operations dq and telemetry share, their
//! arguments (mechanism in the dialect's spelling, `config` with the SDL defaults, signal and
//! event requests) and their answers.

use crate::args::{field, list, opt_string, optional_time, time_arg, vehicle, TokenIdCheck};
use crate::context::{auth_error, caller, run};
use crate::dialect::{Dialect, DialectExt};
use crate::errors;
use crate::scalars::{location_value, number, object, time_value};
use async_graphql::dynamic::{FieldValue, ObjectAccessor, ResolverContext};
use async_graphql::{Error, Number, Result, Value};
use dq_auth::{Principal, Privilege};
use dq_query::activity::{DailyActivityQuery, SegmentsQuery, Summary};
use dq_query::aggregate::Location;
use dq_query::segments::config::InputValue as WireValue;
use dq_query::segments::signals::{FloatAggregation, SignalRequest};
use dq_query::segments::{
    DailyActivityRequest, Mechanism, SegmentConfig, SegmentConfigInput, SegmentsRequest, Ts,
};

/// `segments` and `dailyActivity` require both history privileges.
pub const SEGMENT_PRIVILEGES: [Privilege; 2] = [
    Privilege::VehicleAllTimeLocation,
    Privilege::VehicleNonLocationData,
];

fn mechanism_arg(ctx: &ResolverContext<'_>) -> Result<Mechanism> {
    let arg = ctx.args.try_get("mechanism")?;
    let name = arg.enum_name()?;
    Dialect::of(ctx.ctx)
        .mechanism(name)
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
    FloatAggregation::from_name(s)
        .ok_or_else(|| Error::new(format!("unknown FloatAggregation {s}")))
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
) -> std::result::Result<(), dq_auth::AuthError> {
    requests
        .iter()
        .try_for_each(|r| dq_auth::require_signal(caller, &r.name))
}

fn event_names_arg(args: &ObjectAccessor<'_>) -> Vec<String> {
    let v = args.get("eventRequests").map(|a| a.as_value().clone());
    list(v.as_ref())
        .iter()
        .filter_map(|r| opt_string(r, "name"))
        .collect()
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

/// `segments`: the vehicle's usage segments detected by one mechanism.
pub async fn segments(ctx: &ResolverContext<'_>) -> Result<Option<FieldValue<'static>>> {
    let subject = vehicle(ctx, &SEGMENT_PRIVILEGES, TokenIdCheck::InvalidTokenId)?;
    let limit = match ctx.args.get("limit") {
        None => Some(dq_query::segments::pipeline::DEFAULT_LIMIT),
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

/// `dailyActivity`: per calendar day of the time zone, the segments' summary.
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
            // The rejection of IDLING/REFUEL/RECHARGE names mechanisms.
            e.message = dialect.spell_mechanisms(&e.message);
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
    use dq_auth::authz::APPROXIMATE_LOCATION_SIGNAL;
    use dq_auth::{AuthError, Permission, PermissionSet, TokenPrincipal};

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
