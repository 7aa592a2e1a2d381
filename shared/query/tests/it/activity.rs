//! `segments` / `dailyActivity` through the DuckDB source: every detector's
//! worked example read from a real lake (and checked row-for-row against the in-memory
//! reference source), summaries, gap-fill, pagination, DST days and the statement budget.

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use dq_lake::testing::{Backend, TestLake};
use dq_query::activity::{DailyActivityQuery, LakeSource, SegmentsQuery};
use dq_query::aggregate::{
    aggregate_sql, AggregateRequest, Bucket, FloatRequest, Location, LocationAgg, LocationRequest,
};
use dq_query::segments::memory::MemorySource;
use dq_query::segments::signals::{merge_signal_requests, FloatAggregation, SignalRequest};
use dq_query::segments::source::{
    ENGINE_SPEED_SIGNAL, FUEL_LEVEL_SIGNAL, IGNITION_SIGNAL, ODOMETER_SIGNAL, SOC_SIGNAL,
};
use dq_query::segments::{
    DailyActivityRequest, Mechanism, Segment, SegmentConfig, SegmentsRequest, SignalSource,
};
use dq_query::{Engine, Error};
use dq_segments::testing::{
    charging, m, FUEL_BASIC_RISE, FUEL_RISE_OF_25_PERCENT, FUEL_TROUGH_BEFORE_RANGE,
};

const SUBJECT: &str = "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:42";
const LOC: &str = "currentLocationCoordinates";

/// Rows to load: numeric signals, location fixes, events.
#[derive(Default)]
struct Rows {
    numbers: Vec<(String, DateTime<Utc>, f64)>,
    fixes: Vec<(DateTime<Utc>, f64, f64)>,
    events: Vec<(String, DateTime<Utc>)>,
    /// Without the losing twin [`lab_on`] stores beside every number row by default, so no
    /// read key is tied and a signal-rows read is one statement (a tied key's rows are read
    /// again with their ids, `fold::Engine::signal_rows_of`).
    untied: bool,
}

impl Rows {
    fn num(&mut self, name: &str, t: DateTime<Utc>, v: f64) -> &mut Self {
        self.numbers.push((name.to_string(), t, v));
        self
    }
    fn series(&mut self, name: &str, points: &[(i64, f64)]) -> &mut Self {
        for &(i, v) in points {
            self.num(name, m(i), v);
        }
        self
    }
    fn fix(&mut self, t: DateTime<Utc>, lat: f64, lon: f64) -> &mut Self {
        self.fixes.push((t, lat, lon));
        self
    }
    fn event(&mut self, name: &str, t: DateTime<Utc>) -> &mut Self {
        self.events.push((name.to_string(), t));
        self
    }

    fn memory(&self) -> MemorySource {
        let mut src = MemorySource::new();
        for (n, t, v) in &self.numbers {
            src.push(n, *t, Some(*v));
        }
        for (t, _, _) in &self.fixes {
            src.push(LOC, *t, Some(0.0));
        }
        src
    }
}

struct Lab {
    _t: TestLake,
    engine: Engine,
    memory: MemorySource,
}

fn lit(t: DateTime<Utc>) -> String {
    format!(
        "make_timestamp({}::BIGINT)::TIMESTAMPTZ",
        t.timestamp_micros()
    )
}

/// A file-catalog lake holding `rows` for [`SUBJECT`] (plus a decoy subject), each signal row
/// written twice (a redelivery with a higher cloud_event_id and a different value that the
/// read dedup must drop).
fn lab(rows: &Rows) -> Lab {
    lab_on(Backend::File, rows)
}

fn lab_on(backend: Backend, rows: &Rows) -> Lab {
    let t = TestLake::new(backend);
    let lake = t.open().unwrap();
    dq_tables::schema::ensure(&lake).unwrap();
    let bucket = dq_cloudevent::subject_bucket(SUBJECT);
    let mut signals = Vec::new();
    for (i, (n, ts, v)) in rows.numbers.iter().enumerate() {
        signals.push(format!(
            "('{SUBJECT}', {bucket}, '{n}', {}, 'src', 'p', 'a{i:08}', {v:?}, '', 0, 0, 0, 0)",
            lit(*ts)
        ));
        if !rows.untied {
            signals.push(format!(
                "('{SUBJECT}', {bucket}, '{n}', {}, 'src', 'p', 'b{i:08}', 9999, '', 0, 0, 0, 0)",
                lit(*ts)
            ));
        }
    }
    for (i, (ts, lat, lon)) in rows.fixes.iter().enumerate() {
        signals.push(format!(
            "('{SUBJECT}', {bucket}, '{LOC}', {}, 'src', 'p', 'c{i:08}', 0, '', {lat:?}, {lon:?}, 1.5, 0)",
            lit(*ts)
        ));
    }
    // Another vehicle's ignition: never read.
    let other = "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:7";
    signals.push(format!(
        "('{other}', {}, '{IGNITION_SIGNAL}', {}, 'src', 'p', 'x', 1, '', 0, 0, 0, 0)",
        dq_cloudevent::subject_bucket(other),
        lit(m(0))
    ));
    let conn = lake.connect().unwrap();
    for chunk in signals.chunks(2000) {
        conn.execute_batch(&format!(
            "INSERT INTO lake.signals VALUES {}",
            chunk.join(", ")
        ))
        .unwrap();
    }
    if !rows.events.is_empty() {
        let events: Vec<String> = rows
            .events
            .iter()
            .enumerate()
            .map(|(i, (n, ts))| {
                format!(
                    "('{SUBJECT}', {bucket}, 'src', 'p', 'e{i:08}', 'dimo.event', 'v1', '{n}', {}, 0, '', []::VARCHAR[])",
                    lit(*ts)
                )
            })
            .collect();
        conn.execute_batch(&format!(
            "INSERT INTO lake.events VALUES {}",
            events.join(", ")
        ))
        .unwrap();
    }
    drop(conn);
    Lab {
        _t: t,
        engine: Engine::new(lake),
        memory: rows.memory(),
    }
}

impl Lab {
    /// Detection through the DuckDB source, asserted equal to the in-memory reference.
    fn detect(&self, req: &SegmentsRequest, now: DateTime<Utc>) -> Vec<Segment> {
        let lake = dq_query::segments::segments(&LakeSource::new(&self.engine), req, now)
            .unwrap()
            .segments;
        let memory = dq_query::segments::segments(&self.memory, req, now)
            .unwrap()
            .segments;
        assert_eq!(lake, memory, "DuckDB source differs from the reference");
        lake
    }

    fn run(&self, mechanism: Mechanism, from: i64, to: i64, now: i64) -> Vec<Segment> {
        self.detect(
            &SegmentsRequest::new(SUBJECT, m(from), m(to), mechanism),
            m(now),
        )
    }
}

// ---------------------------------------------------------------- IGNITION_DETECTION

#[test]
fn ignition_worked_examples() {
    // Pair, debounce, started-before-range, ongoing.
    let l = lab(Rows::default().series(
        IGNITION_SIGNAL,
        &[
            (-120, 1.0),
            (-60, 1.0),
            (30, 0.0),
            (100, 1.0),
            (110, 0.0),
            (112, 1.0),
            (130, 0.0),
            (200, 1.0),
            (230, 1.0),
        ],
    ));
    let s = l.run(Mechanism::IgnitionDetection, 0, 300, 250);
    assert_eq!(s.len(), 3, "{s:?}");
    // Started 2 h before `from`: true start kept, not clipped.
    assert_eq!(s[0].start, m(-120));
    assert!(s[0].started_before_range);
    assert_eq!(s[0].duration_seconds, 150 * 60);
    // The 2-minute OFF at 110 is debounced (< maxGap 300 s).
    assert_eq!((s[1].start, s[1].end), (m(100), Some(m(130))));
    assert!(!s[1].started_before_range);
    // Ongoing: `to` clamped to now (250).
    assert!(s[2].is_ongoing && s[2].end.is_none());
    assert_eq!(s[2].duration_seconds, 50 * 60);
}

