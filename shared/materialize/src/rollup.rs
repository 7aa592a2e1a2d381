//! The rollups `lake.signals_latest` and `lake.events_latest`.
//!
//! The full recompute from the deduplicated base ([`signals_latest_select`],
//! [`events_latest_select`]) is the definition. Every write transaction that touches base rows
//! of a subject recomputes that subject's rollup rows from the base *inside the same
//! transaction*, so at every snapshot the rollups equal the recompute (no dirty sets, no fold
//! that can drift). [`rebuild`] recomputes a shard's buckets (all of them for the single writer),
//! one transaction per bucket.

use std::collections::BTreeSet;

use std::sync::Arc;

use dq_decode::rows::SignalRow;
use dq_lake::duckdb::arrow::array::{
    ArrayRef, Float64Builder, Int32Builder, Int64Builder, StringBuilder,
    TimestampMicrosecondBuilder,
};
use dq_lake::duckdb::arrow::record_batch::RecordBatch;
use dq_lake::duckdb::Connection;
use dq_lake::{quote, Lake};
use foldhash::{HashMap, HashMapExt};

use crate::{Error, Result, Shard};
use dq_tables::keys::{read_tiebreak, signals_deduped_among};
use dq_tables::latest::{
    events_latest_select, signals_latest_over, signals_latest_select, subjects_filter,
};
use dq_tables::schema::{column_list, EVENTS_LATEST_COLUMNS, SIGNALS_LATEST_COLUMNS};

/// Replaces both rollups' rows of `subjects` with their recompute, on `conn` (normally inside
/// the caller's write transaction).
pub fn refresh_subjects(lake: &Lake, conn: &Connection, subjects: &BTreeSet<String>) -> Result<()> {
    refresh_signals(lake, conn, subjects)?;
    refresh_events(lake, conn, subjects)
}

/// Recomputes the `signals_latest` rows of `subjects` from the base.
pub fn refresh_signals(lake: &Lake, conn: &Connection, subjects: &BTreeSet<String>) -> Result<()> {
    if subjects.is_empty() {
        return Ok(());
    }
    let filter = subjects_filter(subjects);
    let sql = format!(
        "DELETE FROM lake.signals_latest WHERE {filter};\n\
         INSERT INTO lake.signals_latest ({}) {};",
        column_list(&SIGNALS_LATEST_COLUMNS),
        signals_latest_select(&filter),
    );
    conn.execute_batch(&sql)
        .map_err(|e| lake.error("refresh signals rollup", e))?;
    Ok(())
}

/// Recomputes the `events_latest` rows of `subjects` from the base.
pub fn refresh_events(lake: &Lake, conn: &Connection, subjects: &BTreeSet<String>) -> Result<()> {
    if subjects.is_empty() {
        return Ok(());
    }
    let filter = subjects_filter(subjects);
    let sql = format!(
        "DELETE FROM lake.events_latest WHERE {filter};\n\
         INSERT INTO lake.events_latest ({}) {};",
        column_list(&EVENTS_LATEST_COLUMNS),
        events_latest_select(&filter),
    );
    conn.execute_batch(&sql)
        .map_err(|e| lake.error("refresh events rollup", e))?;
    Ok(())
}

/// Folds a window's newly inserted signal rows (`new_rows`, a table with the signals columns)
/// into `signals_latest` without rescanning history. Exact — equal to the recompute — when no
/// new row shares its R1 key (subject, name, timestamp) with a row already at rest, because then
/// the deduplicated base is the disjoint union of the old base and the deduplicated new rows:
/// counts add, first/last seen take min/max, and the latest value and fix come from whichever
/// side holds the later timestamp. Subjects where that does not hold (a read-key collision, a
/// voided event) are in `skip` and must be recomputed with [`refresh_signals`] instead. Only
/// subjects in `colliding` can have two new rows of one read key; the others' rows skip the
/// read dedup ([`signals_deduped_among`]).
pub fn merge_new_signals(
    lake: &Lake,
    conn: &Connection,
    new_rows: &str,
    skip: &BTreeSet<String>,
    colliding: &BTreeSet<String>,
) -> Result<()> {
    let filter = skip_filter(skip);
    let delta = signals_latest_over(&signals_deduped_among(new_rows, &filter, colliding));
    conn.execute_batch(&format!("CREATE OR REPLACE TEMP TABLE {DELTA} AS {delta}"))
        .map_err(|e| lake.error("aggregate new signals for the rollup", e))?;
    merge_delta(lake, conn, DELTA, skip)
}

