//! Issue 18 items 11 and 13: the committed SDL, the example documents and the introspection
//! answers, checked with graphql-core (`scripts/graphql-check.py`), a GraphQL implementation
//! independent of async-graphql, run with the project venv (`make venv`; `DQ_VENV` as for moto).

use crate::*;
use serde_json::json;
use std::io::Write;
use std::process::{Command, Stdio};

/// graphql-js's `getIntrospectionQuery()` with its default options, byte for byte (graphql 16.x
/// and 17.1 print the same text); the checker asserts graphql-core's is the same document.
const INTROSPECTION_QUERY: &str = include_str!("../introspection-query.graphql");

/// Runs `scripts/graphql-check.py args` with `stdin`; its standard output when it succeeds.
fn graphql_check(args: &[&str], stdin: &str) -> String {
    let venv = dq_testkit::venv_dir();
    let python = venv.join("bin/python");
    assert!(
        python.exists(),
        "graphql-check needs the project venv {} (with graphql-core): run `make venv` \
         (scripts/venv.sh) or point DQ_VENV at it",
        venv.display()
    );
    let script = dq_testkit::workspace_root().join("scripts/graphql-check.py");
    let mut child = Command::new(&python)
        .arg(&script)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run {} {}: {e}", python.display(), script.display()));
    // The script reads all of its input before it writes anything.
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "graphql-check {args:?} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Item 11: graphql-core loads and validates each committed SDL (every directive it applies is
/// declared), and every example document of the README and the events validates against its
/// dialect's SDL.
#[test]
fn committed_sdl_and_example_documents_pass_graphql_core() {
    let out = graphql_check(&["sdl"], "");
    assert!(out.contains("3 schemas"), "{out}");
}

/// Item 6: the example documents stay within the cost bounds (the SQL weighting refuses none).
#[test]
fn example_documents_are_within_the_cost_bounds() {
    let docs: Vec<Value> = serde_json::from_str(&graphql_check(&["documents"], "")).unwrap();
    assert!(docs.len() >= 5, "{docs:?}");
    for doc in &docs {
        let query = doc["query"].as_str().unwrap();
        let parsed = async_graphql::parser::parse_query(query).unwrap();
        let cost = dq_graphql::complexity::cost(&parsed, None);
        assert!(cost.is_ok(), "{}: {cost:?}", doc["source"]);
    }
}

/// Item 13: graphql-js's standard introspection query, sent without a token as MCP tools and
/// codegen clients send it, is answered in every dialect, and the answer rebuilds (graphql-core's
/// `build_client_schema`) into the committed SDL, directive declarations included.
#[tokio::test]
async fn standard_introspection_without_a_token_rebuilds_the_committed_sdl() {
    let f = fixture(&[]).await;
    for dialect in Dialect::ALL {
        let (status, body) = f.gql_in(dialect, None, INTROSPECTION_QUERY).await;
        assert_eq!(status, 200, "{dialect:?}: {body}");
        assert!(body.get("errors").is_none(), "{dialect:?}: {body}");
        graphql_check(&["introspection", dialect.name()], &body.to_string());
    }
}

/// Item 13: introspection has its own bounds, so an abusive one is still refused before it runs.
#[tokio::test]
async fn abusive_introspection_is_still_refused() {
    let f = fixture(&[]).await;
    // 23 deep: past the introspection bound (20), within async-graphql's nesting bound (32).
    let deep = (0..18).fold("name".to_string(), |inner, _| {
        format!("name ofType {{ {inner} }}")
    });
    let doc = format!("{{ __schema {{ types {{ fields {{ type {{ {deep} }} }} }} }} }}");
    let (status, body) = f.gql(None, &doc).await;
    assert_eq!(
        (status, &body["errors"][0]["message"]),
        (422, &json!("Query is nested too deep."))
    );
    let wide: Vec<String> = (0..600).map(|i| format!("n{i}: name")).collect();
    let doc = format!("{{ __schema {{ types {{ {} }} }} }}", wide.join(" "));
    let (status, body) = f.gql(None, &doc).await;
    assert_eq!(
        (status, &body["errors"][0]["message"]),
        (422, &json!("Query is too complex."))
    );
}
