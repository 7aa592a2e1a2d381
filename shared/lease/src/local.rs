//! The local backend: an OS file lock (`flock` on Unix, through [`File::try_lock`]) on a lock
//! file next to the catalog, so the same binary runs without AWS.
//!
//! The lock belongs to the open file description held by a [`crate::Lease`] handle: two
//! processes, or two handles in one process, can never both hold it, and the OS releases it when
//! its holder exits or crashes. Nothing expires while the lock is held; `expires_at` is still
//! recorded and honoured by [`crate::Lease::check`], so the materializer behaves the same on both
//! backends.
//!
//! The file is rewritten in place (never replaced: a lock on a replaced file would guard nothing)
//! with a small `key=value` record that persists the fence across processes. A file that does
//! not parse (e.g. a torn write) restarts the fence from the clock in milliseconds, which is above
//! any counter reached before.
//!
//! A waiter asks the holder to yield by writing its holder id into a sidecar file,
//! `<lock file>.yield` (the lock file itself is rewritten by its holder, which would clobber a
//! request written into it). The holder reads the sidecar when it renews; a new holder deletes
//! it, since the request was addressed to its predecessor.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::dynamo::Snapshot;
use crate::{LeaseError, LeaseGuard, LostReason, Result, Term};

/// How often acquire reopens the path when the file was replaced between open and lock.
const OPEN_ROUNDS: usize = 3;
/// The yield-request sidecar's key for the requester's holder id.
const REQUESTED_BY: &str = "yield_requested_by=";
/// The record's first line.
const HEADER: &str =
    "# dq materializer lease: do not delete or replace while a materializer may run";

/// The lock currently held by one handle (and its clones).
struct HeldLock {
    file: File,
    holder: String,
    fence: u64,
}

/// A lock file and the lock this handle holds on it, if any.
#[derive(Clone)]
pub(crate) struct LocalBackend {
    path: PathBuf,
    held: Arc<Mutex<Option<HeldLock>>>,
}

impl std::fmt::Debug for LocalBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalBackend")
            .field("path", &self.path)
            .field(
                "held_fence",
                &self.lock_state().as_ref().map(|held| held.fence),
            )
            .finish()
    }
}

/// What the lock file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) fence: u64,
    /// Empty once released.
    pub(crate) holder: String,
    pub(crate) expires_at: i64,
    pub(crate) acquired_at: i64,
    pub(crate) renewed_at: i64,
}

/// The lock file's content as found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// Empty: a new file.
    Empty,
    Record(Record),
    /// Present but unreadable as a record.
    Garbled,
}

impl LocalBackend {
    pub(crate) fn new(path: PathBuf) -> Self {
        LocalBackend {
            path,
            held: Arc::new(Mutex::new(None)),
        }
    }

