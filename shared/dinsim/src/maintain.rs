//! The part of din's maintainer that consumers feel: snapshot
//! expiry held back by the consumer floor, then cleanup ([`expire`]); and the whole cycle with the
//! delete-heavy rewrite and the bounded merge of adjacent files in between ([`cycle`]), which is
//! what gives dq's readers few files per partition in production. Tests use tiny retentions to
//! drive a consumer into the expired-feed path.

use chrono::{DateTime, Duration, Utc};
use dq_lake::{progress, Lake};

use crate::Result;

/// Retention knobs (din: `LAKE_SNAPSHOT_RETENTION` 72h, `LAKE_CONSUMER_STALENESS` 1h).
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    /// Snapshots older than this may expire.
    pub keep: Duration,
    /// Consumers not updated within this no longer hold the floor.
    pub staleness: Duration,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            keep: Duration::hours(72),
            staleness: Duration::hours(1),
        }
    }
}

/// What an expiry cycle did.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpireReport {
    /// The frozen cutoff: snapshots committed before it were expired.
    pub cutoff: DateTime<Utc>,
    /// The live consumer floor, if any consumer is live.
    pub floor: Option<i64>,
    /// True when the floor, not retention, set the cutoff.
    pub floor_binding: bool,
    /// Snapshots expired by this cycle.
    pub expired: usize,
}

/// What one whole maintenance cycle did.
#[derive(Debug, Clone, PartialEq)]
pub struct CycleReport {
    /// The expiry part.
    pub expire: ExpireReport,
    /// Merge calls that merged something.
    pub merge_calls: usize,
    /// Rows the merge calls returned (one per merged group of files).
    pub merged: usize,
}

/// din's merge starts at 32 files per call and doubles after each call.
const MERGE_START: usize = 32;
/// The ceiling when neither `LAKE_MERGE_MAX_FILES_PER_CALL` nor a memory limit is known.
const MERGE_CEILING: usize = 256;

/// Flushes inlined rows, then expires snapshots older than the cutoff and deletes the files no
/// retained snapshot references. Every snapshot above the live floor survives; the floor snapshot
/// itself may go, so a consumer resumes at `cursor + 1`.
pub fn expire(lake: &Lake, retention: Retention) -> Result<ExpireReport> {
    let (cutoff, floor, floor_binding) = freeze_cutoff(lake, retention)?;
    flush(lake)?;
    expire_and_clean(lake, cutoff, floor, floor_binding)
}

/// One whole din maintenance cycle: freeze the cutoff, flush inlined rows, rewrite delete-heavy
/// files (threshold 0.5, in an explicit transaction as din does), merge adjacent files in calls
/// of 32, 64, … up to 256 files until one merges nothing, then expire and clean up.
pub fn cycle(lake: &Lake, retention: Retention) -> Result<CycleReport> {
    let (cutoff, floor, floor_binding) = freeze_cutoff(lake, retention)?;
    flush(lake)?;
    lake.exec(
        "rewrite data files",
        "BEGIN; CALL ducklake_rewrite_data_files('lake', delete_threshold => 0.5); COMMIT",
    )
    .inspect_err(|_| {
        let _ = lake.exec("roll back the rewrite", "ROLLBACK");
    })?;
    let (mut per_call, mut merge_calls, mut merged) = (MERGE_START, 0, 0);
    loop {
        let rows: usize = lake
            .conn()
            .prepare("CALL ducklake_merge_adjacent_files('lake', max_compacted_files => ?)")
            .and_then(|mut stmt| {
                let rows = stmt.query_map([per_call as i64], |_| Ok(()))?;
                rows.collect::<dq_lake::duckdb::Result<Vec<()>>>()
            })
            .map(|rows| rows.len())
            .map_err(|e| lake.error("merge adjacent files", e))?;
        if rows == 0 {
            break;
        }
        merge_calls += 1;
        merged += rows;
        per_call = (per_call * 2).min(MERGE_CEILING);
    }
    Ok(CycleReport {
        expire: expire_and_clean(lake, cutoff, floor, floor_binding)?,
        merge_calls,
        merged,
    })
}

/// The expire cutoff, computed before anything else in a cycle so a long merge cannot push it
/// later: `(cutoff, live floor, floor binding)`.
fn freeze_cutoff(lake: &Lake, retention: Retention) -> Result<(DateTime<Utc>, Option<i64>, bool)> {
    let floor = progress::floor(lake, retention.staleness)?;
    let now = Utc::now();
    let by_retention = now - retention.keep;
    let bound: Option<DateTime<Utc>> = match floor {
        Some(f) => lake
            .conn()
            .query_row(
                "SELECT min(snapshot_time) FROM lake.snapshots() WHERE snapshot_id > ?",
                [f],
                |r| r.get(0),
            )
            .map_err(|e| lake.error("read floor snapshot time", e))?,
        None => None,
    };
    let (cutoff, floor_binding) = match bound {
        Some(t) if t < by_retention => (t, true),
        _ => (by_retention, false),
    };
    if floor_binding {
        tracing::warn!(?floor, %cutoff, "consumer floor holds snapshot expiry back");
    }
    Ok((cutoff, floor, floor_binding))
}

fn flush(lake: &Lake) -> Result<()> {
    Ok(lake.exec(
        "flush inlined data",
        "CALL ducklake_flush_inlined_data('lake')",
    )?)
}

fn expire_and_clean(
    lake: &Lake,
    cutoff: DateTime<Utc>,
    floor: Option<i64>,
    floor_binding: bool,
) -> Result<ExpireReport> {
    let before = progress::snapshots(lake)?.len();
    lake.conn()
        .execute(
            "CALL ducklake_expire_snapshots('lake', older_than => to_timestamp(?))",
            [cutoff.timestamp_micros() as f64 / 1e6],
        )
        .map_err(|e| lake.error("expire snapshots", e))?;
    lake.exec(
        "clean up old files",
        "CALL ducklake_cleanup_old_files('lake', cleanup_all => true)",
    )?;
    let after = progress::snapshots(lake)?.len();
    Ok(ExpireReport {
        cutoff,
        floor,
        floor_binding,
        expired: before.saturating_sub(after),
    })
}
