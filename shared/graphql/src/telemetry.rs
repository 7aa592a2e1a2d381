//! telemetry-api's own operations: `attestations` and `vinVCLatest`,
//! both over din's raw `dimo.attestation` cloud events through the shared search of the
//! `rawquery` crate, with telemetry's policies: no tombstone suppression, `null` when nothing
//! matches, the `cloud_events` grant check for attestations, and `internal error` for any
//! backend failure.
//!
//! One deliberate difference: payloads externalized to blobs are resolved (the original
//! returned such events header-only), so a large credential still decodes.

use crate::args::{array_filter, vehicle_for_vin};
use crate::cloud_events::backend;
use crate::context::caller;
use crate::dialect::{Dialect, DialectSettings};
use crate::errors;
use crate::scalars::{object, parse_time_us, time_value};
use async_graphql::dynamic::{FieldValue, ResolverContext, ValueAccessor};
use async_graphql::{Error, Number, PathSegment, Result, Value};
use dq_auth::authz::ATTESTATION_TYPE;
use dq_cloudevent::did::parse_address;
use dq_cloudevent::json::Value as Json;
use dq_cloudevent::{eip55, Erc721Did, EthrDid, RawEvent};
use dq_rawquery::{Event, Filter, StringFilter, TagFilter, Voiding};

/// `AttestationFilter.limit` default.
const DEFAULT_ATTESTATION_LIMIT: i64 = 10;

fn string_or_null(s: &str) -> Value {
    if s.is_empty() {
        Value::Null
    } else {
        Value::String(s.to_string())
    }
}

/// The event as CloudEvents JSON (cloudevent's encoder order; `data` inline when JSON).
fn cloud_event_json(e: &Event) -> String {
    RawEvent {
        header: e.header.clone(),
        data: (!e.data.is_empty()).then(|| String::from_utf8_lossy(&e.data).into_owned()),
        data_base64: (!e.data_base64.is_empty()).then(|| e.data_base64.clone()),
    }
    .to_json()
}

/// The newest-first events of `filter` with their payloads; tombstones suppress nothing.
async fn read_events(
    ctx: &ResolverContext<'_>,
    filter: Filter,
    limit: usize,
) -> Result<Vec<Event>> {
    let b = backend(ctx)?;
    let indexes =
        b.db.read(move |r| r.search(&filter, limit))
            .await
            .map_err(|e| errors::internal(&e))?;
    b.payloads
        .resolve_with(&b.db, &indexes, Voiding::None)
        .await
        .map_err(|e| errors::internal(&e))
}

// ------------------------------------------------------------------------------------------
// attestations
// ------------------------------------------------------------------------------------------

/// An `Address` input: a string of 40 hex digits with an optional `0x`; the checksum is
/// not verified.
fn address(v: &ValueAccessor<'_>) -> std::result::Result<[u8; 20], String> {
    let text = match v.as_value() {
        Value::String(s) => s,
        other => return Err(format!("type {} not a string", go_type_name(other))),
    };
    parse_address(text).map_err(|_| "not a valid hex address".to_string())
}

/// The Go type name gqlgen's error quotes for a non-string input.
fn go_type_name(v: &Value) -> &'static str {
    match v {
        Value::Number(n) if n.is_f64() && !n.is_i64() && !n.is_u64() => "float64",
        Value::Number(_) => "int64",
        Value::Boolean(_) => "bool",
        Value::List(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
        _ => "<nil>",
    }
}

