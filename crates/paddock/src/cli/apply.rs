//! `paddock apply JOB`: the job's patch applied to a working tree by your
//! own git (`git apply`, with your configuration: it is your repository),
//! in the current directory or `--repo DIR`; `--check` only says whether
//! it applies. The job's branch, when it has one, is already in a local
//! source (docs/results.md).

use anyhow::Context as _;
use paddock::paths::Paths;

use super::{diff::patch_of, exit, Failure};

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
    let patch = patch_of(&args.job, paths).await?;
    let mut git = std::process::Command::new("git");
    if let Some(repo) = &args.repo {
        git.arg("-C").arg(repo);
    }
    git.arg("apply");
    if args.check {
        git.arg("--check");
    }
    let status = git
        .arg("--")
        .arg(&patch)
        .env("GIT_TERMINAL_PROMPT", "0")
        .status()
        .context("run git apply")?;
    Ok(if status.success() {
        exit::DONE
    } else {
        exit::FAILED
    })
}
