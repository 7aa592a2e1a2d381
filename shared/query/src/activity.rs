//! `segments` and `dailyActivity` over the lake: the DuckDB
//! [`dq_segments::SignalSource`] ([`LakeSource`]), the ranges aggregation, the ranges event
//! counts, the batched LocationsAt gap-fill, and the two request pipelines that
//! put the pure detectors of crate `segments` together with those summaries.
//!
//! Statement budget per request (independent of how many segments or days there are):
//! detection (1–2 statements), one ranges aggregation, one ranges event count, at most one
//! batched LocationsAt; `dailyActivity` adds one more aggregation / event count / LocationsAt
//! triple for all of its days. Every statement reads the subject's bucket's files directly
//! where the request's snapshot allows it ([`Engine::rows_of`]), and all of them read that
//! one snapshot.

use crate::aggregate::{
    case_column, float_expr, location_at, location_expr, FloatAgg, Location, LocationAgg,
};
use crate::files::FileTable;
use crate::{subject_predicate, ts_lit, Engine, Error, Result};
use chrono::{DateTime, TimeDelta};
use dq_lake::duckdb::params;
use dq_lake::quote;
use dq_segments::signals::{
    merge_signal_requests, FloatAggregation, SignalRequest, LOCATION_SIGNAL,
};
use dq_segments::source::{IGNITION_LOOKBACK_DAYS, IGNITION_SIGNAL};
use dq_segments::{
    ActiveWindow, DailyActivityRequest, DayWindow, LevelSample, Segment, SegmentsRequest,
    SignalSource, StateChange, TimeRange, Ts, WindowSpec,
};
use dq_tables::keys::{events_deduped_from, signals_deduped_from};
use std::collections::{BTreeMap, BTreeSet};

/// How far back a gap-fill looks for a fix (`locationGapFillLookback`, ≈ 10 years).
pub const LOCATION_GAP_FILL_LOOKBACK: TimeDelta = TimeDelta::hours(10 * 365 * 24);

const FLOAT: i64 = 1;
const LOCATION: i64 = 3;

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

/// The DuckDB [`SignalSource`]: every method is one statement (ignition: plus the
/// synthetic-ON probe when no transition exists) on one of the engine's pooled connections.
#[derive(Debug, Clone, Copy)]
pub struct LakeSource<'a> {
    engine: &'a Engine,
}