/// A field error whose path ends in `filter.source`, as gqlgen reports input coercion
/// failures; the field resolves to null.
fn source_error(ctx: &ResolverContext<'_>, message: String) -> Result<Option<FieldValue<'static>>> {
    let mut error = ctx
        .ctx
        .set_error_path(Error::new(message).into_server_error(ctx.ctx.item.pos));
    error.path.push(PathSegment::Field("filter".into()));
    error.path.push(PathSegment::Field("source".into()));
    ctx.ctx.add_error(error);
    Ok(None)
}

/// A `StringArrayFilter` as the search's tag filter, `or` alternatives included.
fn tag_filter(f: dq_query::filter::ArrayFilter) -> TagFilter {
    TagFilter {
        contains_any: f.contains_any,
        contains_all: f.contains_all,
        not_contains_any: f.not_contains_any,
        not_contains_all: f.not_contains_all,
        or: f.or.into_iter().map(tag_filter).collect(),
    }
}

/// `Attestation.vehicleTokenId`: the token id of the REQUESTED subject (0 for an ethr DID).
fn subject_token_id(subject: &str) -> Result<i64> {
    match subject.parse::<Erc721Did>() {
        Ok(did) => Ok(did.token_id.parse().unwrap_or(0)),
        Err(e1) => match subject.parse::<EthrDid>() {
            Ok(_) => Ok(0),
            Err(e2) => Err(errors::bad_request(format!(
                "failed to get DID from subject: attempted ERC721DID decode ({e1}) and EthrDID decode ({e2})"
            ))),
        },
    }
}

/// `attestations(tokenId, subject, filter)`: the subject's `dimo.attestation` events, newest
/// first; `null` when none.
pub async fn attestations(ctx: &ResolverContext<'_>) -> Result<Option<FieldValue<'static>>> {
    let filter = ctx.args.get("filter").filter(|f| !f.is_null());
    let filter = filter.as_ref().map(|f| f.object()).transpose()?;
    let field = |key: &str| {
        filter
            .as_ref()
            .and_then(|f| f.get(key))
            .filter(|v| !v.is_null())
    };
    // Input coercion runs before the resolver, so a bad address wins over every other error.
    let source = match field("source").map(|v| address(&v)).transpose() {
        Ok(a) => a.map(|a| eip55(&a)),
        Err(message) => return source_error(ctx, message),
    };
    let subject = match ctx.args.get("subject").filter(|v| !v.is_null()) {
        Some(s) => s.string()?.to_string(),
        None => match ctx.args.get("tokenId").filter(|v| !v.is_null()) {
            Some(t) => {
                let id = t.i64()?;
                let id = u32::try_from(id)
                    .map_err(|_| errors::bad_request(format!("invalid tokenID: {id}")))?;
                DialectSettings::of(ctx.ctx).vehicle_did(id)
            }
            None => return Err(errors::bad_request("asset or tokenId is required")),
        },
    };
    let text = |key: &str| -> Result<Option<String>> {
        field(key)
            .map(|v| v.string().map(str::to_string))
            .transpose()
    };
    let id = text("id")?;
    dq_auth::authorize_attestations(
        caller(ctx.ctx),
        &dq_auth::AttestationRequest {
            subject: &subject,
            source: source.as_deref(),
            id: id.as_deref(),
        },
    )
    .map_err(|e| errors::from_auth(Dialect::Telemetry, &e))?;

    let time = |key: &str| -> Result<Option<chrono::DateTime<chrono::Utc>>> {
        match text(key)? {
            None => Ok(None),
            Some(s) => parse_time_us(&s)
                .and_then(chrono::DateTime::from_timestamp_micros)
                .map(Some)
                .ok_or_else(|| Error::new(format!("invalid Time {s:?}"))),
        }
    };
    let mut search = Filter {
        subject: StringFilter::eq(&subject),
        event_type: StringFilter::eq(ATTESTATION_TYPE),
        before: time("before")?,
        // `cursor` is an exclusive LOWER bound (strictly newer than it) even though results
        // are newest first — reproduced as is.
        after: time("after")?.max(time("cursor")?),
        voiding: Voiding::None,
        ..Filter::default()
    };
    for (key, slot) in [
        ("id", &mut search.id),
        ("dataVersion", &mut search.data_version),
        ("producer", &mut search.producer),
    ] {
        if let Some(v) = text(key)? {
            *slot = StringFilter::eq(v);
        }
    }
    if let Some(s) = &source {
        search.source = StringFilter::eq(s);
    }
    if let Some(tags) = field("tags") {
        search.tags = tag_filter(array_filter(tags.as_value()));
    }
    let limit = match field("limit") {
        Some(v) => v.i64()?,
        None => DEFAULT_ATTESTATION_LIMIT,
    };
    let limit = usize::try_from(limit.clamp(1, dq_rawquery::filter::MAX_LIMIT as i64)).unwrap_or(1);
    let events = read_events(ctx, search, limit).await?;
    if events.is_empty() {
        return Ok(None);
    }
    let token_id = subject_token_id(&subject)?;
    let items = events
        .iter()
        .map(|e| {
            let h = &e.header;
            // The source is read leniently as an address (never an error).
            let source = parse_address(&h.source).unwrap_or([0; 20]);
            FieldValue::value(object(vec![
                ("id", Value::String(h.id.clone())),
                ("vehicleTokenId", Value::Number(Number::from(token_id))),
                ("time", time_value(h.time.timestamp_micros())),
                ("attestation", Value::String(cloud_event_json(e))),
                ("type", Value::String(h.event_type.clone())),
                ("source", Value::String(eip55(&source))),
                ("dataVersion", Value::String(h.data_version.clone())),
                ("producer", string_or_null(&h.producer)),
                ("signature", Value::String(h.signature.clone())),
                (
                    "tags",
                    if h.tags.is_empty() {
                        Value::Null
                    } else {
                        Value::List(h.tags.iter().cloned().map(Value::String).collect())
                    },
                ),
            ]))
        })
        .collect::<Vec<_>>();
    Ok(Some(FieldValue::list(items)))
}

// ------------------------------------------------------------------------------------------
// vinVCLatest
// ------------------------------------------------------------------------------------------

/// The fields of a VIN verifiable credential (attestation-api's `pkg/types`), as read from an
/// event's `data`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct VinVc {
    /// `credentialSubject.vehicleTokenId` (0 when absent).
    pub vehicle_token_id: u32,
    /// `credentialSubject.vehicleIdentificationNumber`.
    pub vin: String,
    /// `credentialSubject.recordedBy`.
    pub recorded_by: String,
    /// `credentialSubject.recordedAt` (µs; `None` for absent or zero time).
    pub recorded_at_us: Option<i64>,
    /// `credentialSubject.countryCode`.
    pub country_code: String,
    /// `credentialSubject.vehicleContractAddress` (verbatim, e.g. `eth:0x…`).
    pub vehicle_contract_address: String,
    /// `validFrom`.
    pub valid_from_us: Option<i64>,
    /// `validTo`.
    pub valid_to_us: Option<i64>,
}

/// Go's zero `time.Time` (0001-01-01T00:00:00Z) in µs since the epoch: serialized as null.
const GO_ZERO_TIME_US: i64 = -62_135_596_800_000_000;

/// A credential time: absent/null → None; an RFC 3339 string; the zero time → None.
fn vc_time(v: Option<&Json<'_>>, key: &str) -> std::result::Result<Option<i64>, String> {
    match v {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) => match parse_time_us(s) {
            Some(GO_ZERO_TIME_US) => Ok(None),
            Some(us) => Ok(Some(us)),
            None => Err(format!("{key}: {s:?} is not an RFC 3339 time")),
        },
        Some(other) => Err(format!("{key}: a {} is not a time", other.kind())),
    }
}

