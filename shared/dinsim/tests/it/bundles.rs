use dq_cloudevent::row::RawRow;
use dq_dinsim::testing::inserted_rows;
use dq_dinsim::Writer;
use dq_lake::testing::Backend;
use dq_lake::{backend_tests, progress};

use crate::{at, din_lake, runtime, status};

backend_tests!(
    each_bundle_is_one_snapshot_with_dins_columns,
    empty_bundle_commits_nothing,
    tiny_bundle_is_inlined_and_readable,
    tombstone_sets_voids_id
);

fn each_bundle_is_one_snapshot_with_dins_columns(backend: Backend) {
    let (_t, lake) = din_lake(backend);
    let rt = runtime();
    let writer = Writer::new(&lake, None);
    let start = progress::head(&lake).unwrap();
    let mut written = Vec::new();
    for b in 0..3u32 {
        let mut events: Vec<_> = (0..25u32)
            .map(|i| {
                status(
                    i % 5,
                    &format!("ev-{b}-{i}"),
                    at(i64::from(b * 100 + i), 123_456),
                    r#"{"speed": 12.5}"#,
                )
            })
            .collect();
        // Header extras, tags, a base64 payload and an attestation without producer.
        events[0].header.tags = vec!["b".into(), "a<>".into()];
        events[0]
            .header
            .extras
            .insert("zeta".into(), serde_json::json!({"y": 1e21, "x": 0.000001}));
        events[1].data = None;
        events[1].data_base64 = Some("eyJzcGVlZCI6MX0=".into());
        events[2].header.producer.clear();
        events[2].header.data_version.clear();
        let report = rt.block_on(writer.write_bundle(&events)).unwrap();
        assert_eq!(report.rows, 25);
        assert_eq!(
            report.snapshot,
            Some(start + i64::from(b) + 1),
            "one snapshot per bundle"
        );
        written.extend(events.iter().map(RawRow::from_event));
    }
    assert_eq!(progress::head(&lake).unwrap(), start + 3);
    let got = inserted_rows(&lake, start + 1, start + 3);
    assert_eq!(got.len(), written.len());
    let sort = |mut v: Vec<RawRow>| {
        v.sort_by(|a, b| (&a.id, a.time).cmp(&(&b.id, b.time)));
        v
    };
    assert_eq!(sort(got.clone()), sort(written));
    // The contract, checked on what the lake returned rather than on what we meant to write.
    for row in &got {
        assert_eq!(
            row.time.timestamp_subsec_micros() % 1000,
            0,
            "ms-truncated time"
        );
        assert!(
            row.data.is_none() || row.data_base64.is_none(),
            "never both payload columns"
        );
        assert!(row.extras.starts_with('{'));
        assert!(row.data_index_key.is_none() && row.voids_id.is_none());
    }
    let first = got.iter().find(|r| r.id == "ev-0-0").unwrap();
    assert_eq!(
        first.extras,
        r#"{"tags":["b","a\u003c\u003e"],"zeta":{"x":0.000001,"y":1e+21}}"#
    );
    let b64 = got.iter().find(|r| r.id == "ev-0-1").unwrap();
    assert_eq!(b64.data, None);
    assert_eq!(b64.data_base64.as_deref(), Some(&b"eyJzcGVlZCI6MX0="[..]));
    let bare = got.iter().find(|r| r.id == "ev-0-2").unwrap();
    assert_eq!(
        (bare.producer.as_str(), bare.data_version.as_str()),
        ("", ""),
        "'' not NULL"
    );
    let plain = got.iter().find(|r| r.id == "ev-0-3").unwrap();
    assert_eq!(plain.extras, "{}");
    assert_eq!(
        plain.data.as_deref(),
        Some(r#"{"speed": 12.5}"#),
        "payload stored verbatim"
    );
}

fn empty_bundle_commits_nothing(backend: Backend) {
    let (_t, lake) = din_lake(backend);
    let head = progress::head(&lake).unwrap();
    let report = runtime()
        .block_on(Writer::new(&lake, None).write_bundle(&[]))
        .unwrap();
    assert_eq!(report.snapshot, None);
    assert_eq!(progress::head(&lake).unwrap(), head);
}

fn tiny_bundle_is_inlined_and_readable(backend: Backend) {
    let (_t, lake) = din_lake(backend);
    let events: Vec<_> = (0..3)
        .map(|i| status(1, &format!("t{i}"), at(i, 0), "{}"))
        .collect();
    let report = runtime()
        .block_on(Writer::new(&lake, None).write_bundle(&events))
        .unwrap();
    let snapshot = report.snapshot.unwrap();
    let changes_json: String = lake
        .conn()
        .query_row(
            "SELECT changes::VARCHAR FROM lake.snapshots() WHERE snapshot_id = ?",
            [snapshot],
            |r| r.get(0),
        )
        .unwrap();
    assert!(changes_json.contains("inlined_insert"), "{changes_json}");
    let n: i64 = lake
        .conn()
        .query_row("SELECT count(*) FROM lake.raw_events", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 3);
}

fn tombstone_sets_voids_id(backend: Backend) {
    let (_t, lake) = din_lake(backend);
    let target = status(4, "victim", at(0, 0), "{}");
    let stone = dq_dinsim::tombstone(
        &target,
        "0x07B584f6a7125491C991ca2a45ab9e641B1CeE1b",
        "stone-1",
        at(10, 0),
        "wrong vehicle",
    );
    let start = progress::head(&lake).unwrap();
    runtime()
        .block_on(Writer::new(&lake, None).write_bundle(&[target, stone]))
        .unwrap();
    let rows = inserted_rows(&lake, start + 1, start + 1);
    let stone = rows.iter().find(|r| r.id == "stone-1").unwrap();
    assert_eq!(stone.event_type, "dimo.tombstone");
    assert_eq!(stone.voids_id.as_deref(), Some("victim"));
    assert!(stone.extras.contains("\"signature\""), "{}", stone.extras);
    assert!(rows
        .iter()
        .find(|r| r.id == "victim")
        .unwrap()
        .voids_id
        .is_none());
}

#[test]
fn data_path_on_s3() {
    let moto = dq_testkit::shared_moto();
    let bucket = moto.create_unique_bucket("lake").unwrap();
    let t = dq_lake::testing::TestLake::new(Backend::File);
    let lake = t
        .open_with(|c| {
            c.data_path = Some(format!("s3://{bucket}/lake/"));
            c.s3 = moto.s3_config();
        })
        .unwrap();
    dq_lake::raw::ensure(&lake).unwrap();
    let events: Vec<_> = (0..40u32)
        .map(|i| status(i, &format!("s3-{i}"), at(i64::from(i), 0), "{}"))
        .collect();
    runtime()
        .block_on(Writer::new(&lake, None).write_bundle(&events))
        .unwrap();
    let files: Vec<String> = lake
        .conn()
        .prepare("SELECT data_file FROM ducklake_list_files('lake', 'raw_events')")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(
        !files.is_empty()
            && files
                .iter()
                .all(|f| f.starts_with(&format!("s3://{bucket}/lake/"))),
        "{files:?}"
    );
    let n: i64 = lake
        .conn()
        .query_row("SELECT count(*) FROM lake.raw_events", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 40);
}

/// Several din sinks append to one PostgreSQL catalog at once: nothing is lost, every bundle is
/// its own snapshot.
#[test]
fn concurrent_writers_lose_nothing() {
    let t = dq_lake::testing::TestLake::new(Backend::Postgres);
    dq_dinsim::testing::open_din_lake(&t);
    let start = progress::head(&t.open().unwrap()).unwrap();
    std::thread::scope(|scope| {
        for w in 0..3u32 {
            let t = &t;
            scope.spawn(move || {
                let lake = t.open().unwrap();
                let rt = runtime();
                let writer = Writer::new(&lake, None);
                for b in 0..4u32 {
                    let events: Vec<_> = (0..15u32)
                        .map(|i| {
                            status(
                                i,
                                &format!("w{w}-b{b}-{i}"),
                                at(i64::from(w * 1000 + b * 20 + i), 0),
                                "{}",
                            )
                        })
                        .collect();
                    rt.block_on(writer.write_bundle(&events)).unwrap();
                }
            });
        }
    });
    let lake = t.open().unwrap();
    assert_eq!(progress::head(&lake).unwrap(), start + 12);
    let (n, distinct): (i64, i64) = lake
        .conn()
        .query_row(
            "SELECT count(*), count(DISTINCT id) FROM lake.raw_events",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((n, distinct), (180, 180));
}
