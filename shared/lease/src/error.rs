//! The lease crate's error type.
//!
//! Four variants are *outcomes*, not faults: [`LeaseError::Held`] (a peer is running, skip this
//! tick), [`LeaseError::WaitExpired`] (a peer kept it for the whole wait of
//! [`crate::Lease::acquire_waiting`]), [`LeaseError::Lost`] (another holder took over, do not
//! commit) and [`LeaseError::Expiring`] (renew before committing). The rest are faults;
//! [`LeaseError::is_transient`] tells which of those a later attempt may clear.

use std::fmt;

/// Errors and refusals from acquiring, renewing, checking and releasing a lease.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Another holder has the lease and it has not expired: a peer is running.
    #[error("lease `{lease_id}` is held by `{holder}` until {expires_at} (epoch seconds)")]
    Held {
        /// The lease id (DynamoDB item key or lock file path).
        lease_id: String,
        /// The current holder.
        holder: String,
        /// When the holder's lease expires, in epoch seconds.
        expires_at: i64,
    },
    /// [`crate::Lease::acquire_waiting`] asked the holder to yield and polled for the whole wait,
    /// and the holder still has the lease.
    #[error(
        "waited {waited_secs}s for lease `{lease_id}`, still held by `{holder}` until {expires_at} \
         (epoch seconds): the holder did not yield within the wait"
    )]
    WaitExpired {
        /// The lease id.
        lease_id: String,
        /// The holder at the last attempt.
        holder: String,
        /// When the holder's lease expires, in epoch seconds.
        expires_at: i64,
        /// How long the caller waited, in whole seconds.
        waited_secs: u64,
    },
    /// The guard no longer matches the lease: it expired and a new holder took it, or it was
    /// released. The holder must not commit.
    #[error("lease `{lease_id}` with fence {fence} is lost: {reason}")]
    Lost {
        /// The lease id.
        lease_id: String,
        /// The fence the guard carried.
        fence: u64,
        /// What the lease looks like now.
        reason: LostReason,
    },
    /// The lease is still ours but expires within the safety margin of [`crate::Lease::check`];
    /// renew it before committing.
    #[error("lease `{lease_id}` expires at {expires_at} (epoch seconds), within the {margin_secs}s safety margin")]
    Expiring {
        /// The lease id.
        lease_id: String,
        /// When it expires, in epoch seconds.
        expires_at: i64,
        /// The safety margin, in seconds.
        margin_secs: u64,
    },
    /// A setting is missing or malformed (every problem, `; `-separated).
    #[error("invalid lease configuration: {0}")]
    Config(String),
    /// A DynamoDB call failed after the SDK's retries.
    #[error("dynamodb {operation} on table `{table}` failed: {message}")]
    Dynamo {
        /// The API operation (`UpdateItem`, `GetItem`, ...).
        operation: &'static str,
        /// The table name.
        table: String,
        /// The service error code, if the service answered (`ResourceNotFoundException`, ...).
        code: Option<String>,
        /// The SDK's description of the failure.
        message: String,
        /// Whether a later attempt may succeed (network, timeout, throttling, 5xx).
        transient: bool,
    },
    /// The lease table or item does not have the shape this crate writes.
    #[error("lease table `{table}`: {message}")]
    Schema {
        /// The table name.
        table: String,
        /// What is wrong.
        message: String,
    },
    /// A lock-file operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, with the path.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl LeaseError {
    /// True for faults that a later attempt may clear: network failures, timeouts, throttling
    /// and 5xx answers that outlived the SDK's retries, and interrupted local I/O.
    ///
    /// The outcomes [`Held`](Self::Held), [`Lost`](Self::Lost) and
    /// [`Expiring`](Self::Expiring) are not transient: they describe the lease, not a failure.
    pub fn is_transient(&self) -> bool {
        match self {
            LeaseError::Dynamo { transient, .. } => *transient,
            LeaseError::Io { source, .. } => matches!(
                source.kind(),
                std::io::ErrorKind::Interrupted
                    | std::io::ErrorKind::TimedOut
                    | std::io::ErrorKind::WouldBlock
            ),
            LeaseError::Held { .. }
            | LeaseError::WaitExpired { .. }
            | LeaseError::Lost { .. }
            | LeaseError::Expiring { .. }
            | LeaseError::Config(_)
            | LeaseError::Schema { .. } => false,
        }
    }

    /// A stable label for logs and metrics: `held`, `wait_expired`, `lost`, `expiring`,
    /// `config`, `dynamo`, `schema` or `io`.
    pub fn label(&self) -> &'static str {
        match self {
            LeaseError::Held { .. } => "held",
            LeaseError::WaitExpired { .. } => "wait_expired",
            LeaseError::Lost { .. } => "lost",
            LeaseError::Expiring { .. } => "expiring",
            LeaseError::Config(_) => "config",
            LeaseError::Dynamo { .. } => "dynamo",
            LeaseError::Schema { .. } => "schema",
            LeaseError::Io { .. } => "io",
        }
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        LeaseError::Io {
            context: context.into(),
            source,
        }
    }
}

/// Why a guard no longer matches its lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LostReason {
    /// The lease record is gone (DynamoDB TTL deleted it, or the lock file was removed or
    /// replaced).
    Missing,
    /// The lease was released and nobody holds it.
    Released,
    /// Another holder (or a later acquisition) has it now.
    TakenOver {
        /// The current holder.
        holder: String,
        /// The current fence.
        fence: u64,
    },
    /// This handle does not hold the lock (local backend): the guard came from another handle
    /// or was already released.
    NotHeld,
}

impl fmt::Display for LostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LostReason::Missing => f.write_str("the lease record is gone"),
            LostReason::Released => f.write_str("it was released"),
            LostReason::TakenOver { holder, fence } => {
                write!(f, "now held by `{holder}` with fence {fence}")
            }
            LostReason::NotHeld => f.write_str("this handle does not hold the lock"),
        }
    }
}

/// Result alias for the lease crate.
pub type Result<T, E = LeaseError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_are_not_transient_faults_may_be() {
        let held = LeaseError::Held {
            lease_id: "l".into(),
            holder: "h".into(),
            expires_at: 1,
        };
        assert!(!held.is_transient());
        assert_eq!(held.label(), "held");
        let throttled = LeaseError::Dynamo {
            operation: "UpdateItem",
            table: "t".into(),
            code: Some("ThrottlingException".into()),
            message: "slow down".into(),
            transient: true,
        };
        assert!(throttled.is_transient());
        let interrupted = LeaseError::io("lock", std::io::ErrorKind::Interrupted.into());
        assert!(interrupted.is_transient());
        let denied = LeaseError::io("lock", std::io::ErrorKind::PermissionDenied.into());
        assert!(!denied.is_transient());
    }

    #[test]
    fn lost_message_names_the_new_holder() {
        let lost = LeaseError::Lost {
            lease_id: "dq-materializer".into(),
            fence: 4,
            reason: LostReason::TakenOver {
                holder: "req-2".into(),
                fence: 5,
            },
        };
        assert_eq!(
            lost.to_string(),
            "lease `dq-materializer` with fence 4 is lost: now held by `req-2` with fence 5"
        );
    }
}
