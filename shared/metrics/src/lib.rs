//! Observability shared by dq's functions: the one CloudWatch Embedded Metric Format encoder
//! (every line carries the `Stage` and `Function` it comes from), the request identity of the
//! query functions' `tracing` spans, and per-request X-Ray subsegments.
//!
//! Not here: which metrics a component writes (the materializer's in `dq-materialize`, the
//! query transports' in the `observe` modules of `dq-graphql` and `dq-fetch`).
//!
//! # Layout
//! - [`emf`]: [`Metric`], [`encode`], [`Emitter`] and its [`Sink`] (stdout, or memory in tests).
//! - [`origin`]: [`Origin`] (`DQ_STAGE`, `AWS_LAMBDA_FUNCTION_NAME`) and [`parse_bool`].
//! - [`query`]: the query functions' namespace and `QUERY_EMF`.
//! - [`request`]: [`RequestIds`] of a request, and the vehicle handlers record on it.
//! - [`xray`]: the trace header and the subsegment sent to the X-Ray daemon.
#![warn(missing_docs)]

pub mod emf;
pub mod origin;
pub mod request;
pub mod xray;

pub use emf::{encode, Captured, Emitter, Metric, Sink};
pub use origin::{parse_bool, Origin};
pub use request::{record_vehicle, RequestIds};

/// The query functions' metrics (graphql in every dialect, FetchService).
pub mod query {
    use crate::{parse_bool, Emitter, Origin};

    /// Their CloudWatch namespace.
    pub const NAMESPACE: &str = "dq/query";
    /// Turns their EMF lines on (a boolean as [`parse_bool`] reads it; default off).
    pub const QUERY_EMF: &str = "QUERY_EMF";

    /// The emitter when `QUERY_EMF` (read through `lookup`) is on, aggregating over
    /// `[Stage, Function]` and `per_request` (e.g. `[Stage, Dialect, Code]`).
    ///
    /// # Errors
    /// `QUERY_EMF` set to something that is not a boolean.
    pub fn from_lookup(
        per_request: &[&str],
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Emitter>, String> {
        let on = match lookup(QUERY_EMF).filter(|v| !v.trim().is_empty()) {
            None => false,
            Some(v) => parse_bool(&v).ok_or_else(|| {
                format!("{QUERY_EMF} must be a boolean (1/0, true/false, yes/no)")
            })?,
        };
        Ok(on.then(|| {
            Emitter::new(
                NAMESPACE,
                &[&["Stage", "Function"], per_request],
                Origin::from_lookup(&lookup),
            )
        }))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn switch() {
            let env = |v: &'static str| move |k: &str| (k == QUERY_EMF).then(|| v.to_string());
            assert!(from_lookup(&["Stage"], |_| None).unwrap().is_none());
            assert!(from_lookup(&["Stage"], env("no")).unwrap().is_none());
            let e = from_lookup(&["Stage", "Method", "Code"], env("true"))
                .unwrap()
                .unwrap();
            assert_eq!(e.namespace(), NAMESPACE);
            assert_eq!(
                from_lookup(&["Stage"], env("maybe")).unwrap_err(),
                "QUERY_EMF must be a boolean (1/0, true/false, yes/no)"
            );
        }
    }
}
