//! Aggregations computed in Rust over the rows one plain statement reads (the subject's rows of
//! the requested names in a window, not deduplicated), for the reads where DuckDB took longer
//! to plan and group than the work needs: the per-range summaries of `segments` /
//! `dailyActivity` (as one statement — R1 `QUALIFY`, an ASOF join to the ranges, a `GROUP BY`
//! with a `CASE` per output — ~24 ms for a month of segments with every row already in memory,
//! more than the rest of the request), their event counts, and the `signals` aggregation of
//! float and location aliases. The rules are those statements', pinned against them by the
//! `ranges_aggregate_equals_the_sql_statement` and `signals_aggregation_equals_the_sql_statement`
//! tests:
//! - rows are R1-deduplicated (`dq_tables::keys`: per subject, name and timestamp the lowest
//!   `cloud_event_id` wins); an event key counts once;
//! - a row counts for the first range holding it ([`first_holding_pieces`]), or for its
//!   `from`-aligned bucket;
//! - aggregates skip NULLs, each location coordinate on its own; where the two statements
//!   differ (which rows a float or location alias reads, and when it answers) is [`Rules`];
//! - `AVG` is the plain sum over the count, summed in time order; `MED` is DuckDB's `median`
//!   (`quantile_cont(0.5)`: the two middle values interpolated); `RAND` one row drawn per
//!   row, the same draw for every column of that row, as `random() AS rnd` was.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::BuildHasher;

use crate::aggregate::{FloatAgg, Location, LocationAgg};
use crate::files::FileTable;
use crate::{names_predicate, ts_lit, Engine, Error, Result};
use dq_lake::duckdb;
use dq_lake::duckdb::arrow::array::{
    Array, BooleanArray, Float64Array, Int32Array, Int64Array, StringArray,
};
use dq_lake::duckdb::arrow::compute::filter_record_batch;
use dq_lake::duckdb::arrow::record_batch::RecordBatch;
use dq_lake::quote;
use dq_tables::keys::{read_tiebreak, READ_TIEBREAK};
use foldhash::HashSet as FoldSet;

/// The time the ranges cover, cut into disjoint pieces sorted by start, each labelled with the
/// first range (lowest index) holding it, so "each row counts for the first range holding it"
/// is one lookup of the piece starting last at or before the row. Adjacent pieces of one
/// range are merged; empty ranges hold nothing.
pub(crate) fn first_holding_pieces(ranges: &[(i64, i64)]) -> Vec<(usize, i64, i64)> {
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

/// The range a row at `ts` (µs) counts for, given [`first_holding_pieces`]; `None` outside
/// every range.
pub(crate) fn range_of(pieces: &[(usize, i64, i64)], ts: i64) -> Option<usize> {
    let last_starting = pieces.partition_point(|p| p.1 <= ts).checked_sub(1)?;
    let &(range, _, hi) = pieces.get(last_starting)?;
    (ts < hi).then_some(range)
}

/// One signal row as the ranges read returns it: `name` is the index of its name in the read's
/// name list, `ts` µs, `location` = (lat, lon, hdop, heading).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SignalRow<'a> {
    pub name: usize,
    pub ts: i64,
    pub cloud_event_id: &'a str,
    pub value: Option<f64>,
    pub location: [Option<f64>; 4],
}

/// The rows of the ranges read's batches, whose columns are (name index INTEGER, µs BIGINT,
/// cloud_event_id VARCHAR, value_number, loc_lat, loc_lon, loc_hdop, loc_heading DOUBLE),
/// borrowing the ids from the batches. A batch of another shape is an error naming the column.
pub(crate) fn signal_rows(batches: &[RecordBatch]) -> Result<Vec<SignalRow<'_>>, String> {
    let mut rows = Vec::with_capacity(batches.iter().map(RecordBatch::num_rows).sum());
    for batch in batches {
        let name = column::<Int32Array>(batch, 0, "signals")?;
        let ts = column::<Int64Array>(batch, 1, "signals")?;
        let id = column::<StringArray>(batch, 2, "signals")?;
        let doubles = (3..8)
            .map(|i| column::<Float64Array>(batch, i, "signals"))
            .collect::<Result<Vec<_>, _>>()?;
        let [value, lat, lon, hdop, heading] = doubles.as_slice() else {
            return Err("the signals read has too few columns".into());
        };
        let at = |a: &Float64Array, i: usize| a.is_valid(i).then(|| a.value(i));
        for i in 0..batch.num_rows() {
            // A name outside the read's list (NULL) or a NULL time cannot be counted.
            let (Ok(name), true, true) = (
                usize::try_from(name.value(i)),
                name.is_valid(i),
                ts.is_valid(i),
            ) else {
                continue;
            };
            rows.push(SignalRow {
                name,
                ts: ts.value(i),
                cloud_event_id: if id.is_valid(i) { id.value(i) } else { "" },
                value: at(value, i),
                location: [at(lat, i), at(lon, i), at(hdop, i), at(heading, i)],
            });
        }
    }
    Ok(rows)
}