/// `subject NOT IN (skip)`, or `true`.
fn skip_filter(skip: &BTreeSet<String>) -> String {
    if skip.is_empty() {
        "true".to_owned()
    } else {
        let list: Vec<String> = skip.iter().map(|s| quote(s)).collect();
        format!("subject NOT IN ({})", list.join(", "))
    }
}

/// Folds `delta` (a table with the `signals_latest` columns: the rollup of a window's new rows
/// alone, [`merge_new_signals`] or [`signals_delta`]) into `signals_latest`, leaving out the
/// subjects in `skip`: counts add, first/last seen take min/max, the latest value and fix come
/// from the side with the later timestamp.
pub fn merge_delta(
    lake: &Lake,
    conn: &Connection,
    delta: &str,
    skip: &BTreeSet<String>,
) -> Result<()> {
    let filter = skip_filter(skip);
    let newer = "o.subject IS NULL OR d.\"timestamp\" > o.\"timestamp\"";
    let newer_fix = "o.subject IS NULL OR d.loc_ts > o.loc_ts";
    let pick =
        |cond: &str, col: &str| format!("CASE WHEN {cond} THEN d.{col} ELSE o.{col} END AS {col}");
    let sql = format!(
        "CREATE OR REPLACE TEMP TABLE {MERGED} AS SELECT d.subject, d.subject_bucket, d.name, \
           {}, {}, {}, {}, {}, {}, {}, {}, \
           d.\"count\" + coalesce(o.\"count\", 0) AS \"count\", \
           CASE WHEN o.subject IS NULL THEN d.first_seen ELSE least(d.first_seen, o.first_seen) END AS first_seen, \
           CASE WHEN o.subject IS NULL THEN d.last_seen ELSE greatest(d.last_seen, o.last_seen) END AS last_seen \
         FROM (SELECT * FROM {delta} WHERE {filter}) d LEFT JOIN (SELECT * FROM lake.signals_latest \
           WHERE subject_bucket IN (SELECT DISTINCT subject_bucket FROM {delta})) o \
           ON o.subject = d.subject AND o.name = d.name;\n\
         DELETE FROM lake.signals_latest \
           WHERE subject_bucket IN (SELECT DISTINCT subject_bucket FROM {MERGED}) \
           AND EXISTS (SELECT 1 FROM {MERGED} m \
             WHERE m.subject = signals_latest.subject AND m.name = signals_latest.name);\n\
         INSERT INTO lake.signals_latest ({cols}) SELECT {cols} FROM {MERGED};",
        pick(newer, "\"timestamp\""),
        pick(newer, "value_number"),
        pick(newer, "value_string"),
        pick(newer_fix, "loc_lat"),
        pick(newer_fix, "loc_lon"),
        pick(newer_fix, "loc_hdop"),
        pick(newer_fix, "loc_heading"),
        pick(newer_fix, "loc_ts"),
        cols = column_list(&SIGNALS_LATEST_COLUMNS),
    );
    conn.execute_batch(&sql)
        .map_err(|e| lake.error("merge new signals into rollup", e))?;
    Ok(())
}