impl<'a> LakeSource<'a> {
    /// A source reading through `engine`.
    pub fn new(engine: &'a Engine) -> Self {
        LakeSource { engine }
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

    fn ignition_state_changes(&self, subject: &str, from: Ts, to: Ts) -> Result<Vec<StateChange>> {
        let lookback = us(from) - IGNITION_LOOKBACK_DAYS * 86_400 * 1_000_000;
        let name = quote(IGNITION_SIGNAL);
        let r = |relation: &str| {
            format!(
                "r AS (SELECT \"timestamp\", value_number FROM ({}))",
                deduped(
                    relation,
                    subject,
                    &format!("name = {name} AND value_number IS NOT NULL"),
                    lookback,
                    us(to)
                )
            )
        };
        let from_lit = ts_lit(us(from));
        // `prior` reads everything before the look-back: its own relation.
        let windows = [(lookback, us(to)), (i64::MIN, lookback)];
        let sql = |[recent, before]: &[String; 2]| {
            format!(
                "WITH {r}, \
             prior AS (SELECT value_number FROM {before} WHERE {subj} AND name = {name} \
                       AND value_number IS NOT NULL AND \"timestamp\" < {lb} \
                       ORDER BY \"timestamp\" DESC, cloud_event_id LIMIT 1), \
             t AS (SELECT \"timestamp\", value_number AS new_state, \
                          coalesce(lag(value_number) OVER (ORDER BY \"timestamp\"), \
                                   (SELECT value_number FROM prior), 0) AS prev_state FROM r) \
             SELECT epoch_us(\"timestamp\") AS ts, new_state, prev_state FROM t \
               WHERE new_state <> prev_state AND \"timestamp\" >= {from_lit} \
             UNION ALL \
             (SELECT epoch_us(\"timestamp\") AS ts, new_state, prev_state FROM t \
               WHERE new_state <> prev_state AND \"timestamp\" < {from_lit} \
               ORDER BY \"timestamp\" DESC LIMIT 1) \
             ORDER BY ts",
                r = r(recent),
                subj = subject_predicate(subject),
                lb = ts_lit(lookback),
            )
        };
        let changes = self.engine.rows_of(
            "ignition state changes",
            FileTable::Signals,
            subject,
            windows,
            sql,
            params![subject, subject],
            |r| {
                Ok(StateChange {
                    ts: ts(r.get(0)?),
                    new_state: r.get(1)?,
                    prev_state: r.get(2)?,
                })
            },
        )?;
        if !changes.is_empty() {
            return Ok(changes);
        }
        let probe = |relation: &str| {
            format!(
                "WITH {} SELECT coalesce(arg_max(value_number, \"timestamp\") = 1, false), \
                 epoch_us(min(\"timestamp\")) FROM r",
                r(relation)
            )
        };
        let window = [(lookback, us(to))];
        // One aggregate row.
        let probed: Vec<(bool, Option<i64>)> = self.engine.rows_of(
            "ignition synthetic on",
            FileTable::Signals,
            subject,
            window,
            |[relation]| probe(relation),
            params![subject],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        Ok(match probed.first() {
            Some((true, Some(first))) => vec![StateChange::synthetic_on(ts(*first))],
            _ => Vec::new(),
        })
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

/// The time the ranges cover, cut into disjoint pieces sorted by start, each labelled with the
/// first range (lowest index) holding it: "each row counts for the first range holding it"
/// becomes one ASOF join on the pieces' starts ([`pieces_join`]). Adjacent pieces of one range
/// are merged; empty ranges hold nothing.
fn first_holding_pieces(ranges: &[(i64, i64)]) -> Vec<(usize, i64, i64)> {
    let mut cuts: Vec<i64> = ranges.iter().flat_map(|&(a, b)| [a, b]).collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut pieces: Vec<(usize, i64, i64)> = Vec::new();
    for pair in cuts.windows(2) {
        let &[lo, hi] = pair else { continue };
        let Some(index) = ranges.iter().position(|&(a, b)| a <= lo && hi <= b) else {
            continue;
        };
        match pieces.last_mut() {
            Some(last) if last.0 == index && last.2 == lo => last.2 = hi,
            _ => pieces.push((index, lo, hi)),
        }
    }
    pieces
}

/// `pieces(range_index, lo, hi) AS (VALUES …)` of [`first_holding_pieces`] (µs), and the join
/// that labels each row of `alias` with its range: `ASOF JOIN pieces p ON <ts> >= p.lo` (the
/// piece starting last at or before the row), kept when the row is before that piece's end.
/// `None` when the ranges hold no time. One small join instead of a CASE with a branch per
/// range, which DuckDB took ~3–5 ms just to plan for a month of days or segments.
fn pieces_join(ranges: &[(i64, i64)], alias: &str) -> Option<(String, String)> {
    let pieces = first_holding_pieces(ranges);
    if pieces.is_empty() {
        return None;
    }
    let values: Vec<String> = pieces
        .iter()
        .map(|(i, lo, hi)| format!("({i}, {lo}, {hi})"))
        .collect();
    let ts = format!("epoch_us({alias}.\"timestamp\")");
    Some((
        format!(
            "pieces(range_index, lo, hi) AS (VALUES {})",
            values.join(", ")
        ),
        format!("ASOF JOIN pieces p ON {ts} >= p.lo WHERE {ts} < p.hi"),
    ))
}

fn global_window(ranges: &[(i64, i64)]) -> (i64, i64) {
    let from = ranges.iter().map(|r| r.0).min().unwrap_or(0);
    let to = ranges.iter().map(|r| r.1).max().unwrap_or(0);
    (from, to)
}

/// A location fix is real unless it is exactly (0,0).
fn real_fix(l: &Location) -> bool {
    l.latitude != 0.0 || l.longitude != 0.0
}

impl Engine {
    /// The ranges aggregation: ONE statement answering every float and
    /// location request for every `[from_µs, to_µs)` range; each row counts for the first range
    /// holding it. No source or value filters; (0,0) locations are kept. Result: one entry
    /// per range, in order.
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
        let mut out = vec![RangeAggregates::default(); ranges.len()];
        if ranges.is_empty() || (floats.is_empty() && locations.is_empty()) {
            return Ok(out);
        }
        let mut values = Vec::new();
        let mut names = BTreeSet::new();
        for (i, (name, _)) in floats.iter().enumerate() {
            values.push(format!("({FLOAT}, {i}, {})", quote(name)));
            names.insert(quote(name));
        }
        for (i, (name, _)) in locations.iter().enumerate() {
            values.push(format!("({LOCATION}, {i}, {})", quote(name)));
            names.insert(quote(name));
        }
        let (gfrom, gto) = global_window(ranges);
        let names: Vec<String> = names.into_iter().collect();
        let f: Vec<_> = floats
            .iter()
            .enumerate()
            .map(|(i, (_, a))| (FLOAT, i, float_expr(*a).to_string()))
            .collect();
        let loc = |col: &str| -> Vec<(i64, usize, String)> {
            locations
                .iter()
                .enumerate()
                .map(|(i, (_, a))| (LOCATION, i, location_expr(*a, col)))
                .collect()
        };
        let Some((pieces, labelled)) = pieces_join(ranges, "s") else {
            return Ok(out);
        };
        let window = [(gfrom, gto)];
        let sql = |relation: &str| {
            format!(
                "WITH req(signal_type, signal_index, name) AS (VALUES {values}), {pieces}, \
             rows AS ( \
               SELECT r.signal_type, r.signal_index, s.\"timestamp\", s.value_number, \
                      s.loc_lat, s.loc_lon, s.loc_hdop, s.loc_heading, random() AS rnd, \
                      p.range_index \
               FROM ({dedup}) s JOIN req r ON s.name = r.name {labelled}) \
             SELECT range_index, signal_type, signal_index, {f}, {lat}, {lon}, {hdop}, {heading} \
             FROM rows WHERE signal_type = {LOCATION} OR value_number IS NOT NULL \
             GROUP BY range_index, signal_type, signal_index \
             ORDER BY range_index, signal_type, signal_index",
                values = values.join(", "),
                dedup = deduped(
                    relation,
                    subject,
                    &format!("name IN ({})", names.join(", ")),
                    gfrom,
                    gto
                ),
                f = case_column(&f, "0::DOUBLE"),
                lat = case_column(&loc("loc_lat"), "0::DOUBLE"),
                lon = case_column(&loc("loc_lon"), "0::DOUBLE"),
                hdop = case_column(&loc("loc_hdop"), "0::DOUBLE"),
                heading = case_column(&loc("loc_heading"), "0::DOUBLE"),
            )
        };
        let rows = self.rows_of(
            "ranges aggregation",
            FileTable::Signals,
            subject,
            window,
            |[relation]| sql(relation),
            params![subject],
            |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, f64>(3)?,
                    location_at(r, 4)?,
                ))
            },
        )?;
        for (range, kind, idx, v, l) in rows {
            let (Ok(range), Ok(idx)) = (usize::try_from(range), usize::try_from(idx)) else {
                continue;
            };
            let Some(slot) = out.get_mut(range) else {
                continue;
            };
            if kind == FLOAT {
                slot.floats.insert(idx, v);
            } else {
                slot.locations.insert(idx, l);
            }
        }
        Ok(out)
    }

