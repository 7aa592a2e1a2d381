//! Reading raw rows: the change feed of a span (`ducklake_table_changes`, inserts only) or the
//! base table over a time range (backfill), paged by a total keyset (subject, time, id, rowid),
//! so rows sharing (subject, time, id) — redelivered bundles — are never skipped at a page edge
//! (the Go system's keyset lacked the tie-break).

use chrono::{DateTime, Utc};
use dq_cloudevent::RawRow;
use dq_lake::duckdb::arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, Int64Array, StringArray, TimestampMicrosecondArray,
};
use dq_lake::duckdb::arrow::compute::cast;
use dq_lake::duckdb::arrow::datatypes::{DataType, Int64Type, TimeUnit, TimestampMicrosecondType};
use dq_lake::duckdb::arrow::record_batch::RecordBatch;
use dq_lake::duckdb::{params_from_iter, Connection};
use dq_lake::{db_error, Redactor};
use serde::Deserialize;

use crate::Result;
use dq_tables::keys::{FEED_KEYSET, FEED_MISSING_TIME};

/// Where raw rows come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Inserts of snapshots `(from, to]` of `lake.raw_events`.
    Changes {
        /// Exclusive lower snapshot (the cursor).
        from: i64,
        /// Inclusive upper snapshot.
        to: i64,
    },
    /// `lake.raw_events` rows with `from <= "time" < to` (works after snapshot expiry).
    Range {
        /// Inclusive start.
        from: DateTime<Utc>,
        /// Exclusive end.
        to: DateTime<Utc>,
    },
}

/// The position after the last row read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keyset {
    subject: String,
    time: DateTime<Utc>,
    id: String,
    rowid: i64,
}

/// Where a span stands between its window transactions: its end snapshot and the position
/// after its last committed window. Every intermediate window writes it into the progress row
/// (`dq_tables::schema::RESUME_COLUMN`) in its own transaction, so a span cut short by a
/// deadline, a yield or a killed Lambda continues after its committed rows; the final window
/// clears it as it moves the cursor. The span keeps its end: a larger one would add rows that
/// sort before the position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resume {
    /// The span's inclusive end snapshot.
    pub to: i64,
    /// The position after the last committed window.
    pub after: Keyset,
}

/// [`Resume`] as stored: JSON with the time in microseconds (the column's precision), written
/// by [`Resume::encode`].
#[derive(Deserialize)]
struct StoredResume {
    to: i64,
    subject: String,
    time_us: i64,
    id: String,
    rowid: i64,
}

impl Resume {
    /// The stored text.
    pub fn encode(&self) -> String {
        serde_json::json!({
            "to": self.to,
            "subject": self.after.subject,
            "time_us": dq_cloudevent::time::micros(self.after.time),
            "id": self.after.id,
            "rowid": self.after.rowid,
        })
        .to_string()
    }

    /// Reads the stored text; `None` when it is not one (the span then starts over, which the
    /// write-key anti-join makes harmless).
    pub fn decode(text: &str) -> Option<Resume> {
        let s: StoredResume = serde_json::from_str(text).ok()?;
        Some(Resume {
            to: s.to,
            after: Keyset {
                subject: s.subject,
                time: dq_cloudevent::time::from_micros(s.time_us).ok()?,
                id: s.id,
                rowid: s.rowid,
            },
        })
    }
}

/// One raw row and its keyset position (the row's subject, time and id, and its `rowid`).
#[derive(Debug, Clone)]
pub struct FeedRow {
    /// The row.
    pub row: RawRow,
    /// Its DuckLake row id, the keyset's tie-break.
    pub rowid: i64,
    /// The poison reason of a row lacking its subject, time or id (`missing_subject`,
    /// `missing_time`, `missing_id`): it keeps its keyset position (`dq_tables::keys::
    /// FEED_KEYSET`), is counted and never decoded.
    pub missing: Option<&'static str>,
}

impl FeedRow {
    /// What a window's byte budget counts of the row before blobs are fetched: the bytes of its
    /// inline payload (`data` or `data_base64`) if dq decodes its type, as the resolved payloads
    /// count them. A row of another type (a fingerprint, a tombstone) is dropped when the window
    /// resolves; counting its payload here cut a window's read short of what the resolved bytes
    /// allow, and a second statement, a scan of the span, read the few rows left.
    pub fn budget_bytes(&self) -> usize {
        if !crate::resolve::decodable(&self.row.event_type) {
            return 0;
        }
        self.row.data.as_ref().map_or(0, String::len)
            + self.row.data_base64.as_ref().map_or(0, Vec::len)
    }

