//! The search filter over `raw_events`, independent of any wire format:
//! FetchService builds it from `AdvancedSearchOptions` (`dq-fetch`), the GraphQL
//! cloud-event resolvers from their arguments.

use chrono::{DateTime, Duration, Utc};

/// Conditions on one string column: `in` / `not_in` lists (empty lists are no-ops, both may
/// combine) AND-ed, and the result OR-ed with each alternative in `or`, by the rule of
/// [`TagFilter`]: `(in AND not_in) OR or₁ OR or₂ …`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StringFilter {
    /// `col IN (…)`.
    pub include: Vec<String>,
    /// `col NOT IN (…)`.
    pub exclude: Vec<String>,
    /// Alternatives OR-ed with this level's conjunction.
    pub or: Vec<StringFilter>,
}

impl StringFilter {
    /// `col IN (value)`.
    pub fn eq(value: impl Into<String>) -> StringFilter {
        StringFilter {
            include: vec![value.into()],
            ..StringFilter::default()
        }
    }

    /// `col IN (values)`.
    pub fn any_of<I: IntoIterator<Item = S>, S: Into<String>>(values: I) -> StringFilter {
        StringFilter {
            include: values.into_iter().map(Into::into).collect(),
            ..StringFilter::default()
        }
    }

    /// True when it restricts nothing at this level (no lists and no alternatives).
    pub fn is_empty(&self) -> bool {
        self.include.is_empty() && self.exclude.is_empty() && self.or.is_empty()
    }

    /// The values the column is confined to: the `in` list when it is set and no alternative
    /// can widen it; `None` otherwise.
    pub fn confined_to(&self) -> Option<&[String]> {
        (!self.include.is_empty() && self.or.is_empty()).then_some(self.include.as_slice())
    }
}

/// Conditions on `extras.tags`: the present predicates of one level are
/// AND-ed (empty lists are no-ops) and the result is OR-ed with each alternative in `or`:
/// `(p1 AND p2 …) OR or₁ OR or₂ …`. An alternative that restricts nothing makes the whole
/// disjunction true; a level with neither predicates nor alternatives restricts nothing; a
/// level with only alternatives is their disjunction. `or` levels deeper than
/// [`MAX_OR_DEPTH`] are ignored (FetchService refuses them instead, `dq-fetch`).
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
    /// Alternatives OR-ed with this level's conjunction.
    pub or: Vec<TagFilter>,
}

/// Deepest `or` level of a [`TagFilter`] or [`StringFilter`] that is applied (the root is
/// level 0), fetch-api's bound; alternatives below it are dropped.
pub const MAX_OR_DEPTH: usize = 5;

/// Which rows tombstones hide.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Voiding {
    /// dq and gRPC: a tombstone (a `dimo.tombstone` row with non-empty `voids_id`; din sets
    /// `voids_id` on no other type, which `audit` checks) hides itself and every row of its
    /// subject with that id, whatever the source: the materializer's voiding rule.
    #[default]
    HideTombstones,
    /// fetch-api GraphQL, `includeDeleted: false`: a row is hidden when a tombstone of the same
    /// subject with type `dimo.tombstone`, non-empty `voids_id`, the SAME source and
    /// `voids_id = row.id` exists. Tombstone rows stay visible. Tombstones outside the time
    /// window or type filter still apply.
    SourceMatched,
    /// No suppression at all (fetch-api `includeDeleted: true`, telemetry
    /// attestations/vinVCLatest).
    None,
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

/// A cloud-event search. Time bounds are STRICT on both ends.
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
    /// Which rows tombstones hide.
    pub voiding: Voiding,
}

/// How far back a search without `after`, subject or id may reach (a DoS guard).
pub const UNBOUNDED_LOOKBACK_DAYS: i64 = 400;

impl Filter {
    /// The lower bound actually applied: `after`, or for a search with no `after` that is not
    /// confined to listed subjects or ids, `(before or now) − 400 days`. Subject- or id-scoped
    /// searches stay unbounded; an `or` alternative on those fields can widen the scope, so it
    /// keeps the floor.
    pub fn effective_after(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        if self.after.is_some()
            || self.subject.confined_to().is_some()
            || self.id.confined_to().is_some()
        {
            return self.after;
        }
        Some(self.before.unwrap_or(now) - Duration::days(UNBOUNDED_LOOKBACK_DAYS))
    }
}

/// Clamps a requested list size: ≤ 0 → 1, > 1000 → 1000.
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
        // An alternative can widen the scope: the floor stays.
        let widened = Filter {
            subject: StringFilter {
                or: vec![StringFilter {
                    exclude: vec!["did:y".into()],
                    ..StringFilter::default()
                }],
                ..StringFilter::eq("did:x")
            },
            ..f.clone()
        };
        assert_eq!(
            widened.effective_after(now),
            Some(before - Duration::days(400))
        );
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
