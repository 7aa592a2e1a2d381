//! The per-event and per-batch decode path dq's materializer runs:
//! Key() dedup → route by type → vehicle gate → module → salvage → post-processing → rows.

use crate::error::DecodeError;
use crate::model::{Event, Signal};
use crate::modules::{EventModule, SignalModule};
use crate::post::{process_signals, truncate_micros, GateRejection, VehicleGate};
use crate::rows::{event_row, push_signal_rows, EventRow, SignalRow};
use chrono::{DateTime, Utc};
use dq_cloudevent::{types, RawEvent};
use std::collections::HashSet;

/// What happened to one raw event.
#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    /// `dimo.status` decoded by this module.
    Signals(SignalModule),
    /// `dimo.events` decoded by this module.
    Events(EventModule),
    /// `dimo.status` whose subject is not a vehicle on the configured chain.
    Gated(GateRejection),
    /// A type dq does not decode (fingerprints, attestations, tombstones, …).
    Skipped,
}

/// The decode of one raw event.
#[derive(Debug, Clone, PartialEq)]
pub struct EventOutcome {
    /// Where the event went.
    pub route: Route,
    /// Signals to store (post-processed, µs timestamps).
    pub signals: Vec<Signal>,
    /// Events to store (µs timestamps).
    pub events: Vec<Event>,
    /// Module errors (salvaged partial decodes included) and non-finite drops: each makes the
    /// raw event count as one failure.
    pub errors: Vec<DecodeError>,
    /// Logged-only drops from post-processing (future timestamps, bad coordinates).
    pub warnings: Vec<DecodeError>,
}

impl EventOutcome {
    /// True when the raw event counts as one decode failure (dq's `failed = 1`).
    pub fn failed(&self) -> bool {
        !self.errors.is_empty()
    }

    /// The `lake.signals` rows, appended to `out`.
    pub fn push_signal_rows(&self, out: &mut Vec<SignalRow>, raw: &RawEvent) {
        push_signal_rows(out, raw, &self.signals);
    }

    /// The `lake.events` rows.
    pub fn event_rows(&self, raw: &RawEvent) -> Vec<EventRow> {
        self.events.iter().map(|e| event_row(raw, e)).collect()
    }

    fn empty(route: Route) -> Self {
        EventOutcome {
            route,
            signals: Vec::new(),
            events: Vec::new(),
            errors: Vec::new(),
            warnings: Vec::new(),
        }
    }
}

/// Decodes one raw event as dq would store it; `now` is the decode wall clock used for
/// future-timestamp pruning.
pub fn decode_event(raw: &RawEvent, gate: &VehicleGate, now: DateTime<Utc>) -> EventOutcome {
    let h = &raw.header;
    if h.event_type == types::STATUS {
        if let Err(rejection) = gate.check(&h.subject) {
            return EventOutcome::empty(Route::Gated(rejection));
        }
        let module = SignalModule::for_source(&h.source);
        let decoded = module.convert(raw);
        let processed = process_signals(decoded.items, now);
        let mut errors = decoded.errors;
        errors.extend(processed.non_finite);
        EventOutcome {
            route: Route::Signals(module),
            signals: processed.signals,
            events: Vec::new(),
            errors,
            warnings: processed.warnings,
        }
    } else if h.event_type == types::EVENTS {
        let module = EventModule::for_source(&h.source);
        let mut decoded = module.convert(raw);
        for e in &mut decoded.items {
            e.timestamp = truncate_micros(e.timestamp);
        }
        EventOutcome {
            route: Route::Events(module),
            signals: Vec::new(),
            events: decoded.items,
            errors: decoded.errors,
            warnings: Vec::new(),
        }
    } else {
        EventOutcome::empty(Route::Skipped)
    }
}

/// The decoded rows of a batch.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BatchOutcome {
    /// Rows for `lake.signals`, in input order.
    pub signal_rows: Vec<SignalRow>,
    /// Rows for `lake.events`, in input order.
    pub event_rows: Vec<EventRow>,
    /// Raw events that counted as a decode failure, with their errors.
    pub failures: Vec<Failure>,
    /// Rows dropped as repeats of an earlier row's `Key()`.
    pub duplicates: usize,
    /// `dimo.status` rows refused by the vehicle gate.
    pub gated: usize,
    /// Rows of types dq does not decode.
    pub skipped: usize,
}

