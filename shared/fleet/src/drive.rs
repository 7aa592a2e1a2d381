//! One trip's driving at one-second resolution: a speed profile of cruise segments, traffic
//! stops and turns, plus the occasional harsh manoeuvre. Deterministic from the trip's seed.

use crate::plan::VehicleEventKind;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Comfortable braking while stopping (m/s²).
const COMFORT_DECEL: f64 = 2.2;
/// Comfortable acceleration (m/s²).
const COMFORT_ACCEL: f64 = 1.6;

/// What happened during one simulated second.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Step {
    /// Speed at the end of the second (m/s).
    pub v: f64,
    /// Acceleration over the second (m/s²).
    pub a: f64,
    /// Heading change over the second (degrees, positive clockwise).
    pub turn_deg: f64,
    /// A harsh manoeuvre that started this second.
    pub event: Option<VehicleEventKind>,
}

#[derive(Debug, Clone, Copy)]
struct Manoeuvre {
    accel: f64,
    turn_deg: f64,
    seconds_left: u32,
}

/// Speed-profile generator for one trip.
#[derive(Debug, Clone)]
pub(crate) struct TripDriver {
    rng: ChaCha8Rng,
    duration_s: u32,
    t: u32,
    v: f64,
    target: f64,
    segment_left: u32,
    highway_share: f64,
    /// Seconds idling after ignition on before pulling away.
    warmup_s: u32,
    turn_deg_per_s: f64,
    turn_left: u32,
    manoeuvre: Option<Manoeuvre>,
    /// Harsh manoeuvres still to come: (second, kind), ascending.
    harsh: Vec<(u32, VehicleEventKind)>,
}

impl TripDriver {
    pub(crate) fn new(seed: u64, duration_s: u32, highway_share: f64, harsh_per_hour: f64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let warmup_s = rng.gen_range(10..60).min(duration_s / 4);
        // One Bernoulli draw per driving minute approximates a Poisson process.
        let p = (harsh_per_hour / 60.0).clamp(0.0, 1.0);
        let mut harsh = Vec::new();
        for minute in 0..duration_s / 60 {
            if rng.gen_bool(p) {
                let second = minute * 60 + rng.gen_range(0..60);
                let kind = match rng.gen_range(0..100) {
                    0..=44 => VehicleEventKind::HarshBraking,
                    45..=74 => VehicleEventKind::HarshAcceleration,
                    75..=94 => VehicleEventKind::HarshCornering,
                    _ => VehicleEventKind::ExtremeBraking,
                };
                harsh.push((second, kind));
            }
        }
        harsh.reverse(); // pop from the back = earliest first
        Self {
            rng,
            duration_s,
            t: 0,
            v: 0.0,
            target: 0.0,
            segment_left: 0,
            highway_share,
            warmup_s,
            turn_deg_per_s: 0.0,
            turn_left: 0,
            manoeuvre: None,
            harsh,
        }
    }

    /// Seconds since ignition on.
    pub(crate) fn elapsed_s(&self) -> u32 {
        self.t
    }

    /// Whether the trip is over (the last step has been taken).
    pub(crate) fn finished(&self) -> bool {
        self.t >= self.duration_s
    }

    fn new_segment(&mut self) {
        let highway = self.rng.gen_bool(self.highway_share);
        if !highway && self.rng.gen_bool(0.3) {
            // Traffic light or stop sign.
            self.target = 0.0;
            self.segment_left = self.rng.gen_range(10..50);
        } else if highway {
            self.target = self.rng.gen_range(95.0..130.0) / 3.6;
            self.segment_left = self.rng.gen_range(60..400);
        } else {
            let kmh = if self.rng.gen_bool(0.5) {
                self.rng.gen_range(30.0..55.0)
            } else {
                self.rng.gen_range(50.0..80.0)
            };
            self.target = kmh / 3.6;
            self.segment_left = self.rng.gen_range(20..150);
            if self.v < 12.0 && self.rng.gen_bool(0.5) {
                // A right-angle turn at a junction, over about five seconds.
                self.turn_left = 5;
                self.turn_deg_per_s = if self.rng.gen_bool(0.5) { 18.0 } else { -18.0 };
            }
        }
    }

