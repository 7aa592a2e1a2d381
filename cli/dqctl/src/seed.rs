//! `dqctl seed`: run the din simulator from the command line — generate a synthetic fleet and
//! write it into a lake exactly as din would, then print what was written.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, Utc};
use dq_blob::{BlobConfig, BlobStore};
use dq_dinsim::{SeedOptions, Writer};
use dq_fleet::FleetConfig;
use dq_lake::{Lake, LakeConfig};
use indicatif::{ProgressBar, ProgressStyle};

/// Arguments of `dqctl seed`. Lake and blob settings fall back to the environment variables the
/// services read (`DUCKLAKE_CATALOG_DSN`, `DUCKLAKE_DATA_PATH`, `BLOB_BUCKET`, …).
#[derive(clap::Args)]
pub struct Args {
    /// Catalog: `ducklake:<path>` (file) or a PostgreSQL DSN.
    #[arg(long, env = "DUCKLAKE_CATALOG_DSN")]
    catalog: String,
    /// Data path: an absolute directory or `s3://bucket/prefix/`.
    #[arg(long, env = "DUCKLAKE_DATA_PATH")]
    data_path: Option<String>,
    /// Blob store root directory (overrides BLOB_BUCKET; payloads over the threshold go here).
    #[arg(long)]
    blob_dir: Option<PathBuf>,
    /// Vehicles in the fleet.
    #[arg(long, default_value_t = 20)]
    vehicles: u32,
    /// Days of traffic.
    #[arg(long, default_value_t = 1)]
    days: u32,
    /// Status payloads per minute while driving.
    #[arg(long, default_value_t = 3)]
    signals_per_minute: u32,
    /// Seed: the same seed writes the same events.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// First day of traffic (RFC 3339); default: `--days` days before today, midnight UTC.
    #[arg(long)]
    start: Option<DateTime<Utc>>,
    /// Minutes of fleet time per bundle (one bundle = one snapshot).
    #[arg(long, default_value_t = 60)]
    bundle_minutes: u64,
    /// Commit every Nth bundle twice (din redelivery); 0 = never.
    #[arg(long, default_value_t = 10)]
    duplicate_every: u32,
    /// Commit every Nth bundle as two snapshots (din bisection); 0 = never.
    #[arg(long, default_value_t = 7)]
    split_every: u32,
    /// Deliver every Nth event two bundles late; 0 = never.
    #[arg(long, default_value_t = 97)]
    late_every: u32,
    /// Void every Nth status event with a later tombstone; 0 = never.
    #[arg(long, default_value_t = 500)]
    tombstone_every: u32,
    /// Externalize payloads larger than this many bytes (din: DOCUMENT_SIZE_THRESHOLD).
    #[arg(long, env = "DOCUMENT_SIZE_THRESHOLD", default_value_t = 1 << 20)]
    threshold: usize,
    /// Hide the progress bar.
    #[arg(long)]
    quiet: bool,
}

/// Runs the subcommand; errors are printed with their context chain.
pub fn run(args: &Args) -> ExitCode {
    match seed(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dqctl seed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn seed(args: &Args) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut lake_cfg = LakeConfig::from_lookup(|k| match k {
        dq_lake::config::DUCKLAKE_CATALOG_DSN => Some(args.catalog.clone()),
        dq_lake::config::DUCKLAKE_DATA_PATH => args.data_path.clone(),
        other => std::env::var(other).ok(),
    })?;
    lake_cfg.read_only = false;
    let lake = Lake::open(lake_cfg).context("open lake")?;
    dq_lake::raw::ensure(&lake)?;
    dq_lake::progress::ensure(&lake)?;

    let mut blob_cfg = BlobConfig::from_env();
    if let Some(dir) = &args.blob_dir {
        blob_cfg.bucket = std::path::absolute(dir)?.display().to_string();
    }
    let store = if blob_cfg.bucket.is_empty() {
        None
    } else {
        Some(rt.block_on(BlobStore::open(&blob_cfg))?)
    };
    let writer = Writer::new(&lake, store.as_ref()).with_threshold(args.threshold);

    let start = args.start.unwrap_or_else(|| {
        let today = Utc::now()
            .date_naive()
            .and_hms_opt(0, 0, 0)
            .unwrap_or_default()
            .and_utc();
        today - chrono::Duration::days(i64::from(args.days))
    });
    let opts = SeedOptions {
        fleet: FleetConfig {
            vehicles: args.vehicles,
            days: args.days,
            signals_per_minute: args.signals_per_minute,
            seed: args.seed,
            start,
            ..FleetConfig::default()
        },
        bundle_window: Duration::from_secs(args.bundle_minutes.max(1) * 60),
        duplicate_every: args.duplicate_every,
        split_every: args.split_every,
        late_every: args.late_every,
        tombstone_every: args.tombstone_every,
    };
    let estimate = dq_fleet::Fleet::new(opts.fleet.clone())?.estimated_events();
    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(estimate)
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} seeding [{bar:40}] {pos}/{len} events ({per_sec}, eta {eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let report = rt.block_on(dq_dinsim::seed(&writer, &opts, |done| {
        bar.set_position(done)
    }))?;
    bar.finish_and_clear();
    let head = dq_lake::progress::head(&lake)?;
    let mut by_type = serde_json::Map::new();
    let mut stmt = lake
        .conn()
        .prepare("SELECT type, count(*) FROM lake.raw_events GROUP BY type ORDER BY type")
        .map_err(|e| lake.error("count raw_events by type", e))?;
    let counts = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
        .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
        .map_err(|e| lake.error("count raw_events by type", e))?;
    for (ty, n) in counts {
        by_type.insert(ty, n.into());
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&serde_json::json!({
            "catalog": lake.redactor().redact(&args.catalog),
            "vehicles": args.vehicles,
            "days": args.days,
            "start": start,
            "report": report,
            "head_snapshot": head,
            "first_subjects": dq_fleet::Fleet::new(opts.fleet.clone())?
                .vehicles()
                .iter()
                .take(3)
                .map(|v| v.subject.as_str())
                .collect::<Vec<_>>(),
            "raw_events_by_type": by_type,
        }))?
    );
    Ok(())
}
