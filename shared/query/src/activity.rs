//! `segments` and `dailyActivity` over the lake: the DuckDB
//! [`dq_segments::SignalSource`] ([`LakeSource`]), the ranges aggregation, the ranges event
//! counts, the batched LocationsAt gap-fill, and the two request pipelines that
//! put the pure detectors of crate `segments` together with those summaries.
//!
//! Statement budget per request (independent of how many segments or days there are):
//! detection, one read of the summary signal rows and one of the event rows — shared by a
//! `dailyActivity`'s segments and days —, and one batched LocationsAt per summarised range set.
//! For IGNITION_DETECTION the detection's readings and the summary signal rows are one
//! statement (`Engine::ignition_read_ahead`): the subject's files are opened once for both.
//! The newest row before a time (`prior`, a gap-fill's fix) is looked for in the two days
//! before it by the statement that needs it; only when none is there does a walk back add
//! statements, as far as the row or the bucket's oldest file (`Engine::newest_signal_before`).
//! Where DuckDB took longer to plan and run a small analytic statement than the work needs (the
//! ignition transitions, the per-range aggregates and event counts), the statement is a plain
//! read and Rust computes the answer: the ignition
//! transitions by the reference definition (`dq_segments::reference`), the summaries in module
//! `fold`, both R1-deduplicating by `dq_tables::keys::read_tiebreak`. Every statement reads
//! the subject's bucket's files directly where the request's snapshot allows it
//! ([`Engine::rows_of`]), and all of them read that one snapshot.

use crate::aggregate::{FloatAgg, Location, LocationAgg};
use crate::files::FileTable;
use crate::fold::{count_events, event_keys, signal_rows, signal_rows_sql};
use crate::{names_predicate, subject_predicate, ts_lit, Engine, Error, Result};
use chrono::{DateTime, TimeDelta};
use dq_lake::duckdb::arrow::record_batch::RecordBatch;
use dq_lake::duckdb::params;
use dq_lake::quote;
use dq_segments::signals::{
    merge_signal_requests, FloatAggregation, SignalRequest, LOCATION_SIGNAL,
};
use dq_segments::source::{IGNITION_LOOKBACK_DAYS, IGNITION_SIGNAL};
use dq_segments::{
    ActiveWindow, DailyActivityRequest, DayWindow, LevelSample, Mechanism, Segment,
    SegmentsRequest, SignalSource, StateChange, TimeRange, Ts, WindowSpec,
};
use dq_tables::keys::{read_tiebreak, signals_deduped_from, READ_TIEBREAK};
use std::collections::{BTreeMap, BTreeSet};

/// How far back a gap-fill looks for a fix (`locationGapFillLookback`, ≈ 10 years).
pub const LOCATION_GAP_FILL_LOOKBACK: TimeDelta = TimeDelta::hours(10 * 365 * 24);

const DAY_US: i64 = 86_400 * 1_000_000;

/// The first window of a look-back for the newest row before a time (`prior`, a gap-fill's
/// fix): read in the statement that needs the row, two days (two or three day files). A
/// vehicle that reports daily finds its row there; [`Engine::newest_signal_before`] walks on
/// from its start when it does not.
const LOOK_BACK_FIRST_US: i64 = 2 * DAY_US;

/// Each further window of a look-back's walk is this many times the one before (16, 128,
/// 1,024 days)…
const LOOK_BACK_GROWTH: i64 = 8;

/// …and the one after the longest reaches the look-back's floor: a walk runs at most four
/// statements, and a production bucket's 400 day files are read only as far back as the row.
const LOOK_BACK_LONGEST_US: i64 = 1024 * DAY_US;

fn us(t: Ts) -> i64 {
    t.timestamp_micros()
}

fn ts(us: i64) -> Ts {
    DateTime::from_timestamp_micros(us).unwrap_or_default()
}

/// `D(<pred>, from, to)` of the [`SignalSource`] docs: deduped, bucket-pruned rows of the
/// subject (bound as the first parameter) in `[from, to)`, read from `relation` (the signals at
/// the request's snapshot, or their files).
fn deduped(relation: &str, subject: &str, pred: &str, from_us: i64, to_us: i64) -> String {
    signals_deduped_from(
        relation,
        &format!(
            "{} AND {pred} AND \"timestamp\" >= {} AND \"timestamp\" < {}",
            subject_predicate(subject),
            ts_lit(from_us),
            ts_lit(to_us)
        ),
    )
}

/// The DuckDB [`SignalSource`]: every method is one statement on one of the engine's pooled
/// connections, except the ignition transitions of a detection whose read was done ahead.
#[derive(Debug, Clone, Copy)]
pub struct LakeSource<'a> {
    engine: &'a Engine,
    ignition: Option<&'a IgnitionAhead>,
}

impl<'a> LakeSource<'a> {
    /// A source reading through `engine`.
    pub fn new(engine: &'a Engine) -> Self {
        LakeSource {
            engine,
            ignition: None,
        }
    }
}

/// The ignition transitions of one detection (`subject`, `[from, to)`), computed from rows read
/// together with the summaries' ([`Engine::ignition_read_ahead`]).
#[derive(Debug)]
struct IgnitionAhead {
    subject: String,
    from: Ts,
    to: Ts,
    changes: Vec<StateChange>,
}

/// Signal rows read before detection, over `window` (µs), for `signal_names` (a row's first
/// column is its index there), to serve the summaries when their window lies inside it.
struct SummaryAhead {
    window: (i64, i64),
    signal_names: Vec<String>,
    signals: Vec<RecordBatch>,
}

impl SummaryAhead {
    /// Whether these rows are every row of `names` over `window`.
    fn serves(&self, window: (i64, i64), names: &BTreeSet<&str>) -> bool {
        self.window.0 <= window.0
            && window.1 <= self.window.1
            && names
                .iter()
                .all(|n| self.signal_names.iter().any(|have| have == n))
    }
}

