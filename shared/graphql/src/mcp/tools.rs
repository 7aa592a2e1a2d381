//! The tool list of one dialect: the built-in `<prefix>_get_schema` and `<prefix>_query`, and
//! the shortcut tools declared once in [`SHORTCUTS`]. A shortcut exists only where the
//! dialect's `Query` has its root field; its input schema is derived from that field's
//! arguments in the served schema's own SDL, so it cannot drift from what `/query` accepts.

use super::condensed::{self, Types};
use super::names::{tool_prefix, vehicle_argument};
use crate::dialect::{Dialect, DialectExt};
use async_graphql::parser::types::{
    BaseType, InputValueDefinition, Type, TypeKind, TypeSystemDefinition,
};
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// One shortcut tool: a root field run with a fixed selection; the tool's arguments are the
/// field's arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shortcut {
    /// The tool name after the dialect prefix (`get_latest_signals` → `dq_get_latest_signals`).
    pub name: &'static str,
    /// The root field it runs.
    pub field: &'static str,
    /// What a model reads in `tools/list`; mechanism names are respelled per dialect.
    pub description: &'static str,
    /// The fixed selection set, without braces; empty for a field of scalars.
    pub selection: &'static str,
}

// Go's dq selected only `timestamp` for `signals` and only `lastSeen` for `signalsLatest`,
// which tells a model when data exists but never what it says. These selections carry a few
// common signals with their values instead. They stay within the non-location privilege
// (VEHICLE_NON_LOCATION_DATA), so a token with that privilege gets an answer without field
// errors; locations and any other signal are one `<prefix>_query` away.
const SIGNALS_SELECTION: &str = "timestamp speed(agg: AVG) maxSpeed: speed(agg: MAX) \
    powertrainTransmissionTravelledDistance(agg: MAX) powertrainFuelSystemRelativeLevel(agg: LAST) \
    powertrainTractionBatteryStateOfChargeCurrent(agg: LAST) isIgnitionOn(agg: MAX) \
    lowVoltageBatteryCurrentVoltage(agg: AVG)";
const LATEST_SELECTION: &str = "lastSeen speed { timestamp value } \
    powertrainTransmissionTravelledDistance { timestamp value } \
    powertrainFuelSystemRelativeLevel { timestamp value } \
    powertrainTractionBatteryStateOfChargeCurrent { timestamp value } \
    isIgnitionOn { timestamp value } lowVoltageBatteryCurrentVoltage { timestamp value } \
    exteriorAirTemperature { timestamp value }";
const HEADER_SELECTION: &str = "header { specversion type source subject id time \
    datacontenttype dataversion producer tags }";

