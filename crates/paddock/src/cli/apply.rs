//! `paddock apply JOB`: the job's patch applied to a working tree by your
//! own git (`git apply`, with your configuration: it is your repository),
//! in the current directory or `--repo DIR`; `--check` only says whether
//! it applies. What was applied is said on stderr (the job, where, its
//! files); a directory in no git working tree is refused unless
//! `--outside-git` asks for it (before, the files were written into it
//! without a word). Git's messages name the job's files, so they are shown
//! escaped (`terminal_text`), as every text of the job is. The patch names files from the repository's top level, so
//! it is applied there even from a subdirectory (where `git apply` would
//! skip every file outside it and still succeed). A job that changed
//! nothing has nothing to apply, and says so. The job's branch, when it
//! has one, is already in a local source (docs/results.md).
//!
//! Its gits run on the directory given, never on a repository the
//! environment names (`GIT_DIR`, `GIT_WORK_TREE` and the rest are left out:
//! `paddock::workspace::users_git`), nor with the environment's limits on
//! git's search for the repository above it (`GIT_CEILING_DIRECTORIES`,
//! `GIT_DISCOVERY_ACROSS_FILESYSTEM`: `users_git::locating_command`), so a
//! directory inside a git directory is found to be there; a repository
//! git refuses to read (one another user owns, not a `safe.directory`; a
//! `.git` file naming a directory that is not there) is refused with
//! git's own reason, `--outside-git` or not: only git's "not a git
//! repository (or any of the parent directories)" (or "… any parent up to
//! mount point …") is no repository. What it needs of the store is read
//! before the patch is applied, so once it is, what was applied is said.
//!
//! A later attempt resumed on an earlier attempt's branch (`paddock run
//! --attempt-after`) has a patch of its own change only, made on that
//! branch: applied where HEAD does not contain that branch's commit (a
//! checkout of the spec's base), it leaves the earlier attempt's work out,
//! or does not apply at all. Either way `paddock apply` says which
//! attempt's branch the patch was made on and how to get the whole work.
//! Any other patch git refuses where HEAD lacks the job's base commit
//! (the tree moved on, or is on another branch) is said to have been made
//! on that commit, read from the job's `branch.bundle`. A patch git
//! refuses whose reverse applies is applied there already (a second
//! `paddock apply JOB`): that is said, and nothing is done (exit 0).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use paddock::paths::Paths;
use paddock::workspace::users_git;

use super::{diff::job_and_patch, exit, open_store_or_empty, Failure};

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
    /// Apply it even where the directory is in no git working tree (its
    /// files written there as `patch` would); refused without it.
    #[arg(long)]
    pub outside_git: bool,
}

