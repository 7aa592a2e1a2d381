//! The time source of lease expiry: [`SystemClock`] in production, [`ManualClock`] in tests so a
//! lease can expire without sleeping.

use std::fmt::Debug;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Says what time it is. Lease expiry is compared in whole epoch seconds (the unit of the
/// DynamoDB TTL attribute); fresh fences are seeded from milliseconds.
pub trait Clock: Send + Sync + Debug {
    /// Milliseconds since the Unix epoch.
    fn now_millis(&self) -> i64;

    /// Whole seconds since the Unix epoch (rounded down).
    fn now_secs(&self) -> i64 {
        epoch_secs(self.now_millis())
    }
}

/// Whole epoch seconds (rounded down) of `millis` since the epoch.
pub(crate) fn epoch_secs(millis: i64) -> i64 {
    millis.div_euclid(1000)
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_millis(&self) -> i64 {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(since) => i64::try_from(since.as_millis()).unwrap_or(i64::MAX),
            // A clock before 1970 is broken; report the epoch rather than a negative time.
            Err(_) => 0,
        }
    }
}

/// A clock that moves only when told to. Share it (in an `Arc`) between the handles of a test.
#[derive(Debug)]
pub struct ManualClock {
    millis: AtomicI64,
}

impl ManualClock {
    /// A clock reading `epoch_secs` seconds since the Unix epoch.
    pub fn at_secs(epoch_secs: i64) -> Self {
        ManualClock {
            millis: AtomicI64::new(epoch_secs.saturating_mul(1000)),
        }
    }

    /// A clock reading the current system time.
    pub fn starting_now() -> Self {
        ManualClock {
            millis: AtomicI64::new(SystemClock.now_millis()),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.millis.fetch_add(by, Ordering::SeqCst);
    }

    /// Sets the clock to `epoch_millis` milliseconds since the Unix epoch (backwards too).
    pub fn set_millis(&self, epoch_millis: i64) {
        self.millis.store(epoch_millis, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_millis(&self) -> i64 {
        self.millis.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::at_secs(1_000);
        assert_eq!(clock.now_secs(), 1_000);
        clock.advance(Duration::from_millis(1_500));
        assert_eq!(clock.now_millis(), 1_001_500);
        assert_eq!(clock.now_secs(), 1_001);
        clock.set_millis(-1);
        assert_eq!(clock.now_secs(), -1);
    }

    #[test]
    fn system_clock_is_after_2020() {
        assert!(SystemClock.now_secs() > 1_577_836_800);
    }
}
