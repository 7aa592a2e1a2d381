//! Ruptela OID conversion table of V1 status (generated upstream from
//! `schema/oids.csv` into `multiplier_offset.go`).

/// How one OID's hex string becomes a number.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Oid {
    pub id: u16,
    /// Declared size; an unsigned raw value of all ones for this size means "not available".
    pub bytes: u8,
    /// Parsed as int64 (only OID 520) instead of uint64.
    pub signed: bool,
    pub mult: f64,
    pub offset: f64,
    /// Inclusive raw ranges that mean "not available" (besides the all-ones sentinel).
    pub not_found: &'static [(i128, i128)],
    /// Inclusive raw gates, applied before scaling.
    pub min: Option<i128>,
    pub max: Option<i128>,
}

/// Why an OID produced no value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OidFailure {
    /// A sentinel, error value or out-of-range raw value.
    NotFound,
    /// Not a hex number (a real error, unlike NotFound).
    Parse,
}

impl Oid {
    /// Looks an OID up.
    pub fn get(id: u16) -> Option<&'static Oid> {
        OIDS.binary_search_by_key(&id, |o| o.id)
            .ok()
            .and_then(|i| OIDS.get(i))
    }

    /// `raw × mult + offset` after the parse, sentinel, error-set and range gates.
    pub fn convert(&self, hex: &str) -> Result<f64, OidFailure> {
        let raw: i128 = if self.signed {
            parse_go_int16(hex)?
        } else {
            parse_go_uint16(hex)?
        };
        if !self.signed {
            let all_ones = (1i128 << (8 * u32::from(self.bytes))) - 1;
            if raw == all_ones {
                return Err(OidFailure::NotFound);
            }
        }
        if self
            .not_found
            .iter()
            .any(|(lo, hi)| (*lo..=*hi).contains(&raw))
        {
            return Err(OidFailure::NotFound);
        }
        if self.min.is_some_and(|m| raw < m) || self.max.is_some_and(|m| raw > m) {
            return Err(OidFailure::NotFound);
        }
        // Unfused multiply then add, like Go on amd64.
        Ok(raw as f64 * self.mult + self.offset)
    }
}

/// Go `strconv.ParseUint(s, 16, 64)`: hex digits only, no prefix, sign or underscore.
fn parse_go_uint16(s: &str) -> Result<i128, OidFailure> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(OidFailure::Parse);
    }
    u64::from_str_radix(s, 16)
        .map(i128::from)
        .map_err(|_| OidFailure::Parse)
}

/// Go `strconv.ParseInt(s, 16, 64)`: optional sign, then hex digits.
fn parse_go_int16(s: &str) -> Result<i128, OidFailure> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(OidFailure::Parse);
    }
    i64::from_str_radix(s.strip_prefix('+').unwrap_or(s), 16)
        .map(i128::from)
        .map_err(|_| OidFailure::Parse)
}

