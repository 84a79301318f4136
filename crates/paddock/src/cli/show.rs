//! `paddock show JOB`: a job's summary and its closeout (what was done,
//! what failed, tests, denials, cost: docs/results.md; to come, for a
//! queued or running job) from the job's
//! record in the store, or both as one JSON object with `--json`; and a
//! `paddock publish` of it that failed since it was last published (the
//! job stays `done`: docs/results.md).

use anyhow::Context as _;
use paddock::paths::Paths;

use super::{exit, open_store_or_empty, progress, resolve_job, Failure};

#[derive(clap::Args)]
pub struct ShowArgs {
    /// The job: its id, a unique prefix of it, or `latest`.
    pub job: String,
    /// Print `{"record": …, "closeout": …}` as one JSON object.
    #[arg(long)]
    pub json: bool,
}

pub async fn exec(args: ShowArgs, paths: &Paths) -> Result<u8, Failure> {
    let store = open_store_or_empty(paths).await?;
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
    // A `paddock publish` of the job that failed since it was last
    // published (a `done` job stays `done`): named beside the closeout.
    let publish_failure = paddock::results::republish::last_publish_failure(&*store, &job_id)
        .await
        .context("read the events")?;
    // A `running` job whose process stopped renewing its heartbeat.
    if record.status == paddock_protocol::JobStatus::Running {
        let shown = std::iter::once(job_id.as_str()).collect();
        for line in super::stale_note::lines(&*store, &shown).await {
            errln!("{line}");
        }
    }
    if args.json {
        let value = serde_json::json!({
            "record": record,
            "closeout": closeout,
            "publish_failure": publish_failure.as_ref().map(|(at, message)| serde_json::json!({
                "at": paddock::time_text::rfc3339(*at),
                "message": message,
            })),
        });
        outln!(
            "{}",
            paddock::terminal_text::json::to_string(&value).context("serialize the job")?
        );
    } else {
        out!("{}", progress::summary(&record));
        if let Some((at, message)) = &publish_failure {
            outln!(
                "last paddock publish failed ({}): {}",
                paddock::time_text::rfc3339(*at),
                paddock::terminal_text::line(message)
            );
        }
        match (closeout, record.status) {
            (Some(text), _) => out!("\n{}", paddock::terminal_text::text(&text)),
            // Not ended: its closeout comes at its end.
            (
                None,
                status @ (paddock_protocol::JobStatus::Queued
                | paddock_protocol::JobStatus::Running),
            ) => {
                outln!("\n(no closeout yet: the job is {})", status.as_str())
            }
            (None, _) => outln!("\n(no closeout: the job ended before Paddock wrote one)"),
        }
    }
    Ok(exit::DONE)
}
