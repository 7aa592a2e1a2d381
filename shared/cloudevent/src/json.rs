//! A small JSON reader that keeps every object member in document order, duplicates included.
//!
//! model-garage reads payloads two ways that disagree on duplicate keys: gjson
//! path lookups take the FIRST occurrence, `encoding/json` struct decodes take the LAST one (and
//! match field names case-insensitively). `serde_json::Value` keeps only one of the duplicates, so
//! dq parses once into this tree and lets each call site pick its rule: [`Value::get`] /
//! [`Value::get_path`] for gjson sites, [`Value::get_field`] for struct-decode sites.
//!
//! Strings borrow from the input unless they contain escapes. Numbers keep their literal text so
//! callers can reproduce gjson's integer and string coercions exactly.

use std::borrow::Cow;
use std::fmt;

/// Deepest nesting accepted; deeper documents are rejected instead of exhausting the stack.
pub const MAX_DEPTH: usize = 512;

/// A parsed JSON value borrowing from the source text.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A number, kept as its literal text (always valid JSON number syntax).
    Number(&'a str),
    /// A string with escapes resolved.
    String(Cow<'a, str>),
    /// An array.
    Array(Vec<Value<'a>>),
    /// An object: members in document order, duplicates kept.
    Object(Vec<(Cow<'a, str>, Value<'a>)>),
}

/// Why a document is not valid JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid json at byte {offset}: {message}")]
pub struct JsonError {
    /// Byte offset of the problem.
    pub offset: usize,
    /// What was wrong.
    pub message: &'static str,
}

/// One top-level object member with the exact source text of its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Member<'a> {
    /// The member name, unescaped.
    pub key: Cow<'a, str>,
    /// The parsed value.
    pub value: Value<'a>,
    /// The value's source text, without surrounding whitespace (gjson `Raw`).
    pub raw: &'a str,
}

/// Parses a complete JSON document.
pub fn parse(text: &str) -> Result<Value<'_>, JsonError> {
    let mut parser = Parser::new(text);
    let result = parser.document();
    parser.finish(result)
}

/// Parses a document that must be an object and returns its members with their raw text.
///
/// Used for CloudEvent envelopes, where `data` must be kept byte-for-byte as sent.
pub fn parse_object_members(text: &str) -> Result<Vec<Member<'_>>, JsonError> {
    let mut parser = Parser::new(text);
    let result = parser.members_with_raw();
    parser.finish(result)
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// The first error met; internal results carry only a zero-sized marker so that the hot
    /// `Result<Value, _>` stays as small as `Value` itself.
    error: Option<JsonError>,
}

/// Marker for "parsing stopped"; the details are in `Parser::error`.
struct Stop;