#[rustfmt::skip]
static OIDS: [Oid; 93] = [
    Oid { id: 29, bytes: 2, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(65535) },
    Oid { id: 35, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[(0x2, 0x2), (0x3, 0x3)], min: Some(0), max: Some(1) },
    Oid { id: 36, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[(0x2, 0x2), (0x3, 0x3)], min: Some(0), max: Some(1) },
    Oid { id: 38, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[(0x1F, 0x1F)], min: Some(0), max: Some(5) },
    Oid { id: 39, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[(0xFE, 0xFE)], min: Some(0), max: Some(125) },
    Oid { id: 53, bytes: 2, signed: false, mult: 0.5, offset: 0.0, not_found: &[(0xFE00, 0xFEFF)], min: Some(0), max: Some(64255) },
    Oid { id: 54, bytes: 2, signed: false, mult: 0.5, offset: 0.0, not_found: &[(0xFE00, 0xFEFF)], min: Some(0), max: Some(64255) },
    Oid { id: 55, bytes: 2, signed: false, mult: 0.5, offset: 0.0, not_found: &[(0xFE00, 0xFEFF)], min: Some(0), max: Some(64255) },
    Oid { id: 88, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(1) },
    Oid { id: 89, bytes: 2, signed: false, mult: 0.03125, offset: -273.0, not_found: &[(0xFE00, 0xFEFF)], min: Some(0), max: Some(64255) },
    Oid { id: 92, bytes: 4, signed: false, mult: 0.001, offset: 0.0, not_found: &[(0xFE000000, 0xFEFFFFFF)], min: Some(0), max: Some(4211081215) },
    Oid { id: 94, bytes: 2, signed: false, mult: 0.25, offset: 0.0, not_found: &[], min: Some(0), max: Some(65535) },
    Oid { id: 95, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(255) },
    Oid { id: 96, bytes: 1, signed: false, mult: 1.0, offset: -40.0, not_found: &[], min: Some(0), max: Some(255) },
    Oid { id: 97, bytes: 1, signed: false, mult: 1.0, offset: -40.0, not_found: &[], min: Some(0), max: Some(255) },
    Oid { id: 98, bytes: 1, signed: false, mult: 0.39215686274509803, offset: 0.0, not_found: &[], min: Some(0), max: Some(255) },
    Oid { id: 99, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: None, max: None },
    Oid { id: 100, bytes: 2, signed: false, mult: 0.05, offset: 0.0, not_found: &[], min: Some(0), max: Some(64255) },
    Oid { id: 101, bytes: 1, signed: false, mult: 1.0, offset: -125.0, not_found: &[], min: Some(0), max: Some(255) },
    Oid { id: 102, bytes: 2, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(65535) },
    Oid { id: 103, bytes: 1, signed: false, mult: 0.39215686274509803, offset: 0.0, not_found: &[], min: Some(0), max: Some(255) },
    Oid { id: 107, bytes: 2, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(65535) },
    Oid { id: 108, bytes: 2, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: None },
    Oid { id: 109, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(255) },
    Oid { id: 114, bytes: 4, signed: false, mult: 5.0, offset: 0.0, not_found: &[(0xFE000000, 0xFEFFFFFF)], min: Some(0), max: Some(4211081215) },
    Oid { id: 115, bytes: 1, signed: false, mult: 1.0, offset: -40.0, not_found: &[(0xFE, 0xFE)], min: Some(0), max: Some(250) },
    Oid { id: 116, bytes: 2, signed: false, mult: 0.05, offset: 0.0, not_found: &[(0xFE00, 0xFEFF)], min: Some(0), max: Some(64255) },
    Oid { id: 197, bytes: 2, signed: false, mult: 0.125, offset: 0.0, not_found: &[(0xFE00, 0xFEFF)], min: Some(0), max: Some(64255) },
    Oid { id: 201, bytes: 1, signed: false, mult: 0.4, offset: 0.0, not_found: &[], min: Some(0), max: Some(250) },
    Oid { id: 205, bytes: 2, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(65535) },
    Oid { id: 206, bytes: 1, signed: false, mult: 0.4, offset: 0.0, not_found: &[(0xFE, 0xFE)], min: Some(0), max: Some(250) },
    Oid { id: 207, bytes: 1, signed: false, mult: 0.4, offset: 0.0, not_found: &[(0xFE, 0xFE)], min: Some(0), max: Some(250) },
    Oid { id: 208, bytes: 4, signed: false, mult: 0.5, offset: 0.0, not_found: &[(0xFE000000, 0xFEFFFFFF)], min: Some(0), max: Some(4211081215) },
    Oid { id: 210, bytes: 2, signed: false, mult: 0.00390625, offset: 0.0, not_found: &[(0xFE00, 0xFEFF)], min: Some(0), max: Some(64255) },
    Oid { id: 313, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(7) },
    Oid { id: 316, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(7) },
    Oid { id: 347, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(7) },
    Oid { id: 355, bytes: 1, signed: false, mult: 8.0, offset: 0.0, not_found: &[(0xFE, 0xFE)], min: Some(0), max: Some(250) },
    Oid { id: 356, bytes: 1, signed: false, mult: 8.0, offset: 0.0, not_found: &[(0xFE, 0xFE)], min: Some(0), max: Some(250) },
    Oid { id: 357, bytes: 1, signed: false, mult: 0.4, offset: 0.0, not_found: &[(0xFE, 0xFE)], min: Some(0), max: Some(250) },
    Oid { id: 359, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: None },
    Oid { id: 360, bytes: 1, signed: false, mult: 1.0, offset: -125.0, not_found: &[(0xFE, 0xFE)], min: Some(0), max: Some(250) },
    Oid { id: 362, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[(0x2, 0x2), (0x3, 0x3)], min: Some(0), max: Some(1) },
    Oid { id: 366, bytes: 1, signed: false, mult: 1.0, offset: -125.0, not_found: &[(0xFE, 0xFE)], min: Some(0), max: Some(251) },
    Oid { id: 367, bytes: 1, signed: false, mult: 1.0, offset: -125.0, not_found: &[(0xFE, 0xFE)], min: Some(0), max: Some(251) },
    Oid { id: 405, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(1) },
    Oid { id: 409, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(1) },
    Oid { id: 482, bytes: 1, signed: false, mult: 0.4, offset: 0.0, not_found: &[(0xFE, 0xFE)], min: Some(0), max: Some(250) },
    Oid { id: 483, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[(0xFE, 0xFE)], min: Some(0), max: Some(250) },
    Oid { id: 515, bytes: 1, signed: false, mult: 0.5, offset: 0.0, not_found: &[], min: Some(0), max: Some(255) },
    Oid { id: 516, bytes: 2, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(65535) },
    Oid { id: 517, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(255) },
    Oid { id: 518, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(255) },
    Oid { id: 519, bytes: 1, signed: false, mult: 1.0, offset: -125.0, not_found: &[(0xFE, 0xFE)], min: Some(0), max: Some(250) },
    Oid { id: 520, bytes: 4, signed: true, mult: 1.0, offset: 0.0, not_found: &[], min: Some(-2147483648), max: Some(2147483647) },
    Oid { id: 522, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(1) },
    Oid { id: 538, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(255) },
    Oid { id: 642, bytes: 2, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(65535) },
    Oid { id: 645, bytes: 4, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(4294967295) },
    Oid { id: 720, bytes: 1, signed: false, mult: 0.5, offset: 0.0, not_found: &[], min: Some(0), max: Some(255) },
    Oid { id: 722, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(255) },
    Oid { id: 723, bytes: 2, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(65535) },
    Oid { id: 727, bytes: 2, signed: false, mult: 0.03125, offset: -273.0, not_found: &[], min: Some(0), max: Some(65535) },
    Oid { id: 728, bytes: 1, signed: false, mult: 4.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(255) },
    Oid { id: 950, bytes: 2, signed: false, mult: 0.01, offset: 0.0, not_found: &[], min: Some(0), max: Some(10000) },
    Oid { id: 960, bytes: 2, signed: false, mult: 0.05, offset: 0.0, not_found: &[], min: Some(0), max: Some(65534) },
    Oid { id: 961, bytes: 2, signed: false, mult: 0.05, offset: 0.0, not_found: &[], min: Some(0), max: Some(65534) },
    Oid { id: 962, bytes: 2, signed: false, mult: 0.05, offset: 0.0, not_found: &[], min: Some(0), max: Some(65534) },
    Oid { id: 963, bytes: 2, signed: false, mult: 0.05, offset: 0.0, not_found: &[], min: Some(0), max: Some(65534) },
    Oid { id: 964, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(254) },
    Oid { id: 965, bytes: 2, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(65534) },
    Oid { id: 966, bytes: 2, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(65534) },
    Oid { id: 967, bytes: 2, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(65534) },
    Oid { id: 968, bytes: 2, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(65534) },
    Oid { id: 985, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(1) },
    Oid { id: 1148, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(254) },
    Oid { id: 1149, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(254) },
    Oid { id: 1150, bytes: 1, signed: false, mult: 0.4, offset: 0.0, not_found: &[(0xFB, 0xFB)], min: Some(0), max: Some(250) },
    Oid { id: 1187, bytes: 1, signed: false, mult: 0.4, offset: 0.0, not_found: &[(0xFB, 0xFB)], min: Some(0), max: Some(250) },
    Oid { id: 1190, bytes: 4, signed: false, mult: 0.001, offset: 0.0, not_found: &[], min: Some(0), max: Some(4294967294) },
    Oid { id: 1191, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(1) },
    Oid { id: 1221, bytes: 1, signed: false, mult: 0.39215686274509803, offset: 0.0, not_found: &[], min: Some(0), max: Some(254) },
    Oid { id: 1222, bytes: 1, signed: false, mult: 0.78125, offset: -100.0, not_found: &[], min: Some(0), max: Some(254) },
    Oid { id: 1223, bytes: 1, signed: false, mult: 0.78125, offset: -100.0, not_found: &[], min: Some(0), max: Some(254) },
    Oid { id: 1224, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(254) },
    Oid { id: 1225, bytes: 1, signed: false, mult: 1.0, offset: -40.0, not_found: &[], min: Some(0), max: Some(254) },
    Oid { id: 1226, bytes: 2, signed: false, mult: 0.01, offset: 0.0, not_found: &[], min: Some(0), max: Some(65534) },
    Oid { id: 1227, bytes: 1, signed: false, mult: 0.39215686274509803, offset: 0.0, not_found: &[], min: Some(0), max: Some(254) },
    Oid { id: 1228, bytes: 2, signed: false, mult: 0.079, offset: 0.0, not_found: &[], min: Some(0), max: Some(65524) },
    Oid { id: 1229, bytes: 1, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(254) },
    Oid { id: 1230, bytes: 1, signed: false, mult: 0.39215686274509803, offset: 0.0, not_found: &[], min: Some(0), max: Some(254) },
    Oid { id: 1231, bytes: 1, signed: false, mult: 1.0, offset: -40.0, not_found: &[], min: Some(0), max: Some(254) },
    Oid { id: 1232, bytes: 4, signed: false, mult: 1.0, offset: 0.0, not_found: &[], min: Some(0), max: Some(4294966294) },
];

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(id: u16, hex: &str) -> Result<f64, OidFailure> {
        Oid::get(id).unwrap().convert(hex)
    }

    #[test]
    fn table_is_sorted_for_lookup() {
        assert!(OIDS.windows(2).all(|w| w[0].id < w[1].id));
    }

    #[test]
    fn scaling_matches_the_spec_examples() {
        assert_eq!(conv(210, "1F3F"), Ok(31.24609375));
        assert_eq!(conv(89, "2F13"), Ok(103.59375));
        assert_eq!(conv(98, "31"), Ok(19.215686274509803));
        assert_eq!(conv(1222, "71"), Ok(-11.71875));
    }

    #[test]
    fn not_found_rules() {
        assert_eq!(
            conv(95, "FF"),
            Err(OidFailure::NotFound),
            "all-ones sentinel"
        );
        assert_eq!(conv(645, "FFFFFFFF"), Err(OidFailure::NotFound));
        assert_eq!(conv(53, "FE10"), Err(OidFailure::NotFound), "error range");
        assert_eq!(conv(35, "2"), Err(OidFailure::NotFound), "error set");
        assert_eq!(conv(39, "7E"), Err(OidFailure::NotFound), "above max");
        assert_eq!(
            conv(99, "1FF"),
            Ok(511.0),
            "wider than declared and no gate: passes as-is"
        );
        assert_eq!(
            conv(95, "1FF"),
            Err(OidFailure::NotFound),
            "wider than declared fails the max gate"
        );
        assert_eq!(
            conv(520, "FFFFFFFF"),
            Err(OidFailure::NotFound),
            "signed parse is not two's complement"
        );
        assert_eq!(conv(520, "-10"), Ok(-16.0));
    }

    #[test]
    fn parse_errors_are_not_not_found() {
        for bad in ["", "0x1F", "-1", "1_0", "G", "10000000000000000"] {
            assert_eq!(conv(95, bad), Err(OidFailure::Parse), "{bad}");
        }
    }
}
