//! The raw layer contract end to end: a mixed-vendor synthetic fleet written by the din simulator
//! (duplicates, tombstones, blobs) is read back through the change feed, turned back into
//! CloudEvents (dq's scanRawEvent) and decoded with no module error.

use chrono::{TimeZone, Utc};
use dq_blob::{BlobConfig, BlobStore, MAX_OBJECT_SIZE};
use dq_cloudevent::row::ExtrasStatus;
use dq_decode::post::VehicleGate;
use dq_dinsim::{SeedOptions, Writer};
use dq_fleet::FleetConfig;
use dq_lake::testing::Backend;
use dq_lake::{backend_tests, progress};

backend_tests!(seeded_fleet_round_trips_into_the_decoders);

fn seeded_fleet_round_trips_into_the_decoders(backend: Backend) {
    let (t, lake) = dq_dinsim::testing::din_lake(backend);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = rt
        .block_on(BlobStore::open(&BlobConfig::local(t.path("blobs"))))
        .unwrap();
    let writer = Writer::new(&lake, Some(&store)).with_threshold(1536);
    let fleet = FleetConfig {
        vehicles: 8,
        days: 1,
        start: Utc.with_ymd_and_hms(2026, 5, 4, 0, 0, 0).unwrap(),
        ..FleetConfig::default()
    };
    let gate = VehicleGate {
        chain_id: fleet.chain_id,
        vehicle_contract: dq_cloudevent::did::parse_address(&fleet.vehicle_contract).unwrap(),
    };
    let opts = SeedOptions {
        fleet,
        bundle_window: std::time::Duration::from_secs(4 * 3600),
        duplicate_every: 2,
        split_every: 3,
        late_every: 40,
        tombstone_every: 50,
    };
    let first = progress::head(&lake).unwrap() + 1;
    let report = rt
        .block_on(dq_dinsim::seed(&writer, &opts, |_| {}))
        .unwrap();
    assert!(
        report.duplicate_bundles > 0 && report.split_bundles > 0,
        "{report:?}"
    );
    assert!(
        report.late_events > 0 && report.tombstones > 0 && report.externalized > 0,
        "{report:?}"
    );
    let (lo, hi) = report.snapshots.unwrap();
    assert_eq!(lo, first);
    let commits = report.bundles + report.duplicate_bundles + report.split_bundles;
    assert_eq!(report.commits, commits);
    assert_eq!((hi - lo + 1) as u64, commits, "one snapshot per commit");

    let rows = dq_dinsim::testing::inserted_rows(&lake, lo, hi);
    assert_eq!(rows.len() as u64, report.rows);
    // A redelivered externalized event keeps its header but gets a new blob key.
    let mut blob_keys: std::collections::HashMap<String, std::collections::HashSet<&str>> =
        Default::default();
    for row in rows.iter().filter(|r| r.data_index_key.is_some()) {
        let key = format!(
            "{}!{}!{}!{}!{}",
            row.subject, row.time, row.event_type, row.source, row.id
        );
        blob_keys
            .entry(key)
            .or_default()
            .extend(row.data_index_key.as_deref());
    }
    assert!(
        blob_keys.values().any(|keys| keys.len() > 1),
        "no redelivered blob row"
    );
    let mut events = Vec::with_capacity(rows.len());
    for row in &rows {
        let (mut event, extras) = row.to_event_checked();
        assert!(
            !matches!(extras, ExtrasStatus::Malformed),
            "extras of {} did not parse",
            row.id
        );
        if let Some(key) = &row.data_index_key {
            let body = rt.block_on(store.get(key, MAX_OBJECT_SIZE)).unwrap();
            event.data = Some(String::from_utf8(body).unwrap());
        }
        events.push(event);
    }
    let out = dq_decode::pipeline::decode_batch(&events, &gate, Utc::now());
    assert!(
        out.failures.is_empty(),
        "decode failures: {:?}",
        &out.failures[..out.failures.len().min(3)]
    );
    assert!(
        out.duplicates > 0,
        "redelivered bundles must show up as Key() duplicates"
    );
    assert!(
        out.signal_rows.len() > rows.len(),
        "{} signal rows",
        out.signal_rows.len()
    );
    assert!(!out.event_rows.is_empty());
}
