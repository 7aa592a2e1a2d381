//! Statements over given relations instead of the lake (feature `testing`): what dq's own
//! statements cost with their input already in memory, the floor `make bench` sets beside the
//! `signals`, `segments` and `dailyActivity` cases. Only dq-bench enables it; `make lambda` builds
//! the functions alone, without it.

use std::cell::RefCell;

use crate::files::FileTable;

thread_local! {
    /// The relations the current thread's reads of `lake.signals` and `lake.events` read.
    static OVER: RefCell<Option<(String, String)>> = const { RefCell::new(None) };
}

/// Runs `f` with every read of `lake.signals` on this thread answered from `signals` and every
/// read of `lake.events` from `events` (relations with those tables' columns, e.g. tables of the
/// engine's in-memory database holding one vehicle's rows); other tables read the lake.
pub fn over_relations<T>(signals: &str, events: &str, f: impl FnOnce() -> T) -> T {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            OVER.with(|o| *o.borrow_mut() = None);
        }
    }
    OVER.with(|o| *o.borrow_mut() = Some((signals.to_owned(), events.to_owned())));
    let _reset = Reset;
    f()
}

/// The relation `table`'s reads take instead of the lake, if [`over_relations`] set one.
pub(crate) fn relation(table: FileTable) -> Option<String> {
    OVER.with(|o| {
        let over = o.borrow();
        let (signals, events) = over.as_ref()?;
        match table {
            FileTable::Signals => Some(signals.clone()),
            FileTable::Events => Some(events.clone()),
            FileTable::SignalsLatest | FileTable::EventsLatest => None,
        }
    })
}
