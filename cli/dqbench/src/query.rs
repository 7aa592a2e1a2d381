//! `bench-query` (issue 5 acceptance 6, issue 7 acceptance 4): read latency of the served query
//! paths over a seeded, materialized fleet, on the file catalog and on PostgreSQL:
//! - `signals`: one vehicle, hourly `AVG(speed)` over the last 7 days, and over the whole horizon
//!   (the month);
//! - `signalsLatest`: one vehicle's latest values (`lastSeen`, speed, coordinates);
//! - FetchService `ListCloudEvents` (100 events, one vehicle, one day) and `GetLatestCloudEvent`;
//! - `segments` (IGNITION_DETECTION over the whole 30-day horizon) and `dailyActivity` (31 days in
//!   a non-UTC zone);
//! - the engine floor beside them: `SELECT 1 FROM lake.signals LIMIT 0` (catalog and snapshot
//!   lookup, no data read).
//!
//! Each runs through the real served path — the GraphQL router behind `axum::serve` over
//! HTTP/1.1 (a `reqwest` client, a real token), FetchService behind tonic over HTTP/2 (a tonic
//! client, a real token) — and as the bare read on the same lake (`dq_query::Engine` for the
//! signal reads, `dq_rawquery::Reader` + `dq_rawquery::Payloads` for the cloud events: the same SQL with no
//! HTTP, GraphQL, gRPC or auth around it). Before anything is timed, every served answer is
//! compared with the bare answer; a mismatch fails the run.
//!
//! "Cold" is the first request on a freshly opened DuckDB instance (new lake attach, new
//! GraphQL state or FetchService with the file listings loaded as its function's init loads
//! them, new server; the client's connection is opened beforehand);
//! "warm" are the requests after a warm-up on the last of those instances. Only one DuckDB
//! instance is open at a time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context};
use chrono::{DateTime, Utc};
use dq_auth::dev::{DevClaims, DevSigner};
use dq_auth::{GrpcAuthenticator, Permission};
use dq_fleet::{Fleet, FleetConfig};
use dq_lake::testing::{Backend, TestLake};
use dq_proto::grpc::fetch_service_client::FetchServiceClient;
use dq_proto::grpc::{GetLatestCloudEventRequest, ListCloudEventsRequest, SearchOptions};
use dq_query::aggregate::{AggregateRequest, FloatAgg, FloatRequest};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

use crate::{dataset, report};

/// Options of the query case.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    fleet: dataset::FleetArgs,
    /// Catalogs to run on: file, postgres.
    #[arg(long, value_delimiter = ',', default_value = "file,postgres")]
    catalogs: Vec<String>,
    /// Timed warm requests per case and path.
    #[arg(long, default_value_t = 200)]
    iterations: usize,
    /// Untimed requests before the warm ones.
    #[arg(long, default_value_t = 20)]
    warmup: usize,
    /// Cold samples per case and path (each on a freshly opened DuckDB instance).
    #[arg(long, default_value_t = 5)]
    cold_runs: usize,
    /// Print the section but leave BENCHMARKS.md alone (smoke runs).
    #[arg(long)]
    no_write: bool,
}

/// Hourly buckets.
pub(crate) const HOUR_US: i64 = 3_600_000_000;
pub(crate) const DAY_US: i64 = 24 * HOUR_US;
/// `ListCloudEvents` page size.
pub(crate) const LIST_LIMIT: i32 = 100;
/// The signal the aggregations read.
pub(crate) const SIGNAL: &str = "speed";
/// Calendar days of the `dailyActivity` case, and their zone.
pub(crate) const DAILY_DAYS: i64 = 31;
pub(crate) const DAILY_ZONE: &str = "America/New_York";
/// The JWT issuer of the development signer.
pub(crate) const ISSUER: &str = "https://bench.dq.local";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Case {
    Week,
    Month,
    Latest,
    ListEvents,
    LatestEvent,
    Segments,
    Daily,
    /// The engine's per-statement floor: `SELECT 1 FROM lake.signals LIMIT 0` (catalog lookup
    /// and snapshot resolution, no data read), bare only.
    Probe,
}

impl Case {
    pub(crate) const ALL: [Case; 8] = [
        Case::Week,
        Case::Month,
        Case::Latest,
        Case::ListEvents,
        Case::LatestEvent,
        Case::Segments,
        Case::Daily,
        Case::Probe,
    ];

    /// True for the cases `dq_query::Engine` answers alone ([`engine_answer`]).
    pub(crate) fn engine_alone(self) -> bool {
        matches!(
            self,
            Case::Week | Case::Month | Case::Segments | Case::Daily
        )
    }

    /// The served path of the case (`None`: bare only).
    pub(crate) fn served(self) -> Option<Path> {
        match self {
            Case::Week | Case::Month | Case::Latest | Case::Segments | Case::Daily => {
                Some(Path::Graphql)
            }
            Case::ListEvents | Case::LatestEvent => Some(Path::Grpc),
            Case::Probe => None,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Case::Week => "signals 7 days",
            Case::Month => "signals month",
            Case::Latest => "signalsLatest",
            Case::ListEvents => "ListCloudEvents",
            Case::LatestEvent => "GetLatestCloudEvent",
            Case::Segments => "segments month",
            Case::Daily => "dailyActivity 31 days",
            Case::Probe => "engine floor",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Path {
    Graphql,
    Grpc,
    Sql,
}

impl Path {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Path::Graphql => "GraphQL HTTP",
            Path::Grpc => "FetchService gRPC",
            Path::Sql => "bare SQL",
        }
    }
}

/// What every query asks about.
pub(crate) struct Target {
    pub(crate) subject: String,
    pub(crate) vendor: &'static str,
    /// The last 7 days of the horizon (the whole horizon when shorter), µs.
    pub(crate) week: (i64, i64),
    /// The whole horizon, µs.
    pub(crate) month: (i64, i64),
    /// The vehicle's busiest UTC day, µs.
    pub(crate) day: (i64, i64),
    /// `dailyActivity`: an instant of the first and of the last of its 31 days, µs.
    pub(crate) days: (i64, i64),
}

impl Target {
    pub(crate) fn window(&self, case: Case) -> (i64, i64) {
        match case {
            Case::Month => self.month,
            _ => self.week,
        }
    }

