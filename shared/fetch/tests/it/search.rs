//! The read semantics (filters, voiding, type summaries, payloads) through the library API the
//! GraphQL resolvers use, on both catalog backends.

use crate::{
    at, big_payload, binary_payload, event, runtime, seeded, subject, t0, ATTESTER, OTHER_SOURCE,
};
use base64::Engine as _;
use chrono::Duration;
use dq_lake::backend_tests;
use dq_lake::testing::{Backend, TestLake};
use dq_rawquery::filter::MAX_OR_DEPTH;
use dq_rawquery::{
    Db, Event, FetchError, Filter, Index, Order, Payloads, StringFilter, TagFilter, Voiding,
};
use std::sync::Arc;

backend_tests!(
    search_semantics,
    voiding_policies,
    tag_alternatives,
    latest_looks_back_first
);

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
                ..StringFilter::default()
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
            producer: StringFilter::eq(dq_dinsim::testing::producer(2)),
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
        Err(FetchError::MissingRow)
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
    let t = dq_lake::testing::TestLake::new(Backend::File);
    let db = std::sync::Arc::new(dq_rawquery::Db::new(t.open().unwrap()));
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

/// A fresh lake on `backend` holding only `events` (one bundle, no blob store), and its
/// scratch directory (dropped with it).
fn lake_with(backend: Backend, events: &[dq_cloudevent::event::RawEvent]) -> (TestLake, Arc<Db>) {
    let (t, lake) = dq_dinsim::testing::din_lake(backend);
    runtime()
        .block_on(dq_dinsim::Writer::new(&lake, None).write_bundle(events))
        .unwrap();
    (t, Arc::new(Db::new(lake)))
}