#[test]
fn ignition_continuously_on_seeds_from_before_the_lookback() {
    let day = 1440;
    let points: Vec<(i64, f64)> = (-40..=0).map(|d| (d * day, 1.0)).collect();
    let l = lab(Rows::default().series(IGNITION_SIGNAL, &points));
    let s = l.run(Mechanism::IgnitionDetection, 0, 60, 60);
    assert_eq!(s.len(), 1);
    assert!(s[0].is_ongoing && s[0].started_before_range);
    assert_eq!(
        s[0].start,
        m(-30 * day),
        "synthetic ON at the earliest reading"
    );
    // The transitions read itself: no transitions, one synthetic ON.
    let changes = LakeSource::new(&l.engine)
        .ignition_state_changes(SUBJECT, m(0), m(60))
        .unwrap();
    assert_eq!(changes.len(), 1);
    assert_eq!((changes[0].new_state, changes[0].prev_state), (1.0, 0.0));
}

/// A history of a year of day files where ignition was last reported 300 days back: the
/// detection's `prior` is found by walking back window by window (16, 128, then 1,024 days
/// past the statement's own two-day window: three more statements), equal to the reference's,
/// through the direct reads and the DuckLake scan alike; a reading in the first window costs
/// no walk; and a detection whose look-back precedes the bucket's oldest file walks nowhere
/// (the listing says no older file).
#[test]
fn prior_walks_back_to_the_newest_reading_and_stops_at_the_oldest_file() {
    let day = 1440;
    let mut rows = Rows::default();
    rows.num(IGNITION_SIGNAL, m(-300 * day), 1.0)
        .num(IGNITION_SIGNAL, m(-280 * day), 1.0)
        .num(IGNITION_SIGNAL, m(-5 * day), 0.0);
    for d in (-330..=0).step_by(5) {
        rows.num("speed", m(d * day + 7), 3.0);
    }
    let l = lab(&rows);
    let statements = |engine: &Engine, from: i64| {
        let before = engine.reads();
        let changes = LakeSource::new(engine)
            .ignition_state_changes(SUBJECT, m(from), m(from + 60))
            .unwrap();
        (changes, engine.reads() - before)
    };
    l.run(Mechanism::IgnitionDetection, 0, 60, 60);
    let (changes, walked) = statements(&l.engine, 0);
    let off = (m(-5 * day), 0.0, 1.0);
    assert_eq!(
        changes
            .iter()
            .map(|c| (c.ts, c.new_state, c.prev_state))
            .collect::<Vec<_>>(),
        [off],
        "OFF after the ON found 280 days back"
    );
    assert_eq!(
        walked, 4,
        "the detection's statement and three windows back"
    );
    let scan = Engine::new(l._t.open().unwrap()).direct_file_reads(false);
    assert_eq!(statements(&scan, 0), (changes, 4), "the DuckLake scan");

    // The reading lies in the statement's own window before the look-back: no walk.
    let from = -300 * day + 30 * day + day;
    assert_eq!(statements(&l.engine, from).1, 1);
    l.run(Mechanism::IgnitionDetection, from, from + 60, from + 60);

    // The look-back starts before the oldest file: nothing older to walk into.
    let from = -330 * day + 20 * day;
    assert_eq!(statements(&l.engine, from).1, 1);
    assert_eq!(
        statements(&scan, from).1,
        5,
        "no listing: the walk reaches the floor"
    );
    l.run(Mechanism::IgnitionDetection, from, from + 60, from + 60);
}

/// LocationsAt finds a fix far before its probes by the same walk, and keeps the per-probe
/// ten-year limit: every probe's answer equals the newest real fix at or before it, no older
/// than ten years, computed from the rows here.
#[test]
fn locations_at_walks_back_to_a_fix_far_before_the_probes() {
    let day = 1440;
    let mut rows = Rows::default();
    rows.fix(m(-200 * day), 45.0, 7.0);
    rows.fix(m(-50 * day), 0.0, 0.0);
    rows.fix(m(10 * day), 46.0, 8.0);
    for d in (-210..=0).step_by(7) {
        rows.num("speed", m(d * day), 3.0);
    }
    let l = lab(&rows);
    let ten_years = dq_query::activity::LOCATION_GAP_FILL_LOOKBACK;
    let probes: Vec<DateTime<Utc>> = vec![
        m(-day),
        m(0),
        m(-199 * day),
        m(-201 * day),
        m(9 * day),
        m(-200 * day) + ten_years + TimeDelta::days(1),
        m(10 * day) + ten_years,
    ];
    let expected: Vec<Option<(f64, f64)>> = probes
        .iter()
        .map(|p| {
            rows.fixes
                .iter()
                .filter(|(t, lat, lon)| {
                    t <= p && *t >= *p - ten_years && (*lat != 0.0 || *lon != 0.0)
                })
                .max_by_key(|(t, ..)| *t)
                .map(|(_, lat, lon)| (*lat, *lon))
        })
        .collect();
    assert!(expected.iter().any(Option::is_none) && expected.iter().any(Option::is_some));
    let us: Vec<i64> = probes.iter().map(DateTime::timestamp_micros).collect();
    let found = |engine: &Engine, probes: &[i64]| -> Vec<Option<(f64, f64)>> {
        let out = engine.locations_at(SUBJECT, probes).unwrap();
        out.iter()
            .map(|l| l.as_ref().map(|l| (l.latitude, l.longitude)))
            .collect()
    };
    let scan = Engine::new(l._t.open().unwrap()).direct_file_reads(false);
    assert_eq!(found(&l.engine, &us), expected);
    assert_eq!(found(&scan, &us), expected, "the DuckLake scan");
    for (p, e) in us.iter().zip(&expected) {
        assert_eq!(&found(&l.engine, &[*p])[0], e, "probe {p} alone");
    }
    // Two probes 200 days after their fix: the statement and three windows back.
    let before = l.engine.reads();
    assert_eq!(found(&l.engine, &us[..2]), expected[..2]);
    assert_eq!(l.engine.reads() - before, 4);
}

// ---------------------------------------------------------------- FREQUENCY / CHANGE_POINT

fn busy(rows: &mut Rows, minutes: impl IntoIterator<Item = i64>, per_min: i64) {
    for minute in minutes {
        for k in 0..per_min {
            let name = if k % 2 == 0 {
                "speed"
            } else {
                ENGINE_SPEED_SIGNAL
            };
            rows.num(
                name,
                m(minute) + TimeDelta::seconds(k * (60 / per_min)),
                1.0,
            );
        }
    }
}

