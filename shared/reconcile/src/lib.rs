//! The cutover gate's comparison: are two GraphQL answers to the same document the same answer?
//! `dqctl reconcile` (a reference and a candidate deployment, document by document) and the
//! graphql function's shadow mode (a sampled live request re-sent to a reference) both decide
//! with [`Comparator`], so the CLI and production agree on what a mismatch is.
//!
//! Canonical means:
//! - lists compare by the rule of their field in the dialect ([`rules`]): in order where the API
//!   defines one (`signals` buckets, `events` / `cloudEvents` / `segments` by time, summaries by
//!   name), as multisets where it does not (`tags`, `eventCounts`), and `null` equals `[]` only
//!   where the dialect does not tell them apart (telemetry's `attestations` is `null` when empty,
//!   so there `[]` is a difference);
//! - aliases and fragments are followed through the document ([`document`]), so rules apply by
//!   schema field whatever the response keys are;
//! - numbers with a fraction compare within a relative epsilon, integers exactly; RFC 3339
//!   times compare as instants;
//! - `errors` compare as a multiset of error objects; the HTTP status must be equal.
//!
//! The result is the first difference ([`Mismatch`]): its JSON path and a short description.
#![warn(missing_docs)]

mod compare;
mod dialect;
pub mod document;
pub mod rules;

pub use compare::Mismatch;
pub use dialect::Dialect;
use serde_json::Value;

/// Default relative float tolerance: far above the rounding of a sum taken in another order,
/// far below any real change of a reading.
pub const DEFAULT_EPSILON: f64 = 1e-9;

/// One HTTP answer: status and JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// The body.
    pub body: Value,
}

impl Answer {
    /// Parses a body as JSON.
    ///
    /// # Errors
    /// A body that is not JSON, described by its status, length and first characters.
    pub fn parse(status: u16, body: &[u8]) -> Result<Answer, String> {
        serde_json::from_slice(body)
            .map(|body| Answer { status, body })
            .map_err(|_| {
                let text = String::from_utf8_lossy(body);
                let head: String = text.chars().take(80).collect();
                format!(
                    "HTTP {status} with a non-JSON body ({} bytes): {head:?}",
                    body.len()
                )
            })
    }
}

/// Compares answers of one dialect.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Comparator {
    dialect: Dialect,
    epsilon: f64,
}

impl Comparator {
    /// The comparison of `dialect` with [`DEFAULT_EPSILON`].
    pub fn new(dialect: Dialect) -> Comparator {
        Comparator {
            dialect,
            epsilon: DEFAULT_EPSILON,
        }
    }

    /// The same with another relative float tolerance.
    pub fn with_epsilon(self, epsilon: f64) -> Comparator {
        Comparator { epsilon, ..self }
    }

    /// The dialect compared.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The first difference between the answers to `document` (operation `operation_name`),
    /// status first. A document this crate cannot read is compared without its aliases (response
    /// keys taken as field names).
    pub fn compare(
        &self,
        document: &str,
        operation_name: Option<&str>,
        reference: &Answer,
        candidate: &Answer,
    ) -> Option<Mismatch> {
        if reference.status != candidate.status {
            return Some(Mismatch {
                path: "(HTTP status)".into(),
                description: "HTTP statuses differ".into(),
                reference: Some(reference.status.to_string()),
                candidate: Some(candidate.status.to_string()),
            });
        }
        self.compare_bodies(document, operation_name, &reference.body, &candidate.body)
    }

