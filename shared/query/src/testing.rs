//! Statements over given relations instead of the lake (feature `testing`): what dq's own
//! statements cost with their input already in memory, the floor `make bench` sets beside the
//! `signals`, `segments` and `dailyActivity` cases. Only dq-bench enables it; `make lambda` builds
//! the functions alone, without it.

use std::cell::RefCell;

use crate::files::FileTable;

thread_local! {
    /// The relations the current thread's reads of `lake.signals` and `lake.events` read.
    static OVER: RefCell<Option<Relations>> = const { RefCell::new(None) };
}

/// What [`over_relations`] answers reads from.
#[derive(Debug, Clone)]
pub struct Relations {
    /// A relation with `lake.signals`' columns, e.g. a table of the engine's in-memory
    /// database holding one vehicle's rows.
    pub signals: String,
    /// The same for `lake.events`.
    pub events: String,
    /// The oldest and newest `timestamp` (µs) of the rows in `signals`, `None` when it holds
    /// none: what the file listing tells a look-back walking into the past (there is no older
    /// row to find), so the walk costs here what it costs on the lake.
    pub signal_span_us: Option<(i64, i64)>,
}

/// Runs `f` with every read of `lake.signals` on this thread answered from
/// `over.signals` and every read of `lake.events` from `over.events`; other tables read the
/// lake.
pub fn over_relations<T>(over: &Relations, f: impl FnOnce() -> T) -> T {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            OVER.with(|o| *o.borrow_mut() = None);
        }
    }
    OVER.with(|o| *o.borrow_mut() = Some(over.clone()));
    let _reset = Reset;
    f()
}

/// The relation `table`'s reads take instead of the lake, if [`over_relations`] set one.
pub(crate) fn relation(table: FileTable) -> Option<String> {
    OVER.with(|o| {
        let over = o.borrow();
        let over = over.as_ref()?;
        match table {
            FileTable::Signals => Some(over.signals.clone()),
            FileTable::Events => Some(over.events.clone()),
            FileTable::SignalsLatest | FileTable::EventsLatest => None,
        }
    })
}

/// Whether `table`'s relation set by [`over_relations`] may hold a row in `[from_us, to_us)`,
/// as `Engine::may_hold` asks the file listing; `None` when no relation is set for `table`.
/// Only the signals' span is known: an events relation may always hold one.
pub(crate) fn may_hold(table: FileTable, (from_us, to_us): (i64, i64)) -> Option<bool> {
    OVER.with(|o| {
        let over = o.borrow();
        let over = over.as_ref()?;
        match table {
            FileTable::Signals => Some(
                over.signal_span_us
                    .is_some_and(|(oldest, newest)| oldest < to_us && newest >= from_us),
            ),
            FileTable::Events => Some(true),
            FileTable::SignalsLatest | FileTable::EventsLatest => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signals_span_answers_whether_a_window_may_hold_a_row() {
        let over = Relations {
            signals: "s".into(),
            events: "e".into(),
            signal_span_us: Some((100, 200)),
        };
        over_relations(&over, || {
            // A walk back from the oldest row stops; a window reaching it or the newest reads.
            assert_eq!(may_hold(FileTable::Signals, (i64::MIN, 100)), Some(false));
            assert_eq!(may_hold(FileTable::Signals, (i64::MIN, 101)), Some(true));
            assert_eq!(may_hold(FileTable::Signals, (200, 300)), Some(true));
            assert_eq!(may_hold(FileTable::Signals, (201, 300)), Some(false));
            assert_eq!(may_hold(FileTable::Events, (0, 1)), Some(true));
            assert_eq!(may_hold(FileTable::SignalsLatest, (0, 1)), None);
        });
        assert_eq!(may_hold(FileTable::Signals, (0, 1)), None, "reset after");
        let empty = Relations {
            signal_span_us: None,
            ..over
        };
        over_relations(&empty, || {
            assert_eq!(
                may_hold(FileTable::Signals, (i64::MIN, i64::MAX)),
                Some(false)
            );
        });
    }
}
