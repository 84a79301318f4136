//! `paddock publish JOB`: a finished job's result published again from
//! what it kept (after a forge outage or a rejected push): the branch into
//! a local source, pushed, the pull request opened or updated, the
//! closeout posted (docs/results.md). A job that failed only at publishing
//! becomes `done`; the exit code is 0 when publishing succeeded.
//! Ctrl-C, SIGTERM and SIGHUP cancel it (`republish`'s module text): exit
//! 5, saying what became of the job.

use paddock::paths::Paths;
use paddock::results::republish::{republish, RepublishError};

use super::{exit, open_store_or_empty, progress, resolve_job, Failure};

#[derive(clap::Args)]
pub struct PublishArgs {
    /// The job: its id, a unique prefix of it, or `latest`.
    pub job: String,
    /// Print the job record afterwards as JSON.
    #[arg(long)]
    pub json: bool,
}

pub async fn exec(args: PublishArgs, paths: &Paths) -> Result<u8, Failure> {
    let store = open_store_or_empty(paths).await?;
    let job_id = resolve_job(&*store, &args.job, paths).await?;
    // From now on a signal cancels the publish rather than killing
    // paddock mid-push (which leaves the push and a token to the reaper).
    let signals = super::run::cancel_signals()
        .map_err(|e| anyhow::Error::new(e).context("listen for Ctrl-C, SIGTERM and SIGHUP"))?;
    let cancel = tokio_util::sync::CancellationToken::new();
    let on_signal = cancel.clone();
    let listener = tokio::spawn(async move {
        signals.await;
        on_signal.cancel();
    });
    let republished = republish(&*store, &job_id, (&paths.artifacts, &paths.jobs), &cancel).await;
    listener.abort();
    let (record, published) = match republished {
        Ok(done) => done,
        Err(e @ RepublishError::Cancelled { .. }) => {
            errln!("paddock: {e}");
            return Ok(exit::CANCELLED);
        }
        Err(e @ (RepublishError::Store { .. } | RepublishError::Unrecorded { .. })) => {
            return Err(Failure::Internal(e.into()))
        }
        Err(e) => return Err(Failure::BadInput(e.into())),
    };
    for warning in &published.warnings {
        errln!("paddock: {warning}");
    }
    if record.changed_files.is_empty() && published.pull_request.is_none() {
        errln!(
            "paddock: job {job_id} changed nothing: there is no branch or pull request to publish"
        );
    }
    let cancelled = cancel.is_cancelled() && published.failure.is_some();
    if cancelled {
        errln!(
            "paddock: publishing job {job_id} was cancelled (Ctrl-C, SIGTERM or SIGHUP); the job \
             is {}: `paddock publish {job_id}` publishes it again",
            record.status.as_str()
        );
    }
    if args.json {
        let value =
            paddock::terminal_text::json::to_string(&record).map_err(anyhow::Error::from)?;
        outln!("{value}");
    } else {
        out!("{}", progress::summary(&record));
        if let Some(pr) = &published.pull_request {
            let ended = match &pr.ended {
                None => String::new(),
                Some(how) => format!(
                    " ({} on the forge: left as it is, the branch not pushed again)",
                    paddock::terminal_text::line(how)
                ),
            };
            outln!(
                "pull request: {}{ended}",
                paddock::terminal_text::line(&pr.page())
            );
        }
    }
    Ok(match (published.failure, cancelled) {
        (None, _) => exit::DONE,
        (Some(_), true) => exit::CANCELLED,
        (Some(_), false) => exit::FAILED,
    })
}