/// The R2 keys (name, µs, source; the subject is the read's) of the events read's batches,
/// whose first three columns are (name VARCHAR, µs BIGINT, source VARCHAR). Counting needs no
/// tie-break: every key counts once whichever row of it wins.
pub(crate) fn event_keys(batches: &[RecordBatch]) -> Result<Vec<(&str, i64, &str)>, String> {
    let mut keys = Vec::with_capacity(batches.iter().map(RecordBatch::num_rows).sum());
    for batch in batches {
        let name = column::<StringArray>(batch, 0, "events")?;
        let ts = column::<Int64Array>(batch, 1, "events")?;
        let source = column::<StringArray>(batch, 2, "events")?;
        for i in 0..batch.num_rows() {
            if name.is_valid(i) && ts.is_valid(i) {
                let source = if source.is_valid(i) {
                    source.value(i)
                } else {
                    ""
                };
                keys.push((name.value(i), ts.value(i), source));
            }
        }
    }
    Ok(keys)
}

/// Per range, the number of distinct event keys of each name, each key counted for the first
/// range holding its time.
pub(crate) fn count_events<'a>(
    mut keys: Vec<(&'a str, i64, &'a str)>,
    ranges: &[(i64, i64)],
) -> Vec<BTreeMap<&'a str, i64>> {
    let pieces = first_holding_pieces(ranges);
    keys.sort_unstable();
    keys.dedup();
    let mut counts = vec![BTreeMap::new(); ranges.len()];
    for (name, ts, _) in keys {
        if let Some(slot) = range_of(&pieces, ts).and_then(|r| counts.get_mut(r)) {
            *slot.entry(name).or_insert(0) += 1;
        }
    }
    counts
}

/// Column `i` of a `read`'s batch as the array type it must have.
fn column<'b, T: 'static>(batch: &'b RecordBatch, i: usize, read: &str) -> Result<&'b T, String> {
    batch
        .columns()
        .get(i)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| format!("the {read} read's column {i} has an unexpected type"))
}

/// One column's aggregates over a (range, name) group, fed in time order.
#[derive(Debug, Clone, Default)]
struct Column {
    n: u64,
    sum: f64,
    min: f64,
    max: f64,
    first: f64,
    last: f64,
    // (draw, value) of the row with the highest draw: `arg_max(v, random())`.
    rand: (u64, f64),
    // Kept only when a median is asked for.
    values: Vec<f64>,
}

impl Column {
    fn add(&mut self, v: f64, draw: u64, keep: bool) {
        if self.n == 0 {
            self.min = v;
            self.max = v;
            self.first = v;
            self.rand = (draw, v);
        } else {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
            if draw > self.rand.0 {
                self.rand = (draw, v);
            }
        }
        self.last = v;
        self.sum += v;
        self.n += 1;
        if keep {
            self.values.push(v);
        }
    }

    fn float(&mut self, agg: FloatAgg) -> Option<f64> {
        if self.n == 0 {
            return None;
        }
        Some(match agg {
            FloatAgg::Avg => self.sum / self.n as f64,
            FloatAgg::Med => median(&mut self.values),
            FloatAgg::Max => self.max,
            FloatAgg::Min => self.min,
            FloatAgg::Rand => self.rand.1,
            FloatAgg::First => self.first,
            FloatAgg::Last => self.last,
        })
    }

