//! `dqctl reconcile`: the cutover gate from the command line. Sends the same GraphQL documents
//! to a reference deployment (the service dq replaces) and a candidate (dq), compares each pair
//! of answers canonically (the `reconcile` crate, the same comparison as the graphql function's
//! shadow mode) and prints the first differing path of every document that differs. Exits 1 on
//! any mismatch; an unreachable endpoint or a non-JSON answer is a mismatch too.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use chrono::{DateTime, SubsecRound, Utc};
use dq_reconcile::{Answer, Comparator, Dialect, Mismatch};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Map, Value};

/// The committed documents (`tests/reconcile/<dialect>/`), compiled in so the command works from
/// any directory.
macro_rules! documents {
    ($dialect:literal: $($name:literal),* $(,)?) => {
        &[$(($name, include_str!(concat!("../../../tests/reconcile/", $dialect, "/", $name, ".graphql")))),*]
    };
}

const DQ: &[(&str, &str)] = documents!("dq":
    "available-cloud-event-types", "available-signals", "cloud-events", "daily-activity",
    "data-summary", "events", "latest-cloud-event", "segments", "signals", "signals-latest",
    "signals-snapshot",
);
const TELEMETRY: &[(&str, &str)] = documents!("telemetry":
    "attestations", "available-signals", "daily-activity", "data-summary", "events", "segments",
    "signals", "signals-latest", "signals-snapshot", "vin-vc-latest",
);
const FETCH: &[(&str, &str)] = documents!("fetch":
    "available-cloud-event-types", "cloud-events", "indexes", "latest-cloud-event", "latest-index",
);

fn committed(dialect: Dialect) -> &'static [(&'static str, &'static str)] {
    match dialect {
        Dialect::Dq => DQ,
        Dialect::Telemetry => TELEMETRY,
        Dialect::Fetch => FETCH,
    }
}

/// The variables the command fills; a document declaring any other is refused.
const VARIABLES: [&str; 3] = ["vehicle", "from", "to"];

/// Arguments of `dqctl reconcile`.
#[derive(clap::Args)]
pub struct Args {
    /// The reference deployment's GraphQL URL (e.g. https://telemetry-api.dimo.zone/query).
    #[arg(long)]
    reference: String,
    /// The candidate (dq) deployment's GraphQL URL.
    #[arg(long)]
    candidate: String,
    /// Bearer token sent to both (with or without the `Bearer ` prefix). Once for every vehicle,
    /// or once per `--vehicles` entry in the same order (vehicle tokens name one vehicle).
    /// Never printed.
    #[arg(
        long,
        env = "RECONCILE_TOKEN",
        hide_env_values = true,
        value_delimiter = ','
    )]
    token: Vec<String>,
    /// Dialect of both deployments: picks the committed documents and the comparison rules.
    #[arg(long, default_value = "dq", value_parser = parse_dialect)]
    dialect: Dialect,
    /// A directory of your own documents (`*.graphql`, one operation each) instead of the
    /// committed ones.
    #[arg(long)]
    documents: Option<PathBuf>,
    /// Vehicles for `$vehicle` (DIDs; telemetry: token ids), comma-separated; each document
    /// that declares `$vehicle` runs once per vehicle.
    #[arg(long, value_delimiter = ',')]
    vehicles: Vec<String>,
    /// `$from` (RFC 3339); default: seven days before `--to`.
    #[arg(long)]
    from: Option<DateTime<Utc>>,
    /// `$to` (RFC 3339); default: now, to the second.
    #[arg(long)]
    to: Option<DateTime<Utc>>,
    /// Relative float tolerance.
    #[arg(long, default_value_t = dq_reconcile::DEFAULT_EPSILON)]
    epsilon: f64,
    /// Seconds each request may take.
    #[arg(long, default_value_t = 30)]
    timeout: u64,
    /// Hide the progress bar.
    #[arg(long)]
    quiet: bool,
}

fn parse_dialect(s: &str) -> Result<Dialect, String> {
    s.parse()
}