    /// The engine request of the `signals` cases: hourly `AVG(speed)` over the case's window.
    pub(crate) fn request(&self, case: Case) -> AggregateRequest {
        let (from_us, to_us) = self.window(case);
        AggregateRequest {
            subject: self.subject.clone(),
            source: None,
            interval_us: HOUR_US,
            from_us,
            to_us,
            floats: vec![FloatRequest {
                name: SIGNAL.into(),
                agg: FloatAgg::Avg,
                filter: None,
            }],
            ..AggregateRequest::default()
        }
    }
}

/// A normalized answer, comparable across paths.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    /// (bucket start µs, AVG(speed)).
    Buckets(Vec<(i64, Option<f64>)>),
    /// lastSeen, speed (ts, value), coordinates (ts, lat, lon).
    Latest {
        last_seen: Option<i64>,
        speed: Option<(i64, f64)>,
        location: Option<(i64, f64, f64)>,
    },
    /// (id, type, data, data_base64) in order.
    Events(Vec<(String, String, Vec<u8>, String)>),
    /// Segments: (start µs, end µs, duration s, ongoing).
    Segments(Vec<(i64, Option<i64>, i64, bool)>),
    /// Days: (day start µs, segment count, active seconds).
    Days(Vec<(i64, i64, i64)>),
    /// The floor statement ran.
    Probe,
}