    /// The same file with no lock held (for a handle with another holder).
    pub(crate) fn fresh(&self) -> Self {
        LocalBackend::new(self.path.clone())
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn lease_id(&self) -> String {
        self.path.display().to_string()
    }

    /// Takes the lock for `holder` with a new fence, or extends it if this handle holds it.
    pub(crate) fn acquire(&self, holder: &str, term: Term) -> Result<LeaseGuard> {
        let Term {
            now_millis,
            now,
            expires_at,
        } = term;
        let mut state = self.lock_state();
        if let Some(held) = state.as_ref() {
            if held.holder == holder && self.is_current_file(&held.file)? {
                let mut record = self.read_held(held)?;
                record.expires_at = expires_at;
                record.renewed_at = now;
                self.write(&held.file, &record)?;
                return Ok(self.guard(&record, self.yield_request()?));
            }
            // The path was replaced (or the holder changed): our lock guards nothing any more.
            *state = None;
        }
        for _ in 0..OPEN_ROUNDS {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&self.path)
                .map_err(|e| {
                    LeaseError::io(format!("open lease file {}", self.path.display()), e)
                })?;
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    let (holder, expires_at) = match self.read(&file)? {
                        Found::Record(record) if !record.holder.is_empty() => {
                            (record.holder, record.expires_at)
                        }
                        // Locked but not written yet (or released a moment ago).
                        _ => ("unknown".to_owned(), expires_at),
                    };
                    return Err(LeaseError::Held {
                        lease_id: self.lease_id(),
                        holder,
                        expires_at,
                    });
                }
                Err(TryLockError::Error(e)) => {
                    return Err(LeaseError::io(
                        format!("lock lease file {}", self.path.display()),
                        e,
                    ))
                }
            }
            if !self.is_current_file(&file)? {
                continue;
            }
            let fence = match self.read(&file)? {
                Found::Empty => 1,
                Found::Record(previous) => previous.fence.saturating_add(1),
                Found::Garbled => {
                    let seeded = u64::try_from(now_millis).unwrap_or(1).max(1);
                    tracing::warn!(
                        path = %self.path.display(),
                        fence = seeded,
                        "lease file unreadable; restarting the fence from the clock"
                    );
                    seeded
                }
            };
            let record = Record {
                fence,
                holder: holder.to_owned(),
                expires_at,
                acquired_at: now,
                renewed_at: now,
            };
            self.write(&file, &record)?;
            *state = Some(HeldLock {
                file,
                holder: holder.to_owned(),
                fence,
            });
            self.withdraw_yield(None)?;
            return Ok(self.guard(&record, None));
        }
        Err(LeaseError::io(
            format!("lock lease file {}", self.path.display()),
            std::io::Error::other(format!(
                "the file was replaced {OPEN_ROUNDS} times while locking it"
            )),
        ))
    }

    /// Extends the lease of `guard` if this handle still holds it with the same fence.
    pub(crate) fn renew(&self, guard: &LeaseGuard, term: Term) -> Result<LeaseGuard> {
        let mut state = self.lock_state();
        let mut record = self.verify(&mut state, guard)?;
        record.expires_at = term.expires_at;
        record.renewed_at = term.now;
        let held = state.as_ref().ok_or_else(|| not_held(guard))?;
        self.write(&held.file, &record)?;
        Ok(self.guard(&record, self.yield_request()?))
    }

    /// The lease as recorded, after checking that this handle holds the lock for `guard`.
    pub(crate) fn snapshot(&self, guard: &LeaseGuard) -> Result<Snapshot> {
        let mut state = self.lock_state();
        let record = self.verify(&mut state, guard)?;
        Ok(Snapshot {
            holder: Some(record.holder),
            fence: record.fence,
            expires_at: record.expires_at,
            yield_requested_by: self.yield_request()?,
        })
    }

    /// The sidecar's path: `<lock file>.yield`.
    fn yield_path(&self) -> PathBuf {
        let mut path = self.path.clone().into_os_string();
        path.push(".yield");
        PathBuf::from(path)
    }

    /// Records that `requester` waits for the lease. The lock is not probed: a request to
    /// nobody is deleted by the next acquisition.
    pub(crate) fn request_yield(&self, requester: &str, now: i64) -> Result<bool> {
        let held_by_requester = self
            .lock_state()
            .as_ref()
            .is_some_and(|held| held.holder == requester);
        if held_by_requester {
            return Ok(false);
        }
        let path = self.yield_path();
        std::fs::write(
            &path,
            format!("{REQUESTED_BY}{requester}\nrequested_at={now}\n"),
        )
        .map_err(|e| LeaseError::io(format!("write yield request {}", path.display()), e))?;
        Ok(true)
    }

    /// Deletes the yield request: `requester`'s only (a waiter giving up), or any (`None`: a new
    /// holder, to whom no request was addressed yet).
    pub(crate) fn withdraw_yield(&self, requester: Option<&str>) -> Result<()> {
        if let Some(requester) = requester {
            if self.yield_request()?.as_deref() != Some(requester) {
                return Ok(());
            }
        }
        let path = self.yield_path();
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(LeaseError::io(
                format!("delete yield request {}", path.display()),
                e,
            )),
        }
    }

    /// The holder id in the sidecar, if there is one.
    fn yield_request(&self) -> Result<Option<String>> {
        let path = self.yield_path();
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(text
                .lines()
                .find_map(|line| line.strip_prefix(REQUESTED_BY))
                .filter(|requester| !requester.is_empty())
                .map(str::to_owned)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            // A torn write is read as no request; the waiter writes it again at its next poll.
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => Ok(None),
            Err(e) => Err(LeaseError::io(
                format!("read yield request {}", path.display()),
                e,
            )),
        }
    }

    /// Marks the record released and unlocks, if this handle holds the lock for `guard`.
    pub(crate) fn release(&self, guard: &LeaseGuard, now: i64) -> Result<bool> {
        let mut state = self.lock_state();
        let mut record = match self.verify(&mut state, guard) {
            Ok(record) => record,
            Err(LeaseError::Lost { .. }) => return Ok(false),
            Err(other) => return Err(other),
        };
        let Some(held) = state.take() else {
            return Ok(false);
        };
        record.holder.clear();
        record.expires_at = now;
        record.renewed_at = now;
        let written = self.write(&held.file, &record);
        // Unlock even if the write failed: the next holder bumps the fence either way.
        let unlocked = held
            .file
            .unlock()
            .map_err(|e| LeaseError::io(format!("unlock lease file {}", self.path.display()), e));
        written.and(unlocked).map(|()| true)
    }

    /// The record, if this handle holds the lock on the current file with `guard`'s holder and
    /// fence; a replaced file drops the lock.
    fn verify(&self, state: &mut Option<HeldLock>, guard: &LeaseGuard) -> Result<Record> {
        let held = match state.as_ref() {
            Some(held) if held.holder == guard.holder => held,
            _ => return Err(not_held(guard)),
        };
        if held.fence != guard.fence {
            return Err(LeaseError::Lost {
                lease_id: guard.lease_id.clone(),
                fence: guard.fence,
                reason: LostReason::TakenOver {
                    holder: held.holder.clone(),
                    fence: held.fence,
                },
            });
        }
        if !self.is_current_file(&held.file)? {
            *state = None;
            return Err(LeaseError::Lost {
                lease_id: guard.lease_id.clone(),
                fence: guard.fence,
                reason: LostReason::Missing,
            });
        }
        let record = self.read_held(held)?;
        if record.fence != guard.fence || record.holder != guard.holder {
            return Err(LeaseError::Lost {
                lease_id: guard.lease_id.clone(),
                fence: guard.fence,
                reason: LostReason::TakenOver {
                    holder: record.holder,
                    fence: record.fence,
                },
            });
        }
        Ok(record)
    }

    /// The record of a held lock; one we wrote ourselves, so anything else is a fault.
    fn read_held(&self, held: &HeldLock) -> Result<Record> {
        match self.read(&held.file)? {
            Found::Record(record) => Ok(record),
            Found::Empty | Found::Garbled => Err(LeaseError::io(
                format!("read lease file {}", self.path.display()),
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "the record written under the lock is gone",
                ),
            )),
        }
    }

    fn read(&self, mut file: &File) -> Result<Found> {
        let mut text = String::new();
        let read = file
            .seek(SeekFrom::Start(0))
            .and_then(|_| file.read_to_string(&mut text));
        match read {
            Ok(_) => Ok(parse(&text)),
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => Ok(Found::Garbled),
            Err(e) => Err(LeaseError::io(
                format!("read lease file {}", self.path.display()),
                e,
            )),
        }
    }

    /// Rewrites the record in place: write from offset 0, cut the tail, sync.
    fn write(&self, mut file: &File, record: &Record) -> Result<()> {
        let text = render(record);
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.write_all(text.as_bytes()))
            .and_then(|()| file.set_len(text.len() as u64))
            .and_then(|()| file.sync_data())
            .map_err(|e| LeaseError::io(format!("write lease file {}", self.path.display()), e))
    }

    /// True when the path still names the file we opened (nobody deleted or replaced it).
    fn is_current_file(&self, file: &File) -> Result<bool> {
        let opened = file
            .metadata()
            .map_err(|e| LeaseError::io(format!("stat lease file {}", self.path.display()), e))?;
        match std::fs::metadata(&self.path) {
            Ok(current) => Ok(same_file(&opened, &current)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(LeaseError::io(
                format!("stat lease file {}", self.path.display()),
                e,
            )),
        }
    }

    fn guard(&self, record: &Record, yield_requested_by: Option<String>) -> LeaseGuard {
        LeaseGuard {
            lease_id: self.lease_id(),
            holder: record.holder.clone(),
            fence: record.fence,
            expires_at: record.expires_at,
            yield_requested_by: yield_requested_by.filter(|requester| *requester != record.holder),
        }
    }

    fn lock_state(&self) -> MutexGuard<'_, Option<HeldLock>> {
        // A panic elsewhere while holding this mutex leaves consistent data (plain fields).
        self.held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn not_held(guard: &LeaseGuard) -> LeaseError {
    LeaseError::Lost {
        lease_id: guard.lease_id.clone(),
        fence: guard.fence,
        reason: LostReason::NotHeld,
    }
}

#[cfg(unix)]
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(not(unix))]
fn same_file(_: &std::fs::Metadata, _: &std::fs::Metadata) -> bool {
    true
}

