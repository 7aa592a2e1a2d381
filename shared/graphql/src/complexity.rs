//! The cost bounds of one GraphQL document, checked right after parsing (before validation, as
//! async-graphql's own complexity limit was), in the words clients already match on.
//!
//! - Every field scores 1 plus its children, except a root field, which scores
//!   [`SQL_FIELD_WEIGHT`]: every root field of every dialect runs SQL, so a document names at
//!   most `COMPLEXITY_LIMIT / SQL_FIELD_WEIGHT` statements. `__typename` is free.
//! - `__schema` / `__type` subtrees are left out of the score, as gqlgen left introspection out
//!   (graphql-js's standard introspection query scores ~220 fields). They have bounds of their own:
//!   [`INTROSPECTION_DEPTH_LIMIT`] and [`INTROSPECTION_FIELD_LIMIT`].
//! - Fragments count where they are spread. Counting stops at the first bound exceeded and every
//!   visited selection counts towards [`WORK_LIMIT`], so a fragment bomb costs no more than that
//!   to refuse; fragments nest at most [`FRAGMENT_DEPTH_LIMIT`] deep, and spreads of a fragment
//!   already being expanded (a cycle, which validation reports) are not followed.

use async_graphql::extensions::{
    Extension, ExtensionContext, ExtensionFactory, NextParseQuery, NextPrepareRequest,
};
use async_graphql::parser::types::{ExecutableDocument, Field, Selection, SelectionSet};
use async_graphql::{Name, Request, ServerError, ServerResult, Variables};
use std::sync::{Arc, Mutex, PoisonError};

/// The score a document may reach (gqlgen's FixedComplexityLimit(100)).
pub const COMPLEXITY_LIMIT: usize = 100;
/// What one root field (one or more SQL statements) scores instead of 1.
pub const SQL_FIELD_WEIGHT: usize = 10;
/// How deep an introspection subtree may nest, `__schema` / `__type` being 1 (the standard
/// introspection query reaches 15: `types.fields.args.type` and nine `ofType`).
pub const INTROSPECTION_DEPTH_LIMIT: usize = 20;
/// How many fields the introspection subtrees of a document may hold, fragments expanded.
pub const INTROSPECTION_FIELD_LIMIT: usize = 500;
/// How many selections (fields, spreads, inline fragments) the check visits at most.
pub const WORK_LIMIT: usize = 10_000;
/// How deep fragment spreads may nest inside fragments (async-graphql's default nesting bound of
/// a document); deeper chains would only exhaust the stack.
pub const FRAGMENT_DEPTH_LIMIT: usize = 32;

/// The error of a document over the score, [`INTROSPECTION_FIELD_LIMIT`] or [`WORK_LIMIT`]
/// (async-graphql's text, which clients and tests match).
pub const TOO_COMPLEX: &str = "Query is too complex.";
/// The error of an introspection subtree deeper than [`INTROSPECTION_DEPTH_LIMIT`], or of
/// fragments nested deeper than [`FRAGMENT_DEPTH_LIMIT`] (async-graphql's depth-limit text).
pub const TOO_DEEP: &str = "Query is nested too deep.";

/// What a document costs under these rules.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cost {
    /// The score (introspection left out).
    pub score: usize,
    /// Fields inside `__schema` / `__type` subtrees.
    pub introspection_fields: usize,
    /// The deepest introspection field.
    pub introspection_depth: usize,
}

/// Where a field stands.
#[derive(Debug, Clone, Copy)]
enum At {
    Root,
    Nested,
    Introspection(usize),
}

struct Walk<'a> {
    doc: &'a ExecutableDocument,
    cost: Cost,
    work: usize,
    expanding: Vec<&'a Name>,
}

