//! The `signals` aggregation: every alias of a request is answered by ONE
//! SQL statement — deduped, bucket-pruned rows joined to an inline VALUES table of requests,
//! grouped by (`from`-aligned bucket, request kind, request index).

use crate::files::FileTable;
use crate::filter::{FloatFilter, LocationFilter};
use crate::fold::{fold, signal_rows, signal_rows_sql, SIGNALS_RULES};
use crate::{
    check_window, names_predicate, source_address, subject_predicate, ts_lit, Engine, Error, Result,
};
use dq_lake::duckdb::params;
use dq_lake::quote;
use dq_tables::keys::signals_deduped_from;
use std::collections::{BTreeMap, BTreeSet};

/// `FloatAggregation`: one enum for `signals` and the segment summaries (the SQL of each value
/// is [`float_expr`]).
pub use dq_segments::signals::FloatAggregation as FloatAgg;

/// `StringAggregation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StringAgg {
    /// `arg_max(v, random())`
    Rand,
    /// `mode`
    Top,
    /// distinct values, byte-ordered, comma-joined
    Unique,
    /// `arg_min(v, timestamp)`
    First,
    /// `arg_max(v, timestamp)`
    Last,
}

/// `LocationAggregation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocationAgg {
    /// component-wise `avg`
    Avg,
    /// one random row
    Rand,
    /// earliest row
    First,
    /// latest row
    Last,
}

/// One float alias.
#[derive(Debug, Clone, PartialEq)]
pub struct FloatRequest {
    /// Stored signal name.
    pub name: String,
    /// Aggregation.
    pub agg: FloatAgg,
    /// Optional value filter.
    pub filter: Option<FloatFilter>,
}

/// One string alias.
#[derive(Debug, Clone, PartialEq)]
pub struct StringRequest {
    /// Stored signal name.
    pub name: String,
    /// Aggregation.
    pub agg: StringAgg,
}

/// One location alias.
#[derive(Debug, Clone, PartialEq)]
pub struct LocationRequest {
    /// Stored signal name.
    pub name: String,
    /// Aggregation.
    pub agg: LocationAgg,
    /// Optional geofence.
    pub filter: Option<LocationFilter>,
}

/// A whole `signals` request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AggregateRequest {
    /// Subject DID.
    pub subject: String,
    /// `filter.source` as given (an ethr DID).
    pub source: Option<String>,
    /// Bucket width, µs.
    pub interval_us: i64,
    /// Window start (inclusive), µs.
    pub from_us: i64,
    /// Window end (exclusive), µs.
    pub to_us: i64,
    /// Float aliases, by index.
    pub floats: Vec<FloatRequest>,
    /// String aliases, by index.
    pub strings: Vec<StringRequest>,
    /// Location aliases, by index.
    pub locations: Vec<LocationRequest>,
}

/// Aggregated coordinates: the stored location value.
pub use dq_signals::Location;

/// The location in the four columns from `first` (latitude, longitude, hdop, heading): the
/// order every read selects them in.
pub(crate) fn location_at(
    r: &dq_lake::duckdb::Row<'_>,
    first: usize,
) -> dq_lake::duckdb::Result<Location> {
    Ok(Location {
        latitude: r.get(first)?,
        longitude: r.get(first + 1)?,
        hdop: r.get(first + 2)?,
        heading: r.get(first + 3)?,
    })
}

/// One bucket of answers; a request index missing from a map had no rows in this bucket.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Bucket {
    /// Bucket start, µs.
    pub timestamp_us: i64,
    /// Float answers by request index.
    pub floats: BTreeMap<usize, f64>,
    /// String answers by request index.
    pub strings: BTreeMap<usize, String>,
    /// Location answers by request index.
    pub locations: BTreeMap<usize, Location>,
}

/// Kinds in the VALUES table (ordering of the output follows these numbers).
const FLOAT: i64 = 1;
const STRING: i64 = 2;
const LOCATION: i64 = 3;

/// More requests of one kind than this are refused.
pub const MAX_REQUESTS_PER_KIND: usize = 65_535;
/// Buckets per request are capped at this many (`interval >= window / MAX_BUCKETS`).
pub const MAX_BUCKETS: i64 = 100_000;

