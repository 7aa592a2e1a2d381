//! A small pool of DuckDB connections to one [`Lake`], used from async code: each read runs on
//! the blocking pool, and a read whose caller gave up (deadline, cancelled RPC) is interrupted
//! rather than left running.

use crate::error::{FetchError, Result};
use crate::search::Reader;
use lake::duckdb::Connection;
use lake::{Lake, Redactor};
use std::sync::{Arc, Mutex, PoisonError};

/// Connections kept idle for reuse; more may be open while busy.
const MAX_IDLE: usize = 8;

/// Shared read access to the lake.
pub struct Db {
    lake: Mutex<Lake>,
    idle: Mutex<Vec<Connection>>,
    redactor: Redactor,
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
        let redactor = lake.redactor().clone();
        Db {
            lake: Mutex::new(lake),
            idle: Mutex::new(Vec::new()),
            redactor,
        }
    }

    fn checkout(&self) -> Result<Connection> {
        if let Some(conn) = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
        {
            return Ok(conn);
        }
        Ok(self
            .lake
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .connect()?)
    }

    fn checkin(&self, conn: Connection) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < MAX_IDLE {
            idle.push(conn);
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
        let conn = self.checkout()?;
        let mut guard = InterruptOnDrop {
            handle: conn.interrupt_handle(),
            armed: true,
        };
        let db = Arc::clone(self);
        let out = tokio::task::spawn_blocking(move || {
            let out = f(&Reader::new(&conn, &db.redactor));
            db.checkin(conn);
            out
        })
        .await
        .map_err(|e| FetchError::Internal(format!("lake read task failed: {e}")));
        guard.armed = false;
        out?
    }
}
