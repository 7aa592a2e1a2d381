//! The executable schema of each dialect, built at runtime: the types (module `types`, generated
//! from the signal catalog) under the dialect's root `Query` (module `roots`).

mod roots;
mod types;

use crate::complexity::QueryLimits;
use crate::dialect::{Dialect, DialectSettings};
use crate::directives;
use async_graphql::dynamic::{Schema, SchemaError};
pub use types::{register_cloud_event_types, register_signal_types};

/// The stored signal every location request reads (kept here for the tools that build queries
/// against the schema).
pub use crate::signals::COORDINATES;

/// The SDL of `schema` as committed (`schema/<dialect>.graphql`): async-graphql's export, then
/// the declarations of the directives it applies ([`directives::applied`]).
pub fn export_sdl(schema: &Schema) -> String {
    let mut sdl = schema.sdl();
    for declaration in directives::applied(&sdl) {
        sdl.push_str(&declaration.sdl());
        sdl.push('\n');
    }
    sdl
}

/// Builds a dialect's schema. Requests carry the engine, cloud-event backend and principal;
/// the schema carries the dialect and its settings.
///
/// # Errors
/// A schema construction bug.
pub fn build(dialect: Dialect, settings: DialectSettings) -> Result<Schema, SchemaError> {
    let builder = Schema::build("Query", None, None)
        .data(dialect)
        .data(settings);
    let builder = match dialect {
        Dialect::Dq => register_cloud_event_types(register_signal_types(builder))
            .register(types::detection_mechanism(dialect))
            .register(roots::dq_query()),
        Dialect::Telemetry => types::register_telemetry_types(register_signal_types(builder))
            .register(roots::telemetry_query())
            .register(types::detection_mechanism(dialect)),
        Dialect::Fetch => types::register_fetch_types(register_cloud_event_types(
            builder.register(types::time_scalar()),
        ))
        .register(roots::fetch_query()),
    };
    // The declared directives answered in introspection are those the finished schema applies.
    let declared = directives::DeclaredDirectives::default();
    let schema = builder
        .extension(QueryLimits)
        .extension(declared.clone())
        .finish()?;
    declared.set(directives::applied(&schema.sdl()));
    Ok(schema)
}
