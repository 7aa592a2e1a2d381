//! The `segments` request pipeline minus the SQL summary steps:
//! clamp `to` → validate → detect over the original range → sort → strict `after` cursor →
//! `limit` (IDLING: candidate cap now, `limit` after the speed filter, see
//! [`SegmentList::finish`]).

use chrono::TimeDelta;

use crate::config::SegmentConfig;
use crate::detect::{self, Detection};
use crate::error::{Result, ValidationError};
use crate::model::{Mechanism, Segment, TimeRange, Ts};
use crate::source::SignalSource;
use crate::time::add;

/// SDL default of `limit`; the GraphQL layer applies it when the argument is omitted.
pub const DEFAULT_LIMIT: i32 = 100;
/// Largest accepted `limit`.
pub const MAX_LIMIT: i32 = 200;
/// IDLING keeps this many candidates (8 × [`MAX_LIMIT`]) until the speed filter has run.
pub const IDLING_CANDIDATE_CAP: usize = 1600;
/// Longest accepted `to − from`: 32 days + 1 s (the message says 32 days; docs say 31).
pub const MAX_RANGE: TimeDelta = TimeDelta::seconds(32 * 86_400 + 1);
/// REFUEL/RECHARGE summaries extend past the segment end by this (capped at the next start).
pub const SUMMARY_END_BUFFER: TimeDelta = TimeDelta::minutes(2);

/// A `segments` query's detection arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentsRequest {
    /// Vehicle DID.
    pub subject: String,
    /// Range start.
    pub from: Ts,
    /// Range end (clamped to `now`).
    pub to: Ts,
    /// Detector.
    pub mechanism: Mechanism,
    /// `None` when no `config` object was sent; otherwise already default-injected
    /// ([`crate::SegmentConfigInput::materialize`]).
    pub config: Option<SegmentConfig>,
    /// Page size after SDL defaulting ([`DEFAULT_LIMIT`]); `None` (explicit `null`, internal
    /// callers) means no truncation.
    pub limit: Option<i32>,
    /// Cursor: keep only segments starting strictly after it.
    pub after: Option<Ts>,
}

impl SegmentsRequest {
    /// A request with no config, the default limit and no cursor.
    pub fn new(subject: impl Into<String>, from: Ts, to: Ts, mechanism: Mechanism) -> Self {
        SegmentsRequest {
            subject: subject.into(),
            from,
            to,
            mechanism,
            config: None,
            limit: Some(DEFAULT_LIMIT),
            after: None,
        }
    }
}

/// The detected page, before summaries.
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentList {
    /// Mechanism that produced the segments.
    pub mechanism: Mechanism,
    /// Requested `from`.
    pub from: Ts,
    /// `to` after the clamp to `now`: the end of ongoing segments' summary ranges.
    pub to: Ts,
    /// Segments, ascending by start (strictly increasing starts).
    pub segments: Vec<Segment>,
    /// IDLING only: the limit still to apply in [`SegmentList::finish`].
    pending_limit: Option<usize>,
}

/// The first steps of the pipeline: clamps `to` to `now`, then validates in Go's order. Returns the clamped
/// `to`. Runs before any read.
pub fn validate_segments_request(req: &SegmentsRequest, now: Ts) -> Result<Ts, ValidationError> {
    let to = req.to.min(now);
    if req.subject.is_empty() {
        return Err(ValidationError::SubjectRequired);
    }
    if req.from > to {
        return Err(ValidationError::FromAfterTo);
    }
    if req.from == to {
        return Err(ValidationError::FromEqualsTo);
    }
    if to.signed_duration_since(req.from) > MAX_RANGE {
        return Err(ValidationError::RangeTooLong);
    }
    if let Some(config) = &req.config {
        config.validate(req.mechanism)?;
    }
    if let Some(limit) = req.limit {
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(ValidationError::Limit);
        }
    }
    Ok(to)
}

/// Runs the `segments` pipeline up to (not including) the summaries.
pub fn segments<S: SignalSource + ?Sized>(
    source: &S,
    req: &SegmentsRequest,
    now: Ts,
) -> Result<SegmentList> {
    let to = validate_segments_request(req, now)?;
    let mut segments = detect::detect(&Detection::new(
        req.mechanism,
        source,
        &req.subject,
        req.from,
        to,
        req.config.as_ref(),
        now,
    ))?;
    segments.sort_by_key(|s| s.start);
    if let Some(after) = req.after {
        segments.retain(|s| s.start > after);
    }
    let limit = req.limit.and_then(|l| usize::try_from(l).ok());
    let pending_limit = if req.mechanism == Mechanism::Idling {
        segments.truncate(IDLING_CANDIDATE_CAP);
        limit
    } else {
        if let Some(limit) = limit {
            segments.truncate(limit);
        }
        None
    };
    Ok(SegmentList {
        mechanism: req.mechanism,
        from: req.from,
        to,
        segments,
        pending_limit,
    })
}

impl SegmentList {
    /// `[start, end)` of each segment for the event counts (ongoing: `[start, to)`).
    pub fn event_count_ranges(&self) -> Vec<TimeRange> {
        self.segments
            .iter()
            .map(|s| TimeRange::new(s.start, s.end.unwrap_or(self.to)))
            .collect()
    }

