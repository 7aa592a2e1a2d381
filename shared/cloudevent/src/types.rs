//! CloudEvent `type` values. dq decodes only [`STATUS`] and [`EVENTS`].

/// Vehicle status payload; decoded into signals.
pub const STATUS: &str = "dimo.status";
/// Raw status payload stored for attestation/replay; not decoded.
pub const RAW_STATUS: &str = "dimo.raw.status";
/// VIN fingerprint.
pub const FINGERPRINT: &str = "dimo.fingerprint";
/// Verifiable credential.
pub const VERIFIABLE_CREDENTIAL: &str = "dimo.verifiablecredential";
/// Attestation (the attestation path's default type).
pub const ATTESTATION: &str = "dimo.attestation";
/// Voids an earlier event; data `{"voidsId": "..."}`.
pub const TOMBSTONE: &str = "dimo.tombstone";
/// A payload no module recognised (din rejects it).
pub const UNKNOWN: &str = "dimo.unknown";
/// Packed multi-signal payload.
pub const SIGNALS: &str = "dimo.signals";
/// One decoded signal (the type stamped on module outputs).
pub const SIGNAL: &str = "dimo.signal";
/// Raw or packed multi-event payload; decoded into events.
pub const EVENTS: &str = "dimo.events";
/// One decoded event.
pub const EVENT: &str = "dimo.event";
/// Vehicle trigger.
pub const TRIGGER: &str = "dimo.trigger";
/// SACD permission grant.
pub const SACD: &str = "dimo.sacd";
/// SACD template.
pub const SACD_TEMPLATE: &str = "dimo.sacd.template";
/// Prefix of the raw attestation family din also accepts.
pub const RAW_PREFIX: &str = "dimo.raw.";
/// Prefix of the document attestation family din also accepts.
pub const DOCUMENT_PREFIX: &str = "dimo.document.";
