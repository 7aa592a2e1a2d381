//! Cloud-event searches over `lake.raw_events` (dq-query.md §4.4, §4.4.1, §4.4.2, §4.5).
//!
//! Every query: the filter's predicates (all values bound as `?` parameters, never
//! interpolated), voiding (tombstone rows and the `(subject, id)` they void are hidden), then
//! one row per dedup key `(subject, second-truncated time, type, source, id)` keeping the
//! earliest, ordered by `time, id, type` in the requested direction.

use crate::error::{FetchError, Result};
use crate::filter::{Filter, Order, StringFilter};
use chrono::{DateTime, SecondsFormat, Utc};
use dq_cloudevent::event::{CloudEventHeader, RawEvent};
use dq_cloudevent::row::RawRow;
use lake::duckdb::types::Value;
use lake::duckdb::{self, Connection};
use lake::Redactor;

/// Locator prefix of an index whose payload is inline in its row (§4.3).
pub const LAKE_KEY_PREFIX: &str = "lake://";

/// A matching event's header and the key of its payload: the blob object key when the payload
/// is externalized, else `lake://<subject>/<id>`.
#[derive(Debug, Clone, PartialEq)]
pub struct Index {
    /// The reconstructed header (spec version `1.0`, UTC time, extras lifted).
    pub header: CloudEventHeader,
    /// The index key.
    pub key: String,
}

/// An event with its payload: `data` for JSON text and blobs, `data_base64` for binary inline
/// payloads; at most one is non-empty.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Event {
    /// The header.
    pub header: CloudEventHeader,
    /// Payload bytes.
    pub data: Vec<u8>,
    /// Base64 text of a binary inline payload.
    pub data_base64: String,
}

/// Per-type counts of a search (§4.4.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeSummary {
    /// The event type.
    pub event_type: String,
    /// Deduplicated, non-voided events of this type.
    pub count: u64,
    /// Earliest event time.
    pub first_seen: DateTime<Utc>,
    /// Latest event time.
    pub last_seen: DateTime<Utc>,
}

/// A row fetched by id for payload resolution.
#[derive(Debug, Clone)]
pub(crate) struct StoredRow {
    pub event: RawEvent,
    pub data_index_key: Option<String>,
}

/// Rows per id a by-id query may return (one id can appear under several types).
pub const ROWS_PER_ID: usize = 8;
/// Ids per by-id query (125 × 8 = 1000 rows).
pub const IDS_PER_QUERY: usize = 125;

/// Header columns in the order [`read_row`] expects; payload columns follow when requested.
const HEADER_COLUMNS: &str = r#"r.subject, epoch_us(r."time"), r.type, r.id, r.source, r.producer, r.data_content_type, r.data_version, r.extras, r.data_index_key"#;
const PAYLOAD_COLUMNS: &str = ", r.data, r.data_base64";
/// One row per dedup key, the earliest kept.
const DEDUP: &str = r#" QUALIFY row_number() OVER (PARTITION BY r.subject, date_trunc('second', r."time"), r.type, r.source, r.id ORDER BY r."time") = 1"#;

/// Read access to `raw_events` on one DuckDB connection (with the lake attached and
/// `TimeZone = 'UTC'`). Errors are redacted with `redactor`.
pub struct Reader<'a> {
    conn: &'a Connection,
    redactor: &'a Redactor,
}

