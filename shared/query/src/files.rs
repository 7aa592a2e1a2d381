//! dq's tables as the engine reads them directly ([`dq_lake::files`]): each with its layout, by
//! `subject_bucket` first, as `dq_tables::schema` creates it.

use dq_lake::files::{TableFiles, TableSpec};
use dq_tables::schema::{
    BUCKET_PARTITION, EVENTS_LATEST_COLUMNS, EVENT_COLUMNS, SIGNALS_LATEST_COLUMNS, SIGNAL_COLUMNS,
    TIME_PARTITION,
};

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

    /// How the table is laid out: as `dq_tables::schema` creates it.
    pub(crate) fn spec(self) -> TableSpec {
        let (name, partition, columns): (_, _, &'static [(&str, &str)]) = match self {
            FileTable::Signals => ("signals", TIME_PARTITION, &SIGNAL_COLUMNS),
            FileTable::Events => ("events", TIME_PARTITION, &EVENT_COLUMNS),
            FileTable::SignalsLatest => {
                ("signals_latest", BUCKET_PARTITION, &SIGNALS_LATEST_COLUMNS)
            }
            FileTable::EventsLatest => ("events_latest", BUCKET_PARTITION, &EVENTS_LATEST_COLUMNS),
        };
        TableSpec {
            name,
            partition,
            columns,
        }
    }

    /// One listing cache for each of dq's tables, none loaded yet.
    pub(crate) fn listings(postgres: bool) -> Vec<TableFiles> {
        FileTable::ALL
            .map(|table| TableFiles::new(table.spec(), postgres))
            .into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every table is read by `subject_bucket`, its first partition key and one of its columns.
    #[test]
    fn every_table_is_keyed_by_its_bucket() {
        for t in FileTable::ALL {
            let spec = t.spec();
            assert!(spec.partition.starts_with("subject_bucket"), "{t:?}");
            assert!(spec.columns.iter().any(|(c, _)| *c == "subject_bucket"));
        }
    }
}