impl AggregateRequest {
    /// `validateAggSigArgs`.
    ///
    /// # Errors
    /// BAD_REQUEST reasons.
    pub fn validate(&self) -> Result<()> {
        check_window(&self.subject, self.from_us, self.to_us)?;
        if self.interval_us < 1 {
            return Err(Error::invalid("interval must be at least 1 microsecond"));
        }
        let window = self.to_us - self.from_us;
        if window > 0 && self.interval_us < window / MAX_BUCKETS {
            return Err(Error::invalid(
                "interval too small for the requested window (exceeds the aggregation bucket limit)",
            ));
        }
        if self.floats.len() > MAX_REQUESTS_PER_KIND
            || self.strings.len() > MAX_REQUESTS_PER_KIND
            || self.locations.len() > MAX_REQUESTS_PER_KIND
        {
            return Err(Error::invalid("too many aggregation requests"));
        }
        for l in &self.locations {
            if let Some(f) = &l.filter {
                f.validate()?;
            }
        }
        if let Some(s) = &self.source {
            source_address(s)?;
        }
        Ok(())
    }

    fn is_empty(&self) -> bool {
        self.floats.is_empty() && self.strings.is_empty() && self.locations.is_empty()
    }

    /// The predicate of the rows every alias reads: the subject (and its bucket), the source
    /// when given, the time window.
    fn rows_filter(&self) -> Result<String> {
        let mut filter = vec![subject_predicate(&self.subject)];
        if let Some(src) = &self.source {
            filter.push(format!("source = {}", quote(&source_address(src)?)));
        }
        filter.push(format!(
            "\"timestamp\" >= {} AND \"timestamp\" < {}",
            ts_lit(self.from_us),
            ts_lit(self.to_us)
        ));
        Ok(filter.join(" AND "))
    }
}

pub(crate) fn float_expr(agg: FloatAgg) -> &'static str {
    match agg {
        FloatAgg::Avg => "avg(value_number)",
        FloatAgg::Med => "median(value_number)",
        FloatAgg::Max => "max(value_number)",
        FloatAgg::Min => "min(value_number)",
        FloatAgg::Rand => "arg_max(value_number, rnd)",
        FloatAgg::First => "arg_min(value_number, \"timestamp\")",
        FloatAgg::Last => "arg_max(value_number, \"timestamp\")",
    }
}

fn string_expr(agg: StringAgg) -> &'static str {
    match agg {
        StringAgg::Rand => "arg_max(value_string, rnd)",
        StringAgg::Top => "mode(value_string)",
        StringAgg::Unique => "string_agg(DISTINCT value_string, ',' ORDER BY value_string)",
        StringAgg::First => "arg_min(value_string, \"timestamp\")",
        StringAgg::Last => "arg_max(value_string, \"timestamp\")",
    }
}

pub(crate) fn location_expr(agg: LocationAgg, col: &str) -> String {
    match agg {
        LocationAgg::Avg => format!("avg({col})"),
        LocationAgg::Rand => format!("arg_max({col}, rnd)"),
        LocationAgg::First => format!("arg_min({col}, \"timestamp\")"),
        LocationAgg::Last => format!("arg_max({col}, \"timestamp\")"),
    }
}

/// `CASE WHEN kind/index … THEN <agg> … ELSE <default> END` for one output column.
pub(crate) fn case_column(branches: &[(i64, usize, String)], default: &str) -> String {
    if branches.is_empty() {
        return default.to_string();
    }
    let whens: Vec<String> = branches
        .iter()
        .map(|(kind, idx, expr)| {
            format!("WHEN signal_type = {kind} AND signal_index = {idx} THEN {expr}")
        })
        .collect();
    format!("coalesce(CASE {} END, {default})", whens.join(" "))
}

/// The statement of one `signals` request, over any relation with the `lake.signals` columns
/// (the table, or the same rows read from its files). The subject is its only parameter.
#[derive(Debug, Clone)]
pub struct AggregateSql {
    head: String,
    filter: String,
    tail: String,
}

impl AggregateSql {
    /// The statement reading `relation`.
    pub fn over(&self, relation: &str) -> String {
        format!(
            "{}{}{}",
            self.head,
            signals_deduped_from(relation, &self.filter),
            self.tail
        )
    }
}