impl Answer {
    pub(crate) fn size(&self) -> String {
        match self {
            Answer::Buckets(b) => format!("{} buckets", b.len()),
            Answer::Latest { .. } => "3 fields".into(),
            Answer::Events(e) if e.len() == 1 => "1 event".into(),
            Answer::Events(e) => format!("{} events", e.len()),
            Answer::Segments(s) => format!("{} segments", s.len()),
            Answer::Days(d) => format!(
                "{} days, {} active",
                d.len(),
                d.iter().filter(|(_, n, _)| *n > 0).count()
            ),
            Answer::Probe => "no rows".into(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Answer::Buckets(b) => b.is_empty(),
            Answer::Latest { speed, .. } => speed.is_none(),
            Answer::Events(e) => e.is_empty(),
            Answer::Segments(s) => s.is_empty(),
            Answer::Days(d) => d.iter().all(|(_, n, _)| *n == 0),
            Answer::Probe => false,
        }
    }

    /// Equal up to float summation order (DuckDB may aggregate in parallel).
    pub(crate) fn matches(&self, other: &Answer) -> bool {
        fn close(a: f64, b: f64) -> bool {
            (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
        }
        match (self, other) {
            (Answer::Buckets(a), Answer::Buckets(b)) => {
                a.len() == b.len()
                    && a.iter().zip(b).all(|((ta, va), (tb, vb))| {
                        ta == tb
                            && match (va, vb) {
                                (Some(x), Some(y)) => close(*x, *y),
                                (None, None) => true,
                                _ => false,
                            }
                    })
            }
            (
                Answer::Latest {
                    last_seen: la,
                    speed: sa,
                    location: pa,
                },
                Answer::Latest {
                    last_seen: lb,
                    speed: sb,
                    location: pb,
                },
            ) => {
                la == lb
                    && match (sa, sb) {
                        (Some((ta, va)), Some((tb, vb))) => ta == tb && close(*va, *vb),
                        (None, None) => true,
                        _ => false,
                    }
                    && match (pa, pb) {
                        (Some((ta, xa, ya)), Some((tb, xb, yb))) => {
                            ta == tb && close(*xa, *xb) && close(*ya, *yb)
                        }
                        (None, None) => true,
                        _ => false,
                    }
            }
            (Answer::Events(a), Answer::Events(b)) => a == b,
            (Answer::Segments(a), Answer::Segments(b)) => a == b,
            (Answer::Days(a), Answer::Days(b)) => a == b,
            (Answer::Probe, Answer::Probe) => true,
            _ => false,
        }
    }
}

/// How many samples a timing takes.
pub(crate) struct Sampling {
    /// Cold samples, each on a freshly opened instance.
    pub(crate) cold_runs: usize,
    /// Untimed requests before the warm ones.
    pub(crate) warmup: usize,
    /// Timed warm requests (at most).
    pub(crate) iterations: usize,
    /// Stop the warm requests early once this much time went by (with at least
    /// [`MIN_WARM_SAMPLES`]).
    pub(crate) budget: Option<Duration>,
}

/// Warm samples a time budget never cuts below.
pub(crate) const MIN_WARM_SAMPLES: usize = 20;

impl Sampling {
    /// Warm requests still to send after `taken` of them, `elapsed` into the warm phase.
    pub(crate) fn more(&self, taken: usize, elapsed: Duration) -> bool {
        taken < self.iterations
            && (taken < MIN_WARM_SAMPLES || self.budget.is_none_or(|b| elapsed < b))
    }
}

/// Latency samples of one case on one path.
pub(crate) struct Timing {
    pub(crate) case: Case,
    pub(crate) path: Path,
    pub(crate) answer: String,
    pub(crate) open: Vec<Duration>,
    pub(crate) cold: Vec<Duration>,
    pub(crate) warm: Vec<Duration>,
}

struct CatalogFigures {
    catalog: &'static str,
    raw_rows: u64,
    signal_rows: u64,
    event_rows: u64,
    vehicle_signal_rows: i64,
    vehicle: String,
    events_day: String,
    seed: Duration,
    materialize: Duration,
    maintain: Duration,
    timings: Vec<Timing>,
    floor: Floor,
}

/// A µs instant as a `TIMESTAMPTZ` literal, for the bench's hand-written statements.
pub(crate) fn timestamptz(us: i64) -> String {
    format!("make_timestamp({us}::BIGINT)::TIMESTAMPTZ")
}

/// Nearest-rank percentile of `samples` in ms.
pub(crate) fn percentile(samples: &[Duration], p: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    ms.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * ms.len() as f64).ceil() as usize;
    ms[rank.clamp(1, ms.len()) - 1]
}

pub(crate) fn ms(v: f64) -> String {
    if v < 10.0 {
        format!("{v:.2}")
    } else if v < 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// The 7-day goal of issue 5 (warm p50), by catalog.
fn goal_ms(case: Case, catalog: &str) -> Option<f64> {
    match (case, catalog) {
        (Case::Week, "file") => Some(2.0),
        (Case::Week, "postgres") => Some(10.0),
        _ => None,
    }
}

/// Runs the case on every requested catalog and rewrites the `bench-query` section.
pub fn run(args: &Args) -> anyhow::Result<()> {
    ensure!(args.cold_runs >= 1, "--cold-runs must be at least 1");
    ensure!(args.iterations >= 1, "--iterations must be at least 1");
    let fleet = args.fleet.config();
    let signer = DevSigner::generate(ISSUER).map_err(|e| anyhow!("dev signer: {e}"))?;
    let mut figures = Vec::new();
    for name in &args.catalogs {
        let backend = dataset::backend(name)?;
        figures.push(catalog_run(backend, &fleet, args, &signer)?);
    }
    let body = render(&fleet, args, &figures);
    print!("{body}");
    if args.no_write {
        eprintln!("--no-write: BENCHMARKS.md left as is");
    } else {
        report::update_section(&report::benchmarks_md(), "bench-query", &body)?;
        println!("updated {}", report::benchmarks_md().display());
    }
    Ok(())
}

fn render(fleet: &FleetConfig, args: &Args, figures: &[CatalogFigures]) -> String {
    let mut out = String::from("## Query latency\n\n");
    out.push_str(&format!(
        "`make bench-query`: a {}-vehicle × {}-day fleet at {} status payloads/min while driving, \
         seeded by the din simulator (1-hour bundles), drained by the materializer and given one \
         cycle of din's maintainer (production runs it every 15 min over dq's tables: adjacent \
         files merged per partition; snapshots younger than 72 h are kept), then queried \
         for one vehicle. Each case runs through the served path — GraphQL `/query` behind \
         `axum::serve` over HTTP/1.1 keep-alive with a real RS256 token, or FetchService behind \
         tonic over HTTP/2 with a real token — and as the bare read on the same lake \
         (`dq_query::Engine` for the signal reads, `dq_rawquery::Reader` + `dq_rawquery::Payloads` for cloud \
         events: the same SQL without HTTP, GraphQL, gRPC or auth), so the serving overhead shows \
         beside it; every served answer is checked equal to the bare answer before timing. Cold = \
         the first request on a freshly opened DuckDB instance (new lake attach, new GraphQL state \
         or FetchService with its file listings loaded as the function's init loads them, and server; \
         the client connection is opened first, the OS page cache is not dropped), {} samples, each its own instance; \"open\" is the time to build that \
         instance. Warm = {} requests after {} warm-up requests on one instance, sequential, \
         client and server in one process on the same cores; percentiles are nearest-rank. \
         FetchService is served on the real router (`dq_fetch::server::router`) with TCP_NODELAY on \
         the accepted sockets, unlike `dq_fetch::server::serve`, whose Nagle delay adds ~40 ms to \
         every call. Goal (issue 5): the 7-day query at warm p50 ≤ 2 ms on the file catalog and \
         ≤ 10 ms on PostgreSQL.\n\nDataset:\n",
        fleet.vehicles,
        fleet.days,
        fleet.signals_per_minute,
        args.cold_runs,
        args.iterations,
        args.warmup,
    ));
    for f in figures {
        out.push_str(&format!(
            "- {}: {} raw events → {} signal rows and {} event rows (seeded in {:.0} s, \
             materialized in {:.0} s, din maintenance {:.0} s); queried vehicle `{}` with {} signal rows, \
             `ListCloudEvents` day {}.\n",
            f.catalog,
            f.raw_rows,
            f.signal_rows,
            f.event_rows,
            f.seed.as_secs_f64(),
            f.materialize.as_secs_f64(),
            f.maintain.as_secs_f64(),
            f.vehicle,
            f.vehicle_signal_rows,
            f.events_day,
        ));
    }
    out.push_str(&format!("\nMeasured on {}.\n", report::machine()));
    let titles = [
        (
            Case::Week,
            format!(
                "`signals`: one vehicle, the last {} days, `speed(agg: AVG)`, interval `1h`",
                fleet.days.min(7)
            ),
        ),
        (
            Case::Month,
            format!(
                "`signals`: one vehicle, the whole {}-day horizon, `speed(agg: AVG)`, interval `1h`",
                fleet.days
            ),
        ),
        (
            Case::Latest,
            "`signalsLatest`: one vehicle, `lastSeen`, `speed`, `currentLocationCoordinates`".into(),
        ),
        (
            Case::ListEvents,
            "FetchService `ListCloudEvents`: one vehicle, its busiest day, limit 100".into(),
        ),
        (
            Case::LatestEvent,
            "FetchService `GetLatestCloudEvent`: one vehicle, no other filter".into(),
        ),
        (
            Case::Segments,
            format!(
                "`segments`: one vehicle, IGNITION_DETECTION over the whole {}-day horizon \
                 (default config and summaries)",
                fleet.days
            ),
        ),
        (
            Case::Daily,
            format!(
                "`dailyActivity`: one vehicle, IGNITION_DETECTION, {DAILY_DAYS} days in `{DAILY_ZONE}` \
                 (default summaries)"
            ),
        ),
        (
            Case::Probe,
            "Engine floor: `SELECT 1 FROM lake.signals LIMIT 0` on the same engine (catalog and \
             snapshot lookup, no data read)"
                .into(),
        ),
    ];
    for (case, title) in titles {
        out.push_str(&format!(
            "\n### {title}\n\n| catalog | path | answer | open ms | cold p50 ms | cold p95 ms | warm p50 ms | warm p95 ms | warm p99 ms | goal (warm p50) |\n|---|---|---|---:|---:|---:|---:|---:|---:|---|\n"
        ));
        for f in figures {
            for t in f.timings.iter().filter(|t| t.case == case) {
                let p50 = percentile(&t.warm, 50.0);
                let goal = match goal_ms(case, f.catalog) {
                    Some(g) => format!("≤ {g} ms: {}", if p50 <= g { "met" } else { "missed" }),
                    None => "—".into(),
                };
                out.push_str(&format!(
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                    f.catalog,
                    t.path.label(),
                    t.answer,
                    ms(percentile(&t.open, 50.0)),
                    ms(percentile(&t.cold, 50.0)),
                    ms(percentile(&t.cold, 95.0)),
                    ms(p50),
                    ms(percentile(&t.warm, 95.0)),
                    ms(percentile(&t.warm, 99.0)),
                    goal,
                ));
            }
        }
    }
    out.push_str(
        "\n### Floor under the 7-day read: its statement with its input already in memory\n\n\
         The rows of the files the direct read opens (the vehicle's `subject_bucket` over the \
         window's days) copied into a DuckDB temp table first, so no catalog lookup, file read, \
         HTTP, GraphQL or auth is left: what DuckDB alone takes to plan and run the statement, \
         prepared per request as the engine does. Timed as dq's statement and as the smallest \
         statement with the same answer (R1 dedup by `arg_min`, hourly AVG, ordered); both \
         answers are checked equal to the engine's.\n\n\
         | catalog | statement | rows in memory | warm p50 ms | warm p95 ms | warm p99 ms |\n\
         |---|---|---:|---:|---:|---:|\n",
    );
    for f in figures {
        for t in &f.floor.timings {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                f.catalog,
                t.statement,
                f.floor.rows,
                ms(percentile(&t.warm, 50.0)),
                ms(percentile(&t.warm, 95.0)),
                ms(percentile(&t.warm, 99.0)),
            ));
        }
    }
    out
}

