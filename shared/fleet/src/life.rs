//! The per-vehicle simulation: a state machine that walks through the horizon (parked →
//! driving → parked, with refuel/charge sessions and heartbeats) and hands [`Sample`]s to a
//! [`SampleSink`]. The same code runs for event generation and for ground-truth plans; the sink
//! never feeds back, so both see exactly the same life.

use crate::config::Validated;
use crate::drive::{Step, TripDriver};
use crate::jsonw::DAY_MS;
use crate::plan::{
    DtcEpisode, EnergyStop, EnergyStopKind, GeoPoint, Trip, VehicleEvent, VehicleEventKind,
    VehiclePlan,
};
use crate::rng::{self, Purpose};
use crate::schedule::{self, ScheduledTrip, MIN_GAP_MS};
use crate::vehicle::{Traits, VehicleInfo};
use crate::vendor::Vendor;
use chrono::{DateTime, Utc};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;
use std::f64::consts::PI;

const MIN_MS: i64 = 60_000;
const HOUR_MS: f64 = 3_600_000.0;
/// Mean Earth radius (m) for dead reckoning.
const EARTH_M: f64 = 6_371_000.0;
/// Parked heartbeat spacing range (ms).
const HEARTBEAT_MS: std::ops::RangeInclusive<i64> = 30 * MIN_MS..=60 * MIN_MS;
/// Payload spacing while AC charging, and while DC fast charging.
const AC_CHARGE_EMIT_MS: i64 = 15 * MIN_MS;
const DC_CHARGE_EMIT_MS: i64 = 3 * MIN_MS;
/// Ruptela devices log a GPS fix this often while driving; fixes go out in `r/v0/loc` batches.
pub(crate) const FIX_INTERVAL_S: u32 = 5;
/// Charger efficiency (grid energy that reaches the battery).
const CHARGE_EFFICIENCY: f64 = 0.92;
/// Diagnostic codes a vehicle may raise.
const DTC_CODES: &[&str] = &[
    "P0420", "P0171", "P0300", "P0128", "P0442", "P0455", "P0135", "P0301", "P0507", "U0100",
];

/// Why a sample was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SampleKind {
    /// First payload of a trip (ignition just switched on, idling).
    IgnitionOn,
    /// Periodic payload while driving.
    Driving,
    /// Last payload of a trip (stationary, ignition switched off).
    IgnitionOff,
    /// Sparse heartbeat while parked.
    Parked,
    /// Periodic payload while charging.
    Charging,
    /// Charging just stopped (target reached or unplugged for departure).
    ChargeEnd,
    /// A refuel stop just finished.
    Refueled,
    /// A GPS fix for vendors that batch location records (not a payload on its own).
    Fix,
    /// A remote command took effect (Kaufmann engine block / unblock).
    Command(VehicleEventKind),
}

/// Whether and how the sample reports trouble codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DtcReport {
    /// Nothing to report in this payload.
    None,
    /// Report the active codes (first payload of a trip with codes set).
    Active,
    /// Codes were cleared since the last trip; report the empty list once.
    Cleared,
}

/// Charging details of a sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ChargeState {
    pub dc: bool,
    pub power_kw: f64,
    pub added_kwh: f64,
    pub active: bool,
}

/// A snapshot of the vehicle handed to the encoders.
#[derive(Debug, Clone)]
pub(crate) struct Sample<'a> {
    pub kind: SampleKind,
    pub time_ms: i64,
    pub ignition: bool,
    pub engine_on: bool,
    pub speed_kmh: f64,
    pub heading_deg: f64,
    pub lat: f64,
    pub lon: f64,
    pub alt_m: f64,
    pub odometer_km: f64,
    pub energy_pct: f64,
    /// Litres of fuel or kWh in the battery.
    pub energy_abs: f64,
    pub range_km: f64,
    pub rpm: f64,
    pub throttle_pct: f64,
    pub engine_load_pct: f64,
    pub maf_gs: f64,
    /// ICE: fuel rate (l/h). EV: traction power (kW, negative while regenerating).
    pub rate: f64,
    pub coolant_c: f64,
    pub intake_c: f64,
    pub ambient_c: f64,
    pub battery_v: f64,
    pub run_time_s: f64,
    pub tire_kpa: [f64; 4],
    pub charge: Option<ChargeState>,
    pub charge_limit_pct: f64,
    pub events: &'a [VehicleEvent],
    pub dtcs: &'a [&'static str],
    pub dtc_report: DtcReport,
}