/// Runs the subcommand: 0 when every answer matched, 1 on any mismatch, 2 when the run could
/// not start (bad arguments, unreadable documents).
pub fn run(args: &Args) -> ExitCode {
    match reconcile_all(args) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(e) => {
            eprintln!("dqctl reconcile: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// One request of the run.
struct Case {
    name: String,
    document: String,
    vehicle: Option<String>,
    token: Option<String>,
    variables: Value,
}

fn load_documents(dir: Option<&Path>, dialect: Dialect) -> anyhow::Result<Vec<(String, String)>> {
    let Some(dir) = dir else {
        return Ok(committed(dialect)
            .iter()
            .map(|(n, d)| (n.to_string(), d.to_string()))
            .collect());
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("read {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("graphql") {
            continue;
        }
        let text =
            std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        out.push((name, text));
    }
    if out.is_empty() {
        bail!("no *.graphql documents in {}", dir.display());
    }
    out.sort();
    Ok(out)
}

fn cases(args: &Args) -> anyhow::Result<Vec<Case>> {
    let to = args.to.unwrap_or_else(|| Utc::now().trunc_subsecs(0));
    let from = args.from.unwrap_or(to - chrono::Duration::days(7));
    if from > to {
        bail!("--from must not be after --to");
    }
    if !(args.epsilon.is_finite() && args.epsilon >= 0.0) {
        bail!("--epsilon must be a non-negative number");
    }
    let tokens = &args.token;
    if tokens.len() > 1 && tokens.len() != args.vehicles.len() {
        bail!(
            "give --token once, or once per vehicle ({} tokens for {} vehicles)",
            tokens.len(),
            args.vehicles.len()
        );
    }
    let token_of = |i: usize| tokens.get(i).or(tokens.first()).cloned();
    let mut out = Vec::new();
    for (name, document) in load_documents(args.documents.as_deref(), args.dialect)? {
        let op = dq_reconcile::document::operation(&document, None)
            .map_err(|e| anyhow::anyhow!("document {name}: {e}"))?;
        if let Some(other) = op
            .variables
            .iter()
            .find(|v| !VARIABLES.contains(&v.as_str()))
        {
            bail!(
                "document {name} declares ${other}; reconcile fills only $vehicle, $from and $to"
            );
        }
        let mut base = Map::new();
        for (var, value) in [("from", from), ("to", to)] {
            if op.variables.iter().any(|v| v == var) {
                base.insert(
                    var.into(),
                    json!(value.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)),
                );
            }
        }
        if op.variables.iter().any(|v| v == "vehicle") {
            if args.vehicles.is_empty() {
                bail!("document {name} needs $vehicle: pass --vehicles");
            }
            for (i, vehicle) in args.vehicles.iter().enumerate() {
                let mut vars = base.clone();
                // Telemetry names vehicles by token id (an Int), the others by DID.
                let value = vehicle
                    .trim()
                    .parse::<u64>()
                    .map_or_else(|_| json!(vehicle.trim()), |n| json!(n));
                vars.insert("vehicle".into(), value);
                out.push(Case {
                    name: name.clone(),
                    document: document.clone(),
                    vehicle: Some(vehicle.trim().to_string()),
                    token: token_of(i),
                    variables: Value::Object(vars),
                });
            }
        } else {
            out.push(Case {
                name: name.clone(),
                document: document.clone(),
                vehicle: None,
                token: token_of(0),
                variables: Value::Object(base),
            });
        }
    }
    Ok(out)
}

/// An error and its causes on one line, without the URL (reqwest puts it in the message, and a
/// URL may carry credentials).
fn describe(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

async fn ask(client: &reqwest::Client, url: &str, case: &Case) -> Result<Answer, String> {
    let mut req = client
        .post(url)
        .json(&json!({"query": case.document, "variables": case.variables}));
    if let Some(t) = &case.token {
        let t = t.trim();
        let value = if t
            .get(..7)
            .is_some_and(|p| p.eq_ignore_ascii_case("bearer "))
        {
            t.to_string()
        } else {
            format!("Bearer {t}")
        };
        req = req.header(reqwest::header::AUTHORIZATION, value);
    }
    let resp = req
        .send()
        .await
        .map_err(|e| format!("unreachable: {}", describe(e)))?;
    let status = resp.status().as_u16();
    let body = resp
        .bytes()
        .await
        .map_err(|e| format!("answer broke off: {}", describe(e)))?;
    Answer::parse(status, &body)
}

fn compare(
    comparator: &Comparator,
    case: &Case,
    r: Result<Answer, String>,
    c: Result<Answer, String>,
) -> Option<Mismatch> {
    let side = |which: &str, e: String| Mismatch {
        path: "(request)".into(),
        description: format!("{which} {e}"),
        reference: None,
        candidate: None,
    };
    match (r, c) {
        (Ok(r), Ok(c)) => comparator.compare(&case.document, None, &r, &c),
        (Err(e), _) => Some(side("reference", e)),
        (_, Err(e)) => Some(side("candidate", e)),
    }
}

fn reconcile_all(args: &Args) -> anyhow::Result<usize> {
    for (flag, url) in [
        ("--reference", &args.reference),
        ("--candidate", &args.candidate),
    ] {
        let ok = reqwest::Url::parse(url).is_ok_and(|u| matches!(u.scheme(), "http" | "https"));
        if !ok {
            bail!("{flag} must be an http(s) URL");
        }
    }
    let cases = cases(args)?;
    let comparator = Comparator::new(args.dialect).with_epsilon(args.epsilon);
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(args.timeout.max(1)))
        .build()
        .context("HTTP client")?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(cases.len() as u64)
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} reconciling [{bar:40}] {pos}/{len} documents ({eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut mismatched = 0;
    for case in &cases {
        let (r, c) = rt.block_on(async {
            tokio::join!(
                ask(&client, &args.reference, case),
                ask(&client, &args.candidate, case)
            )
        });
        let label = match &case.vehicle {
            Some(v) => format!("{} [{v}]", case.name),
            None => case.name.clone(),
        };
        let line = match compare(&comparator, case, r, c) {
            None => format!("match     {label}"),
            Some(m) => {
                mismatched += 1;
                format!("MISMATCH  {label}: {m}")
            }
        };
        bar.suspend(|| println!("{line}"));
        bar.inc(1);
    }
    bar.finish_and_clear();
    println!(
        "reconcile ({}): {} compared, {} matched, {} mismatched",
        args.dialect.name(),
        cases.len(),
        cases.len() - mismatched,
        mismatched
    );
    Ok(mismatched)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The compiled-in list is the committed directory, file for file.
    #[test]
    fn committed_documents_are_all_listed_and_parse() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/reconcile");
        for dialect in Dialect::ALL {
            let on_disk = load_documents(Some(&root.join(dialect.name())), dialect).unwrap();
            let listed: Vec<(String, String)> = committed(dialect)
                .iter()
                .map(|(n, d)| (n.to_string(), d.to_string()))
                .collect();
            assert_eq!(on_disk, listed, "{}", dialect.name());
            for (name, doc) in listed {
                let op = dq_reconcile::document::operation(&doc, None)
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(
                    op.variables.iter().all(|v| VARIABLES.contains(&v.as_str())),
                    "{name}"
                );
            }
        }
    }
}
