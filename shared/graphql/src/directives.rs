//! The directives the schemas apply to their fields (`@requiresVehicleToken`,
//! `@requiresAllOfPrivileges`, …), declared as the Go services' schemas declared them. The server
//! enforces or uses them while resolving; clients never send them.
//!
//! async-graphql's dynamic schema applies directives but cannot declare them. Without the
//! declarations graphql-js, graphql-core and the codegen tools built on them refuse the schema, so
//! the SDL export appends them (module `schema`) and [`DeclaredDirectives`] adds them
//! to `__schema { directives }` answers, as gqlgen's introspection listed them, with the enum their
//! arguments name (`Privilege`), which async-graphql leaves out of `__schema { types }` because no
//! field reaches it.

use async_graphql::extensions::{
    Extension, ExtensionContext, ExtensionFactory, NextExecute, NextParseQuery,
};
use async_graphql::indexmap::IndexMap;
use async_graphql::parser::types::{Directive, ExecutableDocument, Selection, SelectionSet};
use async_graphql::registry::{Deprecation, MetaType, Registry};
use async_graphql::{Name, Positioned, Response, ServerResult, Value, Variables};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// A type-system directive of the schemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirectiveDeclaration {
    /// Its name, without `@`.
    pub name: &'static str,
    /// `(name, type in SDL spelling, kind of the named type)` of each argument.
    pub args: &'static [(&'static str, &'static str, &'static str)],
    /// Where it may be applied.
    pub locations: &'static [&'static str],
}

/// Every directive the schemas apply, in the order they are declared.
pub const DIRECTIVES: [DirectiveDeclaration; 5] = {
    const PRIVILEGED: &[&str] = &["FIELD_DEFINITION", "OBJECT", "INTERFACE", "SCALAR", "ENUM"];
    const MARKER: &[&str] = &["INPUT_FIELD_DEFINITION", "FIELD_DEFINITION"];
    const PRIVILEGES: &[(&str, &str, &str)] = &[("privileges", "[Privilege!]!", "ENUM")];
    [
        DirectiveDeclaration {
            name: "requiresVehicleToken",
            args: &[],
            locations: &["FIELD_DEFINITION"],
        },
        DirectiveDeclaration {
            name: "requiresAllOfPrivileges",
            args: PRIVILEGES,
            locations: PRIVILEGED,
        },
        DirectiveDeclaration {
            name: "requiresOneOfPrivilege",
            args: PRIVILEGES,
            locations: PRIVILEGED,
        },
        // Markers: a signal field, and one that takes an `agg` argument.
        DirectiveDeclaration {
            name: "isSignal",
            args: &[],
            locations: MARKER,
        },
        DirectiveDeclaration {
            name: "hasAggregation",
            args: &[],
            locations: MARKER,
        },
    ]
};

impl DirectiveDeclaration {
    /// The SDL declaration.
    pub fn sdl(&self) -> String {
        let args: Vec<String> = self
            .args
            .iter()
            .map(|(name, ty, _)| format!("{name}: {ty}"))
            .collect();
        let args = if args.is_empty() {
            String::new()
        } else {
            format!("({})", args.join(", "))
        };
        format!(
            "directive @{}{args} on {}",
            self.name,
            self.locations.join(" | ")
        )
    }

    /// Whether `sdl` applies this directive (`@name` not followed by more of a name).
    fn used_in(&self, sdl: &str) -> bool {
        let tag = format!("@{}", self.name);
        sdl.match_indices(&tag).any(|(i, _)| {
            !sdl[i + tag.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        })
    }

    /// The declaration as an `__Directive` value.
    fn node(&self) -> Node {
        let args = self
            .args
            .iter()
            .map(|(name, ty, kind)| {
                Node::Object(
                    "__InputValue",
                    vec![
                        ("name", text(name)),
                        ("description", Node::Leaf(Value::Null)),
                        ("type", type_node(ty, kind)),
                        ("defaultValue", Node::Leaf(Value::Null)),
                        ("isDeprecated", Node::Leaf(Value::Boolean(false))),
                        ("deprecationReason", Node::Leaf(Value::Null)),
                    ],
                )
            })
            .collect();
        let locations = self
            .locations
            .iter()
            .map(|l| Value::Enum(Name::new(l)))
            .collect();
        Node::Object(
            "__Directive",
            vec![
                ("name", text(self.name)),
                ("description", Node::Leaf(Value::Null)),
                ("locations", Node::Leaf(Value::List(locations))),
                ("args", Node::List(args)),
                ("isRepeatable", Node::Leaf(Value::Boolean(false))),
            ],
        )
    }
}

/// The declarations of [`DIRECTIVES`] that `sdl` applies, in [`DIRECTIVES`] order.
pub fn applied(sdl: &str) -> Vec<DirectiveDeclaration> {
    DIRECTIVES
        .iter()
        .filter(|d| d.used_in(sdl))
        .copied()
        .collect()
}

/// A value of the introspection types, as far as a declaration has one.
enum Node {
    Leaf(Value),
    Object(&'static str, Vec<(&'static str, Node)>),
    List(Vec<Node>),
}

