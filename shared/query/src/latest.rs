//! Latest values and per-signal summaries: from the rollup
//! `lake.signals_latest` when there is no source filter, else (and when the rollup does not
//! exist yet) from the same recompute the materializer defines the rollup by
//! (`dq_tables::latest::signals_latest_select`) over the source-filtered, deduped base — so
//! both paths give the same answers by construction.

use crate::aggregate::{location_at, Location};
use crate::files::FileTable;
use crate::{check_subject, names_predicate, subject_predicate, Engine, Result};
use dq_lake::duckdb::params;
use dq_lake::quote;
use dq_tables::keys::signals_deduped_from;
use dq_tables::latest::signals_latest_over;

/// One rollup row (a `lake.signals_latest` row or its recompute).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LatestRow {
    /// Signal name.
    pub name: String,
    /// Latest timestamp of any value, µs.
    pub timestamp_us: i64,
    /// Value number at that time.
    pub value_number: f64,
    /// Value string at that time.
    pub value_string: String,
    /// Latest non-(0,0) location (zeros when never fixed).
    pub location: Location,
    /// Time of that fix, µs (0 when never fixed).
    pub loc_ts_us: i64,
    /// Deduped row count.
    pub count: i64,
    /// Earliest timestamp, µs.
    pub first_seen_us: i64,
    /// Latest timestamp, µs.
    pub last_seen_us: i64,
}

impl LatestRow {
    /// True when the row carries a real fix.
    pub fn has_fix(&self) -> bool {
        self.location.latitude != 0.0 || self.location.longitude != 0.0
    }
}

impl Engine {
    /// Every rollup row of `subject` (optionally restricted to `source`, an address or verbatim
    /// value, and to `names`), sorted by name.
    ///
    /// # Errors
    /// Database failures; an empty subject.
    pub fn latest_rows(
        &self,
        subject: &str,
        source: Option<&str>,
        names: Option<&[String]>,
    ) -> Result<Vec<LatestRow>> {
        check_subject(subject)?;
        let mut filter = vec![subject_predicate(subject)];
        if let Some(names) = names {
            if names.is_empty() {
                return Ok(Vec::new());
            }
            filter.push(names_predicate(names.iter().map(String::as_str)));
        }
        let rollup =
            source.is_none() && self.table_exists(&self.has_signals_rollup, "signals_latest")?;
        if let Some(src) = source {
            filter.push(format!("source = {}", quote(src)));
        }
        let filter = filter.join(" AND ");
        let table = if rollup {
            FileTable::SignalsLatest
        } else {
            FileTable::Signals
        };
        // The rollup has no time partition; the recompute reads the subject's whole history.
        let every_day = [(i64::MIN, i64::MAX)];
        let sql = |[relation]: &[String; 1]| {
            let from = if rollup {
                format!("{relation} WHERE {filter}")
            } else {
                let deduped = signals_deduped_from(relation, &filter);
                format!("({})", signals_latest_over(&deduped))
            };
            format!(
                "SELECT name, epoch_us(\"timestamp\"), coalesce(value_number, 0), coalesce(value_string, ''), \
                 coalesce(loc_lat, 0), coalesce(loc_lon, 0), coalesce(loc_hdop, 0), coalesce(loc_heading, 0), \
                 coalesce(epoch_us(loc_ts), 0), \"count\", epoch_us(first_seen), epoch_us(last_seen) \
                 FROM {from} ORDER BY name"
            )
        };
        self.rows_of(
            "latest signals",
            table,
            subject,
            every_day,
            sql,
            params![subject],
            |r| {
                Ok(LatestRow {
                    name: r.get(0)?,
                    timestamp_us: r.get(1)?,
                    value_number: r.get(2)?,
                    value_string: r.get(3)?,
                    location: location_at(r, 4)?,
                    loc_ts_us: r.get(8)?,
                    count: r.get(9)?,
                    first_seen_us: r.get(10)?,
                    last_seen_us: r.get(11)?,
                })
            },
        )
    }
}

/// `lastSeen` over rows: the latest timestamp of any signal; `None` when none (epoch).
pub fn last_seen(rows: &[LatestRow]) -> Option<i64> {
    rows.iter()
        .map(|r| r.last_seen_us)
        .max()
        .filter(|t| *t != 0)
}