#[test]
fn frequency_and_change_point_worked_examples() {
    let mut rows = Rows::default();
    // Busy minutes 0–9 and 12–19 (a 2-minute gap merges), then 40–59 up to `to`.
    busy(&mut rows, (0..10).chain(12..20).chain(40..60), 12);
    let l = lab(&rows);
    let s = l.run(Mechanism::FrequencyAnalysis, 0, 60, 61);
    assert_eq!(s.len(), 2, "{s:?}");
    assert_eq!((s[0].start, s[0].end), (m(0), Some(m(20))));
    assert!(s[0].started_before_range, "start == from counts as before");
    assert!(s[1].is_ongoing, "ends at `to` and now is near: ongoing");
    assert_eq!(s[1].duration_seconds, 20 * 60);
    // Not near real time: the last segment closes.
    let s = l.run(Mechanism::FrequencyAnalysis, 0, 60, 600);
    assert!(!s[1].is_ongoing);
    assert_eq!(s[1].end, Some(m(60)));
    // Started before the range: clipped to `from`.
    let s = l.run(Mechanism::FrequencyAnalysis, 5, 30, 600);
    assert_eq!((s[0].start, s[0].end), (m(5), Some(m(20))));
    assert!(s[0].started_before_range);
    // CUSUM: 12 rows/minute accumulates past 5 after one window; same merge rules.
    let s = l.run(Mechanism::ChangePointDetection, 0, 60, 61);
    assert_eq!(s.len(), 2, "{s:?}");
    assert_eq!((s[0].start, s[0].end), (m(0), Some(m(20))));
    assert!(s[1].is_ongoing && s[1].end.is_none());
    let s = l.run(Mechanism::ChangePointDetection, 45, 60, 600);
    assert_eq!((s[0].start, s[0].end), (m(45), Some(m(60))));
    assert!(s[0].started_before_range, "windows read from from − maxGap");
}

#[test]
fn frequency_threshold_comes_from_config() {
    let mut rows = Rows::default();
    busy(&mut rows, 0..10, 6);
    let l = lab(&rows);
    assert!(l.run(Mechanism::FrequencyAnalysis, 0, 60, 600).is_empty());
    let mut req = SegmentsRequest::new(SUBJECT, m(0), m(60), Mechanism::FrequencyAnalysis);
    req.config = Some(SegmentConfig {
        signal_count_threshold: Some(5),
        ..SegmentConfig::default()
    });
    assert_eq!(l.detect(&req, m(600)).len(), 1);
}

// ---------------------------------------------------------------- IDLING

#[test]
fn idling_runs_gap_split_and_started_before_range() {
    let mut pts = Vec::new();
    // Idle −10..10 (started before the range), driving at 11, idle 20..30, a 6-minute gap,
    // idle 36..45 (a separate run), engine off (0) at 46.
    for i in -10..=10 {
        pts.push((i, 800.0));
    }
    pts.push((11, 2500.0));
    for i in 20..=30 {
        pts.push((i, 700.0));
    }
    for i in 36..=45 {
        pts.push((i, 900.0));
    }
    pts.push((46, 0.0));
    let l = lab(Rows::default().series(ENGINE_SPEED_SIGNAL, &pts));
    let s = l.run(Mechanism::Idling, 0, 60, 600);
    assert_eq!(s.len(), 3, "{s:?}");
    assert_eq!((s[0].start, s[0].end), (m(0), Some(m(10))));
    assert!(s[0].started_before_range);
    assert_eq!((s[1].start, s[1].end), (m(20), Some(m(30))));
    assert_eq!((s[2].start, s[2].end), (m(36), Some(m(45))));
    let runs = LakeSource::new(&l.engine)
        .idle_runs(SUBJECT, ENGINE_SPEED_SIGNAL, m(-20), m(60), 1000.0, 300)
        .unwrap();
    assert_eq!(runs.len(), 3);
}

// ---------------------------------------------------------------- REFUEL / RECHARGE

fn refuel_rows() -> Rows {
    let mut rows = Rows::default();
    rows.series(FUEL_LEVEL_SIGNAL, &FUEL_BASIC_RISE);
    rows
}

#[test]
fn refuel_golden_and_two_minute_summary_tail() {
    let l = lab(&refuel_rows());
    let s = l.run(Mechanism::Refuel, 0, 60, 600);
    assert_eq!(s.len(), 1);
    assert_eq!((s[0].start, s[0].end), (m(0), Some(m(7))));
    assert_eq!(s[0].duration_seconds, 420);
    // Summaries extend +2 min past the end: fuel LAST over [0, 9 min) reads the 7-min sample.
    let q = SegmentsQuery {
        request: SegmentsRequest::new(SUBJECT, m(0), m(60), Mechanism::Refuel),
        signal_requests: vec![],
        event_names: vec![],
    };
    let out = l.engine.segments(&q, m(600)).unwrap();
    let first = out[0]
        .summary
        .signals
        .iter()
        .find(|v| v.name == FUEL_LEVEL_SIGNAL && v.agg == FloatAggregation::First)
        .unwrap();
    assert_eq!(
        first.value, 50.0,
        "deduped: the redelivered 9999 is dropped"
    );
}

#[test]
fn refuel_trough_before_range_and_sdl_default_threshold() {
    let l = lab(Rows::default().series(FUEL_LEVEL_SIGNAL, &FUEL_TROUGH_BEFORE_RANGE));
    let s = l.run(Mechanism::Refuel, 10, 60, 600);
    assert_eq!(s.len(), 1);
    assert_eq!((s[0].start, s[0].end), (m(10), Some(m(16))));
    assert!(s[0].started_before_range);

    // 80 → 100 (+25 %, 20 points): below the detector default 30 %, above the SDL 15 %.
    let l = lab(Rows::default().series(FUEL_LEVEL_SIGNAL, &FUEL_RISE_OF_25_PERCENT));
    assert!(l.run(Mechanism::Refuel, 0, 60, 600).is_empty());
    let req = SegmentsRequest {
        config: Some(dq_query::segments::SegmentConfigInput::default().materialize()),
        ..SegmentsRequest::new(SUBJECT, m(0), m(60), Mechanism::Refuel)
    };
    let s = l.detect(&req, m(600));
    assert_eq!((s[0].start, s[0].end), (m(0), Some(m(6))));
}

/// A lab holding [`charging`] at `odometer_km_per_minute`.
fn charging_lab(odometer_km_per_minute: f64) -> Lab {
    let mut rows = Rows::default();
    for (signal, points) in charging(odometer_km_per_minute) {
        rows.series(signal, &points);
    }
    lab(&rows)
}

#[test]
fn recharge_rejects_a_moving_vehicle() {
    let l = charging_lab(1.0);
    assert!(l.run(Mechanism::Recharge, 0, 60, 600).is_empty());
}

#[test]
fn recharge_golden_600s() {
    let l = charging_lab(0.0);
    let s = l.run(Mechanism::Recharge, 0, 60, 600);
    assert_eq!(s.len(), 1);
    assert_eq!((s[0].start, s[0].end), (m(5), Some(m(15))));
    assert_eq!(s[0].duration_seconds, 600);
}

// ---------------------------------------------------------------- summaries and gap-fill

#[test]
fn summaries_locations_and_event_counts() {
    summaries_on(Backend::File);
}

#[test]
fn summaries_on_a_postgres_catalog() {
    summaries_on(Backend::Postgres);
}