/// Receives samples in time order.
pub(crate) trait SampleSink {
    fn accept(&mut self, sample: &Sample<'_>);
}

/// Ignores samples (plan computation).
pub(crate) struct NullSink;

impl SampleSink for NullSink {
    fn accept(&mut self, _: &Sample<'_>) {}
}

#[derive(Debug, Clone)]
struct Session {
    kind: EnergyStopKind,
    start: i64,
    end: i64,
    /// Energy (litres / kWh) at start and at end.
    level0: f64,
    level1: f64,
    power_kw: f64,
    next_emit: i64,
    lat: f64,
    lon: f64,
}

impl Session {
    fn level_at(&self, t: i64) -> f64 {
        if self.end <= self.start {
            return self.level1;
        }
        let f = ((t - self.start) as f64 / (self.end - self.start) as f64).clamp(0.0, 1.0);
        self.level0 + (self.level1 - self.level0) * f
    }
}

#[derive(Debug, Clone)]
struct Active {
    driver: TripDriver,
    trip: ScheduledTrip,
    v: f64,
    a: f64,
    next_emit_s: u32,
    emitted: u32,
    max_v: f64,
    start_odo_m: f64,
    start_pos: GeoPoint,
    start_energy_pct: f64,
}

#[derive(Debug, Clone)]
enum Mode {
    Parked {
        next_hb: i64,
        session: Option<Session>,
        commands: VecDeque<(i64, VehicleEventKind)>,
    },
    Driving(Box<Active>),
}

/// One vehicle's simulation state.
pub(crate) struct VehicleSim<'f> {
    seed: u64,
    info: &'f VehicleInfo,
    traits: &'f Traits,
    start_ms: i64,
    end_ms: i64,
    interval_ms: i64,
    fixes: bool,
    now: i64,
    rng: ChaCha8Rng,
    lat: f64,
    lon: f64,
    heading: f64,
    odo_m: f64,
    energy: f64,
    capacity: f64,
    electric: bool,
    coolant_c: f64,
    parked_since: i64,
    queue: VecDeque<ScheduledTrip>,
    /// End of the last trip ever queued, so a new day never overlaps the previous one.
    last_queued_end: i64,
    next_local_day: i64,
    last_local_day: i64,
    scratch: Vec<ScheduledTrip>,
    mode: Mode,
    dtcs: Vec<&'static str>,
    dtc_clear_at: i64,
    dtc_cleared: bool,
    pending: Vec<VehicleEvent>,
    plan: Option<VehiclePlan>,
}

fn utc(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or(DateTime::UNIX_EPOCH)
}

impl<'f> VehicleSim<'f> {
    pub(crate) fn new(
        v: &Validated,
        info: &'f VehicleInfo,
        traits: &'f Traits,
        record_plan: bool,
    ) -> Self {
        let tz_ms = i64::from(info.utc_offset_minutes) * MIN_MS;
        let capacity = info.powertrain.capacity();
        let first_local_day = (v.start_ms + tz_ms).div_euclid(DAY_MS) - 1;
        let mut rng = rng::stream(v.config.seed, info.index, Purpose::Sim, 0);
        let next_hb = v.start_ms + rng.gen_range(0..=*HEARTBEAT_MS.end());
        Self {
            seed: v.config.seed,
            info,
            traits,
            start_ms: v.start_ms,
            end_ms: v.end_ms,
            interval_ms: v.interval_ms,
            fixes: matches!(info.vendor, Vendor::Ruptela | Vendor::Kaufmann),
            now: v.start_ms,
            rng,
            lat: info.home_latitude,
            lon: info.home_longitude,
            heading: 0.0,
            odo_m: traits.initial_odometer_km * 1000.0,
            energy: traits.initial_energy_pct / 100.0 * capacity,
            capacity,
            electric: info.powertrain.is_electric(),
            coolant_c: traits.climate_c,
            parked_since: v.start_ms - 6 * 3_600_000,
            queue: VecDeque::new(),
            last_queued_end: i64::MIN / 2,
            next_local_day: first_local_day,
            last_local_day: (v.end_ms + tz_ms).div_euclid(DAY_MS),
            scratch: Vec::new(),
            mode: Mode::Parked {
                next_hb,
                session: None,
                commands: VecDeque::new(),
            },
            dtcs: Vec::new(),
            dtc_clear_at: 0,
            dtc_cleared: false,
            pending: Vec::new(),
            plan: record_plan.then(|| VehiclePlan {
                index: info.index,
                trips: Vec::new(),
                energy_stops: Vec::new(),
                dtc_episodes: Vec::new(),
                events: Vec::new(),
            }),
        }
    }

    /// Finishes the simulation and returns the recorded plan (if recording).
    pub(crate) fn into_plan(mut self) -> Option<VehiclePlan> {
        let end = self.end_ms;
        self.advance_to(end, &mut NullSink);
        self.plan
    }

