//! A bounded load test on loopback: N GraphQL clients and N FetchService clients for a fixed
//! time against local servers on one lake, while the din simulator writes another day and the
//! materializer drains it. The GraphQL server runs with a global concurrency limit below the
//! client count, so some requests are refused with 429 on purpose; every other answer must be a
//! success. Reports p50/p99 per protocol.
//!
//! `DQ_LOAD_SECONDS` (default 6) and `DQ_LOAD_CLIENTS` (default 4 per protocol) size the run;
//! `make reliability` runs a long variant.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::TimeDelta;
use dq_auth::dev::{DevClaims, DevSigner};
use dq_auth::{GrpcAuthenticator, Permission};
use dq_dinsim::{SeedOptions, Writer};
use dq_fleet::{Fleet, FleetConfig};
use dq_lake::testing::{Backend, TestLake};
use dq_proto::grpc::fetch_service_client::FetchServiceClient;
use dq_proto::grpc::{ListCloudEventsRequest, SearchOptions};
use serde_json::{json, Value};

const ISSUER: &str = "https://load.dq.test";

fn env_or(key: &str, default: u64) -> u64 {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(samples: &mut [Duration], p: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    samples.sort();
    let rank = ((p / 100.0) * samples.len() as f64).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1].as_secs_f64() * 1e3
}

#[derive(Default)]
struct Tally {
    ok: Vec<Duration>,
    refused: u64,
    errors: Vec<String>,
}

impl Tally {
    /// The clients' tallies summed.
    async fn join(tasks: Vec<tokio::task::JoinHandle<Tally>>) -> Tally {
        let mut all = Tally::default();
        for task in tasks {
            let t = task.await.unwrap();
            all.ok.extend(t.ok);
            all.refused += t.refused;
            all.errors.extend(t.errors);
        }
        all
    }
}

