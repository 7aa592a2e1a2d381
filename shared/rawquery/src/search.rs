//! Cloud-event searches over `lake.raw_events`: filters, voiding, type summaries, payloads.
//!
//! Every query: the filter's predicates (all values bound as `?` parameters, never
//! interpolated), voiding by the filter's [`Voiding`] policy, then one row per dedup key
//! `(subject, second-truncated time, type, source, id)` keeping the earliest, ordered by
//! `time, id, type` in the requested direction. All statements of one request read the same
//! snapshot of the table ([`dq_lake::request_snapshot`]).
//!
//! A reader given the table's listings ([`DirectFiles`], held by [`crate::Db`]) reads the
//! rows of a search, a latest look-up or a type summary from the files of the filter's types
//! and the window's days directly (`dq_lake::files`), and the tombstone probe from the files
//! of `dimo.tombstone`: each relation that its listing cannot answer exactly (inlined rows of
//! its types, a file it cannot read plainly) is the DuckLake scan of the same snapshot
//! instead, and a direct read that fails is retried as the scan.

use crate::error::{FetchError, Result};
use crate::filter::{Filter, Order, StringFilter, TagFilter, Voiding, MAX_OR_DEPTH};
use chrono::{DateTime, SecondsFormat, Utc};
use dq_cloudevent::event::{CloudEventHeader, RawEvent};
use dq_cloudevent::row::RawRow;
use dq_cloudevent::types;
use dq_lake::duckdb::types::Value;
use dq_lake::duckdb::{self, Connection};
use dq_lake::files::{TableFiles, TableSpec};
use dq_lake::{Newest, Redactor, Snapshot};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// din's `raw_events` as its files are listed: by `type`, then the UTC day of `time`.
const RAW_EVENTS: TableSpec = TableSpec {
    name: dq_lake::raw::TABLE,
    partition: dq_lake::raw::PARTITION,
    columns: &dq_lake::raw::COLUMNS,
};

/// The file listings of `raw_events` one engine keeps, and how many relations were read from
/// the files directly.
pub struct DirectFiles {
    files: TableFiles,
    reads: AtomicU64,
}

impl std::fmt::Debug for DirectFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectFiles")
            .field("reads", &self.reads())
            .finish_non_exhaustive()
    }
}

impl DirectFiles {
    /// No listing yet; `postgres`: the metadata catalog is PostgreSQL.
    pub fn new(postgres: bool) -> DirectFiles {
        DirectFiles {
            files: TableFiles::new(RAW_EVENTS, postgres),
            reads: AtomicU64::new(0),
        }
    }

    /// The listing of `raw_events`' files.
    pub(crate) fn table_files(&self) -> &TableFiles {
        &self.files
    }

    /// Relations of `raw_events` read from its files directly so far.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }
}

/// Locator prefix of an index whose payload is inline in its row.
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

/// Per-type counts of a search.
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

/// A matching row: the event with its inline payload (when read with payloads) and the key of
/// an externalized one; [`crate::Payloads::events`] turns rows into events.
#[derive(Debug, Clone)]
pub struct StoredRow {
    /// The event as stored (`data` / `data_base64` only when read with payloads).
    pub event: RawEvent,
    /// The blob key of an externalized payload.
    pub data_index_key: Option<String>,
}

impl StoredRow {
    /// The row's index: its header and payload key.
    pub fn index(&self) -> Index {
        Index {
            header: self.event.header.clone(),
            key: index_key(self),
        }
    }
}

/// Rows per id a by-id query may return (one id can appear under several types).
pub const ROWS_PER_ID: usize = 8;
/// Ids per by-id query (125 × 8 = 1000 rows).
pub const IDS_PER_QUERY: usize = 125;

/// A type-summary row: type, count, first and last time in µs.
type SummaryRow = (Option<String>, i64, i64, i64);

/// Look-backs [`Reader::latest_at`] tries, in days, before the filter's whole window.
const LATEST_LOOKBACK_DAYS: [i64; 2] = [1, 31];