    /// Generates everything strictly before `until` (capped at the horizon end).
    pub(crate) fn advance_to(&mut self, until: i64, sink: &mut dyn SampleSink) {
        let until = until.min(self.end_ms);
        while self.now < until {
            let mode = std::mem::replace(
                &mut self.mode,
                Mode::Parked {
                    next_hb: i64::MAX,
                    session: None,
                    commands: VecDeque::new(),
                },
            );
            self.mode = match mode {
                Mode::Driving(active) => self.drive(active, until, sink),
                Mode::Parked {
                    next_hb,
                    session,
                    commands,
                } => self.park(next_hb, session, commands, until, sink),
            };
        }
    }

    // ---- schedule -------------------------------------------------------------------------

    /// Keeps the schedule queued at least two local days ahead of `t`, and always at least one
    /// trip (or the whole rest of the horizon), so the next departure is known even across
    /// trip-free weekends.
    fn fill_queue(&mut self, t: i64) {
        let tz_ms = i64::from(self.info.utc_offset_minutes) * MIN_MS;
        while self.next_local_day <= self.last_local_day {
            let midnight = self.next_local_day * DAY_MS - tz_ms;
            if midnight > t + 2 * DAY_MS && !self.queue.is_empty() {
                break;
            }
            self.scratch.clear();
            schedule::day_trips(
                self.seed,
                self.info.index,
                self.traits,
                self.info.utc_offset_minutes,
                self.next_local_day,
                &mut self.scratch,
            );
            self.next_local_day += 1;
            for &trip in &self.scratch {
                let after_previous = trip.start_ms >= self.last_queued_end + MIN_GAP_MS;
                if trip.start_ms >= self.start_ms && trip.end_ms() <= self.end_ms && after_previous
                {
                    self.last_queued_end = trip.end_ms();
                    self.queue.push_back(trip);
                }
            }
        }
    }

    fn next_trip_start(&mut self, t: i64) -> i64 {
        self.fill_queue(t);
        self.queue.front().map_or(i64::MAX, |trip| trip.start_ms)
    }

    // ---- parked ---------------------------------------------------------------------------

    fn park(
        &mut self,
        mut next_hb: i64,
        mut session: Option<Session>,
        mut commands: VecDeque<(i64, VehicleEventKind)>,
        until: i64,
        sink: &mut dyn SampleSink,
    ) -> Mode {
        loop {
            let trip_at = self.next_trip_start(self.now);
            let session_at = session
                .as_ref()
                .map_or(i64::MAX, |s| s.next_emit.min(s.end));
            let command_at = commands.front().map_or(i64::MAX, |c| c.0);
            let hb_at = if session.is_some() { i64::MAX } else { next_hb };
            let t = session_at.min(command_at).min(hb_at).min(trip_at);
            if t >= until {
                self.now = until;
                return Mode::Parked {
                    next_hb,
                    session,
                    commands,
                };
            }
            self.now = t;
            if t == session_at {
                if let Some(mut s) = session.take() {
                    if t >= s.end {
                        self.finish_session(&s, sink);
                        next_hb = t + self.rng.gen_range(HEARTBEAT_MS);
                    } else {
                        let kind = SampleKind::Charging;
                        let charge = self.charge_state(&s, t, true);
                        self.energy = s.level_at(t);
                        self.emit_parked(kind, t, Some(charge), sink);
                        let step = if s.kind == EnergyStopKind::DcFastCharge {
                            DC_CHARGE_EMIT_MS
                        } else {
                            AC_CHARGE_EMIT_MS
                        };
                        s.next_emit = (t + step).min(s.end);
                        session = Some(s);
                    }
                }
            } else if t == command_at {
                if let Some((_, kind)) = commands.pop_front() {
                    self.record_event(kind, t, 0.0);
                    self.emit_parked(SampleKind::Command(kind), t, None, sink);
                }
            } else if t == hb_at {
                self.emit_parked(SampleKind::Parked, t, None, sink);
                next_hb = t + self.rng.gen_range(HEARTBEAT_MS);
            } else if let Some(trip) = self.queue.pop_front() {
                return self.start_trip(trip, sink);
            }
        }
    }

    fn charge_state(&self, s: &Session, t: i64, active: bool) -> ChargeState {
        ChargeState {
            dc: s.kind == EnergyStopKind::DcFastCharge,
            power_kw: if active { s.power_kw } else { 0.0 },
            added_kwh: (s.level_at(t) - s.level0).max(0.0),
            active,
        }
    }

