//! The search filter over `raw_events` (dq-query.md §4.4), independent of any wire format:
//! FetchService builds it from `AdvancedSearchOptions` ([`crate::convert`]), the GraphQL
//! cloud-event resolvers from their arguments.

use chrono::{DateTime, Duration, Utc};

/// `in` / `not_in` lists of one string column; empty lists are no-ops, both may combine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StringFilter {
    /// `col IN (…)`.
    pub include: Vec<String>,
    /// `col NOT IN (…)`.
    pub exclude: Vec<String>,
}

impl StringFilter {
    /// `col IN (value)`.
    pub fn eq(value: impl Into<String>) -> StringFilter {
        StringFilter {
            include: vec![value.into()],
            exclude: Vec::new(),
        }
    }

    /// `col IN (values)`.
    pub fn any_of<I: IntoIterator<Item = S>, S: Into<String>>(values: I) -> StringFilter {
        StringFilter {
            include: values.into_iter().map(Into::into).collect(),
            exclude: Vec::new(),
        }
    }

    /// True when it restricts nothing.
    pub fn is_empty(&self) -> bool {
        self.include.is_empty() && self.exclude.is_empty()
    }
}

/// Conditions on `extras.tags` (all AND-ed; empty lists are no-ops).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TagFilter {
    /// At least one of these tags.
    pub contains_any: Vec<String>,
    /// Every one of these tags.
    pub contains_all: Vec<String>,
    /// None of these tags.
    pub not_contains_any: Vec<String>,
    /// Not every one of these tags.
    pub not_contains_all: Vec<String>,
}

/// Result order by event time (ties broken by id, then type, in the same direction).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Order {
    /// Newest first (the default).
    #[default]
    Descending,
    /// Oldest first.
    Ascending,
}

/// A cloud-event search. Time bounds are STRICT on both ends (§4.4).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// `time > after`.
    pub after: Option<DateTime<Utc>>,
    /// `time < before`.
    pub before: Option<DateTime<Utc>>,
    /// Result order (ignored by latest lookups, which are always newest first).
    pub order: Order,
    /// `subject`.
    pub subject: StringFilter,
    /// `type`.
    pub event_type: StringFilter,
    /// `data_version`.
    pub data_version: StringFilter,
    /// `source`.
    pub source: StringFilter,
    /// `producer`.
    pub producer: StringFilter,
    /// The raw `extras` JSON text, compared verbatim.
    pub extras: StringFilter,
    /// `id`.
    pub id: StringFilter,
    /// `extras.tags`.
    pub tags: TagFilter,
}

/// How far back a search without `after`, subject or id may reach (a DoS guard, §4.4).
pub const UNBOUNDED_LOOKBACK_DAYS: i64 = 400;

impl Filter {
    /// The lower bound actually applied: `after`, or for a search with no `after`, no subject
    /// and no id filter, `(before or now) − 400 days`. Subject- or id-scoped searches stay
    /// unbounded.
    pub fn effective_after(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        if self.after.is_some() || !self.subject.include.is_empty() || !self.id.include.is_empty() {
            return self.after;
        }
        Some(self.before.unwrap_or(now) - Duration::days(UNBOUNDED_LOOKBACK_DAYS))
    }
}

/// Clamps a requested list size: ≤ 0 → 1, > 1000 → 1000 (§4.3, §4.6).
pub fn clamp_limit(limit: i64) -> usize {
    limit.clamp(1, MAX_LIMIT as i64) as usize
}

/// Largest page a search returns (`maxLakeQueryLimit`).
pub const MAX_LIMIT: usize = 1000;

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn floor_only_for_unscoped_searches() {
        let now = Utc.with_ymd_and_hms(2026, 6, 1, 0, 0, 0).unwrap();
        let before = Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap();
        let mut f = Filter::default();
        assert_eq!(f.effective_after(now), Some(now - Duration::days(400)));
        f.before = Some(before);
        assert_eq!(f.effective_after(now), Some(before - Duration::days(400)));
        let scoped = Filter {
            subject: StringFilter::eq("did:x"),
            ..f.clone()
        };
        assert_eq!(scoped.effective_after(now), None);
        let by_id = Filter {
            id: StringFilter::eq("abc"),
            ..f.clone()
        };
        assert_eq!(by_id.effective_after(now), None);
        f.after = Some(before);
        assert_eq!(f.effective_after(now), Some(before));
    }

    #[test]
    fn limits_clamp() {
        assert_eq!(
            [-5, 0, 1, 999, 1000, 1001, i64::MAX].map(clamp_limit),
            [1, 1, 1, 999, 1000, 1000, 1000]
        );
    }
}
