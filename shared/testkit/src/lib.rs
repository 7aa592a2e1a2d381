//! Test harness shared by every dq crate's tests (a dev-dependency only).
//!
//! It owns the real services that our tests run against instead of mocks:
//! - [`Postgres`]: a throwaway PostgreSQL cluster (`initdb` + `pg_ctl`) with a password-protected
//!   role `dq`, on a free 127.0.0.1 port; [`shared_postgres`] gives one cluster per test binary and
//!   [`Postgres::create_database`] an isolated database per test.
//! - [`Moto`]: a throwaway moto server for the S3 and DynamoDB APIs; [`shared_moto`] gives one per
//!   test binary.
//! - [`logs`]: captured log output and the no-secrets assertion of the fault tests.
//! - [`FaultProxy`]: an HTTP proxy to put in front of moto that answers 5xx, throttles or delays
//!   on demand (the fault tests' S3 and DynamoDB failures).
//! - Small helpers: [`free_port`], [`workspace_root`], [`unique_name`], and a minimal HTTP client
//!   in [`http`].
//!
//! It does not own fixtures, schemas or AWS SDK clients: each crate builds those in its own tests
//! from the DSNs, endpoint and credentials exposed here.
//!
//! # Requirements
//! - PostgreSQL 15 server binaries in `/usr/lib/postgresql/15/bin` (override with `DQ_PG_BIN`):
//!   `apt-get install -y postgresql`. As root, the server runs as `DQ_PG_USER` (default `nobody`)
//!   through `runuser`, because `initdb` refuses to run as root.
//! - A venv with `moto[server]` at `<workspace>/.venv` (override with `DQ_VENV`): `make venv`,
//!   which runs `scripts/venv.sh`.
//!
//! # Cleanup
//! Each instance lives in its own directory under `<temp>/dq-testkit/` and is torn down three ways:
//! by `Drop`; by a watchdog process that notices the test process is gone (the shared instances
//! sit in `static`s, which are never dropped, so this is how they end, also after `SIGKILL` or
//! Ctrl-C); and by a sweep, when a later test process starts its first instance, of every directory
//! whose owner process is dead.
//!
//! # Layout
//! - `postgres.rs`: [`Postgres`], [`shared_postgres`].
//! - `moto.rs`: [`Moto`], [`shared_moto`].
//! - `faultproxy.rs`: [`FaultProxy`], [`Fault`].
//! - `instance.rs`: instance directories, the watchdog and the sweep.
//! - [`http`]: one-shot HTTP/1.1 requests to local services.
//! - [`logs`]: log capture.
//! - `error.rs`: [`Error`], [`Result`].
//!
//! # Example
//! ```no_run
//! let pg = dq_testkit::shared_postgres();
//! let dsn = pg.create_database(&dq_testkit::unique_name("my_test")).unwrap();
//! // connect with `dsn` ...
//! let moto = dq_testkit::shared_moto();
//! moto.create_bucket(&dq_testkit::unique_name("bucket")).unwrap();
//! ```
#![warn(missing_docs)]
// Test support: a fixture that cannot be set up fails the test that asked for it.
#![allow(clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod error;
mod faultproxy;
pub mod http;
mod instance;
pub mod logs;
mod moto;
mod postgres;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

pub use error::{Error, Result};
pub use faultproxy::{Fault, FaultProxy};
pub use moto::{shared_moto, venv_dir, Moto, ACCESS_KEY, REGION, SECRET_KEY, VENV_ENV};
pub use postgres::{
    shared_postgres, Postgres, DEFAULT_PG_BIN, DEFAULT_PG_USER, PG_BIN_ENV, PG_USER_ENV,
};

/// Returns a TCP port on 127.0.0.1 that was free a moment ago.
///
/// The port is released before returning, so another process may take it; the services retry
/// with a new port when that happens.
pub fn free_port() -> Result<u16> {
    TcpListener::bind(("127.0.0.1", 0))
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|e| Error::io("bind 127.0.0.1:0 to find a free port", e))
}

/// Returns the workspace root: the nearest directory at or above `CARGO_MANIFEST_DIR` whose
/// `Cargo.toml` has a `[workspace]` table.
///
/// `CARGO_MANIFEST_DIR` is read at run time (cargo sets it when it runs tests); when it is unset or
/// leads to no workspace, the search starts from the current directory (binaries such as
/// `dq-bench` run from the checkout by `make`), then from this crate's own directory as it was at
/// build time — which may be another checkout sharing the target directory, since cargo reuses
/// path crates' builds across checkouts. Should that fail too (a test binary moved away from its sources), the result is the
/// build-time `shared/testkit/../..`, where the root is in this repository's layout.
pub fn workspace_root() -> PathBuf {
    let built_here = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::env::var_os("CARGO_MANIFEST_DIR")
        .and_then(|dir| find_workspace_root(Path::new(&dir)))
        .or_else(|| {
            std::env::current_dir()
                .ok()
                .and_then(|dir| find_workspace_root(&dir))
        })
        .or_else(|| find_workspace_root(built_here))
        .unwrap_or_else(|| built_here.join("..").join(".."))
}