/// Seeds and materializes the fleet once on `backend`, then times every case on it.
fn catalog_run(
    backend: Backend,
    fleet: &FleetConfig,
    args: &Args,
    signer: &DevSigner,
) -> anyhow::Result<CatalogFigures> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let built = Fleet::new(fleet.clone())?;
    let data = dataset::build(&rt, backend, fleet)?;
    let catalog = data.catalog;
    let t = &data.lake;
    let (target, vehicle_signal_rows) = target(t, &built)?;
    eprintln!(
        "[{catalog}] vehicle {} ({}, {vehicle_signal_rows} signal rows); events day {}",
        target.subject,
        target.vendor,
        events_day(&target)
    );
    let bench = Bench::new(t, &target, signer)?;
    let sampling = Sampling {
        cold_runs: args.cold_runs,
        warmup: args.warmup,
        iterations: args.iterations,
        budget: None,
    };
    let timings = rt.block_on(async {
        bench.verify(catalog).await?;
        let mut timings = Vec::new();
        for case in Case::ALL {
            for path in case.served().into_iter().chain([Path::Sql]) {
                timings.push(bench.time(catalog, case, path, &sampling).await?);
            }
        }
        anyhow::Ok(timings)
    })?;
    drop(bench);
    let floor = statement_floor(t, &target, &sampling)?;
    Ok(CatalogFigures {
        catalog,
        raw_rows: data.raw_rows,
        signal_rows: data.signal_rows,
        event_rows: data.event_rows,
        vehicle_signal_rows,
        vehicle: format!("{} ({})", target.subject, target.vendor),
        events_day: events_day(&target),
        seed: data.seed,
        materialize: data.materialize,
        maintain: data.maintain,
        timings,
        floor,
    })
}

/// The answer of a case `dq_query::Engine` answers alone (`signals`, `segments`,
/// `dailyActivity`), read by `engine`: the bare path, without HTTP or GraphQL.
pub(crate) fn engine_answer(
    engine: &dq_query::Engine,
    case: Case,
    target: &Target,
) -> anyhow::Result<Answer> {
    Ok(match case {
        Case::Week | Case::Month => {
            let buckets = engine.aggregate(&target.request(case))?;
            Answer::Buckets(
                buckets
                    .into_iter()
                    .map(|b| (b.timestamp_us, b.floats.get(&0).copied()))
                    .collect(),
            )
        }
        Case::Segments => {
            let (from, to) = target.month;
            let q = dq_query::activity::SegmentsQuery {
                request: dq_query::segments::SegmentsRequest::new(
                    target.subject.clone(),
                    utc(from),
                    utc(to),
                    dq_query::segments::Mechanism::IgnitionDetection,
                ),
                signal_requests: Vec::new(),
                event_names: Vec::new(),
            };
            let segs = engine.segments(&q, Utc::now())?;
            Answer::Segments(segs.iter().map(|s| segment_key(&s.segment)).collect())
        }
        Case::Daily => {
            let (from, to) = target.days;
            let q = dq_query::activity::DailyActivityQuery {
                request: dq_query::segments::DailyActivityRequest {
                    subject: target.subject.clone(),
                    from: utc(from),
                    to: utc(to),
                    mechanism: dq_query::segments::Mechanism::IgnitionDetection,
                    config: None,
                    timezone: Some(DAILY_ZONE.into()),
                },
                signal_requests: Vec::new(),
                event_names: Vec::new(),
            };
            let days = engine.daily_activity(&q, Utc::now())?;
            Answer::Days(
                days.iter()
                    .map(|d| {
                        (
                            d.day.start.timestamp_micros(),
                            d.segment_count as i64,
                            d.duration_seconds,
                        )
                    })
                    .collect(),
            )
        }
        other => bail!("{} is not answered by the engine alone", other.name()),
    })
}

/// The warm samples of one statement of the floor.
struct FloorTiming {
    statement: &'static str,
    warm: Vec<Duration>,
}

/// Rows in memory and the timings of [`statement_floor`].
struct Floor {
    rows: i64,
    timings: Vec<FloorTiming>,
}

