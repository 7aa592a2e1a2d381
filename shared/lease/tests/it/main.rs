//! Integration tests of the lease against its real backends: moto's DynamoDB API and OS file
//! locks (across handles and across processes).
//!
//! One test binary; add tests to the module of their area:
//! - `dynamo`: the DynamoDB item (exclusion, takeover, fencing, concurrency, table setup).
//! - `local`: the lock-file lease (exclusion, release on drop and crash, fence across processes).
//! - `yielding`: yield requests and waiting acquisitions, on both backends.
//! - `support`: helpers shared by the modules above.
// Integration-test helpers fail their test by panicking, like the #[test] bodies clippy.toml exempts.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::panic, clippy::indexing_slicing)]

mod dynamo;
mod local;
mod support;
mod yielding;