fn summaries_on(backend: Backend) {
    let mut rows = Rows::default();
    rows.series(
        IGNITION_SIGNAL,
        &[
            (0, 1.0),
            (10, 0.0),
            (20, 1.0),
            (30, 0.0),
            (40, 1.0),
            (50, 0.0),
        ],
    );
    rows.series("speed", &[(2, 30.0), (5, 55.0), (22, 10.0)]);
    // Segment 1 has its own fixes (and a (0,0) fix that is not a real fix);
    // segment 2 has none (nearest prior fix: minute 8); segment 3 a (0,0) only.
    rows.fix(m(1), 0.0, 0.0)
        .fix(m(3), 52.5, 13.4)
        .fix(m(8), 52.6, 13.5)
        .fix(m(45), 0.0, 0.0);
    rows.event("behavior.harshBraking", m(3))
        .event("behavior.harshBraking", m(4))
        .event("behavior.harshCornering", m(25));
    let l = lab_on(backend, &rows);
    let q = SegmentsQuery {
        request: SegmentsRequest::new(SUBJECT, m(0), m(60), Mechanism::IgnitionDetection),
        signal_requests: vec![
            SignalRequest::new("speed", FloatAggregation::Avg),
            SignalRequest::new("speed", FloatAggregation::Max),
        ],
        event_names: vec!["behavior.harshBraking".into(), "none.here".into()],
    };
    let reads = l.engine.reads();
    let out = l.engine.segments(&q, m(600)).unwrap();
    assert_eq!(out.len(), 3);
    let loc = |lat, lon| Location {
        latitude: lat,
        longitude: lon,
        hdop: 1.5,
        heading: 0.0,
    };
    // Own FIRST/LAST fixes; the (0,0) FIRST row is no fix so the gap-fill at the start finds
    // nothing real before minute 0 → sentinel.
    assert_eq!(out[0].start_location, Location::default());
    assert_eq!(out[0].end_location, Some(loc(52.6, 13.5)));
    // No fix inside: nearest prior fix (minute 8) at both ends.
    assert_eq!(out[1].start_location, loc(52.6, 13.5));
    assert_eq!(out[1].end_location, Some(loc(52.6, 13.5)));
    // Only a (0,0) fix inside: gap-filled from before.
    assert_eq!(out[2].start_location, loc(52.6, 13.5));
    // Signals: defaults ∪ requests, sorted by name then agg; absent data → no entry.
    let names: Vec<(String, &str)> = out[0]
        .summary
        .signals
        .iter()
        .map(|v| (v.name.clone(), v.agg.as_str()))
        .collect();
    assert_eq!(
        names,
        vec![("speed".to_string(), "AVG"), ("speed".to_string(), "MAX")]
    );
    assert_eq!(out[0].summary.signals[0].value, 42.5);
    assert_eq!(out[0].summary.signals[1].value, 55.0);
    // Event counts: requested names in order with zeros.
    assert_eq!(
        out[0].summary.event_counts,
        vec![
            ("behavior.harshBraking".to_string(), 2),
            ("none.here".to_string(), 0)
        ]
    );
    assert_eq!(out[1].summary.event_counts[0].1, 0);
    // Detection with the aggregation's rows 1 + event counts 1 + one batched LocationsAt, and
    // one more: every number row of this fixture has a losing twin (R1), so the signal rows'
    // tied keys are read again with their ids.
    assert_eq!(l.engine.reads() - reads, 4);
    // No eventRequests: every present name.
    let q = SegmentsQuery {
        event_names: vec![],
        ..q
    };
    let out = l.engine.segments(&q, m(600)).unwrap();
    assert_eq!(
        out[1].summary.event_counts,
        vec![("behavior.harshCornering".to_string(), 1)]
    );
}

#[test]
fn idling_speed_filter_runs_after_summaries() {
    let mut rows = Rows::default();
    let mut pts = Vec::new();
    for i in 0..=10 {
        pts.push((i, 800.0));
    }
    pts.push((12, 3000.0));
    for i in 20..=30 {
        pts.push((i, 800.0));
    }
    rows.series(ENGINE_SPEED_SIGNAL, &pts);
    rows.series("speed", &[(5, 0.0), (25, 12.0)]);
    let l = lab(&rows);
    let q = SegmentsQuery {
        request: SegmentsRequest::new(SUBJECT, m(0), m(60), Mechanism::Idling),
        signal_requests: vec![],
        event_names: vec![],
    };
    let out = l.engine.segments(&q, m(600)).unwrap();
    assert_eq!(out.len(), 1, "the moving idle run is dropped");
    assert_eq!(out[0].segment.start, m(0));
}

#[test]
fn validation_errors_are_raw_bad_requests() {
    let l = lab(&Rows::default());
    let mut req = SegmentsRequest::new(SUBJECT, m(10), m(0), Mechanism::IgnitionDetection);
    let q = |req: &SegmentsRequest| SegmentsQuery {
        request: req.clone(),
        signal_requests: vec![],
        event_names: vec![],
    };
    assert_eq!(
        l.engine.segments(&q(&req), m(600)).unwrap_err(),
        Error::BadRequest("from time must be before to time".into())
    );
    req.from = m(0);
    req.to = m(10);
    req.limit = Some(201);
    assert_eq!(
        l.engine.segments(&q(&req), m(600)).unwrap_err().to_string(),
        "limit must be between 1 and 200"
    );
    let reads = l.engine.reads();
    let bad_tz = DailyActivityQuery {
        request: DailyActivityRequest {
            timezone: Some("Mars/Olympus".into()),
            ..DailyActivityRequest::new(SUBJECT, m(0), m(10), Mechanism::IgnitionDetection)
        },
        signal_requests: vec![],
        event_names: vec![],
    };
    assert_eq!(
        l.engine
            .daily_activity(&bad_tz, m(6000))
            .unwrap_err()
            .to_string(),
        "invalid timezone \"Mars/Olympus\": unknown time zone Mars/Olympus"
    );
    assert_eq!(l.engine.reads(), reads, "validation runs before any read");
}

// ---------------------------------------------------------------- pagination (acceptance 2)

/// `n` ignition pairs `[20k − 10, 20k]` (the first ends before `from` = minute 5), each
/// followed by a fix at `20k + 5`: no segment holds a fix, so every boundary is gap-filled.
fn many_segments(n: i64) -> Rows {
    let mut rows = Rows::default();
    for k in 0..n {
        rows.num(IGNITION_SIGNAL, m(k * 20 - 10), 1.0)
            .num(IGNITION_SIGNAL, m(k * 20), 0.0);
        rows.fix(m(k * 20 + 5), 40.0 + k as f64 / 100.0, -3.0);
    }
    rows
}

#[test]
fn pages_with_after_never_repeat_or_skip() {
    let n = 31;
    let l = lab(&many_segments(n));
    let base = SegmentsRequest::new(SUBJECT, m(5), m(n * 20), Mechanism::IgnitionDetection);
    let all_req = SegmentsRequest {
        limit: None,
        ..base.clone()
    };
    let all: Vec<_> = l
        .engine
        .segments(
            &SegmentsQuery {
                request: all_req,
                signal_requests: vec![],
                event_names: vec![],
            },
            m(100_000),
        )
        .unwrap();
    assert_eq!(all.len() as i64, n - 1, "the first pair ends before `from`");
    for limit in [3, 7, 30, 200] {
        let mut pages = Vec::new();
        let mut after = None;
        loop {
            let req = SegmentsRequest {
                limit: Some(limit),
                after,
                ..base.clone()
            };
            let page = l
                .engine
                .segments(
                    &SegmentsQuery {
                        request: req,
                        signal_requests: vec![],
                        event_names: vec![],
                    },
                    m(100_000),
                )
                .unwrap();
            assert!(page.len() <= limit as usize);
            let Some(last) = page.last() else { break };
            after = Some(last.segment.start);
            pages.extend(page);
        }
        assert_eq!(pages, all, "limit {limit}");
    }
}

// ---------------------------------------------------------------- statement budget (acceptance 4)

