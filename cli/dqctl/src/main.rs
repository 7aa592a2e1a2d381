//! `dqctl`, the dq operator CLI. Each subcommand lives in its own module; `main` only parses
//! arguments and dispatches.

mod decode;
mod reconcile;
mod seed;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "dqctl", version, about = "dq operator tools")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Decode one stored-form CloudEvent into signals and events.
    Decode(decode::Args),
    /// Write a synthetic fleet into a lake the way din does (the din simulator).
    Seed(seed::Args),
    /// Send the same GraphQL documents to a reference and a candidate deployment and compare
    /// the answers canonically (the cutover gate).
    Reconcile(reconcile::Args),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Decode(args) => decode::run(&args),
        Command::Seed(args) => seed::run(&args),
        Command::Reconcile(args) => reconcile::run(&args),
    }
}