fn vc_string(v: Option<&Json<'_>>, key: &str) -> std::result::Result<String, String> {
    match v {
        None | Some(Json::Null) => Ok(String::new()),
        Some(Json::String(s)) => Ok(s.to_string()),
        Some(other) => Err(format!("{key}: a {} is not a string", other.kind())),
    }
}

/// Decodes a VIN credential as Go's `encoding/json` does into attestation-api's structs (keys
/// matched case-insensitively, the last duplicate winning). Validity, proof and revocation are
/// not checked.
///
/// # Errors
/// `data` empty or not an object, `credentialSubject` missing or not an object, a time that
/// is not an RFC 3339 string, a token id that is not a 32-bit unsigned integer.
pub fn parse_vin_vc(data: &[u8]) -> std::result::Result<VinVc, String> {
    let text = std::str::from_utf8(data).map_err(|_| "data is not UTF-8".to_string())?;
    let doc = dq_cloudevent::json::parse(text).map_err(|e| e.to_string())?;
    if !matches!(doc, Json::Object(_)) {
        return Err(format!("data is a {}, not an object", doc.kind()));
    }
    let subject = match doc.get_field("credentialSubject") {
        Some(s @ Json::Object(_)) => s,
        Some(other) => return Err(format!("credentialSubject is a {}", other.kind())),
        None => return Err("credentialSubject is missing".into()),
    };
    let token = match subject.get_field("vehicleTokenId") {
        None | Some(Json::Null) => 0,
        Some(Json::Number(n)) => n
            .parse::<u32>()
            .map_err(|_| format!("vehicleTokenId {n} is not a 32-bit unsigned integer"))?,
        Some(other) => return Err(format!("vehicleTokenId is a {}", other.kind())),
    };
    let s = |key: &str| vc_string(subject.get_field(key), key);
    Ok(VinVc {
        vehicle_token_id: token,
        vin: s("vehicleIdentificationNumber")?,
        recorded_by: s("recordedBy")?,
        recorded_at_us: vc_time(subject.get_field("recordedAt"), "recordedAt")?,
        country_code: s("countryCode")?,
        vehicle_contract_address: s("vehicleContractAddress")?,
        valid_from_us: vc_time(doc.get_field("validFrom"), "validFrom")?,
        valid_to_us: vc_time(doc.get_field("validTo"), "validTo")?,
    })
}