#[test]
fn gap_fill_and_summaries_cost_constant_statements() {
    // Enough rows that the lab's commit writes a file rather than inlining them: the listing
    // then shows the look-back holds nothing older, and no walk reads there.
    let untied = |n: i64| {
        let mut rows = many_segments(n);
        rows.series("fuel", &(0..8).map(|i| (i, 50.0)).collect::<Vec<_>>());
        rows.untied = true;
        rows
    };
    let small = lab(&untied(3));
    let big = lab(&untied(60));
    let cost = |l: &Lab, n: i64| {
        let q = SegmentsQuery {
            request: SegmentsRequest {
                limit: None,
                ..SegmentsRequest::new(SUBJECT, m(5), m(n * 20), Mechanism::IgnitionDetection)
            },
            signal_requests: vec![SignalRequest::new("speed", FloatAggregation::Avg)],
            event_names: vec!["behavior.harshBraking".into()],
        };
        let before = l.engine.reads();
        let out = l.engine.segments(&q, m(100_000)).unwrap();
        // Every start is gap-filled from the fix 15 minutes before it.
        assert!(out.iter().all(|s| s.start_location.latitude >= 40.0));
        (out.len(), l.engine.reads() - before)
    };
    let (n_small, c_small) = cost(&small, 3);
    let (n_big, c_big) = cost(&big, 60);
    assert!(n_big > 10 * n_small);
    assert_eq!(c_small, c_big, "statements must not grow with segments");
    assert_eq!(
        c_big, 3,
        "ignition readings with the signal rows + event rows + LocationsAt"
    );
    // Every number row with a losing twin (R1): the tied keys' rows are read again, once.
    assert_eq!(cost(&lab(&many_segments(60)), 60).1, 4);

    // dailyActivity: 3 days vs 31 days cost the same (both gap-fill empty days).
    let day_cost = |l: &Lab, days: i64| {
        let q = DailyActivityQuery {
            request: DailyActivityRequest {
                timezone: Some("America/New_York".into()),
                ..DailyActivityRequest::new(
                    SUBJECT,
                    m(0),
                    m(0) + TimeDelta::days(days - 1),
                    Mechanism::IgnitionDetection,
                )
            },
            signal_requests: vec![],
            event_names: vec![],
        };
        let before = l.engine.reads();
        let out = l
            .engine
            .daily_activity(&q, m(0) + TimeDelta::days(60))
            .unwrap();
        (out.len(), l.engine.reads() - before)
    };
    let (d_small, dc_small) = day_cost(&big, 3);
    let (d_big, dc_big) = day_cost(&big, 31);
    assert_eq!((d_small, d_big), (3, 31));
    assert_eq!(dc_small, dc_big, "statements must not grow with days");
    assert_eq!(
        dc_big, 4,
        "ignition readings with the signal rows + event rows + LocationsAt for the segments and \
         for the days"
    );
}

// ---------------------------------------------------------------- dailyActivity (acceptance 3)

fn utc(y: i32, mo: u32, d: u32, h: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, 0, 0).unwrap()
}

#[test]
fn daily_activity_across_dst_changes_in_berlin() {
    let mut rows = Rows::default();
    // Ignition ON through both DST weekends of 2025 (Berlin: 03-30 23 h, 10-26 25 h).
    rows.num(IGNITION_SIGNAL, utc(2025, 3, 29, 12), 1.0)
        .num(IGNITION_SIGNAL, utc(2025, 3, 31, 12), 0.0)
        .num(IGNITION_SIGNAL, utc(2025, 10, 25, 12), 1.0)
        .num(IGNITION_SIGNAL, utc(2025, 10, 27, 12), 0.0);
    rows.fix(utc(2025, 3, 29, 13), 52.52, 13.40)
        .fix(utc(2025, 3, 31, 11), 48.13, 11.58);
    rows.event("behavior.harshBraking", utc(2025, 3, 30, 10));
    rows.num("speed", utc(2025, 3, 30, 10), 88.0);
    let l = lab(&rows);
    let run = |from, to| {
        let q = DailyActivityQuery {
            request: DailyActivityRequest {
                timezone: Some("Europe/Berlin".into()),
                ..DailyActivityRequest::new(SUBJECT, from, to, Mechanism::IgnitionDetection)
            },
            signal_requests: vec![],
            event_names: vec!["behavior.harshBraking".into()],
        };
        l.engine.daily_activity(&q, utc(2026, 1, 1, 0)).unwrap()
    };
    let spring = run(utc(2025, 3, 29, 12), utc(2025, 3, 31, 12));
    let hours: Vec<i64> = spring
        .iter()
        .map(|d| (d.day.end - d.day.start).num_hours())
        .collect();
    assert_eq!(hours, vec![24, 23, 24]);
    assert_eq!(spring[1].day.start, utc(2025, 3, 29, 23));
    assert_eq!(spring[1].day.end, utc(2025, 3, 30, 22));
    // The segment covers the whole 23-hour day.
    assert_eq!(spring[1].segment_count, 1);
    assert_eq!(spring[1].duration_seconds, 23 * 3600);
    assert_eq!(spring[0].duration_seconds, 11 * 3600, "12:00Z → 23:00Z");
    assert_eq!(spring[2].duration_seconds, 14 * 3600, "22:00Z → 12:00Z");
    assert_eq!(spring[1].summary.event_counts[0].1, 1);
    assert!(spring[1]
        .summary
        .signals
        .iter()
        .any(|v| v.name == "speed" && v.value == 88.0));
    // Day locations come from the segment's locations (start: its first fix).
    assert_eq!(spring[1].start_location.latitude, 52.52);
    assert_eq!(spring[1].end_location.latitude, 48.13);

    let autumn = run(utc(2025, 10, 26, 12), utc(2025, 10, 26, 13));
    assert_eq!(autumn.len(), 1);
    assert_eq!(
        autumn[0].day.end - autumn[0].day.start,
        TimeDelta::hours(25)
    );
    assert_eq!(autumn[0].duration_seconds, 25 * 3600);
    // No fix that day: gap-filled from the last fix before (March 31).
    assert_eq!(autumn[0].start_location.latitude, 48.13);
}

// ---------------------------------------------------------------- conformance sweep

/// A deterministic pseudo-random day of mixed signals (each numeric row redelivered under a
/// later-sorting id with the value 9999, which R1 deduplication drops).
fn mixed_rows() -> Rows {
    let mut seed: u64 = 0x5eed;
    let mut next = move |n: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % n
    };
    let mut rows = Rows::default();
    let mut ignition = 0.0;
    let mut fuel = 40.0;
    let mut soc = 30.0;
    let mut odo = 5000.0;
    for minute in -60..900 {
        let t = m(minute);
        if next(25) == 0 {
            ignition = 1.0 - ignition;
        }
        if next(3) == 0 {
            rows.num(IGNITION_SIGNAL, t, ignition);
        }
        // Parked and charging 380–460.
        let parked = (380..460).contains(&minute);
        let rpm = if ignition == 1.0 && !parked {
            [0.0, 750.0, 900.0, 2400.0][next(4) as usize]
        } else {
            0.0
        };
        rows.num(ENGINE_SPEED_SIGNAL, t + TimeDelta::seconds(10), rpm);
        if rpm > 1000.0 {
            odo += 0.6;
            fuel -= 0.05;
            soc -= 0.02;
        }
        if minute % 300 == 100 {
            fuel = 95.0;
        }
        if (400..440).contains(&minute) {
            soc += 1.0;
        }
        rows.num(FUEL_LEVEL_SIGNAL, t + TimeDelta::seconds(20), fuel);
        rows.num(SOC_SIGNAL, t + TimeDelta::seconds(30), soc);
        rows.num(ODOMETER_SIGNAL, t + TimeDelta::seconds(40), odo);
        for k in 0..next(14) {
            rows.num("speed", t + TimeDelta::seconds(41 + k as i64), 1.0);
        }
        if next(10) == 0 {
            rows.fix(t + TimeDelta::seconds(50), 45.0, 7.0 + minute as f64 / 1e4);
        }
    }
    rows
}