fn attestation(id: &str, secs: i64) -> dq_cloudevent::event::RawEvent {
    let mut e = event(1, id, "dimo.attestation", at(secs), r#"{"vin":"V"}"#);
    e.header.source = ATTESTER.into();
    e
}

/// The three policies over one subject: `att-a` voided
/// by its own attester, `att-b` "voided" by another source, `tomb-x` naming an id that does
/// not exist, an unrelated status row, and on vehicle 2 a tombstone by the attester naming
/// `att-b` (another subject: voids nothing of vehicle 1).
fn voiding_policies(backend: Backend) {
    let att_a = attestation("att-a", 10);
    let att_b = attestation("att-b", 30);
    // Only named by `tomb-x`, never written.
    let ghost = attestation("ghost", 0);
    let mut elsewhere = attestation("att-b", 30);
    elsewhere.header.subject = subject(2);
    let events = [
        event(1, "s1", "dimo.status", at(0), r#"{"n":1}"#),
        att_a.clone(),
        dq_dinsim::tombstone(&att_a, ATTESTER, "tomb-a", at(20), "same source"),
        att_b.clone(),
        dq_dinsim::tombstone(&att_b, OTHER_SOURCE, "tomb-b", at(40), "other source"),
        dq_dinsim::tombstone(&ghost, ATTESTER, "tomb-x", at(50), "no such id"),
        dq_dinsim::tombstone(&elsewhere, ATTESTER, "tomb-v2", at(45), "other subject"),
    ];
    let (_t, db) = lake_with(backend, &events);
    let rt = runtime();
    let search = |f: Filter| {
        let db = Arc::clone(&db);
        key_ids(&rt.block_on(db.read(move |r| r.search(&f, 1000))).unwrap())
    };
    let with = |voiding: Voiding| Filter {
        voiding,
        ..scoped(1)
    };
    let types = |voiding: Voiding, types: &[&str]| Filter {
        event_type: StringFilter::any_of(types.iter().copied()),
        ..with(voiding)
    };
    const BOTH: &[&str] = &["dimo.attestation", "dimo.tombstone"];

    // dq: tombstones hidden, and every target of the subject whatever the tombstone's source.
    assert_eq!(Filter::default().voiding, Voiding::HideTombstones);
    assert_eq!(search(scoped(1)), ["s1/status"]);
    assert_eq!(search(with(Voiding::HideTombstones)), ["s1/status"]);
    assert!(search(types(Voiding::HideTombstones, BOTH)).is_empty());

    // fetch-api: only the same attester voids; tombstones stay visible.
    assert_eq!(
        search(with(Voiding::SourceMatched)),
        [
            "tomb-x/tombstone",
            "tomb-b/tombstone",
            "att-b/attestation",
            "tomb-a/tombstone",
            "s1/status"
        ]
    );
    assert_eq!(
        search(types(Voiding::SourceMatched, BOTH)),
        [
            "tomb-x/tombstone",
            "tomb-b/tombstone",
            "att-b/attestation",
            "tomb-a/tombstone"
        ]
    );
    assert_eq!(
        search(types(Voiding::SourceMatched, &["dimo.tombstone"])),
        ["tomb-x/tombstone", "tomb-b/tombstone", "tomb-a/tombstone"]
    );
    // A tombstone outside the window and the type filter still applies.
    let early = |voiding: Voiding| Filter {
        before: Some(at(15)),
        ..types(voiding, &["dimo.attestation"])
    };
    assert!(search(early(Voiding::SourceMatched)).is_empty());
    assert_eq!(search(early(Voiding::None)), ["att-a/attestation"]);
    // Without a subject filter (no pruning of the tombstone scan) the rule is the same, and
    // vehicle 2's tombstone for `att-b` voids nothing of vehicle 1.
    assert_eq!(
        search(Filter {
            event_type: StringFilter::eq("dimo.attestation"),
            voiding: Voiding::SourceMatched,
            ..Filter::default()
        }),
        ["att-b/attestation"]
    );

    // No suppression at all.
    assert_eq!(
        search(with(Voiding::None)),
        [
            "tomb-x/tombstone",
            "tomb-b/tombstone",
            "att-b/attestation",
            "tomb-a/tombstone",
            "att-a/attestation",
            "s1/status"
        ]
    );

    // Latest follows the policy.
    let latest = |f: Filter| {
        let db = Arc::clone(&db);
        rt.block_on(db.read(move |r| r.latest(&f)))
            .map(|i| i.header.id)
    };
    let newest_early = |voiding: Voiding| Filter {
        before: Some(at(25)),
        ..types(voiding, &["dimo.attestation"])
    };
    assert!(matches!(
        latest(newest_early(Voiding::SourceMatched)),
        Err(FetchError::NotFound)
    ));
    assert_eq!(latest(newest_early(Voiding::None)).unwrap(), "att-a");
    assert_eq!(
        latest(types(Voiding::SourceMatched, &["dimo.attestation"])).unwrap(),
        "att-b"
    );
    assert!(matches!(
        latest(types(Voiding::HideTombstones, &["dimo.attestation"])),
        Err(FetchError::NotFound)
    ));

    // Type summaries follow the policy; tombstones count as their own type.
    let summaries = |voiding: Voiding| {
        let db = Arc::clone(&db);
        rt.block_on(db.read(move |r| r.type_summaries(&with(voiding))))
            .unwrap()
            .into_iter()
            .map(|t| (t.event_type, t.count))
            .collect::<Vec<_>>()
    };
    let counts = |v: &[(&str, u64)]| {
        v.iter()
            .map(|(t, n)| (t.to_string(), *n))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        summaries(Voiding::HideTombstones),
        counts(&[("dimo.status", 1)])
    );
    assert_eq!(
        summaries(Voiding::SourceMatched),
        counts(&[
            ("dimo.attestation", 1),
            ("dimo.status", 1),
            ("dimo.tombstone", 3)
        ])
    );
    assert_eq!(
        summaries(Voiding::None),
        counts(&[
            ("dimo.attestation", 2),
            ("dimo.status", 1),
            ("dimo.tombstone", 3)
        ])
    );

    // Payload resolution re-reads under the listing's policy.
    let listed = {
        let db = Arc::clone(&db);
        rt.block_on(db.read(move |r| r.search(&with(Voiding::None), 1000)))
            .unwrap()
    };
    let pick = |id: &str| listed.iter().find(|i| i.header.id == id).unwrap().clone();
    let payloads = Payloads::new(None);
    let resolve = |indexes: Vec<Index>, voiding: Voiding| {
        rt.block_on(payloads.resolve_with(&db, &indexes, voiding))
    };
    let a = resolve(vec![pick("att-a")], Voiding::None).unwrap();
    assert_eq!(
        (a[0].header.id.as_str(), a[0].data.as_slice()),
        ("att-a", br#"{"vin":"V"}"#.as_slice())
    );
    assert!(matches!(
        resolve(vec![pick("att-a")], Voiding::SourceMatched),
        Err(FetchError::MissingRow)
    ));
    assert!(matches!(
        rt.block_on(payloads.resolve(&db, &[pick("att-a")])),
        Err(FetchError::MissingRow)
    ));
    let visible = resolve(vec![pick("att-b"), pick("tomb-a")], Voiding::SourceMatched).unwrap();
    assert_eq!(visible[0].data, br#"{"vin":"V"}"#);
    let tomb: serde_json::Value = serde_json::from_slice(&visible[1].data).unwrap();
    assert_eq!(tomb["voidsId"], "att-a");
    // dq's default form still hides tombstones and other-source targets.
    assert!(matches!(
        rt.block_on(payloads.resolve(&db, &[pick("att-b")])),
        Err(FetchError::MissingRow)
    ));
}

/// Tags `or`: per level `(p1 AND p2 …) OR or₁ OR …`, an empty alternative
/// is true, levels below [`MAX_OR_DEPTH`] are dropped.
fn tag_alternatives(backend: Backend) {
    let tagged = |id: &str, secs: i64, tags: &[&str]| {
        let mut e = event(3, id, "dimo.status", at(secs), r#"{"n":0}"#);
        e.header.tags = tags.iter().map(|t| t.to_string()).collect();
        e
    };
    let events = [
        tagged("n", 0, &[]),
        tagged("x", 1, &["x"]),
        tagged("y", 2, &["y"]),
        tagged("xy", 3, &["x", "y"]),
        tagged("z", 4, &["z"]),
        tagged("xz", 5, &["x", "z"]),
    ];
    let (_t, db) = lake_with(backend, &events);
    let rt = runtime();
    let search = |tags: TagFilter| {
        let db = Arc::clone(&db);
        let f = Filter { tags, ..scoped(3) };
        rt.block_on(db.read(move |r| r.search(&f, 1000)))
            .unwrap()
            .into_iter()
            .map(|i| i.header.id)
            .collect::<Vec<_>>()
    };
    let any = |tags: &[&str]| TagFilter {
        contains_any: tags.iter().map(|t| t.to_string()).collect(),
        ..TagFilter::default()
    };
    let none_of = |tags: &[&str]| tags.iter().map(|t| t.to_string()).collect::<Vec<_>>();
    const ALL: [&str; 6] = ["xz", "z", "xy", "y", "x", "n"];

    assert_eq!(search(TagFilter::default()), ALL);
    // Flat: (x AND NOT z) OR (z AND NOT x).
    assert_eq!(
        search(TagFilter {
            not_contains_any: none_of(&["z"]),
            or: vec![TagFilter {
                not_contains_any: none_of(&["x"]),
                ..any(&["z"])
            }],
            ..any(&["x"])
        }),
        ["z", "xy", "x"]
    );
    // A level with only alternatives is their disjunction.
    assert_eq!(
        search(TagFilter {
            or: vec![
                TagFilter {
                    contains_all: none_of(&["x", "y"]),
                    ..TagFilter::default()
                },
                any(&["z"])
            ],
            ..TagFilter::default()
        }),
        ["xz", "z", "xy"]
    );
    // Nested: q OR (x OR (z AND NOT (x AND z))).
    let nested = TagFilter {
        or: vec![TagFilter {
            or: vec![TagFilter {
                not_contains_all: none_of(&["x", "z"]),
                ..any(&["z"])
            }],
            ..any(&["x"])
        }],
        ..any(&["q"])
    };
    assert_eq!(search(nested), ["xz", "z", "xy", "x"]);
    // An alternative that restricts nothing makes the disjunction true, at any kept depth.
    assert_eq!(
        search(TagFilter {
            or: vec![TagFilter::default()],
            ..any(&["x"])
        }),
        ALL
    );
    assert_eq!(
        search(TagFilter {
            or: vec![TagFilter {
                or: vec![TagFilter::default()],
                ..any(&["z"])
            }],
            ..any(&["x"])
        }),
        ALL
    );

    // A chain `q OR (q OR (… OR leaf))` whose leaf is at `depth`.
    let chain = |depth: usize, deepest: TagFilter| {
        (0..depth).fold(deepest, |inner, _| TagFilter {
            or: vec![inner],
            ..any(&["q"])
        })
    };
    assert_eq!(MAX_OR_DEPTH, 5);
    // The deepest kept level applies…
    assert_eq!(search(chain(5, any(&["z"]))), ["xz", "z"]);
    // …its own alternatives (depth 6) are dropped, even an empty one.
    let with_dropped = |dropped: TagFilter| TagFilter {
        or: vec![dropped],
        ..any(&["x"])
    };
    assert_eq!(
        search(chain(5, with_dropped(any(&["z"])))),
        ["xz", "xy", "x"]
    );
    assert_eq!(
        search(chain(5, with_dropped(TagFilter::default()))),
        ["xz", "xy", "x"]
    );
    // One level shallower, the same alternative is kept.
    assert_eq!(
        search(chain(4, with_dropped(any(&["z"])))),
        ["xz", "z", "xy", "x"]
    );
}

/// `latest` tries the day and the 31 days before the table's newest time (here: vehicle 5's
/// event, 10 days before the clock) ahead of the whole window; each answer must be the whole
/// window's (the newest-first search over everything):
/// - vehicle 1: its newest event delivered twice within one second that the one-day bound
///   cuts through (dedup keeps the earlier row, which an unaligned bound would drop);
/// - vehicle 2: newest 10 days back (found by the 31-day look-back);
/// - vehicle 3: only a 50-day-old event (found by the whole window);
/// - vehicle 4: its newest event voided by a tombstone 60 days back, so the answer is the
///   3-day-old one;
/// - a `before` moves the look-backs with it.
fn latest_looks_back_first(backend: Backend) {
    let newest = t0() + Duration::days(100) + Duration::milliseconds(500);
    let now = newest + Duration::days(10);
    // The one-day bound is `newest - 1 day` truncated to its second: 500 ms before it.
    let second = newest - Duration::days(1) - Duration::milliseconds(500);
    let status = |token: u32, id: &str, t| event(token, id, "dimo.status", t, r#"{"n":1}"#);
    let voided = status(4, "voided", newest - Duration::hours(2));
    let events = vec![
        status(5, "newest", newest),
        status(1, "older", newest - Duration::days(3)),
        status(1, "dup", second + Duration::milliseconds(700)),
        status(1, "dup", second + Duration::milliseconds(200)),
        status(2, "ten", newest - Duration::days(10)),
        status(2, "fifty", newest - Duration::days(50)),
        status(3, "fifty", newest - Duration::days(50)),
        dq_dinsim::tombstone(
            &voided,
            ATTESTER,
            "tomb",
            newest - Duration::days(60),
            "test",
        ),
        voided,
        status(4, "three", newest - Duration::days(3)),
    ];
    let (_t, db) = lake_with(backend, &events);
    let rt = runtime();
    let read = |f: Filter| {
        let db = Arc::clone(&db);
        rt.block_on(db.read(move |r| {
            let whole = r.search(
                &Filter {
                    order: Order::Descending,
                    ..f.clone()
                },
                1,
            )?;
            Ok((r.latest_at(&f, now)?, whole))
        }))
        .unwrap()
    };
    let expect = |f: Filter, id: &str, time| {
        let (latest, whole) = read(f);
        assert_eq!((latest.header.id.as_str(), latest.header.time), (id, time));
        assert_eq!(
            whole,
            vec![latest],
            "latest equals the whole window's newest"
        );
    };
    let hide = |token: u32| Filter {
        voiding: Voiding::HideTombstones,
        ..scoped(token)
    };
    expect(hide(1), "dup", second + Duration::milliseconds(200));
    expect(hide(2), "ten", newest - Duration::days(10));
    expect(hide(3), "fifty", newest - Duration::days(50));
    expect(hide(4), "three", newest - Duration::days(3));
    expect(
        Filter {
            before: Some(newest - Duration::days(20)),
            ..hide(2)
        },
        "fifty",
        newest - Duration::days(50),
    );
}