pub(crate) fn render(record: &Record) -> String {
    format!(
        "{HEADER}\nfence={}\nholder={}\nexpires_at={}\nacquired_at={}\nrenewed_at={}\nend\n",
        record.fence, record.holder, record.expires_at, record.acquired_at, record.renewed_at
    )
}

/// Parses up to the `end` line; anything after it (the tail of a longer earlier record) is
/// ignored. A record without `end` or `fence` is garbled.
pub(crate) fn parse(text: &str) -> Found {
    if text.is_empty() {
        return Found::Empty;
    }
    let mut fence = None;
    let mut holder = String::new();
    let (mut expires_at, mut acquired_at, mut renewed_at) = (0, 0, 0);
    for line in text.lines() {
        if line == "end" {
            return match fence {
                Some(fence) => Found::Record(Record {
                    fence,
                    holder,
                    expires_at,
                    acquired_at,
                    renewed_at,
                }),
                None => Found::Garbled,
            };
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let parsed = match key {
            "fence" => value.parse().map(|v| fence = Some(v)).is_ok(),
            "holder" => {
                holder = value.to_owned();
                true
            }
            "expires_at" => value.parse().map(|v| expires_at = v).is_ok(),
            "acquired_at" => value.parse().map(|v| acquired_at = v).is_ok(),
            "renewed_at" => value.parse().map(|v| renewed_at = v).is_ok(),
            _ => true,
        };
        if !parsed {
            return Found::Garbled;
        }
    }
    Found::Garbled
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record {
        Record {
            fence: 41,
            holder: "req-1-abc".into(),
            expires_at: 1_700_000_120,
            acquired_at: 1_700_000_000,
            renewed_at: 1_700_000_060,
        }
    }

    #[test]
    fn records_round_trip() {
        assert_eq!(parse(&render(&record())), Found::Record(record()));
        let released = Record {
            holder: String::new(),
            ..record()
        };
        assert_eq!(parse(&render(&released)), Found::Record(released));
    }

    #[test]
    fn ignores_the_tail_of_a_longer_earlier_record() {
        let longer = render(&Record {
            holder: "a-much-longer-holder-name-than-before".into(),
            ..record()
        });
        let mut text = render(&record());
        text.push_str(&longer[text.len().min(longer.len())..]);
        assert_eq!(parse(&text), Found::Record(record()));
    }

    #[test]
    fn torn_or_foreign_files_are_garbled() {
        assert_eq!(parse(""), Found::Empty);
        let full = render(&record());
        assert_eq!(parse(&full[..full.len() - 4]), Found::Garbled);
        assert_eq!(parse("fence=x\nend\n"), Found::Garbled);
        assert_eq!(parse("holder=a\nend\n"), Found::Garbled);
        assert_eq!(parse("hello"), Found::Garbled);
    }
}
