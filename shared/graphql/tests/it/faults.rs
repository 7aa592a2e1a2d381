//! Faults on the read side (issue 10): the PostgreSQL catalog restarted while queries run. Every
//! answer in the meantime is data or a GraphQL error — never a 5xx — with no catalog password in
//! it, and once the server is back the query instance recovers on its own: the next requests
//! answer exactly as before the restart.

use std::time::{Duration, Instant};

use crate::*;
use serde_json::json;

fn query(subject: &str) -> String {
    format!(
        r#"{{ signals(subject: "{subject}", interval: "1h", from: "{}", to: "{}") {{ timestamp speed(agg: AVG) }}
             signalsLatest(subject: "{subject}") {{ speed {{ value }} }}
             cloudEvents(subject: "{subject}", limit: 3) {{ header {{ id }} }} }}"#,
        rfc(at(-3600)),
        rfc(at(10 * 600 + 3600))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restart_mid_query() {
    dq_testkit::logs::capture();
    // A server of its own: restarting the shared one would fail every other test.
    let pg = std::sync::Arc::new(dq_testkit::Postgres::start().unwrap());
    let dsn = pg.create_database("lake").unwrap();
    let t = dq_dinsim::testing::lake_on_postgres(&dsn);
    let subject = vehicle(5);
    let events: Vec<RawEvent> = (0..10)
        .map(|k| {
            let t = at(k * 600);
            status(
                &subject,
                SOURCE,
                &format!("pg-{k}"),
                t,
                vec![item("speed", t, json!(k as f64))],
            )
        })
        .collect();
    let f = fixture_in(t, &events, Limits::default(), None).await;
    let mut permissions = ALL.to_vec();
    permissions.push(Permission::GetRawData);
    let token = f.token(&subject, &permissions);
    let q = query(&subject);
    let (status, want) = f.gql(Some(&token), &q).await;
    assert_eq!(status, 200);
    assert!(want.get("errors").is_none(), "{want}");

    let restarts = 2;
    let mut answers = 0;
    let mut failures: Vec<String> = Vec::new();
    let mut recovery = Vec::new();
    for _ in 0..restarts {
        // Queries in flight while the server goes down and comes back.
        let restart = tokio::task::spawn_blocking({
            let pg = std::sync::Arc::clone(&pg);
            move || {
                std::thread::sleep(Duration::from_millis(50));
                pg.restart().unwrap();
            }
        });
        let started = Instant::now();
        while started.elapsed() < Duration::from_millis(1500) {
            let (status, body) = f.gql(Some(&token), &q).await;
            assert!(status < 500, "HTTP {status}: {body}");
            answers += 1;
            if let Some(errors) = body.get("errors") {
                failures.push(errors.to_string());
            }
        }
        restart.await.unwrap();
        // The server is up: the instance must recover by itself within a few requests.
        let back = Instant::now();
        let mut tries = 0;
        loop {
            tries += 1;
            let (status, body) = f.gql(Some(&token), &q).await;
            assert!(status < 500, "HTTP {status}: {body}");
            if body == want {
                break;
            }
            failures.push(body["errors"].to_string());
            assert!(tries < 3, "no recovery after {tries} requests: {body}");
        }
        recovery.push(json!({"requests": tries, "ms": back.elapsed().as_millis() as u64}));
    }
    let log_lines = dq_testkit::logs::assert_no_secrets(&[pg.password()], &failures);
    let figures = json!({
        "restarts": restarts, "requests": answers, "answered_with_errors": failures.len(),
        "recovery": recovery, "errors": dq_testkit::error_kinds(&failures),
        "server_errors": 0, "log_lines_checked_for_secrets": log_lines,
    });
    report("graphql-postgres-restart", &figures);
}