/// The ignition transitions over `[from, to)` from the readings `rows` (µs, value,
/// cloud_event_id): those at or after `lookback_us` (the look-back window's) R1-deduplicated,
/// the one before it (read over [`first_window`]) as `prior`, else the one `older` finds
/// further back, then the reference definition.
fn ignition_changes<'r>(
    rows: impl Iterator<Item = (i64, f64, &'r str)>,
    lookback_us: i64,
    from: Ts,
    to: Ts,
    older: impl FnOnce() -> Result<Option<f64>>,
) -> Result<Vec<StateChange>> {
    let (mut recent, before): (Vec<_>, Vec<_>) = rows.partition(|r| r.0 >= lookback_us);
    let prior = match before.first() {
        Some(r) => Some(r.1),
        None => older()?,
    };
    recent.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| read_tiebreak(a.2, b.2)));
    recent.dedup_by_key(|r| r.0);
    let readings: Vec<LevelSample> = recent
        .iter()
        .map(|(t, v, _)| LevelSample::new(ts(*t), *v))
        .collect();
    Ok(dq_segments::reference::ignition_state_changes(
        prior, &readings, from, to,
    ))
}

/// Where the look-back of a detection from `from` starts (µs): it reads the ignition readings
/// from there on, and the latest one before (`prior`).
fn ignition_lookback_us(from: Ts) -> i64 {
    us(from) - IGNITION_LOOKBACK_DAYS * 86_400 * 1_000_000
}

/// The predicate of an ignition reading: a non-NULL value of the ignition signal.
fn ignition_reading() -> String {
    format!(
        "name = {} AND value_number IS NOT NULL",
        quote(IGNITION_SIGNAL)
    )
}

/// A look-back's first window before `before_us` (`[from, before_us)`): where the statement
/// that needs the newest row before that time looks for it — detection's `prior` before its
/// look-back, a gap-fill's fix before its earliest probe.
fn first_window(before_us: i64) -> (i64, i64) {
    (before_us.saturating_sub(LOOK_BACK_FIRST_US), before_us)
}

/// The subject's (bound parameter) newest row of `predicate` in `relation` over `[lo, hi)`
/// (`lo` = `i64::MIN`: no lower bound), as `columns` — one row at most, ties to the read
/// tie-break (the row R1 deduplication keeps). A query without parentheses.
fn newest_row_sql(
    relation: &str,
    subject: &str,
    predicate: &str,
    (lo, hi): (i64, i64),
    columns: &str,
) -> String {
    let lower = if lo == i64::MIN {
        String::new()
    } else {
        format!(" AND \"timestamp\" >= {}", ts_lit(lo))
    };
    format!(
        "SELECT {columns} FROM {relation} WHERE {} AND {predicate}{lower} \
         AND \"timestamp\" < {} ORDER BY \"timestamp\" DESC, {READ_TIEBREAK} LIMIT 1",
        subject_predicate(subject),
        ts_lit(hi)
    )
}

/// A fix (µs, latitude, longitude, hdop, heading) as the answer to probe `i`, unless it lies
/// more than `lookback` µs before that probe (the statement's floor is the earliest probe's).
fn place(
    out: &mut [Option<Location>],
    probes_us: &[i64],
    lookback: i64,
    i: usize,
    (fix_ts, latitude, longitude, hdop, heading): (i64, f64, f64, Option<f64>, Option<f64>),
) {
    let Some((probe, slot)) = probes_us.get(i).zip(out.get_mut(i)) else {
        return;
    };
    if fix_ts >= probe.saturating_sub(lookback) {
        *slot = Some(Location {
            latitude,
            longitude,
            hdop: hdop.unwrap_or(0.0),
            heading: heading.unwrap_or(0.0),
        });
    }
}