impl<'a> Reader<'a> {
    /// A reader over `conn`.
    pub fn new(conn: &'a Connection, redactor: &'a Redactor) -> Reader<'a> {
        Reader { conn, redactor }
    }

    /// Up to `limit` matching indexes (`limit` is clamped to 1..=1000), in the filter's order;
    /// `[]` when nothing matches. Unscoped searches get the 400-day floor.
    ///
    /// # Errors
    /// [`FetchError::Lake`] when the query fails.
    pub fn search(&self, filter: &Filter, limit: usize) -> Result<Vec<Index>> {
        self.search_at(filter, limit, filter.order, Utc::now())
    }

    /// The newest matching index, regardless of the filter's order.
    ///
    /// # Errors
    /// [`FetchError::NotFound`] when nothing matches; [`FetchError::Lake`].
    pub fn latest(&self, filter: &Filter) -> Result<Index> {
        self.search_at(filter, 1, Order::Descending, Utc::now())?
            .into_iter()
            .next()
            .ok_or(FetchError::NotFound)
    }

    fn search_at(
        &self,
        filter: &Filter,
        limit: usize,
        order: Order,
        now: DateTime<Utc>,
    ) -> Result<Vec<Index>> {
        let mut q = Query::new(&format!(
            "SELECT {HEADER_COLUMNS} FROM lake.raw_events r WHERE true"
        ));
        q.filter(filter, filter.effective_after(now));
        let dir = match order {
            Order::Descending => "DESC",
            Order::Ascending => "ASC",
        };
        let limit = crate::filter::clamp_limit(limit as i64);
        q.text.push_str(&format!(
            "{DEDUP} ORDER BY r.\"time\" {dir}, r.id {dir}, r.type {dir} LIMIT {limit}"
        ));
        self.query("search raw_events", &q, false)?
            .into_iter()
            .map(|row| {
                let key = index_key(&row);
                Ok(Index {
                    header: row.event.header,
                    key,
                })
            })
            .collect()
    }

    /// Per-type `count`, first and last time over the deduplicated, non-voided matches, ordered
    /// by type; no 400-day floor; `[]` when empty.
    ///
    /// # Errors
    /// [`FetchError::Lake`].
    pub fn type_summaries(&self, filter: &Filter) -> Result<Vec<TypeSummary>> {
        let mut q = Query::new(
            "SELECT type, count(*), epoch_us(min(\"time\")), epoch_us(max(\"time\")) FROM \
             (SELECT r.type, r.\"time\" FROM lake.raw_events r WHERE true",
        );
        q.filter(filter, filter.after);
        q.text
            .push_str(&format!("{DEDUP}) GROUP BY type ORDER BY type"));
        let ctx = "summarize raw_events types";
        let mut stmt = match self.conn.prepare(&q.text) {
            Ok(stmt) => stmt,
            Err(e) if Self::no_table(&e) => return Ok(Vec::new()),
            Err(e) => return Err(self.error(ctx, e)),
        };
        let rows = stmt
            .query_map(duckdb::params_from_iter(q.params.iter()), |r| {
                Ok((
                    r.get::<_, Option<String>>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, i64>(3)?,
                ))
            })
            .and_then(|rows| rows.collect::<duckdb::Result<Vec<_>>>())
            .map_err(|e| self.error(ctx, e))?;
        rows.into_iter()
            .map(|(t, count, first, last)| {
                Ok(TypeSummary {
                    event_type: t.unwrap_or_default(),
                    count: u64::try_from(count).unwrap_or(0),
                    first_seen: from_micros(first)?,
                    last_seen: from_micros(last)?,
                })
            })
            .collect()
    }

    /// Non-voided, deduplicated rows of `subject` whose id is one of `ids` (at most
    /// [`IDS_PER_QUERY`]), payload columns included, newest first, at most
    /// [`ROWS_PER_ID`] × `ids.len()` rows.
    pub(crate) fn by_ids(&self, subject: &str, ids: &[&str]) -> Result<Vec<StoredRow>> {
        let mut q = Query::new(&format!(
            "SELECT {HEADER_COLUMNS}{PAYLOAD_COLUMNS} FROM lake.raw_events r WHERE true"
        ));
        let filter = Filter {
            subject: StringFilter::eq(subject),
            id: StringFilter::any_of(ids.iter().copied()),
            ..Filter::default()
        };
        q.filter(&filter, None);
        let limit = ROWS_PER_ID * ids.len().max(1);
        q.text.push_str(&format!(
            "{DEDUP} ORDER BY r.\"time\" DESC, r.id DESC, r.type DESC LIMIT {limit}"
        ));
        let rows = self.query("read raw_events by id", &q, true)?;
        if rows.len() == limit {
            tracing::warn!(
                subject,
                ids = ids.len(),
                "by-id payload query hit its row limit"
            );
        }
        Ok(rows)
    }

    fn query(&self, ctx: &str, q: &Query, payload: bool) -> Result<Vec<StoredRow>> {
        let mut stmt = match self.conn.prepare(&q.text) {
            Ok(stmt) => stmt,
            Err(e) if Self::no_table(&e) => return Ok(Vec::new()),
            Err(e) => return Err(self.error(ctx, e)),
        };
        let raw = stmt
            .query_map(duckdb::params_from_iter(q.params.iter()), |r| {
                read_row(r, payload)
            })
            .and_then(|rows| rows.collect::<duckdb::Result<Vec<_>>>())
            .map_err(|e| self.error(ctx, e))?;
        raw.into_iter().map(stored_row).collect()
    }

    /// A redacted query error. Only DuckDB's first line is kept: the rest quotes the SQL,
    /// which clients have no use for.
    fn error(&self, ctx: &str, e: duckdb::Error) -> FetchError {
        let text = self.redactor.redact(&e.to_string());
        FetchError::Lake(lake::Error::Duckdb {
            context: ctx.to_string(),
            message: text.lines().next().unwrap_or_default().to_string(),
        })
    }

    /// True when `raw_events` does not exist yet (dq started before din on a fresh catalog):
    /// that is "no events", not a failure.
    fn no_table(e: &duckdb::Error) -> bool {
        let text = e.to_string();
        text.contains("Catalog Error") && text.contains("raw_events does not exist")
    }
}

/// A SQL text and its positional parameters, built together so they cannot drift apart.
struct Query {
    text: String,
    params: Vec<Value>,
}

impl Query {
    fn new(head: &str) -> Query {
        Query {
            text: head.to_string(),
            params: Vec::new(),
        }
    }

    fn placeholders(&mut self, values: &[String], each: &str) -> String {
        self.params
            .extend(values.iter().map(|v| Value::Text(v.clone())));
        vec![each; values.len()].join(", ")
    }

