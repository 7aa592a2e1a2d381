//! The request context resolvers read: who calls ([`Caller`]), until when ([`Deadline`]), how
//! many statements may run at once ([`StatementSlots`]), whether execution started
//! ([`Executed`]), and [`run`], which puts an engine call on the blocking pool under them.

use crate::dialect::{Dialect, DialectExt};
use crate::errors;
use async_graphql::dynamic::{FieldValue, ResolverContext};
use async_graphql::{Context, Error, Result};
use dq_auth::Principal;
use dq_query::Engine;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The authenticated caller of a request (`None` = no credentials), as request data.
#[derive(Debug, Clone, Default)]
pub struct Caller(pub Option<Principal>);

/// The request's deadline (MAX_REQUEST_DURATION), as request data.
#[derive(Debug, Clone, Copy)]
pub struct Deadline(pub tokio::time::Instant);

/// The request's authenticated caller, if any.
pub(crate) fn caller<'a>(ctx: &Context<'a>) -> Option<&'a Principal> {
    ctx.data_opt::<Caller>().and_then(|c| c.0.as_ref())
}

/// Runs a blocking engine call on the blocking pool, bounded by the request deadline; its
/// DuckDB statements are interrupted when the deadline passes or the request is dropped.
pub(crate) async fn run<T: Send + 'static>(
    ctx: &Context<'_>,
    f: impl FnOnce(&Engine) -> dq_query::Result<T> + Send + 'static,
) -> Result<T> {
    let engine = Arc::clone(ctx.data::<Arc<Engine>>()?);
    let task = dq_lake::interruptible(move || f(&engine));
    let joined = match ctx.data_opt::<Deadline>() {
        Some(d) => tokio::time::timeout_at(d.0, task)
            .await
            .map_err(|_| errors::timeout(Dialect::of(ctx)))?,
        None => task.await,
    };
    joined
        .map_err(|e| {
            tracing::error!(error = %e, "query task failed");
            errors::from_query(dq_query::Error::Database {
                context: "query task".into(),
                message: e.to_string(),
            })
        })?
        .map_err(errors::from_query)
}

/// Set once a resolver runs: the request passed parsing and validation (for the 422 rule).
#[derive(Debug, Default)]
pub struct Executed(pub std::sync::atomic::AtomicBool);

/// Records that execution started.
pub fn mark_executed(ctx: &ResolverContext<'_>) {
    if let Some(e) = ctx.ctx.data_opt::<Arc<Executed>>() {
        e.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A nullable field's failure: null plus an error carrying the field's path (async-graphql's
/// dynamic executor would otherwise drop the key, or the whole object, and the path).
pub fn nullable(
    ctx: &ResolverContext<'_>,
    result: Result<Option<FieldValue<'static>>>,
) -> Result<Option<FieldValue<'static>>> {
    mark_executed(ctx);
    result.or_else(|e| {
        let error = ctx
            .ctx
            .set_error_path(e.into_server_error(ctx.ctx.item.pos));
        ctx.ctx.add_error(error);
        Ok(None)
    })
}

/// An auth rule's failure in the request dialect's words.
pub(crate) fn auth_error(ctx: &Context<'_>, e: &dq_auth::AuthError) -> Error {
    errors::from_auth(Dialect::of(ctx), e)
}

/// The largest accepted `MAX_CONCURRENT_STATEMENTS_PER_REQUEST` (a request names at most ten
/// root fields anyway).
pub const MAX_STATEMENTS_PER_REQUEST: usize = 1000;

/// The SQL statements one request may run at once, as request data: every root resolver holds a
/// slot while it runs (a request's root fields are resolved concurrently).
#[derive(Debug, Clone)]
pub struct StatementSlots(Arc<Semaphore>);

impl StatementSlots {
    /// `n` slots, held to the accepted range of `MAX_CONCURRENT_STATEMENTS_PER_REQUEST` (0 slots
    /// would stall every root field until the deadline).
    pub fn new(n: usize) -> StatementSlots {
        let n = n.clamp(1, MAX_STATEMENTS_PER_REQUEST);
        StatementSlots(Arc::new(Semaphore::new(n)))
    }

    /// Waits for a slot of the request (the request deadline bounds the wait); a schema executed
    /// without slots (a test driving it directly) is not bounded.
    ///
    /// # Errors
    /// The semaphore was closed (never done).
    pub async fn acquire(ctx: &Context<'_>) -> Result<Option<OwnedSemaphorePermit>> {
        let Some(slots) = ctx.data_opt::<StatementSlots>() else {
            return Ok(None);
        };
        Arc::clone(&slots.0)
            .acquire_owned()
            .await
            .map(Some)
            .map_err(|e| Error::new(format!("statement slots: {e}")))
    }
}
