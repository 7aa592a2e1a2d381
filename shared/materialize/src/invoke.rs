//! One entry point for every materializer action, shared by the Lambda handler and the local
//! binary: parse a request (an EventBridge scheduled event or `{"action": …}`), run it under the
//! lease, return its summary as JSON.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use dq_config::parse_go_duration;
use serde::Deserialize;
use serde_json::Value;

use crate::{Error, LeaseSession, Materializer, Result, RunSummary, Shard};

/// A materializer request.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Action {
    /// Decode one span (or drain until the deadline when `MATERIALIZER_DRAIN=true`).
    Materialize,
    /// Re-decode raw rows with `from <= time < to` without touching the cursor, a time chunk at
    /// a time, until the deadline; an incomplete run answers `next_from`, the `from` to continue
    /// with.
    Backfill {
        /// Inclusive start (RFC 3339).
        from: DateTime<Utc>,
        /// Exclusive end (RFC 3339).
        to: DateTime<Utc>,
        /// Chunk length (Go duration; default [`DEFAULT_BACKFILL_CHUNK`]): the deadline is
        /// checked between chunks, so one chunk must fit in an invocation.
        #[serde(default)]
        chunk: Option<String>,
    },
    /// Delete decoded rows older than `retention` (Go duration; default `LAKE_DECODED_RETENTION`),
    /// a day at a time, until the deadline; an incomplete run answers `"complete": false`.
    Prune {
        /// e.g. `8760h`.
        #[serde(default)]
        retention: Option<String>,
    },
    /// Recompute both rollups from the base.
    RebuildRollups,
    /// Check the invariants.
    Audit,
}

/// The backfill chunk when the payload names none.
pub const DEFAULT_BACKFILL_CHUNK: Duration = Duration::from_secs(86_400);

impl Action {
    /// The action's name as used in payloads and `--action`.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Materialize => "materialize",
            Action::Backfill { .. } => "backfill",
            Action::Prune { .. } => "prune",
            Action::RebuildRollups => "rebuild-rollups",
            Action::Audit => "audit",
        }
    }

    /// True for the maintenance actions that wait for a held lease (`MATERIALIZER_LEASE_WAIT`),
    /// asking its holder to yield. `materialize` does not: the holder is doing the same work.
    /// `audit` takes no lease.
    pub fn waits_for_lease(&self) -> bool {
        matches!(
            self,
            Action::Backfill { .. } | Action::Prune { .. } | Action::RebuildRollups
        )
    }
}

/// The shard a request runs as: its `"shard"` field (an index, as a number or a string; the
/// count is the configured one), else `configured`. Each shard's schedule names its index, so
/// one function serves every shard; maintenance actions name the shard they maintain.
pub fn requested_shard(payload: &Value, configured: Shard) -> Result<Shard> {
    let Some(field) = payload.get("shard") else {
        return Ok(configured);
    };
    let bad = |reason: String| Error::InvalidRequest {
        action: "invoke",
        reason,
    };
    let index = match field {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse::<u64>().ok(),
        _ => None,
    }
    .and_then(|i| u32::try_from(i).ok())
    .ok_or_else(|| bad(format!("`shard` must be a shard index, got {field}")))?;
    Shard::new(index, configured.count()).map_err(|why| {
        bad(format!(
            "`shard`: {why} (MATERIALIZER_SHARD_COUNT is {})",
            configured.count()
        ))
    })
}

/// Parses an invocation payload: `{"action": …}` or an EventBridge scheduled event (→ materialize).
pub fn parse_request(payload: &Value) -> Result<Action> {
    if payload.get("action").is_some() {
        return serde_json::from_value(payload.clone()).map_err(|e| Error::InvalidRequest {
            action: "invoke",
            reason: e.to_string(),
        });
    }
    let scheduled = payload.get("detail-type").and_then(Value::as_str) == Some("Scheduled Event")
        || payload.get("source").and_then(Value::as_str) == Some("aws.events");
    if scheduled {
        return Ok(Action::Materialize);
    }
    Err(Error::InvalidRequest {
        action: "invoke",
        reason: "expected an EventBridge scheduled event or an object with `action`".into(),
    })
}

