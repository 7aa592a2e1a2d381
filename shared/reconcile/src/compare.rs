//! The canonical comparison of two GraphQL answers: lists by the rule of [`crate::rules`],
//! numbers within a relative epsilon, times as instants, errors as a multiset.

use crate::document::Selection;
use crate::rules::{list_rule, Empty, ListRule, Order, DEFAULT_RULE};
use crate::Dialect;
use serde_json::{Map, Number, Value};
use std::fmt;

/// The first difference between two answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// JSON path of the difference in the reference answer (`data.events[3].timestamp`).
    pub path: String,
    /// What differs, without the values (safe to log).
    pub description: String,
    /// The reference's value there, shortened (absent when it has none).
    pub reference: Option<String>,
    /// The candidate's value there, shortened.
    pub candidate: Option<String>,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.description)?;
        if self.reference.is_some() || self.candidate.is_some() {
            let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "(absent)".into());
            write!(
                f,
                " (reference {}, candidate {})",
                show(&self.reference),
                show(&self.candidate)
            )?;
        }
        Ok(())
    }
}

/// Longest value text a [`Mismatch`] carries.
const SNIPPET_CHARS: usize = 120;

fn snippet(v: &Value) -> String {
    let text = v.to_string();
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(SNIPPET_CHARS).collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        text
    }
}

#[derive(Debug, Clone)]
enum Seg {
    Key(String),
    Index(usize),
}

fn render(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                let plain = k
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if plain {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(k);
                } else {
                    out.push_str(&format!("[{}]", Value::String(k.clone())));
                }
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    if out.is_empty() {
        out.push('$');
    }
    out
}

/// One comparison's settings and position.
pub(crate) struct Walk {
    pub dialect: Dialect,
    pub epsilon: f64,
    path: Vec<Seg>,
    /// Schema field names from the root field down to the current value (list rules key on
    /// them); `None` outside `data`, where no rule applies.
    names: Option<Vec<String>>,
}

impl Walk {
    pub fn new(dialect: Dialect, epsilon: f64) -> Walk {
        Walk {
            dialect,
            epsilon,
            path: Vec::new(),
            names: None,
        }
    }

    fn mismatch(
        &self,
        description: impl Into<String>,
        r: Option<&Value>,
        c: Option<&Value>,
    ) -> Mismatch {
        Mismatch {
            path: render(&self.path),
            description: description.into(),
            reference: r.map(snippet),
            candidate: c.map(snippet),
        }
    }

    fn at<T>(&mut self, seg: Seg, f: impl FnOnce(&mut Self) -> T) -> T {
        self.path.push(seg);
        let out = f(self);
        self.path.pop();
        out
    }

    /// Compares whole response bodies: `data` against the document's `root` selection,
    /// `errors` as a multiset, anything else structurally. A missing `data` equals `null` and a
    /// missing `errors` equals `[]` (servers differ in what they omit).
    pub fn body(&mut self, root: Option<&Selection>, r: &Value, c: &Value) -> Option<Mismatch> {
        let (Value::Object(ro), Value::Object(co)) = (r, c) else {
            return self.value(None, r, c);
        };
        let null = Value::Null;
        let empty = Value::Array(Vec::new());
        let mut keys: Vec<&String> = ro.keys().collect();
        keys.extend(co.keys().filter(|k| !ro.contains_key(*k)));
        // data first, then errors: the first difference reported is the data one.
        keys.sort_by_key(|k| match k.as_str() {
            "data" => 0,
            "errors" => 1,
            _ => 2,
        });
        for key in keys {
            let found = match key.as_str() {
                "data" => self.at(Seg::Key(key.clone()), |w| {
                    w.names = Some(Vec::new());
                    let out = w.value(
                        root,
                        ro.get(key).unwrap_or(&null),
                        co.get(key).unwrap_or(&null),
                    );
                    w.names = None;
                    out
                }),
                "errors" => {
                    let as_list = |v: Option<&Value>| match v {
                        None | Some(Value::Null) => empty.clone(),
                        Some(v) => v.clone(),
                    };
                    let (re, ce) = (as_list(ro.get(key)), as_list(co.get(key)));
                    self.at(Seg::Key(key.clone()), |w| match (&re, &ce) {
                        (Value::Array(ra), Value::Array(ca)) => w.unordered(None, ra, ca, 0),
                        _ => w.value(None, &re, &ce),
                    })
                }
                _ => self.at(Seg::Key(key.clone()), |w| {
                    match (ro.get(key), co.get(key)) {
                        (Some(rv), Some(cv)) => w.value(None, rv, cv),
                        (rv, cv) => Some(w.mismatch("key present on one side only", rv, cv)),
                    }
                }),
            };
            if found.is_some() {
                return found;
            }
        }
        None
    }

