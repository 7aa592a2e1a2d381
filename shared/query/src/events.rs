//! Events: the newest-first list over R2-deduped `lake.events`, and the
//! per-name summaries from `lake.events_latest` with the base-scan fallback.

use crate::files::FileTable;
use crate::filter::{ArrayFilter, StringFilter};
use crate::{check_subject, check_window, subject_predicate, ts_lit, Engine, Error, Result};
use dq_lake::duckdb::params;
use dq_tables::keys::events_deduped_from;
use dq_tables::latest::events_latest_over;

/// `EventFilter`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    /// On `name`.
    pub name: Option<StringFilter>,
    /// On `source` (verbatim).
    pub source: Option<StringFilter>,
    /// On `tags`.
    pub tags: Option<ArrayFilter>,
}

/// An `events` request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventsRequest {
    /// Subject DID.
    pub subject: String,
    /// Inclusive start, µs.
    pub from_us: i64,
    /// Exclusive end, µs.
    pub to_us: i64,
    /// Filters.
    pub filter: EventFilter,
}

/// One event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// µs.
    pub timestamp_us: i64,
    /// e.g. `behavior.harshBraking`.
    pub name: String,
    /// Source address.
    pub source: String,
    /// Duration in ns.
    pub duration_ns: u64,
    /// Metadata JSON text ("" when none).
    pub metadata: String,
}

/// Per-name event summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSummary {
    /// Event name.
    pub name: String,
    /// Deduped count.
    pub count: i64,
    /// µs.
    pub first_seen_us: i64,
    /// µs.
    pub last_seen_us: i64,
}

/// `^[a-zA-Z][a-zA-Z0-9]*$` for one segment; an empty segment only where `allow_empty`.
fn segment_ok(s: &str, allow_empty: bool) -> bool {
    match s.chars().next() {
        None => allow_empty,
        Some(c) => c.is_ascii_alphabetic() && s.chars().all(|c| c.is_ascii_alphanumeric()),
    }
}

fn full_name_ok(s: &str) -> bool {
    matches!(s.split_once('.'), Some((a, b)) if segment_ok(a, false) && segment_ok(b, false))
}

fn prefix_ok(s: &str) -> bool {
    matches!(s.split_once('.'), Some((a, b)) if segment_ok(a, false) && segment_ok(b, true))
}

fn validate_name_filter(f: &StringFilter) -> Result<()> {
    if let Some(eq) = &f.eq {
        if !full_name_ok(eq) {
            return Err(Error::invalid(format!("invalid event name '{eq}'")));
        }
    }
    if let Some(n) = f.in_.iter().find(|n| !full_name_ok(n)) {
        return Err(Error::invalid(format!("invalid event name '{n}'")));
    }
    if let Some(p) = &f.starts_with {
        if !prefix_ok(p) {
            return Err(Error::invalid(format!("invalid event name prefix '{p}'")));
        }
    }
    f.or.iter().try_for_each(validate_name_filter)
}

impl EventsRequest {
    /// `validateEventArgs`.
    ///
    /// # Errors
    /// BAD_REQUEST reasons.
    pub fn validate(&self) -> Result<()> {
        check_window(&self.subject, self.from_us, self.to_us)?;
        if let Some(n) = &self.filter.name {
            validate_name_filter(n)?;
        }
        Ok(())
    }
}

impl Engine {
    /// Events in `[from, to)`, newest first, no limit.
    ///
    /// # Errors
    /// Validation or database failures.
    pub fn events(&self, req: &EventsRequest) -> Result<Vec<Event>> {
        req.validate()?;
        let inner = format!(
            "{} AND \"timestamp\" >= {} AND \"timestamp\" < {}",
            subject_predicate(&req.subject),
            ts_lit(req.from_us),
            ts_lit(req.to_us)
        );
        let mut outer = vec!["true".to_string()];
        outer.extend(req.filter.name.as_ref().and_then(|f| f.sql("name")));
        outer.extend(req.filter.source.as_ref().and_then(|f| f.sql("source")));
        outer.extend(req.filter.tags.as_ref().and_then(|f| f.sql("tags")));
        let sql = |relation: &str| {
            format!(
                "SELECT epoch_us(\"timestamp\"), name, coalesce(source, ''), coalesce(duration_ns, 0), \
                 coalesce(metadata, '') FROM ({}) WHERE {} ORDER BY \"timestamp\" DESC",
                events_deduped_from(relation, &inner),
                outer.join(" AND ")
            )
        };
        let window = [(req.from_us, req.to_us)];
        self.rows_of(
            "events",
            FileTable::Events,
            &req.subject,
            window,
            |[relation]| sql(relation),
            params![req.subject],
            |r| {
                Ok(Event {
                    timestamp_us: r.get(0)?,
                    name: r.get(1)?,
                    source: r.get(2)?,
                    duration_ns: r.get(3)?,
                    metadata: r.get(4)?,
                })
            },
        )
    }

    /// Per-name event summaries (sorted by name): the rollup, or the deduped base when the
    /// rollup has no rows for the subject.
    ///
    /// # Errors
    /// Database failures.
    pub fn event_summaries(&self, subject: &str) -> Result<Vec<EventSummary>> {
        check_subject(subject)?;
        let filter = subject_predicate(subject);
        let mut out = Vec::new();
        if self.table_exists(&self.has_events_rollup, "events_latest")? {
            out = self.summaries(subject, FileTable::EventsLatest, |relation| {
                format!("{relation} WHERE {filter}")
            })?;
        }
        if out.is_empty() {
            out = self.summaries(subject, FileTable::Events, |relation| {
                let deduped = events_deduped_from(relation, &filter);
                format!("({})", events_latest_over(&deduped))
            })?;
        }
        Ok(out)
    }

    /// The summaries read from the relation `from` makes of `table` (its files directly when
    /// the listing allows), over the subject's whole history.
    fn summaries(
        &self,
        subject: &str,
        table: FileTable,
        from: impl Fn(&str) -> String,
    ) -> Result<Vec<EventSummary>> {
        self.rows_of(
            "event summaries",
            table,
            subject,
            [(i64::MIN, i64::MAX)],
            |[relation]| {
                format!(
                    "SELECT name, \"count\", epoch_us(first_seen), epoch_us(last_seen) FROM {} ORDER BY name",
                    from(relation)
                )
            },
            params![subject],
            |r| {
                Ok(EventSummary {
                    name: r.get(0)?,
                    count: r.get(1)?,
                    first_seen_us: r.get(2)?,
                    last_seen_us: r.get(3)?,
                })
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_patterns() {
        assert!(full_name_ok("behavior.harshBraking"));
        assert!(!full_name_ok("behavior."));
        assert!(!full_name_ok("1a.b"));
        assert!(prefix_ok("behavior."));
        assert!(prefix_ok("behavior.harsh"));
        assert!(!prefix_ok("behavior"));
    }
}
