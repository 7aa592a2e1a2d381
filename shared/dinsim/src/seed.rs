//! Streams a synthetic fleet into the lake as din would: events grouped into bundles by a window
//! of fleet time, with din's faults mixed in deterministically — redelivered
//! bundles (a new snapshot of the same rows, blobs under new keys), bundles split into two
//! snapshots, late arrivals, and tombstones that void an earlier event in a later bundle.

use std::time::Duration;

use dq_cloudevent::event::RawEvent;
use dq_cloudevent::types;
use dq_fleet::{Fleet, FleetConfig};

use crate::{tombstone, Result, Writer};

/// The EIP-55 address the simulated attester signs tombstones with.
pub const ATTESTER: &str = "0x07B584f6a7125491C991ca2a45ab9e641B1CeE1b";

/// How to seed. Every fault knob is "every Nth", 0 = never, so runs are deterministic.
#[derive(Debug, Clone)]
pub struct SeedOptions {
    /// The fleet to generate.
    pub fleet: FleetConfig,
    /// Fleet time per bundle (din flushes a sink buffer every few minutes).
    pub bundle_window: Duration,
    /// Re-commit every Nth bundle (redelivery after a lost ack): the same rows as a new snapshot,
    /// except that externalized payloads get new blob keys, as a retried din request does.
    pub duplicate_every: u32,
    /// Commit every Nth bundle as two halves (din's bisecting isolation): two snapshots.
    pub split_every: u32,
    /// Hold every Nth event back two bundles (a late arrival landing in an old partition).
    pub late_every: u32,
    /// Void every Nth status event with a tombstone in the next bundle.
    pub tombstone_every: u32,
}

impl Default for SeedOptions {
    fn default() -> Self {
        Self {
            fleet: FleetConfig::default(),
            bundle_window: Duration::from_secs(3600),
            duplicate_every: 0,
            split_every: 0,
            late_every: 0,
            tombstone_every: 0,
        }
    }
}

/// What seeding wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct SeedReport {
    /// Events the fleet generated.
    pub events: u64,
    /// Rows appended to `raw_events` (events + redelivered copies + tombstones).
    pub rows: u64,
    /// Bundles formed (before redelivery and splitting).
    pub bundles: u64,
    /// Commits made, each one snapshot.
    pub commits: u64,
    /// Bundles committed twice.
    pub duplicate_bundles: u64,
    /// Bundles committed as two halves.
    pub split_bundles: u64,
    /// Events delivered two bundles late.
    pub late_events: u64,
    /// Tombstones written.
    pub tombstones: u64,
    /// Payloads moved to the blob store (redelivered copies included).
    pub externalized: u64,
    /// First and last snapshot written.
    pub snapshots: Option<(i64, i64)>,
}

impl SeedReport {
    fn committed(&mut self, snapshot: Option<i64>, rows: usize) {
        if let Some(s) = snapshot {
            self.snapshots = Some((self.snapshots.map_or(s, |(first, _)| first), s));
            self.commits += 1;
        }
        self.rows += rows as u64;
    }
}

fn every(n: u32, count: u64) -> bool {
    n > 0 && count.is_multiple_of(u64::from(n))
}

/// Generates `opts.fleet` and writes it through `writer`, calling `progress(events_done)` after
/// each bundle.
pub async fn seed(
    writer: &Writer<'_>,
    opts: &SeedOptions,
    mut progress: impl FnMut(u64),
) -> Result<SeedReport> {
    let fleet = Fleet::new(opts.fleet.clone())?;
    let mut report = SeedReport::default();
    // Events waiting for a later bundle: tombstones (next bundle) and late arrivals (the one after).
    let mut next: Vec<RawEvent> = Vec::new();
    let mut after_next: Vec<RawEvent> = Vec::new();
    let (mut status_seen, mut events_seen) = (0u64, 0u64);
    let mut chunks = fleet.chunks(opts.bundle_window).peekable();
    while chunks.peek().is_some() || !next.is_empty() || !after_next.is_empty() {
        let chunk = chunks.next().unwrap_or_default();
        report.events += chunk.len() as u64;
        let mut bundle = std::mem::replace(&mut next, std::mem::take(&mut after_next));
        for event in chunk {
            events_seen += 1;
            if event.header.event_type == types::STATUS {
                status_seen += 1;
                if every(opts.tombstone_every, status_seen) {
                    let id = format!("tomb-{}", event.header.id);
                    let reason = "simulated retraction";
                    next.push(tombstone(&event, ATTESTER, &id, event.header.time, reason));
                    report.tombstones += 1;
                }
            }
            if every(opts.late_every, events_seen) {
                report.late_events += 1;
                after_next.push(event);
            } else {
                bundle.push(event);
            }
        }
        if bundle.is_empty() {
            continue;
        }
        report.bundles += 1;
        let (rows, externalized) = writer.prepare(&bundle).await?;
        report.externalized += externalized as u64;
        if every(opts.split_every, report.bundles) && rows.len() > 1 {
            report.split_bundles += 1;
            let (a, b) = rows.split_at(rows.len() / 2);
            report.committed(writer.commit(a)?, a.len());
            report.committed(writer.commit(b)?, b.len());
        } else {
            report.committed(writer.commit(&rows)?, rows.len());
        }
        if every(opts.duplicate_every, report.bundles) {
            report.duplicate_bundles += 1;
            let (rows, externalized) = writer.prepare(&bundle).await?;
            report.externalized += externalized as u64;
            report.committed(writer.commit(&rows)?, rows.len());
        }
        progress(report.events);
    }
    tracing::info!(
        events = report.events,
        rows = report.rows,
        commits = report.commits,
        "seed finished"
    );
    Ok(report)
}