pub async fn exec(args: ApplyArgs, paths: &Paths) -> Result<u8, Failure> {
    let (job_id, patch) = job_and_patch(&args.job, paths).await?;
    // A `--repo` that is not there is bad input whatever the job changed
    // (before, a job that changed nothing was reported as such, exit 0).
    let dir = match &args.repo {
        Some(dir) if !dir.is_dir() => {
            let what = if dir.exists() {
                "not a directory"
            } else {
                "no such directory"
            };
            return Err(Failure::BadInput(anyhow::anyhow!(
                "--repo {}: {what}; name the working tree to apply job {job_id}'s patch in",
                dir.display()
            )));
        }
        Some(dir) => dir.clone(),
        // Named as a path, never `.`, in what is said of it.
        None => std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
    };
    let size = std::fs::metadata(&patch)
        .with_context(|| format!("read job {job_id}'s patch {}", patch.display()))?
        .len();
    if size == 0 {
        errln!("paddock: job {job_id} changed nothing: there is no patch to apply");
        return Ok(exit::DONE);
    }
    let place =
        place_of(&dir).with_context(|| format!("run git rev-parse in {}", dir.display()))?;
    let found = match place {
        Place::WorkTree(top) => Some(top),
        // A git directory (a checkout's `.git`, a bare repository): its
        // files are git's own (hooks it runs), so a job's patch is never
        // written there, `--outside-git` or not.
        Place::GitDir(git_dir) => {
            return Err(Failure::BadInput(anyhow::anyhow!(
                "{} is inside the git directory {}, not a working tree: job {job_id}'s patch was \
                 not applied (its files would land among git's own, such as the hooks git \
                 runs); name the working tree with --repo DIR",
                dir.display(),
                git_dir.display()
            )));
        }
        // A repository git will not read (another user's, not a
        // `safe.directory`): git's own reason, never `--outside-git`,
        // which would write the files into it unread.
        Place::Refused(why) => {
            return Err(Failure::BadInput(anyhow::anyhow!(
                "{} is in a repository git refuses to read: job {job_id}'s patch was not \
                 applied; git says:\n{}",
                dir.display(),
                why.trim_end()
            )));
        }
        Place::Nowhere => None,
    };
    // Outside a working tree the files would land in whatever directory
    // this is (a home directory, a download folder) without a word:
    // refused unless asked for.
    if found.is_none() && !args.outside_git {
        return Err(Failure::BadInput(anyhow::anyhow!(
            "{} is in no git working tree: job {job_id}'s patch was not applied; run `paddock \
             apply` in a checkout of the job's repository, name one with --repo DIR, or pass \
             --outside-git to write its files in this directory anyway",
            dir.display()
        )));
    }
    let top = found.clone().unwrap_or_else(|| dir.clone());
    // Made on an earlier attempt's branch that this tree's HEAD lacks
    // (outside a working tree there is no HEAD to ask).
    let missing = match (&found, earlier_attempt(&job_id, paths).await?) {
        (Some(top), Some(earlier)) if !contains(top, &earlier.commit) => Some(earlier),
        _ => None,
    };
    // Read before anything is written: a store that fails now fails the
    // command with the tree untouched, never after the patch applied
    // (which read as not applied, and was applied again).
    let files = changed_files(&job_id, paths).await?;
    let applied = git_apply(&top, &patch, Direction::Forward { check: args.check })
        .with_context(|| format!("run git apply in {}", top.display()))?;
    if !applied.status.success() {
        // Applied already (a second `paddock apply JOB`): its reverse
        // applies, so there is nothing to do, and git's refusal of the
        // patch (every file "already exists", "patch does not apply")
        // would only say something is wrong.
        let reverse = git_apply(&top, &patch, Direction::ReverseCheck)
            .with_context(|| format!("run git apply --reverse --check in {}", top.display()))?;
        if reverse.status.success() {
            errln!(
                "paddock: job {job_id}'s patch is already applied in {} (its reverse applies \
                 there): nothing to do",
                top.display()
            );
            return Ok(exit::DONE);
        }
    }
    applied.show();
    if applied.status.success() {
        errln!("{}", said_applied(&job_id, &top, args.check, &files));
        if let Some(earlier) = &missing {
            errln!(
                "paddock: job {job_id}'s patch {} in {}, but it is {}; {}'s change is not part of \
                 it: `paddock apply {}` applies that one, and the branch `{}` has both",
                if args.check { "applies" } else { "was applied" },
                top.display(),
                earlier.made_on(),
                earlier.attempt_name(),
                earlier.job,
                earlier.then_branch
            );
        }
        return Ok(exit::DONE);
    }
    match &missing {
        Some(earlier) => errln!(
            "paddock: job {job_id}'s patch does not apply in {} (git apply's message above): it \
             is {}; apply it on a checkout of `{}` (or after `paddock apply {}`), or take the \
             branch `{}`, which has both",
            top.display(),
            earlier.made_on(),
            earlier.branch,
            earlier.job,
            earlier.then_branch
        ),
        None => match base_missing(&job_id, paths, found.as_deref()).await? {
            Some(base) => errln!(
                "paddock: job {job_id}'s patch does not apply in {} (git apply's message \
                 above): it was made on commit {} (the job's base, `{}`), which HEAD there does \
                 not contain; apply it on a checkout of that commit, or take the job's branch \
                 `{}`",
                top.display(),
                base.commit.get(..12).unwrap_or(&base.commit),
                base.base_ref,
                base.branch
            ),
            None if found.is_none() => errln!(
                "paddock: job {job_id}'s patch does not apply in {} (git apply's message \
                 above): it is not in a git working tree; run `paddock apply` in a checkout of \
                 the job's repository, or name one with --repo DIR",
                top.display()
            ),
            None => errln!(
                "paddock: job {job_id}'s patch does not apply in {} (git apply's message above)",
                top.display()
            ),
        },
    }
    Ok(exit::FAILED)
}