/// A deterministic pseudo-random day of mixed signals: every mechanism over several ranges
/// gives the same segments through DuckDB as through the reference source, and the batched
/// LocationsAt equals one lookup per point.
#[test]
fn duckdb_source_matches_the_reference_on_mixed_data() {
    let rows = mixed_rows();
    let l = lab(&rows);
    let mut counts = std::collections::BTreeMap::new();
    for (from, to, now) in [(0, 900, 100_000), (100, 700, 650)] {
        for mechanism in Mechanism::ALL {
            for limit in [None, Some(2)] {
                let req = SegmentsRequest {
                    limit,
                    ..SegmentsRequest::new(SUBJECT, m(from), m(to), mechanism)
                };
                let found = l.detect(&req, m(now)).len();
                *counts.entry(mechanism.as_str()).or_insert(0) += found;
            }
        }
    }
    eprintln!("segments per mechanism: {counts:?}");
    assert!(counts.values().all(|n| *n > 0), "{counts:?}");
    let probes: Vec<i64> = (-70..960)
        .step_by(97)
        .map(|i| m(i).timestamp_micros())
        .collect();
    let batched = l.engine.locations_at(SUBJECT, &probes).unwrap();
    for (p, b) in probes.iter().zip(&batched) {
        assert_eq!(&l.engine.locations_at(SUBJECT, &[*p]).unwrap()[0], b);
    }
    assert!(batched.iter().any(Option::is_some) && batched.iter().any(Option::is_none));
}

/// IGNITION_DETECTION reads its ignition readings and the summaries' signal rows in one
/// statement. Its segments and their signal summaries equal what detection through the plain
/// source and the ranges aggregation, each reading on its own, give: over windows whose
/// segments all start inside them (the rows read ahead serve the summaries) and windows with a
/// segment started before them (the summaries read their own rows), on redelivered rows; and
/// the read ahead saves a statement.
#[test]
fn one_read_serves_ignition_detection_and_summaries() {
    let mut rows = mixed_rows();
    // Speed at every minute, where ignition changes: a window can start on a row that counts.
    for minute in -60..960 {
        rows.num("speed", m(minute), (minute % 13) as f64);
    }
    // Statements are counted: no tied key, whose rows would be read again with their ids.
    rows.untied = true;
    let l = lab(&rows);
    let client = [
        SignalRequest::new("speed", FloatAggregation::Avg),
        SignalRequest::new(FUEL_LEVEL_SIGNAL, FloatAggregation::Max),
        SignalRequest::new(IGNITION_SIGNAL, FloatAggregation::Min),
    ];
    let requests = merge_signal_requests(Mechanism::IgnitionDetection, &client);
    let floats: Vec<(String, FloatAggregation)> =
        requests.iter().map(|r| (r.name.clone(), r.agg)).collect();
    let now = m(100_000);
    let whole = |from, to| SegmentsRequest {
        limit: None,
        ..SegmentsRequest::new(SUBJECT, from, to, Mechanism::IgnitionDetection)
    };
    // Windows starting on a segment's start, where a row sits on the boundary.
    let starts: Vec<DateTime<Utc>> =
        dq_query::segments::segments(&LakeSource::new(&l.engine), &whole(m(0), m(900)), now)
            .unwrap()
            .segments
            .iter()
            .map(|s| s.start)
            .collect();
    assert!(starts.len() > 4);
    let mut windows = vec![
        (m(0), m(900)),
        (m(-60), m(960)),
        (m(100), m(700)),
        (m(333), m(901)),
    ];
    windows.extend([
        (starts[2], m(900)),
        (starts[3], starts[4]),
        (m(512), m(513)),
    ]);
    let (mut served, mut own_read) = (0, 0);
    for (from, to) in windows {
        let request = whole(from, to);
        let q = SegmentsQuery {
            request: request.clone(),
            signal_requests: client.to_vec(),
            event_names: vec![],
        };
        let before = l.engine.reads();
        let got = l.engine.segments(&q, now).unwrap();
        let statements = l.engine.reads() - before;

        let before = l.engine.reads();
        let list =
            dq_query::segments::segments(&LakeSource::new(&l.engine), &request, now).unwrap();
        let segments: Vec<Segment> = got.iter().map(|s| s.segment).collect();
        assert_eq!(segments, list.segments, "[{from}, {to})");
        let ranges: Vec<(i64, i64)> = list
            .summary_ranges()
            .iter()
            .map(|r| (r.start.timestamp_micros(), r.end.timestamp_micros()))
            .collect();
        let want = l
            .engine
            .ranges_aggregate(SUBJECT, &ranges, &floats, &[])
            .unwrap();
        let apart = l.engine.reads() - before;
        assert_eq!(got.len(), want.len());
        for (s, w) in got.iter().zip(&want) {
            let mut expected: Vec<(String, FloatAggregation, f64)> = w
                .floats
                .iter()
                .map(|(i, v)| (requests[*i].name.clone(), requests[*i].agg, *v))
                .collect();
            expected.sort_by(|a, b| (&a.0, a.1.as_str()).cmp(&(&b.0, b.1.as_str())));
            let summary: Vec<(String, FloatAggregation, f64)> = s
                .summary
                .signals
                .iter()
                .map(|v| (v.name.clone(), v.agg, v.value))
                .collect();
            assert_eq!(
                summary, expected,
                "[{from}, {to}) segment at {}",
                s.segment.start
            );
        }
        if got.is_empty() {
            continue;
        }
        assert_eq!(
            apart, 2,
            "[{from}, {to}): transitions + signal rows, each its own read"
        );
        if got.iter().any(|s| s.segment.start < from) {
            own_read += 1;
        } else {
            served += 1;
            // Read ahead, events and, at most, LocationsAt: never a second signal read.
            assert!(statements <= 3, "[{from}, {to}): {statements} statements");
        }
    }
    assert!(
        served > 0 && own_read > 0,
        "{served} served, {own_read} read their own rows"
    );
}

// ---------------------------------------------------------------- ranges statements

/// Each row counts for the first range holding it, whatever the ranges' order, overlaps, gaps
/// or emptiness: ranges 0 [10, 20) and 1 [15, 30) overlap (minutes 15–19 are range 0's), range
/// 2 [40, 50) holds range 3 [42, 44) (which gets nothing), range 4 is empty, range 5 [0, 5)
/// comes last but is earliest, and minutes 30–39 and from 50 on belong to no range.
#[test]
fn ranges_statements_count_each_row_for_the_first_range_holding_it() {
    let mut rows = Rows::default();
    for i in 0..60 {
        rows.num("speed", m(i), i as f64);
        rows.event("harshBraking", m(i));
    }
    let l = lab(&rows);
    let us = |i: i64| m(i).timestamp_micros();
    let ranges = [
        (us(10), us(20)),
        (us(15), us(30)),
        (us(40), us(50)),
        (us(42), us(44)),
        (us(45), us(45)),
        (us(0), us(5)),
    ];
    let floats = [
        ("speed".to_string(), FloatAggregation::Min),
        ("speed".to_string(), FloatAggregation::Max),
    ];
    let aggs = l
        .engine
        .ranges_aggregate(SUBJECT, &ranges, &floats, &[])
        .unwrap();
    let min_max: Vec<Option<(f64, f64)>> = aggs
        .iter()
        .map(|a| Some((*a.floats.get(&0)?, *a.floats.get(&1)?)))
        .collect();
    assert_eq!(
        min_max,
        vec![
            Some((10.0, 19.0)),
            Some((20.0, 29.0)),
            Some((40.0, 49.0)),
            None,
            None,
            Some((0.0, 4.0)),
        ]
    );
    let counts: Vec<i64> = l
        .engine
        .ranges_event_counts(SUBJECT, &ranges, &[])
        .unwrap()
        .iter()
        .map(|c| c.get("harshBraking").copied().unwrap_or(0))
        .collect();
    assert_eq!(counts, vec![10, 10, 10, 0, 0, 5]);
    // Only empty ranges: nothing is read, every range answers empty.
    let empty = [(us(7), us(7))];
    assert_eq!(
        l.engine
            .ranges_aggregate(SUBJECT, &empty, &floats, &[])
            .unwrap(),
        vec![Default::default()]
    );
    assert!(l.engine.ranges_event_counts(SUBJECT, &empty, &[]).unwrap()[0].is_empty());
}

