//! Test fixtures (feature `testing`) for every crate that feeds or reads din's lake: the DIDs of
//! the test fleet, one `RawEvent` builder, and a fresh lake as din leaves it after first boot.

use chrono::{DateTime, Utc};
use dq_cloudevent::event::{CloudEventHeader, RawEvent};
use dq_cloudevent::RawRow;
use dq_lake::testing::{Backend, TestLake};
use dq_lake::Lake;

/// The vehicle NFT contract; a vehicle's subject is `{VEHICLE}:{token}`.
pub const VEHICLE: &str = "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF";
/// The aftermarket-device contract; a producer is `{PRODUCER}:{token}`.
pub const PRODUCER: &str = "did:erc721:137:0x9c94C395cBcBDe662235E0A9d3bB87Ad708561BA";
/// The connection address every event comes from unless a test says otherwise.
pub const SOURCE: &str = "0xF26421509Efe92861a587482100c6d728aBf1CD0";

/// The subject DID of vehicle `token`.
pub fn subject(token: u32) -> String {
    format!("{VEHICLE}:{token}")
}

/// The producer DID of vehicle `token`'s device.
pub fn producer(token: u32) -> String {
    format!("{PRODUCER}:{token}")
}

/// Builds a `RawEvent` with a JSON payload (`application/json`, `default/v1.0`) from [`SOURCE`],
/// produced by `{subject}-producer`; the setters override those, [`EventBuilder::data`] finishes.
pub struct EventBuilder(RawEvent);

impl EventBuilder {
    /// An event `id` of `event_type` about `subject` at `time`.
    pub fn new(
        subject: impl Into<String>,
        id: &str,
        event_type: &str,
        time: DateTime<Utc>,
    ) -> Self {
        let subject = subject.into();
        EventBuilder(RawEvent {
            header: CloudEventHeader {
                event_type: event_type.into(),
                source: SOURCE.into(),
                producer: format!("{subject}-producer"),
                subject,
                id: id.into(),
                time,
                data_content_type: "application/json".into(),
                data_version: "default/v1.0".into(),
                ..Default::default()
            },
            data: None,
            data_base64: None,
        })
    }

    /// The connection address the event comes from.
    pub fn source(mut self, source: &str) -> Self {
        self.0.header.source = source.into();
        self
    }

    /// The device (or other DID) that produced the event.
    pub fn producer(mut self, producer: impl Into<String>) -> Self {
        self.0.header.producer = producer.into();
        self
    }

    /// The payload's `dataversion`, which routes it to a decoder.
    pub fn data_version(mut self, data_version: &str) -> Self {
        self.0.header.data_version = data_version.into();
        self
    }

    /// The event with its JSON payload `data`.
    pub fn data(mut self, data: impl Into<String>) -> RawEvent {
        self.0.data = Some(data.into());
        self.0
    }
}

/// An event of vehicle `token` with a JSON payload, from [`SOURCE`] and the vehicle's device.
pub fn event(token: u32, id: &str, event_type: &str, time: DateTime<Utc>, data: &str) -> RawEvent {
    EventBuilder::new(subject(token), id, event_type, time)
        .producer(producer(token))
        .data(data)
}

/// Opens `t` as din leaves it after first boot: `lake.raw_events`, ready to receive bundles, and
/// `meta.din_consumer_progress` (a side database: no lake snapshot).
pub fn open_din_lake(t: &TestLake) -> Lake {
    let lake = t.open().unwrap();
    dq_lake::raw::ensure(&lake).unwrap();
    dq_lake::progress::ensure(&lake).unwrap();
    lake
}

/// A fresh lake on `backend` as [`open_din_lake`] leaves it, and its scratch directory (dropped
/// with it).
pub fn din_lake(backend: Backend) -> (TestLake, Lake) {
    let t = TestLake::new(backend);
    let lake = open_din_lake(&t);
    (t, lake)
}

/// A not yet created lake whose catalog is `dsn`, a database on a PostgreSQL server the test
/// owns (so it can stop or restart it without failing other tests); data in its scratch dir.
pub fn lake_on_postgres(dsn: &str) -> TestLake {
    let mut t = TestLake::new(Backend::File);
    t.backend = Backend::Postgres;
    t.config = dq_lake::LakeConfig::new(dsn, Some(&t.path("data").display().to_string()));
    t.config.extension_dir = dq_lake::testing::extension_dir();
    t.config.threads = Some(2);
    t
}

/// Retention under which every snapshot older than a nanosecond may expire, held back only by
/// consumers seen within the hour (din's staleness): drives a consumer into the expired-feed
/// path.
pub fn tiny_retention() -> crate::maintain::Retention {
    crate::maintain::Retention {
        keep: chrono::Duration::nanoseconds(1),
        staleness: chrono::Duration::hours(1),
    }
}

/// Every row `raw_events` gained between two snapshots (both included), all columns, in
/// insertion order.
pub fn inserted_rows(lake: &Lake, from: i64, to: i64) -> Vec<RawRow> {
    let mut stmt = lake
        .conn()
        .prepare(
            "SELECT subject, \"time\", type, id, source, producer, data_content_type, data_version, extras, \
             data, data_base64, data_index_key, voids_id FROM ducklake_table_changes('lake', 'main', 'raw_events', ?, ?) \
             WHERE change_type = 'insert' ORDER BY snapshot_id, rowid",
        )
        .unwrap();
    stmt.query_map([from, to], |r| {
        Ok(RawRow {
            subject: r.get(0)?,
            time: r.get::<_, DateTime<Utc>>(1)?,
            event_type: r.get(2)?,
            id: r.get(3)?,
            source: r.get(4)?,
            producer: r.get(5)?,
            data_content_type: r.get(6)?,
            data_version: r.get(7)?,
            extras: r.get(8)?,
            data: r.get(9)?,
            data_base64: r.get(10)?,
            data_index_key: r.get(11)?,
            voids_id: r.get(12)?,
        })
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}
