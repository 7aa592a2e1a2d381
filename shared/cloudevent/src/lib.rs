//! CloudEvents as dq stores and reads them: the header, the raw (undecoded) event, DIDs, the
//! `lake.raw_events` row form and the `subject_bucket` rule.
//!
//! Semantics follow DIMO's Go `cloudevent` package and din's row writer. This crate does not decode
//! payloads into signals (that is `dq-decode`) and does no I/O.
//!
//! # Layout
//! - [`event`] — [`CloudEventHeader`], [`RawEvent`], JSON parsing/serialization, `Key()`.
//! - [`types`] — CloudEvent `type` constants.
//! - [`did`] — `did:erc721` / `did:ethr` / `did:erc20` / legacy `did:nft`, EIP-55 addresses.
//! - [`row`] — [`RawRow`], the `lake.raw_events` columns, both directions.
//! - [`bucket`] — [`subject_bucket`].
//! - [`json`] — a duplicate-key-preserving JSON reader (gjson first-wins vs Go struct last-wins).
//! - [`gojson`] — JSON text byte-identical to Go's `encoding/json`.
//! - [`time`] — RFC 3339 with Go's parsing and formatting rules; timestamp ↔ epoch µs.
//! - [`duration`] — Go duration strings (`1h30m`, `300ms`).
#![warn(missing_docs)]

pub mod bucket;
pub mod did;
pub mod duration;
pub mod event;
pub mod gojson;
pub mod json;
pub mod row;
pub mod time;
pub mod types;

pub use bucket::subject_bucket;
pub use did::{eip55, Erc20Did, Erc721Did, EthrDid};
pub use event::{CloudEventHeader, ParseError, RawEvent};
pub use row::{ExtrasStatus, RawRow};