/// Every shortcut tool, in `tools/list` order: dq's eleven and fetch-api's
/// two index tools. Each dialect serves those whose root field it has.
pub static SHORTCUTS: [Shortcut; 13] = [
    Shortcut {
        name: "get_signals_time_series",
        field: "signals",
        description: "Aggregated signal values of a vehicle over a time range, one row per \
            interval bucket (interval is a Go duration such as 1h or 15m; buckets without data \
            are absent): average and maximum speed, odometer, fuel level, battery state of \
            charge, ignition and low-voltage battery voltage. For other signals or \
            aggregations, use the query tool with the signals field.",
        selection: SIGNALS_SELECTION,
    },
    Shortcut {
        name: "get_latest_signals",
        field: "signalsLatest",
        description: "The latest value and time of common signals of a vehicle (speed, \
            odometer, fuel level, battery state of charge, ignition, low-voltage battery \
            voltage, outside temperature) and when it last sent any signal. For other signals, \
            use the query tool with the signalsLatest field.",
        selection: LATEST_SELECTION,
    },
    Shortcut {
        name: "get_available_signals",
        field: "availableSignals",
        description: "The names of the signals a vehicle has data for that the token may read.",
        selection: "",
    },
    Shortcut {
        name: "get_data_summary",
        field: "dataSummary",
        description: "How much data a vehicle has: per signal and per event name the count \
            and the first and last time seen, and the overall first and last time seen.",
        selection: "numberOfSignals availableSignals firstSeen lastSeen \
            signalDataSummary { name numberOfSignals firstSeen lastSeen } \
            eventDataSummary { name numberOfEvents firstSeen lastSeen }",
    },
    Shortcut {
        name: "get_signals_snapshot",
        field: "signalsSnapshot",
        description: "The latest value of every signal a vehicle has, one entry per signal \
            (number, string or location), and when it last sent any signal.",
        selection: "lastSeen signals { name timestamp valueNumber valueString \
            valueLocation { latitude longitude hdop } }",
    },
    Shortcut {
        name: "get_events",
        field: "events",
        description: "Vehicle events (such as harsh braking or extreme acceleration) in a \
            time range, newest first, optionally filtered by name, source or tags.",
        selection: "timestamp name source durationNs metadata",
    },
    Shortcut {
        name: "get_trip_segments",
        field: "segments",
        description: "Trips or other activity segments of a vehicle in a time range (at most \
            32 days), detected by a mechanism: IGNITION_DETECTION, FREQUENCY_ANALYSIS or \
            CHANGE_POINT_DETECTION for trips, IDLING, REFUEL or RECHARGE. Each segment has its \
            start and end location and time, its duration in seconds, and the requested \
            signal aggregations and event counts.",
        selection: "start { timestamp value { latitude longitude hdop } } \
            end { timestamp value { latitude longitude hdop } } duration isOngoing \
            startedBeforeRange signals { name agg value } eventCounts { name count }",
    },
    Shortcut {
        name: "get_daily_activity",
        field: "dailyActivity",
        description: "Per-day activity of a vehicle in a time range (days in the given IANA \
            time zone, UTC by default): number of trips, driving time in seconds, first start \
            and last end location, and the requested signal aggregations and event counts. \
            Mechanism: IGNITION_DETECTION, FREQUENCY_ANALYSIS or CHANGE_POINT_DETECTION.",
        selection: "start { timestamp value { latitude longitude hdop } } \
            end { timestamp value { latitude longitude hdop } } segmentCount duration \
            signals { name agg value } eventCounts { name count }",
    },
    Shortcut {
        name: "get_latest_cloud_event",
        field: "latestCloudEvent",
        description: "The newest raw cloud event of a vehicle matching the filter (type, \
            source, producer, data version, time bounds), with its header and payload.",
        selection: "header { specversion type source subject id time datacontenttype \
            dataversion producer tags } data dataBase64 dataUrl",
    },
    Shortcut {
        name: "list_cloud_events",
        field: "cloudEvents",
        description: "Headers of the newest raw cloud events of a vehicle matching the filter, \
            newest first (limit defaults to 10). Fetch a payload with the latest cloud event \
            tool and an id filter.",
        selection: HEADER_SELECTION,
    },
    Shortcut {
        name: "list_available_event_types",
        field: "availableCloudEventTypes",
        description: "The raw cloud event types a vehicle has, with their counts and first \
            and last times.",
        selection: "type count firstSeen lastSeen",
    },
    Shortcut {
        name: "get_latest_index",
        field: "latestIndex",
        description: "The index entry (header and index key) of the newest raw cloud event of \
            a vehicle matching the filter.",
        selection: "header { specversion type source subject id time datacontenttype \
            dataversion producer tags } indexKey",
    },
    Shortcut {
        name: "list_indexes",
        field: "indexes",
        description: "Index entries (header and index key) of the newest raw cloud events of a \
            vehicle matching the filter, newest first (limit defaults to 10).",
        selection: "header { specversion type source subject id time datacontenttype \
            dataversion producer tags } indexKey",
    },
];

/// A shortcut bound to the dialect's root field: the field's arguments and their GraphQL
/// types, in declaration order.
#[derive(Debug, Clone)]
pub struct Bound {
    /// The declaration.
    pub shortcut: &'static Shortcut,
    args: Vec<(String, String)>,
}

impl Bound {
    /// The document and variables that run the shortcut with the caller's `arguments`: each
    /// given argument becomes a variable of the field's type, the others are left out so the
    /// schema's defaults apply as they do on `/query`.
    ///
    /// # Errors
    /// An argument the field does not have.
    pub fn document(&self, arguments: &JsonObject) -> Result<(String, Map<String, Value>), String> {
        if let Some(unknown) = arguments
            .keys()
            .find(|k| !self.args.iter().any(|(name, _)| name == *k))
        {
            let known: Vec<&str> = self.args.iter().map(|(n, _)| n.as_str()).collect();
            return Err(format!(
                "unknown argument {unknown:?}; {} takes {}",
                self.shortcut.field,
                known.join(", ")
            ));
        }
        let given: Vec<&(String, String)> = self
            .args
            .iter()
            .filter(|(name, _)| arguments.contains_key(name))
            .collect();
        let declarations: Vec<String> = given.iter().map(|(n, t)| format!("${n}: {t}")).collect();
        let passed: Vec<String> = given.iter().map(|(n, _)| format!("{n}: ${n}")).collect();
        let (declarations, passed) = if given.is_empty() {
            (String::new(), String::new())
        } else {
            (
                format!("({})", declarations.join(", ")),
                format!("({})", passed.join(", ")),
            )
        };
        let selection = match self.shortcut.selection {
            "" => String::new(),
            s => format!(" {{ {s} }}"),
        };
        let document = format!(
            "query{declarations} {{ {}{passed}{selection} }}",
            self.shortcut.field
        );
        let variables = given
            .iter()
            .filter_map(|(n, _)| Some((n.clone(), arguments.get(n)?.clone())))
            .collect();
        Ok((document, variables))
    }
}