    fn rule(&self) -> ListRule {
        match &self.names {
            Some(names) if !names.is_empty() => {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                list_rule(self.dialect, &names)
            }
            _ => DEFAULT_RULE,
        }
    }

    fn value(&mut self, shape: Option<&Selection>, r: &Value, c: &Value) -> Option<Mismatch> {
        match (r, c) {
            (Value::Object(ro), Value::Object(co)) => self.object(shape, ro, co),
            (Value::Array(ra), Value::Array(ca)) => self.list(shape, ra, ca),
            (Value::Null, Value::Array(a)) | (Value::Array(a), Value::Null) if a.is_empty() => {
                match self.rule().empty {
                    Empty::NullIsEmpty => None,
                    Empty::Distinct => Some(self.mismatch(
                        "null vs empty list (the dialect tells them apart)",
                        Some(r),
                        Some(c),
                    )),
                }
            }
            (Value::Number(a), Value::Number(b)) => {
                (!numbers_equal(a, b, self.epsilon)).then(|| {
                    let what = if a.is_f64() || b.is_f64() {
                        "numbers differ beyond the epsilon"
                    } else {
                        "values differ"
                    };
                    self.mismatch(what, Some(r), Some(c))
                })
            }
            (Value::String(a), Value::String(b)) => {
                (!strings_equal(a, b)).then(|| self.mismatch("values differ", Some(r), Some(c)))
            }
            (Value::Bool(a), Value::Bool(b)) => {
                (a != b).then(|| self.mismatch("values differ", Some(r), Some(c)))
            }
            (Value::Null, Value::Null) => None,
            (Value::Null, _) | (_, Value::Null) => {
                Some(self.mismatch("null on one side only", Some(r), Some(c)))
            }
            _ => Some(self.mismatch("values of different JSON types", Some(r), Some(c))),
        }
    }

    fn object(
        &mut self,
        shape: Option<&Selection>,
        r: &Map<String, Value>,
        c: &Map<String, Value>,
    ) -> Option<Mismatch> {
        // In the document's order where known (answers' key order is not kept by every JSON
        // map), then keys the document does not name.
        let mut entries: Vec<(&String, &Value)> = shape
            .map(|s| s.keys().filter_map(|k| r.get_key_value(k)).collect())
            .unwrap_or_default();
        let rest: Vec<(&String, &Value)> = r
            .iter()
            .filter(|(k, _)| !entries.iter().any(|(named, _)| named == k))
            .collect();
        entries.extend(rest);
        for (key, rv) in entries {
            let field = shape.and_then(|s| s.by_key(key));
            let Some(cv) = c.get(key) else {
                return self.at(Seg::Key(key.clone()), |w| {
                    Some(w.mismatch("missing in the candidate", Some(rv), None))
                });
            };
            let name = field.map_or(key.as_str(), |f| f.name.as_str()).to_string();
            if let Some(names) = &mut self.names {
                names.push(name);
            }
            let found = self.at(Seg::Key(key.clone()), |w| {
                w.value(field.map(|f| &f.selection), rv, cv)
            });
            if let Some(names) = &mut self.names {
                names.pop();
            }
            if found.is_some() {
                return found;
            }
        }
        c.iter()
            .find(|(k, _)| !r.contains_key(*k))
            .map(|(key, cv)| {
                self.at(Seg::Key(key.clone()), |w| {
                    w.mismatch("missing in the reference", None, Some(cv))
                })
            })
    }

