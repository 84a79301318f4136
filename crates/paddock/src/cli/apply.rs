//! `paddock apply JOB`: the job's patch applied to a working tree by your
//! own git (`git apply`, with your configuration: it is your repository),
//! in the current directory or `--repo DIR`; `--check` only says whether
//! it applies. The patch names files from the repository's top level, so
//! it is applied there even from a subdirectory (where `git apply` would
//! skip every file outside it and still succeed). A job that changed
//! nothing has nothing to apply, and says so. The job's branch, when it
//! has one, is already in a local source (docs/results.md).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use paddock::paths::Paths;

use super::{diff::job_and_patch, exit, Failure};

#[derive(clap::Args)]
pub struct ApplyArgs {
    /// The job: its id, a unique prefix of it, or `latest`.
    pub job: String,
    /// The repository to apply it in (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub repo: Option<std::path::PathBuf>,
    /// Only check that the patch applies; change nothing.
    #[arg(long)]
    pub check: bool,
}

pub async fn exec(args: ApplyArgs, paths: &Paths) -> Result<u8, Failure> {
    let (job_id, patch) = job_and_patch(&args.job, paths).await?;
    let size = std::fs::metadata(&patch)
        .with_context(|| format!("read job {job_id}'s patch {}", patch.display()))?
        .len();
    if size == 0 {
        errln!("paddock: job {job_id} changed nothing: there is no patch to apply");
        return Ok(exit::DONE);
    }
    let dir = args.repo.clone().unwrap_or_else(|| PathBuf::from("."));
    let top = top_level(&dir).unwrap_or_else(|| dir.clone());
    let status = std::process::Command::new("git")
        .arg("-C")
        .arg(&top)
        .arg("apply")
        .args(args.check.then_some("--check"))
        .arg("--")
        .arg(&patch)
        .env("GIT_TERMINAL_PROMPT", "0")
        .status()
        .with_context(|| format!("run git apply in {}", top.display()))?;
    if status.success() {
        return Ok(exit::DONE);
    }
    errln!(
        "paddock: job {job_id}'s patch does not apply in {} (git apply's message above)",
        top.display()
    );
    Ok(exit::FAILED)
}

/// The top level of the working tree `dir` is in, as the user's git names
/// it; none outside a working tree (git then applies the patch in `dir`
/// itself, as `patch` would).
fn top_level(dir: &Path) -> Option<PathBuf> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "--show-toplevel"])
        .env("GIT_TERMINAL_PROMPT", "0")
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let top = String::from_utf8(out.stdout).ok()?;
    let top = top.strip_suffix('\n').unwrap_or(&top);
    (out.status.success() && !top.is_empty()).then(|| PathBuf::from(top))
}
