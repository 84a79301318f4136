//! `paddock gc`: clean up after jobs whose `paddock` process died.

use anyhow::Context as _;
use paddock::paths::Paths;

use super::{exit, open_store, Failure};

#[derive(clap::Args)]
pub struct GcArgs {
    /// Print the report as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

pub async fn exec(args: GcArgs, paths: &Paths) -> Result<u8, Failure> {
    let store = open_store(paths).await?;
    let report = paddock::reaper::reap(paths, &store).await;
    if args.json {
        outln!(
            "{}",
            serde_json::to_string(&report).context("serialize the report")?
        );
    } else {
        let lines = paddock::reaper::render(&report);
        if lines.is_empty() {
            outln!("nothing to clean up");
        }
        for line in lines {
            outln!("{line}");
        }
    }
    let clean = report.errors.is_empty() && report.jobs.iter().all(|j| j.errors.is_empty());
    Ok(if clean { exit::DONE } else { exit::FAILED })
}
