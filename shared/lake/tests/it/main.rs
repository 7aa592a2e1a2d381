//! Lake integration tests, each body run against a file catalog and a PostgreSQL catalog.
//! Put tests of opening/attaching in `open.rs`, of din's raw_events table in `raw_events.rs`,
//! of `meta.din_consumer_progress` in `progress.rs`, of request interruption in `interrupt.rs`,
//! of a catalog DSN kept in Secrets Manager (rotation, connection limit) in `secret_dsn.rs`,
//! of the extension's `ducklake_add_data_files` in `added_files.rs`, of the newest-snapshot
//! question over the own catalog connection in `newest.rs`.
// Integration-test helpers fail their test by panicking, like the #[test] bodies clippy.toml exempts.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::panic, clippy::indexing_slicing)]

mod added_files;
mod interrupt;
mod newest;
mod open;
mod progress;
mod raw_events;
mod secret_dsn;