/// One failed raw event: which, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// Raw row id.
    pub cloud_event_id: String,
    /// Raw row source.
    pub source: String,
    /// Raw row subject.
    pub subject: String,
    /// Every problem found.
    pub errors: Vec<DecodeError>,
}

/// Decodes a batch: the first row with a given `Key()` wins, later ones are counted and dropped.
/// Decoding is pure, so a large batch is split across the machine's cores
/// ([`decode_batch_on`]).
pub fn decode_batch(raws: &[RawEvent], gate: &VehicleGate, now: DateTime<Utc>) -> BatchOutcome {
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    decode_batch_on(raws, gate, now, threads)
}

/// Fewer events than this per thread are decoded on the caller's thread: spawning costs more
/// than it saves.
const MIN_EVENTS_PER_THREAD: usize = 1024;

/// [`decode_batch`] on at most `threads` threads. The answer does not depend on the split: the
/// `Key()` dedup runs first, in input order, and each thread decodes a contiguous run of the
/// survivors whose outcomes are concatenated in order.
pub fn decode_batch_on(
    raws: &[RawEvent],
    gate: &VehicleGate,
    now: DateTime<Utc>,
    threads: usize,
) -> BatchOutcome {
    let mut seen = HashSet::with_capacity(raws.len());
    let firsts: Vec<&RawEvent> = raws
        .iter()
        .filter(|r| seen.insert(r.header.key()))
        .collect();
    let per_thread = firsts
        .len()
        .div_ceil(threads.max(1))
        .max(MIN_EVENTS_PER_THREAD);
    let mut out = if firsts.len() <= per_thread {
        decode_run(&firsts, gate, now)
    } else {
        std::thread::scope(|scope| {
            let runs: Vec<_> = firsts
                .chunks(per_thread)
                .map(|run| scope.spawn(move || decode_run(run, gate, now)))
                .collect();
            let mut parts = runs.into_iter().map(|run| {
                run.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            });
            // The first run's outcome becomes the batch's: only the later runs' rows are copied.
            let mut out = parts.next().unwrap_or_default();
            for part in parts {
                out.signal_rows.extend(part.signal_rows);
                out.event_rows.extend(part.event_rows);
                out.failures.extend(part.failures);
                out.gated += part.gated;
                out.skipped += part.skipped;
            }
            out
        })
    };
    out.duplicates = raws.len() - firsts.len();
    out
}