    /// Its position: only a chunk's last row needs one, so rows do not carry it.
    pub fn key(&self) -> Keyset {
        Keyset {
            subject: self.row.subject.clone(),
            time: self.row.time,
            id: self.row.id.clone(),
            rowid: self.rowid,
        }
    }
}

const COLUMNS: &str = "subject, \"time\", type, id, source, producer, data_content_type, \
    data_version, extras, data, data_base64, data_index_key, voids_id, rowid";

pub use dq_cloudevent::time::sql_literal as ts_literal;

/// Rows one [`read_chunk`] statement read.
#[derive(Debug, Default)]
pub struct Chunk {
    /// The rows, in keyset order.
    pub rows: Vec<FeedRow>,
    /// The read stopped because the rows' [`FeedRow::budget_bytes`] reached its `max_bytes`
    /// (rows may follow in the span).
    pub budget_reached: bool,
}

/// Reads up to `limit` rows after `after` in keyset order, stopping early once the inline
/// payloads of the rows dq decodes ([`FeedRow::budget_bytes`]) reach `max_bytes`. One statement
/// per call: the keyset sort of a span is paid once per window, not once per small page.
pub fn read_chunk(
    redactor: &Redactor,
    conn: &Connection,
    source: Source,
    after: Option<&Keyset>,
    limit: usize,
    max_bytes: usize,
) -> Result<Chunk> {
    let (from, mut filter) = match source {
        Source::Changes { from, to } => (
            format!(
                "ducklake_table_changes('lake', 'main', 'raw_events', {}, {to})",
                from + 1
            ),
            vec!["change_type = 'insert'".to_owned()],
        ),
        Source::Range { from, to } => (
            "lake.raw_events".to_owned(),
            vec![format!(
                "\"time\" >= '{}'::TIMESTAMPTZ AND \"time\" < '{}'::TIMESTAMPTZ",
                ts_literal(from),
                ts_literal(to)
            )],
        ),
    };
    let mut params: Vec<dq_lake::duckdb::types::Value> = Vec::new();
    if let Some(k) = after {
        let [subject, time, id, rowid] = FEED_KEYSET;
        filter.push(format!(
            "({subject} > ? OR ({subject} = ? AND ({time} > ?::TIMESTAMPTZ OR ({time} = ?::TIMESTAMPTZ \
             AND ({id} > ? OR ({id} = ? AND {rowid} > ?))))))"
        ));
        let t = ts_literal(k.time);
        params.extend([
            k.subject.clone().into(),
            k.subject.clone().into(),
            t.clone().into(),
            t.into(),
            k.id.clone().into(),
            k.id.clone().into(),
            k.rowid.into(),
        ]);
    }
    let sql = format!(
        "SELECT {COLUMNS} FROM {from} WHERE {} ORDER BY {} LIMIT {limit}",
        filter.join(" AND "),
        FEED_KEYSET.join(", ")
    );
    let failed = |e| db_error(redactor, "read raw_events", e);
    let mut stmt = conn.prepare(&sql).map_err(failed)?;
    // Column by column from Arrow: the row-by-row accessor's per-cell lookups were about as
    // long as the statement itself for a window of raw rows.
    let batches = stmt.query_arrow(params_from_iter(params)).map_err(failed)?;
    let mut out = Chunk::default();
    let mut bytes = 0usize;
    for batch in batches {
        let columns = RawColumns::of(&batch).map_err(|message| crate::Error::Arrow {
            table: "raw_events",
            message,
        })?;
        for i in 0..batch.num_rows() {
            let row = columns.row(i);
            bytes += row.budget_bytes();
            out.rows.push(row);
            if bytes >= max_bytes {
                out.budget_reached = true;
                return Ok(out);
            }
        }
    }
    Ok(out)
}

/// The columns of one batch of [`COLUMNS`], as the types rows are built from.
struct RawColumns {
    text: [StringArray; 8],
    time: TimestampMicrosecondArray,
    data: StringArray,
    data_base64: BinaryArray,
    data_index_key: StringArray,
    voids_id: StringArray,
    rowid: Int64Array,
}

