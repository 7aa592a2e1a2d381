//! Interrupting a request's DuckDB statements when its caller gives up.
//!
//! A read runs on tokio's blocking pool while the request's future awaits it. When that future
//! is dropped first — the request deadline already answered the client, or the client went
//! away — nothing stops DuckDB on its own: the statement keeps a connection and the engine's
//! threads busy until it ends. [`interruptible`] runs one request's reads so that every
//! connection they check out of a [`Pool`](crate::Pool) is interrupted when the future is
//! dropped, and any later checkout of that request fails with [`Error::Interrupted`]. This is
//! the one definition of the rule for every reader (the query engine, the cloud-event reader).
//!
//! The same scope pins the snapshot the request reads ([`crate::snapshot`]).
//!
//! An interrupted statement fails with DuckDB's `INTERRUPT Error`; the connection stays usable
//! (DuckDB clears the flag when the next statement starts) and goes back to its pool.

use std::cell::RefCell;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use duckdb::InterruptHandle;

use crate::snapshot::Snapshot;
use crate::{Error, Result};

/// How often a given-up request repeats the interrupt while one of its statements still runs.
/// DuckDB clears a connection's interrupt flag whenever a statement starts (at prepare and
/// again at execute), so a single interrupt landing just before that is lost.
const REPEAT: Duration = Duration::from_millis(5);

#[derive(Default)]
struct State {
    given_up: bool,
    next_id: u64,
    /// The connections the request has checked out, by registration id.
    running: Vec<(u64, Arc<InterruptHandle>)>,
    /// The snapshot all of the request's statements read ([`crate::snapshot`]).
    snapshot: Option<Snapshot>,
}

impl State {
    fn interrupt_all(&self) {
        for (_, handle) in &self.running {
            handle.interrupt();
        }
    }
}

/// One request's reads.
#[derive(Clone, Default)]
struct Scope(Arc<Mutex<State>>);

impl Scope {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Plain data updated under the lock in single steps: a poisoned lock is still consistent.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks the request given up and interrupts its running statements until they return.
    fn give_up(&self) {
        let mut state = self.lock();
        state.given_up = true;
        if state.running.is_empty() {
            return;
        }
        state.interrupt_all();
        drop(state);
        let scope = self.clone();
        let repeat = std::thread::Builder::new()
            .name("dq-interrupt".into())
            .spawn(move || loop {
                std::thread::sleep(REPEAT);
                // Interrupting under the lock: a connection deregistered (given back to its
                // pool, maybe to another request) is never interrupted afterwards.
                let state = scope.lock();
                if state.running.is_empty() {
                    return;
                }
                state.interrupt_all();
            });
        if let Err(e) = repeat {
            tracing::warn!(error = %e, "cannot start the interrupt thread; interrupted once");
        }
    }
}

thread_local! {
    /// The request whose reads run on this (blocking-pool) thread, while they run.
    static CURRENT: RefCell<Option<Scope>> = const { RefCell::new(None) };
}

/// A connection registered with its request's [`Scope`] while checked out.
pub(crate) struct Registration {
    scope: Scope,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let id = self.id;
        self.scope.lock().running.retain(|(r, _)| *r != id);
    }
}

/// Registers `conn` with the request whose reads run on this thread, if any.
///
/// # Errors
/// [`Error::Interrupted`] when that request was already given up: it starts no new statement.
pub(crate) fn register(conn: &duckdb::Connection) -> Result<Option<Registration>> {
    let Some(scope) = CURRENT.with(|c| c.borrow().clone()) else {
        return Ok(None);
    };
    let mut state = scope.lock();
    if state.given_up {
        return Err(Error::Interrupted);
    }
    let id = state.next_id;
    state.next_id += 1;
    state.running.push((id, conn.interrupt_handle()));
    drop(state);
    Ok(Some(Registration { scope, id }))
}

/// The snapshot pinned by the request whose reads run on this thread, if any.
pub(crate) fn pinned() -> Option<Snapshot> {
    CURRENT.with(|c| c.borrow().as_ref().and_then(|s| s.lock().snapshot))
}

/// Pins `snapshot` for the request whose reads run on this thread unless it pinned one
/// already; returns the pinned one (`snapshot` outside a request).
pub(crate) fn pin(snapshot: Snapshot) -> Snapshot {
    CURRENT.with(|c| match c.borrow().as_ref() {
        Some(scope) => *scope.lock().snapshot.get_or_insert(snapshot),
        None => snapshot,
    })
}

/// True when the request whose reads run on this thread was given up (its deadline passed or
/// its caller went away), so a failed statement is that interrupt, not a reason to retry.
pub fn given_up() -> bool {
    CURRENT.with(|c| c.borrow().as_ref().is_some_and(|s| s.lock().given_up))
}

/// Makes `scope` the thread's current request until dropped (also on panic: blocking-pool
/// threads are reused).
struct Enter {
    previous: Option<Scope>,
}

impl Enter {
    fn new(scope: Scope) -> Enter {
        Enter {
            previous: CURRENT.with(|c| c.replace(Some(scope))),
        }
    }
}

impl Drop for Enter {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CURRENT.with(|c| *c.borrow_mut() = previous);
    }
}

/// Gives the request up when dropped before [`GiveUpOnDrop::disarm`].
struct GiveUpOnDrop(Option<Scope>);

impl GiveUpOnDrop {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for GiveUpOnDrop {
    fn drop(&mut self) {
        if let Some(scope) = self.0.take() {
            scope.give_up();
        }
    }
}

/// Runs `f` so that every statement it starts reads one snapshot ([`crate::snapshot`]): inside
/// a request that is the request's pin; outside one (a bare engine call, a test), a scope of
/// `f`'s own, never given up. For a read made of two statements whose answers are merged.
pub fn one_snapshot<T>(f: impl FnOnce() -> T) -> T {
    if CURRENT.with(|c| c.borrow().is_some()) {
        return f();
    }
    let _current = Enter::new(Scope::default());
    f()
}

/// Runs one request's reads `f` on tokio's blocking pool. If the returned future is dropped
/// before `f` returns (a deadline, a cancelled RPC, a closed connection), every DuckDB
/// statement `f` runs on a [`Pool`](crate::Pool) connection is interrupted, and `f`'s later
/// checkouts fail with [`Error::Interrupted`].
///
/// # Errors
/// The blocking task failed (it panicked, or the runtime is shutting down).
pub async fn interruptible<T, F>(f: F) -> std::result::Result<T, tokio::task::JoinError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let scope = Scope::default();
    let guard = GiveUpOnDrop(Some(scope.clone()));
    let out = tokio::task::spawn_blocking(move || {
        let _current = Enter::new(scope);
        f()
    })
    .await;
    guard.disarm();
    out
}