/// The statement for `req` (assumed validated).
pub fn aggregate_sql(req: &AggregateRequest) -> Result<AggregateSql> {
    let mut values = Vec::new();
    let mut names = BTreeSet::new();
    for (i, r) in req.floats.iter().enumerate() {
        values.push(format!("({FLOAT}, {i}, {})", quote(&r.name)));
        names.insert(r.name.as_str());
    }
    for (i, r) in req.strings.iter().enumerate() {
        values.push(format!("({STRING}, {i}, {})", quote(&r.name)));
        names.insert(r.name.as_str());
    }
    for (i, r) in req.locations.iter().enumerate() {
        values.push(format!("({LOCATION}, {i}, {})", quote(&r.name)));
        names.insert(r.name.as_str());
    }

    // Restrictions inside the dedup (before the window function): the request's rows, the
    // requested names.
    let inner = [req.rows_filter()?, names_predicate(names.iter().copied())];

    let mut float_preds = Vec::new();
    for (i, r) in req.floats.iter().enumerate() {
        let pred = match &r.filter {
            Some(f) => f.sql("value_number")?,
            None => None,
        };
        float_preds.push(format!(
            "(signal_index = {i} AND {})",
            pred.unwrap_or_else(|| "true".into())
        ));
    }
    let mut loc_preds = Vec::new();
    for (i, r) in req.locations.iter().enumerate() {
        let pred = match &r.filter {
            Some(f) => f.sql("loc_lat", "loc_lon")?,
            None => None,
        };
        loc_preds.push(format!(
            "(signal_index = {i} AND {})",
            pred.unwrap_or_else(|| "true".into())
        ));
    }
    let mut kinds = Vec::new();
    if !float_preds.is_empty() {
        kinds.push(format!(
            "(signal_type = {FLOAT} AND ({}))",
            float_preds.join(" OR ")
        ));
    }
    if !req.strings.is_empty() {
        kinds.push(format!("signal_type = {STRING}"));
    }
    if !loc_preds.is_empty() {
        kinds.push(format!(
            "(signal_type = {LOCATION} AND (loc_lat != 0 OR loc_lon != 0) AND ({}))",
            loc_preds.join(" OR ")
        ));
    }

    let floats: Vec<_> = req
        .floats
        .iter()
        .enumerate()
        .map(|(i, r)| (FLOAT, i, float_expr(r.agg).to_string()))
        .collect();
    let strings: Vec<_> = req
        .strings
        .iter()
        .enumerate()
        .map(|(i, r)| (STRING, i, string_expr(r.agg).to_string()))
        .collect();
    let loc = |col: &str| -> Vec<(i64, usize, String)> {
        req.locations
            .iter()
            .enumerate()
            .map(|(i, r)| (LOCATION, i, location_expr(r.agg, col)))
            .collect()
    };
    let (from, interval) = (req.from_us, req.interval_us);
    Ok(AggregateSql {
        head: format!(
            "WITH req(signal_type, signal_index, name) AS (VALUES {values}), \
             rows AS ( \
               SELECT r.signal_type, r.signal_index, s.\"timestamp\", s.value_number, \
                      s.value_string, s.loc_lat, s.loc_lon, s.loc_hdop, s.loc_heading, \
                      random() AS rnd, \
                      ((epoch_us(s.\"timestamp\") - {from}) // {interval}) * {interval} + {from} \
                        AS bucket \
               FROM (",
            values = values.join(", "),
        ),
        filter: inner.join(" AND "),
        tail: format!(
            ") s JOIN req r ON s.name = r.name \
               WHERE {kinds}) \
             SELECT bucket, signal_type, signal_index, {f}, {s}, {lat}, {lon}, {hdop}, {heading} \
             FROM rows GROUP BY bucket, signal_type, signal_index \
             ORDER BY bucket, signal_type, signal_index",
            kinds = kinds.join(" OR "),
            f = case_column(&floats, "0::DOUBLE"),
            s = case_column(&strings, "''"),
            lat = case_column(&loc("loc_lat"), "0::DOUBLE"),
            lon = case_column(&loc("loc_lon"), "0::DOUBLE"),
            hdop = case_column(&loc("loc_hdop"), "0::DOUBLE"),
            heading = case_column(&loc("loc_heading"), "0::DOUBLE"),
        ),
    })
}

impl Engine {
    /// Answers every alias of a `signals` request with one statement; buckets ascending,
    /// sparse (a bucket without rows is absent).
    ///
    /// # Errors
    /// Validation (BAD_REQUEST) or database failures.
    pub fn aggregate(&self, req: &AggregateRequest) -> Result<Vec<Bucket>> {
        req.validate()?;
        if req.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(answer) = self.aggregate_in_rust(req)? {
            return Ok(answer);
        }
        let sql = aggregate_sql(req)?;
        let window = [(req.from_us, req.to_us)];
        let rows = self.rows_of(
            "aggregate signals",
            FileTable::Signals,
            &req.subject,
            window,
            |[relation]| sql.over(relation),
            params![req.subject],
            |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, f64>(3)?,
                    r.get::<_, String>(4)?,
                    location_at(r, 5)?,
                ))
            },
        )?;
        let mut out: Vec<Bucket> = Vec::new();
        for (bucket, kind, idx, f, s, loc) in rows {
            if out.last().is_none_or(|b| b.timestamp_us != bucket) {
                out.push(Bucket {
                    timestamp_us: bucket,
                    ..Bucket::default()
                });
            }
            let Some(b) = out.last_mut() else { continue };
            let idx = usize::try_from(idx).unwrap_or(usize::MAX);
            match kind {
                FLOAT => {
                    b.floats.insert(idx, f);
                }
                STRING => {
                    b.strings.insert(idx, s);
                }
                _ => {
                    b.locations.insert(idx, loc);
                }
            }
        }
        Ok(out)
    }
}

