//! The pure part of `dailyActivity`: time zone, calendar days that survive
//! DST (23 h / 25 h days), the widened segments request, and per-day segment overlap.
//!
//! Day summaries (signals, event counts, FIRST/LAST fixes, gap-fill) are the caller's: one
//! batched ranges aggregation and one batched ranges event count over [`DailyPlan::days`].

use chrono::{Days, NaiveDate, NaiveDateTime, Offset, TimeZone};
use chrono_tz::Tz;

use crate::config::SegmentConfig;
use crate::error::ValidationError;
use crate::model::{Mechanism, Segment, Ts};
use crate::pipeline::{SegmentsRequest, MAX_RANGE};
use crate::time::{add_secs, secs_between};

/// A `dailyActivity` query's arguments (signal/event requests are the caller's).
#[derive(Debug, Clone, PartialEq)]
pub struct DailyActivityRequest {
    /// Vehicle DID.
    pub subject: String,
    /// Any instant of the first day.
    pub from: Ts,
    /// Any instant of the last day.
    pub to: Ts,
    /// Detector; IDLING/REFUEL/RECHARGE are rejected.
    pub mechanism: Mechanism,
    /// As in [`SegmentsRequest::config`].
    pub config: Option<SegmentConfig>,
    /// IANA zone name; `None` or empty = UTC.
    pub timezone: Option<String>,
}

impl DailyActivityRequest {
    /// A request in UTC with no config.
    pub fn new(subject: impl Into<String>, from: Ts, to: Ts, mechanism: Mechanism) -> Self {
        DailyActivityRequest {
            subject: subject.into(),
            from,
            to,
            mechanism,
            config: None,
            timezone: None,
        }
    }
}

/// One calendar day in the request's zone, as a UTC `[start, end)` window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DayWindow {
    /// The local calendar date.
    pub date: NaiveDate,
    /// Local midnight of `date` (reported as `start.timestamp`).
    pub start: Ts,
    /// Local midnight of the next date (reported as `end.timestamp`).
    pub end: Ts,
}

/// What the caller runs for a `dailyActivity` query.
#[derive(Debug, Clone, PartialEq)]
pub struct DailyPlan {
    /// The resolved zone.
    pub timezone: Tz,
    /// Every day from the local date of `from` to that of `to`, inclusive, ascending.
    pub days: Vec<DayWindow>,
    /// The segments request over `[first day start, last day end)` (limit and cursor unset);
    /// run it with [`crate::segments`], which applies its own validation and `now` clamp.
    pub segments: SegmentsRequest,
}

/// Per-day segment statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DayActivity {
    /// Segments overlapping the day.
    pub segment_count: usize,
    /// Sum of each overlapping segment's overlap with the day, whole seconds truncated per
    /// segment.
    pub duration_seconds: i64,
    /// Index (into the segment slice) of the first overlapping segment: its start location is
    /// the day's start location.
    pub first_segment: Option<usize>,
    /// Index of the last overlapping segment: its end location (if it has an end) is the day's
    /// end location.
    pub last_segment: Option<usize>,
}

/// Resolves an IANA zone name like Go's `time.LoadLocation`: `None`/`""`/`"UTC"` → UTC,
/// `"Local"` → UTC (the service runs in UTC), names with `..` or a leading `/` or `\` are
/// invalid, unknown names are rejected.
pub fn parse_timezone(name: Option<&str>) -> Result<Tz, ValidationError> {
    let name = match name {
        None | Some("") | Some("UTC") | Some("Local") => return Ok(Tz::UTC),
        Some(n) => n,
    };
    let invalid = |reason: String| ValidationError::InvalidTimezone {
        name: name.to_owned(),
        reason,
    };
    if name.contains("..") || name.starts_with('/') || name.starts_with('\\') {
        return Err(invalid("time: invalid location name".to_owned()));
    }
    name.parse::<Tz>()
        .map_err(|_| invalid(format!("unknown time zone {name}")))
}

/// Local midnight of `date` in `tz` as Go's `time.Date(y, m, d, 0, 0, 0, 0, loc)` resolves it,
/// including at DST transitions: `naive − offset(naive − offset(naive read as UTC))`.
pub fn local_midnight(tz: Tz, date: NaiveDate) -> Ts {
    let naive = NaiveDateTime::from(date);
    let offset_at =
        |utc: NaiveDateTime| i64::from(tz.offset_from_utc_datetime(&utc).fix().local_minus_utc());
    let naive_utc = naive.and_utc();
    let first = offset_at(naive);
    let probe = add_secs(naive_utc, -first).naive_utc();
    add_secs(naive_utc, -offset_at(probe))
}

