//! Pages fetched with `after = last start of the previous page` never repeat or skip.

use chrono::TimeDelta;
use dq_segments::memory::MemorySource;
use dq_segments::model::LevelSample;
use dq_segments::source::IGNITION_SIGNAL;
use dq_segments::{segments, Mechanism, Segment, SegmentsRequest};
use proptest::prelude::*;

use crate::m;

fn all_pages(src: &MemorySource, mechanism: Mechanism, page: i32, now: i64) -> Vec<Segment> {
    let mut out: Vec<Segment> = Vec::new();
    let mut after = None;
    loop {
        let req = SegmentsRequest {
            limit: Some(page),
            after,
            ..SegmentsRequest::new("did", m(0), m(2000), mechanism)
        };
        let got = segments(src, &req, m(now)).unwrap().segments;
        assert!(got.len() <= page as usize);
        let Some(last) = got.last() else { break };
        after = Some(last.start);
        out.extend(got);
    }
    out
}

fn everything(src: &MemorySource, mechanism: Mechanism, now: i64) -> Vec<Segment> {
    let req = SegmentsRequest {
        limit: None,
        ..SegmentsRequest::new("did", m(0), m(2000), mechanism)
    };
    segments(src, &req, m(now)).unwrap().segments
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn ignition_pages_concatenate_to_the_full_list(
        toggles in proptest::collection::vec((1i64..120, any::<bool>()), 0..60),
        start_on in any::<bool>(),
        page in 1i32..8,
        live in any::<bool>(),
    ) {
        let mut src = MemorySource::new();
        let mut t = -50i64;
        let mut on = start_on;
        src.push_samples(IGNITION_SIGNAL, [LevelSample::new(m(t), f64::from(u8::from(on)))]);
        for (step, flip) in toggles {
            t += step;
            if flip { on = !on; }
            src.push_samples(IGNITION_SIGNAL, [LevelSample::new(m(t), f64::from(u8::from(on)))]);
        }
        let now = if live { 2000 } else { 100_000 };
        let full = everything(&src, Mechanism::IgnitionDetection, now);
        prop_assert_eq!(all_pages(&src, Mechanism::IgnitionDetection, page, now), full);
    }

    #[test]
    fn frequency_pages_concatenate_to_the_full_list(
        active in proptest::collection::btree_set(-10i64..2000, 0..400),
        page in 1i32..6,
    ) {
        let mut src = MemorySource::new();
        for minute in &active {
            for k in 0..10 {
                let name = if k % 2 == 0 { "a" } else { "b" };
                src.push(name, m(*minute) + TimeDelta::seconds(k * 6), Some(1.0));
            }
        }
        let full = everything(&src, Mechanism::FrequencyAnalysis, 2001);
        prop_assert!(full.windows(2).all(|w| w[0].start < w[1].start));
        prop_assert_eq!(all_pages(&src, Mechanism::FrequencyAnalysis, page, 2001), full);
    }
}

#[test]
fn cursor_is_strict_and_from_never_moves() {
    let mut src = MemorySource::new();
    src.push_samples(
        IGNITION_SIGNAL,
        [(-30, 1.0), (20, 0.0), (40, 1.0), (60, 0.0)].map(|(i, v)| LevelSample::new(m(i), v)),
    );
    let req = SegmentsRequest::new("did", m(0), m(100), Mechanism::IgnitionDetection);
    let first = segments(&src, &req, m(1000)).unwrap().segments;
    assert_eq!(first.len(), 2);
    assert_eq!(
        first[0].start,
        m(-30),
        "a started-before-range segment keeps its start"
    );
    // after == the first start: that segment is excluded, the next is kept.
    let req = SegmentsRequest {
        after: Some(m(-30)),
        ..req
    };
    let second = segments(&src, &req, m(1000)).unwrap().segments;
    assert_eq!(second, first[1..].to_vec());
}