/// The rollup of a window's new signal rows alone (`rows` at the positions `kept`, one per
/// write key) as an Arrow batch in [`SIGNALS_LATEST_COLUMNS`] order: what
/// [`signals_latest_over`] of the rows deduplicated on the read key answers (R1, the lowest
/// `cloud_event_id` wins, [`read_tiebreak`]), computed from the decoded rows so the window needs
/// no staged copy of them to fold into the rollup ([`merge_delta`]).
/// `the_rust_delta_is_the_sql_aggregate` pins the two definitions together.
pub fn signals_delta(rows: &[SignalRow], kept: &[u32]) -> Result<RecordBatch> {
    // Grouped by subject number and name: a row hashes its short name, not its subject.
    let mut subjects = crate::write::Subjects::default();
    let mut groups: HashMap<(usize, &str), Vec<&SignalRow>> = HashMap::new();
    for &i in kept {
        let r = rows.get(i as usize).ok_or_else(|| Error::Arrow {
            table: "signals_latest",
            message: format!("row position {i} outside the window's {} rows", rows.len()),
        })?;
        groups
            .entry((subjects.index(&r.subject), &r.name))
            .or_default()
            .push(r);
    }
    // In (subject, name) order; a group's rows share its subject.
    let mut groups: Vec<(&str, &str, Vec<&SignalRow>)> = groups
        .into_iter()
        .filter_map(|((_, n), members)| Some((&*members.first()?.subject, n, members)))
        .collect();
    groups.sort_unstable_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    let n = groups.len();
    let mut subject = StringBuilder::with_capacity(n, n * 64);
    let mut bucket = Int32Builder::with_capacity(n);
    let mut name = StringBuilder::with_capacity(n, n * 24);
    let ts = || TimestampMicrosecondBuilder::with_capacity(n).with_timezone("UTC");
    let (mut latest, mut loc_ts, mut first, mut last) = (ts(), ts(), ts(), ts());
    let mut number = Float64Builder::with_capacity(n);
    let mut string = StringBuilder::with_capacity(n, n);
    let mut loc: [Float64Builder; 4] = std::array::from_fn(|_| Float64Builder::with_capacity(n));
    let mut count = Int64Builder::with_capacity(n);
    for (_, _, mut members) in groups {
        // Read-key winners: by time, the lowest cloud_event_id first within one time.
        members.sort_by(|a, b| {
            a.timestamp
                .cmp(&b.timestamp)
                .then_with(|| read_tiebreak(&a.cloud_event_id, &b.cloud_event_id))
        });
        members.dedup_by_key(|r| r.timestamp);
        let (Some(lo), Some(hi)) = (members.first(), members.last()) else {
            continue;
        };
        let fix = members
            .iter()
            .rev()
            .find(|r| r.loc_lat != 0.0 || r.loc_lon != 0.0);
        subject.append_value(&hi.subject);
        bucket.append_value(hi.subject_bucket);
        name.append_value(&hi.name);
        latest.append_value(hi.timestamp.timestamp_micros());
        number.append_value(hi.value_number);
        string.append_value(&hi.value_string);
        let fix_values = fix.map_or([0.0; 4], |f| {
            [f.loc_lat, f.loc_lon, f.loc_hdop, f.loc_heading]
        });
        for (b, v) in loc.iter_mut().zip(fix_values) {
            b.append_value(v);
        }
        loc_ts.append_value(fix.map_or(0, |f| f.timestamp.timestamp_micros()));
        count.append_value(members.len() as i64);
        first.append_value(lo.timestamp.timestamp_micros());
        last.append_value(hi.timestamp.timestamp_micros());
    }
    let [mut lat, mut lon, mut hdop, mut heading] = loc;
    let columns: Vec<ArrayRef> = vec![
        Arc::new(subject.finish()),
        Arc::new(bucket.finish()),
        Arc::new(name.finish()),
        Arc::new(latest.finish()),
        Arc::new(number.finish()),
        Arc::new(string.finish()),
        Arc::new(lat.finish()),
        Arc::new(lon.finish()),
        Arc::new(hdop.finish()),
        Arc::new(heading.finish()),
        Arc::new(loc_ts.finish()),
        Arc::new(count.finish()),
        Arc::new(first.finish()),
        Arc::new(last.finish()),
    ];
    crate::write::named_batch(
        "signals_latest",
        SIGNALS_LATEST_COLUMNS.iter().map(|(n, _)| *n),
        columns,
    )
}

const DELTA: &str = "temp.main._dq_signals_delta";
const MERGED: &str = "temp.main._dq_signals_merged";

fn replace(lake: &Lake, conn: &Connection, filter: &str) -> Result<()> {
    let sql = format!(
        "DELETE FROM lake.signals_latest WHERE {filter};\n\
         INSERT INTO lake.signals_latest ({}) {};\n\
         DELETE FROM lake.events_latest WHERE {filter};\n\
         INSERT INTO lake.events_latest ({}) {};",
        column_list(&SIGNALS_LATEST_COLUMNS),
        signals_latest_select(filter),
        column_list(&EVENTS_LATEST_COLUMNS),
        events_latest_select(filter),
    );
    conn.execute_batch(&sql)
        .map_err(|e| lake.error("refresh rollups", e))?;
    Ok(())
}

/// What [`rebuild`] recomputed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RebuildSummary {
    /// Buckets recomputed (one transaction each).
    pub buckets: usize,
    /// `signals_latest` rows of those buckets afterwards.
    pub signal_keys: i64,
    /// `events_latest` rows of those buckets afterwards.
    pub event_keys: i64,
}