fn text(s: &str) -> Node {
    Node::Leaf(Value::String(s.to_string()))
}

fn optional_text(s: &Option<String>) -> Node {
    Node::Leaf(s.clone().map_or(Value::Null, Value::String))
}

/// The named types the arguments of `declared` use, each once.
fn argument_types(declared: &[DirectiveDeclaration]) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    for (_, ty, _) in declared.iter().flat_map(|d| d.args) {
        let name = ty.trim_matches(|c| matches!(c, '[' | ']' | '!'));
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// The `__Type` of an enum of the registry.
fn enum_type_node(ty: &MetaType) -> Option<Node> {
    let MetaType::Enum {
        name,
        description,
        enum_values,
        ..
    } = ty
    else {
        return None;
    };
    let values = enum_values
        .values()
        .map(|v| {
            let (deprecated, reason) = match &v.deprecation {
                Deprecation::NoDeprecated => (false, None),
                Deprecation::Deprecated { reason } => (true, reason.clone()),
            };
            Node::Object(
                "__EnumValue",
                vec![
                    ("name", text(&v.name)),
                    ("description", optional_text(&v.description)),
                    ("isDeprecated", Node::Leaf(Value::Boolean(deprecated))),
                    ("deprecationReason", optional_text(&reason)),
                ],
            )
        })
        .collect();
    let null = || Node::Leaf(Value::Null);
    Some(Node::Object(
        "__Type",
        vec![
            ("kind", Node::Leaf(Value::Enum(Name::new("ENUM")))),
            ("name", text(name)),
            ("description", optional_text(description)),
            ("specifiedByURL", null()),
            ("isOneOf", null()),
            ("fields", null()),
            ("inputFields", null()),
            ("interfaces", null()),
            ("enumValues", Node::List(values)),
            ("possibleTypes", null()),
        ],
    ))
}

/// The `__Type` of an argument type in SDL spelling (`[Privilege!]!`) whose named type is of
/// `kind`; the named type answers what a type reference carries (kind and name).
fn type_node(ty: &str, kind: &str) -> Node {
    let (kind, name, of_type) = if let Some(inner) = ty.strip_suffix('!') {
        ("NON_NULL", Value::Null, type_node(inner, kind))
    } else if let Some(inner) = ty.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        ("LIST", Value::Null, type_node(inner, kind))
    } else {
        (kind, Value::String(ty.to_string()), Node::Leaf(Value::Null))
    };
    Node::Object(
        "__Type",
        vec![
            ("kind", Node::Leaf(Value::Enum(Name::new(kind)))),
            ("name", Node::Leaf(name)),
            ("ofType", of_type),
        ],
    )
}

/// The fields one or more selection sets select on an object: each response key once, with the
/// field's name and every selection set merged under that key.
type Selected<'a> = Vec<(&'a Name, &'a str, Vec<&'a SelectionSet>)>;

/// Answers selections over [`Node`]s, as the executor would.
struct Selector<'a> {
    doc: &'a ExecutableDocument,
    variables: &'a Variables,
}

impl<'a> Selector<'a> {
    /// `@skip` / `@include` let the selection through.
    fn included(&self, directives: &'a [Positioned<Directive>]) -> bool {
        directives.iter().all(|d| {
            let condition = || {
                d.node.get_argument("if").is_some_and(|v| {
                    let value = v
                        .node
                        .clone()
                        .into_const_with(|name| self.variables.get(&name).cloned().ok_or(()));
                    matches!(value, Ok(Value::Boolean(true)))
                })
            };
            match d.node.name.node.as_str() {
                "skip" => !condition(),
                "include" => condition(),
                _ => true,
            }
        })
    }