/// The most files [`said_applied`] names.
const NAMED_FILES: usize = 5;

/// What `paddock apply` says when the patch applied (or, `check`, would):
/// the job, where, how many files and the first [`NAMED_FILES`] of them,
/// escaped (the job named them). Before, a patch applied without a word.
fn said_applied(job_id: &str, top: &Path, check: bool, files: &[String]) -> String {
    let mut named: Vec<String> = files
        .iter()
        .take(NAMED_FILES)
        .map(|f| paddock::terminal_text::path(f))
        .collect();
    if files.len() > NAMED_FILES {
        named.push(format!("and {} more", files.len() - NAMED_FILES));
    }
    let count = match files.len() {
        1 => "1 file".to_owned(),
        n => format!("{n} files"),
    };
    let list = if named.is_empty() {
        String::new()
    } else {
        format!(": {}", named.join(", "))
    };
    if check {
        format!(
            "paddock: job {job_id}'s patch applies in {} ({count}{list}); nothing was changed \
             (--check)",
            top.display()
        )
    } else {
        format!(
            "paddock: applied job {job_id}'s patch in {} ({count}{list})",
            top.display()
        )
    }
}

/// The files job `job_id` changed, as its record lists them.
async fn changed_files(job_id: &str, paths: &Paths) -> Result<Vec<String>, Failure> {
    let store = open_store_or_empty(paths).await?;
    Ok(store
        .job(job_id)
        .await
        .context("look up the job")?
        .map(|r| r.changed_files)
        .unwrap_or_default())
}

/// The base a job's patch was made on, when HEAD of the working tree
/// lacks it.
struct Base {
    /// The base commit (its full name).
    commit: String,
    /// The spec's base ref, as the record names it.
    base_ref: String,
    /// The job's result branch.
    branch: String,
}

/// The commit job `job_id`'s patch was made on, when HEAD of the working
/// tree `top` does not contain it: a patch that does not apply there was
/// most likely refused for that (the tree is on another base). Read from
/// the job's `branch.bundle`, whose one prerequisite is that commit (a
/// bundle of the whole history names none, and then nothing is said).
/// Outside a working tree (`top` none) there is no HEAD to ask.
async fn base_missing(
    job_id: &str,
    paths: &Paths,
    top: Option<&Path>,
) -> Result<Option<Base>, Failure> {
    let Some(top) = top else {
        return Ok(None);
    };
    let bundle = paths
        .artifacts
        .join(job_id)
        .join(paddock::results::conclude::BUNDLE);
    let Ok(Ok([commit])) =
        paddock::results::base_objects::prerequisites(&bundle).map(<[String; 1]>::try_from)
    else {
        return Ok(None);
    };
    let hex = commit.len() >= 40 && commit.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex || contains(top, &commit) {
        return Ok(None);
    }
    let store = open_store_or_empty(paths).await?;
    let Some(record) = store.job(job_id).await.context("look up the job")? else {
        return Ok(None);
    };
    Ok(Some(Base {
        commit,
        base_ref: record.base_ref,
        branch: record.branch,
    }))
}