/// Decodes `raws` (already deduplicated) in order.
fn decode_run(raws: &[&RawEvent], gate: &VehicleGate, now: DateTime<Utc>) -> BatchOutcome {
    let mut out = BatchOutcome::default();
    for raw in raws {
        let outcome = decode_event(raw, gate, now);
        match outcome.route {
            Route::Gated(_) => out.gated += 1,
            Route::Skipped => out.skipped += 1,
            Route::Signals(_) | Route::Events(_) => {}
        }
        outcome.push_signal_rows(&mut out.signal_rows, raw);
        out.event_rows.extend(outcome.event_rows(raw));
        if outcome.failed() {
            out.failures.push(Failure {
                cloud_event_id: raw.header.id.clone(),
                source: raw.header.source.clone(),
                subject: raw.header.subject.clone(),
                errors: outcome.errors,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modules::sources;
    use dq_cloudevent::time::parse_rfc3339;

    const SUBJECT: &str = "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:7";

    fn raw(event_type: &str, id: &str, time: &str, data: &str) -> RawEvent {
        let mut raw = RawEvent::default();
        raw.header.event_type = event_type.into();
        raw.header.subject = SUBJECT.into();
        raw.header.source = "0x1234567890123456789012345678901234567890".into();
        raw.header.id = id.into();
        raw.header.time = parse_rfc3339(time).unwrap();
        raw.data = Some(data.into());
        raw
    }

    fn gate() -> VehicleGate {
        VehicleGate {
            chain_id: 137,
            vehicle_contract: dq_cloudevent::did::parse_address(
                "0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF",
            )
            .unwrap(),
        }
    }

    fn now() -> DateTime<Utc> {
        parse_rfc3339("2025-01-01T00:00:00Z").unwrap()
    }

    const STATUS: &str = r#"{"signals":[{"name":"speed","timestamp":"2024-12-01T15:31:12.378075897Z","value":1},
        {"name":"bogus","timestamp":"2024-12-01T15:31:12Z","value":1}]}"#;

    #[test]
    fn key_dedup_first_wins_within_a_second() {
        let a = raw(types::STATUS, "x", "2024-12-01T15:31:12.1Z", STATUS);
        let b = raw(
            types::STATUS,
            "x",
            "2024-12-01T15:31:12.9Z",
            r#"{"signals":[]}"#,
        );
        let out = decode_batch(&[a, b], &gate(), now());
        assert_eq!(out.duplicates, 1);
        assert_eq!(out.signal_rows.len(), 1);
        assert_eq!(
            out.signal_rows[0].timestamp,
            parse_rfc3339("2024-12-01T15:31:12.378075Z").unwrap()
        );
        assert_eq!(
            out.failures.len(),
            1,
            "salvaged partial decode still counts as a failure"
        );
        assert_eq!(out.failures[0].errors[0].reason(), "unknown_signal");
    }

    #[test]
    fn routing_gate_and_skips() {
        let mut device = raw(types::STATUS, "d", "2024-12-01T15:31:12Z", STATUS);
        device.header.subject =
            "did:erc721:137:0x9c94C395cBcBDe662235E0A9d3bB87Ad708561BA:1".into();
        let events = raw(
            types::EVENTS,
            "e",
            "2024-12-01T15:31:12Z",
            r#"{"events":[{"name":"safety.collision","timestamp":"2024-12-01T15:31:12Z"}]}"#,
        );
        let mut gated_events = events.clone();
        gated_events.header.id = "e2".into();
        gated_events.header.subject = "not a did".into();
        let fingerprint = raw(types::FINGERPRINT, "f", "2024-12-01T15:31:12Z", "{}");
        let out = decode_batch(&[device, events, gated_events, fingerprint], &gate(), now());
        assert_eq!(
            (out.gated, out.skipped, out.event_rows.len()),
            (1, 1, 2),
            "events are not gated"
        );
        assert_eq!(out.event_rows[0].event_type, "dimo.event");
    }

    #[test]
    fn non_finite_marks_the_event_failed() {
        let nan = raw(
            types::STATUS,
            "n",
            "2024-12-01T15:31:12Z",
            r#"{"signals":[{"name":"speed","timestamp":"2024-12-01T15:31:12Z","value":"NaN"}]}"#,
        );
        let outcome = decode_event(&nan, &gate(), now());
        assert!(outcome.signals.is_empty());
        assert!(outcome.failed());
        assert_eq!(outcome.errors[0].reason(), "non_finite_value");
    }

    #[test]
    fn vendor_routing_by_source() {
        let mut ruptela = raw(
            types::EVENTS,
            "r",
            "2024-09-27T08:33:26Z",
            r#"{"signals":{"143":"7"}}"#,
        );
        ruptela.header.source = sources::RUPTELA.into();
        let outcome = decode_event(&ruptela, &gate(), now());
        assert_eq!(outcome.route, Route::Events(EventModule::Ruptela));
        assert_eq!(outcome.events[0].name, "behavior.harshCornering");
    }

    #[test]
    fn a_split_batch_decodes_as_one_thread_does() {
        // Enough events for several threads, with repeats across the split points, failures,
        // gated and skipped rows spread through the batch.
        let batch: Vec<RawEvent> = (0..5000)
            .map(|i| {
                let id = format!("e{}", i % 3700);
                match i % 7 {
                    0 => raw(types::FINGERPRINT, &id, "2024-12-01T15:31:12Z", "{}"),
                    1 => raw(
                        types::STATUS,
                        &id,
                        "2024-12-01T15:31:12Z",
                        r#"{"signals":[]}"#,
                    ),
                    2 => {
                        let mut gated = raw(types::STATUS, &id, "2024-12-01T15:31:12Z", STATUS);
                        gated.header.subject = "not a did".into();
                        gated
                    }
                    _ => raw(types::STATUS, &id, "2024-12-01T15:31:12Z", STATUS),
                }
            })
            .collect();
        let one = decode_batch_on(&batch, &gate(), now(), 1);
        assert!(one.duplicates > 0 && one.gated > 0 && one.skipped > 0 && !one.failures.is_empty());
        for threads in [2, 3, 8] {
            assert_eq!(
                decode_batch_on(&batch, &gate(), now(), threads),
                one,
                "{threads} threads"
            );
        }
    }
}