impl SignalSource for LakeSource<'_> {
    type Error = Error;

    fn windowed_signal_counts(
        &self,
        subject: &str,
        from: Ts,
        to: Ts,
        spec: WindowSpec,
    ) -> Result<Vec<ActiveWindow>> {
        let win = spec.window_seconds.max(1) * 1_000_000;
        let window = [(us(from), us(to))];
        let sql = |relation: &str| {
            format!(
                "SELECT window_start, count(*) AS signal_count, count(DISTINCT name) AS distinct_count \
                 FROM (SELECT (epoch_us(\"timestamp\") // {win}) * {win} AS window_start, name FROM ({d})) \
                 GROUP BY window_start \
                 HAVING count(*) >= {min_count} AND count(DISTINCT name) >= {min_distinct} \
                 ORDER BY window_start",
                d = deduped(relation, subject, "true", us(from), us(to)),
                min_count = spec.min_signal_count,
                min_distinct = spec.min_distinct_signals,
            )
        };
        self.engine.rows_of(
            "windowed signal counts",
            FileTable::Signals,
            subject,
            window,
            |[relation]| sql(relation),
            params![subject],
            |r| {
                let start: i64 = r.get(0)?;
                Ok(ActiveWindow {
                    start: ts(start),
                    end: ts(start + win),
                    signal_count: r.get::<_, i64>(1)?.try_into().unwrap_or(0),
                    distinct_signal_count: r.get::<_, i64>(2)?.try_into().unwrap_or(0),
                })
            },
        )
    }

    fn level_samples(
        &self,
        subject: &str,
        name: &str,
        from: Ts,
        to: Ts,
    ) -> Result<Vec<LevelSample>> {
        let window = [(us(from), us(to))];
        let sql = |relation: &str| {
            format!(
                "SELECT epoch_us(\"timestamp\"), value_number FROM ({}) \
                 WHERE value_number IS NOT NULL ORDER BY \"timestamp\"",
                deduped(relation, subject, "name = ?", us(from), us(to))
            )
        };
        self.engine.rows_of(
            "level samples",
            FileTable::Signals,
            subject,
            window,
            |[relation]| sql(relation),
            params![subject, name],
            |r| Ok(LevelSample::new(ts(r.get(0)?), r.get(1)?)),
        )
    }

    /// The transitions read ahead with the summaries' rows when this is their detection;
    /// else one read of the ignition readings — the look-back window's, and the latest one
    /// before it from any time (`prior`) — then [`ignition_changes`]: the transitions, and the
    /// synthetic ON when there are none and the last reading is ON.
    fn ignition_state_changes(&self, subject: &str, from: Ts, to: Ts) -> Result<Vec<StateChange>> {
        if let Some(a) = self
            .ignition
            .filter(|a| a.subject == subject && a.from == from && a.to == to)
        {
            return Ok(a.changes.clone());
        }
        let lookback = ignition_lookback_us(from);
        let columns = format!("epoch_us(\"timestamp\"), value_number, {READ_TIEBREAK}");
        // `prior` reads the days before the look-back: its own relation.
        let before = first_window(lookback);
        let windows = [(lookback, us(to)), before];
        let sql = |[recent, older]: &[String; 2]| {
            format!(
                "SELECT {columns} FROM {recent} WHERE {} AND {} AND \"timestamp\" >= {} \
                 AND \"timestamp\" < {} UNION ALL ({})",
                subject_predicate(subject),
                ignition_reading(),
                ts_lit(lookback),
                ts_lit(us(to)),
                newest_row_sql(older, subject, &ignition_reading(), before, &columns),
            )
        };
        let rows: Vec<(i64, f64, String)> = self.engine.rows_of(
            "ignition readings",
            FileTable::Signals,
            subject,
            windows,
            sql,
            params![subject, subject],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        ignition_changes(
            rows.iter().map(|(t, v, id)| (*t, *v, id.as_str())),
            lookback,
            from,
            to,
            || self.engine.older_prior(subject, lookback),
        )
    }

    fn idle_runs(
        &self,
        subject: &str,
        name: &str,
        from: Ts,
        to: Ts,
        max_idle_rpm: f64,
        max_gap_seconds: i64,
    ) -> Result<Vec<TimeRange>> {
        let rpm = if max_idle_rpm.is_finite() {
            max_idle_rpm
        } else {
            0.0
        };
        let gap_us = max_gap_seconds.saturating_mul(1_000_000);
        let window = [(us(from), us(to))];
        let sql = |relation: &str| {
            format!(
            "WITH s AS (SELECT \"timestamp\", value_number > 0 AND value_number <= {rpm:?} AS idle \
                        FROM ({d}) WHERE value_number IS NOT NULL), \
             l AS (SELECT \"timestamp\", idle, lag(idle) OVER w AS prev_idle, \
                          lag(\"timestamp\") OVER w AS prev_ts \
                   FROM s WINDOW w AS (ORDER BY \"timestamp\")), \
             i AS (SELECT \"timestamp\", sum(CASE WHEN prev_idle IS DISTINCT FROM TRUE \
                            OR epoch_us(\"timestamp\") - epoch_us(prev_ts) > {gap_us} \
                          THEN 1 ELSE 0 END) OVER (ORDER BY \"timestamp\") AS island \
                   FROM l WHERE idle) \
             SELECT epoch_us(min(\"timestamp\")), epoch_us(max(\"timestamp\")) FROM i \
             GROUP BY island ORDER BY 1",
            d = deduped(relation, subject, "name = ?", us(from), us(to)),
            )
        };
        self.engine.rows_of(
            "idle runs",
            FileTable::Signals,
            subject,
            window,
            |[relation]| sql(relation),
            params![subject, name],
            |r| Ok(TimeRange::new(ts(r.get(0)?), ts(r.get(1)?))),
        )
    }
}

// ------------------------------------------------------------------------------------------
// Ranges reads
// ------------------------------------------------------------------------------------------

/// One range's answers of [`Engine::ranges_aggregate`]; an index missing from a map had no
/// rows in the range.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RangeAggregates {
    /// Float answers by request index.
    pub floats: BTreeMap<usize, f64>,
    /// Location answers by request index ((0,0) included: callers drop it).
    pub locations: BTreeMap<usize, Location>,
}

/// The window `[from, to)` covering every non-empty range of `sets`; `None` when none holds
/// any time.
fn covering(sets: &[&[(i64, i64)]]) -> Option<(i64, i64)> {
    let held = || sets.iter().flat_map(|s| s.iter()).filter(|(a, b)| a < b);
    Some((held().map(|r| r.0).min()?, held().map(|r| r.1).max()?))
}

/// The subject's rows that the summaries of one request read, read once for all of its range
/// sets (a `dailyActivity` summarises its segments and its days from the same rows): the
/// signal rows of the requested names and the event rows over one window, not deduplicated,
/// as DuckDB returned them. Module `fold` aggregates and counts them.
#[derive(Default)]
struct SummaryRows {
    /// The signal names read; a signal row's first column is its index here.
    signal_names: Vec<String>,
    signals: Vec<RecordBatch>,
    events: Vec<RecordBatch>,
}

impl SummaryRows {
    fn malformed(message: String) -> Error {
        Error::Database {
            context: "summary rows".into(),
            message,
        }
    }

    /// Every float and location request for every `[from_µs, to_µs)` range, each row counted
    /// for the first range holding it; one entry per range, in order.
    fn aggregate(
        &self,
        ranges: &[(i64, i64)],
        floats: &[(String, FloatAgg)],
        locations: &[(String, LocationAgg)],
    ) -> Result<Vec<RangeAggregates>> {
        let mut out = vec![RangeAggregates::default(); ranges.len()];
        if self.signals.is_empty() {
            // Nothing was read: no range holds time, or no rows came back.
            return Ok(out);
        }
        let index = |name: &str| self.signal_names.iter().position(|n| n == name);
        let float_requests: Vec<(usize, FloatAgg)> = floats
            .iter()
            .map(|(n, a)| index(n).map(|i| (i, *a)))
            .collect::<Option<_>>()
            .ok_or_else(|| Self::malformed("a float request's signal was not read".into()))?;
        let location_requests: Vec<(usize, LocationAgg)> = locations
            .iter()
            .map(|(n, a)| index(n).map(|i| (i, *a)))
            .collect::<Option<_>>()
            .ok_or_else(|| Self::malformed("a location request's signal was not read".into()))?;
        if float_requests.is_empty() && location_requests.is_empty() {
            return Ok(out);
        }
        let rows = signal_rows(&self.signals).map_err(Self::malformed)?;
        let answers = crate::fold::aggregate(
            &rows,
            ranges,
            self.signal_names.len(),
            &float_requests,
            &location_requests,
        );
        for (slot, (floats, locations)) in out.iter_mut().zip(answers) {
            slot.floats.extend(floats);
            slot.locations.extend(locations);
        }
        Ok(out)
    }