/// Validates a `dailyActivity` request and lays out its days
/// and its widened segments request (step 4).
pub fn plan_daily_activity(
    req: &DailyActivityRequest,
    now: Ts,
) -> Result<DailyPlan, ValidationError> {
    if !req.mechanism.allowed_for_daily_activity() {
        return Err(ValidationError::DailyActivityMechanism(req.mechanism));
    }
    let tz = parse_timezone(req.timezone.as_deref())?;
    let from_date = req.from.with_timezone(&tz).date_naive();
    let to_date = req.to.with_timezone(&tz).date_naive();
    let (range_start, to_midnight) = (local_midnight(tz, from_date), local_midnight(tz, to_date));
    if range_start > to_midnight {
        return Err(ValidationError::FromDateAfterToDate);
    }
    if to_midnight > now {
        return Err(ValidationError::ToDateInFuture);
    }
    if to_midnight.signed_duration_since(range_start) > MAX_RANGE {
        return Err(ValidationError::RangeTooLong);
    }
    let mut days = Vec::new();
    let mut date = from_date;
    while date <= to_date {
        // Checked: validation bounds the span to ~33 days, far from chrono's date limits.
        let Some(next) = date.checked_add_days(Days::new(1)) else {
            break;
        };
        days.push(DayWindow {
            date,
            start: local_midnight(tz, date),
            end: local_midnight(tz, next),
        });
        date = next;
    }
    let range_end = days.last().map_or(to_midnight, |d| d.end);
    let segments = SegmentsRequest {
        subject: req.subject.clone(),
        from: range_start,
        to: range_end,
        mechanism: req.mechanism,
        config: req.config,
        limit: None,
        after: None,
    };
    Ok(DailyPlan {
        timezone: tz,
        days,
        segments,
    })
}

/// Overlap of `segments` (ascending, as returned by the pipeline) with one day:
/// a segment counts if `start ≤ day.end` and its end — `day.end` if ongoing, else
/// `min(end, day.end)` — is `≥ day.start` and `> start`. An ongoing segment therefore counts
/// until the end of every day it touches.
pub fn day_activity(day: &DayWindow, segments: &[Segment]) -> DayActivity {
    let mut out = DayActivity::default();
    for (i, s) in segments.iter().enumerate() {
        let end = s.end.map_or(day.end, |e| e.min(day.end));
        if s.start > day.end || end < day.start || end <= s.start {
            continue;
        }
        out.segment_count += 1;
        out.duration_seconds += secs_between(s.start.max(day.start), end);
        out.first_segment.get_or_insert(i);
        out.last_segment = Some(i);
    }
    out
}

