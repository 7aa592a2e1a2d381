use chrono::{TimeZone, Utc};
use dq_segments::memory::MemorySource;
use dq_segments::model::LevelSample;
use dq_segments::source::IGNITION_SIGNAL;
use dq_segments::{daily_activity, plan_daily_activity, segments, DailyActivityRequest, Mechanism};

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
}

fn request(from: chrono::DateTime<Utc>, to: chrono::DateTime<Utc>) -> DailyActivityRequest {
    DailyActivityRequest {
        timezone: Some("Europe/Berlin".into()),
        ..DailyActivityRequest::new("did", from, to, Mechanism::IgnitionDetection)
    }
}

#[test]
fn berlin_spring_forward_day_is_23_hours_with_overlaps() {
    let mut src = MemorySource::new();
    // Drive 22:30–01:30 local across the night of 2026-03-28/29 (UTC 21:30–23:30),
    // and a drive that is still going at the end of 2026-03-29 (local 23:00, UTC 21:00).
    let readings = [
        (utc(2026, 3, 28, 21, 30), 1.0),
        (utc(2026, 3, 28, 23, 30), 0.0),
        (utc(2026, 3, 29, 21, 0), 1.0),
    ];
    src.push_samples(
        IGNITION_SIGNAL,
        readings.map(|(t, v)| LevelSample::new(t, v)),
    );
    let now = utc(2026, 3, 29, 21, 40);
    let plan = plan_daily_activity(
        &request(utc(2026, 3, 28, 12, 0), utc(2026, 3, 29, 12, 0)),
        now,
    )
    .unwrap();
    assert_eq!(plan.days.len(), 2);
    assert_eq!((plan.days[1].end - plan.days[1].start).num_hours(), 23);

    let list = segments(&src, &plan.segments, now).unwrap();
    assert_eq!(list.to, now, "widened range end is clamped to now");
    assert_eq!(list.segments.len(), 2);
    assert!(list.segments[1].is_ongoing);

    let days = daily_activity(&plan.days, &list.segments);
    // Day 1 (local 28th, UTC 27th 23:00 → 28th 23:00): 1.5 h of the night drive.
    assert_eq!(
        (days[0].segment_count, days[0].duration_seconds),
        (1, 90 * 60)
    );
    // Day 2 (local 29th, 23 h): 0.5 h of the night drive + the ongoing one until day end (1 h).
    assert_eq!(
        (days[1].segment_count, days[1].duration_seconds),
        (2, 90 * 60)
    );
    assert_eq!(
        (days[1].first_segment, days[1].last_segment),
        (Some(0), Some(1))
    );
}

#[test]
fn berlin_fall_back_day_is_25_hours() {
    let mut src = MemorySource::new();
    // Ignition on for the whole local day of 2026-10-25 (UTC 24th 22:00 → 25th 23:00).
    let readings = [
        (utc(2026, 10, 24, 22, 0), 1.0),
        (utc(2026, 10, 25, 23, 0), 0.0),
    ];
    src.push_samples(
        IGNITION_SIGNAL,
        readings.map(|(t, v)| LevelSample::new(t, v)),
    );
    let now = utc(2026, 11, 1, 0, 0);
    let plan = plan_daily_activity(
        &request(utc(2026, 10, 25, 12, 0), utc(2026, 10, 25, 12, 0)),
        now,
    )
    .unwrap();
    let list = segments(&src, &plan.segments, now).unwrap();
    let days = daily_activity(&plan.days, &list.segments);
    assert_eq!(days.len(), 1);
    assert_eq!(days[0].duration_seconds, 25 * 3600);
}
