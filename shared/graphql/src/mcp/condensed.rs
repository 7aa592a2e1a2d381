//! The condensed schema `<prefix>_get_schema` returns: the served SDL rewritten to fit a
//! model's context. Root fields keep their arguments and directives; every other type takes
//! one line; the signal fields, which are most of the SDL (each catalog signal on two object
//! types with a multi-line description), collapse into one table of name, type, unit,
//! privileges and VSS path, plus the calling convention of each signal type.

use super::names::{server_name, vehicle_argument};
use crate::dialect::Dialect;
use async_graphql::parser::types::{
    ConstDirective, FieldDefinition, InputValueDefinition, TypeDefinition, TypeKind,
};
use async_graphql::Positioned;
use std::collections::HashMap;

/// The heading of the signal table.
pub(super) const SIGNAL_TABLE: &str = "=== SIGNAL FIELDS";

/// Directives that only mark signal fields (already said by the table).
const MARKERS: [&str; 2] = ["isSignal", "hasAggregation"];

/// Types of a parsed SDL by name.
pub(super) type Types<'a> = HashMap<&'a str, &'a TypeDefinition>;

/// The condensed schema of `dialect` from its parsed SDL `types`.
pub(super) fn condensed(dialect: Dialect, types: &Types) -> String {
    let mut names: Vec<&str> = types.keys().copied().collect();
    names.sort_unstable();
    let (vehicle, holds) = vehicle_argument(dialect);
    let mut out = format!(
        "# {} GraphQL schema ({} dialect), condensed.\n\
         # Per-vehicle root fields take the vehicle as `{vehicle}` ({holds}).\n\
         # Time values are RFC 3339 strings (UTC). Data needs a bearer token for the vehicle\n\
         # whose privileges cover the fields read (directives below and the signal table).\n",
        server_name(dialect),
        dialect.name()
    );
    for name in &names {
        let def = types[name];
        if matches!(def.kind, TypeKind::Scalar) {
            out.push_str(&format!("scalar {name}"));
            if let Some(d) = &def.description {
                out.push_str(&format!("  # {}", one_line(&d.node)));
            }
            out.push('\n');
        }
    }
    let signal_types: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| !signal_fields(types[n]).is_empty())
        .collect();
    signal_table(&mut out, types, &signal_types);
    if let Some(query) = types.get("Query") {
        out.push_str("\ntype Query {\n");
        for field in fields(query) {
            out.push_str(&format!("  {}\n", field_line(&field.node)));
        }
        out.push_str("}\n");
    }
    out.push('\n');
    for name in &names {
        let def = types[name];
        let line = match &def.kind {
            TypeKind::Object(_) if *name == "Query" => continue,
            TypeKind::Object(_) => {
                let plain: Vec<String> = fields(def)
                    .iter()
                    .filter(|f| !is_signal(&f.node))
                    .map(|f| field_line(&f.node))
                    .collect();
                let signals = signal_fields(def).len();
                let more = if signals > 0 {
                    format!(" # + {signals} signal fields (SIGNAL FIELDS above)")
                } else {
                    String::new()
                };
                format!("type {name} {{ {} }}{more}", plain.join(", "))
            }
            TypeKind::InputObject(input) => {
                let fields: Vec<String> =
                    input.fields.iter().map(|f| input_value(&f.node)).collect();
                format!("input {name} {{ {} }}", fields.join(", "))
            }
            TypeKind::Enum(e) => {
                let values: Vec<&str> = e
                    .values
                    .iter()
                    .map(|v| v.node.value.node.as_str())
                    .collect();
                format!("enum {name} {{ {} }}", values.join(", "))
            }
            TypeKind::Union(u) => {
                let members: Vec<&str> = u.members.iter().map(|m| m.node.as_str()).collect();
                format!("union {name} = {}", members.join(" | "))
            }
            TypeKind::Interface(_) => {
                let fields: Vec<String> = fields(def).iter().map(|f| field_line(&f.node)).collect();
                format!("interface {name} {{ {} }}", fields.join(", "))
            }
            TypeKind::Scalar => continue,
        };
        if let Some(d) = &def.description {
            out.push_str(&format!("# {}\n", one_line(&d.node)));
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The signal reference: how each signal type takes a signal, then one row per signal of the
/// first signal type (every signal type carries the same signals).
fn signal_table(out: &mut String, types: &Types, signal_types: &[&str]) {
    let Some(first) = signal_types.first() else {
        return;
    };
    let rows = signal_fields(types[first]);
    out.push_str(&format!(
        "\n# {SIGNAL_TABLE} ({} signals) ===\n\
         # Every signal is a field of each signal type; calling convention per type:\n",
        rows.len()
    ));
    for name in signal_types {
        // Group the type's signals by (arguments, return type) so each form prints once.
        let mut forms: Vec<(String, usize)> = Vec::new();
        for field in signal_fields(types[name]) {
            let form = format!("<signal>{}: {}", arguments(field), field.ty.node);
            match forms.iter_mut().find(|(f, _)| *f == form) {
                Some((_, n)) => *n += 1,
                None => forms.push((form, 1)),
            }
        }
        out.push_str(&format!("#   {name}:\n"));
        for (form, n) in forms {
            let plural = if n == 1 { "" } else { "s" };
            out.push_str(&format!("#     {form}  ({n} signal{plural})\n"));
        }
    }
    out.push_str("#\n# | signal | type | unit | privileges | VSS path |\n");
    for field in rows {
        let description = field
            .description
            .as_ref()
            .map(|d| d.node.as_str())
            .unwrap_or("");
        let vss = description.lines().next().unwrap_or("").trim();
        let unit = description
            .lines()
            .find_map(|l| l.trim().strip_prefix("Unit: "))
            .map(|u| u.trim_matches('\''))
            .unwrap_or("");
        let ty = field.ty.node.to_string();
        let ty = ty
            .strip_prefix("Signal")
            .filter(|t| !t.is_empty())
            .unwrap_or(&ty);
        out.push_str(&format!(
            "# | {} | {ty} | {unit} | {} | {vss} |\n",
            field.name.node,
            privileges(&field.directives)
        ));
    }
}

fn fields(def: &TypeDefinition) -> &[Positioned<FieldDefinition>] {
    match &def.kind {
        TypeKind::Object(o) => &o.fields,
        TypeKind::Interface(i) => &i.fields,
        _ => &[],
    }
}

fn is_signal(field: &FieldDefinition) -> bool {
    field
        .directives
        .iter()
        .any(|d| d.node.name.node.as_str() == MARKERS[0])
}

fn signal_fields(def: &TypeDefinition) -> Vec<&FieldDefinition> {
    fields(def)
        .iter()
        .map(|f| &f.node)
        .filter(|f| is_signal(f))
        .collect()
}

/// The privileges a field's directives require (`A B` for all of, `A|B` for one of).
fn privileges(directives: &[Positioned<ConstDirective>]) -> String {
    directives
        .iter()
        .filter_map(|d| {
            let sep = match d.node.name.node.as_str() {
                "requiresAllOfPrivileges" => " ",
                "requiresOneOfPrivilege" => "|",
                _ => return None,
            };
            let list = d.node.get_argument("privileges")?;
            match &list.node {
                async_graphql::Value::List(items) => Some(
                    items
                        .iter()
                        .map(|i| i.to_string())
                        .collect::<Vec<_>>()
                        .join(sep),
                ),
                other => Some(other.to_string()),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A field's `(name: Type = default, …)`, or nothing when it takes no arguments.
fn arguments(field: &FieldDefinition) -> String {
    let args: Vec<String> = field
        .arguments
        .iter()
        .map(|a| input_value(&a.node))
        .collect();
    if args.is_empty() {
        String::new()
    } else {
        format!("({})", args.join(", "))
    }
}

/// `name(args): Type @directives` without the signal markers.
fn field_line(field: &FieldDefinition) -> String {
    let mut line = format!("{}{}: {}", field.name.node, arguments(field), field.ty.node);
    for d in &field.directives {
        let d = &d.node;
        if MARKERS.contains(&d.name.node.as_str()) {
            continue;
        }
        line.push_str(&format!(" @{}", d.name.node));
        if !d.arguments.is_empty() {
            let args: Vec<String> = d
                .arguments
                .iter()
                .map(|(n, v)| format!("{}: {}", n.node, v.node))
                .collect();
            line.push_str(&format!("({})", args.join(", ")));
        }
    }
    line
}

/// `name: Type = default`.
fn input_value(value: &InputValueDefinition) -> String {
    match &value.default_value {
        Some(d) => format!("{}: {} = {}", value.name.node, value.ty.node, d.node),
        None => format!("{}: {}", value.name.node, value.ty.node),
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use crate::mcp::tools::Catalog;
    use crate::Dialect;

    #[test]
    fn condensed_schema_is_small_and_lists_every_signal() {
        let schema = crate::schema::build(Dialect::Dq, crate::DialectSettings::default()).unwrap();
        let sdl = schema.sdl();
        let catalog = Catalog::new(Dialect::Dq, &sdl).unwrap();
        let text = catalog.condensed();
        assert!(
            text.len() * 2 < sdl.len(),
            "{} vs {}",
            text.len(),
            sdl.len()
        );
        for def in dq_signals::SIGNALS.iter() {
            assert!(
                text.contains(&format!("# | {} |", def.name)),
                "{} missing",
                def.name
            );
        }
        assert!(
            text.contains(
                "# | speed | Float | km/h | VEHICLE_NON_LOCATION_DATA | Vehicle.Speed (float) |"
            ),
            "{text}"
        );
        assert!(text.contains("\n  signalsLatest(subject: String!, filter: SignalFilter): SignalCollection @requiresVehicleToken\n"), "{text}");
        assert!(
            text.contains("\ninput SegmentConfig { maxGapSeconds: Int = 300,"),
            "{text}"
        );
        assert!(!text.contains("@isSignal"));
    }
}