/// Which way [`git_apply`] applies the patch.
#[derive(Clone, Copy)]
enum Direction {
    /// As made (only checked with `check`).
    Forward { check: bool },
    /// Its reverse, only checked: whether the patch is applied already.
    ReverseCheck,
}

/// What one `git apply` did and said.
struct Applied {
    status: std::process::ExitStatus,
    /// The first [`MESSAGE_BYTES`] of its stderr.
    message: Vec<u8>,
    /// How many more bytes it wrote there.
    more: u64,
}

impl Applied {
    /// Git's messages on stderr, escaped: they name the job's files, and
    /// git turns only C0 controls in them into `?`, passing C1 controls
    /// and bidirectional overrides on to the terminal.
    fn show(&self) {
        let text = String::from_utf8_lossy(&self.message);
        if !text.is_empty() {
            errln!(
                "{}",
                paddock::terminal_text::text(text.trim_end_matches('\n'))
            );
        }
        if self.more > 0 {
            errln!(
                "paddock: ({} more bytes of git apply's messages left out)",
                self.more
            );
        }
    }
}

/// Runs `git apply` of `patch` in `top` the `way` asked, its messages
/// kept (at most [`MESSAGE_BYTES`], the rest read and counted) for
/// [`Applied::show`].
fn git_apply(top: &Path, patch: &Path, way: Direction) -> std::io::Result<Applied> {
    use std::io::Read as _;
    let flags: &[&str] = match way {
        Direction::Forward { check: false } => &[],
        Direction::Forward { check: true } => &["--check"],
        Direction::ReverseCheck => &["--reverse", "--check"],
    };
    let mut child = users_git::locating_command()
        .arg("-C")
        .arg(top)
        .arg("apply")
        .args(flags)
        .arg("--")
        .arg(patch)
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let mut message = Vec::new();
    let mut more = 0u64;
    if let Some(stderr) = child.stderr.take() {
        let mut stderr = std::io::BufReader::new(stderr);
        (&mut stderr)
            .take(MESSAGE_BYTES)
            .read_to_end(&mut message)?;
        more = std::io::copy(&mut stderr, &mut std::io::sink())?;
    }
    let status = child.wait()?;
    Ok(Applied {
        status,
        message,
        more,
    })
}

/// The most of `git apply`'s messages shown.
const MESSAGE_BYTES: u64 = 1 << 20;

/// The earlier attempt whose branch a job's patch was made on.
struct Earlier {
    /// Its attempt number.
    attempt: u32,
    /// Its job id.
    job: String,
    /// Its branch, the job's base.
    branch: String,
    /// The commit its branch is at (from its `branch.bundle`).
    commit: String,
    /// The later job's own branch (the earlier work and its own).
    then_branch: String,
    /// The later job's attempt number.
    then_attempt: u32,
}

impl Earlier {
    fn attempt_name(&self) -> String {
        format!("attempt {}", self.attempt)
    }

    /// `attempt N's change alone, made on attempt M's branch … (commit
    /// …, job …), which HEAD there does not contain`.
    fn made_on(&self) -> String {
        format!(
            "attempt {}'s change alone, made on attempt {}'s branch `{}` (commit {}, job {}), \
             which HEAD there does not contain",
            self.then_attempt,
            self.attempt,
            self.branch,
            self.commit.get(..12).unwrap_or(&self.commit),
            self.job
        )
    }
}

