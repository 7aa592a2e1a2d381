//! Materializer settings: every environment key as a documented constant, read once, validated,
//! with every bad key reported together (Go names where one exists). The
//! lake (`DUCKLAKE_*`, `DUCKDB_*`), blob store (`BLOB_*`, `S3_*`) and lease
//! (`MATERIALIZER_LEASE_*`) keys belong to their crates.

use std::time::Duration;

use dq_config::{Settings, VehicleRegistry};
use dq_decode::VehicleGate;

use crate::shard::Shard;
use crate::{Error, Result};

/// Snapshots per span (Go `MATERIALIZER_MAX_SNAPSHOT_SPAN`; positive only; default 16). dq
/// stretches a span of small snapshots while their raw rows fit one window (up to 16× this).
pub const MATERIALIZER_MAX_SNAPSHOT_SPAN: &str = "MATERIALIZER_MAX_SNAPSHOT_SPAN";
/// Pause between passes of the local loop when caught up (Go; default 15s).
pub const MATERIALIZER_POLL_INTERVAL: &str = "MATERIALIZER_POLL_INTERVAL";
/// Lambda: run spans until the deadline minus [`MATERIALIZER_DRAIN_MARGIN`] instead of one span.
pub const MATERIALIZER_DRAIN: &str = "MATERIALIZER_DRAIN";
/// Lambda drain safety margin before the deadline (dq; default 30s).
pub const MATERIALIZER_DRAIN_MARGIN: &str = "MATERIALIZER_DRAIN_MARGIN";
/// Raw rows per window (dq; default 200 000; Go hard-codes 100 000).
pub const MATERIALIZER_WINDOW_ROWS: &str = "MATERIALIZER_WINDOW_ROWS";
/// Resident raw payload bytes per window (dq; default 128 MiB; Go hard-codes 64 MiB). With the
/// rows decoded from them, what bounds a window's memory, twice over while the next window is
/// read ahead (docs/materializer.md).
pub const MATERIALIZER_WINDOW_BYTES: &str = "MATERIALIZER_WINDOW_BYTES";
/// Decoded-row retention for `prune` (Go; Go duration, e.g. `8760h`; empty = off).
pub const LAKE_DECODED_RETENTION: &str = "LAKE_DECODED_RETENTION";
/// Chain and vehicle NFT contract of the vehicle gate (Go; unset or the zero address disables
/// the gate; [`dq_config::VehicleRegistry::gate`]).
pub use dq_config::registry::{DIMO_REGISTRY_CHAIN_ID, VEHICLE_NFT_ADDRESS};
/// Attempts at a blob S3 refuses (403, KMS access denied) before its row is counted as poison
/// `blob_access_denied` (dq; positive; default 5; with backoff, within one window).
pub const MATERIALIZER_BLOB_ACCESS_ATTEMPTS: &str = "MATERIALIZER_BLOB_ACCESS_ATTEMPTS";
/// Print CloudWatch EMF metric lines on stdout (dq; default true).
pub const MATERIALIZER_EMF: &str = "MATERIALIZER_EMF";
/// Write new `lake.signals` rows as Parquet files of dq's own and register them, instead of
/// DuckDB's INSERT (dq; default true; an encrypted lake always INSERTs:
/// [`crate::own_writer`]).
pub const MATERIALIZER_OWN_WRITER: &str = "MATERIALIZER_OWN_WRITER";
/// This materializer's shard index, `0..MATERIALIZER_SHARD_COUNT` (dq; default 0; [`Shard`]).
pub const MATERIALIZER_SHARD_INDEX: &str = "MATERIALIZER_SHARD_INDEX";
/// Shards splitting the subject buckets between materializers, 1..=256 (dq; default 1: one
/// writer for every bucket; [`Shard`]).
pub const MATERIALIZER_SHARD_COUNT: &str = "MATERIALIZER_SHARD_COUNT";

/// The consumer name in `meta.din_consumer_progress` (Go dq's; one logical cursor).
pub const CONSUMER: &str = "dq";

