//! Time-windowed streaming of a whole fleet: each item holds every event of every vehicle whose
//! time falls in one window, sorted by time, so a month of a large fleet never sits in memory.

use crate::encode::{EmitSink, Emitter};
use crate::life::VehicleSim;
use crate::Fleet;
use dq_cloudevent::RawEvent;

/// Iterator over consecutive time windows of a [`Fleet`], created by [`Fleet::chunks`].
///
/// Every window of the horizon yields one item, possibly empty (a quiet night), so window `k`
/// covers `[start + k·chunk, start + (k+1)·chunk)` clipped to the horizon. Within an item events
/// are ordered by header time; ties keep vehicle order and each vehicle's fan-out order.
pub struct Chunks<'f> {
    vehicles: Vec<(VehicleSim<'f>, Emitter<'f>)>,
    next_start: i64,
    end: i64,
    step_ms: i64,
    last_len: usize,
}

impl<'f> Chunks<'f> {
    pub(crate) fn new(fleet: &'f Fleet, step_ms: i64) -> Self {
        let v = &fleet.validated;
        let vehicles = fleet
            .vehicles
            .iter()
            .zip(&fleet.traits)
            .map(|(info, traits)| {
                (
                    VehicleSim::new(v, info, traits, false),
                    Emitter::new(v.config.seed, info, traits),
                )
            })
            .collect();
        Self {
            vehicles,
            next_start: v.start_ms,
            end: v.end_ms,
            step_ms: step_ms.max(1),
            last_len: 0,
        }
    }

    fn remaining(&self) -> usize {
        let left = u64::try_from(self.end - self.next_start).unwrap_or(0);
        let step = u64::try_from(self.step_ms).unwrap_or(1).max(1);
        usize::try_from(left.div_ceil(step)).unwrap_or(usize::MAX)
    }
}

impl Iterator for Chunks<'_> {
    type Item = Vec<RawEvent>;

    fn next(&mut self) -> Option<Vec<RawEvent>> {
        if self.next_start >= self.end {
            return None;
        }
        let until = self.next_start.saturating_add(self.step_ms).min(self.end);
        let mut out = Vec::with_capacity(self.last_len + self.last_len / 4);
        for (sim, emitter) in &mut self.vehicles {
            let mut sink = EmitSink {
                emitter,
                out: &mut out,
            };
            sim.advance_to(until, &mut sink);
        }
        self.next_start = until;
        self.last_len = out.len();
        Some(time_ordered(out))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.remaining();
        (n, Some(n))
    }
}

impl ExactSizeIterator for Chunks<'_> {}

/// Stable sort by header time. Events are large, so this sorts small `(time, index)` keys and
/// then moves each event once instead of shuffling events through a merge sort.
fn time_ordered(events: Vec<RawEvent>) -> Vec<RawEvent> {
    let mut keys: Vec<(i64, usize)> = events
        .iter()
        .enumerate()
        .map(|(i, e)| (e.header.time.timestamp_millis(), i))
        .collect();
    if keys.windows(2).all(|w| w[0].0 <= w[1].0) {
        return events;
    }
    keys.sort_unstable();
    let mut slots: Vec<Option<RawEvent>> = events.into_iter().map(Some).collect();
    keys.iter()
        .filter_map(|&(_, i)| slots.get_mut(i).and_then(Option::take))
        .collect()
}