    fn list(&mut self, shape: Option<&Selection>, r: &[Value], c: &[Value]) -> Option<Mismatch> {
        match self.rule().order {
            Order::Strict => self.ordered(shape, r, c, 0),
            Order::Unordered => self.unordered(shape, r, c, 0),
            Order::By(key) => self.grouped(shape, key, r, c),
        }
    }

    /// Position by position from `from` on.
    fn ordered(
        &mut self,
        shape: Option<&Selection>,
        r: &[Value],
        c: &[Value],
        from: usize,
    ) -> Option<Mismatch> {
        for (i, (rv, cv)) in r.iter().zip(c).enumerate().skip(from) {
            if let Some(m) = self.at(Seg::Index(i), |w| w.value(shape, rv, cv)) {
                if r.len() == c.len() {
                    return Some(m);
                }
                return Some(self.at(Seg::Index(i), |w| {
                    w.mismatch(
                        format!(
                            "lists differ in length (reference {}, candidate {}); first differing element",
                            r.len(),
                            c.len()
                        ),
                        Some(rv),
                        Some(cv),
                    )
                }));
            }
        }
        let n = r.len().min(c.len());
        (r.len() != c.len()).then(|| {
            self.at(Seg::Index(n), |w| {
                w.mismatch(
                    format!(
                        "lists differ in length (reference {}, candidate {})",
                        r.len(),
                        c.len()
                    ),
                    r.get(n),
                    c.get(n),
                )
            })
        })
    }

    fn equal(&mut self, shape: Option<&Selection>, a: &Value, b: &Value) -> bool {
        let saved = std::mem::take(&mut self.path);
        let found = self.value(shape, a, b);
        self.path = saved;
        found.is_none()
    }

    /// As a multiset; paths index the reference list, offset by `offset`.
    fn unordered(
        &mut self,
        shape: Option<&Selection>,
        r: &[Value],
        c: &[Value],
        offset: usize,
    ) -> Option<Mismatch> {
        if r.len() == c.len() && r.iter().zip(c).all(|(rv, cv)| self.equal(shape, rv, cv)) {
            return None;
        }
        // Each reference element takes the first unused equal candidate element.
        let mut used = vec![false; c.len()];
        let mut missing: Vec<(usize, &Value)> = Vec::new();
        for (i, rv) in r.iter().enumerate() {
            match used
                .iter_mut()
                .zip(c)
                .find(|(taken, cv)| !**taken && self.equal(shape, rv, cv))
            {
                Some((taken, _)) => *taken = true,
                None => missing.push((i, rv)),
            }
        }
        let extra: Vec<(usize, &Value)> = used
            .iter()
            .zip(c)
            .enumerate()
            .filter(|(_, (taken, _))| !**taken)
            .map(|(j, (_, cv))| (j, cv))
            .collect();
        match (missing.as_slice(), extra.as_slice()) {
            ([], []) => None,
            // One element changed: show where inside it.
            ([(i, rv)], [(j, cv)]) => self
                .at(Seg::Index(offset + i), |w| w.value(shape, rv, cv))
                .map(|mut m| {
                    if r.len() > 1 {
                        m.description = format!(
                            "{} (order-insensitive; against candidate element [{}])",
                            m.description,
                            offset + j
                        );
                    }
                    m
                }),
            ([(i, rv), ..], _) => Some(self.at(Seg::Index(offset + i), |w| {
                w.mismatch(
                    format!(
                        "no equal element in the candidate (order-insensitive list; reference {}, candidate {} elements)",
                        r.len(),
                        c.len()
                    ),
                    Some(*rv),
                    None,
                )
            })),
            ([], [(j, cv), ..]) => Some(self.at(Seg::Index(offset + j), |w| {
                w.mismatch(
                    format!(
                        "candidate element with no equal in the reference (order-insensitive list; reference {}, candidate {} elements)",
                        r.len(),
                        c.len()
                    ),
                    None,
                    Some(*cv),
                )
            })),
        }
    }

