//! `paddock diff JOB`: the job's patch (its `patch.diff` artifact) on
//! stdout, as `git apply` takes it: its bytes as they are into a pipe or
//! a file; on a terminal, control characters the job wrote into its
//! files are shown escaped (`terminal_text`), never sent to the terminal.
//! A disposed job's patch is gone with its artifacts, and is said to be
//! (as `paddock apply` says it: both find the patch here).

use std::io::{IsTerminal as _, Write as _};

use anyhow::Context as _;
use paddock::paths::Paths;
use paddock_protocol::JobStatus;

use super::{exit, open_store_or_empty, resolve_job, Failure};

#[derive(clap::Args)]
pub struct DiffArgs {
    /// The job: its id, a unique prefix of it, or `latest`.
    pub job: String,
}

/// The id `job` resolves to and its patch file, or a bad-input failure.
pub async fn job_and_patch(
    job: &str,
    paths: &Paths,
) -> Result<(String, std::path::PathBuf), Failure> {
    let store = open_store_or_empty(paths).await?;
    let job_id = resolve_job(&*store, job, paths).await?;
    let record = store
        .job(&job_id)
        .await
        .context("look up the job")?
        .context("the job vanished")?;
    if let Some(at) = record.disposed_at {
        let at = paddock::time_text::rfc3339(at);
        return Err(Failure::BadInput(anyhow::anyhow!(
            "job {job_id} was disposed of at {at} (DELETE /v1/jobs/{job_id}): its artifacts, \
             its patch among them, were removed; its record, events and ledger rows stay"
        )));
    }
    match (record.patch_path, record.status) {
        // Its artifacts removed by hand (or by a dispose before the record
        // said so): said as such, not as a failure of Paddock's to read a
        // file.
        (Some(path), _)
            if std::fs::symlink_metadata(&path)
                .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) =>
        {
            Err(Failure::BadInput(anyhow::anyhow!(
                "job {job_id}: its patch {path} is gone: the job's artifacts were removed \
                 (disposed of with DELETE /v1/jobs/{job_id}, or by hand)"
            )))
        }
        (Some(path), _) => Ok((job_id, std::path::PathBuf::from(path))),
        (None, status @ (JobStatus::Queued | JobStatus::Running)) => {
            Err(Failure::BadInput(anyhow::anyhow!(
                "job {job_id}: it is {} (its patch is saved when it has ended)",
                status.as_str()
            )))
        }
        (None, _) => Err(Failure::BadInput(anyhow::anyhow!(
            "job {job_id}: no patch was saved (it ended before its work tree was read)"
        ))),
    }
}

pub async fn exec(args: DiffArgs, paths: &Paths) -> Result<u8, Failure> {
    let (job_id, path) = job_and_patch(&args.job, paths).await?;
    let text = std::fs::read(&path).with_context(|| format!("read {}", path.display()))?;
    if text.is_empty() {
        // Said on stderr: `paddock diff JOB | git apply` still reads nothing.
        errln!("paddock: job {job_id} changed nothing: its patch is empty");
        return Ok(exit::DONE);
    }
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`| head`) is not an error, as elsewhere (stdio.rs).
    let _ = if stdout.is_terminal() {
        let shown = String::from_utf8_lossy(&text);
        stdout.write_all(paddock::terminal_text::text(&shown).as_bytes())
    } else {
        stdout.write_all(&text)
    };
    Ok(exit::DONE)
}
