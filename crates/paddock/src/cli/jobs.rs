//! `paddock jobs`: list jobs, newest first.

use anyhow::Context as _;
use paddock::paths::Paths;

use super::{exit, open_store, Failure};
use crate::progress;

#[derive(clap::Args)]
pub struct JobsArgs {
    #[arg(long, default_value_t = 50)]
    pub limit: u32,
    #[arg(long)]
    pub json: bool,
}

pub async fn exec(args: JobsArgs, paths: &Paths) -> Result<u8, Failure> {
    let store = open_store(paths).await?;
    let jobs = store.jobs(args.limit).await.context("list jobs")?;
    if args.json {
        for j in &jobs {
            outln!("{}", serde_json::to_string(j).context("serialize a job")?);
        }
    } else {
        out!("{}", progress::jobs_table(&jobs));
    }
    Ok(exit::DONE)
}
