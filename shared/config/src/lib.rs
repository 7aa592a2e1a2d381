//! Reading settings from the environment: one rule per kind of value, shared by every crate —
//! booleans ([`parse_bool`]), Go durations ([`duration`]), the vehicle registry pair
//! ([`registry`]), the `S3_*` settings the lake and the blob store share ([`s3::S3Config`]), and a
//! reader that trims values, treats blanks as unset and collects every problem before failing
//! ([`Settings`]).
#![warn(missing_docs)]

pub mod duration;
pub mod registry;
pub mod s3;

pub use duration::{parse_go_duration, parse_go_duration_us, parse_seconds_or_go_duration};
pub use registry::VehicleRegistry;

use std::time::Duration;

/// Set by the Lambda runtime (the Runtime API the functions poll): present only inside Lambda.
pub const AWS_LAMBDA_RUNTIME_API: &str = "AWS_LAMBDA_RUNTIME_API";

/// The in-flight request cap every query function reads (GraphQL and FetchService alike).
pub const MAX_CONCURRENT_REQUESTS: &str = "MAX_CONCURRENT_REQUESTS";

/// True inside a Lambda execution environment (local servers and tools run otherwise).
pub fn in_lambda() -> bool {
    std::env::var_os(AWS_LAMBDA_RUNTIME_API).is_some()
}

/// The values a boolean setting may take, for error messages.
pub const BOOL_VALUES: &str = "true/false, 1/0, yes/no, on/off, t/f";

/// A boolean setting: `true`/`1`/`yes`/`on`/`t` or `false`/`0`/`no`/`off`/`f`, any case,
/// surrounding blanks ignored (the union of what dq's settings and Go's `strconv.ParseBool`
/// accepted); `None` for anything else.
pub fn parse_bool(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "t" | "yes" | "on" => Some(true),
        "0" | "false" | "f" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// The process environment as a lookup (what `from_env` constructors pass to `from_lookup`).
pub fn env_lookup(key: &str) -> Option<String> {
    std::env::var(key).ok()
}

/// A lookup over fixed pairs: the environment of a settings test.
pub fn pairs_lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |key| pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
}

/// Settings read through a lookup: values trimmed, blank values unset, and every malformed key
/// collected so one start-up error names them all.
pub struct Settings<F> {
    lookup: F,
    problems: Vec<String>,
}

impl<F: Fn(&str) -> Option<String>> Settings<F> {
    /// Reads through `lookup` (the environment in production, a map in tests).
    pub fn new(lookup: F) -> Self {
        Settings {
            lookup,
            problems: Vec::new(),
        }
    }

    /// The trimmed value of `key`; `None` when unset or blank.
    pub fn get(&self, key: &str) -> Option<String> {
        (self.lookup)(key)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    /// Records a problem (one message, naming its key).
    pub fn problem(&mut self, message: impl Into<String>) {
        self.problems.push(message.into());
    }

    /// `parse(value)` of `key` when set; a parse error is recorded as `"{key}: {error}"`.
    pub fn parsed<T>(
        &mut self,
        key: &str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        let value = self.get(key)?;
        match parse(&value) {
            Ok(v) => Some(v),
            Err(reason) => {
                self.problem(format!("{key}: {reason}"));
                None
            }
        }
    }

    /// A boolean setting ([`parse_bool`]); `default` when unset or malformed.
    pub fn bool(&mut self, key: &str, default: bool) -> bool {
        self.parsed(key, |v| {
            parse_bool(v).ok_or_else(|| format!("must be a boolean ({BOOL_VALUES})"))
        })
        .unwrap_or(default)
    }

    /// A Go-duration setting ([`parse_go_duration`]); `None` when unset or malformed.
    pub fn go_duration(&mut self, key: &str) -> Option<Duration> {
        self.parsed(key, parse_go_duration)
    }

    /// The problems found so far.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// `Ok` when nothing was wrong so far, else every problem joined with `; `.
    ///
    /// # Errors
    /// The joined problems.
    pub fn check(&self) -> Result<(), String> {
        if self.problems.is_empty() {
            Ok(())
        } else {
            Err(self.problems.join("; "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans() {
        for (v, want) in [
            ("1", Some(true)),
            (" TRUE ", Some(true)),
            ("True", Some(true)),
            ("t", Some(true)),
            ("T", Some(true)),
            ("yes", Some(true)),
            ("YES", Some(true)),
            ("on", Some(true)),
            ("On", Some(true)),
            ("0", Some(false)),
            ("False", Some(false)),
            ("FALSE", Some(false)),
            ("f", Some(false)),
            ("no", Some(false)),
            ("off", Some(false)),
            ("OFF", Some(false)),
            ("", None),
            ("maybe", None),
            ("2", None),
            ("y", None),
            ("enabled", None),
        ] {
            assert_eq!(parse_bool(v), want, "{v:?}");
        }
    }

    #[test]
    fn settings_trim_treat_blanks_as_unset_and_collect_problems() {
        let mut s = Settings::new(pairs_lookup(&[
            ("A", "  on "),
            ("B", "   "),
            ("C", "maybe"),
            ("D", "1h30m"),
            ("E", "soon"),
        ]));
        assert_eq!(s.get("A").as_deref(), Some("on"));
        assert_eq!(s.get("B"), None);
        assert!(s.bool("A", false));
        assert!(s.bool("B", true));
        assert!(!s.bool("C", false));
        assert_eq!(s.go_duration("D"), Some(Duration::from_secs(5400)));
        assert_eq!(s.go_duration("E"), None);
        assert_eq!(s.go_duration("unset"), None);
        assert_eq!(s.problems().len(), 2);
        let err = s.check().unwrap_err();
        assert!(err.starts_with("C: must be a boolean"), "{err}");
        assert!(
            err.contains("; E: time: invalid duration \"soon\""),
            "{err}"
        );
        assert_eq!(Settings::new(pairs_lookup(&[])).check(), Ok(()));
    }
}
