//! One DuckDB instance shared by a process's read paths (GraphQL engine and cloud-event reader),
//! replaced by a freshly opened one when DuckDB invalidates it.
//!
//! DuckDB invalidates a database after a fatal error — seen when the PostgreSQL catalog restarts
//! under a running query — and every later statement on any connection of that instance fails
//! with "database has been invalidated … must be restarted". A Lambda execution environment would
//! otherwise answer errors until it is recycled; instead the first reader that sees the error
//! reopens the lake from its config, and connections of the old instance are dropped as they come
//! back to their pools (each carries the generation it was opened in).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::{Lake, Redactor, Result};

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
        SharedLake {
            lake: Mutex::new(lake),
            generation: AtomicU64::new(0),
            redactor,
        }
    }

    /// The redactor of the lake's secrets (the same across reopenings: same config).
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// The current instance's generation (0 for the first, +1 per reopening).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// A new connection (TimeZone UTC) and the generation of the instance it belongs to.
    ///
    /// # Errors
    /// DuckDB errors, redacted.
    pub fn connect(&self) -> Result<(duckdb::Connection, u64)> {
        let lake = self.lake.lock().unwrap_or_else(PoisonError::into_inner);
        Ok((lake.connect()?, self.generation()))
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
        let reopened = Lake::open(lake.config().clone())?;
        *lake = reopened;
        self.generation.fetch_add(1, Ordering::SeqCst);
        tracing::warn!(
            generation = generation + 1,
            "DuckDB instance was invalidated; lake reopened"
        );
        Ok(())
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
