//! Helpers shared by the test modules.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use dq_testkit::Postgres;

/// Runs one SQL statement with `psql` over TCP using `dsn` (keyword or URL form) and never
/// prompts for a password.
pub fn psql(pg: &Postgres, dsn: &str, sql: &str) -> Output {
    Command::new(pg.bin_dir().join("psql"))
        .args([
            "-X",
            "-A",
            "-t",
            "-w",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            dsn,
            "-c",
            sql,
        ])
        .env_remove("PGPASSWORD")
        .env_remove("PGPASSFILE")
        .stdin(Stdio::null())
        .output()
        .expect("run psql")
}

/// Runs `psql` and returns its trimmed stdout, failing the test on error.
pub fn psql_ok(pg: &Postgres, dsn: &str, sql: &str) -> String {
    let output = psql(pg, dsn, sql);
    assert!(
        output.status.success(),
        "psql {sql:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// Returns the pid recorded on the first line of a cluster's `postmaster.pid`.
pub fn postmaster_pid(data_dir: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(data_dir.join("postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

/// Returns the real uid of a running process.
pub fn process_uid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Tells whether a process is gone (no `/proc` entry, or only an unreaped zombie).
pub fn process_is_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/status")) {
        Err(_) => true,
        Ok(status) => status
            .lines()
            .any(|line| line.starts_with("State:") && line.contains('Z')),
    }
}

/// Polls `condition` every 50 ms until it holds or `timeout` passes; returns whether it held.
pub fn eventually(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Returns the uid this process runs as (the owner of `/proc/self`).
pub fn own_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .expect("stat /proc/self")
        .uid()
}