/// Runs `action`. `deadline` (minus `MATERIALIZER_DRAIN_MARGIN`) bounds a drain, a backfill and
/// a prune; `until_caught_up` drains regardless of `MATERIALIZER_DRAIN` (the `--once` mode).
pub async fn invoke(
    m: &Materializer,
    action: &Action,
    lease: Option<&LeaseSession>,
    deadline: Option<Instant>,
    until_caught_up: bool,
) -> Result<Value> {
    let json = |v: Result<Value, serde_json::Error>| {
        v.map_err(|e| Error::InvalidRequest {
            action: "serialize",
            reason: e.to_string(),
        })
    };
    let margin = m.config().drain_margin;
    let stop = deadline.map(|d| d.checked_sub(margin).unwrap_or_else(Instant::now));
    match action {
        Action::Materialize => {
            let summary = if until_caught_up || m.config().drain {
                m.drain(stop, lease).await?
            } else {
                let mut run = RunSummary::default();
                run.push(&m.run_span_until(lease, stop).await?);
                run
            };
            json(serde_json::to_value(summary))
        }
        Action::Backfill { from, to, chunk } => {
            let chunk = match chunk {
                None => DEFAULT_BACKFILL_CHUNK,
                Some(text) => parse_go_duration(text)
                    .ok()
                    .filter(|c| *c >= Duration::from_secs(1))
                    .ok_or_else(|| Error::InvalidRequest {
                        action: "backfill",
                        reason: format!("chunk `{text}` is not a duration of at least 1s like 24h"),
                    })?,
            };
            let summary = m
                .backfill_chunked(*from, *to, Some(chunk), stop, lease)
                .await?;
            json(serde_json::to_value(summary))
        }
        Action::Prune { retention } => {
            let retention = match retention {
                Some(text) => parse_go_duration(text).map_err(|_| Error::InvalidRequest {
                    action: "prune",
                    reason: format!("retention `{text}` is not a duration like 8760h"),
                })?,
                None => m.config().retention.ok_or_else(|| Error::InvalidRequest {
                    action: "prune",
                    reason: "no retention given and LAKE_DECODED_RETENTION is not set".into(),
                })?,
            };
            if retention < Duration::from_secs(1) {
                return Err(Error::InvalidRequest {
                    action: "prune",
                    reason: "retention must be positive".into(),
                });
            }
            json(serde_json::to_value(m.prune(retention, stop, lease).await?))
        }
        Action::RebuildRollups => {
            if let Some(l) = lease {
                l.check().await?;
            }
            json(serde_json::to_value(m.rebuild_rollups()?))
        }
        Action::Audit => json(serde_json::to_value(m.audit()?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_requests() {
        let scheduled = json!({"version": "0", "detail-type": "Scheduled Event", "source": "aws.events", "detail": {}});
        assert_eq!(parse_request(&scheduled).unwrap(), Action::Materialize);
        let b = json!({"action": "backfill", "from": "2025-06-01T00:00:00Z", "to": "2025-06-02T00:00:00Z"});
        assert!(matches!(
            parse_request(&b).unwrap(),
            Action::Backfill { chunk: None, .. }
        ));
        let b = json!({"action": "backfill", "from": "2025-06-01T00:00:00Z", "to": "2025-06-02T00:00:00Z", "chunk": "6h"});
        let parsed = parse_request(&b).unwrap();
        assert!(matches!(&parsed, Action::Backfill { chunk: Some(c), .. } if c == "6h"));
        assert!(parsed.waits_for_lease());
        assert!(!Action::Materialize.waits_for_lease());
        assert!(!Action::Audit.waits_for_lease());
        assert_eq!(
            parse_request(&json!({"action": "rebuild-rollups"}))
                .unwrap()
                .name(),
            "rebuild-rollups"
        );
        assert!(parse_request(&json!({"action": "nope"})).is_err());
        assert!(parse_request(&json!({})).is_err());
    }

    #[test]
    fn a_request_names_its_shard() {
        let two = Shard::new(0, 2).unwrap();
        let tick = json!({"action": "materialize", "shard": 1});
        assert_eq!(parse_request(&tick).unwrap(), Action::Materialize);
        assert_eq!(
            requested_shard(&tick, two).unwrap(),
            Shard::new(1, 2).unwrap()
        );
        let prune = json!({"action": "prune", "retention": "1h", "shard": "1"});
        assert!(matches!(
            parse_request(&prune).unwrap(),
            Action::Prune { .. }
        ));
        assert_eq!(
            requested_shard(&prune, two).unwrap(),
            Shard::new(1, 2).unwrap()
        );
        assert_eq!(
            requested_shard(&json!({"action": "materialize"}), two).unwrap(),
            two
        );
        for bad in [json!(2), json!(-1), json!("x"), json!(null), json!(1.5)] {
            let err = requested_shard(&json!({"action": "materialize", "shard": bad}), two)
                .unwrap_err()
                .to_string();
            assert!(err.contains("shard"), "{err}");
        }
        assert!(
            requested_shard(&tick, Shard::ALL).is_err(),
            "one shard: index 1 is out of range"
        );
    }
}