/// `vinVCLatest(tokenId)`: the newest VIN credential the storage node attested for the
/// vehicle; `null` when none.
pub async fn vin_vc_latest(ctx: &ResolverContext<'_>) -> Result<Option<FieldValue<'static>>> {
    let subject = vehicle_for_vin(ctx)?;
    let settings = DialectSettings::of(ctx.ctx);
    let license = settings
        .storage_node_dev_license
        .ok_or_else(|| errors::internal(&"STORAGE_NODE_DEV_LICENSE is not set"))?;
    let filter = Filter {
        subject: StringFilter::eq(subject),
        event_type: StringFilter::eq(ATTESTATION_TYPE),
        data_version: StringFilter::eq(settings.vin_data_version.clone()),
        source: StringFilter::eq(eip55(&license)),
        voiding: Voiding::None,
        ..Filter::default()
    };
    let Some(event) = read_events(ctx, filter, 1).await?.into_iter().next() else {
        return Ok(None);
    };
    let vc = parse_vin_vc(&event.data).map_err(|e| errors::internal(&e))?;
    let time = |us: Option<i64>| us.map_or(Value::Null, time_value);
    Ok(Some(FieldValue::value(object(vec![
        (
            "vehicleTokenId",
            Value::Number(Number::from(vc.vehicle_token_id)),
        ),
        ("vin", string_or_null(&vc.vin)),
        ("recordedBy", string_or_null(&vc.recorded_by)),
        ("recordedAt", time(vc.recorded_at_us)),
        ("countryCode", string_or_null(&vc.country_code)),
        (
            "vehicleContractAddress",
            string_or_null(&vc.vehicle_contract_address),
        ),
        ("validFrom", time(vc.valid_from_us)),
        ("validTo", time(vc.valid_to_us)),
        ("rawVC", Value::String(cloud_event_json(&event))),
    ]))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_a_vin_credential_like_go() {
        let vc = parse_vin_vc(
            br#"{"validFrom":"2024-11-08T03:54:51Z","VALIDTO":"2024-11-10T00:00:00Z",
                 "credentialSubject":{"vehicleIdentificationNumber":"3eMCZ5AN5PM647548",
                   "recordedBy":"did:nft:137:0x9c94C395cBcBDe662235E0A9d3bB87Ad708561BA_31653",
                   "recordedAt":"2024-11-08T00:40:29Z","countryCode":"USA",
                   "vehicleContractAddress":"eth:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF",
                   "vehicleTokenId":39718}}"#,
        )
        .unwrap();
        assert_eq!(vc.vehicle_token_id, 39718);
        assert_eq!(vc.vin, "3eMCZ5AN5PM647548");
        assert_eq!(vc.valid_to_us, parse_time_us("2024-11-10T00:00:00Z"));
        assert_eq!(vc.recorded_at_us, parse_time_us("2024-11-08T00:40:29Z"));
    }

    #[test]
    fn zero_and_absent_times_are_null_and_absent_token_is_zero() {
        let vc = parse_vin_vc(
            br#"{"validFrom":"0001-01-01T00:00:00Z","credentialSubject":{"vin":"x"}}"#,
        )
        .unwrap();
        assert_eq!((vc.valid_from_us, vc.valid_to_us), (None, None));
        assert_eq!(vc.vehicle_token_id, 0);
    }

    #[test]
    fn rejects_what_go_fails_to_decode() {
        for bad in [
            &b""[..],
            b"[1]",
            br#"{"credentialSubject":"x"}"#,
            br#"{"validFrom":"yesterday","credentialSubject":{}}"#,
            br#"{"credentialSubject":{"vehicleTokenId":-1}}"#,
            br#"{"credentialSubject":{"vehicleTokenId":1.5}}"#,
            br#"{"credentialSubject":{"vehicleTokenId":4294967296}}"#,
            br#"{}"#,
        ] {
            assert!(
                parse_vin_vc(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn token_id_of_the_requested_subject() {
        assert_eq!(
            subject_token_id("did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:39718")
                .unwrap(),
            39718
        );
        assert_eq!(
            subject_token_id("did:ethr:137:0x0000000000000000000000000000000000000001").unwrap(),
            0
        );
        assert!(subject_token_id("did:nft:1:x").is_err());
    }
}