    /// Event counts per range: ONE statement; deduped events, each in
    /// the first range holding it, restricted to `names` when non-empty. One map per range.
    ///
    /// # Errors
    /// Database failures.
    pub fn ranges_event_counts(
        &self,
        subject: &str,
        ranges: &[(i64, i64)],
        names: &[String],
    ) -> Result<Vec<BTreeMap<String, i64>>> {
        let mut out = vec![BTreeMap::new(); ranges.len()];
        if ranges.is_empty() {
            return Ok(out);
        }
        let (gfrom, gto) = global_window(ranges);
        let mut inner = format!(
            "{} AND \"timestamp\" >= {} AND \"timestamp\" < {}",
            subject_predicate(subject),
            ts_lit(gfrom),
            ts_lit(gto)
        );
        if !names.is_empty() {
            let set: BTreeSet<String> = names.iter().map(|n| quote(n)).collect();
            inner.push_str(&format!(
                " AND name IN ({})",
                set.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
        let Some((pieces, labelled)) = pieces_join(ranges, "e") else {
            return Ok(out);
        };
        let sql = |relation: &str| {
            format!(
                "WITH {pieces} SELECT p.range_index, e.name, count(*) \
                 FROM ({events}) e {labelled} \
                 GROUP BY p.range_index, e.name ORDER BY p.range_index, e.name",
                events = events_deduped_from(relation, &inner),
            )
        };
        let window = [(gfrom, gto)];
        let rows = self.rows_of(
            "ranges event counts",
            FileTable::Events,
            subject,
            window,
            |[relation]| sql(relation),
            params![subject],
            |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            },
        )?;
        for (range, name, n) in rows {
            if let Some(slot) = usize::try_from(range).ok().and_then(|r| out.get_mut(r)) {
                slot.insert(name, n);
            }
        }
        Ok(out)
    }

    /// Batched LocationsAt: for every probe time, the nearest real
    /// (non-(0,0)) `currentLocationCoordinates` fix at or before it (deduped, ties → lowest
    /// cloud_event_id), at most [`LOCATION_GAP_FILL_LOOKBACK`] back; ONE `ASOF LEFT JOIN`
    /// statement for all probes. `None` where no fix qualifies.
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
        let fixes = |relation: &str| {
            signals_deduped_from(
                relation,
                &format!(
                    "{} AND name = {} AND (loc_lat != 0 OR loc_lon != 0) \
                     AND \"timestamp\" >= {} AND \"timestamp\" <= {}",
                    subject_predicate(subject),
                    quote(LOCATION_SIGNAL),
                    ts_lit(floor),
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
        let window = [(floor, max.saturating_add(1))];
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
        for (idx, fix_ts, lat, lon, hdop, heading) in rows {
            let Some((probe, slot)) = usize::try_from(idx)
                .ok()
                .and_then(|i| probes_us.get(i).zip(out.get_mut(i)))
            else {
                continue;
            };
            let (Some(fix_ts), Some(latitude), Some(longitude)) = (fix_ts, lat, lon) else {
                continue;
            };
            // The per-probe floor: the scan floor is the earliest probe's.
            if fix_ts < probe.saturating_sub(lookback) {
                continue;
            }
            *slot = Some(Location {
                latitude,
                longitude,
                hdop: hdop.unwrap_or(0.0),
                heading: heading.unwrap_or(0.0),
            });
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

fn ranges_us(ranges: &[TimeRange]) -> Vec<(i64, i64)> {
    ranges.iter().map(|r| (us(r.start), us(r.end))).collect()
}

impl Engine {
    /// Signals (merged requests) and event counts for every range, plus FIRST/LAST fixes:
    /// two statements whatever the number of ranges.
    fn summarize_ranges(
        &self,
        subject: &str,
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
        let aggs = self.ranges_aggregate(subject, summary_ranges, &floats, &locations)?;
        let counts = self.ranges_event_counts(subject, count_ranges, event_names)?;
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

    /// Detects and summarises segments.
    fn segment_summaries(
        &self,
        request: &SegmentsRequest,
        signal_requests: &[SignalRequest],
        event_names: &[String],
        now: Ts,
    ) -> Result<Vec<SegmentSummary>> {
        let list = dq_segments::segments(&LakeSource::new(self), request, now)
            .map_err(map_segments_error)?;
        if list.segments.is_empty() {
            return Ok(Vec::new());
        }
        let requests = merge_signal_requests(list.mechanism, signal_requests);
        let sums = self.summarize_ranges(
            &request.subject,
            &ranges_us(&list.summary_ranges()),
            &ranges_us(&list.event_count_ranges()),
            &requests,
            event_names,
        )?;
        // Slots 2i = start, 2i+1 = end (a located end for an ongoing segment is never used).
        let mut slots: Vec<(i64, Option<Location>)> = Vec::with_capacity(2 * list.segments.len());
        for (i, s) in list.segments.iter().enumerate() {
            slots.push((us(s.start), sums.first_fix(i)));
            match s.end {
                Some(end) => slots.push((us(end), sums.last_fix(i))),
                None => slots.push((us(list.to), Some(Location::default()))),
            }
        }
        self.gap_fill(&request.subject, &mut slots);
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
        self.segment_summaries(&q.request, &q.signal_requests, &q.event_names, now)
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
        let segs =
            self.segment_summaries(&plan.segments, &q.signal_requests, &q.event_names, now)?;
        if plan.days.is_empty() {
            return Ok(Vec::new());
        }
        let bare: Vec<Segment> = segs.iter().map(|s| s.segment).collect();
        let activity = dq_segments::daily_activity(&plan.days, &bare);
        let requests = merge_signal_requests(q.request.mechanism, &q.signal_requests);
        let day_ranges: Vec<(i64, i64)> =
            plan.days.iter().map(|d| (us(d.start), us(d.end))).collect();
        let sums = self.summarize_ranges(
            &q.request.subject,
            &day_ranges,
            &day_ranges,
            &requests,
            &q.event_names,
        )?;
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
    fn each_piece_belongs_to_the_first_range_holding_it() {
        // Overlaps go to the lower index; gaps and empty ranges hold nothing; a range's
        // adjacent pieces merge.
        assert_eq!(
            first_holding_pieces(&[(0, 10), (5, 20), (30, 40), (35, 35), (32, 50)]),
            vec![(0, 0, 10), (1, 10, 20), (2, 30, 40), (4, 40, 50)]
        );
        assert_eq!(
            first_holding_pieces(&[(10, 20), (0, 30)]),
            vec![(1, 0, 10), (0, 10, 20), (1, 20, 30)]
        );
        assert_eq!(first_holding_pieces(&[(0, 10), (0, 10)]), vec![(0, 0, 10)]);
        assert!(first_holding_pieces(&[(5, 5)]).is_empty());
        assert!(pieces_join(&[(5, 5)], "s").is_none());
        let (values, join) = pieces_join(&[(0, 10), (5, 20)], "s").unwrap();
        assert_eq!(
            values,
            "pieces(range_index, lo, hi) AS (VALUES (0, 0, 10), (1, 10, 20))"
        );
        assert_eq!(
            join,
            "ASOF JOIN pieces p ON epoch_us(s.\"timestamp\") >= p.lo WHERE epoch_us(s.\"timestamp\") < p.hi"
        );
        assert_eq!(global_window(&[(5, 20), (0, 10)]), (0, 20));
    }

    #[test]
    fn deduped_reads_keep_the_bucket_inside_the_dedup() {
        let sql = deduped("lake.signals", "did:x", "name = ?", 0, 60);
        let qualify = sql.find("QUALIFY").unwrap();
        assert!(sql[..qualify].contains("subject_bucket = "));
        assert!(sql[..qualify].contains("name = ?"));
    }
}
