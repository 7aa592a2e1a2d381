//! Issue 18 item 6: one request cannot fan out into many SQL statements. Root fields (each runs
//! SQL) weigh `SQL_FIELD_WEIGHT` in the complexity score, and a request runs at most
//! `MAX_CONCURRENT_STATEMENTS_PER_REQUEST` of them at once.

use crate::*;
use dq_graphql::complexity::{COMPLEXITY_LIMIT, SQL_FIELD_WEIGHT};
use serde_json::json;

fn root_fields(subject: &str, n: usize) -> String {
    let fields: Vec<String> = (0..n)
        .map(|i| format!(r#"a{i}: availableSignals(subject: "{subject}")"#))
        .collect();
    format!("{{ {} }}", fields.join(" "))
}

#[tokio::test]
async fn sql_root_fields_weigh_in_the_score() {
    let subject = vehicle(9);
    let t = at(0);
    let events = [status(
        &subject,
        SOURCE,
        "l-1",
        t,
        vec![item("speed", t, json!(3.0))],
    )];
    let most = COMPLEXITY_LIMIT / SQL_FIELD_WEIGHT;
    // One statement at a time still serves every root field.
    let limits = Limits {
        max_statements_per_request: 1,
        ..Limits::default()
    };
    let f = fixture_with(&events, limits).await;
    let data = f.data(&subject, &root_fields(&subject, most)).await;
    assert_eq!(data[format!("a{}", most - 1)], json!(["speed"]));
    // One more, or the ~50 of a fan-out, is refused before any SQL runs.
    let token = f.token(&subject, &ALL);
    for n in [most + 1, 50] {
        let (status, body) = f.gql(Some(&token), &root_fields(&subject, n)).await;
        assert_eq!(
            (status, &body["errors"][0]["message"]),
            (422, &json!("Query is too complex.")),
            "{n} root fields"
        );
    }
}
