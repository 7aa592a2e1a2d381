//! Decode throughput on one core: default-module status (10 signals) and Ruptela V1 status,
//! module alone and the full materializer path (gate, module, post-processing).
//!
//! Run: `make bench-decode` (`dq-bench decode`). Results are printed and written to the
//! `bench-decode` section of `BENCHMARKS.md`.

use chrono::Utc;
use dq_cloudevent::{time::parse_rfc3339, types, RawEvent};
use dq_decode::modules::sources;
use dq_decode::{decode_event, SignalModule, VehicleGate};
use std::hint::black_box;
use std::time::{Duration, Instant};

use crate::report;

const SUBJECT: &str = "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:33";
const MEASURE: Duration = Duration::from_secs(2);

const DEFAULT_STATUS: &str = r#"{"signals":[
  {"timestamp":"2024-12-01T15:31:12.378Z","name":"speed","value":100.5},
  {"timestamp":"2024-12-01T15:31:12.378Z","name":"powertrainType","value":"HYBRID"},
  {"timestamp":"2024-12-01T15:31:12.378Z","name":"currentLocationCoordinates","value":{"latitude":37.7749,"longitude":-122.4194,"hdop":3}},
  {"timestamp":"2024-12-01T15:31:12.378Z","name":"powertrainTransmissionTravelledDistance","value":52311.2},
  {"timestamp":"2024-12-01T15:31:12.378Z","name":"powertrainFuelSystemRelativeLevel","value":61},
  {"timestamp":"2024-12-01T15:31:12.378Z","name":"isIgnitionOn","value":1},
  {"timestamp":"2024-12-01T15:31:12.378Z","name":"lowVoltageBatteryCurrentVoltage","value":"12.6"},
  {"timestamp":"2024-12-01T15:31:12.378Z","name":"exteriorAirTemperature","value":18.5},
  {"timestamp":"2024-12-01T15:31:12.378Z","name":"powertrainCombustionEngineSpeed","value":1850},
  {"timestamp":"2024-12-01T15:31:12.378Z","name":"powertrainRange","value":412}
]}"#;

/// A realistic Ruptela status message (the shape of the `ruptela_full_status` vector).
const RUPTELA_STATUS: &str = r#"{"pos":{"alt":1048,"dir":7370,"hdop":6,"lat":522721466,"lon":-9014316,"sat":20,"spd":65535},
 "prt":0,"trigger":7,"signals":{"1221":"28","1222":"71","1223":"73","1224":"13","1225":"4D","1226":"1C4","1227":"E2",
 "1228":"DC6D","1229":"5E","1230":"5B","1231":"7E","1232":"01A007D0","35":"1","88":"0","100":"012C","101":"D5","359":"9",
 "538":"1","347":"3","109":"7F","520":"9D80","360":"C5","518":"23","519":"FF","36":"0","92":"FFFFFFFF","208":"1F2D",
 "313":"0","316":"1","367":"7C","366":"FB","102":"0","103":"FF","107":"0","108":"12","645":"8","135":"0","136":"0",
 "205":"5","207":"30","29":"37FF","405":"1","115":"7D","355":"2F","356":"7F","516":"1F","210":"1F3F","206":"2D",
 "197":"1F21","89":"2F13","522":"1","515":"FF","722":"37","409":"FF","201":"FF","357":"3D","1187":"5C","728":"5C",
 "727":"FFFF","517":"1","482":"3C","39":"FF","38":"5","362":"1","116":"FFFF","53":"D4","54":"2C","55":"14","642":"FFFF",
 "94":"FFFF","950":"267A","96":"FF","95":"FF","97":"FF","98":"0","964":"FF","965":"26","966":"2D","967":"29","968":"2D",
 "985":"0","99":"1","1190":"5F50","1191":"1"}}"#;

fn event(source: &str, data_version: &str, data: &str) -> RawEvent {
    let mut ev = RawEvent::default();
    ev.header.event_type = types::STATUS.to_string();
    ev.header.source = source.to_string();
    ev.header.subject = SUBJECT.to_string();
    ev.header.id = "2pcYwspbaBFJ7NPGZ2kivkuJ12a".to_string();
    ev.header.data_version = data_version.to_string();
    ev.header.time = parse_rfc3339("2024-09-27T08:33:26Z").unwrap_or_default();
    ev.data = Some(data.to_string());
    ev
}

/// CPU time this thread has run, from Linux's `/proc/thread-self/schedstat` (nanoseconds).
/// The build machine is shared, so wall time would understate per-core throughput.
fn thread_cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace()
        .next()?
        .parse()
        .ok()
        .map(Duration::from_nanos)
}

/// Events per second of CPU time for `f` (wall time where CPU time is unavailable), after a
/// short warm-up; also returns what the last call produced.
fn rate(mut f: impl FnMut() -> usize) -> (f64, usize) {
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_millis(300) {
        black_box(f());
    }
    let mut runs = 0u64;
    let mut produced = 0;
    let start = Instant::now();
    let cpu_start = thread_cpu_time();
    while start.elapsed() < MEASURE {
        for _ in 0..256 {
            produced = black_box(f());
        }
        runs += 256;
    }
    let spent = match (cpu_start, thread_cpu_time()) {
        (Some(a), Some(b)) if b > a => b - a,
        _ => start.elapsed(),
    };
    (runs as f64 / spent.as_secs_f64(), produced)
}

/// Runs the four cases and rewrites the `bench-decode` section.
pub fn run() -> anyhow::Result<()> {
    let gate = VehicleGate {
        chain_id: 137,
        vehicle_contract: dq_cloudevent::did::parse_address(
            "0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF",
        )
        .unwrap_or([0; 20]),
    };
    let default_status = event(
        "0x1234567890123456789012345678901234567890",
        "",
        DEFAULT_STATUS,
    );
    let ruptela_status = event(sources::RUPTELA, "r/v0/s", RUPTELA_STATUS);
    let now = Utc::now();
    let cases: [(&str, &RawEvent, bool); 4] = [
        ("default status, module only", &default_status, false),
        ("default status, full pipeline", &default_status, true),
        ("ruptela status, module only", &ruptela_status, false),
        ("ruptela status, full pipeline", &ruptela_status, true),
    ];
    let mut table = String::from(
        "| case | signals/event | events per CPU-second (1 core) |\n|---|---:|---:|\n",
    );
    for (name, ev, full) in cases {
        let module = SignalModule::for_source(&ev.header.source);
        let (per_sec, signals) = if full {
            rate(|| decode_event(ev, &gate, now).signals.len())
        } else {
            rate(|| module.convert(ev).items.len())
        };
        println!("{name:<32} {signals:>3} signals/event  {per_sec:>12.0} events/s");
        table.push_str(&format!("| {name} | {signals} | {per_sec:.0} |\n"));
    }
    let body = format!(
        "## Decode throughput\n\nMeasured single-threaded with `make bench-decode` ({} s per case), as events per \
         second of the thread's own CPU time so that a busy shared machine does not skew the per-core figure. \
         \"Full pipeline\" is what the materializer runs per raw row: vehicle gate, module, pruning, coordinate \
         merge, finite filter. Goal: at least 200,000 default-status events/s per core. Measured on {}.\n\n{table}",
        MEASURE.as_secs(),
        report::machine(),
    );
    report::update_section(&report::benchmarks_md(), "bench-decode", &body)?;
    println!("updated {}", report::benchmarks_md().display());
    Ok(())
}