/// The floor under the 7-day read: its statement run by DuckDB with its input already in memory
/// — a temp table holding the rows of the files the direct read opens (the subject's bucket over
/// the window's days) — so no catalog lookup, file read, HTTP, GraphQL or auth is left. Timed as
/// dq's statement and as the smallest statement with the same answer (R1 dedup, hourly AVG,
/// ordered); both answers must equal the engine's.
fn statement_floor(t: &TestLake, target: &Target, sampling: &Sampling) -> anyhow::Result<Floor> {
    let lake = t.open()?;
    let conn = lake.connect()?;
    let req = target.request(Case::Week);
    let expected = dq_query::Engine::new(t.open()?)
        .aggregate(&req)?
        .into_iter()
        .map(|b| (b.timestamp_us, b.floats.get(&0).copied()))
        .collect();
    let expected = Answer::Buckets(expected);

    let (from, to) = target.week;
    let first_day = from - from.rem_euclid(DAY_US);
    let end_day = (to - 1) - (to - 1).rem_euclid(DAY_US) + DAY_US;
    conn.execute_batch(&format!(
        "CREATE TEMP TABLE floor_rows AS SELECT * FROM lake.signals \
         WHERE subject_bucket = {} AND \"timestamp\" >= {} AND \"timestamp\" < {}",
        dq_cloudevent::subject_bucket(&target.subject),
        timestamptz(first_day),
        timestamptz(end_day),
    ))?;
    let rows: i64 = conn.query_row("SELECT count(*) FROM floor_rows", [], |r| r.get(0))?;

    let dq = dq_query::aggregate::aggregate_sql(&req)?.over("floor_rows");
    let minimal = format!(
        "SELECT bucket, avg(v) FROM ( \
           SELECT ((epoch_us(\"timestamp\") - {from}) // {HOUR_US}) * {HOUR_US} + {from} AS bucket, \
                  arg_min(value_number, cloud_event_id) AS v \
           FROM floor_rows \
           WHERE subject = ? AND name = '{SIGNAL}' AND \"timestamp\" >= {} AND \"timestamp\" < {} \
           GROUP BY subject, name, \"timestamp\") \
         GROUP BY bucket ORDER BY bucket",
        timestamptz(from),
        timestamptz(to),
    );
    // Prepared per run, as the engine prepares every request's statement.
    let run = |sql: &str, value: usize| -> anyhow::Result<(Duration, Answer)> {
        let started = Instant::now();
        let mut stmt = conn.prepare(sql)?;
        let buckets = stmt
            .query_map([&target.subject], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, Option<f64>>(value)?))
            })?
            .collect::<duckdb::Result<Vec<_>>>()?;
        Ok((started.elapsed(), Answer::Buckets(buckets)))
    };
    let mut timings = Vec::new();
    for (statement, sql, value) in [
        ("dq's statement", dq.as_str(), 3),
        ("smallest equal statement", minimal.as_str(), 1),
    ] {
        let (_, answer) = run(sql, value)?;
        ensure!(
            answer.matches(&expected),
            "floor: {statement} answered {} where the engine answered {}",
            answer.size(),
            expected.size()
        );
        for _ in 0..sampling.warmup {
            run(sql, value)?;
        }
        let started = Instant::now();
        let mut warm = Vec::new();
        while sampling.more(warm.len(), started.elapsed()) {
            warm.push(run(sql, value)?.0);
        }
        eprintln!(
            "floor {statement:<26} {rows} rows in memory, warm p50 {} / p95 {} ms",
            ms(percentile(&warm, 50.0)),
            ms(percentile(&warm, 95.0)),
        );
        timings.push(FloorTiming { statement, warm });
    }
    Ok(Floor { rows, timings })
}

fn events_day(target: &Target) -> String {
    DateTime::<Utc>::from_timestamp_micros(target.day.0)
        .unwrap_or_default()
        .format("%Y-%m-%d")
        .to_string()
}

/// The queried vehicle — the first of the fleet whose data has an ignition signal, so that the
/// segment cases have something to detect — its windows and its busiest day.
pub(crate) fn target(t: &TestLake, fleet: &Fleet) -> anyhow::Result<(Target, i64)> {
    let lake = t.open()?;
    let conn = lake.connect()?;
    let with_ignition: std::collections::HashSet<String> = {
        let mut stmt = conn.prepare(
            "SELECT DISTINCT subject FROM lake.signals WHERE name = ? AND value_number = 1",
        )?;
        let rows = stmt.query_map([dq_query::segments::source::IGNITION_SIGNAL], |r| r.get(0))?;
        rows.collect::<Result<_, _>>()?
    };
    let info = fleet
        .vehicles()
        .iter()
        .find(|v| with_ignition.contains(&v.subject))
        .context("no vehicle of the fleet reports isIgnitionOn")?;
    let (start, end) = (
        fleet.start().timestamp_micros(),
        fleet.end().timestamp_micros(),
    );
    let week_from = (end - 7 * DAY_US).max(start);
    let vehicle_rows: i64 = conn.query_row(
        "SELECT count(*) FROM lake.signals WHERE subject = ?",
        [&info.subject],
        |r| r.get(0),
    )?;
    let day: i64 = conn
        .query_row(
            &format!(
                "SELECT (epoch_us(\"time\") // {DAY_US}) * {DAY_US} AS d FROM lake.raw_events \
                 WHERE subject = ? GROUP BY d ORDER BY count(*) DESC, d LIMIT 1"
            ),
            [&info.subject],
            |r| r.get(0),
        )
        .context("the queried vehicle's busiest day")?;
    // The last day is the one holding the horizon's last instant; the first is 30 days before.
    let last_day = end - 1;
    Ok((
        Target {
            subject: info.subject.clone(),
            vendor: info.vendor.name(),
            week: (week_from, end),
            month: (start, end),
            day: (day, day + DAY_US),
            days: (last_day - (DAILY_DAYS - 1) * DAY_US, last_day),
        },
        vehicle_rows,
    ))
}

pub(crate) struct Bench<'a> {
    t: &'a TestLake,
    target: &'a Target,
    signer: &'a DevSigner,
    graphql_token: String,
    grpc_bearer: String,
}

/// One opened read path: its own DuckDB instance (and server and client when served).
pub(crate) enum Instance {
    Graphql {
        client: reqwest::Client,
        url: String,
        server: Server,
    },
    Grpc {
        client: FetchServiceClient<Channel>,
        server: Server,
    },
    Sql {
        engine: dq_query::Engine,
        db: Arc<dq_rawquery::Db>,
        payloads: dq_rawquery::Payloads,
    },
}

/// A local server task and its shutdown signal.
pub(crate) struct Server {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Server {
    async fn stop(self) {
        let _ = self.stop.send(());
        let abort = self.task.abort_handle();
        if tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .is_err()
        {
            abort.abort();
        }
    }
}

impl<'a> Bench<'a> {
    /// A bench on `t` asking about `target`, with tokens minted by `signer`.
    pub(crate) fn new(
        t: &'a TestLake,
        target: &'a Target,
        signer: &'a DevSigner,
    ) -> anyhow::Result<Bench<'a>> {
        let mint = |claims: &DevClaims| signer.mint(claims).map_err(|e| anyhow!("mint: {e}"));
        Ok(Bench {
            t,
            target,
            signer,
            graphql_token: mint(&DevClaims::vehicle(
                &target.subject,
                &[
                    Permission::GetNonLocationHistory,
                    Permission::GetLocationHistory,
                    Permission::GetApproximateLocation,
                ],
            ))?,
            grpc_bearer: format!(
                "Bearer {}",
                mint(&DevClaims::vehicle(
                    &target.subject,
                    &[Permission::GetRawData]
                ))?
            ),
        })
    }

    /// The GraphQL token (read permissions of the target vehicle).
    pub(crate) fn graphql_token(&self) -> &str {
        &self.graphql_token
    }

