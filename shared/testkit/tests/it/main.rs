//! Integration tests of testkit itself, against the real PostgreSQL and moto.
//!
//! One test binary; add tests to the module of their area:
//! - `postgres`: cluster start as root, password auth, databases, restart.
//! - `moto`: server start, S3 and DynamoDB requests, reset.
//! - `cleanup`: a killed test process leaves no service behind.
//! - `support`: helpers shared by the modules above.
// Integration-test helpers fail their test by panicking, like the #[test] bodies clippy.toml exempts.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::panic, clippy::indexing_slicing)]

mod cleanup;
mod moto;
mod postgres;
mod support;
