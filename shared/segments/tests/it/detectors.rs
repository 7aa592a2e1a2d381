use chrono::TimeDelta;
use dq_segments::memory::MemorySource;
use dq_segments::model::LevelSample;
use dq_segments::source::{ENGINE_SPEED_SIGNAL, FUEL_LEVEL_SIGNAL, IGNITION_SIGNAL, SOC_SIGNAL};
use dq_segments::testing::{
    charging, source, FUEL_BASIC_RISE, FUEL_RISE_OF_25_PERCENT, FUEL_TROUGH_BEFORE_RANGE,
};
use dq_segments::{segments, Mechanism, SegmentConfig, SegmentConfigInput, SegmentsRequest};

use crate::m;

fn run(
    src: &MemorySource,
    mechanism: Mechanism,
    from: i64,
    to: i64,
    now: i64,
) -> Vec<dq_segments::Segment> {
    let req = SegmentsRequest::new("did:test", m(from), m(to), mechanism);
    segments(src, &req, m(now)).unwrap().segments
}

fn ignition(points: &[(i64, f64)]) -> MemorySource {
    source(&[(IGNITION_SIGNAL, points)])
}

// ---------------------------------------------------------------- IGNITION_DETECTION

#[test]
fn ignition_on_off_pair_is_one_600s_segment() {
    let src = ignition(&[(10, 1.0), (15, 1.0), (20, 0.0), (30, 0.0)]);
    let s = run(&src, Mechanism::IgnitionDetection, 0, 60, 10_000);
    assert_eq!(s.len(), 1);
    assert_eq!(
        (s[0].start, s[0].end, s[0].duration_seconds),
        (m(10), Some(m(20)), 600)
    );
}

#[test]
fn ignition_started_before_range_keeps_true_start() {
    // ON 2 h before `from` (inside the 30-day lookback), OFF inside the range.
    let src = ignition(&[(-120, 1.0), (-60, 1.0), (30, 0.0)]);
    let s = run(&src, Mechanism::IgnitionDetection, 0, 60, 10_000);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].start, m(-120));
    assert!(s[0].started_before_range);
    assert_eq!(s[0].duration_seconds, 150 * 60);
}

#[test]
fn ignition_ongoing_runs_to_clamped_to() {
    let src = ignition(&[(10, 1.0), (40, 1.0)]);
    // `to` is in the future: clamped to now = min 50.
    let s = run(&src, Mechanism::IgnitionDetection, 0, 120, 50);
    assert_eq!(s.len(), 1);
    assert!(s[0].is_ongoing && s[0].end.is_none());
    assert_eq!(s[0].duration_seconds, 40 * 60);
}

#[test]
fn ignition_continuously_on_beyond_lookback_is_ongoing_from_earliest_reading() {
    let day = 1440;
    // ON since 40 days before `from`; readings every day; no transition in the 30-day window.
    let points: Vec<(i64, f64)> = (-40..=0).map(|d| (d * day, 1.0)).collect();
    let src = ignition(&points);
    let s = run(&src, Mechanism::IgnitionDetection, 0, 60, 60);
    assert_eq!(s.len(), 1);
    assert!(s[0].is_ongoing && s[0].started_before_range);
    assert_eq!(
        s[0].start,
        m(-30 * day),
        "synthetic ON at the earliest reading of the lookback"
    );
}

#[test]
fn ignition_short_off_is_debounced() {
    let src = ignition(&[(10, 1.0), (20, 0.0), (22, 1.0), (40, 0.0)]);
    let s = run(&src, Mechanism::IgnitionDetection, 0, 60, 10_000);
    assert_eq!(s.len(), 1);
    assert_eq!((s[0].start, s[0].end), (m(10), Some(m(40))));
}

// ---------------------------------------------------------------- FREQUENCY / CHANGE_POINT

/// `per_min` rows of two names in each listed minute.
fn busy(minutes: impl IntoIterator<Item = i64>, per_min: i64) -> MemorySource {
    let mut src = MemorySource::new();
    for minute in minutes {
        for k in 0..per_min {
            let name = if k % 2 == 0 {
                "speed"
            } else {
                "powertrainCombustionEngineSpeed"
            };
            src.push(
                name,
                m(minute) + TimeDelta::seconds(k * (60 / per_min.max(1))),
                Some(1.0),
            );
        }
    }
    src
}

