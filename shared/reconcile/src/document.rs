//! Just enough of a GraphQL document to compare its answers: which field each response key
//! (alias or name) stands for, at every level of the selection, and which variables the
//! operation declares. Arguments, directives and values are skipped, not interpreted; the servers
//! validate the document, this only maps answers back onto it.

use std::collections::HashMap;

/// Nested fragment spreads deeper than this are not followed (a cyclic document is invalid and
/// the servers reject it; this only keeps the walk finite).
const MAX_FRAGMENT_DEPTH: usize = 32;

/// A selection set resolved to its response keys (fragments inlined, repeated keys merged).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    fields: Vec<Field>,
}

/// One response key of a selection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The key in the answer: the alias, else the field name.
    pub key: String,
    /// The schema field.
    pub name: String,
    /// Its sub-selection (empty for leaves).
    pub selection: Selection,
}

impl Selection {
    /// The field answered under `key`.
    pub fn by_key(&self, key: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.key == key)
    }

    /// The first response key that answers the schema field `name`.
    pub fn by_name(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The response keys, in document order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.fields.iter().map(|f| f.key.as_str())
    }

    fn merge(&mut self, field: Field) {
        match self.fields.iter_mut().find(|f| f.key == field.key) {
            Some(existing) => {
                for sub in field.selection.fields {
                    existing.selection.merge(sub);
                }
            }
            None => self.fields.push(field),
        }
    }
}

/// The operation a request runs, as far as answers are concerned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Operation {
    /// The root selection.
    pub selection: Selection,
    /// Declared variable names (without `$`).
    pub variables: Vec<String>,
}

/// Parses `text` and returns the operation named `operation_name` (the only one when `None`).
///
/// # Errors
/// A document this reader cannot follow, or no such operation.
pub fn operation(text: &str, operation_name: Option<&str>) -> Result<Operation, String> {
    let tokens = lex(text)?;
    let mut p = Parser { tokens, pos: 0 };
    let mut ops: Vec<(Option<String>, Vec<String>, Vec<Item>)> = Vec::new();
    let mut fragments: HashMap<String, Vec<Item>> = HashMap::new();
    while let Some(t) = p.peek() {
        match t {
            Tok::Punct('{') => ops.push((None, Vec::new(), p.selection_set()?)),
            Tok::Name(n) if n == "fragment" => {
                p.pos += 1;
                let name = p.name()?;
                p.expect_name("on")?;
                p.name()?;
                p.directives()?;
                fragments.insert(name, p.selection_set()?);
            }
            Tok::Name(n) if matches!(n.as_str(), "query" | "mutation" | "subscription") => {
                p.pos += 1;
                let name = match p.peek() {
                    Some(Tok::Name(_)) => Some(p.name()?),
                    _ => None,
                };
                let variables = if p.peek() == Some(&Tok::Punct('(')) {
                    p.variable_definitions()?
                } else {
                    Vec::new()
                };
                p.directives()?;
                ops.push((name, variables, p.selection_set()?));
            }
            other => return Err(format!("unexpected {other:?} at the top level")),
        }
    }
    let (_, variables, items) = match operation_name.filter(|n| !n.is_empty()) {
        Some(wanted) => ops
            .into_iter()
            .find(|(n, _, _)| n.as_deref() == Some(wanted))
            .ok_or_else(|| format!("no operation named {wanted:?}"))?,
        None if ops.len() == 1 => ops.remove(0),
        None => return Err(format!("{} operations and no operation name", ops.len())),
    };
    Ok(Operation {
        selection: resolve(&items, &fragments, 0),
        variables,
    })
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Punct(char),
    Spread,
    Name(String),
    /// A string, number or other literal: skipped.
    Value,
}

