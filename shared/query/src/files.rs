//! dq's tables as the engine reads them directly ([`dq_lake::files`]): each with its layout, by
//! `subject_bucket` first, as `dq_tables::schema` creates it.

use dq_lake::files::{TableFiles, TableSpec};
use dq_tables::schema::{
    EVENTS_LATEST_COLUMNS, EVENT_COLUMNS, SIGNALS_LATEST_COLUMNS, SIGNAL_COLUMNS,
};

/// dq's partition spec of `lake.signals` and `lake.events`, as the catalog spells it.
const TIME_LAYOUT: &str = "identity:subject_bucket,year:timestamp,month:timestamp,day:timestamp";

/// dq's partition spec of the rollups: the bucket alone.
const BUCKET_LAYOUT: &str = "identity:subject_bucket";

/// A table read directly from its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileTable {
    /// `lake.signals`.
    Signals,
    /// `lake.events`.
    Events,
    /// `lake.signals_latest`.
    SignalsLatest,
    /// `lake.events_latest`.
    EventsLatest,
}

impl FileTable {
    const ALL: [FileTable; 4] = [
        FileTable::Signals,
        FileTable::Events,
        FileTable::SignalsLatest,
        FileTable::EventsLatest,
    ];

    /// The table's name in the `lake` schema `main`.
    pub(crate) fn name(self) -> &'static str {
        self.spec().name
    }

    /// How the table is laid out.
    pub(crate) fn spec(self) -> TableSpec {
        let (name, layout, columns): (_, _, &'static [(&str, &str)]) = match self {
            FileTable::Signals => ("signals", TIME_LAYOUT, &SIGNAL_COLUMNS),
            FileTable::Events => ("events", TIME_LAYOUT, &EVENT_COLUMNS),
            FileTable::SignalsLatest => ("signals_latest", BUCKET_LAYOUT, &SIGNALS_LATEST_COLUMNS),
            FileTable::EventsLatest => ("events_latest", BUCKET_LAYOUT, &EVENTS_LATEST_COLUMNS),
        };
        TableSpec {
            name,
            layout,
            key: "subject_bucket",
            columns,
        }
    }

    /// One listing cache for each of dq's tables, none loaded yet.
    pub(crate) fn listings(postgres: bool) -> Vec<TableFiles> {
        FileTable::ALL
            .map(|table| TableFiles::new(table.spec(), postgres))
            .into()
    }

    /// The table `files` lists.
    pub(crate) fn of(files: &TableFiles) -> Option<FileTable> {
        FileTable::ALL
            .into_iter()
            .find(|t| t.spec() == *files.spec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layouts are the ones `dq_tables::schema` sets, as the catalog spells them.
    #[test]
    fn layouts_match_the_schema() {
        assert_eq!(FileTable::Signals.spec().layout.split(',').count(), 4);
        assert_eq!(
            FileTable::SignalsLatest.spec().layout,
            "identity:subject_bucket"
        );
        for t in FileTable::ALL {
            assert!(t.spec().columns.iter().any(|(c, _)| *c == "subject_bucket"));
            assert_eq!(FileTable::of(&TableFiles::new(t.spec(), false)), Some(t));
        }
    }
}