    /// A location coordinate: `Rand` is drawn with the row's draw like the floats.
    fn coordinate(&self, agg: LocationAgg) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        match agg {
            LocationAgg::Avg => self.sum / self.n as f64,
            LocationAgg::Rand => self.rand.1,
            LocationAgg::First => self.first,
            LocationAgg::Last => self.last,
        }
    }
}

/// DuckDB's `median` of doubles (`quantile_cont(0.5)`): the value at rank (n − 1) / 2, the two
/// neighbours interpolated as `lo + (hi − lo) · 0.5` when it falls between them.
fn median(values: &mut [f64]) -> f64 {
    values.sort_unstable_by(f64::total_cmp);
    let Some(last) = values.len().checked_sub(1) else {
        return 0.0;
    };
    let (lo, hi) = (last / 2, last.div_ceil(2));
    match (values.get(lo), values.get(hi)) {
        (Some(&l), Some(&h)) if lo != hi => l + (h - l) * 0.5,
        (Some(&l), _) => l,
        _ => 0.0,
    }
}

/// A well-mixed 64-bit value of `x` (SplitMix64's finalizer): the rows' random draws.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The aggregates of one (label, name) group.
#[derive(Debug, Clone, Default)]
struct Group {
    rows: u64,
    value: Column,
    // Rows that fed the location columns.
    located: u64,
    location: [Column; 4],
}

/// Where the two statements this module replaces differ.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rules {
    /// The summaries: a float request answers only for a group with a value. `signals`: for a
    /// group with any row of its name, 0 when none has a value.
    pub float_needs_value: bool,
    /// `signals`: locations read only real fixes (`loc_lat != 0 OR loc_lon != 0`, SQL's
    /// three-valued logic). The summaries: every row.
    pub real_fixes_only: bool,
}

/// The summaries' rules (see [`Rules`]).
pub(crate) const SUMMARY_RULES: Rules = Rules {
    float_needs_value: true,
    real_fixes_only: false,
};

/// The `signals` aggregation's rules (see [`Rules`]).
pub(crate) const SIGNALS_RULES: Rules = Rules {
    float_needs_value: false,
    real_fixes_only: true,
};

/// What a fold answers for one label: floats and locations by request index; an index missing
/// had no rows there.
pub(crate) type Answer = (Vec<(usize, f64)>, Vec<(usize, Location)>);