type PResult<T> = Result<T, Stop>;

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Self {
        Parser {
            text,
            bytes: text.as_bytes(),
            pos: 0,
            error: None,
        }
    }

    fn err(&mut self, message: &'static str) -> Stop {
        self.error.get_or_insert(JsonError {
            offset: self.pos,
            message,
        });
        Stop
    }

    /// Converts an internal result into the public error type.
    fn finish<T>(&mut self, result: PResult<T>) -> Result<T, JsonError> {
        result.map_err(|Stop| {
            self.error.take().unwrap_or(JsonError {
                offset: self.pos,
                message: "invalid json",
            })
        })
    }

    fn document(&mut self) -> PResult<Value<'a>> {
        self.skip_ws();
        let value = self.value(0)?;
        self.skip_ws();
        if self.pos != self.bytes.len() {
            return Err(self.err("trailing characters"));
        }
        Ok(value)
    }

    fn members_with_raw(&mut self) -> PResult<Vec<Member<'a>>> {
        self.skip_ws();
        if self.peek() != Some(b'{') {
            return Err(self.err("expected a JSON object"));
        }
        self.pos += 1;
        let mut members = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
        } else {
            loop {
                self.skip_ws();
                let key = self.string()?;
                self.skip_ws();
                self.expect(b':')?;
                self.skip_ws();
                let start = self.pos;
                let value = self.value(1)?;
                let raw = &self.text[start..self.pos];
                members.push(Member { key, value, raw });
                self.skip_ws();
                match self.next_byte() {
                    Some(b',') => continue,
                    Some(b'}') => break,
                    _ => return Err(self.err("expected ',' or '}'")),
                }
            }
        }
        self.skip_ws();
        if self.pos != self.bytes.len() {
            return Err(self.err("trailing characters"));
        }
        Ok(members)
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn next_byte(&mut self) -> Option<u8> {
        let b = self.peek();
        if b.is_some() {
            self.pos += 1;
        }
        b
    }

    fn expect(&mut self, want: u8) -> PResult<()> {
        if self.peek() == Some(want) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.err("unexpected character"))
        }
    }

    /// The input not consumed yet.
    fn rest(&self) -> &'a [u8] {
        self.bytes.get(self.pos..).unwrap_or_default()
    }

    fn skip_ws(&mut self) {
        self.pos += self
            .rest()
            .iter()
            .take_while(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
            .count();
    }

    fn literal(&mut self, word: &'static str) -> PResult<()> {
        if self.rest().starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.err("invalid literal"))
        }
    }

    fn value(&mut self, depth: usize) -> PResult<Value<'a>> {
        if depth > MAX_DEPTH {
            return Err(self.err("nesting too deep"));
        }
        match self.peek() {
            None => Err(self.err("unexpected end of input")),
            Some(b'n') => self.literal("null").map(|()| Value::Null),
            Some(b't') => self.literal("true").map(|()| Value::Bool(true)),
            Some(b'f') => self.literal("false").map(|()| Value::Bool(false)),
            Some(b'"') => self.string().map(Value::String),
            Some(b'[') => self
                .sequence(b']', "expected ',' or ']'", |p| p.value(depth + 1))
                .map(Value::Array),
            Some(b'{') => self
                .sequence(b'}', "expected ',' or '}'", |p| {
                    let key = p.string()?;
                    p.skip_ws();
                    p.expect(b':')?;
                    p.skip_ws();
                    Ok((key, p.value(depth + 1)?))
                })
                .map(Value::Object),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.err("unexpected character")),
        }
    }

    /// The items of an array or object after its opening byte, up to `close`: arrays and
    /// objects differ only in the item (a value, or a key, a colon and a value).
    fn sequence<T>(
        &mut self,
        close: u8,
        expected: &'static str,
        mut item: impl FnMut(&mut Self) -> PResult<T>,
    ) -> PResult<Vec<T>> {
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(close) {
            self.pos += 1;
            return Ok(items);
        }
        loop {
            self.skip_ws();
            items.push(item(self)?);
            self.skip_ws();
            match self.next_byte() {
                Some(b',') => continue,
                Some(b) if b == close => return Ok(items),
                _ => return Err(self.err(expected)),
            }
        }
    }

    fn digits(&mut self) -> usize {
        let n = self
            .rest()
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        self.pos += n;
        n
    }

    fn number(&mut self) -> PResult<Value<'a>> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.err("invalid number")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return Err(self.err("invalid number"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.err("invalid number"));
            }
        }
        Ok(Value::Number(&self.text[start..self.pos]))
    }

    fn hex4(&mut self) -> PResult<u32> {
        let chunk = self
            .bytes
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.err("short \\u escape"))?;
        let mut v = 0u32;
        for &b in chunk {
            let d = (b as char)
                .to_digit(16)
                .ok_or_else(|| self.err("invalid \\u escape"))?;
            v = v * 16 + d;
        }
        self.pos += 4;
        Ok(v)
    }

    fn string(&mut self) -> PResult<Cow<'a, str>> {
        if self.peek() != Some(b'"') {
            return Err(self.err("expected a string"));
        }
        self.pos += 1;
        let start = self.pos;
        // Fast path: no escapes, borrow the slice.
        let run = self
            .rest()
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20);
        self.pos = run.map_or(self.bytes.len(), |n| start + n);
        match self.peek() {
            None => return Err(self.err("unterminated string")),
            Some(b'"') => {
                let s = &self.text[start..self.pos];
                self.pos += 1;
                return Ok(Cow::Borrowed(s));
            }
            Some(b'\\') => {}
            Some(_) => return Err(self.err("control character in string")),
        }
        let mut out = String::with_capacity(self.pos - start + 16);
        out.push_str(&self.text[start..self.pos]);
        loop {
            let run = self.pos;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            out.push_str(&self.text[run..self.pos]);
            match self.next_byte() {
                None => return Err(self.err("unterminated string")),
                Some(b'"') => return Ok(Cow::Owned(out)),
                Some(b'\\') => {
                    let esc = self
                        .next_byte()
                        .ok_or_else(|| self.err("unterminated escape"))?;
                    match esc {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hi = self.hex4()?;
                            out.push(self.surrogate_tail(hi)?);
                        }
                        _ => return Err(self.err("invalid escape")),
                    }
                }
                Some(_) => return Err(self.err("control character in string")),
            }
        }
    }

    /// Completes a `\u` escape. Lone surrogates become U+FFFD, as Go's decoders do.
    fn surrogate_tail(&mut self, hi: u32) -> PResult<char> {
        if !(0xD800..0xDC00).contains(&hi) {
            return Ok(char::from_u32(hi).unwrap_or('\u{FFFD}'));
        }
        if self.bytes.get(self.pos..self.pos + 2) == Some(b"\\u") {
            let save = self.pos;
            self.pos += 2;
            let lo = self.hex4()?;
            if (0xDC00..0xE000).contains(&lo) {
                let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                return Ok(char::from_u32(c).unwrap_or('\u{FFFD}'));
            }
            self.pos = save;
        }
        Ok('\u{FFFD}')
    }
}