    fn finish_session(&mut self, s: &Session, sink: &mut dyn SampleSink) {
        self.energy = s.level1;
        let (kind, charge) = match s.kind {
            EnergyStopKind::Refuel => (SampleKind::Refueled, None),
            _ => (
                SampleKind::ChargeEnd,
                Some(self.charge_state(s, s.end, false)),
            ),
        };
        self.emit_parked(kind, s.end, charge, sink);
        let capacity = self.capacity;
        if let Some(plan) = self.plan.as_mut() {
            plan.energy_stops.push(EnergyStop {
                kind: s.kind,
                start: utc(s.start),
                end: utc(s.end),
                start_level_pct: s.level0 / capacity * 100.0,
                end_level_pct: s.level1 / capacity * 100.0,
                added: s.level1 - s.level0,
                location: GeoPoint {
                    latitude: s.lat,
                    longitude: s.lon,
                },
            });
        }
    }

    fn emit_parked(
        &mut self,
        kind: SampleKind,
        t: i64,
        charge: Option<ChargeState>,
        sink: &mut dyn SampleSink,
    ) {
        let sample = self.sample(kind, t, None, charge, DtcReport::None);
        sink.accept(&sample);
    }

    fn emit_driving(
        &self,
        kind: SampleKind,
        t: i64,
        active: &Active,
        dtc_report: DtcReport,
        sink: &mut dyn SampleSink,
    ) {
        let sample = self.sample(kind, t, Some(active), None, dtc_report);
        sink.accept(&sample);
    }

    /// Parked decisions right after ignition off: refuel, charge, remote commands.
    fn after_trip(&mut self, end: i64) -> Mode {
        let next_start = self.next_trip_start(end).min(self.end_ms);
        let gap = next_start - end;
        let mut session = None;
        let pct = self.energy / self.capacity * 100.0;
        if !self.electric {
            if pct < self.traits.refuel_below_pct && gap >= MIN_GAP_MS {
                let start = end + self.rng.gen_range(MIN_MS..3 * MIN_MS);
                let stop = start + self.rng.gen_range(4 * MIN_MS..9 * MIN_MS);
                let target = if self.rng.gen_bool(0.7) {
                    100.0
                } else {
                    self.rng.gen_range(75.0..98.0)
                };
                session = Some(self.session(EnergyStopKind::Refuel, start, stop, target, 0.0));
            }
        } else {
            // A long stop: overnight at home, or a working day at the office.
            let long_stop = gap >= 5 * 3_600_000;
            if pct < 25.0 && gap >= 30 * MIN_MS {
                let power = self.rng.gen_range(50.0..150.0);
                let start = end + self.rng.gen_range(2 * MIN_MS..5 * MIN_MS);
                session = self.charge_session(
                    EnergyStopKind::DcFastCharge,
                    start,
                    next_start,
                    80.0,
                    power,
                );
            } else if long_stop && pct < self.traits.plug_below_pct {
                if let Some(kw) = self.traits.home_charger_kw {
                    let start = end + self.rng.gen_range(MIN_MS..15 * MIN_MS);
                    let limit = self.traits.charge_limit_pct;
                    session =
                        self.charge_session(EnergyStopKind::AcCharge, start, next_start, limit, kw);
                }
            }
        }
        let mut commands = VecDeque::new();
        if self.info.vendor == Vendor::Kaufmann && gap >= 8 * 3_600_000 && self.rng.gen_bool(0.05) {
            let block = end + self.rng.gen_range(60 * MIN_MS..180 * MIN_MS);
            let unblock = next_start - self.rng.gen_range(20 * MIN_MS..60 * MIN_MS);
            commands.push_back((block, VehicleEventKind::EngineBlock));
            commands.push_back((unblock, VehicleEventKind::EngineUnblock));
        }
        let next_hb = end + self.rng.gen_range(HEARTBEAT_MS);
        Mode::Parked {
            next_hb,
            session,
            commands,
        }
    }

    fn session(
        &self,
        kind: EnergyStopKind,
        start: i64,
        end: i64,
        target_pct: f64,
        power_kw: f64,
    ) -> Session {
        Session {
            kind,
            start,
            end,
            level0: self.energy,
            level1: (target_pct / 100.0 * self.capacity).max(self.energy),
            power_kw,
            // A refuel is reported once, when the tank is full again; charging reports as it goes.
            next_emit: if kind == EnergyStopKind::Refuel {
                end
            } else {
                start
            },
            lat: self.lat,
            lon: self.lon,
        }
    }