    /// Deduplicated events per range and name, each in the first range holding it.
    fn event_counts(&self, ranges: &[(i64, i64)]) -> Result<Vec<BTreeMap<String, i64>>> {
        let keys = event_keys(&self.events).map_err(Self::malformed)?;
        Ok(count_events(keys, ranges)
            .into_iter()
            .map(|m| m.into_iter().map(|(n, c)| (n.to_string(), c)).collect())
            .collect())
    }
}

/// A location fix is real unless it is exactly (0,0).
fn real_fix(l: &Location) -> bool {
    l.latitude != 0.0 || l.longitude != 0.0
}

impl Engine {
    /// The rows the summaries of a request read over `window` (module docs): the signal rows
    /// of `signal_names` (none read when empty) and, with `event_names`, the event rows
    /// (restricted to those names when non-empty). Two statements at most.
    /// Signal rows read `ahead` serve when they hold every row of `signal_names` over `window`.
    fn summary_rows(
        &self,
        subject: &str,
        window: Option<(i64, i64)>,
        signal_names: BTreeSet<&str>,
        event_names: Option<&[String]>,
        ahead: Option<SummaryAhead>,
    ) -> Result<SummaryRows> {
        let Some((from, to)) = window else {
            return Ok(SummaryRows::default());
        };
        if let Some(ahead) = ahead.filter(|a| a.serves((from, to), &signal_names)) {
            let mut rows =
                self.summary_rows(subject, window, BTreeSet::new(), event_names, None)?;
            rows.signal_names = ahead.signal_names;
            rows.signals = ahead.signals;
            return Ok(rows);
        }
        let in_window = format!(
            "{} AND \"timestamp\" >= {} AND \"timestamp\" < {}",
            subject_predicate(subject),
            ts_lit(from),
            ts_lit(to)
        );
        let mut rows = SummaryRows {
            signal_names: signal_names.iter().map(|n| n.to_string()).collect(),
            ..SummaryRows::default()
        };
        if !signal_names.is_empty() {
            let names: Vec<&str> = signal_names.iter().copied().collect();
            rows.signals = self.signal_rows_of(
                "summary signal rows",
                subject,
                [(from, to)],
                |[relation], ties| signal_rows_sql(relation, &in_window, &names, true, ties),
                params![subject],
            )?;
        }
        if let Some(names) = event_names {
            let only = if names.is_empty() {
                String::new()
            } else {
                let set: BTreeSet<&str> = names.iter().map(String::as_str).collect();
                format!(" AND {}", names_predicate(set))
            };
            rows.events = self.read_of(
                "summary event rows",
                FileTable::Events,
                subject,
                [(from, to)],
                |[relation]| {
                    format!(
                        "SELECT name, epoch_us(\"timestamp\"), source FROM {relation} \
                         WHERE {in_window}{only}"
                    )
                },
                |stmt| Ok(stmt.query_arrow(params![subject])?.collect()),
            )?;
        }
        Ok(rows)
    }

    /// The ranges aggregation: every float and location request for every `[from_µs, to_µs)`
    /// range from ONE read of the subject's rows of the requested names; each row counts for
    /// the first range holding it. No source or value filters; (0,0) locations are kept.
    /// Result: one entry per range, in order.
    ///
    /// # Errors
    /// Database failures.
    pub fn ranges_aggregate(
        &self,
        subject: &str,
        ranges: &[(i64, i64)],
        floats: &[(String, FloatAgg)],
        locations: &[(String, LocationAgg)],
    ) -> Result<Vec<RangeAggregates>> {
        let names: BTreeSet<&str> = floats
            .iter()
            .map(|(n, _)| n.as_str())
            .chain(locations.iter().map(|(n, _)| n.as_str()))
            .collect();
        self.summary_rows(subject, covering(&[ranges]), names, None, None)?
            .aggregate(ranges, floats, locations)
    }

    /// Event counts per range: ONE read; deduplicated events, each in the first range holding
    /// it, restricted to `names` when non-empty. One map per range.
    ///
    /// # Errors
    /// Database failures.
    pub fn ranges_event_counts(
        &self,
        subject: &str,
        ranges: &[(i64, i64)],
        names: &[String],
    ) -> Result<Vec<BTreeMap<String, i64>>> {
        self.summary_rows(
            subject,
            covering(&[ranges]),
            BTreeSet::new(),
            Some(names),
            None,
        )?
        .event_counts(ranges)
    }

    /// The newest ignition reading's value before the first window of the look-back from
    /// `lookback_us` ([`first_window`]): `prior` when that window held none.
    fn older_prior(&self, subject: &str, lookback_us: i64) -> Result<Option<f64>> {
        self.newest_signal_before(
            "older ignition reading",
            subject,
            &ignition_reading(),
            "value_number",
            (i64::MIN, first_window(lookback_us).0),
            |r| r.get(0),
        )
    }

