//! The dedup and write keys, defined once. The write path, the rollups,
//! the audit and (later) the read side all build their SQL from these, so they cannot drift.
//!
//! | key | columns | tie-break |
//! |---|---|---|
//! | R0 raw | `CloudEventHeader::key()` = subject!time(s)!type!source!id | first wins |
//! | [`SIGNAL_WRITE_KEY`] W1 | subject_bucket, cloud_event_id, name, timestamp | existing row wins |
//! | [`EVENT_WRITE_KEY`] W1 | subject_bucket, cloud_event_id, name, timestamp | existing row wins |
//! | [`SIGNAL_READ_KEY`] R1 | subject, name, timestamp | lowest cloud_event_id |
//! | [`EVENT_READ_KEY`] R2 | subject, timestamp, name, source | lowest cloud_event_id |
//! | [`FEED_KEYSET`] | subject, time, id, rowid (missing values as [`FEED_MISSING_TIME`] and `''`) | — (rowid makes it total: rows sharing (subject, time, id) are never skipped) |

use std::collections::BTreeSet;

use dq_lake::quote;

/// W1 for `lake.signals`: an idempotent insert skips a row whose key is already at rest.
pub const SIGNAL_WRITE_KEY: [&str; 4] =
    ["subject_bucket", "cloud_event_id", "name", "\"timestamp\""];
/// W1 for `lake.events`.
pub const EVENT_WRITE_KEY: [&str; 4] =
    ["subject_bucket", "cloud_event_id", "name", "\"timestamp\""];
/// R1: the signal read dedup; the lowest `cloud_event_id` wins.
pub const SIGNAL_READ_KEY: [&str; 3] = ["subject", "name", "\"timestamp\""];
/// R2: the event read dedup; the lowest `cloud_event_id` wins.
pub const EVENT_READ_KEY: [&str; 4] = ["subject", "\"timestamp\"", "name", "source"];
/// The tie-break column of both read keys.
pub const READ_TIEBREAK: &str = "cloud_event_id";
/// [`READ_TIEBREAK`] for reads that deduplicate outside SQL: of two rows sharing a read key,
/// the one ordered first wins. DuckDB orders `VARCHAR` by its bytes (no collation), and so
/// does this.
pub fn read_tiebreak(a_cloud_event_id: &str, b_cloud_event_id: &str) -> std::cmp::Ordering {
    a_cloud_event_id.as_bytes().cmp(b_cloud_event_id.as_bytes())
}
/// The change-feed keyset, in `ORDER BY` order (`rowid` is unique per table). A raw row
/// lacking its subject, time or id (din never writes one; the table has no NOT NULL) must not
/// break the paging: each column is ordered and compared as the position the reader records
/// for it, `''` for a missing subject or id and [`FEED_MISSING_TIME`] for a missing time. SQL
/// sorts NULLs last and matches them in no comparison, so with the bare columns the rows around
/// a NULL at a page's edge were skipped unread.
pub const FEED_KEYSET: [&str; 4] = [
    "coalesce(subject, '')",
    "coalesce(\"time\", '9999-12-31 23:59:59.999999+00'::TIMESTAMPTZ)",
    "coalesce(id, '')",
    "rowid",
];
/// The time a raw row lacking one sorts at in [`FEED_KEYSET`], in µs since the epoch
/// (9999-12-31 23:59:59.999999 UTC).
pub const FEED_MISSING_TIME: i64 = 253_402_300_799_999_999;

/// `QUALIFY` clause keeping one row per read key (R1 or R2): the read-side dedup.
pub fn read_dedup_qualify(key: &[&str]) -> String {
    format!(
        "QUALIFY row_number() OVER (PARTITION BY {} ORDER BY {READ_TIEBREAK}) = 1",
        key.join(", ")
    )
}

/// The signals read by every reader: R1-deduplicated `lake.signals` restricted by `filter`
/// (a predicate on the base table, kept at the same level as the QUALIFY so pruning survives).
pub fn signals_deduped(filter: &str) -> String {
    signals_deduped_from("lake.signals", filter)
}

/// [`signals_deduped`] over another relation with the signals columns (a window's new rows, a
/// snapshot, its files).
pub fn signals_deduped_from(table: &str, filter: &str) -> String {
    format!(
        "SELECT * FROM {table} WHERE {filter} {}",
        read_dedup_qualify(&SIGNAL_READ_KEY)
    )
}

/// [`signals_deduped_from`] over a relation in which only the subjects in `colliding` can hold
/// two rows of one read key. The other subjects' rows are one per read key already, so they are
/// taken as they are, without the window function (whose sort was most of the cost of a
/// materializer window's rollup delta); with `colliding` empty there is no window at all.
pub fn signals_deduped_among(table: &str, filter: &str, colliding: &BTreeSet<String>) -> String {
    if colliding.is_empty() {
        return format!("SELECT * FROM {table} WHERE {filter}");
    }
    let list: Vec<String> = colliding.iter().map(|s| quote(s)).collect();
    let list = list.join(", ");
    format!(
        "SELECT * FROM {table} WHERE ({filter}) AND subject NOT IN ({list}) UNION ALL ({})",
        signals_deduped_from(table, &format!("({filter}) AND subject IN ({list})"))
    )
}

/// The events read by every reader: R2-deduplicated `lake.events` restricted by `filter`.
pub fn events_deduped(filter: &str) -> String {
    events_deduped_from("lake.events", filter)
}

/// [`events_deduped`] over another relation with the events columns (a snapshot, its files).
pub fn events_deduped_from(table: &str, filter: &str) -> String {
    format!(
        "SELECT * FROM {table} WHERE {filter} {}",
        read_dedup_qualify(&EVENT_READ_KEY)
    )
}

/// `t.a = s.a AND …` over a key, for anti-joins between a target `t` and a source `s`.
pub fn key_equal(key: &[&str], left: &str, right: &str) -> String {
    key.iter()
        .map(|c| format!("{left}.{c} = {right}.{c}"))
        .collect::<Vec<_>>()
        .join(" AND ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_predicates() {
        assert_eq!(
            key_equal(&SIGNAL_WRITE_KEY[..2], "t", "s"),
            "t.subject_bucket = s.subject_bucket AND t.cloud_event_id = s.cloud_event_id"
        );
        let none = BTreeSet::new();
        assert_eq!(
            signals_deduped_among("t", "x = 1", &none),
            "SELECT * FROM t WHERE x = 1"
        );
        let two: BTreeSet<String> = ["b'1".to_owned(), "a".to_owned()].into();
        assert_eq!(
            signals_deduped_among("t", "x = 1", &two),
            "SELECT * FROM t WHERE (x = 1) AND subject NOT IN ('a', 'b''1') UNION ALL \
             (SELECT * FROM t WHERE (x = 1) AND subject IN ('a', 'b''1') QUALIFY row_number() \
             OVER (PARTITION BY subject, name, \"timestamp\" ORDER BY cloud_event_id) = 1)"
        );
        assert!(signals_deduped("true").ends_with(
            "QUALIFY row_number() OVER (PARTITION BY subject, name, \"timestamp\" ORDER BY cloud_event_id) = 1"
        ));
    }
}
