//! Go duration strings, for `signals(interval:)`: the grammar of every duration setting, so
//! the parser lives with the settings toolkit ([`dq_config::duration`]).

pub use dq_config::parse_go_duration_us;