    /// The subject's newest signal row of `predicate` in `window` (`[floor_us, before_us)`),
    /// as `columns` mapped by `row`, ties to the read tie-break; `None` when there is none.
    /// The look-back's first window was read with the statement that needed the row; this
    /// walks on from there, one statement per window, each [`LOOK_BACK_GROWTH`] times the one
    /// before and the last reaching the floor, and stops at the first row, or where the
    /// request's file listing shows no older file of the bucket: a 400-day history costs the
    /// day files back to the row, and a new vehicle no statement at all.
    fn newest_signal_before<T>(
        &self,
        context: &str,
        subject: &str,
        predicate: &str,
        columns: &str,
        (floor_us, before_us): (i64, i64),
        row: impl Fn(&dq_lake::duckdb::Row<'_>) -> dq_lake::duckdb::Result<T>,
    ) -> Result<Option<T>> {
        let (mut hi, mut span) = (before_us, LOOK_BACK_FIRST_US);
        while hi > floor_us && self.may_hold(FileTable::Signals, subject, (floor_us, hi)) {
            span = span.saturating_mul(LOOK_BACK_GROWTH);
            let lo = if span > LOOK_BACK_LONGEST_US {
                floor_us
            } else {
                hi.saturating_sub(span).max(floor_us)
            };
            let found = self.rows_of(
                context,
                FileTable::Signals,
                subject,
                [(lo, hi)],
                |[relation]| newest_row_sql(relation, subject, predicate, (lo, hi), columns),
                params![subject],
                &row,
            )?;
            if let Some(found) = found.into_iter().next() {
                return Ok(Some(found));
            }
            hi = lo;
        }
        Ok(None)
    }

    /// Batched LocationsAt: for every probe time, the nearest real
    /// (non-(0,0)) `currentLocationCoordinates` fix at or before it (deduped, ties → lowest
    /// cloud_event_id), at most [`LOCATION_GAP_FILL_LOOKBACK`] back; ONE `ASOF LEFT JOIN`
    /// statement for all probes over their times and the look-back's first window before the
    /// earliest. The probes it finds no fix for share their answer: the newest fix before that
    /// window, found by `Engine::newest_signal_before`'s walk. `None` where no fix
    /// qualifies.
    ///
    /// # Errors
    /// Database failures.
    pub fn locations_at(&self, subject: &str, probes_us: &[i64]) -> Result<Vec<Option<Location>>> {
        let mut out = vec![None; probes_us.len()];
        if probes_us.is_empty() {
            return Ok(out);
        }
        let lookback = LOCATION_GAP_FILL_LOOKBACK
            .num_microseconds()
            .unwrap_or(i64::MAX);
        let min = probes_us.iter().copied().min().unwrap_or(0);
        let max = probes_us.iter().copied().max().unwrap_or(0);
        let values: Vec<String> = probes_us
            .iter()
            .enumerate()
            .map(|(i, t)| format!("({i}, {})", ts_lit(*t)))
            .collect();
        let floor = min.saturating_sub(lookback);
        let first = first_window(min).0.max(floor);
        let fix = format!(
            "name = {} AND (loc_lat != 0 OR loc_lon != 0)",
            quote(LOCATION_SIGNAL)
        );
        let fixes = |relation: &str| {
            signals_deduped_from(
                relation,
                &format!(
                    "{} AND {fix} AND \"timestamp\" >= {} AND \"timestamp\" <= {}",
                    subject_predicate(subject),
                    ts_lit(first),
                    ts_lit(max)
                ),
            )
        };
        let sql = |relation: &str| {
            format!(
                "WITH probe(idx, ts) AS (VALUES {values}), \
                 fixes AS (SELECT \"timestamp\", loc_lat, loc_lon, loc_hdop, loc_heading FROM ({fixes})) \
                 SELECT p.idx, epoch_us(f.\"timestamp\"), f.loc_lat, f.loc_lon, f.loc_hdop, f.loc_heading \
                 FROM probe p ASOF LEFT JOIN fixes f ON p.ts >= f.\"timestamp\" ORDER BY p.idx",
                values = values.join(", "),
                fixes = fixes(relation)
            )
        };
        let window = [(first, max.saturating_add(1))];
        type Row = (
            i64,
            Option<i64>,
            Option<f64>,
            Option<f64>,
            Option<f64>,
            Option<f64>,
        );
        let rows: Vec<Row> = self.rows_of(
            "locations at",
            FileTable::Signals,
            subject,
            window,
            |[relation]| sql(relation),
            params![subject],
            |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                ))
            },
        )?;
        let mut unfound = Vec::new();
        for (idx, fix_ts, lat, lon, hdop, heading) in rows {
            let Ok(i) = usize::try_from(idx) else {
                continue;
            };
            match (fix_ts, lat, lon) {
                (Some(fix_ts), Some(lat), Some(lon)) => {
                    let fix = (fix_ts, lat, lon, hdop, heading);
                    place(&mut out, probes_us, lookback, i, fix);
                }
                // No fix in the statement's window: the walk's answer.
                (None, ..) => unfound.push(i),
                // The newest fix has no coordinates: no answer, as from any window.
                _ => {}
            }
        }
        if unfound.is_empty() {
            return Ok(out);
        }
        let older = self.newest_signal_before(
            "older location fix",
            subject,
            &fix,
            "epoch_us(\"timestamp\"), loc_lat, loc_lon, loc_hdop, loc_heading",
            (floor, first),
            |r| {
                let fix: (i64, Option<f64>, Option<f64>, Option<f64>, Option<f64>) =
                    (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?);
                Ok(fix)
            },
        )?;
        if let Some((fix_ts, Some(lat), Some(lon), hdop, heading)) = older {
            for i in unfound {
                place(
                    &mut out,
                    probes_us,
                    lookback,
                    i,
                    (fix_ts, lat, lon, hdop, heading),
                );
            }
        }
        Ok(out)
    }
}

// ------------------------------------------------------------------------------------------
// Request pipelines
// ------------------------------------------------------------------------------------------

