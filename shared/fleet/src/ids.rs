//! Identifiers that look like the real ones: KSUIDs, VINs with a valid check digit, and
//! 65-byte signatures.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// KSUID epoch: 2014-05-13T16:53:20Z, in Unix seconds.
const KSUID_EPOCH_S: i64 = 1_400_000_000;
/// A KSUID is 20 bytes written as 27 base62 digits.
pub(crate) const KSUID_LEN: usize = 27;
const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends a KSUID for `time_ms` (4-byte big-endian seconds since the KSUID epoch, then 16 random
/// bytes) to `out`, the way din and the vendor modules mint ids.
pub(crate) fn push_ksuid(out: &mut String, time_ms: i64, rng: &mut ChaCha8Rng) {
    let secs = (time_ms.div_euclid(1000) - KSUID_EPOCH_S).clamp(0, i64::from(u32::MAX)) as u32;
    let payload: u128 = rng.gen();
    // 160-bit big-endian number as five u32 limbs, most significant first.
    let limbs = [
        secs,
        (payload >> 96) as u32,
        (payload >> 64) as u32,
        (payload >> 32) as u32,
        payload as u32,
    ];
    out.extend(base62(limbs).iter().map(|&b| char::from(b)));
}

/// A 160-bit big-endian number (five u32 limbs, most significant first) in KSUID's base62.
fn base62(mut limbs: [u32; 5]) -> [u8; KSUID_LEN] {
    let mut digits = [b'0'; KSUID_LEN];
    for slot in digits.iter_mut().rev() {
        let mut rem: u64 = 0;
        for limb in limbs.iter_mut() {
            let acc = (rem << 32) | u64::from(*limb);
            *limb = (acc / 62) as u32;
            rem = acc % 62;
        }
        *slot = BASE62[rem as usize];
    }
    digits
}

/// A fresh KSUID string.
pub(crate) fn ksuid(time_ms: i64, rng: &mut ChaCha8Rng) -> String {
    let mut s = String::with_capacity(KSUID_LEN);
    push_ksuid(&mut s, time_ms, rng);
    s
}

/// `0x` + 130 lowercase hex digits: the shape of the secp256k1 signatures devices attach.
pub(crate) fn signature(rng: &mut ChaCha8Rng) -> String {
    let mut buf = [0u8; 132];
    buf[0] = b'0';
    buf[1] = b'x';
    for chunk in buf[2..130].chunks_mut(32) {
        let v: u128 = rng.gen();
        for (i, slot) in chunk.iter_mut().enumerate() {
            *slot = HEX[((v >> (124 - 4 * i)) & 0xf) as usize];
        }
    }
    // 65th byte: the recovery id, 0x1b or 0x1c like go-ethereum signatures.
    buf[130] = b'1';
    buf[131] = if rng.gen::<bool>() { b'b' } else { b'c' };
    buf.iter().map(|&b| char::from(b)).collect()
}

/// Uppercase hex of `bytes`, 16 hex digits per 8 bytes (Ruptela VIN parts are written this way).
pub(crate) fn hex_upper(bytes: &[u8]) -> String {
    const UPPER: &[u8; 16] = b"0123456789ABCDEF";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(UPPER[usize::from(b >> 4)]));
        s.push(char::from(UPPER[usize::from(b & 0xf)]));
    }
    s
}

/// Characters a VIN may contain (no I, O, Q).
const VIN_CHARS: &[u8] = b"0123456789ABCDEFGHJKLMNPRSTUVWXYZ";
/// Serial-number characters: digits only, as most makers use.
const VIN_DIGITS: &[u8] = b"0123456789";
/// Position weights for the North American check digit (ISO 3779 position 9).
const VIN_WEIGHTS: [u32; 17] = [8, 7, 6, 5, 4, 3, 2, 10, 0, 9, 8, 7, 6, 5, 4, 3, 2];

fn vin_value(c: u8) -> u32 {
    match c {
        b'0'..=b'9' => u32::from(c - b'0'),
        b'A' | b'J' => 1,
        b'B' | b'K' | b'S' => 2,
        b'C' | b'L' | b'T' => 3,
        b'D' | b'M' | b'U' => 4,
        b'E' | b'N' | b'V' => 5,
        b'F' | b'W' => 6,
        b'G' | b'P' | b'X' => 7,
        b'H' | b'Y' => 8,
        b'R' | b'Z' => 9,
        _ => 0,
    }
}