impl RawColumns {
    fn of(batch: &RecordBatch) -> std::result::Result<RawColumns, String> {
        let column = |i: usize, to: &DataType| -> std::result::Result<ArrayRef, String> {
            let c = batch
                .columns()
                .get(i)
                .ok_or_else(|| format!("raw_events read has no column {i}"))?;
            // Taken as it is when DuckDB exports the type asked for (VARCHAR as Utf8, BLOB as
            // Binary, TIMESTAMPTZ as microseconds in any zone: the values are UTC either way);
            // only a differently configured export pays a conversion.
            match (c.data_type(), to) {
                (DataType::Timestamp(TimeUnit::Microsecond, _), DataType::Timestamp(..)) => {
                    Ok(c.clone())
                }
                _ => cast(c, to).map_err(|e| format!("raw_events column {i}: {e}")),
            }
        };
        let string = |i: usize| -> std::result::Result<StringArray, String> {
            Ok(column(i, &DataType::Utf8)?.as_string::<i32>().clone())
        };
        let micros = DataType::Timestamp(TimeUnit::Microsecond, None);
        Ok(RawColumns {
            text: [
                string(0)?,
                string(2)?,
                string(3)?,
                string(4)?,
                string(5)?,
                string(6)?,
                string(7)?,
                string(8)?,
            ],
            time: column(1, &micros)?
                .as_primitive::<TimestampMicrosecondType>()
                .clone(),
            data: string(9)?,
            data_base64: column(10, &DataType::Binary)?.as_binary::<i32>().clone(),
            data_index_key: string(11)?,
            voids_id: string(12)?,
            rowid: column(13, &DataType::Int64)?
                .as_primitive::<Int64Type>()
                .clone(),
        })
    }

    /// Row `i`, a missing subject, time or id as its keyset position has it.
    fn row(&self, i: usize) -> FeedRow {
        let text = |a: &StringArray| {
            if a.is_valid(i) {
                a.value(i).to_owned()
            } else {
                String::new()
            }
        };
        let opt = |a: &StringArray| a.is_valid(i).then(|| a.value(i).to_owned());
        let [subject, event_type, id, source, producer, data_content_type, data_version, extras] =
            &self.text;
        let missing = if subject.is_null(i) {
            Some("missing_subject")
        } else if self.time.is_null(i) {
            Some("missing_time")
        } else if id.is_null(i) {
            Some("missing_id")
        } else {
            None
        };
        let time = if self.time.is_valid(i) {
            self.time.value(i)
        } else {
            FEED_MISSING_TIME
        };
        FeedRow {
            row: RawRow {
                subject: text(subject),
                time: dq_cloudevent::time::from_micros_saturating(time),
                event_type: text(event_type),
                id: text(id),
                source: text(source),
                producer: text(producer),
                data_content_type: text(data_content_type),
                data_version: text(data_version),
                extras: text(extras),
                data: opt(&self.data),
                data_base64: self
                    .data_base64
                    .is_valid(i)
                    .then(|| self.data_base64.value(i).to_vec()),
                data_index_key: opt(&self.data_index_key),
                voids_id: opt(&self.voids_id),
            },
            rowid: self.rowid.value(i),
            missing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keyset_orders_a_missing_time_where_the_reader_records_it() {
        let at = dq_cloudevent::time::from_micros(FEED_MISSING_TIME).unwrap();
        assert!(FEED_KEYSET[1].contains(&format!("'{}'", ts_literal(at))));
        assert_eq!(ts_literal(at), "9999-12-31 23:59:59.999999+00");
    }

    #[test]
    fn resume_round_trips_and_refuses_other_text() {
        let r = Resume {
            to: 42,
            after: Keyset {
                subject: "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:7".into(),
                time: dq_cloudevent::time::from_micros(1_750_000_000_123_456).unwrap(),
                id: "a \"quoted\" id".into(),
                rowid: 9,
            },
        };
        assert_eq!(Resume::decode(&r.encode()), Some(r));
        assert_eq!(Resume::decode(""), None);
        assert_eq!(Resume::decode("{\"to\":1}"), None);
    }
}
