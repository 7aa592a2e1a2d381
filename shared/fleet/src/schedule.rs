//! Daily trip schedules. A day's trips depend only on `(seed, vehicle, local date)` and the
//! vehicle's habit, never on the simulated state, so [`crate::Fleet::estimated_events`] can count
//! them without simulating and a day looks the same whatever the horizon.

use crate::jsonw::DAY_MS;
use crate::rng::{self, Purpose};
use crate::vehicle::{Habit, Traits};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Smallest gap between two trips: room for a refuel stop and a distinct parked period.
pub(crate) const MIN_GAP_MS: i64 = 20 * 60_000;

/// One planned trip.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ScheduledTrip {
    pub start_ms: i64,
    pub duration_s: u32,
    /// Share of driving segments on highways (0..1).
    pub highway_share: f64,
    /// Seed of the trip's own random stream.
    pub seed: u64,
}

impl ScheduledTrip {
    pub(crate) fn end_ms(&self) -> i64 {
        self.start_ms + i64::from(self.duration_s) * 1000
    }
}

const MIN_MS: i64 = 60_000;

/// Local clock time `h:m` plus a random spread of `spread_min` minutes, as UTC ms of that day.
fn at(r: &mut ChaCha8Rng, midnight_utc: i64, h: i64, m: i64, spread_min: i64) -> i64 {
    midnight_utc + (h * 60 + m) * MIN_MS + r.gen_range(0..spread_min.max(1) * MIN_MS)
}

fn trip(r: &mut ChaCha8Rng, start_ms: i64, minutes: f64, highway_share: f64) -> ScheduledTrip {
    ScheduledTrip {
        start_ms,
        duration_s: (minutes * 60.0).round().max(120.0) as u32,
        highway_share: highway_share.clamp(0.0, 1.0),
        seed: r.gen(),
    }
}

/// Appends the trips of local day `local_day` (days since 1970-01-01 on the owner's clock),
/// sorted and at least [`MIN_GAP_MS`] apart.
pub(crate) fn day_trips(
    seed: u64,
    index: u32,
    traits: &Traits,
    utc_offset_min: i32,
    local_day: i64,
    out: &mut Vec<ScheduledTrip>,
) {
    let mut r = rng::stream(seed, index, Purpose::Day, local_day);
    let midnight = local_day * DAY_MS - i64::from(utc_offset_min) * MIN_MS;
    // 1970-01-01 was a Thursday; 0 = Monday.
    let weekday = (local_day + 3).rem_euclid(7);
    let weekend = weekday >= 5;
    let first = out.len();
    match traits.habit {
        Habit::Courier => {
            let n = match weekday {
                0..=4 => r.gen_range(6..=11),
                5 if r.gen_bool(0.5) => r.gen_range(3..=5),
                _ => 0,
            };
            let mut t = at(&mut r, midnight, 7, 30, 60);
            for _ in 0..n {
                let minutes = r.gen_range(8.0..35.0);
                let hw = r.gen_range(0.0..0.3);
                let tr = trip(&mut r, t, minutes, hw);
                t = tr.end_ms() + r.gen_range(20..50) * MIN_MS;
                out.push(tr);
            }
        }
        Habit::Commuter { commute_min } if !weekend => {
            if r.gen_bool(0.9) {
                let hw = r.gen_range(0.1..0.6);
                let morning = at(&mut r, midnight, 7, 0, 105);
                let m1 = commute_min * r.gen_range(0.85..1.2);
                out.push(trip(&mut r, morning, m1, hw));
                let evening = at(&mut r, midnight, 16, 30, 120);
                let m2 = commute_min * r.gen_range(0.85..1.3);
                out.push(trip(&mut r, evening, m2, hw));
            }
            let errands = match r.gen_range(0..100) {
                0..=49 => 0,
                50..=84 => 1,
                _ => 2,
            };
            for _ in 0..errands {
                let s = at(&mut r, midnight, 18, 45, 150);
                let minutes = r.gen_range(8.0..25.0);
                let hw = r.gen_range(0.0..0.1);
                out.push(trip(&mut r, s, minutes, hw));
            }
        }
        Habit::Casual | Habit::Commuter { .. } => {
            let n = r.gen_range(0..=3);
            for _ in 0..n {
                let s = at(&mut r, midnight, 9, 0, 660);
                let minutes = r.gen_range(10.0..50.0);
                let hw = r.gen_range(0.0..0.4);
                out.push(trip(&mut r, s, minutes, hw));
            }
            if weekend && r.gen_bool(0.1) {
                let s = at(&mut r, midnight, 9, 30, 180);
                let minutes = r.gen_range(90.0..180.0);
                let hw = r.gen_range(0.6..0.9);
                out.push(trip(&mut r, s, minutes, hw));
            }
        }
    }
    // Sort the day and drop any trip that would overlap (or crowd) the previous one.
    out[first..].sort_by_key(|t| t.start_ms);
    let mut kept = first;
    for i in first..out.len() {
        let ok = kept == first || out[i].start_ms >= out[kept - 1].end_ms() + MIN_GAP_MS;
        if ok {
            out[kept] = out[i];
            kept += 1;
        }
    }
    out.truncate(kept);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FleetConfig;
    use crate::vehicle;

    #[test]
    fn trips_are_sorted_and_spaced() {
        let v = FleetConfig::default().validate().unwrap();
        for index in 0..40 {
            let (info, traits) = vehicle::build(&v, index);
            let mut trips = Vec::new();
            for day in 20_000..20_030 {
                let before = trips.len();
                day_trips(
                    v.config.seed,
                    index,
                    &traits,
                    info.utc_offset_minutes,
                    day,
                    &mut trips,
                );
                for w in trips[before..].windows(2) {
                    assert!(w[1].start_ms >= w[0].end_ms() + MIN_GAP_MS);
                }
            }
            assert!(!trips.is_empty());
        }
    }
}
