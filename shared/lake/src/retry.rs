//! Commit-conflict retry, as din does it: up to 3 attempts, sleeping 500 ms then 1 s.

use std::time::Duration;

use crate::Result;

/// Delays before the second and third attempt.
pub const CONFLICT_BACKOFF: [Duration; 2] =
    [Duration::from_millis(500), Duration::from_millis(1000)];

/// Runs `op`, retrying it while it fails with a commit conflict. Any other error, or a conflict
/// on the last attempt, is returned as is.
pub fn on_conflict<T>(what: &str, mut op: impl FnMut() -> Result<T>) -> Result<T> {
    let mut delays = CONFLICT_BACKOFF.iter().enumerate();
    loop {
        match op() {
            Err(e) if e.is_commit_conflict() => {
                let Some((attempt, delay)) = delays.next() else {
                    return Err(e);
                };
                tracing::warn!(what, attempt = attempt + 1, error = %e, "commit conflict, retrying");
                std::thread::sleep(*delay);
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    fn conflict() -> Error {
        Error::Duckdb {
            context: "commit".into(),
            message: "TransactionContext Error: Failed to commit: write-write conflict".into(),
        }
    }

    #[test]
    fn retries_conflicts_then_gives_up() {
        let mut calls = 0;
        let out: Result<()> = on_conflict("t", || {
            calls += 1;
            Err(conflict())
        });
        assert!(out.unwrap_err().is_commit_conflict());
        assert_eq!(calls, 3);
    }

    #[test]
    fn does_not_retry_other_errors() {
        let mut calls = 0;
        let out: Result<()> = on_conflict("t", || {
            calls += 1;
            Err(Error::Config("x".into()))
        });
        assert!(out.is_err());
        assert_eq!(calls, 1);
    }
}
