//! `subject_bucket`: the one definition of how decoded rows are spread over 256 buckets
//! (the same FNV hash din uses). Writers and every read predicate must agree.

/// Number of subject buckets.
pub const NUM_BUCKETS: u32 = 256;

/// FNV-1a 32-bit over the subject's UTF-8 bytes, modulo 256. Case-sensitive: the subject is
/// hashed exactly as stored.
pub fn subject_bucket(subject: &str) -> i32 {
    const OFFSET_BASIS: u32 = 2_166_136_261;
    const PRIME: u32 = 16_777_619;
    let hash = subject
        .bytes()
        .fold(OFFSET_BASIS, |h, b| (h ^ u32::from(b)).wrapping_mul(PRIME));
    // The remainder is < 256, so the conversion is lossless.
    (hash % NUM_BUCKETS) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_dq_vectors() {
        assert_eq!(subject_bucket(""), 197);
        assert_eq!(
            subject_bucket("did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:1"),
            219
        );
        assert_eq!(
            subject_bucket("did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:2"),
            110
        );
    }

    #[test]
    fn is_case_sensitive() {
        assert_ne!(
            subject_bucket("did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:1"),
            subject_bucket("did:erc721:137:0xba5738a18d83d41847dffbdc6101d37c69c9b0cf:1")
        );
    }
}