    /// `[start, end)` of each segment for the signal/location aggregation: as
    /// [`SegmentList::event_count_ranges`], but for REFUEL/RECHARGE the end is extended by
    /// [`SUMMARY_END_BUFFER`], capped at the next segment's start (never below the end).
    pub fn summary_ranges(&self) -> Vec<TimeRange> {
        let mut ranges = self.event_count_ranges();
        if matches!(self.mechanism, Mechanism::Refuel | Mechanism::Recharge) {
            let next_starts: Vec<Option<Ts>> = self
                .segments
                .iter()
                .skip(1)
                .map(|s| Some(s.start))
                .chain([None])
                .collect();
            for (r, next) in ranges.iter_mut().zip(next_starts) {
                let extended = add(r.end, SUMMARY_END_BUFFER);
                r.end = next.map_or(extended, |n| extended.min(n)).max(r.end);
            }
        }
        ranges
    }

    /// Step 9: for IDLING, drops summarised segments whose `speed` MAX is `> 0` (segments
    /// without speed data are kept) and truncates to `limit`. Other mechanisms pass through.
    /// `items` are the caller's summarised segments, in this list's order.
    pub fn finish<T>(&self, items: Vec<T>, max_speed: impl Fn(&T) -> Option<f64>) -> Vec<T> {
        if self.mechanism != Mechanism::Idling {
            return items;
        }
        let kept = items
            .into_iter()
            .filter(|i| max_speed(i).is_none_or(|v| v <= 0.0));
        match self.pending_limit {
            Some(limit) => kept.take(limit).collect(),
            None => kept.collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemorySource;
    use chrono::{TimeZone, Utc};

    fn m(i: i64) -> Ts {
        Utc.with_ymd_and_hms(2025, 1, 1, 10, 0, 0).unwrap() + TimeDelta::minutes(i)
    }

    fn err(req: &SegmentsRequest, now: Ts) -> String {
        segments(&MemorySource::new(), req, now)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn validation_messages_and_order() {
        let now = m(10_000);
        let ok = SegmentsRequest::new("did", m(0), m(60), Mechanism::IgnitionDetection);
        assert!(segments(&MemorySource::new(), &ok, now).is_ok());
        assert_eq!(
            err(
                &SegmentsRequest {
                    subject: String::new(),
                    ..ok.clone()
                },
                now
            ),
            "subject is required"
        );
        assert_eq!(
            err(
                &SegmentsRequest {
                    from: m(61),
                    ..ok.clone()
                },
                now
            ),
            "from time must be before to time"
        );
        assert_eq!(
            err(
                &SegmentsRequest {
                    from: m(60),
                    ..ok.clone()
                },
                now
            ),
            "from and to times cannot be equal"
        );
        let long = SegmentsRequest {
            to: m(32 * 1440) + TimeDelta::seconds(2),
            ..ok.clone()
        };
        assert_eq!(
            err(&long, m(100_000)),
            "date range exceeds maximum of 32 days"
        );
        let edge = SegmentsRequest {
            to: m(32 * 1440) + TimeDelta::seconds(1),
            ..ok.clone()
        };
        assert!(segments(&MemorySource::new(), &edge, m(100_000)).is_ok());
        for bad in [0, 201] {
            assert_eq!(
                err(
                    &SegmentsRequest {
                        limit: Some(bad),
                        ..ok.clone()
                    },
                    now
                ),
                "limit must be between 1 and 200"
            );
        }
        let cfg = SegmentsRequest {
            config: Some(SegmentConfig {
                max_gap_seconds: Some(10),
                ..Default::default()
            }),
            limit: Some(0),
            ..ok.clone()
        };
        assert_eq!(
            err(&cfg, now),
            "maxGapSeconds must be between 60 and 3600",
            "config before limit"
        );
    }

    #[test]
    fn to_is_clamped_to_now_before_validation() {
        // to in the future, from == now after the clamp → equal-times error.
        let req = SegmentsRequest::new("did", m(5), m(100), Mechanism::FrequencyAnalysis);
        assert_eq!(err(&req, m(5)), "from and to times cannot be equal");
        let list = segments(&MemorySource::new(), &req, m(50)).unwrap();
        assert_eq!(list.to, m(50));
    }

    fn list(mechanism: Mechanism, segs: Vec<Segment>) -> SegmentList {
        SegmentList {
            mechanism,
            from: m(0),
            to: m(100),
            segments: segs,
            pending_limit: Some(1),
        }
    }
    fn seg(a: i64, b: Option<i64>) -> Segment {
        Segment {
            start: m(a),
            end: b.map(m),
            duration_seconds: 0,
            is_ongoing: b.is_none(),
            started_before_range: false,
        }
    }

    #[test]
    fn summary_ranges_extend_refuel_and_cap_at_next_start() {
        let l = list(
            Mechanism::Refuel,
            vec![seg(0, Some(10)), seg(11, Some(20)), seg(30, Some(40))],
        );
        let r = l.summary_ranges();
        assert_eq!(r[0].end, m(11));
        assert_eq!(r[1].end, m(22));
        assert_eq!(r[2].end, m(42));
        assert_eq!(l.event_count_ranges()[0].end, m(10));
        let l = list(
            Mechanism::IgnitionDetection,
            vec![seg(0, Some(10)), seg(50, None)],
        );
        assert_eq!(
            l.summary_ranges(),
            vec![TimeRange::new(m(0), m(10)), TimeRange::new(m(50), m(100))]
        );
    }

    #[test]
    fn finish_filters_idling_by_speed_then_limits() {
        let l = list(Mechanism::Idling, vec![]);
        let items = vec![(1, Some(5.0)), (2, None), (3, Some(0.0))];
        assert_eq!(l.finish(items.clone(), |i| i.1), vec![(2, None)]);
        let l = SegmentList {
            pending_limit: None,
            ..l
        };
        assert_eq!(l.finish(items.clone(), |i| i.1).len(), 2);
        let l = list(Mechanism::Refuel, vec![]);
        assert_eq!(l.finish(items.clone(), |i| i.1), items);
    }
}