/// The ranges aggregation and event counts (computed in Rust over one read, module `fold`)
/// equal the SQL statements that define them, run by DuckDB on the same lake: R1 dedup by the
/// lowest cloud_event_id (redeliveries in both insertion orders, ids differing only in case),
/// each row in the first range holding it (overlapping, nested, empty and out-of-order ranges,
/// gaps), NULL values and coordinates, every float aggregation and the location ones.
/// The two sources of [`random_lake`]'s signals.
const SOURCES: [&str; 2] = [
    "0xcd445F4c6bDAD32b68a2939b912150Fe3C88803E",
    "0x5e31bBc786D7bEd95216383787deA1ab0f1c1897",
];

/// A file lake holding 240 minutes of pseudo-random rows of [`SUBJECT`]: "speed", "fuel" and
/// location rows, a quarter redelivered under a second id that sorts before or after the first
/// (byte order: 'B' < 'b') in either insertion order, ~9 % NULL values and coordinates, ~1/6 of
/// the fixes (0,0), and deduplicated pairs of events from two sources.
fn random_lake() -> TestLake {
    let t = TestLake::new(Backend::File);
    let lake = t.open().unwrap();
    dq_tables::schema::ensure(&lake).unwrap();
    let bucket = dq_cloudevent::subject_bucket(SUBJECT);
    // A fixed pseudo-random sequence (64-bit LCG), so a failure reproduces.
    let mut state: u64 = 0x5eed;
    let mut next = |n: u64| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % n
    };
    let names = ["speed", "fuel", LOC];
    let value = |v: u64| {
        if v.is_multiple_of(11) {
            "NULL".to_string()
        } else {
            format!("{:?}", v as f64 / 8.0)
        }
    };
    let mut signals = Vec::new();
    let mut events = Vec::new();
    for i in 0..1500u64 {
        let name = names[next(3) as usize];
        let ts = lit(m(next(240) as i64));
        let ids = if next(4) == 0 {
            if next(2) == 0 {
                vec![format!("b{i}"), format!("B{i}")]
            } else {
                vec![format!("B{i}"), format!("b{i}")]
            }
        } else {
            vec![format!("a{i}")]
        };
        for id in ids {
            let mut coords: Vec<String> = (0..4).map(|_| value(next(800))).collect();
            if next(6) == 0 {
                coords[0] = "0".into();
                coords[1] = "0".into();
            }
            signals.push(format!(
                "('{SUBJECT}', {bucket}, '{name}', {ts}, '{}', 'p', '{id}', {}, '', {})",
                SOURCES[next(2) as usize],
                value(next(800)),
                coords.join(", ")
            ));
        }
        if next(5) == 0 {
            let event = ["harshBraking", "harshCornering"][next(2) as usize];
            let source = ["s1", "s2"][next(2) as usize];
            for id in [format!("e{i}"), format!("f{i}")] {
                events.push(format!(
                    "('{SUBJECT}', {bucket}, '{source}', 'p', '{id}', 'dimo.event', 'v1', '{event}', {ts}, 0, '', []::VARCHAR[])"
                ));
            }
        }
    }
    let conn = lake.connect().unwrap();
    conn.execute_batch(&format!(
        "INSERT INTO lake.signals VALUES {}",
        signals.join(", ")
    ))
    .unwrap();
    conn.execute_batch(&format!(
        "INSERT INTO lake.events VALUES {}",
        events.join(", ")
    ))
    .unwrap();
    t
}

