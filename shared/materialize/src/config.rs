//! Materializer settings: every environment key as a documented constant, read once, validated,
//! with every bad key reported together (dq-materializer §11; Go names where one exists). The
//! lake (`DUCKLAKE_*`, `DUCKDB_*`), blob store (`BLOB_*`, `S3_*`) and lease
//! (`MATERIALIZER_LEASE_*`) keys belong to their crates.

use std::time::Duration;

use dq_decode::VehicleGate;

use crate::{Error, Result};

/// Snapshots per span (Go `MATERIALIZER_MAX_SNAPSHOT_SPAN`; positive only; default 16).
pub const MATERIALIZER_MAX_SNAPSHOT_SPAN: &str = "MATERIALIZER_MAX_SNAPSHOT_SPAN";
/// Pause between passes of the local loop when caught up (Go; default 15s).
pub const MATERIALIZER_POLL_INTERVAL: &str = "MATERIALIZER_POLL_INTERVAL";
/// Lambda: run spans until the deadline minus [`MATERIALIZER_DRAIN_MARGIN`] instead of one span.
pub const MATERIALIZER_DRAIN: &str = "MATERIALIZER_DRAIN";
/// Lambda drain safety margin before the deadline (dq; default 30s).
pub const MATERIALIZER_DRAIN_MARGIN: &str = "MATERIALIZER_DRAIN_MARGIN";
/// Raw rows per window (dq; Go hard-codes 100 000).
pub const MATERIALIZER_WINDOW_ROWS: &str = "MATERIALIZER_WINDOW_ROWS";
/// Resident raw payload bytes per window (dq; Go hard-codes 64 MiB).
pub const MATERIALIZER_WINDOW_BYTES: &str = "MATERIALIZER_WINDOW_BYTES";
/// Decoded-row retention for `prune` (Go; Go duration, e.g. `8760h`; empty = off).
pub const LAKE_DECODED_RETENTION: &str = "LAKE_DECODED_RETENTION";
/// Chain of the vehicle gate (Go; `0` or unset with no vehicle address disables the gate).
pub const DIMO_REGISTRY_CHAIN_ID: &str = "DIMO_REGISTRY_CHAIN_ID";
/// Vehicle NFT contract of the gate (Go; unset or the zero address disables the gate).
pub const VEHICLE_NFT_ADDRESS: &str = "VEHICLE_NFT_ADDRESS";
/// Attempts at a blob S3 refuses (403, KMS access denied) before its row is counted as poison
/// `blob_access_denied` (dq; positive; default 5; with backoff, within one window).
pub const MATERIALIZER_BLOB_ACCESS_ATTEMPTS: &str = "MATERIALIZER_BLOB_ACCESS_ATTEMPTS";
/// Print CloudWatch EMF metric lines on stdout (dq; default true).
pub const MATERIALIZER_EMF: &str = "MATERIALIZER_EMF";

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
}