    /// The signer's JWKS document.
    pub(crate) fn signer_jwks(&self) -> String {
        self.signer.jwks_json()
    }

    /// One `ListCloudEvents` of the target's busiest day against a FetchService on `port`
    /// (a new connection); fails unless events come back.
    pub(crate) async fn grpc_probe(&self, port: u16) -> anyhow::Result<()> {
        let mut client = FetchServiceClient::connect(format!("http://127.0.0.1:{port}"))
            .await?
            .max_decoding_message_size(dq_fetch::server::MAX_MESSAGE_BYTES);
        let mut req = tonic::Request::new(ListCloudEventsRequest {
            options: Some(self.search_options(Case::ListEvents)),
            limit: LIST_LIMIT,
            advanced_options: None,
        });
        req.metadata_mut()
            .insert("authorization", self.grpc_bearer.parse()?);
        let events = client
            .list_cloud_events(req)
            .await?
            .into_inner()
            .cloud_events;
        ensure!(!events.is_empty(), "ListCloudEvents returned no events");
        Ok(())
    }

    /// The GraphQL document of `case`, public for the function cold-start probe.
    pub(crate) fn graphql_document(&self, case: Case) -> String {
        self.document(case)
    }

    /// Opens a fresh instance of `path` (a new DuckDB instance on the lake).
    pub(crate) async fn open(&self, path: Path) -> anyhow::Result<Instance> {
        let lake = self.t.open()?;
        let validator = || {
            self.signer
                .validator()
                .map_err(|e| anyhow!("validator: {e}"))
        };
        let listener = || tokio::net::TcpListener::bind("127.0.0.1:0");
        Ok(match path {
            Path::Sql => {
                let (engine, db) = dq_graphql::http::share_lake(lake);
                Instance::Sql {
                    engine,
                    db,
                    payloads: dq_rawquery::Payloads::new(None),
                }
            }
            Path::Graphql => {
                // As the function's init: the lake, then every table's file listing.
                let (engine, db) = dq_graphql::http::share_lake(lake);
                dq_graphql::http::preload(&engine, &db);
                let state = dq_graphql::AppState::new(
                    dq_graphql::Dialect::Dq,
                    dq_graphql::DialectSettings::default(),
                    Arc::new(engine),
                    Some(validator()?),
                    dq_graphql::Limits::default(),
                )
                .map_err(|e| anyhow!("{e}"))?
                .with_cloud_events(dq_graphql::cloud_events::CloudEvents {
                    db,
                    payloads: dq_rawquery::Payloads::new(None),
                    store: None,
                    links: None,
                });
                let listener = listener().await?;
                let addr = listener.local_addr()?;
                let (stop, stopped) = oneshot::channel::<()>();
                let app = dq_graphql::router(Arc::new(state));
                let task = tokio::spawn(async move {
                    let _ = axum::serve(listener, app)
                        .with_graceful_shutdown(async {
                            let _ = stopped.await;
                        })
                        .await;
                });
                let client = reqwest::Client::builder()
                    .pool_max_idle_per_host(1)
                    .build()?;
                // Opens the keep-alive connection (the playground route touches no engine).
                client
                    .get(format!("http://{addr}/"))
                    .send()
                    .await?
                    .bytes()
                    .await?;
                Instance::Graphql {
                    client,
                    url: format!("http://{addr}/query"),
                    server: Server { stop, task },
                }
            }
            Path::Grpc => {
                // As the function's init: the lake, then `raw_events`' file listing.
                let db = Arc::new(dq_rawquery::Db::new(lake));
                db.preload_listing();
                let api = dq_fetch::FetchApi::new(
                    db,
                    dq_rawquery::Payloads::new(None),
                    GrpcAuthenticator::new(Some(validator()?), false),
                );
                let listener = listener().await?;
                let addr = listener.local_addr()?;
                let (stop, stopped) = oneshot::channel::<()>();
                let router = dq_fetch::server::router(api);
                // As `dq_fetch::server::serve` (HTTP/2 and HTTP/1.1 on the same router), but with
                // TCP_NODELAY on the accepted sockets: `serve` leaves Nagle on, which holds each
                // response's trailers back until the client's delayed ACK (~40 ms a call).
                let incoming =
                    tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
                let task = tokio::spawn(async move {
                    let _ = tonic::transport::Server::builder()
                        .accept_http1(true)
                        .add_routes(tonic::service::Routes::from(router))
                        .serve_with_incoming_shutdown(incoming, async {
                            let _ = stopped.await;
                        })
                        .await;
                });
                let client = FetchServiceClient::connect(format!("http://{addr}"))
                    .await?
                    .max_decoding_message_size(dq_fetch::server::MAX_MESSAGE_BYTES);
                Instance::Grpc {
                    client,
                    server: Server { stop, task },
                }
            }
        })
    }

    /// The GraphQL document of `case`.
    fn document(&self, case: Case) -> String {
        let s = &self.target.subject;
        match case {
            Case::Latest => format!(
                "{{ signalsLatest(subject: \"{s}\") {{ lastSeen {SIGNAL} {{ timestamp value }} \
                 currentLocationCoordinates {{ timestamp value {{ latitude longitude hdop }} }} }} }}"
            ),
            Case::Segments => {
                let (from, to) = self.target.month;
                format!(
                    "{{ segments(subject: \"{s}\", from: \"{}\", to: \"{}\", \
                     mechanism: IGNITION_DETECTION) {{ start {{ timestamp }} end {{ timestamp }} \
                     duration isOngoing signals {{ name agg value }} }} }}",
                    dq_graphql::scalars::format_time_us(from),
                    dq_graphql::scalars::format_time_us(to),
                )
            }
            Case::Daily => {
                let (from, to) = self.target.days;
                format!(
                    "{{ dailyActivity(subject: \"{s}\", from: \"{}\", to: \"{}\", \
                     mechanism: IGNITION_DETECTION, timezone: \"{DAILY_ZONE}\") \
                     {{ start {{ timestamp }} segmentCount duration signals {{ name agg value }} }} }}",
                    dq_graphql::scalars::format_time_us(from),
                    dq_graphql::scalars::format_time_us(to),
                )
            }
            _ => {
                let (from, to) = self.target.window(case);
                format!(
                    "{{ signals(subject: \"{s}\", interval: \"1h\", from: \"{}\", to: \"{}\") \
                     {{ timestamp {SIGNAL}(agg: AVG) }} }}",
                    dq_graphql::scalars::format_time_us(from),
                    dq_graphql::scalars::format_time_us(to),
                )
            }
        }
    }