impl Engine {
    /// The statement of [`aggregate_sql`] answered in Rust (module `fold`, the `signals`
    /// rules) from one plain read of the rows, for requests of float and location aliases
    /// without value filters or geofences — most requests, and the ones DuckDB spent most of
    /// its time planning and grouping for. `None`: the request needs the statement.
    fn aggregate_in_rust(&self, req: &AggregateRequest) -> Result<Option<Vec<Bucket>>> {
        let plain = req.strings.is_empty()
            && req.floats.iter().all(|f| f.filter.is_none())
            && req.locations.iter().all(|l| l.filter.is_none());
        if !plain {
            return Ok(None);
        }
        let names: Vec<&str> = req
            .floats
            .iter()
            .map(|f| f.name.as_str())
            .chain(req.locations.iter().map(|l| l.name.as_str()))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let index = |name: &str| names.iter().position(|n| *n == name).unwrap_or(usize::MAX);
        let floats: Vec<(usize, FloatAgg)> =
            req.floats.iter().map(|f| (index(&f.name), f.agg)).collect();
        let locations: Vec<(usize, LocationAgg)> = req
            .locations
            .iter()
            .map(|l| (index(&l.name), l.agg))
            .collect();
        let filter = req.rows_filter()?;
        let batches = self.signal_rows_of(
            "aggregate signal rows",
            &req.subject,
            [(req.from_us, req.to_us)],
            |[relation], ties| {
                signal_rows_sql(relation, &filter, &names, !locations.is_empty(), ties)
            },
            params![req.subject],
        )?;
        let rows = signal_rows(&batches).map_err(|message| Error::Database {
            context: "aggregate signal rows".into(),
            message,
        })?;
        // `from`-aligned buckets, as the statement's `((µs − from) // interval) * interval + from`.
        let (from, interval) = (req.from_us, req.interval_us.max(1));
        let bucket = |ts: i64| Some((ts - from).div_euclid(interval) * interval + from);
        let answers = fold(
            &rows,
            bucket,
            names.len(),
            &floats,
            &locations,
            SIGNALS_RULES,
        );
        Ok(Some(
            answers
                .into_iter()
                .map(|(timestamp_us, (floats, locations))| Bucket {
                    timestamp_us,
                    floats: floats.into_iter().collect(),
                    strings: BTreeMap::new(),
                    locations: locations.into_iter().collect(),
                })
                .collect(),
        ))
    }
}

/// The approximate location: the centre of the H3 resolution-6 cell holding
/// `loc`, hdop kept; `None` when H3 rejects the coordinates.
pub fn approximate(loc: &Location) -> Option<Location> {
    let cell = h3o::LatLng::new(loc.latitude, loc.longitude)
        .ok()?
        .to_cell(h3o::Resolution::Six);
    let centre = h3o::LatLng::from(cell);
    Some(Location {
        latitude: centre.lat(),
        longitude: centre.lng(),
        hdop: loc.hdop,
        heading: loc.heading,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_and_restrictions_sit_inside_the_dedup() {
        let req = AggregateRequest {
            subject: "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:1".into(),
            source: Some("did:ethr:137:0xcd445F4c6bDAD32b68a2939b912150Fe3C88803E".into()),
            interval_us: 60_000_000,
            from_us: 30_000_000,
            to_us: 3_630_000_000,
            floats: vec![FloatRequest {
                name: "speed".into(),
                agg: FloatAgg::Avg,
                filter: None,
            }],
            ..AggregateRequest::default()
        };
        let sql = aggregate_sql(&req).unwrap().over("lake.signals");
        let dedup_start = sql.find("FROM (SELECT * FROM lake.signals WHERE").unwrap();
        let qualify = sql.find("QUALIFY row_number()").unwrap();
        let inner = &sql[dedup_start..qualify];
        for needle in [
            "subject_bucket = 219 AND subject = ?",
            "source = '0xcd445F4c6bDAD32b68a2939b912150Fe3C88803E'",
            "(name = 'speed')",
            "\"timestamp\" >= make_timestamp(30000000::BIGINT)",
        ] {
            assert!(
                inner.contains(needle),
                "{needle} not inside the dedup: {sql}"
            );
        }
        assert!(sql.contains(
            "((epoch_us(s.\"timestamp\") - 30000000) // 60000000) * 60000000 + 30000000"
        ));
    }
}
