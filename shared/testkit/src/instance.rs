//! Where service instances live on disk and how they are cleaned up when their test process dies.
//!
//! Every instance (one PostgreSQL cluster, one moto server) owns a directory
//! `<temp>/dq-testkit/<kind>-<pid>-<n>-<random>/` holding its data, its log, an `owner` file naming
//! the test process (pid and start time, so a reused pid is not mistaken for the owner) and a
//! `cleanup.sh` that stops the service and removes the directory.
//!
//! Cleanup happens on three levels:
//! 1. `Drop` of the service value stops it and removes the directory.
//! 2. A [`Watchdog`] per instance: a small `sh` in its own process group that blocks reading a pipe
//!    whose only writer is the test process. When the test process exits in any way (end of the test
//!    binary with the shared instance still in a `static`, a panic with `panic = abort`, `SIGKILL`),
//!    the kernel closes the pipe, the read returns end-of-file and the shell runs `cleanup.sh`.
//!    Being in its own process group, it also survives the Ctrl-C that kills `cargo test`.
//! 3. [`sweep_once`]: the first instance started by a process runs `cleanup.sh` of every directory
//!    whose owner process is gone, in case a watchdog was killed too (e.g. the whole machine session
//!    was torn down).

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};
use std::time::{Duration, SystemTime};

use crate::{Error, Result};

/// Name of the directory under the system temp dir that holds every instance.
const ROOT_NAME: &str = "dq-testkit";
/// File in an instance directory naming the owning process as `<pid> <start time>`.
const OWNER_FILE: &str = "owner";
/// File in an instance directory with the shell script that tears the instance down.
const CLEANUP_FILE: &str = "cleanup.sh";
/// A directory without an owner file is only swept once it is this old (it may be being created).
const ORPHAN_GRACE: Duration = Duration::from_secs(300);

/// Returns `<temp>/dq-testkit`, creating it world-writable and sticky like `/tmp`, so that root
/// and non-root runs on the same machine can share it and the unprivileged PostgreSQL user can
/// traverse it.
pub(crate) fn temp_root() -> Result<PathBuf> {
    let root = std::env::temp_dir().join(ROOT_NAME);
    fs::create_dir_all(&root).map_err(|e| Error::io(format!("create {}", root.display()), e))?;
    let metadata =
        fs::metadata(&root).map_err(|e| Error::io(format!("stat {}", root.display()), e))?;
    if metadata.permissions().mode() & 0o7777 != 0o1777 {
        // Only the directory's owner may change it; anyone else lives with what it has.
        let _ = fs::set_permissions(&root, fs::Permissions::from_mode(0o1777));
    }
    Ok(root)
}

/// Creates a fresh instance directory `<temp root>/<kind>-<pid>-<n>-<random>` with its owner file.
pub(crate) fn create_instance_dir(kind: &str) -> Result<PathBuf> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let root = temp_root()?;
    let pid = std::process::id();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = root.join(format!("{kind}-{pid}-{n}-{:06x}", random_u64() & 0xff_ffff));
    fs::create_dir(&dir).map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
    let owner = format!("{pid} {}\n", process_start_time(pid).unwrap_or_default());
    write_file(&dir.join(OWNER_FILE), &owner)?;
    Ok(dir)
}

/// Writes the instance's `cleanup.sh`, used by the watchdog and by later sweeps.
pub(crate) fn write_cleanup_script(dir: &Path, script: &str) -> Result<()> {
    write_file(&dir.join(CLEANUP_FILE), script)
}

/// Sweeps the temp root once per process: runs the cleanup of every instance whose owner is dead.
///
/// Failures are reported on stderr and otherwise ignored: a leftover directory must not fail a test.
pub(crate) fn sweep_once() {
    static SWEEP: Once = Once::new();
    SWEEP.call_once(|| {
        if let Err(error) = sweep() {
            eprintln!("testkit: sweeping stale instances failed: {error}");
        }
    });
}

fn sweep() -> Result<()> {
    let root = temp_root()?;
    let entries =
        fs::read_dir(&root).map_err(|e| Error::io(format!("list {}", root.display()), e))?;
    for entry in entries.flatten() {
        let dir = entry.path();
        if !dir.is_dir() || owner_is_alive(&dir) {
            continue;
        }
        let script = fs::read_to_string(dir.join(CLEANUP_FILE)).ok();
        match script {
            Some(script) => {
                let status = Command::new("sh")
                    .arg("-c")
                    .arg(&script)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
                if let Err(error) = status {
                    eprintln!("testkit: cleanup of {} failed: {error}", dir.display());
                }
            }
            None => {
                let _ = fs::remove_dir_all(&dir);
            }
        }
    }
    Ok(())
}