    /// What `sets` select on an object of type `typename`, fragments expanded (the document
    /// passed validation: fragments exist and do not cycle).
    fn select(&self, sets: &[&'a SelectionSet], typename: &str, out: &mut Selected<'a>) {
        for set in sets {
            for selection in &set.items {
                match &selection.node {
                    Selection::Field(f) if self.included(&f.node.directives) => {
                        let key = &f.node.response_key().node;
                        let set = &f.node.selection_set.node;
                        match out.iter_mut().find(|(k, _, _)| *k == key) {
                            Some((_, _, sets)) => sets.push(set),
                            None => out.push((key, f.node.name.node.as_str(), vec![set])),
                        }
                    }
                    Selection::FragmentSpread(s) if self.included(&s.node.directives) => {
                        if let Some(fragment) = self.doc.fragments.get(&s.node.fragment_name.node) {
                            if fragment.node.type_condition.node.on.node == typename {
                                self.select(&[&fragment.node.selection_set.node], typename, out);
                            }
                        }
                    }
                    Selection::InlineFragment(i) if self.included(&i.node.directives) => {
                        let applies = i
                            .node
                            .type_condition
                            .as_ref()
                            .is_none_or(|c| c.node.on.node == typename);
                        if applies {
                            self.select(&[&i.node.selection_set.node], typename, out);
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    fn answer(&self, node: &Node, sets: &[&'a SelectionSet]) -> Value {
        match node {
            Node::Leaf(v) => v.clone(),
            Node::List(items) => Value::List(items.iter().map(|n| self.answer(n, sets)).collect()),
            Node::Object(typename, fields) => {
                let mut selected = Vec::new();
                self.select(sets, typename, &mut selected);
                let map: IndexMap<Name, Value> = selected
                    .into_iter()
                    .map(|(key, name, sets)| {
                        let value = if name == "__typename" {
                            Value::String(typename.to_string())
                        } else {
                            fields
                                .iter()
                                .find(|(f, _)| *f == name)
                                .map_or(Value::Null, |(_, n)| self.answer(n, &sets))
                        };
                        (key.clone(), value)
                    })
                    .collect();
                Value::Object(map)
            }
        }
    }

    /// Adds `declared` to every `__schema { directives }` list of `data`, and the enums their
    /// arguments name to every `__schema { types }` list that lacks them (in name order, as
    /// async-graphql sorts it), answered for the operation `operation` (every operation when
    /// `None`: a valid document then has one).
    fn append(
        &self,
        data: &mut Value,
        operation: Option<&str>,
        declared: &[DirectiveDeclaration],
        registry: &Registry,
    ) {
        let Value::Object(root) = data else {
            return;
        };
        for (name, op) in self.doc.operations.iter() {
            if operation.is_some_and(|wanted| name.map(Name::as_str) != Some(wanted)) {
                continue;
            }
            let mut roots = Vec::new();
            self.select(&[&op.node.selection_set.node], "Query", &mut roots);
            for (key, _, sets) in roots.iter().filter(|(_, n, _)| *n == "__schema") {
                let Some(Value::Object(schema)) = root.get_mut(*key) else {
                    continue;
                };
                let mut fields = Vec::new();
                self.select(sets, "__Schema", &mut fields);
                for (key, name, sets) in &fields {
                    let Some(Value::List(list)) = schema.get_mut(*key) else {
                        continue;
                    };
                    match *name {
                        "directives" => {
                            list.extend(declared.iter().map(|d| self.answer(&d.node(), sets)));
                        }
                        "types" => self.add_types(list, sets, declared, registry),
                        _ => {}
                    }
                }
            }
        }
    }
}

impl<'a> Selector<'a> {
    /// The enums `declared` name that `types` (answered for `sets`) lacks, in name order. A
    /// selection without `name` cannot tell which are there, and gets none.
    fn add_types(
        &self,
        types: &mut Vec<Value>,
        sets: &[&'a SelectionSet],
        declared: &[DirectiveDeclaration],
        registry: &Registry,
    ) {
        let mut selected = Vec::new();
        self.select(sets, "__Type", &mut selected);
        let Some((name_key, _, _)) = selected.iter().find(|(_, n, _)| *n == "name") else {
            return;
        };
        let name_of = |v: &Value| match v {
            Value::Object(m) => match m.get(*name_key) {
                Some(Value::String(s)) => Some(s.clone()),
                _ => None,
            },
            _ => None,
        };
        for missing in argument_types(declared) {
            if types.iter().any(|t| name_of(t).as_deref() == Some(missing)) {
                continue;
            }
            let Some(node) = registry.types.get(missing).and_then(enum_type_node) else {
                continue;
            };
            let at = types
                .iter()
                .position(|t| name_of(t).is_some_and(|n| n.as_str() > missing))
                .unwrap_or(types.len());
            types.insert(at, self.answer(&node, sets));
        }
    }
}

/// The schema extension that adds the declarations a schema applies to its introspection
/// answers. The schema is built with it, then [`DeclaredDirectives::set`] names the declarations
/// (known once the schema is finished).
#[derive(Clone, Default)]
pub struct DeclaredDirectives(Arc<OnceLock<Vec<DirectiveDeclaration>>>);

impl DeclaredDirectives {
    /// The declarations to answer (the first call wins; building the schema makes the only
    /// one).
    pub fn set(&self, declared: Vec<DirectiveDeclaration>) {
        self.0.get_or_init(|| declared);
    }
}

impl ExtensionFactory for DeclaredDirectives {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(RequestDirectives {
            declared: Arc::clone(&self.0),
            introspection: Mutex::new(None),
        })
    }
}

/// One request: the document and variables are kept only when it may select `__schema`.
struct RequestDirectives {
    declared: Arc<OnceLock<Vec<DirectiveDeclaration>>>,
    introspection: Mutex<Option<(ExecutableDocument, Variables)>>,
}

#[async_graphql::async_trait::async_trait]
impl Extension for RequestDirectives {
    async fn parse_query(
        &self,
        ctx: &ExtensionContext<'_>,
        query: &str,
        variables: &Variables,
        next: NextParseQuery<'_>,
    ) -> ServerResult<ExecutableDocument> {
        let doc = next.run(ctx, query, variables).await?;
        let declares = self.declared.get().is_some_and(|d| !d.is_empty());
        if declares && query.contains("__schema") {
            *self
                .introspection
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some((doc.clone(), variables.clone()));
        }
        Ok(doc)
    }

    async fn execute(
        &self,
        ctx: &ExtensionContext<'_>,
        operation_name: Option<&str>,
        next: NextExecute<'_>,
    ) -> Response {
        let mut response = next.run(ctx, operation_name).await;
        let kept = self
            .introspection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let (Some((doc, variables)), Some(declared)) = (kept, self.declared.get()) {
            let selector = Selector {
                doc: &doc,
                variables: &variables,
            };
            selector.append(
                &mut response.data,
                operation_name,
                declared,
                &ctx.schema_env.registry,
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_print_as_the_go_schemas_declared_them() {
        let sdl: Vec<String> = DIRECTIVES.iter().map(DirectiveDeclaration::sdl).collect();
        assert_eq!(
            sdl[0],
            "directive @requiresVehicleToken on FIELD_DEFINITION"
        );
        assert_eq!(
            sdl[1],
            "directive @requiresAllOfPrivileges(privileges: [Privilege!]!) on FIELD_DEFINITION | OBJECT | INTERFACE | SCALAR | ENUM"
        );
        let used = applied("type Q {\n\tf: Int @isSignal @requiresVehicleTokenX\n}\n");
        assert_eq!(
            used.iter().map(|d| d.name).collect::<Vec<_>>(),
            ["isSignal"]
        );
    }

    #[test]
    fn answers_follow_the_selection() {
        let doc = async_graphql::parser::parse_query(
            "query { s: __schema { ...D } } fragment D on __Schema { directives { n: name args { type { kind ofType { kind ofType { kind ofType { name } } } } } skipped: locations @skip(if: true) } }",
        )
        .unwrap();
        let variables = Variables::default();
        let selector = Selector {
            doc: &doc,
            variables: &variables,
        };
        let mut data = Value::from_json(serde_json::json!({"s": {"directives": []}})).unwrap();
        let registry = Registry::default();
        selector.append(&mut data, None, &DIRECTIVES[1..2], &registry);
        assert_eq!(
            data.into_json().unwrap(),
            serde_json::json!({"s": {"directives": [{"n": "requiresAllOfPrivileges", "args": [
                {"type": {"kind": "NON_NULL", "ofType": {"kind": "LIST", "ofType": {"kind": "NON_NULL", "ofType": {"name": "Privilege"}}}}}
            ]}]}})
        );
    }
}
