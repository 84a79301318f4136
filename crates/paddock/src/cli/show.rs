//! `paddock show JOB`: a finished job's summary and its closeout (what was
//! done, what failed, tests, denials, cost: docs/results.md) from the job's
//! record in the store, or both as one JSON object with `--json`.

use anyhow::Context as _;
use paddock::paths::Paths;

use super::{exit, open_existing_store, progress, resolve_job, Failure};

#[derive(clap::Args)]
pub struct ShowArgs {
    /// The job: its id, a unique prefix of it, or `latest`.
    pub job: String,
    /// Print `{"record": …, "closeout": …}` as one JSON object.
    #[arg(long)]
    pub json: bool,
}

pub async fn exec(args: ShowArgs, paths: &Paths) -> Result<u8, Failure> {
    let store = open_existing_store(paths).await?;
    let job_id = resolve_job(&*store, &args.job, paths).await?;
    let record = store
        .job(&job_id)
        .await
        .context("look up the job")?
        .context("the job vanished")?;
    // The record's closeout; a job concluded before the store kept it
    // has only the artifact.
    let closeout = match store.closeout(&job_id).await.context("read the closeout")? {
        Some(text) => Some(text),
        None => std::fs::read_to_string(
            paths
                .artifacts
                .join(&job_id)
                .join(paddock::results::conclude::CLOSEOUT),
        )
        .ok(),
    };
    if args.json {
        let value = serde_json::json!({ "record": record, "closeout": closeout });
        outln!(
            "{}",
            paddock::terminal_text::json::to_string(&value).context("serialize the job")?
        );
    } else {
        out!("{}", progress::summary(&record));
        match closeout {
            Some(text) => out!("\n{}", paddock::terminal_text::text(&text)),
            None => outln!("\n(no closeout: the job ended before Paddock wrote one)"),
        }
    }
    Ok(exit::DONE)
}
