//! A small pool of DuckDB connections to one [`Lake`], used from async code: each read runs on
//! the blocking pool, and a read whose caller gave up (deadline, cancelled RPC) is interrupted
//! rather than left running. A read that finds the DuckDB instance invalidated fails and has the
//! lake reopened for the next one ([`SharedLake`]).

use crate::error::{FetchError, Result};
use crate::search::Reader;
use lake::duckdb::Connection;
use lake::{Lake, SharedLake};
use std::sync::{Arc, Mutex, PoisonError};

/// Connections kept idle for reuse; more may be open while busy.
const MAX_IDLE: usize = 8;

/// Shared read access to the lake.
pub struct Db {
    // Idle connections with the lake generation they were opened in; before the lake, so they
    // close first.
    idle: Mutex<Vec<(Connection, u64)>>,
    lake: Arc<SharedLake>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").finish_non_exhaustive()
    }
}

/// Interrupts the query on its connection if the awaiting future is dropped first.
struct InterruptOnDrop {
    handle: Arc<lake::duckdb::InterruptHandle>,
    armed: bool,
}

impl Drop for InterruptOnDrop {
    fn drop(&mut self) {
        if self.armed {
            self.handle.interrupt();
        }
    }
}

impl Db {
    /// Wraps an open lake.
    pub fn new(lake: Lake) -> Db {
        Db::on(Arc::new(SharedLake::new(lake)))
    }

    /// Reads through a lake shared with other readers (the GraphQL engine).
    pub fn on(lake: Arc<SharedLake>) -> Db {
        Db {
            idle: Mutex::new(Vec::new()),
            lake,
        }
    }

    /// The shared lake behind this pool.
    pub fn lake(&self) -> &Arc<SharedLake> {
        &self.lake
    }

    fn checkout(&self) -> Result<(Connection, u64)> {
        let current = self.lake.generation();
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        idle.retain(|(_, generation)| *generation == current);
        if let Some(c) = idle.pop() {
            return Ok(c);
        }
        drop(idle);
        Ok(self.lake.connect()?)
    }

    fn checkin(&self, conn: Connection, generation: u64) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < MAX_IDLE {
            idle.push((conn, generation));
        }
    }

    /// Runs `f` with a [`Reader`] on a pooled connection, off the async runtime.
    ///
    /// # Errors
    /// What `f` returns; [`FetchError::Internal`] if the worker panicked.
    pub async fn read<T, F>(self: &Arc<Self>, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Reader<'_>) -> Result<T> + Send + 'static,
    {
        let (conn, generation) = self.checkout()?;
        let mut guard = InterruptOnDrop {
            handle: conn.interrupt_handle(),
            armed: true,
        };
        let db = Arc::clone(self);
        let out = tokio::task::spawn_blocking(move || {
            let out = f(&Reader::new(&conn, db.lake.redactor()));
            match &out {
                Err(e) if lake::is_invalidated(&e.to_string()) => {
                    drop(conn);
                    if let Err(reopen) = db.lake.recover(generation) {
                        tracing::warn!(error = %reopen, "reopening the lake failed; next read retries");
                    }
                }
                _ => db.checkin(conn, generation),
            }
            out
        })
        .await
        .map_err(|e| FetchError::Internal(format!("lake read task failed: {e}")));
        guard.armed = false;
        out?
    }
}