fn lex(text: &str) -> Result<Vec<Tok>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        match c {
            '#' => {
                while chars.get(i).is_some_and(|&c| c != '\n' && c != '\r') {
                    i += 1;
                }
            }
            c if c.is_whitespace() || c == ',' || c == '\u{feff}' => i += 1,
            '.' => {
                if chars.get(i..i + 3) == Some(&['.', '.', '.']) {
                    out.push(Tok::Spread);
                    i += 3;
                } else {
                    return Err("a lone '.'".into());
                }
            }
            '"' => {
                if chars.get(i..i + 3) == Some(&['"', '"', '"']) {
                    i += 3;
                    loop {
                        match chars.get(i..i + 3) {
                            None => return Err("unterminated block string".into()),
                            Some(['"', '"', '"']) => break,
                            Some(['\\', '"', '"']) => i += 4,
                            _ => i += 1,
                        }
                    }
                    i += 3;
                } else {
                    i += 1;
                    loop {
                        match chars.get(i) {
                            None | Some('\n') => return Err("unterminated string".into()),
                            Some('"') => break,
                            Some('\\') => i += 2,
                            _ => i += 1,
                        }
                    }
                    i += 1;
                }
                out.push(Tok::Value);
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let mut name = String::new();
                while let Some(&c) = chars
                    .get(i)
                    .filter(|c| c.is_ascii_alphanumeric() || **c == '_')
                {
                    name.push(c);
                    i += 1;
                }
                out.push(Tok::Name(name));
            }
            c if c.is_ascii_digit() || c == '-' => {
                while chars
                    .get(i)
                    .is_some_and(|&c| c.is_ascii_alphanumeric() || matches!(c, '-' | '+' | '.'))
                {
                    i += 1;
                }
                out.push(Tok::Value);
            }
            '{' | '}' | '(' | ')' | '[' | ']' | ':' | '!' | '$' | '@' | '=' | '|' | '&' => {
                out.push(Tok::Punct(c));
                i += 1;
            }
            other => return Err(format!("unexpected character {other:?}")),
        }
    }
    Ok(out)
}

/// A selection before fragments are inlined.
#[derive(Debug, Clone)]
enum Item {
    Field {
        key: String,
        name: String,
        items: Vec<Item>,
    },
    Spread(String),
    Inline(Vec<Item>),
}

fn resolve(items: &[Item], fragments: &HashMap<String, Vec<Item>>, depth: usize) -> Selection {
    let mut out = Selection::default();
    for item in items {
        match item {
            Item::Field { key, name, items } => out.merge(Field {
                key: key.clone(),
                name: name.clone(),
                selection: resolve(items, fragments, depth),
            }),
            Item::Inline(items) => {
                for f in resolve(items, fragments, depth).fields {
                    out.merge(f);
                }
            }
            Item::Spread(name) if depth < MAX_FRAGMENT_DEPTH => {
                if let Some(items) = fragments.get(name) {
                    for f in resolve(items, fragments, depth + 1).fields {
                        out.merge(f);
                    }
                }
            }
            Item::Spread(_) => {}
        }
    }
    out
}