#[test]
fn frequency_two_minute_gap_merges_into_one_segment() {
    let src = busy((0..10).chain(12..20), 12);
    let s = run(&src, Mechanism::FrequencyAnalysis, 0, 120, 10_000);
    assert_eq!(s.len(), 1);
    assert_eq!((s[0].start, s[0].end), (m(0), Some(m(20))));
    assert!(
        s[0].started_before_range,
        "start == from counts as before the range"
    );
}

#[test]
fn frequency_threshold_comes_from_config() {
    let src = busy(0..10, 6);
    assert!(run(&src, Mechanism::FrequencyAnalysis, 0, 120, 10_000).is_empty());
    let req = SegmentsRequest {
        config: Some(SegmentConfig {
            signal_count_threshold: Some(5),
            ..Default::default()
        }),
        ..SegmentsRequest::new("did", m(0), m(120), Mechanism::FrequencyAnalysis)
    };
    assert_eq!(segments(&src, &req, m(10_000)).unwrap().segments.len(), 1);
}

#[test]
fn frequency_started_before_range_is_clipped_to_from() {
    let src = busy(-20..10, 12);
    let s = run(&src, Mechanism::FrequencyAnalysis, 0, 120, 10_000);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].start, m(0));
    assert!(s[0].started_before_range);
    assert_eq!(s[0].duration_seconds, 600);
}

#[test]
fn frequency_ongoing_needs_near_real_time() {
    let src = busy(0..58, 12);
    let live = run(&src, Mechanism::FrequencyAnalysis, 0, 60, 60);
    assert!(live[0].is_ongoing && live[0].end.is_none());
    assert_eq!(live[0].duration_seconds, 3600);
    let historical = run(&src, Mechanism::FrequencyAnalysis, 0, 60, 600);
    assert!(!historical[0].is_ongoing);
    assert_eq!(historical[0].end, Some(m(58)));
}

#[test]
fn change_point_ignores_config_threshold_and_needs_sustained_activity() {
    let src = busy(0..10, 12);
    let req = SegmentsRequest {
        config: Some(SegmentConfig {
            signal_count_threshold: Some(3600),
            ..Default::default()
        }),
        ..SegmentsRequest::new("did", m(0), m(120), Mechanism::ChangePointDetection)
    };
    let s = segments(&src, &req, m(10_000)).unwrap().segments;
    assert_eq!(s.len(), 1);
    assert_eq!((s[0].start, s[0].end), (m(0), Some(m(10))));
    // Under the fixed 10-row window threshold nothing reaches CUSUM.
    assert!(run(
        &busy(0..10, 8),
        Mechanism::ChangePointDetection,
        0,
        120,
        10_000
    )
    .is_empty());
}

// ---------------------------------------------------------------- IDLING

#[test]
fn idling_run_started_before_range() {
    let mut src = MemorySource::new();
    src.push_samples(
        ENGINE_SPEED_SIGNAL,
        (-3..=10).map(|i| LevelSample::new(m(i), 750.0)),
    );
    let s = run(&src, Mechanism::Idling, 0, 60, 10_000);
    assert_eq!(s.len(), 1);
    assert_eq!((s[0].start, s[0].end), (m(0), Some(m(10))));
    assert!(s[0].started_before_range && !s[0].is_ongoing);
}

#[test]
fn idling_candidates_capped_then_limited_after_speed_filter() {
    let mut src = MemorySource::new();
    // 10 runs of 5 min separated by a driving reading.
    for k in 0..10 {
        let base = k * 10;
        src.push_samples(
            ENGINE_SPEED_SIGNAL,
            (0..=5).map(|i| LevelSample::new(m(base + i), 700.0)),
        );
        src.push(ENGINE_SPEED_SIGNAL, m(base + 6), Some(2500.0));
    }
    let req = SegmentsRequest {
        limit: Some(3),
        ..SegmentsRequest::new("did", m(0), m(200), Mechanism::Idling)
    };
    let list = segments(&src, &req, m(10_000)).unwrap();
    assert_eq!(list.segments.len(), 10, "limit waits for the speed filter");
    // Pretend the even segments moved.
    let items: Vec<(usize, Option<f64>)> = (0..list.segments.len())
        .map(|i| (i, Some(if i % 2 == 0 { 12.0 } else { 0.0 })))
        .collect();
    let kept = list.finish(items, |i| i.1);
    assert_eq!(kept.iter().map(|i| i.0).collect::<Vec<_>>(), vec![1, 3, 5]);
}

