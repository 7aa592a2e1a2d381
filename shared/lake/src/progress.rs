//! din's snapshot bookkeeping as seen by a consumer: `meta.din_consumer_progress` (the expiry
//! floor: din keeps every snapshot at or after the oldest fresh consumer's) and the catalog's
//! snapshot list.

use chrono::{DateTime, Utc};

use crate::{Lake, Result};

/// The consumer-progress DDL, identical to din's and Go dq's.
pub const CREATE_SQL: &str = "CREATE TABLE IF NOT EXISTS meta.din_consumer_progress \
    (consumer VARCHAR, snapshot_id BIGINT, updated_at TIMESTAMP WITH TIME ZONE)";

/// Creates `meta.din_consumer_progress` if missing (din does at boot; dq does defensively).
pub fn ensure(lake: &Lake) -> Result<()> {
    crate::retry::on_conflict("ensure din_consumer_progress", || {
        lake.exec("create meta.din_consumer_progress", CREATE_SQL)
    })
}

/// Records that `consumer` has fully processed everything up to `snapshot_id`: delete then insert
/// in one transaction (the postgres extension has no upsert on a constraint-less table).
pub fn record(lake: &Lake, consumer: &str, snapshot_id: i64) -> Result<()> {
    let mut conn = lake.connect()?;
    let tx = conn
        .transaction()
        .map_err(|e| lake.error("begin progress upsert", e))?;
    tx.execute(
        "DELETE FROM meta.din_consumer_progress WHERE consumer = ?",
        [consumer],
    )
    .map_err(|e| lake.error("delete consumer progress", e))?;
    tx.execute(
        "INSERT INTO meta.din_consumer_progress VALUES (?, ?, now())",
        duckdb::params![consumer, snapshot_id],
    )
    .map_err(|e| lake.error("insert consumer progress", e))?;
    tx.commit()
        .map_err(|e| lake.error("commit consumer progress", e))
}

/// One consumer's row.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerProgress {
    /// Consumer name (Go dq: `dq`).
    pub consumer: String,
    /// Highest snapshot fully processed.
    pub snapshot_id: i64,
    /// When it was written.
    pub updated_at: DateTime<Utc>,
}

/// Every consumer row.
pub fn list(lake: &Lake) -> Result<Vec<ConsumerProgress>> {
    let mut stmt = lake
        .conn()
        .prepare("SELECT consumer, snapshot_id, updated_at FROM meta.din_consumer_progress ORDER BY consumer")
        .map_err(|e| lake.error("read consumer progress", e))?;
    stmt.query_map([], |r| {
        Ok(ConsumerProgress {
            consumer: r.get(0)?,
            snapshot_id: r.get(1)?,
            updated_at: r.get(2)?,
        })
    })
    .and_then(|rows| rows.collect())
    .map_err(|e| lake.error("read consumer progress", e))
}

/// The floor: the lowest snapshot among consumers updated within `staleness`.
pub fn floor(lake: &Lake, staleness: chrono::Duration) -> Result<Option<i64>> {
    lake.conn()
        .query_row(
            "SELECT min(snapshot_id) FROM meta.din_consumer_progress WHERE updated_at > now() - to_microseconds(?)",
            [staleness.num_microseconds().unwrap_or(i64::MAX)],
            |r| r.get(0),
        )
        .map_err(|e| lake.error("read consumer floor", e))
}

/// Moves a consumer's `updated_at` back by `by` (din's tests do this to make a consumer stale).
pub fn backdate(lake: &Lake, consumer: &str, by: chrono::Duration) -> Result<()> {
    lake.conn()
        .execute(
            "UPDATE meta.din_consumer_progress SET updated_at = updated_at - to_microseconds(?) WHERE consumer = ?",
            duckdb::params![by.num_microseconds().unwrap_or(i64::MAX), consumer],
        )
        .map(|_| ())
        .map_err(|e| lake.error("backdate consumer progress", e))
}

/// A catalog snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// Catalog-global snapshot id.
    pub id: i64,
    /// Commit time.
    pub time: DateTime<Utc>,
}

/// The newest snapshot id of the catalog.
pub fn head(lake: &Lake) -> Result<i64> {
    lake.conn()
        .query_row("SELECT max(snapshot_id) FROM lake.snapshots()", [], |r| {
            r.get(0)
        })
        .map_err(|e| lake.error("read head snapshot", e))
}

/// Every retained snapshot, oldest first.
pub fn snapshots(lake: &Lake) -> Result<Vec<Snapshot>> {
    let mut stmt = lake
        .conn()
        .prepare("SELECT snapshot_id, snapshot_time FROM lake.snapshots() ORDER BY snapshot_id")
        .map_err(|e| lake.error("list snapshots", e))?;
    stmt.query_map([], |r| {
        Ok(Snapshot {
            id: r.get(0)?,
            time: r.get(1)?,
        })
    })
    .and_then(|rows| rows.collect())
    .map_err(|e| lake.error("list snapshots", e))
}