    /// As [`Comparator::compare`], for the bodies alone.
    pub fn compare_bodies(
        &self,
        document: &str,
        operation_name: Option<&str>,
        reference: &Value,
        candidate: &Value,
    ) -> Option<Mismatch> {
        let op = document::operation(document, operation_name).ok();
        compare::Walk::new(self.dialect, self.epsilon).body(
            op.as_ref().map(|o| &o.selection),
            reference,
            candidate,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cmp(dialect: Dialect, doc: &str, r: Value, c: Value) -> Option<Mismatch> {
        Comparator::new(dialect).compare_bodies(doc, None, &r, &c)
    }

    const EVENTS: &str = "{ events(subject: \"v\", from: \"a\", to: \"b\") { timestamp name } }";

    fn ev(t: &str, name: &str) -> Value {
        json!({"timestamp": t, "name": name})
    }

    #[test]
    fn equal_answers_match() {
        let a = json!({"data": {"events": [ev("2025-01-01T00:00:02Z", "a"), ev("2025-01-01T00:00:01Z", "b")]}});
        assert_eq!(cmp(Dialect::Dq, EVENTS, a.clone(), a), None);
    }

    #[test]
    fn time_ordered_list_reordered_is_a_mismatch_ties_are_not() {
        let r = json!({"data": {"events": [ev("2025-01-01T00:00:02Z", "a"), ev("2025-01-01T00:00:01Z", "b")]}});
        let c = json!({"data": {"events": [ev("2025-01-01T00:00:01Z", "b"), ev("2025-01-01T00:00:02Z", "a")]}});
        let m = cmp(Dialect::Dq, EVENTS, r, c).expect("reordered");
        assert_eq!(m.path, "data.events[0].timestamp", "{m}");
        // Equal timestamps: the original had no tie-breaker.
        let r = json!({"data": {"events": [ev("2025-01-01T00:00:02Z", "a"), ev("2025-01-01T00:00:02.000Z", "b"), ev("2025-01-01T00:00:01Z", "c")]}});
        let c = json!({"data": {"events": [ev("2025-01-01T00:00:02Z", "b"), ev("2025-01-01T00:00:02Z", "a"), ev("2025-01-01T00:00:01Z", "c")]}});
        assert_eq!(cmp(Dialect::Dq, EVENTS, r, c), None);
    }

    #[test]
    fn tie_group_with_a_changed_element_points_inside_it() {
        let r = json!({"data": {"events": [ev("2025-01-01T00:00:02Z", "a"), ev("2025-01-01T00:00:02Z", "b")]}});
        let c = json!({"data": {"events": [ev("2025-01-01T00:00:02Z", "b"), ev("2025-01-01T00:00:02Z", "x")]}});
        let m = cmp(Dialect::Dq, EVENTS, r, c).expect("changed");
        assert_eq!(m.path, "data.events[0].name", "{m}");
    }

    #[test]
    fn strict_list_order_matters_through_aliases() {
        let doc = "{ s: signals(subject: \"v\", interval: \"1h\", from: \"a\", to: \"b\") { t: timestamp v: speed(agg: AVG) } }";
        let b = |t: &str, v: f64| json!({"t": t, "v": v});
        let r = json!({"data": {"s": [b("2025-01-01T00:00:00Z", 1.0), b("2025-01-01T01:00:00Z", 2.0)]}});
        let c = json!({"data": {"s": [b("2025-01-01T01:00:00Z", 2.0), b("2025-01-01T00:00:00Z", 1.0)]}});
        assert_eq!(cmp(Dialect::Dq, doc, r, c).unwrap().path, "data.s[0].t");
    }

    #[test]
    fn unordered_lists_ignore_order_but_not_content() {
        let doc = "{ cloudEvents(subject: \"v\") { header { time tags } } }";
        let e = |tags: Value| json!({"header": {"time": "2025-01-01T00:00:00Z", "tags": tags}});
        let r = json!({"data": {"cloudEvents": [e(json!(["a", "b"]))]}});
        let c = json!({"data": {"cloudEvents": [e(json!(["b", "a"]))]}});
        assert_eq!(cmp(Dialect::Fetch, doc, r.clone(), c), None);
        let c = json!({"data": {"cloudEvents": [e(json!(["b", "c"]))]}});
        let m = cmp(Dialect::Fetch, doc, r, c).unwrap();
        assert_eq!(m.path, "data.cloudEvents[0].header.tags[0]", "{m}");
    }

    #[test]
    fn missing_row_is_reported_at_its_position() {
        let r = json!({"data": {"events": [ev("2025-01-01T00:00:03Z", "a"), ev("2025-01-01T00:00:02Z", "b"), ev("2025-01-01T00:00:01Z", "c")]}});
        let c = json!({"data": {"events": [ev("2025-01-01T00:00:03Z", "a"), ev("2025-01-01T00:00:01Z", "c")]}});
        let m = cmp(Dialect::Dq, EVENTS, r, c).unwrap();
        assert_eq!(m.path, "data.events[1]");
        assert!(m.description.contains("length"), "{m}");
        let r = json!({"data": {"events": [ev("2025-01-01T00:00:03Z", "a")]}});
        let c = json!({"data": {"events": [ev("2025-01-01T00:00:03Z", "a"), ev("2025-01-01T00:00:01Z", "c")]}});
        let m = cmp(Dialect::Dq, EVENTS, r, c).unwrap();
        assert_eq!(
            (m.path.as_str(), m.reference.is_none()),
            ("data.events[1]", true)
        );
    }

    #[test]
    fn floats_within_epsilon_match_changed_values_do_not() {
        let doc = "{ signalsLatest(subject: \"v\") { speed { value } } }";
        let v = |x: f64| json!({"data": {"signalsLatest": {"speed": {"value": x}}}});
        assert_eq!(cmp(Dialect::Dq, doc, v(50.0), v(50.000_000_000_01)), None);
        let m = cmp(Dialect::Dq, doc, v(50.0), v(51.0)).unwrap();
        assert_eq!(m.path, "data.signalsLatest.speed.value");
        assert_eq!(
            (m.reference.as_deref(), m.candidate.as_deref()),
            (Some("50.0"), Some("51.0"))
        );
        let loose = Comparator::new(Dialect::Dq).with_epsilon(0.05);
        assert_eq!(loose.compare_bodies(doc, None, &v(50.0), &v(51.0)), None);
    }

    #[test]
    fn null_vs_empty_per_dialect() {
        let att = "{ attestations(tokenId: 1) { id tags } }";
        let r = json!({"data": {"attestations": null}});
        let c = json!({"data": {"attestations": []}});
        let m = cmp(Dialect::Telemetry, att, r, c).expect("telemetry answers null, not []");
        assert_eq!(m.path, "data.attestations");
        let tags = |t: Value| json!({"data": {"attestations": [{"id": "a", "tags": t}]}});
        assert!(cmp(Dialect::Telemetry, att, tags(json!(null)), tags(json!([]))).is_some());
        // signals: the dialect does not say which an empty answer is.
        let sig = "{ signals(tokenId: 1, interval: \"1h\", from: \"a\", to: \"b\") { timestamp } }";
        assert_eq!(
            cmp(
                Dialect::Telemetry,
                sig,
                json!({"data": {"signals": null}}),
                json!({"data": {"signals": []}})
            ),
            None
        );
        // Non-null lists: null is a difference.
        let types = "{ availableCloudEventTypes(did: \"v\") { type } }";
        assert!(cmp(
            Dialect::Fetch,
            types,
            json!({"data": {"availableCloudEventTypes": null}}),
            json!({"data": {"availableCloudEventTypes": []}})
        )
        .is_some());
    }

    #[test]
    fn errors_are_a_multiset_and_missing_equals_empty() {
        let doc = "{ a: signalsLatest(subject: \"v\") { lastSeen } b: signalsLatest(subject: \"w\") { lastSeen } }";
        let e1 = json!({"message": "one", "path": ["a"]});
        let e2 = json!({"message": "two", "path": ["b"]});
        let r = json!({"data": {"a": null, "b": null}, "errors": [e1, e2]});
        let c = json!({"data": {"a": null, "b": null}, "errors": [e2, e1]});
        assert_eq!(cmp(Dialect::Dq, doc, r.clone(), c), None);
        let c = json!({"data": {"a": null, "b": null}, "errors": [e1, {"message": "other", "path": ["b"]}]});
        let m = cmp(Dialect::Dq, doc, r, c).unwrap();
        assert_eq!(m.path, "errors[1].message", "{m}");
        assert_eq!(
            cmp(
                Dialect::Dq,
                doc,
                json!({"data": {"a": 1}}),
                json!({"data": {"a": 1}, "errors": []})
            ),
            None
        );
        assert_eq!(
            cmp(
                Dialect::Dq,
                doc,
                json!({"errors": [e1]}),
                json!({"data": null, "errors": [e1]})
            ),
            None
        );
    }

    #[test]
    fn structure_differences() {
        let doc = "{ signalsLatest(subject: \"v\") { lastSeen } }";
        let m = cmp(
            Dialect::Dq,
            doc,
            json!({"data": {"signalsLatest": {"lastSeen": "x"}}}),
            json!({"data": {"signalsLatest": null}}),
        )
        .unwrap();
        assert_eq!(m.path, "data.signalsLatest");
        let m = cmp(
            Dialect::Dq,
            doc,
            json!({"data": {"signalsLatest": {}}}),
            json!({"data": {"signalsLatest": {"extra": 1}}}),
        )
        .unwrap();
        assert_eq!(m.path, "data.signalsLatest.extra");
        let m = cmp(
            Dialect::Dq,
            doc,
            json!({"message": "JWT is invalid."}),
            json!({"data": null}),
        )
        .unwrap();
        assert!(m.path == "data" || m.path == "message", "{m}");
    }

    #[test]
    fn status_and_non_json() {
        let c = Comparator::new(Dialect::Dq);
        let a = Answer::parse(200, br#"{"data": null}"#).unwrap();
        let b = Answer::parse(422, br#"{"data": null}"#).unwrap();
        let m = c.compare("{ x }", None, &a, &b).unwrap();
        assert_eq!(m.path, "(HTTP status)");
        let err = Answer::parse(502, b"<html>Bad Gateway</html>").unwrap_err();
        assert!(err.contains("502") && err.contains("non-JSON"), "{err}");
    }
}