/// Model-year code (VIN position 10) for 2010..=2030.
fn year_code(year: u16) -> u8 {
    const CODES: &[u8] = b"ABCDEFGHJKLMNPRSTVWXY";
    let i = usize::from(year.saturating_sub(2010)).min(CODES.len() - 1);
    CODES[i]
}

/// A 17-character VIN for `wmi` (3 chars) and `year` with a correct check digit, so din's VIN gate
/// (`IsValidVIN`) accepts the fingerprints.
pub(crate) fn vin(wmi: &str, year: u16, rng: &mut ChaCha8Rng) -> String {
    let mut v = [b'0'; 17];
    for (slot, b) in v.iter_mut().zip(wmi.bytes().take(3)) {
        *slot = b;
    }
    for slot in v.iter_mut().take(8).skip(3) {
        *slot = VIN_CHARS[rng.gen_range(0..VIN_CHARS.len())];
    }
    v[9] = year_code(year);
    v[10] = VIN_CHARS[rng.gen_range(0..VIN_CHARS.len())];
    for slot in v.iter_mut().skip(11) {
        *slot = VIN_DIGITS[rng.gen_range(0..VIN_DIGITS.len())];
    }
    let sum: u32 = v
        .iter()
        .zip(VIN_WEIGHTS)
        .map(|(&c, w)| vin_value(c) * w)
        .sum();
    v[8] = match sum % 11 {
        10 => b'X',
        d => b'0' + d as u8,
    };
    v.iter().map(|&b| char::from(b)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{stream, Purpose};

    fn decode_base62(s: &str) -> Vec<u8> {
        // Big-number base62 decode into 20 big-endian bytes.
        let mut n = [0u8; 20];
        for c in s.bytes() {
            let d = BASE62.iter().position(|&x| x == c).unwrap() as u32;
            let mut carry = d;
            for byte in n.iter_mut().rev() {
                let acc = u32::from(*byte) * 62 + carry;
                *byte = (acc & 0xff) as u8;
                carry = acc >> 8;
            }
        }
        n.to_vec()
    }

    #[test]
    fn ksuid_shape_and_timestamp() {
        let mut rng = stream(1, 0, Purpose::Emit, 0);
        let t_ms = 1_727_425_406_123; // 2024-09-27T08:23:26.123Z
        let id = ksuid(t_ms, &mut rng);
        assert_eq!(id.len(), KSUID_LEN);
        assert!(id.bytes().all(|b| b.is_ascii_alphanumeric()));
        let bytes = decode_base62(&id);
        let secs = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        assert_eq!(i64::from(secs) + KSUID_EPOCH_S, t_ms / 1000);
    }

    #[test]
    fn known_ksuid_encoding() {
        // The max KSUID (all 0xff bytes) is "aWgEPTl1tmebfsQzFP4bxwgy80V" in segmentio/ksuid.
        let digits = base62([u32::MAX; 5]);
        assert_eq!(
            std::str::from_utf8(&digits).unwrap(),
            "aWgEPTl1tmebfsQzFP4bxwgy80V"
        );
    }

    #[test]
    fn vin_check_digit_is_valid() {
        // A published example VIN: 1M8GDM9AXKP042788 has check digit X.
        let known = b"1M8GDM9AXKP042788";
        let sum: u32 = known
            .iter()
            .zip(VIN_WEIGHTS)
            .map(|(&c, w)| vin_value(c) * w)
            .sum();
        assert_eq!(sum % 11, 10);
        let mut rng = stream(3, 0, Purpose::Profile, 0);
        for _ in 0..50 {
            let v = vin("5YJ", 2022, &mut rng);
            assert_eq!(v.len(), 17);
            assert!(v.starts_with("5YJ"));
            assert!(!v.contains(['I', 'O', 'Q']));
            let sum: u32 = v
                .bytes()
                .zip(VIN_WEIGHTS)
                .map(|(c, w)| vin_value(c) * w)
                .sum();
            let check = v.as_bytes()[8];
            let expect = if sum % 11 == 10 {
                b'X'
            } else {
                b'0' + (sum % 11) as u8
            };
            assert_eq!(check, expect, "{v}");
        }
    }

    #[test]
    fn signature_shape() {
        let mut rng = stream(1, 0, Purpose::Emit, 0);
        let s = signature(&mut rng);
        assert_eq!(s.len(), 132);
        assert!(s[2..].bytes().all(|b| b.is_ascii_hexdigit()));
    }
}