impl<'a> Value<'a> {
    /// gjson-style member lookup: the FIRST member with exactly this name.
    /// On arrays a decimal key selects an element, as gjson paths do.
    pub fn get(&self, key: &str) -> Option<&Value<'a>> {
        match self {
            Value::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        }
    }

    /// gjson dotted-path lookup (`vehicle.signals`), first occurrence at every step.
    pub fn get_path(&self, path: &str) -> Option<&Value<'a>> {
        path.split('.').try_fold(self, |cur, key| cur.get(key))
    }

    /// `encoding/json` struct-field lookup: the LAST member whose name matches `field`
    /// case-insensitively (Go folds ASCII case plus `ſ`→`s` and the Kelvin sign → `k`).
    pub fn get_field(&self, field: &str) -> Option<&Value<'a>> {
        match self {
            Value::Object(members) => members
                .iter()
                .rev()
                .find(|(k, _)| go_fold_eq(k, field))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// The string content when this is a JSON string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The number as f64 when this is a JSON number. Out-of-range literals become ±Inf,
    /// as with Go's `strconv.ParseFloat` result that gjson keeps.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(raw) => raw.parse::<f64>().ok(),
            _ => None,
        }
    }

    /// The number as a finite f64, or `None`: `encoding/json` rejects out-of-range literals.
    pub fn as_f64_finite(&self) -> Option<f64> {
        self.as_f64().filter(|f| f.is_finite())
    }

    /// True for JSON `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// gjson `Result.Int()`: numbers truncate (or parse the literal beyond 2^53), numeric strings
    /// parse with wrapping overflow, `true` is 1, everything else 0.
    pub fn gjson_int(&self) -> i64 {
        match self {
            Value::Bool(true) => 1,
            Value::String(s) => gjson_parse_int(s).unwrap_or(0),
            Value::Number(raw) => {
                let f = raw.parse::<f64>().unwrap_or(f64::NAN);
                const SAFE: f64 = 9_007_199_254_740_991.0;
                if (-SAFE..=SAFE).contains(&f) {
                    f as i64
                } else {
                    // Past 2^53 the literal is parsed; failing that, Go's int64(float) conversion
                    // of an out-of-range value on amd64.
                    gjson_parse_int(raw).unwrap_or(i64::MIN)
                }
            }
            _ => 0,
        }
    }

    /// A short name of the JSON type, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        }
    }

    /// Converts to a `serde_json::Value` the way Go's `gjson.Result.Value()` builds `any`:
    /// numbers through f64, nested duplicate keys resolved last-wins (map assignment).
    /// Returns `None` if a number overflows f64, which Go could not marshal back either.
    pub fn to_serde(&self) -> Option<serde_json::Value> {
        Some(match self {
            Value::Null => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Number(_) => {
                serde_json::Value::Number(serde_json::Number::from_f64(self.as_f64_finite()?)?)
            }
            Value::String(s) => serde_json::Value::String(s.to_string()),
            Value::Array(items) => serde_json::Value::Array(
                items
                    .iter()
                    .map(Value::to_serde)
                    .collect::<Option<Vec<_>>>()?,
            ),
            Value::Object(members) => {
                let mut map = serde_json::Map::new();
                for (k, v) in members {
                    map.insert(k.to_string(), v.to_serde()?);
                }
                serde_json::Value::Object(map)
            }
        })
    }
}

impl fmt::Display for Value<'_> {
    /// Compact JSON text (used for diagnostics and re-encoding small fragments).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Number(raw) => f.write_str(raw),
            Value::String(s) => f.write_str(&serde_json::Value::String(s.to_string()).to_string()),
            Value::Array(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
            Value::Object(members) => {
                f.write_str("{")?;
                for (i, (k, v)) in members.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{}:{v}", serde_json::Value::String(k.to_string()))?;
                }
                f.write_str("}")
            }
        }
    }
}

