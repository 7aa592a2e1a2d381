//! The rollups' definitions: `lake.signals_latest` and `lake.events_latest` are, at every
//! snapshot, the recompute of these queries over the deduplicated base. The materializer writes
//! them (`dq_materialize::rollup`); the read side recomputes from the same text where a rollup
//! cannot answer (a source filter, a time bound).

use std::collections::BTreeSet;

use dq_lake::quote;

use crate::keys::{events_deduped, signals_deduped};

const HAS_FIX: &str = "loc_lat <> 0 OR loc_lon <> 0";

/// The `signals_latest` recompute over the R1-deduplicated base restricted by `filter`, columns
/// in [`SIGNALS_LATEST_COLUMNS`] order. Value and location advance independently; `loc_ts` is
/// the epoch when a key never had a fix.
pub fn signals_latest_select(filter: &str) -> String {
    signals_latest_over(&signals_deduped(filter))
}

/// The rollup aggregate over any R1-deduplicated signals query.
pub fn signals_latest_over(deduped: &str) -> String {
    let loc = |c: &str| {
        format!("coalesce(arg_max({c}, \"timestamp\") FILTER (WHERE {HAS_FIX}), 0) AS {c}")
    };
    format!(
        "SELECT subject, any_value(subject_bucket) AS subject_bucket, name, \
         max(\"timestamp\") AS \"timestamp\", \
         arg_max(value_number, \"timestamp\") AS value_number, \
         arg_max(value_string, \"timestamp\") AS value_string, \
         {}, {}, {}, {}, \
         coalesce(max(\"timestamp\") FILTER (WHERE {HAS_FIX}), to_timestamp(0)) AS loc_ts, \
         count(*) AS \"count\", min(\"timestamp\") AS first_seen, max(\"timestamp\") AS last_seen \
         FROM ({}) GROUP BY subject, name",
        loc("loc_lat"),
        loc("loc_lon"),
        loc("loc_hdop"),
        loc("loc_heading"),
        deduped
    )
}

/// The `events_latest` recompute over the R2-deduplicated base restricted by `filter`.
pub fn events_latest_select(filter: &str) -> String {
    events_latest_over(&events_deduped(filter))
}

/// The events rollup aggregate over any R2-deduplicated events query.
pub fn events_latest_over(deduped: &str) -> String {
    format!(
        "SELECT subject, any_value(subject_bucket) AS subject_bucket, name, count(*) AS \"count\", \
         min(\"timestamp\") AS first_seen, max(\"timestamp\") AS last_seen \
         FROM ({deduped}) GROUP BY subject, name"
    )
}

/// A predicate selecting `subjects` with a literal bucket list first, so DuckLake prunes files.
pub fn subjects_filter(subjects: &BTreeSet<String>) -> String {
    let buckets: BTreeSet<i32> = subjects
        .iter()
        .map(|s| dq_cloudevent::subject_bucket(s))
        .collect();
    let buckets: Vec<String> = buckets.iter().map(i32::to_string).collect();
    let subjects: Vec<String> = subjects.iter().map(|s| quote(s)).collect();
    format!(
        "subject_bucket IN ({}) AND subject IN ({})",
        buckets.join(", "),
        subjects.join(", ")
    )
}