impl Default for Config {
    fn default() -> Self {
        Self {
            max_snapshot_span: 16,
            poll_interval: Duration::from_secs(15),
            drain: false,
            drain_margin: Duration::from_secs(30),
            window_rows: 100_000,
            window_bytes: 64 << 20,
            retention: None,
            gate: VehicleGate::DISABLED,
            blob_access_attempts: 5,
            emf: true,
        }
    }
}

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Config> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads settings through `get`, listing every missing or malformed key at once.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Config> {
        let get = |k: &str| {
            get(k)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let mut cfg = Config::default();
        let mut bad = Vec::new();
        if let Some(v) = get(MATERIALIZER_MAX_SNAPSHOT_SPAN) {
            match v.parse::<i64>() {
                Ok(n) if n > 0 => cfg.max_snapshot_span = n,
                Ok(_) => {} // Go applies positive values only; unbounded is unreachable.
                Err(_) => bad.push(format!("{MATERIALIZER_MAX_SNAPSHOT_SPAN}: not an integer")),
            }
        }
        let mut duration = |key: &str, slot: &mut Duration| {
            if let Some(v) = get(key) {
                match parse_go_duration(&v) {
                    Some(d) => *slot = d,
                    None => bad.push(format!("{key}: not a duration like 15s or 8760h")),
                }
            }
        };
        duration(MATERIALIZER_POLL_INTERVAL, &mut cfg.poll_interval);
        duration(MATERIALIZER_DRAIN_MARGIN, &mut cfg.drain_margin);
        let mut retention = Duration::ZERO;
        duration(LAKE_DECODED_RETENTION, &mut retention);
        cfg.retention = (!retention.is_zero()).then_some(retention);
        let mut flag = |key: &str, slot: &mut bool| {
            if let Some(v) = get(key) {
                // The one boolean reading of dq's settings (QUERY_EMF reads the same way).
                match dq_metrics::parse_bool(&v) {
                    Some(on) => *slot = on,
                    None => bad.push(format!("{key}: not a boolean")),
                }
            }
        };
        flag(MATERIALIZER_DRAIN, &mut cfg.drain);
        flag(MATERIALIZER_EMF, &mut cfg.emf);
        let mut size = |key: &str, slot: &mut usize| {
            if let Some(v) = get(key) {
                match v.parse::<usize>() {
                    Ok(n) if n > 0 => *slot = n,
                    _ => bad.push(format!("{key}: not a positive integer")),
                }
            }
        };
        size(MATERIALIZER_WINDOW_ROWS, &mut cfg.window_rows);
        size(MATERIALIZER_WINDOW_BYTES, &mut cfg.window_bytes);
        size(
            MATERIALIZER_BLOB_ACCESS_ATTEMPTS,
            &mut cfg.blob_access_attempts,
        );
        let chain = match get(DIMO_REGISTRY_CHAIN_ID).map(|v| v.parse::<u64>()) {
            None => None,
            Some(Ok(n)) => Some(n),
            Some(Err(_)) => {
                bad.push(format!("{DIMO_REGISTRY_CHAIN_ID}: not an integer"));
                None
            }
        };
        if let Some(addr) = get(VEHICLE_NFT_ADDRESS) {
            match dq_cloudevent::did::parse_address(&addr) {
                Ok(contract) if contract != [0; 20] => match chain {
                    Some(chain_id) if chain_id > 0 => {
                        cfg.gate = VehicleGate {
                            chain_id,
                            vehicle_contract: contract,
                        }
                    }
                    _ => bad.push(format!(
                        "{DIMO_REGISTRY_CHAIN_ID}: required when {VEHICLE_NFT_ADDRESS} is set"
                    )),
                },
                Ok(_) => {}
                Err(_) => bad.push(format!("{VEHICLE_NFT_ADDRESS}: not a 20-byte hex address")),
            }
        }
        if bad.is_empty() {
            Ok(cfg)
        } else {
            Err(Error::Config(bad.join("; ")))
        }
    }
}

/// Go `time.ParseDuration` for the forms settings use: a sequence of `<number><unit>` with units
/// `h`, `m`, `s`, `ms`, `us`, `ns` (e.g. `1h30m`, `15s`, `8760h`). `0` alone is zero.
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    if text == "0" {
        return Some(Duration::ZERO);
    }
    let mut rest = text;
    let mut total = 0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter(|&i| i > 0)?;
        let value: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let secs = match &rest[..unit_end] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        total += value * secs;
        rest = &rest[unit_end..];
    }
    Some(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        assert_eq!(
            parse_go_duration("8760h"),
            Some(Duration::from_secs(8760 * 3600))
        );
        assert_eq!(parse_go_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_go_duration("15"), None);
        assert_eq!(parse_go_duration("x"), None);
    }

    #[test]
    fn lists_every_bad_key() {
        let env = [
            (MATERIALIZER_MAX_SNAPSHOT_SPAN, "x"),
            (MATERIALIZER_POLL_INTERVAL, "soon"),
            (MATERIALIZER_BLOB_ACCESS_ATTEMPTS, "0"),
            (
                VEHICLE_NFT_ADDRESS,
                "0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF",
            ),
        ];
        let err = Config::from_lookup(|k| {
            env.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
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
    fn defaults_and_gate() {
        let cfg = Config::from_lookup(|_| None).unwrap();
        assert_eq!(cfg.max_snapshot_span, 16);
        assert_eq!(cfg.blob_access_attempts, 5);
        assert_eq!(cfg.gate, VehicleGate::DISABLED);
        let env = [
            (DIMO_REGISTRY_CHAIN_ID, "137"),
            (
                VEHICLE_NFT_ADDRESS,
                "0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF",
            ),
            (MATERIALIZER_MAX_SNAPSHOT_SPAN, "0"),
        ];
        let cfg = Config::from_lookup(|k| {
            env.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
        .unwrap();
        assert_eq!(cfg.gate.chain_id, 137);
        assert_eq!(cfg.max_snapshot_span, 16);
    }
}