    fn search_options(&self, case: Case) -> SearchOptions {
        let ts = |us: i64| prost_types::Timestamp {
            seconds: us.div_euclid(1_000_000),
            nanos: (us.rem_euclid(1_000_000) * 1000) as i32,
        };
        match case {
            // Bounds are strict: one µs before midnight keeps events stamped at midnight.
            Case::ListEvents => SearchOptions {
                subject: Some(self.target.subject.clone()),
                after: Some(ts(self.target.day.0 - 1)),
                before: Some(ts(self.target.day.1)),
                ..SearchOptions::default()
            },
            _ => SearchOptions {
                subject: Some(self.target.subject.clone()),
                ..SearchOptions::default()
            },
        }
    }

    fn filter(&self, case: Case) -> dq_rawquery::Filter {
        let at = |us: i64| DateTime::<Utc>::from_timestamp_micros(us);
        let subject = dq_rawquery::StringFilter::eq(self.target.subject.clone());
        match case {
            Case::ListEvents => dq_rawquery::Filter {
                after: at(self.target.day.0 - 1),
                before: at(self.target.day.1),
                subject,
                ..dq_rawquery::Filter::default()
            },
            _ => dq_rawquery::Filter {
                subject,
                ..dq_rawquery::Filter::default()
            },
        }
    }

    /// One request of `case` on `inst`: its latency (request out → full response in) and the
    /// normalized answer (parsed after the clock stops).
    pub(crate) async fn request(
        &self,
        inst: &mut Instance,
        case: Case,
    ) -> anyhow::Result<(Duration, Answer)> {
        match inst {
            Instance::Graphql { client, url, .. } => {
                let body = serde_json::json!({ "query": self.document(case) }).to_string();
                let started = Instant::now();
                let resp = client
                    .post(url.as_str())
                    .bearer_auth(&self.graphql_token)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await?;
                let status = resp.status();
                let bytes = resp.bytes().await?;
                let took = started.elapsed();
                let json: Value = serde_json::from_slice(&bytes).with_context(|| {
                    format!("GraphQL answer: {}", String::from_utf8_lossy(&bytes))
                })?;
                ensure!(
                    status.is_success() && json.get("errors").is_none(),
                    "GraphQL {case:?} failed: HTTP {status}: {json}"
                );
                Ok((took, graphql_answer(case, &json["data"])?))
            }
            Instance::Grpc { client, .. } => {
                let bearer: tonic::metadata::MetadataValue<_> = self.grpc_bearer.parse()?;
                let options = Some(self.search_options(case));
                let started = Instant::now();
                let events = if case == Case::ListEvents {
                    let mut req = tonic::Request::new(ListCloudEventsRequest {
                        options,
                        limit: LIST_LIMIT,
                        advanced_options: None,
                    });
                    req.metadata_mut().insert("authorization", bearer);
                    client
                        .list_cloud_events(req)
                        .await?
                        .into_inner()
                        .cloud_events
                } else {
                    let mut req = tonic::Request::new(GetLatestCloudEventRequest {
                        options,
                        advanced_options: None,
                    });
                    req.metadata_mut().insert("authorization", bearer);
                    let event = client.get_latest_cloud_event(req).await?.into_inner();
                    event.cloud_event.into_iter().collect()
                };
                let took = started.elapsed();
                let events = events
                    .into_iter()
                    .map(|e| {
                        let h = e.header.unwrap_or_default();
                        (h.id, h.r#type, e.data, e.data_base64)
                    })
                    .collect();
                Ok((took, Answer::Events(events)))
            }
            Instance::Sql {
                engine,
                db,
                payloads,
            } => {
                let started = Instant::now();
                let answer = match case {
                    Case::Latest => {
                        let rows = engine.latest_rows(&self.target.subject, None, None)?;
                        let row = |name: &str| rows.iter().find(|r| r.name == name);
                        Answer::Latest {
                            last_seen: dq_query::latest::last_seen(&rows),
                            speed: row(SIGNAL).map(|r| (r.timestamp_us, r.value_number)),
                            location: row(dq_graphql::schema::COORDINATES)
                                .map(|r| (r.loc_ts_us, r.location.latitude, r.location.longitude)),
                        }
                    }
                    Case::Week | Case::Month | Case::Segments | Case::Daily => {
                        engine_answer(engine, case, self.target)?
                    }
                    Case::Probe => {
                        engine.probe()?;
                        Answer::Probe
                    }
                    Case::ListEvents | Case::LatestEvent => {
                        let filter = self.filter(case);
                        // The served path's reads: rows with their payloads in one statement.
                        let rows = if case == Case::ListEvents {
                            db.read(move |r| r.search_rows(&filter, LIST_LIMIT as usize, true))
                                .await?
                        } else {
                            vec![db.read(move |r| r.latest_row(&filter, true)).await?]
                        };
                        let events = payloads.events(rows).await?;
                        Answer::Events(
                            events
                                .into_iter()
                                .map(|e| (e.header.id, e.header.event_type, e.data, e.data_base64))
                                .collect(),
                        )
                    }
                };
                Ok((started.elapsed(), answer))
            }
        }
    }

    pub(crate) async fn close(inst: Instance) {
        match inst {
            Instance::Graphql { client, server, .. } => {
                drop(client);
                server.stop().await;
            }
            Instance::Grpc { client, server } => {
                drop(client);
                server.stop().await;
            }
            Instance::Sql { .. } => {}
        }
    }

    /// Every case once on each path; the served answers must equal the bare ones.
    async fn verify(&self, catalog: &str) -> anyhow::Result<()> {
        let mut sql = self.open(Path::Sql).await?;
        let mut expected = Vec::new();
        for case in Case::ALL {
            let (_, answer) = self.request(&mut sql, case).await?;
            ensure!(
                !answer.is_empty(),
                "[{catalog}] {} is empty for {}: pick a bigger fleet",
                case.name(),
                self.target.subject
            );
            expected.push((case, answer));
        }
        Self::close(sql).await;
        for served in [Path::Graphql, Path::Grpc] {
            let mut inst = self.open(served).await?;
            for (case, want) in expected.iter().filter(|(c, _)| c.served() == Some(served)) {
                let (_, got) = self.request(&mut inst, *case).await?;
                if !got.matches(want) {
                    Self::close(inst).await;
                    bail!(
                        "[{catalog}] {} through {} differs from the bare SQL answer:\n  served: {got:?}\n  bare:   {want:?}",
                        case.name(),
                        served.label()
                    );
                }
            }
            Self::close(inst).await;
        }
        eprintln!(
            "[{catalog}] served answers equal the bare SQL answers ({})",
            expected
                .iter()
                .map(|(c, a)| format!("{}: {}", c.name(), a.size()))
                .collect::<Vec<_>>()
                .join(", ")
        );
        Ok(())
    }

    /// Cold samples (each on a fresh instance), then warm-up and warm samples on the last one.
    pub(crate) async fn time(
        &self,
        catalog: &str,
        case: Case,
        path: Path,
        sampling: &Sampling,
    ) -> anyhow::Result<Timing> {
        let (mut open, mut cold, mut warm) = (Vec::new(), Vec::new(), Vec::new());
        let mut answer = String::new();
        let mut last = None;
        for i in 0..sampling.cold_runs {
            let started = Instant::now();
            let mut inst = self.open(path).await?;
            open.push(started.elapsed());
            let (took, a) = self.request(&mut inst, case).await?;
            cold.push(took);
            answer = a.size();
            if i + 1 == sampling.cold_runs {
                last = Some(inst);
            } else {
                Self::close(inst).await;
            }
        }
        let mut inst = last.context("no instance")?;
        for _ in 0..sampling.warmup {
            self.request(&mut inst, case).await?;
        }
        let started = Instant::now();
        while sampling.more(warm.len(), started.elapsed()) {
            warm.push(self.request(&mut inst, case).await?.0);
        }
        Self::close(inst).await;
        eprintln!(
            "[{catalog}] {:<20} {:<18} open {} ms, cold p50 {} ms, warm p50 {} / p95 {} ms",
            case.name(),
            path.label(),
            ms(percentile(&open, 50.0)),
            ms(percentile(&cold, 50.0)),
            ms(percentile(&warm, 50.0)),
            ms(percentile(&warm, 95.0)),
        );
        Ok(Timing {
            case,
            path,
            answer,
            open,
            cold,
            warm,
        })
    }
}

pub(crate) fn utc(us: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp_micros(us).unwrap_or_default()
}

/// What the segment cases compare: bounds, duration and the ongoing flag.
pub(crate) fn segment_key(s: &dq_query::segments::Segment) -> (i64, Option<i64>, i64, bool) {
    (
        s.start.timestamp_micros(),
        s.end.map(|e| e.timestamp_micros()),
        s.duration_seconds,
        s.is_ongoing,
    )
}

fn time_us(v: &Value) -> anyhow::Result<Option<i64>> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(
            dq_graphql::scalars::parse_time_us(s).with_context(|| format!("bad Time {s}"))?,
        )),
        other => bail!("bad Time {other}"),
    }
}