#[test]
fn load_while_the_materializer_runs() {
    let seconds = env_or("DQ_LOAD_SECONDS", 6);
    let clients = env_or("DQ_LOAD_CLIENTS", 4) as usize;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let t = TestLake::new(Backend::Postgres);
    let day1 = FleetConfig {
        vehicles: 4,
        days: 1,
        ..FleetConfig::default()
    };
    let day2 = FleetConfig {
        start: day1.start + TimeDelta::days(1),
        ..day1.clone()
    };
    let m = {
        let lake = dq_dinsim::testing::open_din_lake(&t);
        let opts = SeedOptions {
            fleet: day1.clone(),
            ..SeedOptions::default()
        };
        rt.block_on(dq_dinsim::seed(&Writer::new(&lake, None), &opts, |_| {}))
            .unwrap();
        dq_materialize::Materializer::builder(lake)
            .emf(false)
            .build()
            .unwrap()
    };
    while !rt.block_on(m.drain(None, None)).unwrap().caught_up {}

    let vehicle = Fleet::new(day1.clone()).unwrap().vehicles()[0]
        .subject
        .clone();
    let signer = DevSigner::generate(ISSUER).unwrap();
    let permissions = [
        Permission::GetNonLocationHistory,
        Permission::GetLocationHistory,
        Permission::GetApproximateLocation,
        Permission::GetRawData,
    ];
    let token = signer
        .mint(&DevClaims::vehicle(&vehicle, &permissions))
        .unwrap();

    // The servers, each on its own DuckDB instance as in Lambda.
    let limit = clients.saturating_sub(1).max(1);
    let (graphql_addr, grpc_addr) = rt.block_on(async {
        let state = dq_graphql::testing::state(
            dq_graphql::Dialect::Dq,
            t.open().unwrap(),
            signer.validator().unwrap(),
            dq_graphql::Limits {
                max_concurrent: limit,
                ..dq_graphql::Limits::default()
            },
        )
        .unwrap();
        let graphql_addr = dq_graphql::testing::serve(dq_graphql::router(Arc::new(state)))
            .await
            .unwrap();

        let api = dq_fetch::FetchApi::new(
            Arc::new(dq_rawquery::Db::new(t.open().unwrap())),
            dq_rawquery::Payloads::new(None),
            GrpcAuthenticator::new(Some(signer.validator().unwrap()), false),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let grpc_addr = listener.local_addr().unwrap();
        tokio::spawn(dq_fetch::server::serve(
            dq_fetch::server::router(api),
            listener,
            std::future::pending(),
        ));
        (graphql_addr, grpc_addr)
    });

    // din writes a second day while the materializer drains, for the whole run.
    let writing = Arc::new(AtomicBool::new(true));
    let (passes, materializer_errors) = std::thread::scope(|scope| {
        let writer = {
            let writing = Arc::clone(&writing);
            let t = &t;
            let day2 = day2.clone();
            scope.spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                let lake = t.open().unwrap();
                let opts = SeedOptions {
                    fleet: day2,
                    ..SeedOptions::default()
                };
                rt.block_on(dq_dinsim::seed(&Writer::new(&lake, None), &opts, |_| {}))
                    .unwrap();
                writing.store(false, Ordering::SeqCst);
            })
        };
        let drainer = {
            let writing = Arc::clone(&writing);
            scope.spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                let (mut passes, mut errors) = (0u64, Vec::new());
                let stop = Instant::now() + Duration::from_secs(seconds);
                while Instant::now() < stop || writing.load(Ordering::SeqCst) {
                    match rt.block_on(m.drain(None, None)) {
                        Ok(_) => passes += 1,
                        Err(e) => errors.push(e.to_string()),
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                while !rt.block_on(m.drain(None, None)).unwrap().caught_up {}
                (passes, errors)
            })
        };

        let (graphql, grpc) = rt.block_on(async {
            let deadline = Instant::now() + Duration::from_secs(seconds);
            let query = json!({"query": format!(
                r#"{{ signalsLatest(subject: "{vehicle}") {{ lastSeen speed {{ value }} }} cloudEvents(subject: "{vehicle}", limit: 5) {{ header {{ id }} }} }}"#
            )})
            .to_string();
            let mut graphql_tasks = Vec::new();
            for _ in 0..clients {
                let (query, token) = (query.clone(), token.clone());
                graphql_tasks.push(tokio::spawn(async move {
                    let http = reqwest::Client::new();
                    let mut tally = Tally::default();
                    while Instant::now() < deadline {
                        let started = Instant::now();
                        let resp = http
                            .post(format!("http://{graphql_addr}/query"))
                            .bearer_auth(&token)
                            .header("content-type", "application/json")
                            .body(query.clone())
                            .send()
                            .await;
                        match resp {
                            Ok(r) if r.status() == 429 => {
                                assert!(r.headers().contains_key("retry-after"));
                                tally.refused += 1;
                            }
                            Ok(r) => {
                                let status = r.status();
                                let body: Value = r.json().await.unwrap_or(Value::Null);
                                if status == 200 && body.get("errors").is_none() {
                                    tally.ok.push(started.elapsed());
                                } else {
                                    tally.errors.push(format!("HTTP {status}: {body}"));
                                }
                            }
                            Err(e) => tally.errors.push(e.to_string()),
                        }
                    }
                    tally
                }));
            }
            let mut grpc_tasks = Vec::new();
            for _ in 0..clients {
                let (vehicle, bearer) = (vehicle.clone(), format!("Bearer {token}"));
                grpc_tasks.push(tokio::spawn(async move {
                    let mut client = FetchServiceClient::connect(format!("http://{grpc_addr}"))
                        .await
                        .unwrap();
                    let mut tally = Tally::default();
                    while Instant::now() < deadline {
                        let mut req = tonic::Request::new(ListCloudEventsRequest {
                            options: Some(SearchOptions {
                                subject: Some(vehicle.clone()),
                                ..SearchOptions::default()
                            }),
                            limit: 20,
                            advanced_options: None,
                        });
                        req.metadata_mut()
                            .insert("authorization", bearer.parse().unwrap());
                        let started = Instant::now();
                        match client.list_cloud_events(req).await {
                            Ok(r) if !r.get_ref().cloud_events.is_empty() => {
                                tally.ok.push(started.elapsed())
                            }
                            Ok(_) => tally.errors.push("no events".into()),
                            Err(s) if s.code() == tonic::Code::ResourceExhausted => {
                                tally.refused += 1
                            }
                            Err(s) => tally.errors.push(format!("{s}")),
                        }
                    }
                    tally
                }));
            }
            (Tally::join(graphql_tasks).await, Tally::join(grpc_tasks).await)
        });
        writer.join().unwrap();
        let (passes, errors) = drainer.join().unwrap();
        check(graphql, grpc, seconds, clients, limit, passes, &errors);
        (passes, errors)
    });
    assert!(materializer_errors.is_empty(), "{materializer_errors:?}");
    assert!(passes > 0);
}

fn check(
    mut graphql: Tally,
    mut grpc: Tally,
    seconds: u64,
    clients: usize,
    limit: usize,
    passes: u64,
    materializer_errors: &[String],
) {
    assert!(
        graphql.errors.is_empty(),
        "GraphQL errors: {:?}",
        &graphql.errors[..graphql.errors.len().min(5)]
    );
    assert!(
        grpc.errors.is_empty(),
        "gRPC errors: {:?}",
        &grpc.errors[..grpc.errors.len().min(5)]
    );
    assert!(!graphql.ok.is_empty() && !grpc.ok.is_empty());
    let figures = json!({
        "seconds": seconds,
        "clients_per_protocol": clients,
        "graphql_concurrency_limit": limit,
        "graphql": {
            "ok": graphql.ok.len(), "refused_429": graphql.refused, "errors": 0,
            "p50_ms": percentile(&mut graphql.ok, 50.0), "p99_ms": percentile(&mut graphql.ok, 99.0),
        },
        "grpc": {
            "ok": grpc.ok.len(), "refused": grpc.refused, "errors": 0,
            "p50_ms": percentile(&mut grpc.ok, 50.0), "p99_ms": percentile(&mut grpc.ok, 99.0),
        },
        "materializer_passes": passes,
        "materializer_errors": materializer_errors.len(),
    });
    dq_testkit::report_figures("load", &serde_json::to_string_pretty(&figures).unwrap());
}
