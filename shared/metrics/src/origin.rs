//! Where a metric line comes from: the deployment stage and the function, so dev and prod in
//! one account (and the functions of one stage) stay separate series.

/// Property (and dimension) naming the stage.
pub const STAGE: &str = "Stage";
/// Property (and dimension) naming the function.
pub const FUNCTION: &str = "Function";
/// The stage's environment variable (the template sets it from its `Stage` parameter).
pub const DQ_STAGE: &str = "DQ_STAGE";
/// The stage outside a deployment.
pub const DEFAULT_STAGE: &str = "local";
/// The function's name, set by Lambda itself.
pub const AWS_LAMBDA_FUNCTION_NAME: &str = "AWS_LAMBDA_FUNCTION_NAME";

/// The `Stage` and `Function` of every line a process writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// `DQ_STAGE`, default [`DEFAULT_STAGE`].
    pub stage: String,
    /// `AWS_LAMBDA_FUNCTION_NAME`, else the running binary's name.
    pub function: String,
}

impl Origin {
    /// From the process environment.
    pub fn from_env() -> Origin {
        Origin::from_lookup(dq_config::env_lookup)
    }

    /// From `lookup` (the environment in production); blank values count as unset.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Origin {
        let settings = dq_config::Settings::new(lookup);
        let get = |k: &str| settings.get(k);
        Origin {
            stage: get(DQ_STAGE).unwrap_or_else(|| DEFAULT_STAGE.into()),
            function: get(AWS_LAMBDA_FUNCTION_NAME).unwrap_or_else(binary_name),
        }
    }
}

/// The running executable's file name without extension (`graphql`, `materializer`, …).
fn binary_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_and_function() {
        let o = Origin::from_lookup(|k| match k {
            DQ_STAGE => Some(" prod ".into()),
            AWS_LAMBDA_FUNCTION_NAME => Some("dq-prod-graphql".into()),
            _ => None,
        });
        assert_eq!(
            (o.stage.as_str(), o.function.as_str()),
            ("prod", "dq-prod-graphql")
        );
        let o = Origin::from_lookup(|k| (k == DQ_STAGE).then(|| " ".into()));
        assert_eq!(o.stage, DEFAULT_STAGE);
        // Outside Lambda: this test binary's own name.
        let exe = std::env::current_exe().unwrap();
        assert_eq!(o.function, exe.file_stem().unwrap().to_string_lossy());
    }
}