/// The given settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Snapshots per span.
    pub max_snapshot_span: i64,
    /// Local-loop poll interval.
    pub poll_interval: Duration,
    /// Drain until the deadline in Lambda.
    pub drain: bool,
    /// Safety margin before the Lambda deadline.
    pub drain_margin: Duration,
    /// Raw rows per window.
    pub window_rows: usize,
    /// Raw payload bytes per window.
    pub window_bytes: usize,
    /// Decoded-row retention (prune), if any.
    pub retention: Option<Duration>,
    /// The vehicle gate for `dimo.status`.
    pub gate: VehicleGate,
    /// Attempts at a blob S3 refuses before its row is poison.
    pub blob_access_attempts: usize,
    /// Emit EMF lines.
    pub emf: bool,
    /// Write new signal rows with the own writer ([`MATERIALIZER_OWN_WRITER`]).
    pub own_writer: bool,
    /// The buckets this materializer decodes.
    pub shard: Shard,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            max_snapshot_span: 16,
            poll_interval: Duration::from_secs(15),
            drain: false,
            drain_margin: Duration::from_secs(30),
            window_rows: 200_000,
            window_bytes: 128 << 20,
            retention: None,
            gate: VehicleGate::DISABLED,
            blob_access_attempts: 5,
            emf: true,
            own_writer: true,
            shard: Shard::ALL,
        }
    }
}

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Config> {
        Self::from_lookup(dq_config::env_lookup)
    }

    /// Reads settings through `get`, listing every missing or malformed key at once.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Config> {
        let mut s = Settings::new(get);
        let mut cfg = Config::default();
        let span = s.parsed(MATERIALIZER_MAX_SNAPSHOT_SPAN, |v| {
            v.parse::<i64>().map_err(|_| "not an integer".to_string())
        });
        // Go applies positive values only; unbounded is unreachable.
        if let Some(n) = span.filter(|n| *n > 0) {
            cfg.max_snapshot_span = n;
        }
        if let Some(d) = s.go_duration(MATERIALIZER_POLL_INTERVAL) {
            cfg.poll_interval = d;
        }
        if let Some(d) = s.go_duration(MATERIALIZER_DRAIN_MARGIN) {
            cfg.drain_margin = d;
        }
        cfg.retention = s
            .go_duration(LAKE_DECODED_RETENTION)
            .filter(|d| !d.is_zero());
        cfg.drain = s.bool(MATERIALIZER_DRAIN, cfg.drain);
        cfg.emf = s.bool(MATERIALIZER_EMF, cfg.emf);
        cfg.own_writer = s.bool(MATERIALIZER_OWN_WRITER, cfg.own_writer);
        let mut size = |key: &str, slot: &mut usize| {
            let n = s.parsed(key, |v| {
                v.parse::<usize>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| "not a positive integer".to_string())
            });
            if let Some(n) = n {
                *slot = n;
            }
        };
        size(MATERIALIZER_WINDOW_ROWS, &mut cfg.window_rows);
        size(MATERIALIZER_WINDOW_BYTES, &mut cfg.window_bytes);
        size(
            MATERIALIZER_BLOB_ACCESS_ATTEMPTS,
            &mut cfg.blob_access_attempts,
        );
        let count = s.parsed(MATERIALIZER_SHARD_COUNT, |v| {
            v.parse::<u32>()
                .map_err(|_| "not a whole number".to_string())
        });
        let index = s.parsed(MATERIALIZER_SHARD_INDEX, |v| {
            v.parse::<u32>()
                .map_err(|_| "not a whole number".to_string())
        });
        if count.is_some() || index.is_some() {
            match Shard::new(index.unwrap_or(0), count.unwrap_or(1)) {
                Ok(shard) => cfg.shard = shard,
                Err(why) => s.problem(format!(
                    "{MATERIALIZER_SHARD_INDEX}/{MATERIALIZER_SHARD_COUNT}: {why}"
                )),
            }
        }
        if let Some((chain_id, vehicle_contract)) = VehicleRegistry::read(&mut s).gate(&mut s) {
            cfg.gate = VehicleGate {
                chain_id,
                vehicle_contract,
            };
        }
        s.check().map_err(Error::Config)?;
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Result<Config> {
        Config::from_lookup(dq_config::pairs_lookup(pairs))
    }

    #[test]
    fn parses_go_durations() {
        let cfg = env(&[
            (LAKE_DECODED_RETENTION, "8760h"),
            (MATERIALIZER_POLL_INTERVAL, "1h30m"),
            (MATERIALIZER_DRAIN_MARGIN, "250ms"),
        ])
        .unwrap();
        assert_eq!(cfg.retention, Some(Duration::from_secs(8760 * 3600)));
        assert_eq!(cfg.poll_interval, Duration::from_secs(5400));
        assert_eq!(cfg.drain_margin, Duration::from_millis(250));
        assert_eq!(
            env(&[(LAKE_DECODED_RETENTION, "0")]).unwrap().retention,
            None
        );
        for bad in ["15", "x"] {
            let err = env(&[(MATERIALIZER_POLL_INTERVAL, bad)])
                .unwrap_err()
                .to_string();
            assert!(err.contains(MATERIALIZER_POLL_INTERVAL), "{err}");
        }
    }

    /// One boolean rule for every setting: `on`/`off` as well as `true`/`1`/`yes`.
    #[test]
    fn booleans_take_on_and_off() {
        assert!(env(&[(MATERIALIZER_DRAIN, "on")]).unwrap().drain);
        assert!(env(&[(MATERIALIZER_DRAIN, "TRUE")]).unwrap().drain);
        assert!(!env(&[(MATERIALIZER_EMF, "off")]).unwrap().emf);
        assert!(!env(&[(MATERIALIZER_EMF, "0")]).unwrap().emf);
        assert!(env(&[]).unwrap().own_writer);
        assert!(
            !env(&[(MATERIALIZER_OWN_WRITER, "false")])
                .unwrap()
                .own_writer
        );
        let err = env(&[(MATERIALIZER_DRAIN, "maybe")])
            .unwrap_err()
            .to_string();
        assert!(err.contains(MATERIALIZER_DRAIN), "{err}");
    }

    #[test]
    fn lists_every_bad_key() {
        let err = env(&[
            (MATERIALIZER_MAX_SNAPSHOT_SPAN, "x"),
            (MATERIALIZER_POLL_INTERVAL, "soon"),
            (MATERIALIZER_BLOB_ACCESS_ATTEMPTS, "0"),
            (
                VEHICLE_NFT_ADDRESS,
                "0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF",
            ),
        ])
        .unwrap_err()
        .to_string();
        for key in [
            MATERIALIZER_MAX_SNAPSHOT_SPAN,
            MATERIALIZER_POLL_INTERVAL,
            MATERIALIZER_BLOB_ACCESS_ATTEMPTS,
            DIMO_REGISTRY_CHAIN_ID,
        ] {
            assert!(err.contains(key), "{err}");
        }
    }

    #[test]
    fn reads_the_shard() {
        assert_eq!(env(&[]).unwrap().shard, Shard::ALL);
        let cfg = env(&[
            (MATERIALIZER_SHARD_INDEX, "1"),
            (MATERIALIZER_SHARD_COUNT, "2"),
        ])
        .unwrap();
        assert_eq!(cfg.shard, Shard::new(1, 2).unwrap());
        for bad in [
            &[
                (MATERIALIZER_SHARD_INDEX, "2"),
                (MATERIALIZER_SHARD_COUNT, "2"),
            ][..],
            &[(MATERIALIZER_SHARD_INDEX, "1")][..],
            &[(MATERIALIZER_SHARD_COUNT, "0")][..],
            &[(MATERIALIZER_SHARD_COUNT, "two")][..],
        ] {
            let err = env(bad).unwrap_err().to_string();
            assert!(err.contains("MATERIALIZER_SHARD_"), "{err}");
        }
    }

    #[test]
    fn defaults_and_gate() {
        let cfg = Config::from_lookup(|_| None).unwrap();
        assert_eq!(cfg.max_snapshot_span, 16);
        assert_eq!(cfg.blob_access_attempts, 5);
        assert_eq!(cfg.gate, VehicleGate::DISABLED);
        let cfg = env(&[
            (DIMO_REGISTRY_CHAIN_ID, "137"),
            (
                VEHICLE_NFT_ADDRESS,
                "0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF",
            ),
            (MATERIALIZER_MAX_SNAPSHOT_SPAN, "0"),
        ])
        .unwrap();
        assert_eq!(cfg.gate.chain_id, 137);
        assert_eq!(cfg.max_snapshot_span, 16);
    }
}