/// The earlier attempt of `job_id`'s ticket whose result branch the job
/// started on (its base), with the commit that branch is at; `None` for a
/// job on the spec's own base, or when the earlier job's bundle cannot
/// say the commit.
async fn earlier_attempt(job_id: &str, paths: &Paths) -> Result<Option<Earlier>, Failure> {
    let store = open_store_or_empty(paths).await?;
    let Some(record) = store.job(job_id).await.context("look up the job")? else {
        return Ok(None);
    };
    let Some(maker) = paddock::session::branch_maker(&*store, &record, &paths.artifacts)
        .await
        .context("look up the job's earlier attempts")?
    else {
        return Ok(None);
    };
    let Some(made) = store.job(&maker).await.context("look up the earlier job")? else {
        return Ok(None);
    };
    let bundle = paths
        .artifacts
        .join(&maker)
        .join(paddock::results::conclude::BUNDLE);
    let Ok(Some(commit)) = paddock::results::base_objects::branch_tip(&bundle, &record.base_ref)
    else {
        return Ok(None);
    };
    Ok(Some(Earlier {
        attempt: made.attempt,
        job: maker,
        branch: record.base_ref,
        commit,
        then_branch: record.branch,
        then_attempt: record.attempt,
    }))
}

/// Whether HEAD of the working tree `top` contains `commit` (it is HEAD
/// or an ancestor of it); not when the repository lacks the commit.
fn contains(top: &Path, commit: &str) -> bool {
    users_git::command()
        .arg("-C")
        .arg(top)
        .args(["merge-base", "--is-ancestor", commit, "HEAD"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Where a directory is, as the user's git sees it.
enum Place {
    /// In a working tree, whose top level this is (as git names it).
    WorkTree(PathBuf),
    /// In a git directory, this one (`--absolute-git-dir` answers there
    /// while `--show-toplevel` does not: a checkout's `.git`, a bare
    /// repository).
    GitDir(PathBuf),
    /// In no repository: git then applies the patch in the directory
    /// itself, as `patch` would.
    Nowhere,
    /// In a repository git refuses to read (one another user owns, not a
    /// `safe.directory`; a repository git cannot read): git's message.
    Refused(String),
}

/// Where `dir` is ([`Place`]), asked of the user's git in `dir` (never of
/// a repository the environment names, nor with its limits on the search
/// above `dir`: `users_git::locating_command`). Only git's own word that
/// it found no repository in `dir` or above ([`found_none`]) is
/// [`Place::Nowhere`]; any other failure is git's refusal (before, every
/// failure read as no working tree, and the message told to write the
/// files there with `--outside-git`; then any "not a git repository"
/// did, a `.git` file naming a directory not there among them).
fn place_of(dir: &Path) -> std::io::Result<Place> {
    if let Ok(top) = rev_parse_path(dir, "--show-toplevel")? {
        return Ok(Place::WorkTree(top));
    }
    Ok(match rev_parse_path(dir, "--absolute-git-dir")? {
        Ok(git_dir) => Place::GitDir(git_dir),
        Err(why) if found_none(&why) => Place::Nowhere,
        Err(why) => Place::Refused(why),
    })
}

/// Whether git's message (untranslated: `LC_ALL=C`) says it looked in the
/// directory and every one above it and found no repository: "not a git
/// repository (or any of the parent directories)", or "(or any parent up
/// to mount point …)" where its search stopped at a filesystem's edge.
/// "not a git repository: PATH" alone is git refusing a repository it
/// found (a `.git` file naming a directory that is not there).
fn found_none(why: &str) -> bool {
    why.lines().any(|line| {
        line.starts_with("fatal: not a git repository (or any of the parent directories)")
            || line.starts_with("fatal: not a git repository (or any parent up to mount point ")
    })
}

/// The path `git rev-parse ASK` prints in `dir`, or its message (its
/// stderr, in git's untranslated words) when it fails or prints nothing.
fn rev_parse_path(dir: &Path, ask: &str) -> std::io::Result<Result<PathBuf, String>> {
    let out = users_git::locating_command()
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", ask])
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::null())
        .output()?;
    use std::os::unix::ffi::OsStrExt as _;
    let path = out.stdout.strip_suffix(b"\n").unwrap_or(&out.stdout);
    Ok(if out.status.success() && !path.is_empty() {
        Ok(PathBuf::from(std::ffi::OsStr::from_bytes(path)))
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    })
}