/// Tells whether the process named in `dir/owner` still runs. Directories without a readable
/// owner file count as alive while they are young (another process may be creating them).
fn owner_is_alive(dir: &Path) -> bool {
    let Ok(owner) = fs::read_to_string(dir.join(OWNER_FILE)) else {
        let age = fs::metadata(dir)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|modified| SystemTime::now().duration_since(modified).ok());
        return age.is_none_or(|age| age < ORPHAN_GRACE);
    };
    let mut fields = owner.split_whitespace();
    let Some(pid) = fields.next().and_then(|pid| pid.parse::<u32>().ok()) else {
        return false;
    };
    let recorded_start = fields.next().and_then(|start| start.parse::<u64>().ok());
    match (process_start_time(pid), recorded_start) {
        (None, _) => false,
        (Some(current), Some(recorded)) => current == recorded,
        (Some(_), None) => true,
    }
}

/// Returns a process's start time (clock ticks since boot, field 22 of `/proc/<pid>/stat`).
fn process_start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces: split after it.
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}

/// A guard process that runs a cleanup script once the test process is gone.
///
/// Dropping (or [`Watchdog::disarm`]) kills the guard without running the script: the service's
/// own `Drop` has cleaned up. [`Watchdog::fire`] runs the script now and waits for it.
pub(crate) struct Watchdog {
    child: Mutex<Option<Child>>,
}

impl Watchdog {
    /// Starts `sh` that waits for end-of-file on its stdin, then runs `cleanup`.
    pub(crate) fn arm(cleanup: &str) -> Result<Self> {
        use std::os::unix::process::CommandExt;

        // `read` is a shell builtin: no extra process; it returns non-zero at end-of-file, which
        // only comes when every writer (just this process, pipes are close-on-exec) is gone.
        // Interrupts aimed at a terminal's foreground group are ignored on top of the separate
        // process group.
        let script = format!("trap '' INT HUP\nwhile read -r _; do :; done\n{cleanup}");
        let child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| Error::io("spawn cleanup watchdog (sh)", e))?;
        Ok(Watchdog {
            child: Mutex::new(Some(child)),
        })
    }

    /// Stops the watchdog without running its cleanup.
    pub(crate) fn disarm(&self) {
        let mut slot = self
            .child
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(mut child) = slot.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Runs the cleanup now by closing the watchdog's stdin, and waits for it to finish.
    pub(crate) fn fire(&self) {
        let mut slot = self
            .child
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(mut child) = slot.take() {
            drop::<Option<ChildStdin>>(child.stdin.take());
            let _ = child.wait();
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.disarm();
    }
}

/// Quotes a string for POSIX `sh` with single quotes.
pub(crate) fn sh_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Writes a small file, naming it in the error.
pub(crate) fn write_file(path: &Path, contents: &str) -> Result<()> {
    fs::File::create(path)
        .and_then(|mut file| file.write_all(contents.as_bytes()))
        .map_err(|e| Error::io(format!("write {}", path.display()), e))
}

/// Returns the last `lines` lines of a log file, or a note that it cannot be read.
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    match fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            let start = all.len().saturating_sub(lines);
            format!(
                "--- last lines of {} ---\n{}",
                path.display(),
                all[start..].join("\n")
            )
        }
        Err(error) => format!("({} unreadable: {error})", path.display()),
    }
}

/// Returns 64 random-enough bits for names and passwords (not for cryptography).
pub(crate) fn random_u64() -> u64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};

    static COUNTER: AtomicU64 = AtomicU64::new(0);
    // RandomState is seeded from the OS once per process and varied per instance.
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    if let Ok(elapsed) = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
        hasher.write_u128(elapsed.as_nanos());
    }
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_for_sh() {
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn reads_own_start_time() {
        let pid = std::process::id();
        assert!(process_start_time(pid).is_some());
        assert!(process_start_time(u32::MAX).is_none());
    }

    #[test]
    fn owner_liveness_checks_pid_and_start_time() {
        let dir = create_instance_dir("unit").unwrap();
        assert!(
            owner_is_alive(&dir),
            "the current process owns a new instance"
        );
        let pid = std::process::id();
        write_file(&dir.join(OWNER_FILE), &format!("{pid} 1\n")).unwrap();
        assert!(
            !owner_is_alive(&dir),
            "a reused pid with another start time is not the owner"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn fired_watchdog_runs_cleanup_and_disarmed_one_does_not() {
        let dir = create_instance_dir("unit").unwrap();
        let marker = dir.join("marker");
        let script = format!("touch {}", sh_quote(&marker.to_string_lossy()));

        let disarmed = Watchdog::arm(&script).unwrap();
        disarmed.disarm();
        assert!(!marker.exists());

        let fired = Watchdog::arm(&script).unwrap();
        fired.fire();
        assert!(marker.exists());
        fs::remove_dir_all(&dir).unwrap();
    }
}
