//! The materializer binary: in Lambda (`AWS_LAMBDA_RUNTIME_API` set) it serves invocations;
//! otherwise it loops passes, or runs one action (`--once`, `--action <name>`).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dq_fn_materializer::{handler, run_local, Context, LocalArgs};
use lambda_runtime::{service_fn, LambdaEvent};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let args = match LocalArgs::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(usage) => {
            eprintln!("{usage}");
            std::process::exit(2)
        }
    };
    let ctx = Arc::new(Context::from_env().await?);
    if !dq_config::in_lambda() {
        let poll = dq_materialize::Config::from_env()?.poll_interval;
        return Ok(run_local(&ctx, &args, poll).await?);
    }
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| {
        let ctx = Arc::clone(&ctx);
        async move {
            let deadline = remaining(event.context.deadline);
            handler(
                event.payload,
                &ctx,
                &event.context.request_id,
                deadline,
                false,
            )
            .await
        }
    }))
    .await
}

/// The invocation deadline (epoch ms) as an `Instant`.
fn remaining(deadline_ms: u64) -> Option<Instant> {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .ok()?
        .as_millis() as u64;
    Some(Instant::now() + Duration::from_millis(deadline_ms.saturating_sub(now_ms)))
}
