//! The read semantics (§4.4, §4.4.1, §4.4.2, §4.5) through the library API the GraphQL
//! resolvers use, on both catalog backends.

use crate::{at, big_payload, binary_payload, runtime, seeded, subject, t0, OTHER_SOURCE};
use base64::Engine as _;
use chrono::Duration;
use fetch::{Event, FetchError, Filter, Index, Order, Payloads, StringFilter, TagFilter};
use lake::backend_tests;
use lake::testing::Backend;

backend_tests!(search_semantics);

fn key_ids(indexes: &[Index]) -> Vec<String> {
    indexes
        .iter()
        .map(|i| {
            format!(
                "{}/{}",
                i.header.id,
                i.header.event_type.trim_start_matches("dimo.")
            )
        })
        .collect()
}

fn scoped(token: u32) -> Filter {
    Filter {
        subject: StringFilter::eq(subject(token)),
        ..Filter::default()
    }
}

fn search_semantics(backend: Backend) {
    let s = seeded(backend);
    let rt = runtime();
    let search = |f: Filter| rt.block_on(s.db.read(move |r| r.search(&f, 1000))).unwrap();

    // Order, dedup of the redelivered a2, voiding of v1 and its tombstone, same id across
    // types, id tiebreak at equal times; no floor for a subject-scoped search (`old`).
    let all = search(scoped(1));
    assert_eq!(
        key_ids(&all),
        [
            "t2/status",
            "t1/status",
            "big/status",
            "bin/raw.image",
            "a3/status",
            "a3/fingerprint",
            "a2/status",
            "a1/status",
            "old/status"
        ]
    );
    let asc = search(Filter {
        order: Order::Ascending,
        ..scoped(1)
    });
    let mut reversed = key_ids(&all);
    reversed.reverse();
    assert_eq!(key_ids(&asc), reversed);
    // The earliest copy of a deduplicated event is kept.
    let a2 = all.iter().find(|i| i.header.id == "a2").unwrap();
    assert_eq!(a2.header.time, at(10));

    // Keys: blob key for the externalized payload, a lake locator otherwise.
    let big = all.iter().find(|i| i.header.id == "big").unwrap();
    assert!(
        big.key
            .starts_with(&format!("cloudevent/blobs/{}/", subject(1))),
        "{}",
        big.key
    );
    let a1 = all.iter().find(|i| i.header.id == "a1").unwrap();
    assert_eq!(a1.key, format!("lake://{}/a1", subject(1)));
    // Header reconstruction: tags lifted out of extras, spec version fixed.
    let a3 = &all[4];
    assert_eq!(a3.header.tags, ["x", "y"]);
    assert!(a3.header.extras.is_empty());
    assert_eq!(a3.header.spec_version, "1.0");

    // Strict bounds on both ends.
    let window = search(Filter {
        after: Some(at(0)),
        before: Some(at(50)),
        ..scoped(1)
    });
    assert_eq!(
        key_ids(&window),
        ["a3/status", "a3/fingerprint", "a2/status"]
    );

    // Column filters (in and not_in combine), tags and the raw extras text.
    let f = |mutate: &dyn Fn(&mut Filter)| {
        let mut f = scoped(1);
        mutate(&mut f);
        key_ids(&search(f))
    };
    assert_eq!(
        f(&|f| f.event_type = StringFilter::eq("dimo.fingerprint")),
        ["a3/fingerprint"]
    );
    assert_eq!(
        f(&|f| {
            f.event_type = StringFilter::eq("dimo.status");
            f.id = StringFilter {
                include: vec!["t1".into(), "t2".into(), "a1".into()],
                exclude: vec!["t2".into()],
            };
        }),
        ["t1/status", "a1/status"]
    );
    let tags = |t: TagFilter| {
        f(&|f| {
            f.tags = t.clone();
            f.before = Some(at(30));
        })
    };
    assert_eq!(
        tags(TagFilter {
            contains_any: vec!["y".into(), "q".into()],
            ..Default::default()
        }),
        ["a3/status"]
    );
    assert_eq!(
        tags(TagFilter {
            contains_all: vec!["x".into(), "q".into()],
            ..Default::default()
        }),
        Vec::<String>::new()
    );
    assert_eq!(
        tags(TagFilter {
            not_contains_any: vec!["x".into()],
            ..Default::default()
        }),
        ["a3/fingerprint", "a2/status", "a1/status", "old/status"]
    );
    assert_eq!(
        tags(TagFilter {
            not_contains_all: vec!["x".into(), "q".into()],
            ..Default::default()
        })
        .len(),
        5
    );
    assert_eq!(
        f(&|f| f.extras = StringFilter::eq(r#"{"tags":["x","y"]}"#)),
        ["a3/status"]
    );
    assert_eq!(
        f(&|f| f.data_version = StringFilter::eq("default/v2.0")),
        Vec::<String>::new()
    );

    // Subject-less searches: the 400-day floor, anchored to `before`; none with an id filter.
    let unscoped = |f: Filter| key_ids(&search(f));
    assert_eq!(
        unscoped(Filter {
            source: StringFilter::eq(OTHER_SOURCE),
            ..Filter::default()
        }),
        ["b1/status"]
    );
    assert_eq!(
        unscoped(Filter {
            producer: StringFilter::eq(
                "did:erc721:137:0x9c94C395cBcBDe662235E0A9d3bB87Ad708561BA:2"
            ),
            ..Filter::default()
        }),
        ["b1/status"]
    );
    let everything = unscoped(Filter::default());
    assert!(
        !everything.contains(&"old/status".to_string()),
        "{everything:?}"
    );
    assert_eq!(everything.len(), 9);
    assert_eq!(
        unscoped(Filter {
            before: Some(t0() - Duration::days(450)),
            ..Filter::default()
        }),
        ["old/status"]
    );
    assert_eq!(
        unscoped(Filter {
            id: StringFilter::eq("old"),
            ..Filter::default()
        }),
        ["old/status"]
    );
    // Voided events stay hidden even when asked for by id.
    assert!(unscoped(Filter {
        id: StringFilter::any_of(["v1", "tomb-1"]),
        ..Filter::default()
    })
    .is_empty());

    // Latest: always newest first; NotFound when empty.
    let latest = |f: Filter| rt.block_on(s.db.read(move |r| r.latest(&f)));
    let l = latest(Filter {
        order: Order::Ascending,
        ..scoped(1)
    })
    .unwrap();
    assert_eq!(l.header.id, "t2");
    assert!(matches!(latest(scoped(9)), Err(FetchError::NotFound)));

    // Type summaries: deduped, voided excluded, no floor, ordered by type.
    let summaries = rt
        .block_on(s.db.read(|r| r.type_summaries(&Filter::default())))
        .unwrap();
    let got: Vec<(String, u64)> = summaries
        .iter()
        .map(|t| (t.event_type.clone(), t.count))
        .collect();
    assert_eq!(
        got,
        [
            ("dimo.fingerprint".to_string(), 1),
            ("dimo.raw.image".to_string(), 1),
            ("dimo.status".to_string(), 8)
        ]
    );
    let status = &summaries[2];
    assert_eq!(
        (status.first_seen, status.last_seen),
        (t0() - Duration::days(500), at(70))
    );
    assert!(rt
        .block_on(s.db.read(|r| r.type_summaries(&scoped(9))))
        .unwrap()
        .is_empty());

    // Payloads: input order (repeats kept), inline JSON, inline base64, sealed blob opened,
    // the right row for an id shared by two types, fallback to the newest row of a
    // subject/id-only index.
    let payloads = Payloads::new(Some(s.store.clone()));
    let pick = |id: &str, ty: &str| {
        all.iter()
            .find(|i| i.header.id == id && i.header.event_type == ty)
            .unwrap()
            .clone()
    };
    let mut partial = pick("a3", "dimo.status");
    partial.header.event_type.clear();
    partial.header.time = t0();
    let wanted = vec![
        pick("big", "dimo.status"),
        pick("a1", "dimo.status"),
        pick("a3", "dimo.fingerprint"),
        pick("bin", "dimo.raw.image"),
        pick("a1", "dimo.status"),
        partial,
    ];
    let events: Vec<Event> = rt.block_on(payloads.resolve(&s.db, &wanted)).unwrap();
    let got: Vec<(&str, Vec<u8>, &str)> = events
        .iter()
        .map(|e| (e.header.id.as_str(), e.data.clone(), e.data_base64.as_str()))
        .collect();
    let b64 = base64::engine::general_purpose::STANDARD.encode(binary_payload());
    assert_eq!(
        got,
        [
            ("big", big_payload().into_bytes(), ""),
            ("a1", br#"{"n":1}"#.to_vec(), ""),
            ("a3", br#"{"vin":"X"}"#.to_vec(), ""),
            ("bin", vec![], b64.as_str()),
            ("a1", br#"{"n":1}"#.to_vec(), ""),
            ("a3", br#"{"n":3}"#.to_vec(), ""),
        ]
    );
    assert_eq!(events[2].header.event_type, "dimo.fingerprint");

    // An index without a (non-voided) row fails the whole call.
    let mut voided = pick("a1", "dimo.status");
    voided.header.id = "v1".into();
    assert!(matches!(
        rt.block_on(payloads.resolve(&s.db, &[pick("a1", "dimo.status"), voided])),
        Err(FetchError::NotFound)
    ));
    // The per-call budget.
    assert!(matches!(
        rt.block_on(
            payloads
                .clone()
                .with_budget(100)
                .resolve(&s.db, &[pick("big", "dimo.status")])
        ),
        Err(FetchError::BudgetExceeded)
    ));
    // Without a store, a blob payload cannot be read; and presigning is offered only for
    // unsealed blob keys.
    assert!(matches!(
        rt.block_on(Payloads::new(None).resolve(&s.db, &[pick("big", "dimo.status")])),
        Err(FetchError::NoBlobStore { .. })
    ));
    let big = pick("big", "dimo.status");
    assert_eq!(payloads.presign_key(&big), None);
    assert_eq!(
        Payloads::new(None).presign_key(&big),
        Some(big.key.as_str())
    );
    assert_eq!(
        Payloads::new(None).presign_key(&pick("a1", "dimo.status")),
        None
    );
}

/// dq may start before din on a fresh catalog: no `raw_events` yet reads as no events.
#[test]
fn missing_table_reads_as_empty() {
    let t = lake::testing::TestLake::new(Backend::File);
    let db = std::sync::Arc::new(fetch::Db::new(t.open().unwrap()));
    let rt = runtime();
    assert!(rt
        .block_on(db.read(|r| r.search(&Filter::default(), 10)))
        .unwrap()
        .is_empty());
    assert!(matches!(
        rt.block_on(db.read(|r| r.latest(&scoped(1)))),
        Err(FetchError::NotFound)
    ));
    assert!(rt
        .block_on(db.read(|r| r.type_summaries(&Filter::default())))
        .unwrap()
        .is_empty());
}
