//! Streams a synthetic fleet into the lake as din would: events grouped into bundles by a window
//! of fleet time, with din's deliberate faults mixed in deterministically — whole-bundle
//! redelivery (the same rows committed again as a new snapshot) and tombstones that void an
//! earlier event in a later bundle.

use std::time::Duration;

use dq_cloudevent::event::RawEvent;
use dq_cloudevent::types;
use fleet::{Fleet, FleetConfig};

use crate::{tombstone, Result, Writer};

/// The EIP-55 address the simulated attester signs tombstones with.
pub const ATTESTER: &str = "0x07B584f6a7125491C991ca2a45ab9e641B1CeE1b";

/// How to seed.
#[derive(Debug, Clone)]
pub struct SeedOptions {
    /// The fleet to generate.
    pub fleet: FleetConfig,
    /// Fleet time per bundle (din flushes a sink buffer every few minutes).
    pub bundle_window: Duration,
    /// Re-commit every Nth bundle a second time (redelivery after a lost ack); 0 = never.
    pub duplicate_every: u32,
    /// Void every Nth status event with a tombstone in the next bundle; 0 = never.
    pub tombstone_every: u32,
}

impl Default for SeedOptions {
    fn default() -> Self {
        Self {
            fleet: FleetConfig::default(),
            bundle_window: Duration::from_secs(3600),
            duplicate_every: 0,
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
    /// Bundles committed (each one snapshot).
    pub bundles: u64,
    /// Bundles committed twice.
    pub duplicate_bundles: u64,
    /// Tombstones written.
    pub tombstones: u64,
    /// Payloads moved to the blob store.
    pub externalized: u64,
    /// First and last snapshot written.
    pub snapshots: Option<(i64, i64)>,
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
    let mut pending_tombstones: Vec<RawEvent> = Vec::new();
    let mut status_seen = 0u64;
    for chunk in fleet.chunks(opts.bundle_window) {
        report.events += chunk.len() as u64;
        let mut bundle = std::mem::take(&mut pending_tombstones);
        report.tombstones += bundle.len() as u64;
        for event in &chunk {
            if event.header.event_type == types::STATUS && opts.tombstone_every > 0 {
                status_seen += 1;
                if status_seen.is_multiple_of(u64::from(opts.tombstone_every)) {
                    let id = format!("tomb-{}", event.header.id);
                    pending_tombstones.push(tombstone(
                        event,
                        ATTESTER,
                        &id,
                        event.header.time,
                        "simulated retraction",
                    ));
                }
            }
        }
        bundle.extend(chunk);
        if bundle.is_empty() {
            continue;
        }
        let (rows, externalized) = writer.prepare(&bundle).await?;
        let mut commits = 1;
        report.bundles += 1;
        if opts.duplicate_every > 0
            && report
                .bundles
                .is_multiple_of(u64::from(opts.duplicate_every))
        {
            commits = 2;
            report.duplicate_bundles += 1;
        }
        for _ in 0..commits {
            if let Some(snapshot) = writer.commit(&rows)? {
                let first = report.snapshots.map_or(snapshot, |(f, _)| f);
                report.snapshots = Some((first, snapshot));
            }
            report.rows += rows.len() as u64;
        }
        report.externalized += externalized as u64;
        progress(report.events);
    }
    if !pending_tombstones.is_empty() {
        report.tombstones += pending_tombstones.len() as u64;
        report.rows += pending_tombstones.len() as u64;
        report.bundles += 1;
        if let Some(snapshot) = writer.write_bundle(&pending_tombstones).await?.snapshot {
            let first = report.snapshots.map_or(snapshot, |(f, _)| f);
            report.snapshots = Some((first, snapshot));
        }
    }
    tracing::info!(
        events = report.events,
        rows = report.rows,
        bundles = report.bundles,
        "seed finished"
    );
    Ok(report)
}