    /// A charging session from `start` towards `target_pct`, cut short before the next trip.
    fn charge_session(
        &self,
        kind: EnergyStopKind,
        start: i64,
        next_start: i64,
        target_pct: f64,
        power_kw: f64,
    ) -> Option<Session> {
        let target = target_pct / 100.0 * self.capacity;
        if target <= self.energy {
            return None;
        }
        let full_ms = ((target - self.energy) / (power_kw * CHARGE_EFFICIENCY) * HOUR_MS) as i64;
        let latest_end = next_start - 10 * MIN_MS;
        let end = (start + full_ms).min(latest_end);
        if end - start < 10 * MIN_MS {
            return None;
        }
        let mut s = self.session(kind, start, end, target_pct, power_kw);
        s.level1 = self.energy + power_kw * CHARGE_EFFICIENCY * (end - start) as f64 / HOUR_MS;
        s.level1 = s.level1.min(target);
        Some(s)
    }

    // ---- driving --------------------------------------------------------------------------

    fn start_trip(&mut self, trip: ScheduledTrip, sink: &mut dyn SampleSink) -> Mode {
        let t = trip.start_ms;
        // The engine cooled while parked.
        self.coolant_c = self.parked_coolant(t);
        let report = self.update_dtcs(t);
        let driver = TripDriver::new(
            trip.seed,
            trip.duration_s,
            trip.highway_share,
            self.traits.harsh_per_hour,
        );
        let active = Box::new(Active {
            driver,
            trip,
            v: 0.0,
            a: 0.0,
            next_emit_s: self.emit_second(1),
            emitted: 1,
            max_v: 0.0,
            start_odo_m: self.odo_m,
            start_pos: GeoPoint {
                latitude: self.lat,
                longitude: self.lon,
            },
            start_energy_pct: self.energy / self.capacity * 100.0,
        });
        self.emit_driving(SampleKind::IgnitionOn, t, &active, report, sink);
        if self.fixes {
            self.emit_driving(SampleKind::Fix, t, &active, DtcReport::None, sink);
        }
        Mode::Driving(active)
    }

    /// Second of the trip at which periodic payload `k` goes out.
    fn emit_second(&self, k: u32) -> u32 {
        let s = (i64::from(k) * self.interval_ms + 500) / 1000;
        u32::try_from(s.max(1)).unwrap_or(u32::MAX)
    }

    fn update_dtcs(&mut self, t: i64) -> DtcReport {
        if !self.info.vendor.reports_dtcs() {
            return DtcReport::None;
        }
        if !self.dtcs.is_empty() && t >= self.dtc_clear_at {
            self.dtcs.clear();
            self.dtc_cleared = true;
            if let Some(ep) = self.plan.as_mut().and_then(|p| p.dtc_episodes.last_mut()) {
                ep.end = Some(utc(t));
            }
        } else if self.dtcs.is_empty() && self.rng.gen_bool(0.006) {
            let n = if self.rng.gen_bool(0.3) { 2 } else { 1 };
            for _ in 0..n {
                let code = DTC_CODES[self.rng.gen_range(0..DTC_CODES.len())];
                if !self.dtcs.contains(&code) {
                    self.dtcs.push(code);
                }
            }
            self.dtc_clear_at = t + self.rng.gen_range(DAY_MS..10 * DAY_MS);
            let codes = self.dtcs.iter().map(|c| c.to_string()).collect();
            if let Some(plan) = self.plan.as_mut() {
                plan.dtc_episodes.push(DtcEpisode {
                    codes,
                    start: utc(t),
                    end: None,
                });
            }
        }
        if !self.dtcs.is_empty() {
            DtcReport::Active
        } else if std::mem::take(&mut self.dtc_cleared) {
            DtcReport::Cleared
        } else {
            DtcReport::None
        }
    }

    fn drive(&mut self, mut active: Box<Active>, until: i64, sink: &mut dyn SampleSink) -> Mode {
        let trip_start = active.trip.start_ms;
        loop {
            let next_t = trip_start + i64::from(active.driver.elapsed_s() + 1) * 1000;
            if next_t >= until {
                self.now = until;
                return Mode::Driving(active);
            }
            self.now = next_t;
            let step = active.driver.step();
            self.apply_step(&mut active, &step);
            if let Some(kind) = step.event {
                self.record_event(kind, next_t, step.v * 3.6);
            }
            let s = active.driver.elapsed_s();
            if active.driver.finished() {
                self.emit_driving(
                    SampleKind::IgnitionOff,
                    next_t,
                    &active,
                    DtcReport::None,
                    sink,
                );
                self.pending.clear();
                self.finish_trip(&active, next_t);
                return self.after_trip(next_t);
            }
            if self.fixes && s % FIX_INTERVAL_S == 0 {
                self.emit_driving(SampleKind::Fix, next_t, &active, DtcReport::None, sink);
            }
            if s >= active.next_emit_s {
                self.emit_driving(SampleKind::Driving, next_t, &active, DtcReport::None, sink);
                self.pending.clear();
                active.emitted += 1;
                active.next_emit_s = self.emit_second(active.emitted);
            }
        }
    }

