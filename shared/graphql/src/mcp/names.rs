//! What a dialect is called on the MCP surface: its server name, tool prefix, and the argument
//! that names the vehicle.

use crate::dialect::{Dialect, DialectExt};

/// The MCP server name of `dialect`.
pub fn server_name(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Dq => "DIMO Query",
        Dialect::Telemetry => "DIMO Telemetry",
        Dialect::Fetch => "DIMO Fetch",
    }
}

/// The tool-name prefix of `dialect` (without the `_`): its setting's spelling.
pub fn tool_prefix(dialect: Dialect) -> &'static str {
    dialect.name()
}

/// The argument that names the vehicle in `dialect`'s per-vehicle root fields, and what it
/// holds (the SDL has no argument descriptions; a model needs this one).
pub(super) fn vehicle_argument(dialect: Dialect) -> (&'static str, &'static str) {
    let holds = match dialect {
        Dialect::Dq => "the vehicle's DID, did:erc721:<chain id>:<vehicle contract>:<token id>",
        Dialect::Telemetry => "the vehicle's NFT token id",
        Dialect::Fetch => "the DID of the vehicle, or of a device linked to it",
    };
    (dialect.vehicle_arg(), holds)
}