    fn string_filter(&mut self, column: &str, f: &StringFilter) {
        if !f.include.is_empty() {
            let p = self.placeholders(&f.include, "?");
            self.text.push_str(&format!(" AND {column} IN ({p})"));
        }
        if !f.exclude.is_empty() {
            let p = self.placeholders(&f.exclude, "?");
            self.text.push_str(&format!(" AND {column} NOT IN ({p})"));
        }
    }

    fn time_bound(&mut self, op: &str, t: DateTime<Utc>) {
        self.text
            .push_str(&format!(" AND r.\"time\" {op} CAST(? AS TIMESTAMPTZ)"));
        self.params
            .push(Value::Text(t.to_rfc3339_opts(SecondsFormat::Micros, true)));
    }

    /// Appends the filter's predicates and voiding. `after` is the effective lower bound.
    fn filter(&mut self, f: &Filter, after: Option<DateTime<Utc>>) {
        self.string_filter("r.subject", &f.subject);
        self.string_filter("r.type", &f.event_type);
        self.string_filter("r.data_version", &f.data_version);
        self.string_filter("r.source", &f.source);
        self.string_filter("r.producer", &f.producer);
        self.string_filter("r.extras", &f.extras);
        self.string_filter("r.id", &f.id);
        if let Some(after) = after {
            self.time_bound(">", after);
        }
        if let Some(before) = f.before {
            self.time_bound("<", before);
        }
        // Malformed extras must not fail the whole query, so only valid JSON is inspected.
        const TAGS: &str = "coalesce(try_cast(json_extract(CASE WHEN json_valid(r.extras) THEN r.extras END, '$.tags') AS VARCHAR[]), []::VARCHAR[])";
        for (values, negate, func) in [
            (&f.tags.contains_any, "", "list_has_any"),
            (&f.tags.contains_all, "", "list_has_all"),
            (&f.tags.not_contains_any, "NOT ", "list_has_any"),
            (&f.tags.not_contains_all, "NOT ", "list_has_all"),
        ] {
            if !values.is_empty() {
                let p = self.placeholders(values, "CAST(? AS VARCHAR)");
                self.text
                    .push_str(&format!(" AND {negate}{func}({TAGS}, [{p}])"));
            }
        }
        // Voiding (§4.4.1): a tombstone is any row with a non-empty voids_id; it hides itself
        // and every row of its subject with that id, whatever the type, source or time order.
        self.text.push_str(
            " AND coalesce(r.voids_id, '') = '' AND NOT EXISTS (SELECT 1 FROM lake.raw_events t \
             WHERE t.voids_id <> '' AND t.subject = r.subject AND t.voids_id = r.id",
        );
        // Same subject scope on the tombstone scan, so it prunes like the main scan.
        if !f.subject.include.is_empty() {
            let p = self.placeholders(&f.subject.include, "?");
            self.text.push_str(&format!(" AND t.subject IN ({p})"));
        }
        self.text.push(')');
    }
}

/// One row's columns (time still as microseconds) before header reconstruction.
fn read_row(r: &duckdb::Row<'_>, payload: bool) -> duckdb::Result<(RawRow, i64)> {
    let s = |i: usize| -> duckdb::Result<String> {
        Ok(r.get::<_, Option<String>>(i)?.unwrap_or_default())
    };
    let micros: i64 = r.get(1)?;
    let (data, data_base64) = if payload {
        (
            r.get::<_, Option<String>>(10)?,
            r.get::<_, Option<Vec<u8>>>(11)?,
        )
    } else {
        (None, None)
    };
    Ok((
        RawRow {
            subject: s(0)?,
            time: DateTime::<Utc>::UNIX_EPOCH,
            event_type: s(2)?,
            id: s(3)?,
            source: s(4)?,
            producer: s(5)?,
            data_content_type: s(6)?,
            data_version: s(7)?,
            extras: s(8)?,
            data,
            data_base64,
            data_index_key: r.get::<_, Option<String>>(9)?,
            voids_id: None,
        },
        micros,
    ))
}

fn stored_row((mut row, micros): (RawRow, i64)) -> Result<StoredRow> {
    row.time = from_micros(micros)?;
    let (event, status) = row.to_event_checked();
    if status.is_error() {
        // The row is served without the extras it could not parse (§4.4).
        tracing::warn!(
            subject = %event.header.subject,
            id = %event.header.id,
            ?status,
            "raw_events row has malformed extras"
        );
    }
    Ok(StoredRow {
        event,
        data_index_key: row.data_index_key.filter(|k| !k.is_empty()),
    })
}

fn index_key(row: &StoredRow) -> String {
    match &row.data_index_key {
        Some(key) => key.clone(),
        None => format!(
            "{LAKE_KEY_PREFIX}{}/{}",
            row.event.header.subject, row.event.header.id
        ),
    }
}

fn from_micros(us: i64) -> Result<DateTime<Utc>> {
    DateTime::from_timestamp_micros(us)
        .ok_or_else(|| FetchError::Internal(format!("event time {us}µs is out of range")))
}
