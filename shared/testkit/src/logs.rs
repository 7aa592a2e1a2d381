//! Log capture for the secret checks of the fault tests: a global JSON subscriber at debug level
//! whose output lands in memory, and an assertion that no secret appears in it or in a list of
//! error texts.

use std::io::Write;
use std::sync::{Mutex, OnceLock};

static LOGS: OnceLock<&'static Mutex<Vec<u8>>> = OnceLock::new();

/// Installs the capturing subscriber (once per test binary; a no-op if another global
/// subscriber came first, in which case the capture stays empty and [`assert_no_secrets`]
/// reports 0 lines checked).
pub fn capture() {
    LOGS.get_or_init(|| {
        let buf: &'static Mutex<Vec<u8>> = Box::leak(Box::new(Mutex::new(Vec::new())));
        let _ = tracing_subscriber::fmt()
            .json()
            .with_env_filter("debug")
            .with_writer(move || Capture(buf))
            .try_init();
        buf
    });
}

struct Capture(&'static Mutex<Vec<u8>>);

impl Write for Capture {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The captured log lines so far (none when another global subscriber came first).
pub fn lines() -> Vec<String> {
    LOGS.get()
        .map(|b| String::from_utf8_lossy(&b.lock().unwrap_or_else(|p| p.into_inner())).into_owned())
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Asserts that none of `secrets` appears in the captured logs or in `errors`; returns how many
/// log lines were checked.
///
/// # Panics
/// On a secret found (the message names where, never the secret).
pub fn assert_no_secrets(secrets: &[&str], errors: &[String]) -> usize {
    let logs = lines();
    for secret in secrets {
        assert!(secret.len() >= 6, "a secret too short to search for");
        assert!(
            !logs.iter().any(|l| l.contains(secret)),
            "a secret is in the captured logs"
        );
        for (i, e) in errors.iter().enumerate() {
            assert!(!e.contains(secret), "a secret is in error #{i}");
        }
    }
    logs.len()
}