/// Folds the rows of the names in `names` (indexes of [`SignalRow::name`]) into groups by
/// `label(µs)` (a row labelled `None` is not counted) and name: `floats[i]` / `locations[i]`
/// name a request by its name index and aggregation. The rows may come in any order; the
/// answers come by label, ascending, labels without an answer left out.
pub(crate) fn fold(
    rows: &[SignalRow<'_>],
    label: impl Fn(i64) -> Option<i64>,
    names: usize,
    floats: &[(usize, FloatAgg)],
    locations: &[(usize, LocationAgg)],
    rules: Rules,
) -> Vec<(i64, Answer)> {
    // Rows without a label first go, then the rest in (name, time) order, so that the rows of
    // one read key are adjacent (R1 keeps the tie-break's winner of each run) and each group is
    // fed in time order. Sorting small keys, not the rows, keeps the sort cheap; the label, a
    // function of the time, rides along.
    let mut order: Vec<(usize, i64, u32, i64)> = rows
        .iter()
        .zip(0u32..)
        .filter_map(|(r, i)| label(r.ts).map(|l| (r.name, r.ts, i, l)))
        .collect();
    order.sort_unstable();
    let medians: Vec<bool> = (0..names)
        .map(|n| floats.contains(&(n, FloatAgg::Med)))
        .collect();
    // Groups in first-seen order, found by key only when the label or name changes.
    let mut groups: Vec<((i64, usize), Group)> = Vec::new();
    let mut index: HashMap<(i64, usize), usize> = HashMap::new();
    let mut current: Option<((i64, usize), usize)> = None;
    // One draw per row, shared by its columns as `random() AS rnd` was.
    let seed = std::hash::RandomState::new().hash_one(0u8);
    let row_at = |i: u32| usize::try_from(i).ok().and_then(|i| rows.get(i));
    for run in order.chunk_by(|a, b| (a.0, a.1) == (b.0, b.1)) {
        let Some(row) = run
            .iter()
            .filter_map(|k| row_at(k.2))
            .min_by(|a, b| read_tiebreak(a.cloud_event_id, b.cloud_event_id))
        else {
            continue;
        };
        let Some(key) = run.first().map(|k| (k.3, row.name)) else {
            continue;
        };
        let at = match current {
            Some((k, at)) if k == key => at,
            _ => {
                let at = *index.entry(key).or_insert_with(|| {
                    groups.push((key, Group::default()));
                    groups.len() - 1
                });
                current = Some((key, at));
                at
            }
        };
        let Some((_, group)) = groups.get_mut(at) else {
            continue;
        };
        let draw = splitmix64(seed.wrapping_add(run.first().map_or(0, |k| u64::from(k.2))));
        group.rows += 1;
        if let Some(v) = row.value {
            let keep = medians.get(row.name).copied().unwrap_or(false);
            group.value.add(v, draw, keep);
        }
        let [lat, lon, ..] = row.location;
        let real = lat.is_some_and(|v| v != 0.0) || lon.is_some_and(|v| v != 0.0);
        if real || !rules.real_fixes_only {
            group.located += 1;
            for (column, v) in group.location.iter_mut().zip(row.location) {
                if let Some(v) = v {
                    column.add(v, draw, false);
                }
            }
        }
    }
    groups.sort_unstable_by_key(|(key, _)| *key);
    let mut answers: Vec<(i64, Answer)> = Vec::new();
    for by_label in groups.chunk_by_mut(|a, b| a.0 .0 == b.0 .0) {
        let Some(&((label, _), _)) = by_label.first() else {
            continue;
        };
        let mut float_answers = Vec::new();
        for (i, &(name, agg)) in floats.iter().enumerate() {
            let Some(g) = group_of(by_label, name) else {
                continue;
            };
            let value = match (g.value.float(agg), rules.float_needs_value) {
                (Some(v), _) => v,
                (None, false) if g.rows > 0 => 0.0,
                (None, _) => continue,
            };
            float_answers.push((i, value));
        }
        let mut location_answers = Vec::new();
        for (i, &(name, agg)) in locations.iter().enumerate() {
            let Some(g) = group_of(by_label, name).filter(|g| g.located > 0) else {
                continue;
            };
            let [lat, lon, hdop, heading] = &g.location;
            location_answers.push((
                i,
                Location {
                    latitude: lat.coordinate(agg),
                    longitude: lon.coordinate(agg),
                    hdop: hdop.coordinate(agg),
                    heading: heading.coordinate(agg),
                },
            ));
        }
        if !float_answers.is_empty() || !location_answers.is_empty() {
            answers.push((label, (float_answers, location_answers)));
        }
    }
    answers
}

/// The group of `name` among one label's groups.
fn group_of(groups: &mut [((i64, usize), Group)], name: usize) -> Option<&mut Group> {
    groups.iter_mut().find(|(k, _)| k.1 == name).map(|(_, g)| g)
}

/// The statement reading what [`signal_rows`] takes: the rows of `names` in `relation` that
/// `filter` keeps, each with the index of its name in `names`; the location columns NULL
/// unless `locations` (four columns fewer to decode: most of such a read's time). `ties`: the
/// `cloud_event_id`s are read, of the rows `ties` also keeps ([`Engine::signal_rows_of`]);
/// `None` reads them as NULL.
pub(crate) fn signal_rows_sql(
    relation: &str,
    filter: &str,
    names: &[&str],
    locations: bool,
    ties: Option<&str>,
) -> String {
    let cases: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(i, n)| format!("WHEN {} THEN {i}", quote(n)))
        .collect();
    let location = if locations {
        "loc_lat, loc_lon, loc_hdop, loc_heading"
    } else {
        "NULL::DOUBLE, NULL::DOUBLE, NULL::DOUBLE, NULL::DOUBLE"
    };
    let (id, only) = match ties {
        Some(only) => (READ_TIEBREAK, format!(" AND {only}")),
        None => ("NULL::VARCHAR", String::new()),
    };
    format!(
        "SELECT (CASE name {} END)::INTEGER, epoch_us(\"timestamp\"), {id}, \
                value_number, {location} \
         FROM {relation} WHERE {filter}{only} AND {}",
        cases.join(" "),
        names_predicate(names.iter().copied())
    )
}