/// gjson's `parseInt`: optional `-`, then ASCII digits only; overflow wraps like Go int64.
pub fn gjson_parse_int(s: &str) -> Option<i64> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    if digits.is_empty() {
        return None;
    }
    let mut n: i64 = 0;
    for b in digits.bytes() {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n.wrapping_mul(10).wrapping_add(i64::from(b - b'0'));
    }
    Some(if neg { n.wrapping_neg() } else { n })
}

/// Go `encoding/json` field-name folding: ASCII case-insensitive, plus the two non-ASCII
/// characters whose simple case folding reaches ASCII letters.
fn go_fold_eq(key: &str, field: &str) -> bool {
    // The two special characters are multi-byte, so ASCII keys only need the ASCII rule.
    if key.is_ascii() && field.is_ascii() {
        return key.len() == field.len() && key.eq_ignore_ascii_case(field);
    }
    let fold = |c: char| match c {
        '\u{17F}' => 's',
        '\u{212A}' => 'k',
        c => c.to_ascii_lowercase(),
    };
    key.chars().map(fold).eq(field.chars().map(fold))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_wins_for_paths_last_wins_for_fields() {
        let v = parse(r#"{"a":{"x":1},"a":{"x":2},"B":3,"b":4}"#).unwrap();
        assert_eq!(v.get_path("a.x"), Some(&Value::Number("1")));
        assert_eq!(
            v.get_field("A").and_then(|a| a.get_field("x")),
            Some(&Value::Number("2"))
        );
        assert_eq!(v.get_field("b"), Some(&Value::Number("4")));
        assert_eq!(v.get("b"), Some(&Value::Number("4")));
        assert_eq!(v.get("B"), Some(&Value::Number("3")));
    }

    #[test]
    fn go_folding_matches_long_s_and_kelvin() {
        assert!(go_fold_eq("\u{17F}ignals", "signals"));
        assert!(go_fold_eq("\u{212A}ey", "key"));
        assert!(!go_fold_eq("signal", "signals"));
    }

    #[test]
    fn array_index_in_path() {
        let v = parse(r#"{"s":["a","b"]}"#).unwrap();
        assert_eq!(v.get_path("s.1").and_then(Value::as_str), Some("b"));
        assert_eq!(v.get_path("s.2"), None);
    }

    #[test]
    fn escapes_and_surrogates() {
        let v = parse(r#""a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00\ud800x""#).unwrap();
        assert_eq!(v.as_str(), Some("a\"\\/\u{8}\u{c}\n\r\té😀\u{FFFD}x"));
    }

    #[test]
    fn rejects_invalid_documents() {
        for bad in [
            "",
            "{",
            "[1,]",
            "01",
            "1.",
            "-",
            "\"\u{1}\"",
            "{\"a\" 1}",
            "nul",
            "1 2",
            "[\"\\x\"]",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should be rejected");
        }
        let deep = "[".repeat(MAX_DEPTH + 2) + &"]".repeat(MAX_DEPTH + 2);
        assert!(parse(&deep).is_err());
    }

    #[test]
    fn gjson_int_coercions() {
        let cases = [
            ("1713460823243", 1_713_460_823_243),
            ("1.9", 1),
            ("-1.9", -1),
            ("\"42\"", 42),
            ("\"4.2\"", 0),
            ("true", 1),
            ("false", 0),
            ("null", 0),
            ("9223372036854775807", i64::MAX),
            ("1e300", i64::MIN),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text).unwrap().gjson_int(), want, "{text}");
        }
    }

    #[test]
    fn object_members_keep_raw_text() {
        let members =
            parse_object_members(" { \"data\" :  {\"a\": [1, 2]} , \"x\":null } ").unwrap();
        assert_eq!(members[0].raw, "{\"a\": [1, 2]}");
        assert_eq!(members[1].raw, "null");
        assert!(parse_object_members("[1]").is_err());
    }

    #[test]
    fn to_serde_uses_f64_and_last_wins() {
        let v = parse(r#"{"n":9007199254740993,"o":{"k":1,"k":2}}"#).unwrap();
        assert_eq!(
            v.to_serde().unwrap().to_string(),
            r#"{"n":9007199254740992.0,"o":{"k":2.0}}"#
        );
        assert!(parse("1e400").unwrap().to_serde().is_none());
    }
}
