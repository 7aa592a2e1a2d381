//! `/mcp`: the Model Context Protocol beside `/query`, MCP Streamable HTTP on the official Rust SDK (`rmcp`), one server per dialect ("DIMO Query" /
//! "DIMO Telemetry" / "DIMO Fetch", tool prefix `dq_` / `telemetry_` / `fetch_`).
//!
//! This module owns the MCP surface: the tools of a dialect ([`tools`], one declaration table
//! for the shortcuts, input schemas derived from the served schema), the condensed schema the
//! `<prefix>_get_schema` tool returns ([`condensed`]), the dialect's names (module `names`) and
//! the handler that answers `initialize`, `tools/list` and `tools/call`. Submodules import
//! downward only: `names` ← `condensed` ← `tools` ← this handler.
//!
//! Stateless: every POST is answered on its own (no `Mcp-Session-Id`, nothing held between
//! requests), with a plain JSON body, because Lambda has no sticky instances and buffers
//! responses. Data tools do not execute GraphQL themselves: they hand their document and
//! variables, with the caller's `Authorization` header, to the `/query` handler in-process, so
//! the auth chain (limiters, deadline, JWT), schema, directives, limits and error shapes are
//! exactly `/query`'s. `initialize`, `tools/list` and `<prefix>_get_schema` read nothing from
//! the lake and need no token.

pub mod condensed;
mod names;
pub mod tools;

pub use names::{server_name, tool_prefix};
pub use tools::{Catalog, Shortcut, SHORTCUTS};

use crate::dialect::Dialect;
use crate::http::{AppState, BODY_LIMIT};
use async_graphql::dynamic::Schema;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Map, Value};
use std::sync::{Arc, OnceLock};
use tools::Call;

/// The server version every dialect reports (Go's mcpserver).
pub const VERSION: &str = "0.1.0";

/// The request headers a tool call passes on to `/query`: the token, and the client address
/// for the request log.
const FORWARDED: [header::HeaderName; 3] = [
    header::AUTHORIZATION,
    header::HeaderName::from_static("x-forwarded-for"),
    header::HeaderName::from_static("x-real-ip"),
];

/// The `/mcp` service of the deployment `state`, whose `dialect` serves `schema`.
pub fn service(
    state: Arc<AppState>,
    dialect: Dialect,
    schema: Schema,
) -> StreamableHttpService<McpServer, NeverSessionManager> {
    let server = McpServer {
        state,
        dialect,
        schema,
        catalog: Arc::new(OnceLock::new()),
    };
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_max_request_body_bytes(BODY_LIMIT)
        // The rmcp default accepts only loopback `Host`s (DNS-rebinding protection for
        // unauthenticated local servers). This one is public behind API Gateway like
        // `/query`, and every data call needs a bearer token a rebinding page does not have.
        .disable_allowed_hosts();
    StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    )
}

/// The MCP handler of one deployment (cloned per request; the catalog is shared).
#[derive(Clone)]
pub struct McpServer {
    state: Arc<AppState>,
    dialect: Dialect,
    schema: Schema,
    // Built on first use: routers are cheap to build (tests build one per request) and most
    // never see an MCP request.
    catalog: Arc<OnceLock<Result<Catalog, String>>>,
}

impl McpServer {
    fn catalog(&self) -> Result<&Catalog, ErrorData> {
        self.catalog
            .get_or_init(|| Catalog::new(self.dialect, &self.schema.sdl()))
            .as_ref()
            .map_err(|e| {
                tracing::error!(error = %e, "mcp: the tool catalog could not be built");
                ErrorData::internal_error("the tool catalog could not be built", None)
            })
    }