// ---------------------------------------------------------------- REFUEL

fn fuel(points: &[(i64, f64)]) -> MemorySource {
    source(&[(FUEL_LEVEL_SIGNAL, points)])
}

#[test]
fn refuel_golden_basic_rise() {
    let src = fuel(&FUEL_BASIC_RISE);
    let s = run(&src, Mechanism::Refuel, 0, 60, 10_000);
    assert_eq!(s.len(), 1);
    assert_eq!(
        (s[0].start, s[0].end, s[0].duration_seconds),
        (m(0), Some(m(7)), 420)
    );
}

#[test]
fn refuel_trough_before_range_is_clamped_to_from() {
    let src = fuel(&FUEL_TROUGH_BEFORE_RANGE);
    let s = run(&src, Mechanism::Refuel, 10, 60, 10_000);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].start, m(10));
    assert!(s[0].started_before_range);
    assert_eq!(s[0].end, Some(m(16)));
}

#[test]
fn refuel_small_absolute_rise_is_rejected_and_sdl_default_lowers_threshold() {
    // 10 → 14: +40 % relative but only 4 points absolute.
    let src = fuel(&[(0, 10.0), (3, 10.0), (6, 14.0), (60, 14.0)]);
    assert!(run(&src, Mechanism::Refuel, 0, 60, 10_000).is_empty());
    // 80 → 100 (+25 %, 20 points) fails the detector default 30 % but passes the SDL 15 %.
    let src = fuel(&FUEL_RISE_OF_25_PERCENT);
    assert!(run(&src, Mechanism::Refuel, 0, 60, 10_000).is_empty());
    let req = SegmentsRequest {
        config: Some(SegmentConfigInput::default().materialize()),
        ..SegmentsRequest::new("did", m(0), m(60), Mechanism::Refuel)
    };
    let s = segments(&src, &req, m(10_000)).unwrap().segments;
    assert_eq!(s.len(), 1);
    assert_eq!((s[0].start, s[0].end), (m(0), Some(m(6))));
}

// ---------------------------------------------------------------- RECHARGE

#[test]
fn recharge_golden_600s() {
    let s = run(&source(&charging(0.0)), Mechanism::Recharge, 0, 30, 10_000);
    assert_eq!(s.len(), 1);
    assert_eq!(
        (s[0].start, s[0].end, s[0].duration_seconds),
        (m(5), Some(m(15)), 600)
    );
}

#[test]
fn recharge_rejects_moving_vehicle() {
    assert!(run(&source(&charging(1.0)), Mechanism::Recharge, 0, 30, 10_000).is_empty());
}

#[test]
fn recharge_default_min_duration_is_60s_but_sdl_config_makes_it_240s() {
    // 13 samples one minute apart: smoothed curve spans min 5..7 (120 s).
    let mut src = MemorySource::new();
    src.push_samples(
        SOC_SIGNAL,
        (0..13).map(|i| LevelSample::new(m(i), 20.0 + 3.0 * i as f64)),
    );
    assert_eq!(run(&src, Mechanism::Recharge, 0, 30, 10_000).len(), 1);
    let req = SegmentsRequest {
        config: Some(SegmentConfig::SDL_DEFAULTS),
        ..SegmentsRequest::new("did", m(0), m(30), Mechanism::Recharge)
    };
    assert!(segments(&src, &req, m(10_000)).unwrap().segments.is_empty());
}

#[test]
fn every_mechanism_returns_sorted_strictly_increasing_starts() {
    let src = busy((0..10).chain(30..45), 12);
    for mech in dq_segments::Mechanism::ALL {
        let s = run(&src, mech, 0, 60, 10_000);
        assert!(s.windows(2).all(|w| w[0].start < w[1].start), "{mech}");
    }
}