// `t` truncated to its whole second (toward the past), as the dedup key truncates times.
use dq_cloudevent::time::truncate_secs as whole_second;

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
    /// How the newest snapshot is asked ([`dq_lake::request_snapshot`]).
    newest: Newest,
    /// `None`: every statement is a DuckLake scan.
    direct: Option<&'a DirectFiles>,
}

impl<'a> Reader<'a> {
    /// A reader over `conn`, asking its lake's newest snapshot by `newest`.
    pub fn new(conn: &'a Connection, redactor: &'a Redactor, newest: Newest) -> Reader<'a> {
        Reader {
            conn,
            redactor,
            newest,
            direct: None,
        }
    }

    /// The reader reading `raw_events` from its files where `files`' listings allow.
    #[must_use]
    pub fn with_files(mut self, files: &'a DirectFiles) -> Reader<'a> {
        self.direct = Some(files);
        self
    }

    /// What a statement at `snapshot` reads as `raw_events` aliased `alias`: the files of
    /// `types` (`None`: every type) over `[from_us, to_us)` when the listing allows, else the
    /// DuckLake scan; `true` with the files.
    fn relation(
        &self,
        snapshot: Snapshot,
        types: Option<&[String]>,
        window: (i64, i64),
        alias: &'static str,
    ) -> (String, bool) {
        let direct = self.direct.and_then(|d| {
            d.files
                .relations(self.conn, snapshot, types, [window])
                .map_err(|e| self.error("list raw_events files", e))
                .inspect_err(|e| tracing::warn!(error = %e, "raw_events file listing failed"))
                .ok()
                .flatten()
        });
        match direct {
            Some([relation]) => (format!("{relation} {alias}"), true),
            None => (snapshot.table_as(dq_lake::raw::TABLE, alias), false),
        }
    }

    /// Runs the statement `build(rows, tombstones)` makes, naming `raw_events` as the rows
    /// of `types` over `window` (alias `r`) and, when `voiding` reads them, as the tombstones
    /// (alias `t`): the files directly where the listings allow. A failed direct read is retried as the DuckLake scan,
    /// so the files can make a read faster but never fail it.
    fn read<T>(
        &self,
        snapshot: Snapshot,
        types: Option<&[String]>,
        window: (i64, i64),
        voiding: Voiding,
        build: impl Fn(&str, &str) -> Query,
        run: impl Fn(&Query) -> Result<T>,
    ) -> Result<T> {
        let tombstone = [types::TOMBSTONE.to_owned()];
        let (rows, rows_direct) = self.relation(snapshot, types, window, "r");
        let (tombstones, tombstones_direct) = if voiding == Voiding::None {
            (snapshot.table_as(dq_lake::raw::TABLE, "t"), false)
        } else {
            self.relation(snapshot, Some(&tombstone), (i64::MIN, i64::MAX), "t")
        };
        if let (Some(d), true) = (self.direct, rows_direct || tombstones_direct) {
            match run(&build(&rows, &tombstones)) {
                Ok(found) => {
                    let direct = u64::from(rows_direct) + u64::from(tombstones_direct);
                    d.reads.fetch_add(direct, Ordering::Relaxed);
                    return Ok(found);
                }
                // The request was given up: the failure is its interrupt, not the files'.
                Err(e) if dq_lake::given_up() => return Err(e),
                Err(e) => {
                    tracing::warn!(error = %e, "direct raw_events read failed; scanning the lake")
                }
            }
        }
        let scan = |alias| snapshot.table_as(dq_lake::raw::TABLE, alias);
        run(&build(&scan("r"), &scan("t")))
    }

    /// The request's snapshot: every statement names `lake.raw_events` at it.
    fn snapshot(&self) -> Result<Snapshot> {
        dq_lake::request_snapshot(self.conn, &self.newest)
            .map_err(|e| self.error("read the lake's snapshot", e))
    }

    /// Up to `limit` matching indexes (`limit` is clamped to 1..=1000), in the filter's order;
    /// `[]` when nothing matches. Unscoped searches get the 400-day floor.
    ///
    /// # Errors
    /// [`FetchError::Lake`] when the query fails.
    pub fn search(&self, filter: &Filter, limit: usize) -> Result<Vec<Index>> {
        let rows = self.search_rows(filter, limit, false)?;
        Ok(rows.iter().map(StoredRow::index).collect())
    }

    /// [`Reader::search`] as rows; with `payload`, each row's payload columns come in the same
    /// statement: the rows [`crate::Payloads::events`] needs, with no second read by id.
    ///
    /// # Errors
    /// As [`Reader::search`].
    pub fn search_rows(
        &self,
        filter: &Filter,
        limit: usize,
        payload: bool,
    ) -> Result<Vec<StoredRow>> {
        let after = filter.effective_after(Utc::now());
        self.search_window(filter, after, None, limit, filter.order, payload)
    }

    /// The newest matching index, regardless of the filter's order.
    ///
    /// # Errors
    /// [`FetchError::NotFound`] when nothing matches; [`FetchError::Lake`].
    pub fn latest(&self, filter: &Filter) -> Result<Index> {
        self.latest_at(filter, Utc::now())
    }

    /// [`Reader::latest`] as of `now` (the 400-day floor and the look-backs count from it).
    ///
    /// Most subjects' newest event is recent, and a lower time bound lets the scan skip all
    /// older day partitions of `raw_events` (measured: 214 → 30 ms for one vehicle of a
    /// 30-day, 200-vehicle lake). So the newest event is looked for in the day, then the 31
    /// days, before the table's newest time (or the filter's `before`, or now, if earlier)
    /// ahead of the filter's whole window. The answer is the whole window's whatever the bound:
    /// rows are ordered by time first, so a row at or after the bound outranks every row
    /// before it; voiding reads tombstones outside the bound anyway; and the bound is a whole
    /// second, so every dedup group (which shares a second-truncated time) lies entirely on
    /// one side.
    ///
    /// # Errors
    /// As [`Reader::latest`].
    pub fn latest_at(&self, filter: &Filter, now: DateTime<Utc>) -> Result<Index> {
        self.latest_row_at(filter, now, false)
            .map(|row| row.index())
    }

    /// [`Reader::latest`] as its row; with `payload`, its payload columns come in the same
    /// statement.
    ///
    /// # Errors
    /// As [`Reader::latest`].
    pub fn latest_row(&self, filter: &Filter, payload: bool) -> Result<StoredRow> {
        self.latest_row_at(filter, Utc::now(), payload)
    }

    fn latest_row_at(
        &self,
        filter: &Filter,
        now: DateTime<Utc>,
        payload: bool,
    ) -> Result<StoredRow> {
        let after = filter.effective_after(now);
        let mut reference = filter.before.unwrap_or(now);
        if let Some(newest) = self.newest_time(filter.event_type.confined_to())? {
            reference = reference.min(newest);
        }
        for days in LATEST_LOOKBACK_DAYS {
            let bound = whole_second(reference - chrono::Duration::days(days));
            if after.is_some_and(|a| a >= bound) {
                break; // the filter's own window is no wider
            }
            let found =
                self.search_window(filter, after, Some(bound), 1, Order::Descending, payload)?;
            if let Some(row) = found.into_iter().next() {
                return Ok(row);
            }
        }
        self.search_window(filter, after, None, 1, Order::Descending, payload)?
            .into_iter()
            .next()
            .ok_or(FetchError::NotFound)
    }

    /// The newest `time` of the rows of `types` (`None`: of the whole table; DuckLake answers
    /// it from file statistics), `None` when there are none or the table does not exist yet.
    fn newest_time(&self, types: Option<&[String]>) -> Result<Option<DateTime<Utc>>> {
        let ctx = "newest raw_events time";
        // From the listing: the end of the types' newest day partition, a bound no row passes
        // (rows of unpartitioned files or inlined rows may be newer; the look-backs only get
        // wider). Of given types it needs only their files listed, which their search reads
        // next anyway; of every type (also when no file of the given types has a day: none
        // yet, or only inlined rows), the whole listing.
        if let Some(d) = self.direct {
            let snapshot = self.snapshot()?;
            let newest = |types| match d.files.newest_day(self.conn, snapshot, types) {
                Ok(Some(Some(day))) => day.succ_opt().and_then(|d| d.and_hms_opt(0, 0, 0)),
                _ => None,
            };
            if let Some(end) = types.and_then(|t| newest(Some(t))).or_else(|| newest(None)) {
                return Ok(Some(end.and_utc()));
            }
        }
        let newest = self.conn.query_row(
            &format!(
                "SELECT epoch_us(max(\"time\")) FROM {}",
                self.snapshot()?.table("raw_events")
            ),
            [],
            |r| r.get::<_, Option<i64>>(0),
        );
        match newest {
            Ok(us) => Ok(us.and_then(|us| dq_cloudevent::time::from_micros(us).ok())),
            Err(e) if Self::no_table(&e) => Ok(None),
            Err(e) => Err(self.error(ctx, e)),
        }
    }

    /// The search over `(after, before)` of the filter, narrowed to `time >= from` when set.
    fn search_window(
        &self,
        filter: &Filter,
        after: Option<DateTime<Utc>>,
        from: Option<DateTime<Utc>>,
        limit: usize,
        order: Order,
        payload: bool,
    ) -> Result<Vec<StoredRow>> {
        let raw = self.snapshot()?;
        let columns = if payload {
            format!("{HEADER_COLUMNS}{PAYLOAD_COLUMNS}")
        } else {
            HEADER_COLUMNS.to_owned()
        };
        let dir = match order {
            Order::Descending => "DESC",
            Order::Ascending => "ASC",
        };
        let limit = crate::filter::clamp_limit(limit as i64);
        let build = |rows: &str, tombstones: &str| {
            let mut q = Query::new(&format!("SELECT {columns} FROM {rows} WHERE true"));
            q.filter(filter, after, tombstones);
            if let Some(from) = from {
                q.time_bound(">=", from);
            }
            q.text.push_str(&format!(
                "{DEDUP} ORDER BY r.\"time\" {dir}, r.id {dir}, r.type {dir} LIMIT {limit}"
            ));
            q
        };
        let lower = after.max(from).map_or(i64::MIN, |t| t.timestamp_micros());
        let upper = filter.before.map_or(i64::MAX, |t| t.timestamp_micros());
        self.read(
            raw,
            filter.event_type.confined_to(),
            (lower, upper),
            filter.voiding,
            build,
            |q| self.query("search raw_events", q, payload),
        )
    }

    /// Per-type `count`, first and last time over the deduplicated matches not hidden by the
    /// filter's voiding, ordered by type; no 400-day floor; `[]` when empty.
    ///
    /// # Errors
    /// [`FetchError::Lake`].
    pub fn type_summaries(&self, filter: &Filter) -> Result<Vec<TypeSummary>> {
        let raw = self.snapshot()?;
        let build = |rows: &str, tombstones: &str| {
            let mut q = Query::new(&format!(
                "SELECT type, count(*), epoch_us(min(\"time\")), epoch_us(max(\"time\")) FROM \
                 (SELECT r.type, r.\"time\" FROM {rows} WHERE true"
            ));
            q.filter(filter, filter.after, tombstones);
            q.text
                .push_str(&format!("{DEDUP}) GROUP BY type ORDER BY type"));
            q
        };
        let lower = filter.after.map_or(i64::MIN, |t| t.timestamp_micros());
        let upper = filter.before.map_or(i64::MAX, |t| t.timestamp_micros());
        let rows = self.read(
            raw,
            filter.event_type.confined_to(),
            (lower, upper),
            filter.voiding,
            build,
            |q| self.summary_rows(q),
        )?;
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

    /// The rows of a type-summary statement.
    fn summary_rows(&self, q: &Query) -> Result<Vec<SummaryRow>> {
        let ctx = "summarize raw_events types";
        let mut stmt = match self.conn.prepare(&q.text) {
            Ok(stmt) => stmt,
            Err(e) if Self::no_table(&e) => return Ok(Vec::new()),
            Err(e) => return Err(self.error(ctx, e)),
        };
        stmt.query_map(duckdb::params_from_iter(q.params.iter()), |r| {
            Ok((
                r.get::<_, Option<String>>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
            ))
        })
        .and_then(|rows| rows.collect::<duckdb::Result<Vec<_>>>())
        .map_err(|e| self.error(ctx, e))
    }

    /// Deduplicated rows of `subject` whose id is one of `ids` (at most [`IDS_PER_QUERY`]) and
    /// that `voiding` does not hide, payload columns included, newest first, at most
    /// [`ROWS_PER_ID`] × `ids.len()` rows.
    pub(crate) fn by_ids(
        &self,
        subject: &str,
        ids: &[&str],
        voiding: Voiding,
    ) -> Result<Vec<StoredRow>> {
        let raw = self.snapshot()?;
        let mut q = Query::new(&format!(
            "SELECT {HEADER_COLUMNS}{PAYLOAD_COLUMNS} FROM {} WHERE true",
            raw.table_as("raw_events", "r")
        ));
        let filter = Filter {
            subject: StringFilter::eq(subject),
            id: StringFilter::any_of(ids.iter().copied()),
            voiding,
            ..Filter::default()
        };
        q.filter(&filter, None, &raw.table_as("raw_events", "t"));
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
        let started = Instant::now();
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
        // `RUST_LOG=dq_rawquery=debug` shows where a request's time goes, statement by
        // statement.
        tracing::debug!(
            statement = ctx,
            payload,
            rows = raw.len(),
            ms = started.elapsed().as_secs_f64() * 1e3,
            "read"
        );
        raw.into_iter().map(stored_row).collect()
    }

    /// A redacted query error. Only DuckDB's first line is kept: the rest quotes the SQL,
    /// which clients have no use for.
    fn error(&self, ctx: &str, e: duckdb::Error) -> FetchError {
        let text = self.redactor.redact(&e.to_string());
        FetchError::Lake(dq_lake::Error::Duckdb {
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

    fn time_bound(&mut self, op: &str, t: DateTime<Utc>) {
        self.text
            .push_str(&format!(" AND r.\"time\" {op} CAST(? AS TIMESTAMPTZ)"));
        self.params
            .push(Value::Text(t.to_rfc3339_opts(SecondsFormat::Micros, true)));
    }

    /// Appends the filter's predicates and voiding. `after` is the effective lower bound.
    /// Appends the filter's predicates; voiding probes `tombstones` (`lake.raw_events` as the
    /// request reads it, aliased `t`).
    fn filter(&mut self, f: &Filter, after: Option<DateTime<Utc>>, tombstones: &str) {
        for (column, values) in [
            ("r.subject", &f.subject),
            ("r.type", &f.event_type),
            ("r.data_version", &f.data_version),
            ("r.source", &f.source),
            ("r.producer", &f.producer),
            ("r.extras", &f.extras),
            ("r.id", &f.id),
        ] {
            if let Some(p) = string_predicate(column, values, 0) {
                self.append(" AND ", p);
            }
        }
        if let Some(after) = after {
            self.time_bound(">", after);
        }
        if let Some(before) = f.before {
            self.time_bound("<", before);
        }
        if let Some(tags) = tag_predicate(&f.tags, 0) {
            self.append(" AND ", tags);
        }
        self.voiding(f, tombstones);
    }

    /// Appends `other`'s text after `sep`, and its parameters.
    fn append(&mut self, sep: &str, other: Query) {
        self.text.push_str(sep);
        self.text.push_str(&other.text);
        self.params.extend(other.params);
    }

    /// Appends the voiding predicate of `f.voiding`.
    fn voiding(&mut self, f: &Filter, tombstones: &str) {
        match f.voiding {
            Voiding::None => return,
            // dq's rule: a tombstone hides itself and every row of its subject with that id,
            // whatever the source or time order. The probe names the type so it reads only
            // din's `dimo.tombstone` partition (din sets voids_id on no other type).
            Voiding::HideTombstones => self.text.push_str(&format!(
                " AND coalesce(r.voids_id, '') = '' AND NOT EXISTS (SELECT 1 \
                 FROM {tombstones} WHERE t.type = '{}' AND t.voids_id <> '' \
                 AND t.subject = r.subject AND t.voids_id = r.id",
                types::TOMBSTONE
            )),
            // The fetch GraphQL rule: only a tombstone signed by the row's own source voids it; the
            // tombstone rows stay. The scan ignores the filter's window and types on purpose.
            Voiding::SourceMatched => self.text.push_str(&format!(
                " AND NOT EXISTS (SELECT 1 FROM {tombstones} WHERE t.type = '{}' \
                 AND t.voids_id <> '' AND t.subject = r.subject AND t.source = r.source \
                 AND t.voids_id = r.id",
                // A constant of ours, not a caller value, so written inline.
                types::TOMBSTONE
            )),
        }
        // Same subject scope on the tombstone scan, so it prunes like the main scan (only when
        // the search is confined to listed subjects: an alternative could reach others).
        if let Some(subjects) = f.subject.confined_to() {
            let p = self.placeholders(subjects, "?");
            self.text.push_str(&format!(" AND t.subject IN ({p})"));
        }
        self.text.push(')');
    }
}

/// The tags as a list; malformed extras must not fail the whole query, so only valid JSON is
/// inspected.
const TAGS: &str = "coalesce(try_cast(json_extract(CASE WHEN json_valid(r.extras) THEN r.extras END, '$.tags') AS VARCHAR[]), []::VARCHAR[])";

/// The predicate of string filter level `depth` (root 0) on `column`:
/// `(col IN (…) AND col NOT IN (…)) OR or₁ OR or₂ …`, or `None` when it restricts nothing
/// (see [`disjunction`]).
fn string_predicate(column: &str, f: &StringFilter, depth: usize) -> Option<Query> {
    let mut base = Query::new("");
    let mut preds = Vec::new();
    for (values, op) in [(&f.include, "IN"), (&f.exclude, "NOT IN")] {
        if !values.is_empty() {
            let p = base.placeholders(values, "?");
            preds.push(format!("{column} {op} ({p})"));
        }
    }
    let base = (!preds.is_empty()).then(|| {
        base.text = if f.or.is_empty() {
            preds.join(" AND ")
        } else {
            format!("({})", preds.join(" AND "))
        };
        base
    });
    disjunction(base, &f.or, depth, &|alt, d| {
        string_predicate(column, alt, d)
    })
}

/// The predicate of tag filter level `depth` (root 0): `(p1 AND p2 …) OR or₁ OR or₂ …`, or
/// `None` when it restricts nothing (see [`disjunction`]).
fn tag_predicate(t: &TagFilter, depth: usize) -> Option<Query> {
    let mut base = Query::new("");
    let mut preds = Vec::new();
    for (values, negate, func) in [
        (&t.contains_any, "", "list_has_any"),
        (&t.contains_all, "", "list_has_all"),
        (&t.not_contains_any, "NOT ", "list_has_any"),
        (&t.not_contains_all, "NOT ", "list_has_all"),
    ] {
        if !values.is_empty() {
            let p = base.placeholders(values, "CAST(? AS VARCHAR)");
            preds.push(format!("{negate}{func}({TAGS}, [{p}])"));
        }
    }
    let base = (!preds.is_empty()).then(|| {
        base.text = format!("({})", preds.join(" AND "));
        base
    });
    disjunction(base, &t.or, depth, &tag_predicate)
}

/// One filter level at `depth`: its own conjunction `base` OR-ed with each alternative
/// rendered by `each` at `depth + 1`; `None` when it restricts nothing (no conjunction and no
/// alternatives, or any alternative that restricts nothing). Alternatives below
/// [`MAX_OR_DEPTH`] are dropped, as fetch-api did; the recursion is bounded by that depth
/// whatever the input.
fn disjunction<T>(
    base: Option<Query>,
    alternatives: &[T],
    depth: usize,
    each: &dyn Fn(&T, usize) -> Option<Query>,
) -> Option<Query> {
    let mut parts: Vec<Query> = base.into_iter().collect();
    if depth < MAX_OR_DEPTH {
        for alt in alternatives {
            // An alternative that restricts nothing makes the whole disjunction true.
            parts.push(each(alt, depth + 1)?);
        }
    }
    if parts.len() <= 1 {
        return parts.pop();
    }
    // Parenthesized as a whole: it is AND-ed with the other predicates.
    let mut joined = Query::new("(");
    for (i, part) in parts.into_iter().enumerate() {
        joined.append(if i == 0 { "" } else { " OR " }, part);
    }
    joined.text.push(')');
    Some(joined)
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
        // The row is served without the extras it could not parse.
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
    dq_cloudevent::time::from_micros(us).map_err(|e| FetchError::Internal(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(f: &Filter) -> Query {
        let mut q = Query::new("");
        q.filter(f, None, "lake.raw_events t");
        q
    }

    fn texts(q: &Query) -> Vec<String> {
        q.params
            .iter()
            .map(|v| match v {
                Value::Text(t) => t.clone(),
                other => panic!("unexpected parameter {other:?}"),
            })
            .collect()
    }

    fn any(tags: &[&str]) -> TagFilter {
        TagFilter {
            contains_any: tags.iter().map(|t| t.to_string()).collect(),
            ..TagFilter::default()
        }
    }

    #[test]
    fn whole_seconds_truncate_toward_the_past() {
        let t = |us: i64| DateTime::from_timestamp_micros(us).unwrap();
        assert_eq!(
            whole_second(t(1_700_000_000_999_999)),
            t(1_700_000_000_000_000)
        );
        assert_eq!(
            whole_second(t(1_700_000_000_000_000)),
            t(1_700_000_000_000_000)
        );
        assert_eq!(whole_second(t(-1)), t(-1_000_000));
    }

    #[test]
    fn voiding_policies_render() {
        let scoped = |voiding| Filter {
            subject: StringFilter::eq("did:s"),
            voiding,
            ..Filter::default()
        };
        let hide = rendered(&scoped(Voiding::HideTombstones));
        assert!(hide.text.contains("coalesce(r.voids_id, '') = ''"));
        assert!(hide.text.contains(
            "t.type = 'dimo.tombstone' AND t.voids_id <> '' AND t.subject = r.subject \
             AND t.voids_id = r.id AND t.subject IN (?))"
        ));
        assert!(!hide.text.contains("t.source"));
        assert!(hide.text.ends_with(" AND t.subject IN (?))"));
        assert_eq!(texts(&hide), ["did:s", "did:s"]);

        let matched = rendered(&scoped(Voiding::SourceMatched));
        assert!(!matched.text.contains("r.voids_id"), "{}", matched.text);
        assert!(matched.text.contains(
            "t.type = 'dimo.tombstone' AND t.voids_id <> '' AND t.subject = r.subject \
             AND t.source = r.source AND t.voids_id = r.id AND t.subject IN (?))"
        ));
        assert_eq!(texts(&matched), ["did:s", "did:s"]);
        // Unscoped: no pruning clause, nothing extra bound.
        let unscoped = rendered(&Filter {
            voiding: Voiding::SourceMatched,
            ..Filter::default()
        });
        assert!(unscoped.text.ends_with("t.voids_id = r.id)"));
        assert!(unscoped.params.is_empty());

        let none = rendered(&scoped(Voiding::None));
        assert_eq!(none.text, " AND r.subject IN (?)");
        assert_eq!(texts(&none), ["did:s"]);
    }

    #[test]
    fn string_alternatives_render_parameterized() {
        let source = StringFilter {
            exclude: vec!["b".into()],
            or: vec![
                StringFilter::eq("c"),
                StringFilter {
                    or: vec![StringFilter::any_of(["d", "e"])],
                    ..StringFilter::default()
                },
            ],
            ..StringFilter::eq("a")
        };
        let q = rendered(&Filter {
            source,
            voiding: Voiding::None,
            ..Filter::default()
        });
        assert_eq!(
            q.text,
            " AND ((r.source IN (?) AND r.source NOT IN (?)) OR r.source IN (?) OR r.source IN (?, ?))"
        );
        assert_eq!(texts(&q), ["a", "b", "c", "d", "e"]);
        // An alternative that restricts nothing: no restriction on the column.
        let open = StringFilter {
            or: vec![StringFilter::default()],
            ..StringFilter::eq("a")
        };
        assert!(string_predicate("r.id", &open, 0).is_none());
        // A subject filter with alternatives is not a confined scope: the tombstone scan is
        // not pruned to its `in` list.
        let widened = rendered(&Filter {
            subject: StringFilter {
                or: vec![StringFilter::eq("did:t")],
                ..StringFilter::eq("did:s")
            },
            ..Filter::default()
        });
        assert!(
            widened.text.ends_with("t.voids_id = r.id)"),
            "{}",
            widened.text
        );
        assert_eq!(texts(&widened), ["did:s", "did:t"]);
    }

    #[test]
    fn tag_alternatives_render_parameterized() {
        assert!(tag_predicate(&TagFilter::default(), 0).is_none());
        let f = TagFilter {
            not_contains_all: vec!["b".into(), "c".into()],
            or: vec![
                any(&["d"]),
                TagFilter {
                    or: vec![any(&["e"])],
                    ..TagFilter::default()
                },
            ],
            ..any(&["a"])
        };
        let q = tag_predicate(&f, 0).unwrap();
        let has = |func: &str, n: usize| {
            format!(
                "{func}({TAGS}, [{}])",
                vec!["CAST(? AS VARCHAR)"; n].join(", ")
            )
        };
        assert_eq!(
            q.text,
            format!(
                "(({} AND NOT {}) OR ({}) OR ({}))",
                has("list_has_any", 1),
                has("list_has_all", 2),
                has("list_has_any", 1),
                has("list_has_any", 1)
            )
        );
        // Parameters in text order; no value ever appears in the text.
        assert_eq!(texts(&q), ["a", "b", "c", "d", "e"]);
        assert_eq!(q.text.matches('?').count(), q.params.len());

        // An empty alternative at any kept depth: no restriction at all.
        let empty_inside = TagFilter {
            or: vec![TagFilter {
                or: vec![TagFilter::default()],
                ..any(&["d"])
            }],
            ..any(&["a"])
        };
        assert!(tag_predicate(&empty_inside, 0).is_none());
    }

    #[test]
    fn tag_alternatives_below_max_depth_are_dropped() {
        // A chain of one predicate per level, levels 0..=9.
        let chain = (0..9).fold(any(&["9"]), |inner, i| TagFilter {
            or: vec![inner],
            ..any(&[(8 - i).to_string().as_str()])
        });
        let q = tag_predicate(&chain, 0).unwrap();
        let kept: Vec<String> = (0..=MAX_OR_DEPTH).map(|d| d.to_string()).collect();
        assert_eq!(texts(&q), kept);
        // A dropped empty alternative does not make the disjunction true.
        let deep_empty = (0..MAX_OR_DEPTH).fold(
            TagFilter {
                or: vec![TagFilter::default()],
                ..any(&["x"])
            },
            |inner, _| TagFilter {
                or: vec![inner],
                ..any(&["q"])
            },
        );
        let q = tag_predicate(&deep_empty, 0).unwrap();
        assert_eq!(q.params.len(), MAX_OR_DEPTH + 1);
    }
}
