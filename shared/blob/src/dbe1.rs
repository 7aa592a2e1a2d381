//! The DBE1 blob seal shared byte-for-byte with din: `"DBE1"` ‖ 12-byte nonce ‖
//! AES-256-GCM(ciphertext ‖ 16-byte tag), with the object key as associated data so a sealed
//! blob cannot be moved to another key. Bytes without the magic are legacy plaintext.

use aes_gcm::aead::{Aead, Payload};
use aes_gcm::{Aes256Gcm, KeyInit, Nonce};
use base64::Engine;

/// The 4-byte magic that marks a sealed blob.
pub const MAGIC: &[u8; 4] = b"DBE1";
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;

/// A 256-bit sealing key (`BLOB_ENCRYPTION_KEY`, base64). Debug output never shows it.
#[derive(Clone)]
pub struct SealKey(Aes256Gcm);

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealKey(***)")
    }
}

/// Why a key or a blob was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// The configured key is not base64 of exactly 32 bytes.
    #[error("blob encryption key must be base64 of 32 bytes")]
    BadKey,
    /// The blob is sealed but too short, tampered, moved, or sealed with another key.
    #[error("sealed blob could not be opened (wrong key, wrong object key, or tampered)")]
    Decrypt,
}

impl SealKey {
    /// Parses the base64 form of a 32-byte key.
    pub fn from_base64(text: &str) -> Result<Self, SealError> {
        let raw = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|_| SealError::BadKey)?;
        Self::from_bytes(&raw)
    }

    /// Uses 32 raw bytes as the key.
    pub fn from_bytes(raw: &[u8]) -> Result<Self, SealError> {
        Aes256Gcm::new_from_slice(raw)
            .map(SealKey)
            .map_err(|_| SealError::BadKey)
    }

    /// Seals `plaintext` for object key `aad` with a fresh random nonce.
    pub fn seal(&self, aad: &str, plaintext: &[u8]) -> Vec<u8> {
        let nonce: [u8; NONCE_LEN] = rand::random();
        self.seal_with_nonce(aad, plaintext, &nonce)
    }

    /// Seals with a given nonce (for golden vectors; never reuse a nonce with one key).
    pub fn seal_with_nonce(&self, aad: &str, plaintext: &[u8], nonce: &[u8; NONCE_LEN]) -> Vec<u8> {
        let mut out = Vec::with_capacity(MAGIC.len() + NONCE_LEN + plaintext.len() + TAG_LEN);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(nonce);
        // Encryption with a valid key and in-memory buffers cannot fail; an empty result would
        // fail `open` loudly rather than pass silently.
        let sealed = self
            .0
            .encrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: plaintext,
                    aad: aad.as_bytes(),
                },
            )
            .unwrap_or_default();
        out.extend_from_slice(&sealed);
        out
    }

    /// Opens a DBE1 blob stored under `aad`.
    pub fn open(&self, aad: &str, blob: &[u8]) -> Result<Vec<u8>, SealError> {
        let body = blob
            .strip_prefix(MAGIC.as_slice())
            .ok_or(SealError::Decrypt)?;
        if body.len() < NONCE_LEN + TAG_LEN {
            return Err(SealError::Decrypt);
        }
        let (nonce, ct) = body.split_at(NONCE_LEN);
        self.0
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: ct,
                    aad: aad.as_bytes(),
                },
            )
            .map_err(|_| SealError::Decrypt)
    }
}

/// True when `blob` starts with the DBE1 magic.
pub fn is_sealed(blob: &[u8]) -> bool {
    blob.starts_with(MAGIC)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOLDEN_KEY: &str = "KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=";
    const GOLDEN_AAD: &str = "cloudevent/blobs/golden";
    const GOLDEN_SEALED: &str =
        "REJFMfpbx2YHkkRYAdtRPzuxzz7dwfQJNizKGPt2rTfyuQxLDF656mDN5H8zlpCmikO3wJcKpg==";
    const GOLDEN_PLAIN: &[u8] = b"din<->dq blob format v1";

    fn golden() -> Vec<u8> {
        base64::engine::general_purpose::STANDARD
            .decode(GOLDEN_SEALED)
            .unwrap()
    }

    #[test]
    fn golden_vector_opens_and_reseals_identically() {
        let key = SealKey::from_base64(GOLDEN_KEY).unwrap();
        let sealed = golden();
        assert_eq!(key.open(GOLDEN_AAD, &sealed).unwrap(), GOLDEN_PLAIN);
        let nonce: [u8; 12] = sealed[4..16].try_into().unwrap();
        assert_eq!(
            key.seal_with_nonce(GOLDEN_AAD, GOLDEN_PLAIN, &nonce),
            sealed
        );
    }

    #[test]
    fn aad_binds_the_object_key() {
        let key = SealKey::from_base64(GOLDEN_KEY).unwrap();
        assert_eq!(
            key.open("cloudevent/blobs/other", &golden()),
            Err(SealError::Decrypt)
        );
    }

    #[test]
    fn tampering_and_truncation_are_refused() {
        let key = SealKey::from_base64(GOLDEN_KEY).unwrap();
        let mut sealed = golden();
        let last = sealed.len() - 1;
        sealed[last] ^= 1;
        assert_eq!(key.open(GOLDEN_AAD, &sealed), Err(SealError::Decrypt));
        assert_eq!(key.open(GOLDEN_AAD, b"DBE1short"), Err(SealError::Decrypt));
    }

    #[test]
    fn round_trips_with_random_nonces() {
        let key = SealKey::from_bytes(&[7; 32]).unwrap();
        let a = key.seal("k", b"payload");
        let b = key.seal("k", b"payload");
        assert_ne!(a, b);
        assert_eq!(key.open("k", &a).unwrap(), b"payload");
        assert!(is_sealed(&a));
    }

    #[test]
    fn rejects_bad_keys() {
        assert_eq!(
            SealKey::from_base64("not base64!").unwrap_err(),
            SealError::BadKey
        );
        assert_eq!(
            SealKey::from_bytes(&[1; 16]).unwrap_err(),
            SealError::BadKey
        );
    }
}