/// [`day_activity`] for every day, in order.
pub fn daily_activity(days: &[DayWindow], segments: &[Segment]) -> Vec<DayActivity> {
    days.iter().map(|d| day_activity(d, segments)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeDelta, Utc};

    fn utc(y: i32, mo: u32, d: u32, h: u32) -> Ts {
        Utc.with_ymd_and_hms(y, mo, d, h, 0, 0).unwrap()
    }

    fn req(from: Ts, to: Ts, tz: &str) -> DailyActivityRequest {
        DailyActivityRequest {
            timezone: Some(tz.into()),
            ..DailyActivityRequest::new("did", from, to, Mechanism::IgnitionDetection)
        }
    }

    /// The plan of an IGNITION_DETECTION request over `[from, to]` in `tz`, at `now`.
    fn plan_at(from: Ts, to: Ts, tz: &str, now: Ts) -> DailyPlan {
        plan_daily_activity(&req(from, to, tz), now).unwrap()
    }

    /// Each day's length, hours.
    fn day_hours(plan: &DailyPlan) -> Vec<i64> {
        plan.days
            .iter()
            .map(|d| (d.end - d.start).num_hours())
            .collect()
    }

    #[test]
    fn new_york_spring_forward_days() {
        let plan = plan_at(
            utc(2025, 3, 7, 12),
            utc(2025, 3, 11, 12),
            "America/New_York",
            utc(2025, 6, 1, 0),
        );
        let hours: Vec<u32> = plan
            .days
            .iter()
            .map(|d| d.start.format("%H").to_string().parse().unwrap())
            .collect();
        assert_eq!(hours, vec![5, 5, 5, 4, 4]);
        assert_eq!(day_hours(&plan), vec![24, 24, 23, 24, 24]);
        assert_eq!(plan.segments.from, utc(2025, 3, 7, 5));
        assert_eq!(plan.segments.to, utc(2025, 3, 12, 4));
        assert_eq!(plan.segments.limit, None);
    }

    #[test]
    fn berlin_23_and_25_hour_days() {
        let now = utc(2027, 1, 1, 0);
        let spring = plan_at(
            utc(2026, 3, 28, 12),
            utc(2026, 3, 30, 12),
            "Europe/Berlin",
            now,
        );
        assert_eq!(day_hours(&spring), vec![24, 23, 24]);
        assert_eq!(spring.days[1].start, utc(2026, 3, 28, 23));
        assert_eq!(spring.days[1].end, utc(2026, 3, 29, 22));
        let autumn = plan_at(
            utc(2026, 10, 25, 12),
            utc(2026, 10, 25, 13),
            "Europe/Berlin",
            now,
        );
        assert_eq!(autumn.days.len(), 1);
        assert_eq!(
            autumn.days[0].end - autumn.days[0].start,
            TimeDelta::hours(25)
        );
    }

    #[test]
    fn midnight_gap_resolves_like_go() {
        // America/Sao_Paulo 2018-11-04: clocks jumped 00:00 → 01:00 (−03 → −02).
        // Go's time.Date gives 00:00 in the new offset = 02:00Z.
        let tz: Tz = "America/Sao_Paulo".parse().unwrap();
        assert_eq!(
            local_midnight(tz, NaiveDate::from_ymd_opt(2018, 11, 4).unwrap()),
            utc(2018, 11, 4, 2)
        );
        // Asia/Beirut 2020-03-29: 00:00 → 01:00 (+02 → +03); Go gives the transition, 22:00Z.
        let tz: Tz = "Asia/Beirut".parse().unwrap();
        assert_eq!(
            local_midnight(tz, NaiveDate::from_ymd_opt(2020, 3, 29).unwrap()),
            utc(2020, 3, 28, 22)
        );
    }

    #[test]
    fn validation() {
        let now = utc(2026, 1, 10, 0);
        let mut r = req(utc(2026, 1, 1, 0), utc(2026, 1, 2, 0), "Nowhere/City");
        assert_eq!(
            plan_daily_activity(&r, now).unwrap_err().to_string(),
            "invalid timezone \"Nowhere/City\": unknown time zone Nowhere/City"
        );
        r.timezone = Some("../etc/passwd".into());
        assert!(plan_daily_activity(&r, now)
            .unwrap_err()
            .to_string()
            .ends_with("time: invalid location name"));
        r.timezone = None;
        r.mechanism = Mechanism::Idling;
        assert_eq!(
            plan_daily_activity(&r, now).unwrap_err().to_string(),
            "dailyActivity does not accept mechanism IDLING; use IGNITION_DETECTION, FREQUENCY_ANALYSIS, or CHANGE_POINT_DETECTION"
        );
        r.mechanism = Mechanism::ChangePointDetection;
        r.from = utc(2026, 1, 3, 0);
        assert_eq!(
            plan_daily_activity(&r, now).unwrap_err(),
            ValidationError::FromDateAfterToDate
        );
        r.from = utc(2026, 1, 1, 0);
        r.to = utc(2026, 1, 10, 1);
        assert!(
            plan_daily_activity(&r, now).is_ok(),
            "today's midnight is not in the future"
        );
        r.to = utc(2026, 1, 11, 0);
        assert_eq!(
            plan_daily_activity(&r, now).unwrap_err(),
            ValidationError::ToDateInFuture
        );
        let r = req(utc(2026, 1, 1, 0), utc(2026, 2, 3, 0), "UTC");
        assert_eq!(
            plan_daily_activity(&r, utc(2026, 6, 1, 0)).unwrap_err(),
            ValidationError::RangeTooLong
        );
        let r = req(utc(2026, 1, 1, 0), utc(2026, 2, 2, 0), "");
        let plan = plan_daily_activity(&r, utc(2026, 6, 1, 0)).unwrap();
        assert_eq!(plan.days.len(), 33);
        // The widened range (33 days) then fails the segments validation, as in Go.
        assert_eq!(
            crate::segments(
                &crate::memory::MemorySource::new(),
                &plan.segments,
                utc(2026, 6, 1, 0)
            )
            .unwrap_err()
            .to_string(),
            "date range exceeds maximum of 32 days"
        );
    }

    fn seg(start: Ts, end: Option<Ts>) -> Segment {
        Segment {
            start,
            end,
            duration_seconds: 0,
            is_ongoing: end.is_none(),
            started_before_range: false,
        }
    }

    #[test]
    fn overlap_rules() {
        let day = DayWindow {
            date: NaiveDate::from_ymd_opt(2026, 1, 2).unwrap(),
            start: utc(2026, 1, 2, 0),
            end: utc(2026, 1, 3, 0),
        };
        let segs = [
            seg(utc(2026, 1, 1, 22), Some(utc(2026, 1, 2, 2))), // crosses midnight: 2 h
            seg(utc(2026, 1, 2, 10), Some(utc(2026, 1, 2, 11))), // inside: 1 h
            seg(utc(2026, 1, 2, 23), None),                     // ongoing: until day end, 1 h
            seg(utc(2026, 1, 3, 0), None),                      // starts at day end: excluded
        ];
        let a = day_activity(&day, &segs);
        assert_eq!(a.segment_count, 3);
        assert_eq!(a.duration_seconds, 4 * 3600);
        assert_eq!((a.first_segment, a.last_segment), (Some(0), Some(2)));
        // A segment ending exactly at the day start still counts (0 s), as in Go.
        let touching = [seg(utc(2026, 1, 1, 20), Some(utc(2026, 1, 2, 0)))];
        assert_eq!(day_activity(&day, &touching).segment_count, 1);
        assert_eq!(day_activity(&day, &touching).duration_seconds, 0);
        assert_eq!(day_activity(&day, &[]), DayActivity::default());
    }
}