/// The ranges aggregation and event counts (computed in Rust over one read, module `fold`)
/// equal the SQL statements that define them, run by DuckDB on the same lake: R1 dedup by the
/// lowest cloud_event_id, each row in the first range holding it (overlapping, nested, empty
/// and out-of-order ranges, gaps), NULL values and coordinates, every float aggregation and
/// the location ones.
#[test]
fn ranges_aggregate_equals_the_sql_statement() {
    let t = random_lake();
    let lake = t.open().unwrap();
    let conn = lake.connect().unwrap();
    let us = |i: i64| m(i).timestamp_micros();
    let ranges = [
        (us(100), us(130)),
        (us(10), us(60)),
        (us(40), us(90)),
        (us(45), us(50)),
        (us(70), us(70)),
        (us(200), us(260)),
        (us(0), us(5)),
    ];
    let floats: Vec<(String, FloatAggregation)> = ["speed", "fuel", LOC]
        .iter()
        .flat_map(|n| {
            [
                FloatAggregation::Avg,
                FloatAggregation::Med,
                FloatAggregation::Max,
                FloatAggregation::Min,
                FloatAggregation::Rand,
                FloatAggregation::First,
                FloatAggregation::Last,
            ]
            .map(|a| (n.to_string(), a))
        })
        .collect();
    let locations = [
        (LOC.to_string(), LocationAgg::Avg),
        (LOC.to_string(), LocationAgg::First),
        (LOC.to_string(), LocationAgg::Last),
        (LOC.to_string(), LocationAgg::Rand),
    ];
    let engine = Engine::new(t.open().unwrap());
    let got = engine
        .ranges_aggregate(SUBJECT, &ranges, &floats, &locations)
        .unwrap();

    // The definition: R1 by QUALIFY, the first range holding a row by min(index), DuckDB's
    // aggregates (floats over the rows with a value, locations over every row of the name).
    let values: Vec<String> = ranges
        .iter()
        .enumerate()
        .map(|(i, (a, b))| format!("({i}, {a}, {b})"))
        .collect();
    let labelled = format!(
        "WITH r(i, lo, hi) AS (VALUES {}), \
         d AS (SELECT * FROM lake.signals WHERE subject = ? \
               QUALIFY row_number() OVER (PARTITION BY subject, name, \"timestamp\" ORDER BY cloud_event_id) = 1), \
         l AS (SELECT (SELECT min(i) FROM r WHERE lo <= epoch_us(d.\"timestamp\") AND epoch_us(d.\"timestamp\") < hi) AS range_index, d.* FROM d) \
         ",
        values.join(", ")
    );
    let coords = |f: &str| {
        ["loc_lat", "loc_lon", "loc_hdop", "loc_heading"]
            .map(|c| f.replace("{c}", c))
            .join(", ")
    };
    let sql = format!(
        "{labelled} SELECT range_index, name, count(value_number), avg(value_number), median(value_number), \
         max(value_number), min(value_number), arg_min(value_number, \"timestamp\"), \
         arg_max(value_number, \"timestamp\"), list(value_number), count(*), {}, {}, {} \
         FROM l WHERE range_index IS NOT NULL GROUP BY ALL ORDER BY ALL",
        coords("coalesce(avg({c}), 0)"),
        coords("coalesce(arg_min({c}, \"timestamp\"), 0)"),
        coords("coalesce(arg_max({c}, \"timestamp\"), 0)"),
    );
    let mut stmt = conn.prepare(&sql).unwrap();
    let mut rows = stmt.query([SUBJECT]).unwrap();
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
    let mut groups = 0;
    while let Some(r) = rows.next().unwrap() {
        groups += 1;
        let range: usize = r.get::<_, i64>(0).unwrap() as usize;
        let name: String = r.get(1).unwrap();
        let with_value: i64 = r.get(2).unwrap();
        let answer = &got[range];
        for (i, (n, agg)) in floats.iter().enumerate() {
            if *n != name {
                continue;
            }
            let Some(&v) = answer.floats.get(&i) else {
                assert_eq!(with_value, 0, "range {range} {n} {agg:?}: no answer");
                continue;
            };
            let want = |col: usize| r.get::<_, f64>(col).unwrap();
            match agg {
                FloatAggregation::Avg => assert!(
                    close(v, want(3)),
                    "range {range} {n} avg {v} vs {}",
                    want(3)
                ),
                FloatAggregation::Rand => {
                    let all: String = r
                        .get::<_, dq_lake::duckdb::types::Value>(9)
                        .map(|v| format!("{v:?}"))
                        .unwrap();
                    assert!(
                        all.contains(&format!("{v:?}")),
                        "range {range} {n} rand {v} not in {all}"
                    );
                }
                _ => {
                    let col = match agg {
                        FloatAggregation::Med => 4,
                        FloatAggregation::Max => 5,
                        FloatAggregation::Min => 6,
                        FloatAggregation::First => 7,
                        _ => 8,
                    };
                    assert_eq!(v, want(col), "range {range} {n} {agg:?}");
                }
            }
        }
        for (i, (n, agg)) in locations.iter().enumerate() {
            if *n != name {
                continue;
            }
            let l = answer
                .locations
                .get(&i)
                .unwrap_or_else(|| panic!("range {range} {n} {agg:?}: no location"));
            let first = match agg {
                LocationAgg::Avg => 11,
                LocationAgg::First => 15,
                LocationAgg::Last => 19,
                LocationAgg::Rand => continue,
            };
            let want: Vec<f64> = (first..first + 4).map(|c| r.get(c).unwrap()).collect();
            let got = [l.latitude, l.longitude, l.hdop, l.heading];
            for (g, w) in got.iter().zip(&want) {
                assert!(close(*g, *w), "range {range} {agg:?}: {got:?} vs {want:?}");
            }
        }
    }
    assert!(
        groups > 12,
        "only {groups} groups: the data does not exercise the ranges"
    );
    // Ranges no row falls in answer nothing.
    assert_eq!(got[3], Default::default());
    assert_eq!(got[4], Default::default());

    let counts = engine.ranges_event_counts(SUBJECT, &ranges, &[]).unwrap();
    let sql = format!(
        "WITH r(i, lo, hi) AS (VALUES {}), \
         d AS (SELECT * FROM lake.events WHERE subject = ? \
               QUALIFY row_number() OVER (PARTITION BY subject, \"timestamp\", name, source ORDER BY cloud_event_id) = 1) \
         SELECT range_index, name, count(*) FROM \
           (SELECT (SELECT min(i) FROM r WHERE lo <= epoch_us(d.\"timestamp\") AND epoch_us(d.\"timestamp\") < hi) AS range_index, \
                   name FROM d) \
         WHERE range_index IS NOT NULL GROUP BY ALL ORDER BY ALL",
        values.join(", ")
    );
    let mut stmt = conn.prepare(&sql).unwrap();
    let want: Vec<(i64, String, i64)> = stmt
        .query_map([SUBJECT], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let got: Vec<(i64, String, i64)> = counts
        .iter()
        .enumerate()
        .flat_map(|(i, m)| m.iter().map(move |(n, c)| (i as i64, n.clone(), *c)))
        .collect();
    assert!(want.len() > 6, "{want:?}");
    assert_eq!(got, want);
}

/// The `signals` aggregation of float and location aliases without filters (answered in Rust
/// over one read, module `fold`) equals the statement `aggregate_sql` builds for the same
/// request, run by DuckDB on the same lake: buckets of several widths aligned on `from`, a
/// source filter, R1 dedup, float aliases answering 0 for a bucket whose rows have no value,
/// locations over real fixes only (NULL or (0,0) coordinates).
#[test]
fn signals_aggregation_equals_the_sql_statement() {
    let t = random_lake();
    let lake = t.open().unwrap();
    let conn = lake.connect().unwrap();
    let engine = Engine::new(t.open().unwrap());
    let us = |i: i64| m(i).timestamp_micros();
    let floats = crate::DETERMINISTIC_FLOATS;
    let mut compared = 0;
    for (from, to, interval_minutes, source) in [
        (0, 240, 60, None),
        (7, 200, 7, None),
        (
            30,
            100,
            1,
            Some("0xcd445F4c6bDAD32b68a2939b912150Fe3C88803E"),
        ),
        (0, 1440, 1440, None),
    ] {
        let req = AggregateRequest {
            subject: SUBJECT.into(),
            source: source.map(|s| format!("did:ethr:137:{s}")),
            interval_us: interval_minutes * 60_000_000,
            from_us: us(from),
            to_us: us(to),
            floats: ["speed", "fuel", LOC]
                .iter()
                .flat_map(|n| {
                    floats.map(|agg| FloatRequest {
                        name: n.to_string(),
                        agg,
                        filter: None,
                    })
                })
                .collect(),
            strings: Vec::new(),
            locations: [LocationAgg::Avg, LocationAgg::First, LocationAgg::Last]
                .map(|agg| LocationRequest {
                    name: LOC.into(),
                    agg,
                    filter: None,
                })
                .to_vec(),
        };
        let got = engine.aggregate(&req).unwrap();
        // The statement's rows: (bucket, kind 1 float / 3 location, index, value, location).
        let sql = aggregate_sql(&req).unwrap().over("lake.signals");
        let mut want: Vec<Bucket> = Vec::new();
        let mut stmt = conn.prepare(&sql).unwrap();
        let mut rows = stmt.query([SUBJECT]).unwrap();
        while let Some(r) = rows.next().unwrap() {
            let bucket: i64 = r.get(0).unwrap();
            if want.last().is_none_or(|b| b.timestamp_us != bucket) {
                want.push(Bucket {
                    timestamp_us: bucket,
                    ..Bucket::default()
                });
            }
            let b = want.last_mut().unwrap();
            let idx = r.get::<_, i64>(2).unwrap() as usize;
            if r.get::<_, i64>(1).unwrap() == 1 {
                b.floats.insert(idx, r.get(3).unwrap());
            } else {
                let at = |c: usize| r.get::<_, f64>(c).unwrap();
                b.locations.insert(
                    idx,
                    Location {
                        latitude: at(5),
                        longitude: at(6),
                        hdop: at(7),
                        heading: at(8),
                    },
                );
            }
        }
        let what = format!("{from}..{to} every {interval_minutes} min, source {source:?}");
        assert_eq!(got.len(), want.len(), "{what}: buckets");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g.timestamp_us, w.timestamp_us, "{what}");
            assert_eq!(
                g.floats.keys().collect::<Vec<_>>(),
                w.floats.keys().collect::<Vec<_>>(),
                "{what}: bucket {}",
                g.timestamp_us
            );
            for (i, v) in &g.floats {
                let want = w.floats[i];
                let close = (v - want).abs() <= 1e-9 * v.abs().max(want.abs()).max(1.0);
                assert!(
                    close,
                    "{what}: bucket {} float {i}: {v} vs {want}",
                    g.timestamp_us
                );
            }
            assert_eq!(g.locations.len(), w.locations.len(), "{what}");
            for (i, l) in &g.locations {
                let want = w.locations[i];
                let pairs = [
                    (l.latitude, want.latitude),
                    (l.longitude, want.longitude),
                    (l.hdop, want.hdop),
                    (l.heading, want.heading),
                ];
                assert!(
                    pairs
                        .iter()
                        .all(|(a, b)| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)),
                    "{what}: bucket {} location {i}: {l:?} vs {want:?}",
                    g.timestamp_us
                );
            }
            compared += 1;
        }
    }
    assert!(compared > 30, "only {compared} buckets compared");
}