    fn record_event(&mut self, kind: VehicleEventKind, t: i64, speed_kmh: f64) {
        let event = VehicleEvent {
            kind,
            time: utc(t),
            speed_kmh,
        };
        if let Some(plan) = self.plan.as_mut() {
            plan.events.push(event.clone());
        }
        if kind != VehicleEventKind::EngineBlock && kind != VehicleEventKind::EngineUnblock {
            self.pending.push(event);
        }
    }

    fn finish_trip(&mut self, active: &Active, end: i64) {
        self.parked_since = end;
        let end_energy_pct = self.energy / self.capacity * 100.0;
        if let Some(plan) = self.plan.as_mut() {
            plan.trips.push(Trip {
                start: utc(active.trip.start_ms),
                end: utc(end),
                distance_km: (self.odo_m - active.start_odo_m) / 1000.0,
                start_odometer_km: active.start_odo_m / 1000.0,
                end_odometer_km: self.odo_m / 1000.0,
                start_location: active.start_pos,
                end_location: GeoPoint {
                    latitude: self.lat,
                    longitude: self.lon,
                },
                max_speed_kmh: active.max_v * 3.6,
                start_energy_pct: active.start_energy_pct,
                end_energy_pct,
            });
        }
    }

    /// Integrates one second: position, odometer, energy, engine temperature.
    fn apply_step(&mut self, active: &mut Active, step: &Step) {
        let dist = (active.v + step.v) / 2.0;
        active.v = step.v;
        active.a = step.a;
        active.max_v = active.max_v.max(step.v);
        let mut heading = self.heading + step.turn_deg;
        if dist > 0.0 {
            // Bend back towards home once the vehicle roams past its leash.
            let cos_lat = self.lat.to_radians().cos();
            let dn = (self.info.home_latitude - self.lat).to_radians() * EARTH_M;
            let de = (self.info.home_longitude - self.lon).to_radians() * EARTH_M * cos_lat;
            let away_km = (dn * dn + de * de).sqrt() / 1000.0;
            if away_km > self.traits.leash_km {
                let bearing = de.atan2(dn).to_degrees();
                let diff = (bearing - heading + 540.0).rem_euclid(360.0) - 180.0;
                heading += diff.clamp(-3.0, 3.0);
            }
            let h = heading.to_radians();
            self.lat += (dist * h.cos() / EARTH_M).to_degrees();
            self.lon += (dist * h.sin() / (EARTH_M * cos_lat)).to_degrees();
        }
        self.heading = heading.rem_euclid(360.0);
        self.odo_m += dist;
        let km = dist / 1000.0;
        let floor = self.capacity * 0.01;
        if self.electric {
            let regen = if step.a < 0.0 { 0.35 } else { 0.0 };
            let traction = km * self.traits.per_km * (1.0 + 0.1 * step.a.max(0.0) - regen);
            self.energy = (self.energy - traction - self.traits.idle_rate / 3600.0).max(floor);
        } else {
            let used = km * self.traits.per_km * (1.0 + 0.08 * step.a.max(0.0))
                + self.traits.idle_rate / 3600.0;
            self.energy = (self.energy - used).max(floor);
            // Warms towards ~92 °C with a time constant of about three minutes.
            self.coolant_c += (92.0 - self.coolant_c) * 0.006;
        }
    }

    // ---- sampling -------------------------------------------------------------------------

    fn ambient_c(&self, t: i64) -> f64 {
        let tz_ms = i64::from(self.info.utc_offset_minutes) * MIN_MS;
        let local_h = (t + tz_ms).rem_euclid(DAY_MS) as f64 / HOUR_MS;
        let day_of_year = (t.div_euclid(DAY_MS)).rem_euclid(365) as f64;
        let season = (2.0 * PI * (day_of_year - 196.0) / 365.0).cos();
        self.traits.climate_c
            + self.traits.hemisphere * 9.0 * season
            + 5.0 * (2.0 * PI * (local_h - 9.0) / 24.0).sin()
    }

    fn parked_coolant(&self, t: i64) -> f64 {
        let ambient = self.ambient_c(t);
        let dt = (t - self.parked_since).max(0) as f64;
        ambient + (self.coolant_c - ambient) * (-dt / 1_800_000.0).exp()
    }

