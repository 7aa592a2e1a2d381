//! The part of din's maintainer that consumers feel: snapshot expiry held back by the consumer
//! floor, then cleanup (din-raw §6.2 steps 3, 4, 7, 8; §6.3). Tests use tiny retentions to drive a
//! consumer into the expired-feed path.

use chrono::{DateTime, Duration, Utc};
use lake::{progress, Lake};

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

/// Flushes inlined rows, then expires snapshots older than the cutoff and deletes the files no
/// retained snapshot references. Every snapshot above the live floor survives; the floor snapshot
/// itself may go, so a consumer resumes at `cursor + 1`.
pub fn expire(lake: &Lake, retention: Retention) -> Result<ExpireReport> {
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
    lake.exec(
        "flush inlined data",
        "CALL ducklake_flush_inlined_data('lake')",
    )?;
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
