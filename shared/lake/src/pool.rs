//! One DuckDB instance shared by a process's read paths (GraphQL engine and cloud-event reader),
//! replaced by a freshly opened one when DuckDB invalidates it.
//!
//! DuckDB invalidates a database after a fatal error — seen when the PostgreSQL catalog restarts
//! under a running query — and every later statement on any connection of that instance fails
//! with "database has been invalidated … must be restarted". A Lambda execution environment would
//! otherwise answer errors until it is recycled; instead the first reader that sees the error
//! reopens the lake from its config, and connections of the old instance are dropped as they come
//! back to their pools (each carries the generation it was opened in). [`Pool`] is that pool, the
//! one definition of the rule for every reader.
//!
//! The same reopening answers a catalog that refuses credentials coming from a secret (a
//! rotation: connections opened before it live on, new ones fail), since a reopened lake re-reads
//! the secret ([`Lake::reopen`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::catalog::Catalog;
use crate::catalog_conn::CatalogConn;
use crate::interrupt::{self, Registration};
use crate::{Conn, Lake, Newest, Redactor, Result};

/// DuckDB's message for an instance that must be reopened.
const INVALIDATED: &str = "database has been invalidated";

/// Whether an error text says the DuckDB instance was invalidated.
pub fn is_invalidated(message: &str) -> bool {
    message.contains(INVALIDATED)
}

/// A lake shared by several pools; see the module docs.
pub struct SharedLake {
    lake: Mutex<Lake>,
    generation: AtomicU64,
    redactor: Redactor,
    // The catalog's credentials come from a secret (fixed for the lake's life: same config).
    rotating: bool,
    postgres: bool,
    // How reads ask the newest snapshot; replaced with the lake (a rotated DSN).
    newest: Mutex<Newest>,
}

impl std::fmt::Debug for SharedLake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedLake")
            .field("generation", &self.generation())
            .finish_non_exhaustive()
    }
}

impl SharedLake {
    /// Shares an opened lake.
    pub fn new(lake: Lake) -> SharedLake {
        let redactor = lake.redactor().clone();
        let rotating = lake.config().catalog_secret.is_some();
        let postgres = lake.config().catalog.is_postgres();
        let newest = Mutex::new(newest_of(&lake));
        SharedLake {
            lake: Mutex::new(lake),
            generation: AtomicU64::new(0),
            redactor,
            rotating,
            postgres,
            newest,
        }
    }

    /// How reads of this lake ask its newest snapshot ([`crate::request_snapshot`]).
    pub fn newest(&self) -> Newest {
        self.newest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// True when the metadata catalog is PostgreSQL (`postgres_query` reaches it).
    pub fn is_postgres(&self) -> bool {
        self.postgres
    }

    /// The redactor of the lake's secrets, shared with every reopened instance.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// The current instance's generation (0 for the first, +1 per reopening).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// A new connection (TimeZone UTC) and the generation of the instance it belongs to.
    /// An instance found invalidated here (no statement of this caller failed yet — every pooled
    /// connection may already be gone) is reopened first, else nothing would ever reopen it.
    ///
    /// # Errors
    /// DuckDB errors, redacted; a failed reopening (the catalog is still down).
    pub fn connect(&self) -> Result<(Conn, u64)> {
        let mut lake = self.lake.lock().unwrap_or_else(PoisonError::into_inner);
        match lake.connect() {
            Err(e) if is_invalidated(&e.to_string()) => {
                self.reopen(&mut lake)?;
                Ok((lake.connect()?, self.generation()))
            }
            connected => Ok((connected?, self.generation())),
        }
    }

    /// Replaces the instance of `generation` by a freshly opened lake; a no-op when another
    /// caller already replaced it.
    ///
    /// # Errors
    /// The reopening failed (e.g. the catalog is still down); the next caller tries again.
    pub fn recover(&self, generation: u64) -> Result<()> {
        let mut lake = self.lake.lock().unwrap_or_else(PoisonError::into_inner);
        if self.generation() != generation {
            return Ok(());
        }
        self.reopen(&mut lake)
    }

    /// Whether a statement error calls for [`SharedLake::recover`] ([`Lake::needs_reopen`]).
    pub fn needs_reopen(&self, message: &str) -> bool {
        is_invalidated(message) || (self.rotating && crate::is_auth_failure(message))
    }

    /// Replaces the locked instance by a freshly opened lake and bumps the generation; the old
    /// one is abandoned ([`Lake::abandon`]), never destroyed.
    fn reopen(&self, lake: &mut Lake) -> Result<()> {
        let fresh = lake.reopen()?;
        *self.newest.lock().unwrap_or_else(PoisonError::into_inner) = newest_of(&fresh);
        std::mem::replace(lake, fresh).abandon();
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        tracing::warn!(generation, "lake reopened");
        Ok(())
    }
}

/// A PostgreSQL catalog's own connection for the newest snapshot, with `lake`'s DSN (after a
/// rotation, the new one); DuckDB's `postgres_query` for a file catalog.
/// Through DuckDB when [`crate::LakeConfig::snapshot_connection`] is off.
fn newest_of(lake: &Lake) -> Newest {
    match &lake.config().catalog {
        Catalog::Postgres(dsn) if lake.config().snapshot_connection => {
            CatalogConn::start(dsn, lake.redactor().clone())
                .map_or_else(|| Newest::through_duckdb(true), Newest::over)
        }
        catalog => Newest::through_duckdb(catalog.is_postgres()),
    }
}

/// A connection checked out of a [`Pool`], tagged with the generation of its instance.
pub struct Pooled {
    // First, so it deregisters before the connection closes.
    registration: Option<Registration>,
    conn: Conn,
    generation: u64,
}

impl Pooled {
    /// The connection.
    pub fn conn(&self) -> &duckdb::Connection {
        &self.conn
    }
}

/// Idle connections to a [`SharedLake`] kept for reuse; more may be open while busy.
pub struct Pool {
    // Before the lake, so pooled connections close before the database they belong to.
    idle: Mutex<Vec<Pooled>>,
    lake: std::sync::Arc<SharedLake>,
    max_idle: usize,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("lake", &self.lake)
            .finish_non_exhaustive()
    }
}