struct Parser {
    tokens: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.pos)
    }

    fn next(&mut self) -> Result<Tok, String> {
        let t = self
            .tokens
            .get(self.pos)
            .cloned()
            .ok_or("unexpected end of document")?;
        self.pos += 1;
        Ok(t)
    }

    fn name(&mut self) -> Result<String, String> {
        match self.next()? {
            Tok::Name(n) => Ok(n),
            other => Err(format!("expected a name, found {other:?}")),
        }
    }

    fn expect_name(&mut self, want: &str) -> Result<(), String> {
        match self.name()? {
            n if n == want => Ok(()),
            n => Err(format!("expected {want:?}, found {n:?}")),
        }
    }

    fn expect(&mut self, want: char) -> Result<(), String> {
        match self.next()? {
            Tok::Punct(c) if c == want => Ok(()),
            other => Err(format!("expected {want:?}, found {other:?}")),
        }
    }

    /// Skips a bracketed group (arguments, a value) starting at its opening token.
    fn skip_group(&mut self) -> Result<(), String> {
        let mut depth = 0usize;
        loop {
            match self.next()? {
                Tok::Punct('(' | '[' | '{') => depth += 1,
                Tok::Punct(')' | ']' | '}') => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(());
                    }
                }
                _ => {}
            }
        }
    }

    fn directives(&mut self) -> Result<(), String> {
        while self.peek() == Some(&Tok::Punct('@')) {
            self.pos += 1;
            self.name()?;
            if self.peek() == Some(&Tok::Punct('(')) {
                self.skip_group()?;
            }
        }
        Ok(())
    }

    /// `($a: T = default, …)`: the declared names; types and defaults are skipped.
    fn variable_definitions(&mut self) -> Result<Vec<String>, String> {
        let start = self.pos;
        self.skip_group()?;
        let group: Vec<&Tok> = self.tokens.iter().take(self.pos).skip(start).collect();
        Ok(group
            .windows(3)
            .filter_map(|w| match w {
                [Tok::Punct('$'), Tok::Name(n), Tok::Punct(':')] => Some(n.clone()),
                _ => None,
            })
            .collect())
    }

    fn selection_set(&mut self) -> Result<Vec<Item>, String> {
        self.expect('{')?;
        let mut items = Vec::new();
        loop {
            match self.peek() {
                Some(Tok::Punct('}')) => {
                    self.pos += 1;
                    return Ok(items);
                }
                Some(Tok::Spread) => {
                    self.pos += 1;
                    match self.peek() {
                        Some(Tok::Name(n)) if n == "on" => {
                            self.pos += 1;
                            self.name()?;
                            self.directives()?;
                            items.push(Item::Inline(self.selection_set()?));
                        }
                        Some(Tok::Name(_)) => {
                            let name = self.name()?;
                            self.directives()?;
                            items.push(Item::Spread(name));
                        }
                        _ => {
                            self.directives()?;
                            items.push(Item::Inline(self.selection_set()?));
                        }
                    }
                }
                Some(Tok::Name(_)) => {
                    let first = self.name()?;
                    let (key, name) = if self.peek() == Some(&Tok::Punct(':')) {
                        self.pos += 1;
                        let name = self.name()?;
                        (first, name)
                    } else {
                        (first.clone(), first)
                    };
                    if self.peek() == Some(&Tok::Punct('(')) {
                        self.skip_group()?;
                    }
                    self.directives()?;
                    let items_of = if self.peek() == Some(&Tok::Punct('{')) {
                        self.selection_set()?
                    } else {
                        Vec::new()
                    };
                    items.push(Item::Field {
                        key,
                        name,
                        items: items_of,
                    });
                }
                Some(other) => return Err(format!("unexpected {other:?} in a selection")),
                None => return Err("unterminated selection set".into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_fragments_and_variables() {
        let doc = r#"
            # a comment with { braces }
            query Q($vehicle: String!, $from: Time! = "2025-01-01T00:00:00Z", $f: SignalFilter = {source: "x"}) {
              a: signals(subject: $vehicle, interval: "1h", from: $from, to: "x", filter: {source: "}"}) @include(if: true) {
                t: timestamp
                ...Speed
              }
              events(subject: $vehicle, from: $from, to: $from) { ... on Event { name } timestamp }
            }
            fragment Speed on SignalAggregations { speed(agg: AVG) }
            query Other { availableSignals(subject: "x") }
        "#;
        let op = operation(doc, Some("Q")).unwrap();
        assert_eq!(op.variables, ["vehicle", "from", "f"]);
        let a = op.selection.by_key("a").unwrap();
        assert_eq!(a.name, "signals");
        assert_eq!(a.selection.by_name("timestamp").unwrap().key, "t");
        assert_eq!(a.selection.by_key("speed").unwrap().name, "speed");
        let events = op.selection.by_key("events").unwrap();
        assert!(events.selection.by_key("name").is_some());
        assert!(events.selection.by_key("timestamp").is_some());
        assert!(operation(doc, None).is_err(), "two operations need a name");
        let other = operation(doc, Some("Other")).unwrap();
        assert!(other.selection.by_key("availableSignals").is_some());
    }

    #[test]
    fn anonymous_and_block_strings() {
        let op = operation(
            r#"{ x: latestCloudEvent(subject: """a "quoted" \""" }""") { header { time } } }"#,
            None,
        )
        .unwrap();
        assert_eq!(op.selection.by_key("x").unwrap().name, "latestCloudEvent");
        assert!(operation("{ a(", None).is_err());
        assert!(operation("{ a } }", None).is_err());
    }
}