    /// Sorted by `key`: runs of equal keys compare as multisets, the runs in order. Lists whose
    /// elements do not all carry the key (not selected) compare position by position.
    fn grouped(
        &mut self,
        shape: Option<&Selection>,
        key: &[&str],
        r: &[Value],
        c: &[Value],
    ) -> Option<Mismatch> {
        let rk: Option<Vec<(&Value, Option<&Selection>)>> =
            r.iter().map(|v| key_of(v, shape, key)).collect();
        let ck: Option<Vec<(&Value, Option<&Selection>)>> =
            c.iter().map(|v| key_of(v, shape, key)).collect();
        let (Some(rk), Some(ck)) = (rk, ck) else {
            return self.ordered(shape, r, c, 0);
        };
        // The keys are as long as their lists: `i` runs while both lists have an element there.
        let mut i = 0;
        while let (Some(&(k, key_shape)), Some(&(c_key, _))) = (rk.get(i), ck.get(i)) {
            if !self.equal(key_shape, k, c_key) {
                return self.ordered(shape, r, c, i);
            }
            // The end of the run from `i`: the first later element whose key is not `k`.
            let run = |keys: &[(&Value, Option<&Selection>)], w: &mut Self| {
                let same = keys
                    .iter()
                    .skip(i + 1)
                    .take_while(|(other, _)| w.equal(key_shape, k, other))
                    .count();
                i + 1 + same
            };
            let (re, ce) = (run(&rk, self), run(&ck, self));
            // Runs end within their lists; were one not to, the strict comparison below decides.
            let (Some(r_run), Some(c_run)) = (r.get(i..re), c.get(i..ce)) else {
                break;
            };
            if let Some(m) = self.unordered(shape, r_run, c_run, i) {
                return Some(m);
            }
            i = re;
        }
        self.ordered(shape, r, c, i)
    }
}

/// The value of the schema-field path `key` inside `elem`, found through the aliases of
/// `shape`, with its own selection.
fn key_of<'v, 's>(
    elem: &'v Value,
    shape: Option<&'s Selection>,
    key: &[&str],
) -> Option<(&'v Value, Option<&'s Selection>)> {
    let mut v = elem;
    let mut s = shape;
    for name in key {
        let field = s.and_then(|s| s.by_name(name));
        let response_key = field.map_or(*name, |f| f.key.as_str());
        v = v.as_object()?.get(response_key)?;
        s = field.map(|f| &f.selection);
    }
    Some((v, s))
}

/// Integers exactly; anything with a fraction or exponent as `f64` within `epsilon` relative to
/// the larger magnitude (absolute below magnitude 1, so values near zero are not held to
/// nothing).
pub(crate) fn numbers_equal(a: &Number, b: &Number, epsilon: f64) -> bool {
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
        return x == y;
    }
    if let (Some(x), Some(y)) = (a.as_u64(), b.as_u64()) {
        return x == y;
    }
    if !(a.is_f64() || b.is_f64()) {
        return false;
    }
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y || (x - y).abs() <= epsilon * x.abs().max(y.abs()).max(1.0),
        _ => false,
    }
}

/// Equal text, or two RFC 3339 times naming the same instant (`…00Z` vs `….000Z` vs
/// `+00:00`: the services print fractions and zones differently).
pub(crate) fn strings_equal(a: &str, b: &str) -> bool {
    a == b || matches!((rfc3339_nanos(a), rfc3339_nanos(b)), (Some(x), Some(y)) if x == y)
}

