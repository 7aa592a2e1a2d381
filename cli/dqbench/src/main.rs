//! `dq-bench`: dq's benchmark runner. Each case generates its data with the din simulator, times
//! the real code path beside the engine floor measured in the same run, and rewrites its own
//! section of `BENCHMARKS.md`.
//!
//! Built in the dev profile on purpose: its dependencies (DuckDB, arrow) and dq's hot crates are
//! compiled at opt-level 3 there (root `Cargo.toml`), and it shares the cached DuckDB build
//! instead of needing a second, release-profile one.
// A benchmark run: an index out of range is a bug to stop on, not a request to answer.
#![allow(clippy::indexing_slicing)]

mod clickhouse;
mod cores;
mod dataset;
mod decode;
mod fileread;
mod listing;
mod materializer;
mod query;
mod report;
mod shards;
mod suite;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "dq-bench",
    about = "dq benchmarks; results go to BENCHMARKS.md"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Decode throughput on one core (default status and Ruptela, module alone and full path).
    Decode,
    /// Raw events/s through the materializer (feed → decode → write → commit) beside the floor.
    Materializer(materializer::Args),
    /// Read latency (cold and warm) of signals, signalsLatest and FetchService cloud events,
    /// through GraphQL HTTP / gRPC and as the bare SQL, on the file and PostgreSQL catalogs.
    Query(query::Args),
    /// The direct reads' file listing refreshed after one commit on a catalog with 100,000
    /// data files, beside a whole load, DuckLake's own listing, and a new instance's head and
    /// one bucket's files.
    Listing(listing::Args),
    /// Raw events/s of 1 and 2 materializer shards draining one PostgreSQL lake at once.
    Shards(shards::Args),
    /// Every case in one run on one dataset, beside the DuckDB floor and ClickHouse (chDB),
    /// as ratios; writes BENCHMARKS.md and BENCHMARKS.json.
    All(suite::Args),
}

fn main() -> ExitCode {
    // `RUST_LOG=dq_materialize=debug` shows each statement's time (on stderr, apart from the
    // report); without it the run stays quiet.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let result = match Cli::parse().command {
        Command::Decode => decode::run(),
        Command::Materializer(args) => materializer::run(&args),
        Command::Query(args) => query::run(&args),
        Command::All(args) => suite::run(&args),
        Command::Listing(args) => listing::run(&args),
        Command::Shards(args) => shards::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dq-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}