    /// Runs `document` with `variables` through the `/query` handler with the caller's
    /// headers, and turns its answer into a tool result: the GraphQL response (an error
    /// result when it has errors), or the HTTP rejection's text.
    async fn execute(
        &self,
        tool: &str,
        document: String,
        variables: Map<String, Value>,
        parts: Option<&axum::http::request::Parts>,
    ) -> CallToolResult {
        let mut headers = HeaderMap::new();
        for name in &FORWARDED {
            if let Some(v) = parts.and_then(|p| p.headers.get(name)) {
                headers.insert(name.clone(), v.clone());
            }
        }
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let mut body = Map::from_iter([("query".to_string(), Value::String(document))]);
        if !variables.is_empty() {
            body.insert("variables".to_string(), Value::Object(variables));
        }
        let response = crate::http::graphql(
            State(Arc::clone(&self.state)),
            Method::POST,
            Uri::from_static("/mcp"),
            headers,
            Bytes::from(Value::Object(body).to_string()),
        )
        .await;
        let status = response.status();
        // The handler has already serialized the whole answer into memory.
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap_or_default();
        let json = serde_json::from_slice::<Value>(&bytes).ok();
        let result = match (status, json) {
            (StatusCode::OK | StatusCode::UNPROCESSABLE_ENTITY, Some(answer)) => {
                let failed = answer
                    .get("errors")
                    .and_then(Value::as_array)
                    .is_some_and(|e| !e.is_empty());
                if failed {
                    CallToolResult::structured_error(answer)
                } else {
                    CallToolResult::structured(answer)
                }
            }
            // Rejected before GraphQL ran (token, limits): `{"message": …}` or plain text.
            (status, json) => {
                let text = json
                    .as_ref()
                    .and_then(|j| j.get("message"))
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| String::from_utf8_lossy(&bytes).into_owned());
                CallToolResult::error(vec![ContentBlock::text(format!(
                    "HTTP {}: {text}",
                    status.as_u16()
                ))])
            }
        };
        tracing::info!(
            tool,
            dialect = self.dialect.name(),
            error = result.is_error.unwrap_or(false),
            "mcp tool call"
        );
        result
    }
}

/// The `<prefix>_query` arguments: `query` (string) and optional `variables` (object).
fn query_arguments(args: &JsonObject) -> Result<(String, Map<String, Value>), ErrorData> {
    if let Some(k) = args.keys().find(|k| *k != "query" && *k != "variables") {
        return Err(ErrorData::invalid_params(
            format!("unknown argument {k:?}; the query tool takes query and variables"),
            None,
        ));
    }
    let query = match args.get("query") {
        Some(Value::String(q)) => q.clone(),
        _ => {
            return Err(ErrorData::invalid_params(
                "query must be a GraphQL document string",
                None,
            ))
        }
    };
    let variables = match args.get("variables") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(v)) => v.clone(),
        Some(_) => {
            return Err(ErrorData::invalid_params(
                "variables must be an object",
                None,
            ))
        }
    };
    Ok((query, variables))
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(server_name(self.dialect), VERSION))
            .with_instructions(format!(
                "Vehicle telemetry over GraphQL. Call {p}_get_schema first; use the {p}_get_* \
                 and {p}_list_* tools for common questions and {p}_query for anything else. \
                 Data needs a bearer token for the vehicle.",
                p = tool_prefix(self.dialect)
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.catalog()?.tools().to_vec(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        let catalog = self.catalog().ok()?;
        catalog.tools().iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let catalog = self.catalog()?;
        let args = request.arguments.unwrap_or_default();
        let parts = context.extensions.get::<axum::http::request::Parts>();
        let name = request.name.as_ref();
        let (document, variables) = match catalog.call(name) {
            None => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool {name:?}"),
                    None,
                ))
            }
            Some(Call::Schema) => {
                let schema = vec![ContentBlock::text(catalog.condensed())];
                return Ok(CallToolResult::success(schema).into());
            }
            Some(Call::Query) => query_arguments(&args)?,
            Some(Call::Shortcut(bound)) => bound
                .document(&args)
                .map_err(|e| ErrorData::invalid_params(e, None))?,
        };
        // The SDK runs the handler in a task of its own: stop it when the client goes away
        // (or cancels), as /query's handler is dropped with its connection.
        tokio::select! {
            result = self.execute(name, document, variables, parts) => Ok(result.into()),
            () = context.ct.cancelled() => Err(ErrorData::internal_error(
                "the request was cancelled",
                None,
            )),
        }
    }
}