    /// Terrain height: a smooth function of position, 0–90 m above the home altitude.
    fn altitude(&self) -> f64 {
        self.traits.home_alt_m
            + 25.0 * (1.0 + (self.lat * 180.0).sin())
            + 20.0 * (1.0 + (self.lon * 150.0).cos())
    }

    fn sample<'s>(
        &'s self,
        kind: SampleKind,
        t: i64,
        active: Option<&Active>,
        charge: Option<ChargeState>,
        dtc_report: DtcReport,
    ) -> Sample<'s> {
        let ambient = self.ambient_c(t);
        let driving = active.is_some() && kind != SampleKind::IgnitionOff;
        let ignition = driving;
        let engine_on = ignition && !self.electric;
        let (v, a, run_time) = match active {
            Some(act) if driving => (act.v, act.a, f64::from(act.driver.elapsed_s())),
            _ => (0.0, 0.0, 0.0),
        };
        let kmh = v * 3.6;
        let coolant = if active.is_some() {
            self.coolant_c
        } else {
            self.parked_coolant(t)
        };
        let throttle = if engine_on {
            (12.0 + a.max(0.0) * 18.0 + kmh * 0.12).clamp(0.0, 100.0)
        } else {
            0.0
        };
        let rpm = if engine_on {
            let per_kmh = match kmh {
                k if k < 1.0 => 0.0,
                k if k < 20.0 => 95.0,
                k if k < 35.0 => 60.0,
                k if k < 55.0 => 42.0,
                k if k < 75.0 => 32.0,
                k if k < 100.0 => 26.0,
                _ => 21.0,
            };
            (kmh * per_kmh + a.max(0.0) * 250.0)
                .max(self.traits.idle_rpm)
                .min(6000.0)
        } else {
            0.0
        };
        let engine_load = if engine_on {
            (18.0 + throttle * 0.7).min(100.0)
        } else {
            0.0
        };
        let rate = if self.electric {
            if ignition {
                kmh * self.traits.per_km * (1.0 + 0.1 * a) + self.traits.idle_rate
            } else {
                0.0
            }
        } else if engine_on {
            self.traits.idle_rate + kmh * self.traits.per_km * (1.0 + 0.08 * a.max(0.0))
        } else {
            0.0
        };
        let parked_h = if ignition {
            0.0
        } else {
            (t - self.parked_since).max(0) as f64 / HOUR_MS
        };
        let battery_v = match (engine_on, ignition, self.electric) {
            (true, _, _) => 14.2,
            (false, true, true) => 13.9,
            (false, false, true) => 12.7,
            _ => (12.68 - 0.02 * parked_h).max(12.2),
        };
        let warm = (run_time / 600.0).min(1.0);
        let tire_kpa = self
            .traits
            .tire_kpa
            .map(|p| p + 6.0 * warm + 0.4 * (ambient - 15.0));
        let energy_pct = self.energy / self.capacity * 100.0;
        Sample {
            kind,
            time_ms: t,
            ignition,
            engine_on,
            speed_kmh: kmh,
            heading_deg: self.heading,
            lat: self.lat,
            lon: self.lon,
            alt_m: self.altitude(),
            odometer_km: self.odo_m / 1000.0,
            energy_pct,
            energy_abs: self.energy,
            range_km: self.energy / self.traits.per_km,
            rpm,
            throttle_pct: throttle,
            engine_load_pct: engine_load,
            maf_gs: rpm * engine_load / 1500.0,
            rate,
            coolant_c: coolant,
            intake_c: ambient + if engine_on { 8.0 + 10.0 * warm } else { 0.0 },
            ambient_c: ambient,
            battery_v,
            run_time_s: run_time,
            tire_kpa,
            charge,
            charge_limit_pct: self.traits.charge_limit_pct,
            events: &self.pending,
            dtcs: &self.dtcs,
            dtc_report,
        }
    }
}

/// Counts of what one vehicle's schedule implies, for [`crate::Fleet::estimated_events`].
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ScheduleStats {
    pub trips: u64,
    pub driving_payloads: u64,
    pub driving_minutes: f64,
    pub parked_hours: f64,
}

