//! The cloud-event queries of the dq and fetch dialects: `cloudEvents`, `latestCloudEvent`,
//! `availableCloudEventTypes`, and fetch's `indexes` / `latestIndex`, over din's `raw_events`
//! through the shared search of the `rawquery` crate (voiding, dedup, the 400-day floor and
//! payload resolution live there) and the cloud-event rule of the `auth` crate (raw-data
//! permission, own subject or a device paired to it via identity-api). The dialects differ in
//! the subject argument, tombstone policy and the null policy of the latest lookups: methods of
//! [`Dialect`].

use crate::args::optional_time;
use crate::context::caller;
use crate::dialect::{Dialect, DialectExt};
use crate::scalars::time_value;
use async_graphql::dynamic::{FieldValue, ObjectAccessor, ResolverContext};
use async_graphql::{Error, Name, Number, Result, Value};
use chrono::{DateTime, Utc};
use dq_auth::DeviceLinks;
use dq_rawquery::{Db, FetchError, Filter, Index, Payloads, StoredRow, StringFilter};
use std::sync::Arc;
use std::time::Duration;

/// Default and maximum `cloudEvents(limit:)`.
const DEFAULT_LIMIT: i64 = 10;
const MAX_LIMIT: i64 = 1000;
/// Lifetime of a presigned `dataUrl`.
const PRESIGN_TTL: Duration = Duration::from_secs(15 * 60);

/// What the cloud-event resolvers need, as request data.
pub struct CloudEvents {
    /// Reads `raw_events` (shares the engine's DuckDB instance).
    pub db: Arc<Db>,
    /// Payload resolution (blob store, budget).
    pub payloads: Payloads,
    /// The blob store, for presigned `dataUrl`s (`None`: no `BLOB_BUCKET`).
    pub store: Option<Arc<dq_blob::BlobStore>>,
    /// The device → vehicle lookup; `None` denies every cross-subject read.
    pub links: Option<Arc<dyn DeviceLinks>>,
}

impl CloudEvents {
    /// Reads `db`, resolving payloads from the same `store` that signs `dataUrl`s.
    pub fn new(
        db: Arc<Db>,
        store: Option<Arc<dq_blob::BlobStore>>,
        links: Option<Arc<dyn DeviceLinks>>,
    ) -> CloudEvents {
        CloudEvents {
            db,
            payloads: Payloads::new(store.clone()),
            store,
            links,
        }
    }
}

pub(crate) fn backend<'a>(ctx: &ResolverContext<'a>) -> Result<&'a CloudEvents> {
    ctx.ctx
        .data_opt::<Arc<CloudEvents>>()
        .map(|b| b.as_ref())
        .ok_or_else(|| Error::new("cloud events are not configured"))
}

fn time_opt(v: &ObjectAccessor<'_>, key: &str) -> Result<Option<DateTime<Utc>>> {
    Ok(optional_time(v, key)?.and_then(DateTime::<Utc>::from_timestamp_micros))
}

/// Authorizes the subject ([`DialectExt::vehicle_arg`]) and maps `CloudEventFilter` and the
/// dialect's tombstone policy ([`DialectExt::voiding`]) onto the shared filter.
async fn authorized_filter(ctx: &ResolverContext<'_>) -> Result<Filter> {
    let dialect = Dialect::of(ctx.ctx);
    let subject = ctx.args.try_get(dialect.vehicle_arg())?.string()?;
    let include_deleted = match ctx.args.get("includeDeleted").filter(|v| !v.is_null()) {
        Some(v) => v.boolean()?,
        None => false,
    };
    let caller = caller(ctx.ctx);
    let links = backend(ctx)?.links.as_deref();
    let authorized = dq_auth::authorize_cloud_events(caller, subject, links)
        .await
        .map_err(|e| crate::errors::from_auth(dialect, &e))?;
    let mut filter = Filter {
        subject: StringFilter::eq(authorized.search),
        voiding: dialect.voiding(include_deleted),
        ..Filter::default()
    };
    if let Some(f) = ctx.args.get("filter").filter(|f| !f.is_null()) {
        let f = f.object()?;
        let one = |k: &str| -> Result<Option<String>> {
            f.get(k)
                .filter(|x| !x.is_null())
                .map(|x| x.string().map(str::to_string))
                .transpose()
        };
        let mut types: Vec<String> = one("type")?.into_iter().collect();
        if let Some(list) = f.get("types").filter(|x| !x.is_null()) {
            for t in list.list()?.iter() {
                types.push(t.string()?.to_string());
            }
        }
        if !types.is_empty() {
            filter.event_type = StringFilter::any_of(types);
        }
        for (key, slot) in [
            ("id", &mut filter.id),
            ("dataversion", &mut filter.data_version),
            ("source", &mut filter.source),
            ("producer", &mut filter.producer),
        ] {
            if let Some(v) = one(key)? {
                *slot = StringFilter::eq(v);
            }
        }
        filter.before = time_opt(&f, "before")?;
        filter.after = time_opt(&f, "after")?;
    }
    Ok(filter)
}