/// A `segments` query: the detection request plus the summary requests.
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentsQuery {
    /// Detection arguments (config already default-injected, limit after SDL defaulting).
    pub request: SegmentsRequest,
    /// `signalRequests` as sent (merged with the mechanism's defaults here).
    pub signal_requests: Vec<SignalRequest>,
    /// `eventRequests` names, in request order.
    pub event_names: Vec<String>,
}

/// A `dailyActivity` query.
#[derive(Debug, Clone, PartialEq)]
pub struct DailyActivityQuery {
    /// Days, zone and detection arguments.
    pub request: DailyActivityRequest,
    /// `signalRequests` as sent.
    pub signal_requests: Vec<SignalRequest>,
    /// `eventRequests` names, in request order.
    pub event_names: Vec<String>,
}

/// One `SignalAggregationValue`.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalValue {
    /// Signal name.
    pub name: String,
    /// Aggregation.
    pub agg: FloatAggregation,
    /// Aggregated value.
    pub value: f64,
}

/// `signals` and `eventCounts` of a segment or day.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Summary {
    /// One entry per request that produced a value, sorted by name then agg string.
    pub signals: Vec<SignalValue>,
    /// Requested names in request order (0 when absent), or every present name (sorted)
    /// when none were requested.
    pub event_counts: Vec<(String, i64)>,
}

/// One summarised segment.
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentSummary {
    /// Bounds, duration and flags.
    pub segment: Segment,
    /// Start location: the segment's first real fix, else the nearest prior fix, else (0,0).
    pub start_location: Location,
    /// End location (`None` iff ongoing), resolved like the start at the end time.
    pub end_location: Option<Location>,
    /// Signals and event counts.
    pub summary: Summary,
}

/// One `DailyActivity` record.
#[derive(Debug, Clone, PartialEq)]
pub struct DaySummary {
    /// The local day as a UTC window (`start.timestamp` / `end.timestamp`).
    pub day: DayWindow,
    /// Segments overlapping the day.
    pub segment_count: usize,
    /// Overlap seconds.
    pub duration_seconds: i64,
    /// Day start location.
    pub start_location: Location,
    /// Day end location.
    pub end_location: Location,
    /// Day signals and event counts.
    pub summary: Summary,
}

/// Per-range summaries plus each range's FIRST/LAST real fix.
struct RangeSummaries {
    summaries: Vec<Summary>,
    first_fix: Vec<Option<Location>>,
    last_fix: Vec<Option<Location>>,
}

impl RangeSummaries {
    /// Range `i`'s FIRST real fix, if it has one.
    fn first_fix(&self, i: usize) -> Option<Location> {
        self.first_fix.get(i).copied().flatten()
    }

    /// Range `i`'s LAST real fix, if it has one.
    fn last_fix(&self, i: usize) -> Option<Location> {
        self.last_fix.get(i).copied().flatten()
    }
}

/// Slot `i`'s location after the gap-fill; the (0,0) sentinel where none was found.
fn located(slots: &[(i64, Option<Location>)], i: usize) -> Location {
    slots.get(i).and_then(|(_, loc)| *loc).unwrap_or_default()
}

fn map_segments_error(e: dq_segments::Error) -> Error {
    match e {
        dq_segments::Error::Invalid(v) => Error::BadRequest(v.to_string()),
        dq_segments::Error::Source { read, source } => match source.downcast::<Error>() {
            Ok(e) => *e,
            Err(other) => Error::Database {
                context: read.to_string(),
                message: other.to_string(),
            },
        },
    }
}

/// The signal names the summaries of `requests` read: theirs and the location fixes'.
fn summary_signal_names<'a>(requests: &[&'a [SignalRequest]]) -> BTreeSet<&'a str> {
    requests
        .iter()
        .flat_map(|r| r.iter().map(|r| r.name.as_str()))
        .chain([LOCATION_SIGNAL])
        .collect()
}

fn ranges_us(ranges: &[TimeRange]) -> Vec<(i64, i64)> {
    ranges.iter().map(|r| (us(r.start), us(r.end))).collect()
}

/// The µs ranges a segment list's summaries read: its signal summaries' and its event counts'
/// (both empty for no segments).
struct SegmentRanges {
    summary: Vec<(i64, i64)>,
    counts: Vec<(i64, i64)>,
}

impl SegmentRanges {
    fn of(list: &dq_segments::SegmentList) -> Self {
        SegmentRanges {
            summary: ranges_us(&list.summary_ranges()),
            counts: ranges_us(&list.event_count_ranges()),
        }
    }
}

impl Engine {
    /// Signals (merged requests) and event counts for every range, plus FIRST/LAST fixes,
    /// from the request's `rows` whatever the number of ranges.
    fn summarize_ranges(
        rows: &SummaryRows,
        summary_ranges: &[(i64, i64)],
        count_ranges: &[(i64, i64)],
        requests: &[SignalRequest],
        event_names: &[String],
    ) -> Result<RangeSummaries> {
        let floats: Vec<(String, FloatAgg)> =
            requests.iter().map(|r| (r.name.clone(), r.agg)).collect();
        let locations = [
            (LOCATION_SIGNAL.to_string(), LocationAgg::First),
            (LOCATION_SIGNAL.to_string(), LocationAgg::Last),
        ];
        let aggs = rows.aggregate(summary_ranges, &floats, &locations)?;
        let counts = rows.event_counts(count_ranges)?;
        let mut out = RangeSummaries {
            summaries: Vec::with_capacity(aggs.len()),
            first_fix: Vec::with_capacity(aggs.len()),
            last_fix: Vec::with_capacity(aggs.len()),
        };
        for (i, agg) in aggs.into_iter().enumerate() {
            let mut signals: Vec<SignalValue> = agg
                .floats
                .iter()
                .filter_map(|(idx, v)| {
                    requests.get(*idx).map(|r| SignalValue {
                        name: r.name.clone(),
                        agg: r.agg,
                        value: *v,
                    })
                })
                .collect();
            signals.sort_by(|a, b| {
                (a.name.as_str(), a.agg.as_str()).cmp(&(b.name.as_str(), b.agg.as_str()))
            });
            let present = counts.get(i).cloned().unwrap_or_default();
            let event_counts = if event_names.is_empty() {
                present.into_iter().collect()
            } else {
                event_names
                    .iter()
                    .map(|n| (n.clone(), present.get(n).copied().unwrap_or(0)))
                    .collect()
            };
            out.summaries.push(Summary {
                signals,
                event_counts,
            });
            out.first_fix
                .push(agg.locations.get(&0).copied().filter(real_fix));
            out.last_fix
                .push(agg.locations.get(&1).copied().filter(real_fix));
        }
        Ok(out)
    }

