//! Issue 18 item 12: `or` alternatives on every filter field of the advanced options, with
//! fetch-api's semantics (`(in AND not_in) OR or₁ OR …` per level, nesting up to 5 levels),
//! served over gRPC; nesting deeper is INVALID_ARGUMENT, never INTERNAL.

use crate::{fixture, ids, request, subject};
use dq_proto::grpc::{
    AdvancedSearchOptions, ArrayFilterOption, ListCloudEventsRequest, ListIndexesRequest,
    StringFilterOption,
};
use tonic::Code;

fn one_of(values: &[&str]) -> StringFilterOption {
    StringFilterOption {
        r#in: values.iter().map(|v| v.to_string()).collect(),
        ..Default::default()
    }
}

fn any_tag(tags: &[&str]) -> ArrayFilterOption {
    ArrayFilterOption {
        contains_any: tags.iter().map(|t| t.to_string()).collect(),
        ..Default::default()
    }
}

/// `ListCloudEvents` ids (newest first) for `advanced`, through the token-only server as
/// vehicle 1's owner, or through the trusted server without a token.
fn list(advanced: AdvancedSearchOptions, trusted: bool) -> Result<Vec<String>, tonic::Status> {
    let f = fixture();
    let (addr, token) = if trusted {
        (f.trusted, None)
    } else {
        (f.strict, Some(f.owner()))
    };
    let mut c = f.client(addr);
    f.rt.block_on(c.list_cloud_events(request(
        ListCloudEventsRequest {
            options: None,
            limit: 100,
            advanced_options: Some(advanced),
        },
        token.as_deref(),
    )))
    .map(|r| ids(&r.into_inner().cloud_events))
}

fn mine() -> Option<StringFilterOption> {
    Some(one_of(&[&subject(1)]))
}

#[test]
fn or_alternatives_are_served_on_string_fields() {
    // id: a1 OR t1 OR bin.
    let by_id = list(
        AdvancedSearchOptions {
            subject: mine(),
            id: Some(StringFilterOption {
                or: vec![one_of(&["t1"]), one_of(&["bin"])],
                ..one_of(&["a1"])
            }),
            ..Default::default()
        },
        false,
    )
    .unwrap();
    assert_eq!(by_id, ["t1", "bin", "a1"]);
    // type: (status AND NOT status) OR fingerprint OR raw.image — the base level's own
    // conjunction is empty of rows, the alternatives are not.
    let by_type = list(
        AdvancedSearchOptions {
            subject: mine(),
            r#type: Some(StringFilterOption {
                r#in: vec!["dimo.status".into()],
                not_in: vec!["dimo.status".into()],
                or: vec![
                    one_of(&["dimo.fingerprint"]),
                    StringFilterOption {
                        or: vec![one_of(&["dimo.raw.image"])],
                        ..Default::default()
                    },
                ],
            }),
            ..Default::default()
        },
        false,
    )
    .unwrap();
    assert_eq!(by_type, ["bin", "a3"]);
    // Alternatives nest: data_version that is none of these, OR (a listed one).
    let nested = list(
        AdvancedSearchOptions {
            subject: mine(),
            id: Some(one_of(&["a1", "a2"])),
            data_version: Some(StringFilterOption {
                r#in: vec!["nope".into()],
                or: vec![StringFilterOption {
                    r#in: vec!["also-nope".into()],
                    or: vec![one_of(&["default/v1.0"])],
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        },
        false,
    )
    .unwrap();
    assert_eq!(nested, ["a2", "a1"]);
}

#[test]
fn or_alternatives_are_served_on_tags() {
    // What telemetry-api's `attestations(filter: {tags: …})` sends: tag alternatives.
    let tagged = list(
        AdvancedSearchOptions {
            subject: mine(),
            tags: Some(ArrayFilterOption {
                or: vec![ArrayFilterOption {
                    contains_all: vec!["x".into(), "y".into()],
                    ..Default::default()
                }],
                ..any_tag(&["no-such-tag"])
            }),
            ..Default::default()
        },
        false,
    )
    .unwrap();
    assert_eq!(tagged, ["a3"]);
    // Alternatives exclude as well: NOT x, OR y — every event of vehicle 1 but none.
    let all = list(
        AdvancedSearchOptions {
            subject: mine(),
            tags: Some(ArrayFilterOption {
                not_contains_any: vec!["x".into()],
                or: vec![any_tag(&["y"])],
                ..Default::default()
            }),
            ..Default::default()
        },
        false,
    )
    .unwrap();
    assert_eq!(all.len(), 9, "{all:?}");
}

#[test]
fn subject_alternatives_never_widen_a_tokens_scope() {
    // The token's subjects replace the client's subject filter, alternatives included.
    let own = list(
        AdvancedSearchOptions {
            subject: Some(StringFilterOption {
                or: vec![one_of(&[&subject(2)])],
                ..one_of(&[&subject(1)])
            }),
            id: Some(one_of(&["a1", "b1"])),
            ..Default::default()
        },
        false,
    )
    .unwrap();
    assert_eq!(own, ["a1"]);
    // A service caller's subject alternatives apply as sent.
    let both = list(
        AdvancedSearchOptions {
            subject: Some(StringFilterOption {
                or: vec![one_of(&[&subject(1)])],
                ..one_of(&[&subject(2)])
            }),
            id: Some(one_of(&["a1", "b1"])),
            ..Default::default()
        },
        true,
    )
    .unwrap();
    assert_eq!(both, ["b1", "a1"]);
}

#[test]
fn or_deeper_than_five_levels_is_an_invalid_argument() {
    let f = fixture();
    let mut c = f.client(f.strict);
    let token = f.owner();
    let deep = (0..6).fold(one_of(&["leaf"]), |inner, _| StringFilterOption {
        or: vec![inner],
        ..one_of(&["x"])
    });
    let e =
        f.rt.block_on(c.list_indexes(request(
            ListIndexesRequest {
                options: None,
                limit: 10,
                advanced_options: Some(AdvancedSearchOptions {
                    subject: mine(),
                    source: Some(deep),
                    ..Default::default()
                }),
            },
            Some(&token),
        )))
        .unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (
            Code::InvalidArgument,
            "invalid advanced search options: `source`: `or` clauses nest deeper than 5 levels"
        )
    );
    // Five levels are served.
    let five = (0..5).fold(one_of(&["t2"]), |inner, _| StringFilterOption {
        or: vec![inner],
        ..one_of(&["nope"])
    });
    let got = list(
        AdvancedSearchOptions {
            subject: mine(),
            id: Some(five),
            ..Default::default()
        },
        false,
    )
    .unwrap();
    assert_eq!(got, ["t2"]);
}
