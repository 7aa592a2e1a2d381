//! [`MemorySource`]: an in-memory [`SignalSource`] over raw signal rows, built on
//! [`crate::reference`]. It is the fake of the test suites and a conformance oracle for the
//! DuckDB source (load the same rows into both, compare every read).

use std::collections::BTreeMap;
use std::convert::Infallible;

use chrono::TimeDelta;

use crate::model::{ActiveWindow, LevelSample, StateChange, Ts};
use crate::reference;
use crate::source::{SignalSource, WindowSpec, IGNITION_LOOKBACK_DAYS, IGNITION_SIGNAL};
use crate::time::add;

/// Signal rows of one subject, deduplicated on `(name, timestamp)`: the first row inserted
/// wins, standing in for the lowest `cloud_event_id`.
#[derive(Debug, Clone, Default)]
pub struct MemorySource {
    rows: BTreeMap<(String, Ts), Option<f64>>,
}

impl MemorySource {
    /// An empty source.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one row; `None` is a NULL `value_number` (e.g. a location or string row).
    pub fn push(&mut self, name: &str, ts: Ts, value: Option<f64>) -> &mut Self {
        self.rows.entry((name.to_owned(), ts)).or_insert(value);
        self
    }

    /// Adds numeric readings of one signal.
    pub fn push_samples(
        &mut self,
        name: &str,
        samples: impl IntoIterator<Item = LevelSample>,
    ) -> &mut Self {
        for s in samples {
            self.push(name, s.ts, Some(s.value));
        }
        self
    }

    fn samples(&self, name: &str, from: Ts, to: Ts) -> Vec<LevelSample> {
        let mut out: Vec<LevelSample> = self
            .rows
            .iter()
            .filter(|((n, ts), _)| n == name && *ts >= from && *ts < to)
            .filter_map(|((_, ts), v)| v.map(|v| LevelSample::new(*ts, v)))
            .collect();
        out.sort_by_key(|s| s.ts);
        out
    }
}

impl SignalSource for MemorySource {
    type Error = Infallible;

    fn windowed_signal_counts(
        &self,
        _subject: &str,
        from: Ts,
        to: Ts,
        spec: WindowSpec,
    ) -> Result<Vec<ActiveWindow>, Infallible> {
        let rows = self.rows.keys().map(|(name, ts)| (*ts, name.as_str()));
        Ok(reference::windowed_signal_counts(rows, from, to, spec))
    }

    fn level_samples(
        &self,
        _subject: &str,
        name: &str,
        from: Ts,
        to: Ts,
    ) -> Result<Vec<LevelSample>, Infallible> {
        Ok(self.samples(name, from, to))
    }

    fn ignition_state_changes(
        &self,
        _subject: &str,
        from: Ts,
        to: Ts,
    ) -> Result<Vec<StateChange>, Infallible> {
        let lookback = add(from, -TimeDelta::days(IGNITION_LOOKBACK_DAYS));
        let before = self.samples(IGNITION_SIGNAL, Ts::MIN_UTC, lookback);
        let prior = before.last().map(|s| s.value);
        let readings = self.samples(IGNITION_SIGNAL, lookback, to);
        Ok(reference::ignition_state_changes(
            prior, &readings, from, to,
        ))
    }
}
