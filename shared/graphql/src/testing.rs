//! Test support (feature `testing`, enabled from dev-dependencies only): a deployment over one
//! lake, served on a local port, as the graphql suite, `dqctl reconcile`'s tests and the
//! reliability load test start one.

use crate::cloud_events::CloudEvents;
use crate::dialect::{Dialect, DialectSettings};
use crate::http::{share_lake, AppState, Limits};
use dq_auth::TokenValidator;
use std::net::SocketAddr;
use std::sync::Arc;

/// A `dialect` deployment over `lake` alone: default dialect settings, tokens checked by
/// `validator`, cloud events read from the same lake with no blob store and no device links.
///
/// # Errors
/// The schema cannot be built (a bug).
pub fn state(
    dialect: Dialect,
    lake: dq_lake::Lake,
    validator: TokenValidator,
    limits: Limits,
) -> Result<AppState, String> {
    let (engine, db) = share_lake(lake);
    Ok(AppState::new(
        dialect,
        DialectSettings::default(),
        Arc::new(engine),
        Some(validator),
        limits,
    )?
    .with_cloud_events(CloudEvents::new(db, None, None)))
}

/// Serves `app` on a free 127.0.0.1 port until the runtime ends; returns the address.
///
/// # Errors
/// No port could be bound.
pub async fn serve(app: axum::Router) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("test server on {addr}: {e}");
        }
    });
    Ok(addr)
}
