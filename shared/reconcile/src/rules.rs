//! How each list of each dialect's answers compares: whether its order is part of the API, and
//! whether `null` and `[]` mean the same. One table, read by `dqctl reconcile` and by the graphql
//! function's shadow mode alike.

use crate::Dialect;

/// Whether a list's order is part of the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Every position is defined (sorted by a unique key, or in a defined sequence).
    Strict,
    /// Sorted by the field at this path inside each element (schema field names); elements with
    /// equal keys may come in any order (the original services had no tie-breaker).
    By(&'static [&'static str]),
    /// No order is defined: compared as a multiset.
    Unordered,
}

/// Whether `null` and `[]` are the same answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Empty {
    /// The dialect does not say which an empty answer is: both are equal.
    NullIsEmpty,
    /// The dialect defines it (or the list is non-null): `null` and `[]` differ.
    Distinct,
}

/// How one list compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListRule {
    /// Order.
    pub order: Order,
    /// Null vs empty.
    pub empty: Empty,
}

/// Lists the table does not name: order matters and `null` is not `[]` (a false mismatch is
/// visible and can be added here; a false match would hide a difference).
pub const DEFAULT_RULE: ListRule = ListRule {
    order: Order::Strict,
    empty: Empty::Distinct,
};

use Dialect::{Dq, Fetch, Telemetry};
use Empty::{Distinct, NullIsEmpty};
use Order::{By, Strict, Unordered};

/// The dialects serving the signal, event and segment fields.
const SIGNALS: &[Dialect] = &[Dq, Telemetry];
/// The dialects serving `cloudEvents`, `latestCloudEvent` and `availableCloudEventTypes`.
const CLOUD_EVENTS: &[Dialect] = &[Dq, Fetch];

const fn rule(order: Order, empty: Empty) -> ListRule {
    ListRule { order, empty }
}

/// `(dialects, path of schema field names from the root field, rule)`: the orders and empty
/// answers each field defines in each dialect.
#[rustfmt::skip]
const TABLE: &[(&[Dialect], &[&str], ListRule)] = &[
    // Buckets ascending by timestamp, one per bucket; the spec does not say whether no bucket is
    // null or [].
    (SIGNALS, &["signals"], rule(Strict, NullIsEmpty)),
    // ORDER BY name; empty answer unspecified.
    (SIGNALS, &["availableSignals"], rule(Strict, NullIsEmpty)),
    // Per-name summaries sorted by name; non-null lists.
    (SIGNALS, &["dataSummary", "availableSignals"], rule(Strict, Distinct)),
    (SIGNALS, &["dataSummary", "signalDataSummary"], rule(Strict, Distinct)),
    (SIGNALS, &["dataSummary", "eventDataSummary"], rule(Strict, Distinct)),
    // Sorted by name, the approximate location appended last; [] (never null) when empty.
    (SIGNALS, &["signalsSnapshot", "signals"], rule(Strict, Distinct)),
    // Newest first, no tie-breaker in the original; [] when none.
    (SIGNALS, &["events"], rule(By(&["timestamp"]), Distinct)),
    // Ascending by start; per segment the summaries are sorted by (name, agg), the event counts
    // come in request order or, without requests, Go map order.
    (SIGNALS, &["segments"], rule(By(&["start", "timestamp"]), Distinct)),
    (SIGNALS, &["segments", "signals"], rule(Strict, NullIsEmpty)),
    (SIGNALS, &["segments", "eventCounts"], rule(Unordered, NullIsEmpty)),
    // Calendar days ascending; [] (never null) when no day; day summaries as for segments.
    (SIGNALS, &["dailyActivity"], rule(Strict, Distinct)),
    (SIGNALS, &["dailyActivity", "signals"], rule(Strict, Distinct)),
    (SIGNALS, &["dailyActivity", "eventCounts"], rule(Unordered, Distinct)),
    // Newest first by time (dq adds id/type tie-breakers, the originals none); tags are a set,
    // never null.
    (CLOUD_EVENTS, &["cloudEvents"], rule(By(&["header", "time"]), Distinct)),
    (CLOUD_EVENTS, &["cloudEvents", "header", "tags"], rule(Unordered, Distinct)),
    (CLOUD_EVENTS, &["latestCloudEvent", "header", "tags"], rule(Unordered, Distinct)),
    // ORDER BY type; [] when none.
    (CLOUD_EVENTS, &["availableCloudEventTypes"], rule(Strict, Distinct)),
    (&[Fetch], &["indexes"], rule(By(&["header", "time"]), Distinct)),
    (&[Fetch], &["indexes", "header", "tags"], rule(Unordered, Distinct)),
    (&[Fetch], &["latestIndex", "header", "tags"], rule(Unordered, Distinct)),
    // Newest first; null (not []) when nothing matches, and tags null (not []) when none.
    (&[Telemetry], &["attestations"], rule(By(&["time"]), Distinct)),
    (&[Telemetry], &["attestations", "tags"], rule(Unordered, Distinct)),
];

/// The rule of the list at `path` (schema field names from the root field) in `dialect`.
pub fn list_rule(dialect: Dialect, path: &[&str]) -> ListRule {
    TABLE
        .iter()
        .find(|(dialects, p, _)| dialects.contains(&dialect) && *p == path)
        .map_or(DEFAULT_RULE, |(_, _, rule)| *rule)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_dialect_lookup() {
        assert_eq!(list_rule(Telemetry, &["attestations"]).empty, Distinct);
        assert_eq!(list_rule(Dq, &["attestations"]), DEFAULT_RULE);
        assert_eq!(
            list_rule(Fetch, &["cloudEvents"]).order,
            By(&["header", "time"])
        );
        assert_eq!(list_rule(Telemetry, &["cloudEvents"]), DEFAULT_RULE);
        assert_eq!(list_rule(Dq, &["segments", "eventCounts"]).order, Unordered);
        assert_eq!("telemetry".parse::<Dialect>(), Ok(Telemetry));
        assert!("graphql".parse::<Dialect>().is_err());
    }
}
