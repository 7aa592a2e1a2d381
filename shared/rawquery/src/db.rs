//! A small pool of DuckDB connections to one [`Lake`], used from async code: each read runs on
//! the blocking pool, and a read whose caller gave up (deadline, cancelled RPC) is interrupted
//! rather than left running. A read that finds the DuckDB instance invalidated fails and has the
//! lake reopened for the next one ([`SharedLake`]).

use crate::error::{FetchError, Result};
use crate::search::{DirectFiles, Reader};
use dq_lake::{Lake, Pool, SharedLake};
use std::sync::Arc;

/// Connections kept idle for reuse.
const MAX_IDLE: usize = 8;

/// Shared read access to the lake.
pub struct Db {
    pool: Pool,
    /// `raw_events`' file listings; `None`: every read is a DuckLake scan.
    files: Option<DirectFiles>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").finish_non_exhaustive()
    }
}

impl Db {
    /// Wraps an open lake.
    pub fn new(lake: Lake) -> Db {
        Db::on(Arc::new(SharedLake::new(lake)))
    }

    /// Reads through a lake shared with other readers (the GraphQL engine).
    pub fn on(lake: Arc<SharedLake>) -> Db {
        let pool = Pool::new(lake, MAX_IDLE);
        let files = Some(DirectFiles::new(pool.is_postgres()));
        Db { pool, files }
    }

    /// Turns direct reads of `raw_events`' files off or on (default on). Off, every read is a
    /// DuckLake scan: the reference the direct reads are tested against.
    #[must_use]
    pub fn direct_file_reads(mut self, on: bool) -> Db {
        self.files = on.then(|| DirectFiles::new(self.pool.is_postgres()));
        self
    }

    /// Loads `raw_events`' file listing at the newest snapshot before any request asks
    /// ([`dq_lake::files::preload`]): the query functions' init. `None` with direct reads off
    /// or when the load failed (logged; the first read loads it).
    pub fn preload_listing(&self) -> Option<dq_lake::files::ListingReport> {
        dq_lake::files::preload(&self.pool, self.files.as_ref()?.table_files())
    }

    /// Relations of `raw_events` read from its files directly so far (0 with direct reads
    /// off).
    pub fn direct_reads(&self) -> u64 {
        self.files.as_ref().map_or(0, DirectFiles::reads)
    }

    /// Runs `f` with a [`Reader`] on a pooled connection, off the async runtime; its statements
    /// are interrupted if the returned future is dropped first ([`dq_lake::interruptible`]).
    ///
    /// # Errors
    /// What `f` returns; [`FetchError::Internal`] if the worker panicked.
    pub async fn read<T, F>(self: &Arc<Self>, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Reader<'_>) -> Result<T> + Send + 'static,
    {
        let db = Arc::clone(self);
        dq_lake::interruptible(move || {
            db.pool.run(|conn| {
                let mut reader = Reader::new(conn, db.pool.redactor(), db.pool.newest());
                if let Some(files) = &db.files {
                    reader = reader.with_files(files);
                }
                f(&reader)
            })?
        })
        .await
        .map_err(|e| FetchError::Internal(format!("lake read task failed: {e}")))?
    }
}