/// Recomputes both rollups of `shard`'s buckets from the base, one transaction per bucket
/// present in a base or rollup table (memory-bounded; readers see the rollup refill bucket by
/// bucket). Only the shard's buckets: their windows are held off by the shard's lease, and
/// other shards' windows never touch them, so no commit of either races the rebuild.
pub fn rebuild(lake: &Lake, shard: Shard) -> Result<RebuildSummary> {
    let mut conn = lake.connect()?;
    let owned = shard.bucket_predicate(None);
    let buckets: Vec<i32> = {
        let mut stmt = conn
            .prepare(&format!(
                "SELECT DISTINCT subject_bucket FROM (SELECT subject_bucket FROM lake.signals \
                 UNION ALL SELECT subject_bucket FROM lake.events \
                 UNION ALL SELECT subject_bucket FROM lake.signals_latest \
                 UNION ALL SELECT subject_bucket FROM lake.events_latest) WHERE {owned} ORDER BY 1"
            ))
            .map_err(|e| lake.error("list buckets", e))?;
        stmt.query_map([], |r| r.get(0))
            .and_then(|rows| rows.collect::<Result<_, _>>())
            .map_err(|e| lake.error("list buckets", e))?
    };
    for bucket in &buckets {
        dq_lake::retry::on_conflict("rebuild rollup bucket", || {
            let tx = conn
                .transaction()
                .map_err(|e| lake.error("begin rollup rebuild", e))?;
            replace(lake, &tx, &format!("subject_bucket = {bucket}")).map_err(|e| match e {
                crate::Error::Lake(l) => l,
                other => dq_lake::Error::Config(other.to_string()),
            })?;
            tx.commit()
                .map_err(|e| lake.error("commit rollup rebuild", e))
        })?;
    }
    let count = |table: &str| -> Result<i64> {
        conn.query_row(
            &format!("SELECT count(*) FROM lake.{table} WHERE {owned}"),
            [],
            |r| r.get(0),
        )
        .map_err(|e| lake.error("count rollup rows", e).into())
    };
    Ok(RebuildSummary {
        buckets: buckets.len(),
        signal_keys: count("signals_latest")?,
        event_keys: count("events_latest")?,
    })
}

