//! `dqctl decode [FILE]`: decodes one CloudEvent in stored form (header at the top level,
//! payload in `data` or `data_base64`) and prints `{"signals":[…],"events":[…],"errors":[…]}`.
//!
//! By default the event goes through the same path the materializer uses: the raw_events row
//! round trip, the vehicle gate, the module and post-processing. `--module-only` prints the
//! module's raw output instead. Per-signal errors still exit 0; unreadable input exits 2.

use anyhow::Context as _;
use chrono::Utc;
use dq_cloudevent::time::format_rfc3339_nano;
use dq_cloudevent::{did, types, RawEvent, RawRow};
use dq_decode::{
    DecodeError, Event, EventModule, Route, Signal, SignalModule, SignalValue, VehicleGate,
};
use serde_json::{json, Value};
use std::io::Read as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Production chain id (`DIMO_REGISTRY_CHAIN_ID`).
const PROD_CHAIN_ID: u64 = 137;
/// Production vehicle NFT contract (`VEHICLE_NFT_ADDRESS`).
const PROD_VEHICLE_NFT: &str = "0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF";

/// Arguments of `dqctl decode`.
#[derive(clap::Args)]
pub struct Args {
    /// CloudEvent JSON file; reads stdin when absent or `-`.
    file: Option<PathBuf>,
    /// Print the decoder module's raw output, before dq's gate and post-processing.
    #[arg(long)]
    module_only: bool,
    /// Chain id the vehicle gate accepts.
    #[arg(long, default_value_t = PROD_CHAIN_ID)]
    chain_id: u64,
    /// Vehicle NFT contract the vehicle gate accepts.
    #[arg(long, default_value = PROD_VEHICLE_NFT)]
    vehicle_nft: String,
    /// Decode `dimo.status` rows whatever their subject.
    #[arg(long)]
    no_gate: bool,
}

/// Runs the subcommand.
pub fn run(args: &Args) -> ExitCode {
    let event = match read_event(args) {
        Ok(event) => event,
        Err(e) => {
            eprintln!("dqctl decode: {e:#}");
            return ExitCode::from(2);
        }
    };
    let output = if args.module_only {
        module_output(&event)
    } else {
        let gate = if args.no_gate {
            VehicleGate::DISABLED
        } else {
            match did::parse_address(&args.vehicle_nft) {
                Ok(contract) => VehicleGate {
                    chain_id: args.chain_id,
                    vehicle_contract: contract,
                },
                Err(e) => {
                    eprintln!("dqctl decode: --vehicle-nft: {e}");
                    return ExitCode::from(2);
                }
            }
        };
        materialized_output(&event, &gate)
    };
    println!("{output}");
    ExitCode::SUCCESS
}

fn read_event(args: &Args) -> anyhow::Result<RawEvent> {
    let mut bytes = Vec::new();
    match &args.file {
        Some(path) if path.as_os_str() != "-" => {
            bytes =
                std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        }
        _ => {
            std::io::stdin()
                .read_to_end(&mut bytes)
                .context("cannot read stdin")?;
        }
    }
    let text = String::from_utf8(bytes).context("input is not UTF-8")?;
    RawEvent::from_json(&text).context("input is not a CloudEvent")
}

/// The module's own output: `dimo.events` rows go to the event module, anything else to the
/// signal module (which applies its own type gates).
fn module_output(event: &RawEvent) -> Value {
    let source = &event.header.source;
    if event.header.event_type == types::EVENTS {
        let decoded = EventModule::for_source(source).convert(event);
        render(&[], &decoded.items, &decoded.errors, &[], None)
    } else {
        let decoded = SignalModule::for_source(source).convert(event);
        render(&decoded.items, &[], &decoded.errors, &[], None)
    }
}

/// What dq would store: the event as read back from a raw_events row, then the pipeline.
fn materialized_output(event: &RawEvent, gate: &VehicleGate) -> Value {
    let (stored, _extras) = RawRow::from_event(event).to_event_checked();
    let outcome = dq_decode::decode_event(&stored, gate, Utc::now());
    let route = match &outcome.route {
        Route::Signals(m) => format!("signals:{}", m.name()),
        Route::Events(m) => format!("events:{}", m.name()),
        Route::Gated(why) => format!("gated:{}", why.reason()),
        Route::Skipped => format!("skipped:{}", stored.header.event_type),
    };
    render(
        &outcome.signals,
        &outcome.events,
        &outcome.errors,
        &outcome.warnings,
        Some(route),
    )
}

fn render(
    signals: &[Signal],
    events: &[Event],
    errors: &[DecodeError],
    warnings: &[DecodeError],
    route: Option<String>,
) -> Value {
    let error_json = |e: &DecodeError| json!({"reason": e.reason(), "message": e.to_string()});
    let mut out = json!({
        "signals": signals.iter().map(signal_json).collect::<Vec<_>>(),
        "events": events.iter().map(|e| json!({
            "name": e.name,
            "timestamp": format_rfc3339_nano(&e.timestamp),
            "durationNs": e.duration_ns,
            "metadata": e.metadata,
            "tags": e.tags,
        })).collect::<Vec<_>>(),
        "errors": errors.iter().map(error_json).collect::<Vec<_>>(),
    });
    if let (Some(route), Some(map)) = (route, out.as_object_mut()) {
        map.insert("warnings".into(), warnings.iter().map(error_json).collect());
        map.insert("route".into(), route.into());
    }
    out
}

/// `{name, timestamp, value}`; non-finite numbers (possible only in `--module-only` output)
/// print as `null` because JSON has no NaN.
fn signal_json(s: &Signal) -> Value {
    let value = match &s.value {
        SignalValue::Number(v) => json!(v),
        SignalValue::String(v) => json!(v),
        SignalValue::Location(l) => {
            json!({"latitude": l.latitude, "longitude": l.longitude, "hdop": l.hdop})
        }
    };
    json!({"name": s.name, "timestamp": format_rfc3339_nano(&s.timestamp), "value": value})
}