/// At most this many distinct times of repeated read keys are named in the statement that
/// reads their ids; beyond, it reads every row's id.
const TIED_TIMES_LISTED: usize = 1024;

impl Engine {
    /// The batches of a [`signal_rows_sql`] read of `subject`'s signal rows (`sql(relations,
    /// ties)`, `params` bound; relations as [`Engine::read_of`] picks them). R1's tie-break
    /// needs a row's `cloud_event_id` only where two rows share a read key (name and time;
    /// the subject is the read's), and turning every row's id into Arrow was about a tenth of
    /// a month of `segments`' read (30 day files, DuckDB alone: 16.8 ms with ids, 15.3 without).
    /// So the rows are read without ids; when some keys repeat, a second statement at the same
    /// snapshot reads those keys' rows with their ids, and they replace the first read's.
    ///
    /// # Errors
    /// Database failures, or batches of another shape.
    pub(crate) fn signal_rows_of<const N: usize>(
        &self,
        context: &str,
        subject: &str,
        windows: [(i64, i64); N],
        sql: impl Fn(&[String; N], Option<&str>) -> String,
        params: &[&dyn duckdb::ToSql],
    ) -> Result<Vec<RecordBatch>> {
        dq_lake::one_snapshot(|| {
            let read = |ties: Option<&str>| {
                self.read_of(
                    context,
                    FileTable::Signals,
                    subject,
                    windows,
                    |relations| sql(relations, ties),
                    |stmt| Ok(stmt.query_arrow(params)?.collect::<Vec<_>>()),
                )
            };
            let malformed = |message: String| Error::Database {
                context: context.to_string(),
                message,
            };
            let rows = read(None)?;
            let repeated = repeated_keys(&rows).map_err(malformed)?;
            if repeated.is_empty() {
                return Ok(rows);
            }
            let times: BTreeSet<i64> = repeated.iter().map(|&(_, ts)| ts).collect();
            let only = if times.len() > TIED_TIMES_LISTED {
                "TRUE".to_owned()
            } else {
                let listed: Vec<String> = times.iter().map(|&t| ts_lit(t)).collect();
                format!("\"timestamp\" IN ({})", listed.join(", "))
            };
            let tied = read(Some(&only))?;
            let mut out = keep_keys(&rows, &repeated, false).map_err(malformed)?;
            out.extend(keep_keys(&tied, &repeated, true).map_err(malformed)?);
            Ok(out)
        })
    }
}

/// The (name index, µs) read key of each row of a [`signal_rows`] read's batch, `None` where
/// either is NULL (such a row is never counted).
fn read_keys(batch: &RecordBatch) -> Result<impl Iterator<Item = Option<(i32, i64)>> + '_, String> {
    let name = column::<Int32Array>(batch, 0, "signals")?;
    let ts = column::<Int64Array>(batch, 1, "signals")?;
    Ok((0..batch.num_rows())
        .map(|i| (name.is_valid(i) && ts.is_valid(i)).then(|| (name.value(i), ts.value(i)))))
}

/// The read keys two or more rows of a [`signal_rows`] read's batches share. Run on every
/// read, so with a fast hash (foldhash, as the materializer's staging keys).
fn repeated_keys(batches: &[RecordBatch]) -> Result<FoldSet<(i32, i64)>, String> {
    let rows = batches.iter().map(RecordBatch::num_rows).sum();
    let mut seen = FoldSet::with_capacity_and_hasher(rows, Default::default());
    let mut repeated = FoldSet::default();
    for batch in batches {
        for key in read_keys(batch)?.flatten() {
            if !seen.insert(key) {
                repeated.insert(key);
            }
        }
    }
    Ok(repeated)
}