/// What a tool name runs.
#[derive(Debug, Clone, Copy)]
pub enum Call<'a> {
    /// `<prefix>_get_schema`.
    Schema,
    /// `<prefix>_query`.
    Query,
    /// A shortcut.
    Shortcut(&'a Bound),
}

/// A dialect's tools and condensed schema, derived once from the served schema's SDL.
#[derive(Debug)]
pub struct Catalog {
    prefix: &'static str,
    tools: Vec<Tool>,
    shortcuts: HashMap<String, Bound>,
    condensed: String,
}

impl Catalog {
    /// The catalog of `dialect` from its served SDL.
    ///
    /// # Errors
    /// The SDL does not parse or has no `Query` object (a bug).
    pub fn new(dialect: Dialect, sdl: &str) -> Result<Catalog, String> {
        let doc = async_graphql::parser::parse_schema(sdl)
            .map_err(|e| format!("parse the {} SDL: {e}", dialect.name()))?;
        let types: Types = doc
            .definitions
            .iter()
            .filter_map(|d| match d {
                TypeSystemDefinition::Type(t) => Some((t.node.name.node.as_str(), &t.node)),
                _ => None,
            })
            .collect();
        let query_fields = match types.get("Query").map(|t| &t.kind) {
            Some(TypeKind::Object(o)) => &o.fields,
            _ => return Err(format!("the {} SDL has no Query object", dialect.name())),
        };
        let prefix = tool_prefix(dialect);
        let read_only = ToolAnnotations::new()
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(false);
        let schema_tool = format!("{prefix}_get_schema");
        let condensed = condensed::condensed(dialect, &types);
        let signal_table = if condensed.contains(condensed::SIGNAL_TABLE) {
            ", and a table of the signals with their types, units and required privileges"
        } else {
            ""
        };
        let mut tools = vec![
            Tool::new(
                schema_tool.clone(),
                format!(
                    "Returns the GraphQL schema of this API, condensed for a model: the root \
                     fields with their arguments and every type on one line{signal_table}. \
                     Call this first, before writing a query. Needs no token."
                ),
                object_schema(Map::new(), Vec::new()),
            )
            .annotate(read_only.clone()),
            Tool::new(
                format!("{prefix}_query"),
                format!(
                    "Executes a GraphQL query against this API and returns the standard GraphQL \
                     response ({{\"data\": …}}, with \"errors\" when a field failed, e.g. for a \
                     missing privilege). Call {schema_tool} first to learn the schema; prefer \
                     the purpose-specific tools when one fits. Pass values through \
                     \"variables\" with $-prefixed placeholders instead of writing them into \
                     the query. Data needs a bearer token for the vehicle."
                ),
                object_schema(
                    Map::from_iter([
                        (
                            "query".to_string(),
                            json!({"type": "string", "description": "A GraphQL query document."}),
                        ),
                        (
                            "variables".to_string(),
                            json!({
                                "type": "object",
                                "description": "Values of the query's $-prefixed variables, by name."
                            }),
                        ),
                    ]),
                    vec!["query".to_string()],
                ),
            )
            .annotate(read_only.clone()),
        ];
        let mut shortcuts = HashMap::new();
        for shortcut in &SHORTCUTS {
            let Some(field) = query_fields
                .iter()
                .find(|f| f.node.name.node.as_str() == shortcut.field)
            else {
                continue;
            };
            let name = format!("{prefix}_{}", shortcut.name);
            let mut properties = Map::new();
            let mut required = Vec::new();
            let mut args = Vec::new();
            let (vehicle, holds) = vehicle_argument(dialect);
            for arg in &field.node.arguments {
                let arg = &arg.node;
                let arg_name = arg.name.node.to_string();
                let hint = (arg_name == vehicle).then_some(holds);
                properties.insert(arg_name.clone(), input_value_schema(arg, hint, &types));
                if !arg.ty.node.nullable && arg.default_value.is_none() {
                    required.push(arg_name.clone());
                }
                args.push((arg_name, arg.ty.node.to_string()));
            }
            tools.push(
                Tool::new(
                    name.clone(),
                    dialect.spell_mechanisms(shortcut.description),
                    object_schema(properties, required),
                )
                .annotate(read_only.clone()),
            );
            shortcuts.insert(name, Bound { shortcut, args });
        }
        Ok(Catalog {
            prefix,
            condensed,
            tools,
            shortcuts,
        })
    }