fn float(v: &Value) -> anyhow::Result<f64> {
    v.as_f64().with_context(|| format!("not a number: {v}"))
}

fn list(v: &Value) -> anyhow::Result<Vec<Value>> {
    match v {
        Value::Null => Ok(Vec::new()),
        Value::Array(rows) => Ok(rows.clone()),
        other => bail!("not a list: {other}"),
    }
}

/// The GraphQL `data` of `case`, normalized.
fn graphql_answer(case: Case, data: &Value) -> anyhow::Result<Answer> {
    Ok(match case {
        Case::Latest => {
            let latest = &data["signalsLatest"];
            let signal = &latest[SIGNAL];
            let loc = &latest["currentLocationCoordinates"];
            Answer::Latest {
                last_seen: time_us(&latest["lastSeen"])?,
                speed: match signal {
                    Value::Null => None,
                    s => Some((
                        time_us(&s["timestamp"])?.context("timestamp")?,
                        float(&s["value"])?,
                    )),
                },
                location: match loc {
                    Value::Null => None,
                    l => Some((
                        time_us(&l["timestamp"])?.context("timestamp")?,
                        float(&l["value"]["latitude"])?,
                        float(&l["value"]["longitude"])?,
                    )),
                },
            }
        }
        Case::Segments => Answer::Segments(
            list(&data["segments"])?
                .iter()
                .map(|s| {
                    Ok((
                        time_us(&s["start"]["timestamp"])?.context("start")?,
                        match &s["end"] {
                            Value::Null => None,
                            e => time_us(&e["timestamp"])?,
                        },
                        s["duration"].as_i64().context("duration")?,
                        s["isOngoing"].as_bool().context("isOngoing")?,
                    ))
                })
                .collect::<anyhow::Result<_>>()?,
        ),
        Case::Daily => Answer::Days(
            list(&data["dailyActivity"])?
                .iter()
                .map(|d| {
                    Ok((
                        time_us(&d["start"]["timestamp"])?.context("start")?,
                        d["segmentCount"].as_i64().context("segmentCount")?,
                        d["duration"].as_i64().context("duration")?,
                    ))
                })
                .collect::<anyhow::Result<_>>()?,
        ),
        _ => {
            let rows = match &data["signals"] {
                Value::Null => Vec::new(),
                Value::Array(rows) => rows.clone(),
                other => bail!("signals: {other}"),
            };
            Answer::Buckets(
                rows.iter()
                    .map(|r| {
                        let ts = time_us(&r["timestamp"])?.context("timestamp")?;
                        let v = match &r[SIGNAL] {
                            Value::Null => None,
                            v => Some(float(v)?),
                        };
                        Ok((ts, v))
                    })
                    .collect::<anyhow::Result<_>>()?,
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&samples, 50.0), 50.0);
        assert_eq!(percentile(&samples, 95.0), 95.0);
        assert_eq!(percentile(&samples, 99.0), 99.0);
        assert_eq!(percentile(&samples[..1], 95.0), 1.0);
        assert_eq!(percentile(&samples[..5], 95.0), 5.0);
    }

    #[test]
    fn answers_match_up_to_float_order() {
        let a = Answer::Buckets(vec![(0, Some(0.1 + 0.2)), (1, None)]);
        let b = Answer::Buckets(vec![(0, Some(0.3)), (1, None)]);
        assert!(a.matches(&b));
        assert!(!a.matches(&Answer::Buckets(vec![(0, Some(0.3))])));
        assert!(!a.matches(&Answer::Buckets(vec![(0, Some(0.31)), (1, None)])));
    }
}