/// A cloud-event read failure as the dialect answers it. Errors about the request (no match,
/// the payload budget) keep their text. A lake or blob-store failure answers the shared
/// generic text ([`FetchError::client_message`]: `failed to query db`, or the blob store's S3
/// code) — with INTERNAL_SERVER_ERROR where the dialect codes errors, like the signal fields,
/// and bare in the fetch dialect ([`DialectExt::codes_errors`]) — and its detail (catalog host
/// and user, bucket, key) goes to the log only.
fn fetch_error(ctx: &ResolverContext<'_>, e: FetchError) -> Error {
    crate::errors::from_fetch(Dialect::of(ctx.ctx), e)
}

fn s(v: &str) -> Value {
    Value::String(v.to_string())
}

pub(crate) fn header_value(h: &dq_cloudevent::CloudEventHeader) -> Value {
    let fields = [
        ("specversion", s(&h.spec_version)),
        ("type", s(&h.event_type)),
        ("source", s(&h.source)),
        ("subject", s(&h.subject)),
        ("id", s(&h.id)),
        ("time", time_value(h.time.timestamp_micros())),
        ("datacontenttype", s(&h.data_content_type)),
        ("dataschema", s(&h.data_schema)),
        ("dataversion", s(&h.data_version)),
        ("producer", s(&h.producer)),
        ("signature", s(&h.signature)),
        ("raweventid", s(&h.raw_event_id)),
        ("tags", Value::List(h.tags.iter().map(|t| s(t)).collect())),
    ];
    Value::Object(fields.into_iter().map(|(k, v)| (Name::new(k), v)).collect())
}

/// `data` is raw JSON (invalid/empty → null); `dataBase64`/`dataUrl` null when empty.
fn event_value(
    header: &dq_cloudevent::CloudEventHeader,
    data: &[u8],
    data_base64: &str,
    data_url: Option<&str>,
) -> Value {
    let data = serde_json::from_slice::<serde_json::Value>(data)
        .ok()
        .and_then(|v| Value::from_json(v).ok())
        .unwrap_or(Value::Null);
    let opt = |v: &str| if v.is_empty() { Value::Null } else { s(v) };
    Value::Object(
        [
            ("header", header_value(header)),
            ("data", data),
            ("dataBase64", opt(data_base64)),
            ("dataUrl", data_url.map_or(Value::Null, opt)),
        ]
        .into_iter()
        .map(|(k, v)| (Name::new(k), v))
        .collect(),
    )
}

/// Payloads only when `data` or `dataBase64` is selected (they cost a read each).
fn wants_payload(ctx: &ResolverContext<'_>) -> bool {
    ctx.ctx
        .field()
        .selection_set()
        .any(|f| matches!(f.name(), "data" | "dataBase64"))
}

/// Events as GraphQL values, in input order, from rows read with their payload columns: an
/// externalized, unsealed payload becomes a presigned `dataUrl`; otherwise the payload is
/// taken from the row (or the blob store) only when selected.
async fn to_values(ctx: &ResolverContext<'_>, rows: Vec<StoredRow>) -> Result<Vec<Value>> {
    let b = backend(ctx)?;
    let mut urls: Vec<Option<String>> = Vec::with_capacity(rows.len());
    let mut inline = Vec::new();
    let mut headers = Vec::with_capacity(rows.len());
    for row in rows {
        let index = row.index();
        let url = match (b.payloads.presign_key(&index), &b.store) {
            (Some(key), Some(store)) => store
                .presign_get(key, PRESIGN_TTL)
                .await
                .map_err(|e| fetch_error(ctx, FetchError::Blob(e)))?,
            _ => None,
        };
        if url.is_none() {
            inline.push(row);
        }
        urls.push(url);
        headers.push(index.header);
    }
    let with_payload = wants_payload(ctx);
    let mut resolved = if with_payload && !inline.is_empty() {
        b.payloads
            .events(inline)
            .await
            .map_err(|e| fetch_error(ctx, e))?
            .into_iter()
    } else {
        Vec::new().into_iter()
    };
    Ok(headers
        .iter()
        .zip(&urls)
        .map(|(header, url)| match url {
            Some(u) => event_value(header, &[], "", Some(u)),
            None if with_payload => match resolved.next() {
                Some(e) => event_value(&e.header, &e.data, &e.data_base64, None),
                None => event_value(header, &[], "", None),
            },
            None => event_value(header, &[], "", None),
        })
        .collect())
}