    fn start_harsh(&mut self, kind: VehicleEventKind) -> bool {
        let m = match kind {
            VehicleEventKind::HarshBraking if self.v > 8.0 => Manoeuvre {
                accel: -4.8,
                turn_deg: 0.0,
                seconds_left: 3,
            },
            VehicleEventKind::ExtremeBraking if self.v > 10.0 => Manoeuvre {
                accel: -7.5,
                turn_deg: 0.0,
                seconds_left: 2,
            },
            VehicleEventKind::HarshAcceleration if self.v < 20.0 => Manoeuvre {
                accel: 4.0,
                turn_deg: 0.0,
                seconds_left: 3,
            },
            VehicleEventKind::HarshCornering if self.v > 6.0 => {
                let dir = if self.rng.gen_bool(0.5) { 1.0 } else { -1.0 };
                Manoeuvre {
                    accel: -0.5,
                    turn_deg: 30.0 * dir,
                    seconds_left: 2,
                }
            }
            _ => return false,
        };
        if m.accel < 0.0 {
            self.target = (self.v * 0.4).max(0.0);
        } else {
            self.target = self.v + 12.0;
        }
        self.segment_left = self.segment_left.max(10);
        self.manoeuvre = Some(m);
        true
    }

    /// Advances one second.
    pub(crate) fn step(&mut self) -> Step {
        self.t += 1;
        let remaining = self.duration_s.saturating_sub(self.t);
        let v0 = self.v;
        if self.t <= self.warmup_s || self.finished() {
            // Idling after ignition on; at the final second the car is parked.
            self.v = 0.0;
            return Step {
                v: 0.0,
                a: -v0,
                turn_deg: 0.0,
                event: None,
            };
        }
        let stopping_s = (self.v / COMFORT_DECEL * 1.6).ceil() as u32 + 4;
        let approaching_end = remaining <= stopping_s;
        let mut event = None;
        if approaching_end {
            self.target = 0.0;
            self.manoeuvre = None;
        } else {
            if self.segment_left == 0 {
                self.new_segment();
            }
            self.segment_left = self.segment_left.saturating_sub(1);
            if let Some(&(second, kind)) = self.harsh.last() {
                if second <= self.t && self.manoeuvre.is_none() {
                    if self.start_harsh(kind) {
                        event = Some(kind);
                        self.harsh.pop();
                    } else if second + 30 < self.t {
                        // Conditions never suited (e.g. stuck in traffic): drop it.
                        self.harsh.pop();
                    }
                }
            }
        }
        let mut turn = 0.0;
        let mut a = if let Some(m) = self.manoeuvre.as_mut() {
            m.seconds_left -= 1;
            turn = m.turn_deg;
            let a = m.accel;
            if m.seconds_left == 0 {
                self.manoeuvre = None;
            }
            a
        } else {
            let mut a = ((self.target - self.v) * 0.35).clamp(-COMFORT_DECEL, COMFORT_ACCEL);
            if self.v > 1.0 && !approaching_end {
                a += self.rng.gen_range(-0.25..0.25);
            }
            if approaching_end {
                // Make sure the car is stationary before the ignition goes off.
                a = a.min(-0.6);
            }
            a
        };
        if self.turn_left > 0 {
            self.turn_left -= 1;
            turn += self.turn_deg_per_s;
        } else if self.v > 1.0 {
            turn += self.rng.gen_range(-1.5..1.5);
        }
        let mut v = (self.v + a).clamp(0.0, 45.0);
        if v < 0.3 && self.target == 0.0 {
            v = 0.0;
        }
        a = v - self.v;
        self.v = v;
        Step {
            v,
            a,
            turn_deg: turn,
            event,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trip_starts_and_ends_stationary_with_bounded_accel() {
        for seed in 0..50u64 {
            let mut d = TripDriver::new(seed, 1800, 0.4, 2.0);
            let mut max_v: f64 = 0.0;
            let mut dist = 0.0;
            let mut prev = 0.0;
            while !d.finished() {
                let s = d.step();
                assert!(s.a.abs() <= 8.0, "accel {}", s.a);
                assert!(s.v >= 0.0 && s.v <= 45.0);
                max_v = max_v.max(s.v);
                dist += (prev + s.v) / 2.0;
                prev = s.v;
            }
            assert_eq!(prev, 0.0);
            assert!(max_v > 8.0, "seed {seed} never moved");
            // 30 minutes of mixed driving covers a plausible distance.
            assert!((3_000.0..70_000.0).contains(&dist), "seed {seed}: {dist} m");
        }
    }
}