/// Nanoseconds since the Unix epoch of an RFC 3339 date-time.
fn rfc3339_nanos(s: &str) -> Option<i128> {
    let b = s.as_bytes();
    let at = |i: usize| b.get(i).copied();
    if b.len() < 20
        || at(4) != Some(b'-')
        || at(7) != Some(b'-')
        || !matches!(at(10), Some(b'T' | b't' | b' '))
    {
        return None;
    }
    if at(13) != Some(b':') || at(16) != Some(b':') {
        return None;
    }
    // ASCII digits alone (no sign, no space), as a number.
    let digits = |part: &str| -> Option<i64> {
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let num = |r: std::ops::Range<usize>| digits(s.get(r)?);
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    // After the seconds (19 is a character boundary: `num(17..19)` read ASCII digits there).
    let mut zone = s.get(19..)?;
    let mut nanos: i128 = 0;
    if let Some(fraction) = zone.strip_prefix('.') {
        zone = fraction.trim_start_matches(|c: char| c.is_ascii_digit());
        let fraction_digits = fraction.strip_suffix(zone)?;
        if fraction_digits.is_empty() {
            return None;
        }
        let padded: String = fraction_digits
            .chars()
            .chain(std::iter::repeat('0'))
            .take(9)
            .collect();
        nanos = padded.parse().ok()?;
    }
    let offset_secs: i64 = match zone.as_bytes() {
        b"Z" | b"z" => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let h = digits(zone.get(1..3)?)?;
            let m = digits(zone.get(4..6)?)?;
            let sign = if *sign == b'-' { -1 } else { 1 };
            sign * (h * 3600 + m * 60)
        }
        _ => return None,
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_secs;
    Some(i128::from(secs) * 1_000_000_000 + nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_as_instants() {
        assert_eq!(rfc3339_nanos("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            rfc3339_nanos("2025-06-15T12:34:56.5Z"),
            Some(1_749_990_896_500_000_000)
        );
        assert!(strings_equal(
            "2025-06-15T12:34:56Z",
            "2025-06-15T12:34:56.000Z"
        ));
        assert!(strings_equal(
            "2025-06-15T14:34:56+02:00",
            "2025-06-15T12:34:56Z"
        ));
        assert!(!strings_equal(
            "2025-06-15T12:34:56.001Z",
            "2025-06-15T12:34:56Z"
        ));
        assert!(!strings_equal("2025-06-15", "2025-06-15T00:00:00Z"));
        assert_eq!(rfc3339_nanos("2025-13-01T00:00:00Z"), None);
        assert_eq!(rfc3339_nanos("not a time at all, no"), None);
        // A multi-byte character where the zone or fraction ends is not a time (no byte slice
        // may split it).
        assert_eq!(rfc3339_nanos("2025-06-15T12:34:56.123日23Z"), None);
        assert_eq!(rfc3339_nanos("2025-06-15T12:34:56+0é:0"), None);
    }

    #[test]
    fn numbers() {
        let n = |s: &str| serde_json::from_str::<Number>(s).unwrap();
        assert!(numbers_equal(&n("5"), &n("5.0"), 1e-9));
        assert!(numbers_equal(&n("100.0"), &n("100.00000001"), 1e-9));
        assert!(!numbers_equal(&n("100.0"), &n("100.000001"), 1e-9));
        assert!(
            !numbers_equal(&n("1000000"), &n("1000001"), 1e-3),
            "integers are exact"
        );
        assert!(numbers_equal(&n("0.0"), &n("1e-12"), 1e-9));
        assert!(!numbers_equal(&n("-1"), &n("18446744073709551615"), 1e-9));
    }

    #[test]
    fn paths_render() {
        let p = [
            Seg::Key("data".into()),
            Seg::Key("events".into()),
            Seg::Index(3),
            Seg::Key("odd key".into()),
        ];
        assert_eq!(render(&p), "data.events[3][\"odd key\"]");
        assert_eq!(render(&[]), "$");
    }
}