    /// The tools in `tools/list` order.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// The condensed schema `<prefix>_get_schema` returns.
    pub fn condensed(&self) -> &str {
        &self.condensed
    }

    /// What the tool `name` runs; `None` for a name the dialect does not serve.
    pub fn call(&self, name: &str) -> Option<Call<'_>> {
        match name.strip_prefix(self.prefix)?.strip_prefix('_')? {
            "get_schema" => Some(Call::Schema),
            "query" => Some(Call::Query),
            _ => self.shortcuts.get(name).map(Call::Shortcut),
        }
    }
}

/// A tool input schema: an object of `properties`, nothing else.
fn object_schema(properties: Map<String, Value>, required: Vec<String>) -> Arc<JsonObject> {
    let mut schema = Map::from_iter([
        ("type".to_string(), json!("object")),
        ("properties".to_string(), Value::Object(properties)),
        ("additionalProperties".to_string(), json!(false)),
    ]);
    if !required.is_empty() {
        schema.insert("required".to_string(), json!(required));
    }
    Arc::new(schema)
}

/// The JSON schema of an argument: its type's, a description naming the GraphQL type (what
/// the model writes in `<prefix>_query`) after the SDL's description or `hint`, and its SDL
/// default.
fn input_value_schema(value: &InputValueDefinition, hint: Option<&str>, types: &Types) -> Value {
    let mut schema = type_schema(&value.ty.node, types, &mut Vec::new());
    let mut description = format!("GraphQL type {}", value.ty.node);
    if let Some(d) = value.description.as_ref().map(|d| d.node.trim()).or(hint) {
        description = format!("{d} ({description})");
    }
    if let Some(Value::String(d)) = schema.get("description") {
        description = format!("{description}: {d}");
    }
    schema.insert("description".to_string(), Value::String(description));
    if let Some(default) = value
        .default_value
        .as_ref()
        .and_then(|d| d.node.clone().into_json().ok())
    {
        schema.insert("default".to_string(), default);
    }
    Value::Object(schema)
}

/// The JSON schema of a GraphQL input type. `path` holds the input objects being expanded, so
/// a recursive one (`or: [StringValueFilter!]`) is described instead of expanded again.
fn type_schema(ty: &Type, types: &Types, path: &mut Vec<String>) -> Map<String, Value> {
    let name = match &ty.base {
        BaseType::List(item) => {
            return Map::from_iter([
                ("type".to_string(), json!("array")),
                (
                    "items".to_string(),
                    Value::Object(type_schema(item, types, path)),
                ),
            ])
        }
        BaseType::Named(name) => name.as_str(),
    };
    let of = |t: &str| Map::from_iter([("type".to_string(), json!(t))]);
    let def = types.get(name);
    let mut schema = match (name, def.map(|d| &d.kind)) {
        ("String" | "ID", _) => of("string"),
        ("Int", _) => of("integer"),
        ("Float", _) => of("number"),
        ("Boolean", _) => of("boolean"),
        (_, Some(TypeKind::Scalar)) => scalar_schema(name),
        (_, Some(TypeKind::Enum(e))) => {
            let mut s = of("string");
            let values: Vec<&str> = e
                .values
                .iter()
                .map(|v| v.node.value.node.as_str())
                .collect();
            s.insert("enum".to_string(), json!(values));
            s
        }
        (_, Some(TypeKind::InputObject(_))) if path.iter().any(|p| p == name) => {
            let mut s = of("object");
            s.insert(
                "description".to_string(),
                json!(format!("a nested {name}, with the same fields")),
            );
            s
        }
        (_, Some(TypeKind::InputObject(input))) => {
            path.push(name.to_string());
            let mut properties = Map::new();
            let mut required = Vec::new();
            for field in &input.fields {
                let field = &field.node;
                let mut s = type_schema(&field.ty.node, types, path);
                if let Some(d) = field
                    .default_value
                    .as_ref()
                    .and_then(|d| d.node.clone().into_json().ok())
                {
                    s.insert("default".to_string(), d);
                }
                if !field.ty.node.nullable && field.default_value.is_none() {
                    required.push(field.name.node.to_string());
                }
                properties.insert(field.name.node.to_string(), Value::Object(s));
            }
            path.pop();
            let mut s = of("object");
            s.insert("properties".to_string(), Value::Object(properties));
            if !required.is_empty() {
                s.insert("required".to_string(), json!(required));
            }
            s.insert("additionalProperties".to_string(), json!(false));
            s
        }
        // Output-only kinds never appear in arguments.
        _ => Map::new(),
    };
    if let Some(d) = def.and_then(|d| d.description.as_ref()) {
        if !schema.contains_key("description") {
            schema.insert("description".to_string(), json!(d.node.trim()));
        }
    }
    schema
}