impl<'a> Walk<'a> {
    fn set(&mut self, set: &'a SelectionSet, at: At) -> Result<(), &'static str> {
        for selection in &set.items {
            self.work += 1;
            if self.work > WORK_LIMIT {
                return Err(TOO_COMPLEX);
            }
            match &selection.node {
                Selection::Field(field) => self.field(&field.node, at)?,
                Selection::InlineFragment(inline) => {
                    self.set(&inline.node.selection_set.node, at)?
                }
                Selection::FragmentSpread(spread) => {
                    let name = &spread.node.fragment_name.node;
                    // Unknown fragments and cycles are validation's to report.
                    let Some(fragment) = self.doc.fragments.get(name) else {
                        continue;
                    };
                    if self.expanding.contains(&name) {
                        continue;
                    }
                    if self.expanding.len() == FRAGMENT_DEPTH_LIMIT {
                        return Err(TOO_DEEP);
                    }
                    self.expanding.push(name);
                    self.set(&fragment.node.selection_set.node, at)?;
                    self.expanding.pop();
                }
            }
        }
        Ok(())
    }

    fn field(&mut self, field: &'a Field, at: At) -> Result<(), &'static str> {
        let name = field.name.node.as_str();
        let children = match at {
            At::Introspection(depth) => return self.introspection(field, depth),
            _ if name == "__typename" => return Ok(()),
            At::Root if matches!(name, "__schema" | "__type") => {
                return self.introspection(field, 1);
            }
            At::Root => {
                self.cost.score += SQL_FIELD_WEIGHT;
                At::Nested
            }
            At::Nested => {
                self.cost.score += 1;
                At::Nested
            }
        };
        if self.cost.score > COMPLEXITY_LIMIT {
            return Err(TOO_COMPLEX);
        }
        self.set(&field.selection_set.node, children)
    }

    fn introspection(&mut self, field: &'a Field, depth: usize) -> Result<(), &'static str> {
        self.cost.introspection_fields += 1;
        self.cost.introspection_depth = self.cost.introspection_depth.max(depth);
        if depth > INTROSPECTION_DEPTH_LIMIT {
            return Err(TOO_DEEP);
        }
        if self.cost.introspection_fields > INTROSPECTION_FIELD_LIMIT {
            return Err(TOO_COMPLEX);
        }
        self.set(&field.selection_set.node, At::Introspection(depth + 1))
    }
}

/// The cost of the operation `operation` of `doc` (every operation when `None`: a valid
/// document then has only one).
///
/// # Errors
/// [`TOO_COMPLEX`] or [`TOO_DEEP`] when a bound is exceeded.
pub fn cost(doc: &ExecutableDocument, operation: Option<&str>) -> Result<Cost, &'static str> {
    let mut walk = Walk {
        doc,
        cost: Cost::default(),
        work: 0,
        expanding: Vec::new(),
    };
    for (name, op) in doc.operations.iter() {
        if operation.is_some_and(|wanted| name.map(Name::as_str) != Some(wanted)) {
            continue;
        }
        walk.set(&op.node.selection_set.node, At::Root)?;
    }
    Ok(walk.cost)
}

/// The schema extension that applies [`cost`] to every request.
pub struct QueryLimits;

impl ExtensionFactory for QueryLimits {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(RequestLimits::default())
    }
}

/// One request's check: the operation name is known when the request is prepared, the document
/// once it is parsed.
#[derive(Default)]
struct RequestLimits {
    operation: Mutex<Option<String>>,
}

#[async_graphql::async_trait::async_trait]
impl Extension for RequestLimits {
    async fn prepare_request(
        &self,
        ctx: &ExtensionContext<'_>,
        request: Request,
        next: NextPrepareRequest<'_>,
    ) -> ServerResult<Request> {
        *self
            .operation
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = request.operation_name.clone();
        next.run(ctx, request).await
    }

    async fn parse_query(
        &self,
        ctx: &ExtensionContext<'_>,
        query: &str,
        variables: &Variables,
        next: NextParseQuery<'_>,
    ) -> ServerResult<ExecutableDocument> {
        let doc = next.run(ctx, query, variables).await?;
        let operation = self
            .operation
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        cost(&doc, operation.as_deref()).map_err(|message| ServerError::new(message, None))?;
        Ok(doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(query: &str) -> Result<Cost, &'static str> {
        cost(&async_graphql::parser::parse_query(query).unwrap(), None)
    }

    #[test]
    fn root_fields_weigh_more_than_their_children() {
        assert_eq!(of("{ a { b c } d __typename }").unwrap().score, 22);
        let roots = |n: usize| {
            let fields: Vec<String> = (0..n).map(|i| format!("a{i}: availableSignals")).collect();
            format!("{{ {} }}", fields.join(" "))
        };
        assert_eq!(of(&roots(10)).unwrap().score, 100);
        assert_eq!(of(&roots(11)), Err(TOO_COMPLEX));
        // Root fields reached through fragments are root fields.
        let q = "{ ...F } fragment F on Query { a b c d e f g h i j k }";
        assert_eq!(of(q), Err(TOO_COMPLEX));
    }

    #[test]
    fn introspection_has_its_own_bounds() {
        let c = of("{ __schema { types { name fields { name } } } __typename }").unwrap();
        assert_eq!(
            (c.score, c.introspection_fields, c.introspection_depth),
            (0, 5, 4)
        );
        let deep = (0..30).fold("name".to_string(), |inner, _| {
            format!("ofType {{ {inner} }}")
        });
        assert_eq!(
            of(&format!("{{ __type(name: \"Query\") {{ {deep} }} }}")),
            Err(TOO_DEEP)
        );
        let wide: Vec<String> = (0..600).map(|i| format!("n{i}: name")).collect();
        let q = format!("{{ __schema {{ types {{ {} }} }} }}", wide.join(" "));
        assert_eq!(of(&q), Err(TOO_COMPLEX));
    }

    #[test]
    fn fragment_bombs_and_cycles_end() {
        let mut q = String::from("{ ...F0 }");
        for i in 0..30 {
            q.push_str(&format!(
                " fragment F{i} on Query {{ __typename ...F{n} ...F{n} }}",
                n = i + 1
            ));
        }
        q.push_str(" fragment F30 on Query { __typename }");
        assert_eq!(of(&q), Err(TOO_COMPLEX));
        let cycle = "{ ...A } fragment A on Query { x ...B } fragment B on Query { ...A }";
        assert_eq!(of(cycle).unwrap().score, SQL_FIELD_WEIGHT);
        let mut chain = String::from("{ ...F0 }");
        for i in 0..5000 {
            chain.push_str(&format!(" fragment F{i} on Query {{ ...F{} }}", i + 1));
        }
        chain.push_str(" fragment F5000 on Query { x }");
        assert_eq!(of(&chain), Err(TOO_DEEP));
    }

    #[test]
    fn only_the_named_operation_counts() {
        let many: Vec<String> = (0..20).map(|i| format!("a{i}: x")).collect();
        let doc = format!("query Big {{ {} }} query Small {{ y }}", many.join(" "));
        let doc = async_graphql::parser::parse_query(doc).unwrap();
        assert_eq!(cost(&doc, Some("Small")).unwrap().score, SQL_FIELD_WEIGHT);
        assert_eq!(cost(&doc, Some("Big")), Err(TOO_COMPLEX));
    }
}