/// Walks one vehicle's schedule (no physics) and counts trips and payloads.
pub(crate) fn schedule_stats(v: &Validated, info: &VehicleInfo, traits: &Traits) -> ScheduleStats {
    let mut sim = VehicleSim::new(v, info, traits, false);
    let mut stats = ScheduleStats::default();
    let mut driving_ms = 0i64;
    let end = v.end_ms;
    sim.fill_queue(v.start_ms);
    while let Some(trip) = sim.queue.pop_front() {
        stats.trips += 1;
        driving_ms += trip.end_ms() - trip.start_ms;
        let periodic = (i64::from(trip.duration_s) * 1000 - 1) / v.interval_ms;
        stats.driving_payloads += 2 + periodic.max(0) as u64;
        sim.fill_queue(trip.end_ms());
    }
    stats.driving_minutes = driving_ms as f64 / 60_000.0;
    stats.parked_hours = (end - v.start_ms - driving_ms) as f64 / HOUR_MS;
    stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FleetConfig;
    use crate::vehicle;

    struct Collect(Vec<(SampleKind, i64, f64, f64, f64, f64)>);

    impl SampleSink for Collect {
        fn accept(&mut self, s: &Sample<'_>) {
            self.0
                .push((s.kind, s.time_ms, s.speed_kmh, s.lat, s.lon, s.odometer_km));
        }
    }

    /// The default fleet over `n` days.
    fn days(n: u32) -> Validated {
        FleetConfig {
            days: n,
            ..FleetConfig::default()
        }
        .validate()
        .unwrap()
    }

    fn haversine_m(lat1: f64, lon1: f64, lat2: f64, lon2: f64) -> f64 {
        let (p1, p2) = (lat1.to_radians(), lat2.to_radians());
        let dp = p2 - p1;
        let dl = (lon2 - lon1).to_radians();
        let h = (dp / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (dl / 2.0).sin().powi(2);
        2.0 * EARTH_M * h.sqrt().asin()
    }

    #[test]
    fn chunking_does_not_change_the_life() {
        let v = days(4);
        for index in 0..8 {
            let (info, traits) = vehicle::build(&v, index);
            let mut whole = Collect(Vec::new());
            VehicleSim::new(&v, &info, &traits, false).advance_to(v.end_ms, &mut whole);
            let mut pieces = Collect(Vec::new());
            let mut sim = VehicleSim::new(&v, &info, &traits, false);
            let mut t = v.start_ms;
            while t < v.end_ms {
                t += 7 * MIN_MS + 333;
                sim.advance_to(t, &mut pieces);
            }
            assert_eq!(whole.0, pieces.0);
            assert!(whole.0.iter().any(|s| s.0 == SampleKind::Driving));
        }
    }

    #[test]
    fn gps_moves_with_speed() {
        let v = days(3);
        let (info, traits) = vehicle::build(&v, 0);
        let mut c = Collect(Vec::new());
        VehicleSim::new(&v, &info, &traits, false).advance_to(v.end_ms, &mut c);
        let driving: Vec<_> =
            c.0.iter()
                .filter(|s| matches!(s.0, SampleKind::Driving | SampleKind::IgnitionOff))
                .collect();
        let mut checked = 0;
        for w in driving.windows(2) {
            let dt = (w[1].1 - w[0].1) as f64 / 1000.0;
            if dt > 60.0 {
                continue; // different trips
            }
            let d = haversine_m(w[0].3, w[0].4, w[1].3, w[1].4);
            let odo = (w[1].5 - w[0].5) * 1000.0;
            // Straight-line distance never exceeds the driven distance, and turns are gentle.
            assert!(d <= odo + 1.0, "gps {d} > odo {odo}");
            assert!(d >= odo * 0.6 - 5.0, "gps {d} << odo {odo}");
            checked += 1;
        }
        assert!(checked > 100);
    }

    #[test]
    fn plan_matches_generation() {
        let v = days(5);
        for index in 0..10 {
            let (info, traits) = vehicle::build(&v, index);
            let plan = VehicleSim::new(&v, &info, &traits, true)
                .into_plan()
                .unwrap();
            let mut c = Collect(Vec::new());
            VehicleSim::new(&v, &info, &traits, false).advance_to(v.end_ms, &mut c);
            let ons: Vec<i64> =
                c.0.iter()
                    .filter(|s| s.0 == SampleKind::IgnitionOn)
                    .map(|s| s.1)
                    .collect();
            let offs: Vec<i64> =
                c.0.iter()
                    .filter(|s| s.0 == SampleKind::IgnitionOff)
                    .map(|s| s.1)
                    .collect();
            let starts: Vec<i64> = plan
                .trips
                .iter()
                .map(|t| t.start.timestamp_millis())
                .collect();
            let ends: Vec<i64> = plan
                .trips
                .iter()
                .map(|t| t.end.timestamp_millis())
                .collect();
            assert_eq!(ons, starts);
            assert_eq!(offs, ends);
            let stats = schedule_stats(&v, &info, &traits);
            assert_eq!(stats.trips as usize, plan.trips.len());
        }
    }
}
