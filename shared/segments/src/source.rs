//! The data-access seam of the detectors: [`SignalSource`].
//!
//! Every read is over `lake.signals`, per subject, half-open `[from, to)` in UTC µs, with the
//! read dedup (one row per `(subject, name, timestamp)`, the lowest `cloud_event_id` winning)
//! and `subject_bucket` pruning *inside* the dedup subquery. The documented SQL uses this
//! building block, written `D(<name predicate>, from, to)`:
//!
//! ```sql
//! SELECT timestamp, name, value_number, cloud_event_id
//! FROM lake.signals
//! WHERE subject = ? AND subject_bucket = <fnv1a32(subject) % 256>
//!   AND <name predicate>
//!   AND timestamp >= make_timestamp(<from_µs>) AND timestamp < make_timestamp(<to_µs>)
//! QUALIFY row_number() OVER (PARTITION BY subject, name, timestamp ORDER BY cloud_event_id) = 1
//! ```
//!
//! Timestamps are inlined as µs literals, never bound; rows come back ordered by time ascending
//! and normalised to UTC. [`crate::reference`] defines every read as a pure function over already
//! deduplicated rows; [`crate::memory::MemorySource`] implements the trait with it, so a DuckDB
//! implementation can be checked row for row against it.
//!
//! The trait is synchronous: DuckDB calls block, so an async caller runs a whole detection
//! inside one `spawn_blocking` with one pooled connection.

use crate::model::{ActiveWindow, LevelSample, StateChange, TimeRange, Ts};

use crate::reference;

pub use crate::model::{
    WindowSpec, ENGINE_SPEED_SIGNAL, FUEL_LEVEL_SIGNAL, IGNITION_LOOKBACK_DAYS, IGNITION_SIGNAL,
    ODOMETER_SIGNAL, SOC_SIGNAL,
};

/// The reads the detectors need. One implementation per backend (DuckDB in production,
/// [`crate::memory::MemorySource`] in tests).
pub trait SignalSource {
    /// The backend's error; wrapped into [`crate::Error::Source`].
    type Error: std::error::Error + Send + Sync + 'static;

    /// Activity windows of ALL the subject's signals in `[from, to)`, epoch-aligned (NOT aligned
    /// to `from`), keeping windows that meet both thresholds, ordered by window start.
    ///
    /// ```sql
    /// SELECT window_start,
    ///        make_timestamp(epoch_us(window_start) + <win_µs>) AS window_end,
    ///        count(*) AS signal_count, count(DISTINCT name) AS distinct_signal_count
    /// FROM (SELECT make_timestamp((epoch_us(timestamp) // <win_µs>) * <win_µs>) AS window_start, name
    ///       FROM D(TRUE, from, to))
    /// GROUP BY window_start
    /// HAVING count(*) >= <min_signal_count> AND count(DISTINCT name) >= <min_distinct_signals>
    /// ORDER BY window_start
    /// ```
    /// Use integer division `//` (no DOUBLE promotion). Reference: [`reference::windowed_signal_counts`].
    fn windowed_signal_counts(
        &self,
        subject: &str,
        from: Ts,
        to: Ts,
        spec: WindowSpec,
    ) -> Result<Vec<ActiveWindow>, Self::Error>;

    /// Numeric readings of one signal in `[from, to)`, ascending; rows whose `value_number` is
    /// NULL are skipped.
    ///
    /// ```sql
    /// SELECT timestamp, value_number FROM D(name = ?, from, to)
    /// WHERE value_number IS NOT NULL ORDER BY timestamp
    /// ```
    fn level_samples(
        &self,
        subject: &str,
        name: &str,
        from: Ts,
        to: Ts,
    ) -> Result<Vec<LevelSample>, Self::Error>;

    /// `isIgnitionOn` transitions for a detection over `[from, to)`, ascending:
    /// every transition in `[from, to)` plus the single latest transition before `from` (the
    /// seed); if there is no transition at all and the latest reading in the window is 1, one
    /// synthetic ON `{ts: earliest reading in the window, new 1, prev 0}`.
    ///
    /// Transitions are computed over readings in `[from − 30 days, to)`:
    /// ```sql
    /// WITH r AS (  -- non-NULL readings; NULLs are filtered in the WHERE, before the dedup window
    ///   SELECT timestamp, value_number FROM D(name = 'isIgnitionOn' AND value_number IS NOT NULL,
    ///                                         from - INTERVAL 30 DAY, to)),
    /// prior AS (   -- latest non-NULL reading strictly before the lookback (ties: lowest id)
    ///   SELECT value_number FROM lake.signals WHERE subject = ? AND subject_bucket = N
    ///     AND name = 'isIgnitionOn' AND value_number IS NOT NULL
    ///     AND timestamp < make_timestamp(<lookback_µs>)
    ///   ORDER BY timestamp DESC, cloud_event_id LIMIT 1),
    /// t AS (
    ///   SELECT timestamp, value_number AS new_state,
    ///          coalesce(lag(value_number) OVER (ORDER BY timestamp),
    ///                   (SELECT value_number FROM prior), 0) AS prev_state
    ///   FROM r)
    /// SELECT * FROM t WHERE new_state <> prev_state AND timestamp >= <from>
    /// UNION ALL
    /// (SELECT * FROM t WHERE new_state <> prev_state AND timestamp < <from>
    ///  ORDER BY timestamp DESC LIMIT 1)
    /// ORDER BY timestamp
    /// ```
    /// and, only when that returns no row, the synthetic-ON probe:
    /// `SELECT arg_max(value_number, timestamp) = 1, min(timestamp) FROM r`.
    /// Reference: [`reference::ignition_state_changes`].
    fn ignition_state_changes(
        &self,
        subject: &str,
        from: Ts,
        to: Ts,
    ) -> Result<Vec<StateChange>, Self::Error>;

    /// Raw idle runs of `name` in `[from, to)`, ascending, unclipped: maximal sequences
    /// of idle readings (`0 < value ≤ max_idle_rpm`) with no non-idle reading between them and
    /// no gap `> max_gap_seconds` between consecutive idle readings; each run is
    /// `[first idle ts, last idle ts]`.
    ///
    /// The default streams [`SignalSource::level_samples`] through [`reference::idle_runs`]; the
    /// DuckDB implementation should override it with gaps-and-islands SQL:
    /// ```sql
    /// WITH s AS (SELECT timestamp, value_number > 0 AND value_number <= <max_idle_rpm> AS idle
    ///            FROM D(name = ?, from, to) WHERE value_number IS NOT NULL),
    /// l AS (SELECT timestamp, idle,
    ///              lag(idle) OVER w AS prev_idle, lag(timestamp) OVER w AS prev_ts
    ///       FROM s WINDOW w AS (ORDER BY timestamp)),
    /// i AS (SELECT timestamp, sum(CASE WHEN prev_idle IS DISTINCT FROM TRUE
    ///                                   OR timestamp - prev_ts > INTERVAL <max_gap> SECOND
    ///                              THEN 1 ELSE 0 END) OVER (ORDER BY timestamp) AS island
    ///       FROM l WHERE idle)
    /// SELECT min(timestamp), max(timestamp) FROM i GROUP BY island ORDER BY 1
    /// ```
    fn idle_runs(
        &self,
        subject: &str,
        name: &str,
        from: Ts,
        to: Ts,
        max_idle_rpm: f64,
        max_gap_seconds: i64,
    ) -> Result<Vec<TimeRange>, Self::Error> {
        let samples = self.level_samples(subject, name, from, to)?;
        Ok(reference::idle_runs(
            &samples,
            max_idle_rpm,
            max_gap_seconds,
        ))
    }
}