/// The JSON form of the custom scalars (`scalars.rs`).
fn scalar_schema(name: &str) -> Map<String, Value> {
    let schema = match name {
        "Time" => json!({"type": "string", "format": "date-time"}),
        "Uint64" => json!({"type": "integer", "minimum": 0}),
        "Address" => json!({"type": "string", "pattern": "^(0[xX])?[0-9a-fA-F]{40}$"}),
        "Map" => json!({"type": "object"}),
        // JSON and anything else: any value.
        _ => json!({}),
    };
    match schema {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog(dialect: Dialect) -> Catalog {
        let schema = crate::schema::build(dialect, crate::DialectSettings::default()).unwrap();
        Catalog::new(dialect, &schema.sdl()).unwrap()
    }

    #[test]
    fn shortcuts_exist_where_the_root_field_does() {
        let names = |d| {
            catalog(d)
                .tools()
                .iter()
                .map(|t| t.name.to_string())
                .collect::<Vec<_>>()
        };
        let dq = names(Dialect::Dq);
        assert_eq!(dq.len(), 2 + 11, "{dq:?}");
        assert_eq!(dq[0], "dq_get_schema");
        assert_eq!(dq[1], "dq_query");
        let telemetry = names(Dialect::Telemetry);
        assert_eq!(telemetry.len(), 2 + 8, "{telemetry:?}");
        assert!(telemetry.iter().all(|n| n.starts_with("telemetry_")));
        assert!(!telemetry.iter().any(|n| n.contains("cloud_event")));
        let fetch = names(Dialect::Fetch);
        assert_eq!(
            fetch,
            [
                "fetch_get_schema",
                "fetch_query",
                "fetch_get_latest_cloud_event",
                "fetch_list_cloud_events",
                "fetch_list_available_event_types",
                "fetch_get_latest_index",
                "fetch_list_indexes",
            ]
        );
    }

    #[test]
    fn documents_declare_only_given_arguments() {
        let c = catalog(Dialect::Dq);
        let Some(Call::Shortcut(b)) = c.call("dq_list_cloud_events") else {
            panic!("no dq_list_cloud_events");
        };
        let args = JsonObject::from_iter([("subject".to_string(), json!("did:x"))]);
        let (doc, vars) = b.document(&args).unwrap();
        assert_eq!(
            doc,
            format!("query($subject: String!) {{ cloudEvents(subject: $subject) {{ {HEADER_SELECTION} }} }}")
        );
        assert_eq!(Value::Object(vars), json!({"subject": "did:x"}));
        let bad = JsonObject::from_iter([("did".to_string(), json!("did:x"))]);
        let err = b.document(&bad).unwrap_err();
        assert!(err.contains("unknown argument \"did\""), "{err}");
        assert!(c.call("telemetry_query").is_none());
        assert!(c.call("dq_get_schema").is_some());
    }

    #[test]
    fn input_schemas_follow_the_field_arguments() {
        let c = catalog(Dialect::Telemetry);
        let tool = c
            .tools()
            .iter()
            .find(|t| t.name == "telemetry_get_trip_segments")
            .unwrap();
        let schema = Value::Object((*tool.input_schema).clone());
        assert_eq!(schema["properties"]["tokenId"]["type"], "integer");
        assert_eq!(schema["properties"]["from"]["format"], "date-time");
        assert_eq!(schema["properties"]["limit"]["default"], 100);
        assert_eq!(
            schema["properties"]["mechanism"]["enum"][0],
            "ignitionDetection"
        );
        assert_eq!(
            schema["properties"]["config"]["properties"]["maxGapSeconds"]["default"],
            300
        );
        assert_eq!(
            schema["required"],
            json!(["tokenId", "from", "to", "mechanism"])
        );
        assert!(tool
            .description
            .as_deref()
            .unwrap()
            .contains("ignitionDetection"));
    }
}