/// `cloudEvents(subject, limit = 10, filter)`: newest first, `[]` when none.
pub async fn cloud_events(ctx: &ResolverContext<'_>) -> Result<Option<FieldValue<'static>>> {
    let filter = authorized_filter(ctx).await?;
    let rows = search_rows(ctx, filter).await?;
    let values = to_values(ctx, rows).await?;
    Ok(Some(FieldValue::value(Value::List(values))))
}

/// `limit`: null or ≤ 0 → 10, above 1000 → 1000.
fn limit_arg(ctx: &ResolverContext<'_>) -> Result<usize> {
    let limit = match ctx.args.get("limit").filter(|l| !l.is_null()) {
        Some(l) => l.i64()?,
        None => DEFAULT_LIMIT,
    };
    let limit = if limit <= 0 {
        DEFAULT_LIMIT
    } else {
        limit.min(MAX_LIMIT)
    };
    Ok(usize::try_from(limit).unwrap_or(10))
}

async fn search(ctx: &ResolverContext<'_>, filter: Filter) -> Result<Vec<Index>> {
    let limit = limit_arg(ctx)?;
    backend(ctx)?
        .db
        .read(move |r| r.search(&filter, limit))
        .await
        .map_err(|e| fetch_error(ctx, e))
}

/// [`search`] as rows, with their payload columns when a payload is selected: one statement
/// (one snapshot, no second read by id).
async fn search_rows(ctx: &ResolverContext<'_>, filter: Filter) -> Result<Vec<StoredRow>> {
    let limit = limit_arg(ctx)?;
    let payload = wants_payload(ctx);
    backend(ctx)?
        .db
        .read(move |r| r.search_rows(&filter, limit, payload))
        .await
        .map_err(|e| fetch_error(ctx, e))
}

/// The newest match; `None` when there is none.
async fn latest(ctx: &ResolverContext<'_>, filter: Filter) -> Result<Option<Index>> {
    match backend(ctx)?.db.read(move |r| r.latest(&filter)).await {
        Ok(index) => Ok(Some(index)),
        Err(FetchError::NotFound) => Ok(None),
        Err(e) => Err(fetch_error(ctx, e)),
    }
}

/// `latestCloudEvent`: no match is `null` or an error ([`DialectExt::latest_may_be_null`]).
pub async fn latest_cloud_event(ctx: &ResolverContext<'_>) -> Result<Option<FieldValue<'static>>> {
    let filter = authorized_filter(ctx).await?;
    let payload = wants_payload(ctx);
    let row = match backend(ctx)?
        .db
        .read(move |r| r.latest_row(&filter, payload))
        .await
    {
        Ok(row) => row,
        Err(FetchError::NotFound) if Dialect::of(ctx.ctx).latest_may_be_null() => return Ok(None),
        Err(e) => return Err(fetch_error(ctx, e)),
    };
    let mut values = to_values(ctx, vec![row]).await?;
    Ok(values.pop().map(FieldValue::value))
}

/// A `CloudEventIndex` (fetch dialect): the header and the index key — the same keys the gRPC
/// surface hands out, so they round-trip through it.
fn index_value(index: &Index) -> Value {
    Value::Object(
        [
            (Name::new("header"), header_value(&index.header)),
            (Name::new("indexKey"), s(&index.key)),
        ]
        .into_iter()
        .collect(),
    )
}

/// `indexes(did, limit = 10, filter, includeDeleted)`: header-only, newest first, `[]` when none.
pub async fn indexes(ctx: &ResolverContext<'_>) -> Result<Option<FieldValue<'static>>> {
    let filter = authorized_filter(ctx).await?;
    let indexes = search(ctx, filter).await?;
    Ok(Some(FieldValue::value(Value::List(
        indexes.iter().map(index_value).collect(),
    ))))
}

/// `latestIndex(did, filter, includeDeleted)`: the newest header, `null` when none.
pub async fn latest_index(ctx: &ResolverContext<'_>) -> Result<Option<FieldValue<'static>>> {
    let filter = authorized_filter(ctx).await?;
    Ok(latest(ctx, filter)
        .await?
        .map(|i| FieldValue::value(index_value(&i))))
}

/// `availableCloudEventTypes`: per type, sorted by type, no time floor.
pub async fn available_types(ctx: &ResolverContext<'_>) -> Result<Option<FieldValue<'static>>> {
    let filter = authorized_filter(ctx).await?;
    let summaries = backend(ctx)?
        .db
        .read(move |r| r.type_summaries(&filter))
        .await
        .map_err(|e| fetch_error(ctx, e))?;
    let values = summaries
        .into_iter()
        .map(|t| {
            Value::Object(
                [
                    ("type", Value::String(t.event_type)),
                    ("count", Value::Number(Number::from(t.count))),
                    ("firstSeen", time_value(t.first_seen.timestamp_micros())),
                    ("lastSeen", time_value(t.last_seen.timestamp_micros())),
                ]
                .into_iter()
                .map(|(k, v)| (Name::new(k), v))
                .collect(),
            )
        })
        .collect();
    Ok(Some(FieldValue::value(Value::List(values))))
}
