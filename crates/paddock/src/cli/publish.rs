//! `paddock publish JOB`: a finished job's result published again from
//! what it kept (after a forge outage or a rejected push): the branch into
//! a local source, pushed, the pull request opened or updated, the
//! closeout posted (docs/results.md). A job that failed only at publishing
//! becomes `done`; the exit code is 0 when publishing succeeded.

use paddock::paths::Paths;
use paddock::results::republish::{republish, RepublishError};

use super::{exit, open_existing_store, progress, resolve_job, Failure};

#[derive(clap::Args)]
pub struct PublishArgs {
    /// The job: its id, a unique prefix of it, or `latest`.
    pub job: String,
    /// Print the job record afterwards as JSON.
    #[arg(long)]
    pub json: bool,
}

pub async fn exec(args: PublishArgs, paths: &Paths) -> Result<u8, Failure> {
    let store = open_existing_store(paths).await?;
    let job_id = resolve_job(&*store, &args.job, paths).await?;
    let (record, published) = republish(&*store, &job_id, &paths.artifacts, &paths.jobs)
        .await
        .map_err(|e| match e {
            RepublishError::Store { .. } => Failure::Internal(e.into()),
            _ => Failure::BadInput(e.into()),
        })?;
    for warning in &published.warnings {
        errln!("paddock: {warning}");
    }
    if args.json {
        let value =
            paddock::terminal_text::json::to_string(&record).map_err(anyhow::Error::from)?;
        outln!("{value}");
    } else {
        out!("{}", progress::summary(&record));
        if let Some(pr) = &published.pull_request {
            outln!("pull request: {}", paddock::terminal_text::line(&pr.url));
        }
    }
    Ok(match published.failure {
        None => exit::DONE,
        Some(_) => exit::FAILED,
    })
}