/// Where the decode vectors live: `tests/vectors/` in this repository (copied from the vector
/// set the decoders are specified against, with its `index.json` manifest), or `DQ_VECTORS_DIR`
/// to run the same tests over another copy. The repository carries its own copy so a plain clone
/// tests without anything beside it.
pub fn vectors_dir() -> PathBuf {
    std::env::var_os(VECTORS_DIR_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("tests").join("vectors"))
}

/// The setting that points [`vectors_dir`] at another copy of the vectors.
pub const VECTORS_DIR_ENV: &str = "DQ_VECTORS_DIR";

/// One decode vector's text from [`vectors_dir`]; a missing file is a test failure that names it.
pub fn vector(name: &str) -> String {
    let path = vectors_dir().join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read decode vector {}: {e}", path.display()))
}

fn find_workspace_root(start: &Path) -> Option<PathBuf> {
    start.ancestors().find_map(|dir| {
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).ok()?;
        manifest
            .lines()
            .any(|line| line.trim() == "[workspace]")
            .then(|| dir.to_path_buf())
    })
}

/// A deterministic xorshift64* generator: the same generated inputs every run, no dependency
/// (the hostile-input tests).
pub struct XorShift(u64);

impl XorShift {
    /// A generator from `seed` (0 is replaced: xorshift would stay at 0).
    pub fn new(seed: u64) -> XorShift {
        XorShift(seed.max(1))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// One of `items` (which must not be empty).
    pub fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

/// Error texts grouped for a report: each distinct first line (cut at 160 characters) with how
/// often it occurred.
pub fn error_kinds(errors: &[String]) -> std::collections::BTreeMap<String, usize> {
    let mut kinds = std::collections::BTreeMap::new();
    for e in errors {
        let line: String = e.lines().next().unwrap_or("").chars().take(160).collect();
        *kinds.entry(line).or_insert(0) += 1;
    }
    kinds
}

/// Prints a reliability figure (a JSON text) to stderr and, when `DQ_RELIABILITY_DIR` is set
/// (`make reliability`), writes it to `<dir>/<name>.json`, the input of RELIABILITY.md.
///
/// # Panics
/// When the directory or file cannot be written: a report run must not lose figures silently.
pub fn report_figures(name: &str, json: &str) {
    eprintln!("{name}: {json}");
    if let Some(dir) = std::env::var_os("DQ_RELIABILITY_DIR") {
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).expect("create DQ_RELIABILITY_DIR");
        std::fs::write(dir.join(format!("{name}.json")), json).expect("write a reliability figure");
    }
}

/// Returns `<prefix>-<pid>-<n>-<random>`: unique across the tests of a process and, with high
/// probability, across processes.
///
/// The result is valid as a PostgreSQL database name (for [`Postgres::create_database`]), an S3
/// bucket name and a DynamoDB table name: the prefix is lowercased, characters other than ASCII
/// letters, digits and `-` become `-`, and it is shortened so that the whole name fits 63 bytes.
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let suffix = format!(
        "-{}-{}-{:06x}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        instance::random_u64() & 0xff_ffff
    );
    let mut cleaned: String = prefix
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9') => c,
            _ => '-',
        })
        .collect();
    // S3 wants a letter or digit first.
    if !cleaned.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        cleaned.insert(0, 't');
    }
    cleaned.truncate(63 - suffix.len());
    cleaned + &suffix
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_names_are_unique_and_portable() {
        let first = unique_name("My_Test::case");
        let second = unique_name("My_Test::case");
        assert_ne!(first, second);
        assert!(first.starts_with("my-test--case-"), "{first}");
        let long = unique_name(&"x".repeat(100));
        assert!(long.len() <= 63, "{long}");
        assert!(unique_name("_x").starts_with("t-x-"));
        assert!(unique_name("")
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'));
    }

    #[test]
    fn finds_this_workspace() {
        let root = workspace_root();
        assert!(root
            .join("shared")
            .join("testkit")
            .join("Cargo.toml")
            .is_file());
    }

    /// The vectors the tests read are in the repository itself, every file the manifest names.
    #[test]
    fn vectors_are_inside_the_repository() {
        if std::env::var_os(VECTORS_DIR_ENV).is_some() {
            return; // pointed elsewhere on purpose
        }
        let dir = vectors_dir().canonicalize().expect("tests/vectors exists");
        let root = workspace_root().canonicalize().unwrap();
        assert!(
            dir.starts_with(&root),
            "{} is outside {}",
            dir.display(),
            root.display()
        );
        let index: Vec<serde_json::Value> = serde_json::from_str(&vector("index.json")).unwrap();
        assert!(!index.is_empty());
        for entry in &index {
            for key in ["input", "expected"] {
                let name = entry[key]
                    .as_str()
                    .unwrap_or_else(|| panic!("{key} in {entry}"));
                assert!(
                    dir.join(name).is_file(),
                    "{name} named by index.json is missing"
                );
            }
        }
    }

    #[test]
    fn free_port_is_nonzero() {
        assert_ne!(free_port().unwrap(), 0);
    }
}
