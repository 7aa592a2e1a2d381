//! The query functions' metrics (graphql in every dialect, FetchService): their namespace,
//! `QUERY_EMF`, and [`Observe`], what each transport's per-request middleware writes to. The
//! transports differ only in their dimensions ([`Dimensions`]) and in what they measure.

use crate::xray::{Daemon, Subsegment, TraceHeader};
use crate::{Emitter, Metric, Origin};
use dq_config::parse_bool;
use std::marker::PhantomData;
use std::sync::Arc;

/// Their CloudWatch namespace.
pub const NAMESPACE: &str = "dq/query";
/// Turns their EMF lines on (a boolean as [`dq_config::parse_bool`] reads it; default off).
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
        Some(v) => parse_bool(&v)
            .ok_or_else(|| format!("{QUERY_EMF} must be a boolean (1/0, true/false, yes/no)"))?,
    };
    Ok(on.then(|| {
        Emitter::new(
            NAMESPACE,
            &[&["Stage", "Function"], per_request],
            Origin::from_lookup(&lookup),
        )
    }))
}

/// A query transport's per-request dimension set beside `[Stage, Function]`.
pub trait Dimensions {
    /// E.g. `[Stage, Dialect, Code]`.
    const PER_REQUEST: &'static [&'static str];
}

/// What a transport's middleware writes to, built once per process: EMF lines in [`NAMESPACE`]
/// aggregated over `D`'s dimensions when `QUERY_EMF` is on, X-Ray subsegments when a daemon is
/// configured.
pub struct Observe<D> {
    metrics: Option<Emitter>,
    xray: Option<Arc<Daemon>>,
    // `fn() -> D`: the transport is a type-level tag, so `Observe` is Send, Sync and Clone
    // whatever it is.
    dimensions: PhantomData<fn() -> D>,
}

impl<D> Default for Observe<D> {
    fn default() -> Self {
        Observe {
            metrics: None,
            xray: None,
            dimensions: PhantomData,
        }
    }
}

impl<D> Clone for Observe<D> {
    fn clone(&self) -> Self {
        Observe {
            metrics: self.metrics.clone(),
            xray: self.xray.clone(),
            dimensions: PhantomData,
        }
    }
}

impl<D> std::fmt::Debug for Observe<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observe")
            .field("metrics", &self.metrics)
            .field("xray", &self.xray)
            .finish()
    }
}

impl<D: Dimensions> Observe<D> {
    /// `QUERY_EMF` (metrics, default off) and `AWS_XRAY_DAEMON_ADDRESS` (subsegments) from the
    /// environment.
    ///
    /// # Errors
    /// `QUERY_EMF` is not a boolean.
    pub fn from_env() -> Result<Self, String> {
        Ok(Observe {
            metrics: Self::metrics_from_lookup(|k| std::env::var(k).ok())?,
            xray: Daemon::from_env().map(Arc::new),
            dimensions: PhantomData,
        })
    }

    /// The transport's emitter when `QUERY_EMF` (read through `lookup`) is on (tests build it
    /// to inject a sink).
    ///
    /// # Errors
    /// `QUERY_EMF` is not a boolean.
    pub fn metrics_from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Emitter>, String> {
        from_lookup(D::PER_REQUEST, lookup)
    }
}

impl<D> Observe<D> {
    /// Writes metrics with `metrics` (`None`: no metrics).
    pub fn with_metrics(mut self, metrics: Option<Emitter>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Sends subsegments to `daemon`.
    pub fn with_xray(mut self, daemon: Option<Daemon>) -> Self {
        self.xray = daemon.map(Arc::new);
        self
    }

    /// Writes one request's EMF line when metrics are on.
    pub fn emit(&self, properties: &[(&str, &str)], metrics: &[Metric]) {
        if let Some(emitter) = &self.metrics {
            emitter.emit(properties, metrics);
        }
    }

    /// Sends one request's subsegment when a daemon is configured and the request is traced;
    /// `subsegment` is built only then.
    pub fn trace(&self, trace: Option<&TraceHeader>, subsegment: impl FnOnce() -> Subsegment) {
        if let (Some(daemon), Some(trace)) = (&self.xray, trace) {
            daemon.send(trace, &subsegment());
        }
    }
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

    struct Calls;
    impl Dimensions for Calls {
        const PER_REQUEST: &'static [&'static str] = &["Stage", "Method", "Code"];
    }

    #[test]
    fn observe_emits_only_when_metrics_are_on() {
        let (sink, captured) = crate::Sink::memory();
        let on = |v: &'static str| move |k: &str| (k == QUERY_EMF).then(|| v.to_string());
        let emitter = Observe::<Calls>::metrics_from_lookup(on("true"))
            .unwrap()
            .map(|e| e.with_sink(sink));
        let observe = Observe::<Calls>::default().with_metrics(emitter);
        observe.emit(
            &[("Method", "ListIndexes"), ("Code", "OK")],
            &[Metric::new("requests", 1.0, crate::emf::COUNT)],
        );
        Observe::<Calls>::default().emit(&[], &[Metric::new("requests", 1.0, crate::emf::COUNT)]);
        // No daemon: the subsegment is never built.
        observe.trace(None, || unreachable!("no daemon"));
        assert_eq!(captured.lines().len(), 1);
        assert!(Observe::<Calls>::metrics_from_lookup(on("2")).is_err());
    }
}
