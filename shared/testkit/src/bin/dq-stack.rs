//! `dq-stack`: the throwaway PostgreSQL cluster and moto server of the Rust tests, for scripts
//! (`tests/invoke/invoke.py` runs the Lambda functions against them as `sam local` would against a
//! host's database and S3 endpoint). Prints one JSON line with the catalog DSN and the S3 endpoint
//! (a bucket `lake` exists), keeps both until its standard input closes (the caller exits or
//! closes the pipe), then removes them. Their watchdogs remove them too if this process dies.

use std::io::Read;
use std::process::ExitCode;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dq-stack: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> dq_testkit::Result<()> {
    let postgres = dq_testkit::Postgres::start()?;
    let dsn = postgres.create_database("lake")?;
    let moto = dq_testkit::Moto::start()?;
    moto.create_bucket("lake")?;
    println!(
        "{{\"catalog_dsn\": \"{}\", \"s3_endpoint\": \"{}\", \"access_key\": \"{}\", \"secret_key\": \"{}\", \"region\": \"{}\"}}",
        dsn,
        moto.endpoint(),
        moto.access_key(),
        moto.secret_key(),
        moto.region()
    );
    // Holds both servers until the caller is done with them.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    Ok(())
}