impl Pool {
    /// A pool over `lake` keeping at most `max_idle` connections idle.
    pub fn new(lake: std::sync::Arc<SharedLake>, max_idle: usize) -> Pool {
        Pool {
            idle: Mutex::new(Vec::new()),
            lake,
            max_idle,
        }
    }

    /// The redactor of the lake's secrets.
    pub fn redactor(&self) -> &Redactor {
        self.lake.redactor()
    }

    /// The pooled lake's [`SharedLake::is_postgres`].
    pub fn is_postgres(&self) -> bool {
        self.lake.is_postgres()
    }

    /// The pooled lake's [`SharedLake::newest`].
    pub fn newest(&self) -> Newest {
        self.lake.newest()
    }

    /// An idle connection of the current instance, else a new one; idle connections of a
    /// replaced instance are dropped, never handed out. Inside [`crate::interruptible`] the
    /// connection is interrupted if the request is given up while it is checked out.
    ///
    /// # Errors
    /// DuckDB errors, redacted; [`crate::Error::Interrupted`] when the request was given up.
    pub fn checkout(&self) -> Result<Pooled> {
        let mut pooled = self.take()?;
        match interrupt::register(&pooled.conn) {
            Ok(registration) => {
                pooled.registration = registration;
                Ok(pooled)
            }
            Err(e) => {
                self.give_back(pooled, None);
                Err(e)
            }
        }
    }

    fn take(&self) -> Result<Pooled> {
        let current = self.lake.generation();
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        idle.retain(|p| p.generation == current);
        if let Some(p) = idle.pop() {
            return Ok(p);
        }
        drop(idle);
        let (conn, generation) = self.lake.connect()?;
        Ok(Pooled {
            registration: None,
            conn,
            generation,
        })
    }

    /// Runs `f` on a checked-out connection and gives it back with `f`'s error, if any (which
    /// decides whether the lake is reopened: [`Pool::give_back`]).
    ///
    /// # Errors
    /// The checkout's ([`Pool::checkout`]); `f`'s own result comes back inside.
    pub fn run<T, E: std::fmt::Display>(
        &self,
        f: impl FnOnce(&duckdb::Connection) -> std::result::Result<T, E>,
    ) -> Result<std::result::Result<T, E>> {
        let pooled = self.checkout()?;
        let out = f(pooled.conn());
        let error = out.as_ref().err().map(ToString::to_string);
        self.give_back(pooled, error.as_deref());
        Ok(out)
    }

    /// Returns a connection after its statement; `error` is the statement's error text, if it
    /// failed. A connection whose instance was invalidated (or whose catalog refused rotated
    /// credentials) is dropped and the lake reopened, so the failed request is the only one
    /// that sees it.
    pub fn give_back(&self, mut pooled: Pooled, error: Option<&str>) {
        // No longer the request's: its interrupts must not reach the connection's next user.
        pooled.registration = None;
        if error.is_some_and(|e| self.lake.needs_reopen(e)) {
            let generation = pooled.generation;
            drop(pooled);
            if let Err(e) = self.lake.recover(generation) {
                tracing::warn!(error = %e, "reopening the lake failed; the next read retries");
            }
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < self.max_idle {
            idle.push(pooled);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognizes_duckdb_invalidation() {
        assert!(is_invalidated(
            "search raw_events: FATAL Error: Failed: database has been invalidated because of a \
             previous fatal error. The database must be restarted prior to being used again."
        ));
        assert!(!is_invalidated("IO Error: Connection refused"));
    }
}
