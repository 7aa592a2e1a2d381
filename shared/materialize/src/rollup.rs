//! The rollups `lake.signals_latest` and `lake.events_latest`.
//!
//! The full recompute from the deduplicated base ([`signals_latest_select`],
//! [`events_latest_select`]) is the definition. Every write transaction that touches base rows
//! of a subject recomputes that subject's rollup rows from the base *inside the same
//! transaction*, so at every snapshot the rollups equal the recompute (no dirty sets, no fold
//! that can drift). [`rebuild`] recomputes a shard's buckets (all of them for the single writer),
//! one transaction per bucket.

use std::collections::BTreeSet;

use dq_lake::duckdb::Connection;
use dq_lake::{quote, Lake};

use crate::{Result, Shard};
use dq_tables::keys::signals_deduped_among;
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
    let filter = if skip.is_empty() {
        "true".to_owned()
    } else {
        let list: Vec<String> = skip.iter().map(|s| quote(s)).collect();
        format!("subject NOT IN ({})", list.join(", "))
    };
    let delta = signals_latest_over(&signals_deduped_among(new_rows, &filter, colliding));
    let newer = "o.subject IS NULL OR d.\"timestamp\" > o.\"timestamp\"";
    let newer_fix = "o.subject IS NULL OR d.loc_ts > o.loc_ts";
    let pick =
        |cond: &str, col: &str| format!("CASE WHEN {cond} THEN d.{col} ELSE o.{col} END AS {col}");
    let sql = format!(
        "CREATE OR REPLACE TEMP TABLE {DELTA} AS {delta};\n\
         CREATE OR REPLACE TEMP TABLE {MERGED} AS SELECT d.subject, d.subject_bucket, d.name, \
           {}, {}, {}, {}, {}, {}, {}, {}, \
           d.\"count\" + coalesce(o.\"count\", 0) AS \"count\", \
           CASE WHEN o.subject IS NULL THEN d.first_seen ELSE least(d.first_seen, o.first_seen) END AS first_seen, \
           CASE WHEN o.subject IS NULL THEN d.last_seen ELSE greatest(d.last_seen, o.last_seen) END AS last_seen \
         FROM {DELTA} d LEFT JOIN (SELECT * FROM lake.signals_latest \
           WHERE subject_bucket IN (SELECT DISTINCT subject_bucket FROM {DELTA})) o \
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