    /// Fills every `None` of `slots` (probe time, location) with one batched LocationsAt;
    /// still nothing, or a failed read, gives the (0,0) sentinel.
    fn gap_fill(&self, subject: &str, slots: &mut [(i64, Option<Location>)]) {
        let probes: Vec<i64> = slots
            .iter()
            .filter(|(_, loc)| loc.is_none())
            .map(|(probe, _)| *probe)
            .collect();
        if probes.is_empty() {
            return;
        }
        let found = self.locations_at(subject, &probes).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "segment gap-fill location lookup failed");
            vec![None; probes.len()]
        });
        let missing = slots.iter_mut().filter(|(_, loc)| loc.is_none());
        for ((_, slot), loc) in missing.zip(found) {
            *slot = Some(loc.unwrap_or_default());
        }
    }

    /// The segments of `request` (detection through [`LakeSource`]), and for
    /// IGNITION_DETECTION the rows of `summary_names` over the request's window, read in the
    /// same statement as the ignition readings: one scan of the subject's files serves both.
    fn detect(
        &self,
        request: &SegmentsRequest,
        now: Ts,
        summary_names: &BTreeSet<&str>,
    ) -> Result<(dq_segments::SegmentList, Option<SummaryAhead>)> {
        if request.mechanism != Mechanism::IgnitionDetection {
            let list = dq_segments::segments(&LakeSource::new(self), request, now)
                .map_err(map_segments_error)?;
            return Ok((list, None));
        }
        let to = dq_segments::validate_segments_request(request, now)
            .map_err(|v| Error::BadRequest(v.to_string()))?;
        let (ignition, ahead) =
            self.ignition_read_ahead(&request.subject, request.from, to, summary_names)?;
        let source = LakeSource {
            engine: self,
            ignition: Some(&ignition),
        };
        let list = dq_segments::segments(&source, request, now).map_err(map_segments_error)?;
        Ok((list, Some(ahead)))
    }

    /// One statement for a detection's ignition readings (as
    /// [`LakeSource`]'s `ignition_state_changes` reads them) and the rows of `names` over
    /// `[from, to)` (as [`Engine::summary_rows`] reads them): the rows of both, told apart
    /// here by name, time and value.
    fn ignition_read_ahead(
        &self,
        subject: &str,
        from: Ts,
        to: Ts,
        names: &BTreeSet<&str>,
    ) -> Result<(IgnitionAhead, SummaryAhead)> {
        let lookback = ignition_lookback_us(from);
        let mut list: Vec<&str> = names.iter().copied().collect();
        if !names.contains(IGNITION_SIGNAL) {
            list.push(IGNITION_SIGNAL);
        }
        let ignition = list
            .iter()
            .position(|n| *n == IGNITION_SIGNAL)
            .unwrap_or_default();
        let recent = format!(
            "{} AND \"timestamp\" >= {} AND \"timestamp\" < {} \
             AND (\"timestamp\" >= {} OR ({}))",
            subject_predicate(subject),
            ts_lit(lookback),
            ts_lit(us(to)),
            ts_lit(us(from)),
            ignition_reading()
        );
        // `prior` in the columns of `signal_rows_sql`, labelled with the ignition's index.
        let prior_columns = format!(
            "{ignition}::INTEGER, epoch_us(\"timestamp\"), {READ_TIEBREAK}, value_number, \
             NULL::DOUBLE, NULL::DOUBLE, NULL::DOUBLE, NULL::DOUBLE"
        );
        let before = first_window(lookback);
        let sql = |[window, older]: &[String; 2], ties: Option<&str>| {
            format!(
                "{} UNION ALL ({})",
                signal_rows_sql(window, &recent, &list, true, ties),
                newest_row_sql(older, subject, &ignition_reading(), before, &prior_columns),
            )
        };
        let signals: Vec<RecordBatch> = self.signal_rows_of(
            "ignition and summary signal rows",
            subject,
            [(lookback, us(to)), before],
            sql,
            params![subject, subject],
        )?;
        let rows = signal_rows(&signals).map_err(SummaryRows::malformed)?;
        let readings = rows.iter().filter_map(|r| {
            // The summaries' rows may hold NULL ignition values: no readings.
            let value = r.value.filter(|_| r.name == ignition)?;
            Some((r.ts, value, r.cloud_event_id))
        });
        let changes = IgnitionAhead {
            subject: subject.to_owned(),
            from,
            to,
            changes: ignition_changes(readings, lookback, from, to, || {
                self.older_prior(subject, lookback)
            })?,
        };
        Ok((
            changes,
            SummaryAhead {
                window: (us(from), us(to)),
                signal_names: list.into_iter().map(str::to_owned).collect(),
                signals,
            },
        ))
    }

    /// Summarises the detected segments of `list` (whose ranges are `ranges`) from the
    /// request's `rows`.
    fn summarize_segments(
        &self,
        subject: &str,
        list: &dq_segments::SegmentList,
        ranges: &SegmentRanges,
        requests: &[SignalRequest],
        event_names: &[String],
        rows: &SummaryRows,
    ) -> Result<Vec<SegmentSummary>> {
        if list.segments.is_empty() {
            return Ok(Vec::new());
        }
        let sums =
            Self::summarize_ranges(rows, &ranges.summary, &ranges.counts, requests, event_names)?;
        // Slots 2i = start, 2i+1 = end (a located end for an ongoing segment is never used).
        let mut slots: Vec<(i64, Option<Location>)> = Vec::with_capacity(2 * list.segments.len());
        for (i, s) in list.segments.iter().enumerate() {
            slots.push((us(s.start), sums.first_fix(i)));
            match s.end {
                Some(end) => slots.push((us(end), sums.last_fix(i))),
                None => slots.push((us(list.to), Some(Location::default()))),
            }
        }
        self.gap_fill(subject, &mut slots);
        let items: Vec<SegmentSummary> = list
            .segments
            .iter()
            .zip(sums.summaries)
            .enumerate()
            .map(|(i, (s, summary))| SegmentSummary {
                segment: *s,
                start_location: located(&slots, 2 * i),
                end_location: s.end.map(|_| located(&slots, 2 * i + 1)),
                summary,
            })
            .collect();
        Ok(list.finish(items, |item| {
            item.summary
                .signals
                .iter()
                .find(|v| {
                    v.name == dq_segments::signals::SPEED_SIGNAL && v.agg == FloatAggregation::Max
                })
                .map(|v| v.value)
        }))
    }

    /// The `segments` query: validation (raw BAD_REQUEST texts), detection
    /// through [`LakeSource`], strict `after`, `limit`, summaries, batched gap-fill.
    ///
    /// # Errors
    /// [`Error::BadRequest`] for invalid requests, database failures.
    pub fn segments(&self, q: &SegmentsQuery, now: Ts) -> Result<Vec<SegmentSummary>> {
        let requests = merge_signal_requests(q.request.mechanism, &q.signal_requests);
        let names = summary_signal_names(&[&requests]);
        let (list, ahead) = self.detect(&q.request, now, &names)?;
        if list.segments.is_empty() {
            return Ok(Vec::new());
        }
        let ranges = SegmentRanges::of(&list);
        let rows = self.summary_rows(
            &q.request.subject,
            covering(&[&ranges.summary, &ranges.counts]),
            names,
            Some(&q.event_names),
            ahead,
        )?;
        self.summarize_segments(
            &q.request.subject,
            &list,
            &ranges,
            &requests,
            &q.event_names,
            &rows,
        )
    }

    /// The `dailyActivity` query: validated days in the IANA zone, the
    /// widened segments request, per-day overlap, and ONE batched aggregation / event count /
    /// LocationsAt for all days.
    ///
    /// # Errors
    /// [`Error::BadRequest`] for invalid requests, database failures.
    pub fn daily_activity(&self, q: &DailyActivityQuery, now: Ts) -> Result<Vec<DaySummary>> {
        let plan = dq_segments::plan_daily_activity(&q.request, now)
            .map_err(|v| Error::BadRequest(v.to_string()))?;
        let segment_requests = merge_signal_requests(plan.segments.mechanism, &q.signal_requests);
        let requests = merge_signal_requests(q.request.mechanism, &q.signal_requests);
        let names = summary_signal_names(&[&segment_requests, &requests]);
        let (list, ahead) = self.detect(&plan.segments, now, &names)?;
        let day_ranges: Vec<(i64, i64)> =
            plan.days.iter().map(|d| (us(d.start), us(d.end))).collect();
        let ranges = SegmentRanges::of(&list);
        // One read of the rows serves the segments' summaries and the days'.
        let rows = self.summary_rows(
            &plan.segments.subject,
            covering(&[&ranges.summary, &ranges.counts, &day_ranges]),
            names,
            Some(&q.event_names),
            ahead,
        )?;
        let segs = self.summarize_segments(
            &plan.segments.subject,
            &list,
            &ranges,
            &segment_requests,
            &q.event_names,
            &rows,
        )?;
        if plan.days.is_empty() {
            return Ok(Vec::new());
        }
        let bare: Vec<Segment> = segs.iter().map(|s| s.segment).collect();
        let activity = dq_segments::daily_activity(&plan.days, &bare);
        let sums =
            Self::summarize_ranges(&rows, &day_ranges, &day_ranges, &requests, &q.event_names)?;
        // Slots 2i = day start, 2i+1 = day end.
        let mut slots: Vec<(i64, Option<Location>)> = Vec::with_capacity(2 * plan.days.len());
        for (i, (day, a)) in plan.days.iter().zip(&activity).enumerate() {
            let start = a
                .first_segment
                .and_then(|s| segs.get(s))
                .map(|s| s.start_location)
                .or(sums.first_fix(i));
            let end = a
                .last_segment
                .and_then(|s| segs.get(s)?.end_location)
                .or(sums.last_fix(i));
            slots.push((us(day.start), start));
            slots.push((us(day.end), end));
        }
        self.gap_fill(&q.request.subject, &mut slots);
        Ok(plan
            .days
            .iter()
            .zip(activity)
            .zip(sums.summaries)
            .enumerate()
            .map(|(i, ((day, a), summary))| DaySummary {
                day: *day,
                segment_count: a.segment_count,
                duration_seconds: a.duration_seconds,
                start_location: located(&slots, 2 * i),
                end_location: located(&slots, 2 * i + 1),
                summary,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_window_covers_every_range_that_holds_time() {
        assert_eq!(covering(&[&[(5, 20), (0, 10)], &[(30, 40)]]), Some((0, 40)));
        // Empty ranges hold nothing, wherever they are.
        assert_eq!(covering(&[&[(5, 20), (50, 50)], &[]]), Some((5, 20)));
        assert_eq!(covering(&[&[(5, 5)], &[]]), None);
    }

    #[test]
    fn deduped_reads_keep_the_bucket_inside_the_dedup() {
        let sql = deduped("lake.signals", "did:x", "name = ?", 0, 60);
        let qualify = sql.find("QUALIFY").unwrap();
        assert!(sql[..qualify].contains("subject_bucket = "));
        assert!(sql[..qualify].contains("name = ?"));
    }
}
