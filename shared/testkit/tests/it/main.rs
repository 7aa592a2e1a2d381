//! Integration tests of testkit itself, against the real PostgreSQL and moto.
//!
//! One test binary; add tests to the module of their area:
//! - `postgres`: cluster start as root, password auth, databases, restart.
//! - `moto`: server start, S3 and DynamoDB requests, reset.
//! - `cleanup`: a killed test process leaves no service behind.
//! - `support`: helpers shared by the modules above.

mod cleanup;
mod moto;
mod postgres;
mod support;
