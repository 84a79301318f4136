//! `paddock usage`: spend rolled up by day, project, task type, engine and model.

use anyhow::Context as _;
use paddock::paths::Paths;

use super::{exit, open_store, Failure};

#[derive(clap::Args)]
pub struct UsageArgs {
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

pub async fn exec(args: UsageArgs, paths: &Paths) -> Result<u8, Failure> {
    let store = open_store(paths).await?;
    let (jobs, calls) = store.usage().await.context("read the ledger")?;
    let report = paddock::usage::report(&jobs, &calls);
    if args.json {
        outln!(
            "{}",
            serde_json::to_string(&report).context("serialize the usage report")?
        );
    } else {
        out!("{}", paddock::usage::render(&report));
    }
    Ok(exit::DONE)
}