/// Rows on either side of `rollup` EXCEPT ALL its recompute (0 = equal).
pub fn diff(lake: &Lake, conn: &Connection) -> Result<(i64, i64)> {
    let one = |table: &str, cols: &str, oracle: String| -> Result<i64> {
        let sql = format!(
            "SELECT count(*) FROM ((SELECT {cols} FROM lake.{table} EXCEPT ALL {oracle}) \
             UNION ALL ({oracle} EXCEPT ALL SELECT {cols} FROM lake.{table}))"
        );
        conn.query_row(&sql, [], |r| r.get(0))
            .map_err(|e| lake.error("diff rollup against recompute", e).into())
    };
    Ok((
        one(
            "signals_latest",
            &column_list(&SIGNALS_LATEST_COLUMNS),
            signals_latest_select("true"),
        )?,
        one(
            "events_latest",
            &column_list(&EVENTS_LATEST_COLUMNS),
            events_latest_select("true"),
        )?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dq_lake::duckdb::arrow::array::TimestampMicrosecondBuilder;
    use dq_tables::keys::signals_deduped_from;
    use dq_tables::schema::{create_sql, SIGNAL_COLUMNS};
    use proptest::prelude::*;

    /// `rows` as one batch in `lake.signals` column order.
    fn signals_batch(rows: &[SignalRow]) -> RecordBatch {
        let s = |f: &dyn Fn(&SignalRow) -> &str| {
            let mut b = StringBuilder::new();
            rows.iter().for_each(|r| b.append_value(f(r)));
            Arc::new(b.finish()) as ArrayRef
        };
        let d = |f: &dyn Fn(&SignalRow) -> f64| {
            let mut b = Float64Builder::new();
            rows.iter().for_each(|r| b.append_value(f(r)));
            Arc::new(b.finish()) as ArrayRef
        };
        let mut bucket = Int32Builder::new();
        let mut ts = TimestampMicrosecondBuilder::new().with_timezone("UTC");
        for r in rows {
            bucket.append_value(r.subject_bucket);
            ts.append_value(r.timestamp.timestamp_micros());
        }
        let columns: Vec<ArrayRef> = vec![
            s(&|r| &r.subject),
            Arc::new(bucket.finish()),
            s(&|r| &r.name),
            Arc::new(ts.finish()),
            s(&|r| &r.source),
            s(&|r| &r.producer),
            s(&|r| &r.cloud_event_id),
            d(&|r| r.value_number),
            s(&|r| &r.value_string),
            d(&|r| r.loc_lat),
            d(&|r| r.loc_lon),
            d(&|r| r.loc_hdop),
            d(&|r| r.loc_heading),
        ];
        crate::write::named_batch("signals", SIGNAL_COLUMNS.iter().map(|(n, _)| *n), columns)
            .unwrap()
    }

    /// Rows of the SQL aggregate over `rows` and of the Rust delta that the other lacks.
    fn differences(rows: &[SignalRow]) -> (i64, i64, usize) {
        let kept = crate::write::signal_dedup(rows, false).kept;
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(&format!(
            "{}; {};",
            create_sql("t", &SIGNAL_COLUMNS, false),
            create_sql("d", &SIGNALS_LATEST_COLUMNS, false)
        ))
        .unwrap();
        let kept_rows: Vec<SignalRow> = kept.iter().map(|i| rows[*i as usize].clone()).collect();
        let mut app = conn.appender("t").unwrap();
        app.append_record_batch(signals_batch(&kept_rows)).unwrap();
        app.flush().unwrap();
        let delta = signals_delta(rows, &kept).unwrap();
        let n = delta.num_rows();
        let mut app = conn.appender("d").unwrap();
        app.append_record_batch(delta).unwrap();
        app.flush().unwrap();
        let sql = signals_latest_over(&signals_deduped_from("t", "true"));
        let count = |q: String| conn.query_row(&q, [], |r| r.get::<_, i64>(0)).unwrap();
        (
            count(format!(
                "SELECT count(*) FROM ({sql} EXCEPT ALL SELECT * FROM d)"
            )),
            count(format!(
                "SELECT count(*) FROM (SELECT * FROM d EXCEPT ALL {sql})"
            )),
            n,
        )
    }

    fn row(subject: u8, name: u8, micros: i64, event: u8, value: f64, fix: u8) -> SignalRow {
        let subject =
            format!("did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:{subject}");
        SignalRow {
            subject_bucket: dq_cloudevent::subject_bucket(&subject),
            subject: subject.into(),
            name: format!("n{name}").into(),
            timestamp: chrono::DateTime::from_timestamp_micros(1_700_000_000_000_000 + micros)
                .unwrap(),
            source: "0xsource".into(),
            producer: "producer".into(),
            cloud_event_id: format!("e{event}").into(),
            value_number: value,
            value_string: format!("v{value}"),
            loc_lat: if fix & 1 == 1 { value } else { 0.0 },
            loc_lon: if fix & 2 == 2 { -value } else { 0.0 },
            loc_hdop: f64::from(fix),
            loc_heading: value / 2.0,
        }
    }

    #[test]
    fn the_rust_delta_is_the_sql_aggregate_on_a_known_window() {
        let rows = vec![
            // Read-key collision: e1 beats e2 at time 5 whatever the order.
            row(1, 1, 5, 2, 20.0, 0),
            row(1, 1, 5, 1, 10.0, 0),
            row(1, 1, 3, 3, 30.0, 1),
            // The latest fix is older than the latest value; the loser of a collision has a fix.
            row(1, 2, 7, 2, 1.0, 3),
            row(1, 2, 9, 1, 2.0, 0),
            row(1, 2, 9, 4, 3.0, 3),
            // A key that never had a fix, and a write-key repeat (dropped by the dedup).
            row(2, 1, 1, 1, 4.0, 0),
            row(2, 1, 1, 1, 5.0, 0),
        ];
        assert_eq!(differences(&rows), (0, 0, 3));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn the_rust_delta_is_the_sql_aggregate(
            rows in prop::collection::vec((0u8..3, 0u8..3, 0i64..6, 0u8..5, -3i8..4, 0u8..4), 0..60)
        ) {
            let rows: Vec<SignalRow> = rows
                .into_iter()
                .map(|(s, n, t, e, v, f)| row(s, n, t, e, f64::from(v), f))
                .collect();
            let (missing, extra, _) = differences(&rows);
            prop_assert_eq!((missing, extra), (0, 0));
        }
    }
}