/// The rows of `batches` whose read key is in `keys` (`inside`), or not.
fn keep_keys(
    batches: &[RecordBatch],
    keys: &FoldSet<(i32, i64)>,
    inside: bool,
) -> Result<Vec<RecordBatch>, String> {
    batches
        .iter()
        .map(|batch| {
            let mask: BooleanArray = read_keys(batch)?
                .map(|key| Some(key.is_some_and(|k| keys.contains(&k)) == inside))
                .collect();
            filter_record_batch(batch, &mask).map_err(|e| e.to_string())
        })
        .collect()
}

/// The summaries of every range (module docs): one answer per range, in order.
pub(crate) fn aggregate(
    rows: &[SignalRow<'_>],
    ranges: &[(i64, i64)],
    names: usize,
    floats: &[(usize, FloatAgg)],
    locations: &[(usize, LocationAgg)],
) -> Vec<Answer> {
    let pieces = first_holding_pieces(ranges);
    let label = |ts: i64| range_of(&pieces, ts).and_then(|r| i64::try_from(r).ok());
    let mut out = vec![Answer::default(); ranges.len()];
    for (range, answer) in fold(rows, label, names, floats, locations, SUMMARY_RULES) {
        if let Some(slot) = usize::try_from(range).ok().and_then(|r| out.get_mut(r)) {
            *slot = answer;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering;

    fn row(name: usize, ts: i64, id: &'static str, value: Option<f64>) -> SignalRow<'static> {
        SignalRow {
            name,
            ts,
            cloud_event_id: id,
            value,
            location: [None; 4],
        }
    }

    #[test]
    fn each_piece_belongs_to_the_first_range_holding_it() {
        // Overlaps go to the lower index; gaps and empty ranges hold nothing; a range's
        // adjacent pieces merge.
        let pieces = first_holding_pieces(&[(0, 10), (5, 20), (30, 40), (35, 35), (32, 50)]);
        assert_eq!(
            pieces,
            vec![(0, 0, 10), (1, 10, 20), (2, 30, 40), (4, 40, 50)]
        );
        let labels: Vec<_> = [-1, 0, 9, 10, 19, 20, 29, 30, 39, 40, 49, 50]
            .iter()
            .map(|&t| range_of(&pieces, t))
            .collect();
        assert_eq!(
            labels,
            [
                None,
                Some(0),
                Some(0),
                Some(1),
                Some(1),
                None,
                None,
                Some(2),
                Some(2),
                Some(4),
                Some(4),
                None
            ]
        );
        assert_eq!(
            first_holding_pieces(&[(10, 20), (0, 30)]),
            vec![(1, 0, 10), (0, 10, 20), (1, 20, 30)]
        );
        assert_eq!(first_holding_pieces(&[(0, 10), (0, 10)]), vec![(0, 0, 10)]);
        assert!(first_holding_pieces(&[(5, 5)]).is_empty());
        assert_eq!(range_of(&[], 0), None);
    }

    #[test]
    fn median_interpolates_the_middle_pair() {
        assert_eq!(median(&mut [3.0]), 3.0);
        assert_eq!(median(&mut [4.0, 1.0]), 2.5);
        assert_eq!(median(&mut [5.0, 1.0, 3.0]), 3.0);
        assert_eq!(median(&mut [1.0, 2.0, 10.0, 4.0]), 3.0);
        assert_eq!(median(&mut []), 0.0);
    }

    #[test]
    fn a_read_key_counts_once_with_the_lowest_id() {
        // Two rows of (name 0, ts 5): "B" sorts before "a" (byte order), so its value wins.
        let rows = vec![
            row(0, 5, "a", Some(1.0)),
            row(0, 5, "B", Some(7.0)),
            row(0, 6, "z", None),
            row(1, 5, "c", Some(2.0)),
        ];
        assert_eq!(read_tiebreak("B", "a"), Ordering::Less);
        let answers = aggregate(
            &rows,
            &[(0, 10)],
            2,
            &[(0, FloatAgg::Avg), (0, FloatAgg::Max), (1, FloatAgg::First)],
            &[(0, LocationAgg::First)],
        );
        let (floats, locations) = &answers[0];
        assert_eq!(floats, &vec![(0, 7.0), (1, 7.0), (2, 2.0)]);
        // Rows without a value still make the location group; no coordinate gives 0.
        assert_eq!(locations, &vec![(0, Location::default())]);
    }
}
