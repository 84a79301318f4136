//! The branch into the user's local source repository: fetched from the
//! job's bundle as `refs/heads/<branch>` and nothing else, so the user's
//! working tree, index, current branch and configuration stay as they
//! were (a fetch writes objects and that one ref; `FETCH_HEAD` is not
//! written; git itself refuses to update the branch checked out). Run with
//! the user's own git configuration (`workspace::user_git`): it is their
//! repository, and nothing of the job is read but the bundle Paddock
//! wrote; but no hook of it runs (`core.hooksPath=/dev/null`: a
//! `reference-transaction` hook would run on the fetch's ref). A branch that already exists is only fast-forwarded, never
//! rewritten: when git refuses the update (the branch holds commits this
//! job's does not continue, a rerun of the same ticket and attempt, or it
//! is checked out), the error says which branch, where it is, git's own
//! reason and how to take the job's branch under another name (a command
//! to paste, its paths quoted for the shell: `shell_word`); a source no
//! longer there (moved since the job ran) is said to be gone, with the
//! command that takes the branch where it is now. Paddock's
//! fetches into one source take turns (an exclusive `flock` on
//! `<jobs>/.source-locks/<hash of the source's path>.lock`,
//! `workspace/source_lock.rs`, pruned once unused): git creates
//! a new branch without checking it is still absent, so two jobs of one
//! ticket and attempt finishing at once each created it, the last one's
//! silently replacing the first's. A new branch on a base the source has
//! is made without a fetch where it can be (`source_pack.rs`: no walk of
//! the base's tree); everything else is fetched here.

use std::path::{Path, PathBuf};

use crate::workspace::{user_git, user_git_given, user_git_with, UserGitInput, WorkspaceError};

#[derive(Debug, thiserror::Error)]
pub enum SourceFetchError {
    #[error(
        "the source {source_repo} already has a branch {branch} (at {existing}), and Paddock \
         never rewrites a branch: {git}; to take this job's under another name: `git -C {} \
         fetch {} {branch}:NAME`, or run the ticket's next attempt with `paddock run SPEC \
         --attempt-after {job}`",
        crate::shell_word::path(.source_repo),
        crate::shell_word::path(.bundle)
    )]
    Exists {
        job: String,
        source_repo: PathBuf,
        branch: String,
        existing: String,
        bundle: PathBuf,
        git: String,
    },
    /// The source is no directory any more (moved or removed since the
    /// job ran: a later `paddock publish`).
    #[error(
        "the source {source_repo} is not there any more (moved or removed?); to take the branch \
         into the repository where it is now: `git -C DIR fetch {} {branch}:{branch}`",
        crate::shell_word::path(.bundle)
    )]
    Gone {
        source_repo: PathBuf,
        branch: String,
        bundle: PathBuf,
    },
    #[error(transparent)]
    Fetch(#[from] WorkspaceError),
}

/// Fetches `branch` from `bundle` into `source` as `refs/heads/<branch>`,
/// holding the source's lock under `jobs_root` (module text).
pub async fn fetch_branch(
    job: &str,
    source: &Path,
    bundle: &Path,
    branch: &str,
    jobs_root: &Path,
    git_cpu: std::time::Duration,
) -> Result<(), SourceFetchError> {
    // Said as such, rather than as git's "cannot change to" of a
    // "workspace" (a later `paddock publish` after the user moved it).
    if !source.is_dir() {
        return Err(SourceFetchError::Gone {
            source_repo: source.to_path_buf(),
            branch: branch.to_string(),
            bundle: bundle.to_path_buf(),
        });
    }
    // Git creates a new branch without checking that it is still absent:
    // two jobs of one ticket and attempt fetching at once each saw no
    // branch, and the last one's silently replaced the first's. In turns,
    // the second finds the first's branch and is refused as a rerun is.
    let _turn = crate::workspace::source_lock::hold(jobs_root, source).await?;
    // The common case without a fetch; anything else, as it was.
    match super::source_pack::publish(job, source, bundle, branch, git_cpu).await {
        super::source_pack::Published::Done => return Ok(()),
        super::source_pack::Published::Left(why) => {
            tracing::debug!(job, source = %source.display(), why, "the branch left to a fetch");
        }
    }
    let refspec = format!("refs/heads/{branch}:refs/heads/{branch}");
    // The job's new objects on the base (the bundle's prerequisite) are
    // checked as they are indexed; a whole history is the user's own,
    // which need not pass today's fsck (their own setting stands), and
    // its job's new objects were checked before it was kept
    // (`workspace/new_objects.rs`). The fetch verifies the bundle.
    let thin = super::base_objects::prerequisites(bundle)
        .map(|p| !p.is_empty())
        .map_err(|e| WorkspaceError::Read {
            path: source.to_path_buf(),
            file: bundle.display().to_string(),
            source: e,
        })?;
    let bundle_arg = bundle.to_string_lossy().into_owned();
    // No hook of the source runs: the fetch writes one ref, and its
    // `reference-transaction` hook (in `.git/hooks` or a `core.hooksPath`)
    // would otherwise run a program of the user's at Paddock's hand, with
    // the job's branch as its input.
    let mut args = vec!["-c", "core.hooksPath=/dev/null"];
    if thin {
        args.extend(["-c", "fetch.fsckObjects=true"]);
    }
    // Not `--quiet`: that silences the line saying why a ref was refused
    // (`! [rejected] … (non-fast-forward)`); stderr is only read on failure.
    args.extend([
        "fetch",
        "--no-progress",
        "--no-write-fetch-head",
        "--no-tags",
        "--no-recurse-submodules",
        "--no-auto-gc",
        "--",
        bundle_arg.as_str(),
        refspec.as_str(),
    ]);
    // The job's objects indexed and walked: held to the CPU limit of a
    // host git on a job's content.
    let cpu = Some(git_cpu);
    let Err(e) = user_git_given(source, args, &[], &[], UserGitInput::None, cpu).await else {
        return Ok(());
    };
    let WorkspaceError::Git { stderr, .. } = &e else {
        return Err(e.into());
    };
    let branch_ref = format!("refs/heads/{branch}");
    match user_git(
        source,
        ["rev-parse", "--verify", "--quiet", branch_ref.as_str()],
    )
    .await
    {
        Ok(existing) => Err(SourceFetchError::Exists {
            job: job.to_owned(),
            source_repo: source.to_path_buf(),
            branch: branch.to_string(),
            existing: existing.trim().to_string(),
            bundle: bundle.to_path_buf(),
            git: refusal(stderr),
        }),
        Err(_) => Err(e.into()),
    }
}

/// [`fetch_branch`], and when the source lacks the bundle's prerequisite
/// (the bundle holds only the job's new objects on an earlier attempt's
/// branch, which the source has since lost: deleted and pruned), the
/// earlier attempts' bundles `earlier` (branch, bundle; nearest first)
/// fetched first, oldest first, objects only (no ref of the user's is
/// made again), then the branch again.
pub async fn fetch_branch_after(
    job: &str,
    source: &Path,
    (bundle, branch): (&Path, &str),
    jobs_root: &Path,
    earlier: &[(String, PathBuf)],
    git_cpu: std::time::Duration,
) -> Result<(), SourceFetchError> {
    let first = fetch_branch(job, source, bundle, branch, jobs_root, git_cpu).await;
    let lacking = matches!(
        &first,
        Err(SourceFetchError::Fetch(WorkspaceError::Git { stderr, .. }))
            if stderr.contains("lacks these prerequisite commits")
    );
    if !lacking || earlier.is_empty() {
        return first;
    }
    for (name, from) in earlier.iter().rev() {
        let from = from.to_string_lossy().into_owned();
        let wanted = format!("refs/heads/{name}");
        // What one of them cannot give, the branch's fetch below says.
        let _ = user_git(
            source,
            [
                "-c",
                "core.hooksPath=/dev/null",
                "-c",
                "fetch.fsckObjects=true",
                "fetch",
                "--no-progress",
                "--no-write-fetch-head",
                "--no-tags",
                "--no-recurse-submodules",
                "--no-auto-gc",
                "--",
                from.as_str(),
                wanted.as_str(),
            ],
        )
        .await;
    }
    fetch_branch(job, source, bundle, branch, jobs_root, git_cpu).await
}

/// A branch's fetch into a local source, under way ([`fetch_soon`]):
/// awaited by as many as need its outcome, its error as text.
pub type SourceFetching =
    futures::future::Shared<futures::future::BoxFuture<'static, Result<(), String>>>;

/// Starts [`fetch_branch`] on a task of its own, now, rather than when
/// its outcome is first awaited: the job's end goes on (its patch's event,
/// its status) while git fetches.
pub fn fetch_soon(
    job: String,
    source: PathBuf,
    bundle: PathBuf,
    branch: String,
    jobs_root: PathBuf,
    git_cpu: std::time::Duration,
) -> SourceFetching {
    let fetch = tokio::spawn(async move {
        fetch_branch(&job, &source, &bundle, &branch, &jobs_root, git_cpu)
            .await
            .map_err(|e| e.to_string())
    });
    let done: futures::future::BoxFuture<'static, Result<(), String>> = Box::pin(async move {
        fetch
            .await
            .unwrap_or_else(|e| Err(format!("the fetch into the source did not finish: {e}")))
    });
    futures::FutureExt::shared(done)
}

/// Git's reason for refusing a fetch, one line: its `!` ref lines and
/// `fatal:`/`error:` lines, without the `From …` heading.
fn refusal(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('!') || l.starts_with("fatal:") || l.starts_with("error:"))
        .collect();
    let text = if lines.is_empty() {
        stderr.trim().to_string()
    } else {
        lines.join("; ")
    };
    format!(
        "git said `{}`",
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    )
}

/// The source's uncommitted changes (`git status --porcelain` entries),
/// read without writing its index: the job ran on the committed base, not
/// on these. Only whether the tree differs is wanted, so no program of
/// the source's configuration runs for it: no clean filter or filter
/// process (Git LFS's, any `filter.<driver>` of the user's, every one
/// configured made empty and not required, so a file whose stamps
/// changed is compared as it is on disk), no fsmonitor hook, no hook, and
/// no `git status` in a submodule (its recorded commit compared, not its
/// tree: `--ignore-submodules=dirty`).
pub async fn uncommitted(source: &Path) -> Result<Vec<String>, WorkspaceError> {
    let mut settings: Vec<(String, String)> = [
        ("core.fsmonitor", "false"),
        ("core.hooksPath", "/dev/null"),
        ("core.untrackedCache", "false"),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .to_vec();
    for driver in filter_drivers(source).await {
        for (what, value) in [
            ("clean", ""),
            ("smudge", ""),
            ("process", ""),
            ("required", "false"),
        ] {
            settings.push((format!("filter.{driver}.{what}"), value.to_string()));
        }
    }
    let out = user_git_with(
        source,
        [
            "status",
            "--porcelain",
            "-z",
            "--untracked-files=normal",
            "--ignore-submodules=dirty",
        ],
        &settings,
    )
    .await?;
    Ok(out
        .split('\0')
        .filter(|r| !r.is_empty())
        .map(str::to_string)
        .collect())
}

/// The filter drivers the source's git configuration defines (a
/// `filter.<driver>.clean`, `smudge` or `process`), by name; none when
/// it defines none or cannot be read (then `git status` fails on it too).
async fn filter_drivers(source: &Path) -> Vec<String> {
    let listed = user_git(
        source,
        [
            "config",
            "-z",
            "--name-only",
            "--get-regexp",
            r"^filter\..*\.(clean|smudge|process)$",
        ],
    )
    .await
    .unwrap_or_default();
    let mut drivers: Vec<String> = listed
        .split('\0')
        .filter_map(|key| key.strip_prefix("filter."))
        .filter_map(|rest| rest.rsplit_once('.').map(|(driver, _)| driver.to_string()))
        .collect();
    drivers.sort();
    drivers.dedup();
    drivers
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::workspace::host_git::JOB_GIT_CPU;
    use paddock_test_support::git::{git, repo};

    /// A source with one commit on `main` (test-support's `repo`), and a
    /// bundle of `branch`: one commit on that base, as a job's result is.
    fn source_and_bundle(dir: &Path, branch: &str) -> (PathBuf, PathBuf, String) {
        let source = repo(dir);
        let job = dir.join("job");
        git(dir, &["clone", "-q", source.to_str().unwrap(), "job"]);
        git(&job, &["checkout", "-q", "-b", branch]);
        std::fs::write(job.join("hello.txt"), "hello\n").unwrap();
        git(&job, &["add", "hello.txt"]);
        git(&job, &["commit", "-q", "-m", "the job's"]);
        let tip = head(&job, "HEAD");
        let bundle = dir.join("branch.bundle");
        let range = format!("main..{branch}");
        git(
            &job,
            &["bundle", "create", "-q", bundle.to_str().unwrap(), &range],
        );
        (source, bundle, tip)
    }

    /// Whether the source's tree has changes is read without running any
    /// program of its configuration: a clean filter (required), a filter
    /// process (as Git LFS's is) and an fsmonitor hook, each of which
    /// would leave a marker file, leave none; the changes are still found
    /// (a file changed in place, its size kept, compared as it is on
    /// disk; an untracked file), and a file only touched is not one.
    /// (Before, `git status` ran the clean filter on the files whose
    /// stamps changed, and the fsmonitor hook: the markers were written.)
    #[tokio::test]
    async fn a_sources_status_runs_none_of_its_filters_or_hooks() {
        let dir = tempfile::tempdir().unwrap();
        let source = repo(dir.path());
        let marks = dir.path().join("marks");
        std::fs::create_dir(&marks).unwrap();
        for (name, text) in [
            ("a.txt", "a\n"),
            ("b.dat", "b\n"),
            ("c.txt", "c\n"),
            (".gitattributes", "*.txt filter=marker\n*.dat filter=proc\n"),
        ] {
            std::fs::write(source.join(name), text).unwrap();
        }
        git(&source, &["add", "."]);
        git(&source, &["commit", "-q", "-m", "filtered files"]);
        let hook = dir.path().join("fsmonitor-hook");
        paddock_test_support::script::write_script(
            &hook,
            &format!("#!/bin/sh\ntouch '{}/fsmonitor'\nexit 1\n", marks.display()),
        );
        for (key, value) in [
            (
                "filter.marker.clean",
                format!("sh -c 'touch {}/clean; cat'", marks.display()),
            ),
            ("filter.marker.required", "true".into()),
            (
                "filter.proc.process",
                format!("sh -c 'touch {}/process; exit 1'", marks.display()),
            ),
            ("core.fsmonitor", hook.display().to_string()),
        ] {
            git(&source, &["config", key, &value]);
        }
        // Stamps changed (or racily the index's own): git compares these
        // files' contents, the sizes being the same.
        std::fs::write(source.join("a.txt"), "A\n").unwrap();
        std::fs::write(source.join("b.dat"), "B\n").unwrap();
        std::fs::write(source.join("c.txt"), "c\n").unwrap();
        std::fs::write(source.join("new.txt"), "new\n").unwrap();
        let changes = uncommitted(&source).await.unwrap();
        let marked: Vec<String> = std::fs::read_dir(&marks)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            (changes, marked),
            (
                vec![
                    " M a.txt".to_string(),
                    " M b.dat".to_string(),
                    "?? new.txt".to_string()
                ],
                Vec::<String>::new()
            )
        );
    }

    /// Two jobs of one ticket and attempt whose fetches into one source
    /// start at once (held back by the source's lock, then let go): they
    /// take turns, so one creates the branch and the other is refused as
    /// a rerun is, naming the branch where the first put it. Before, each
    /// saw no branch and git created it twice, the last one's silently
    /// replacing the first's (both fetches `Ok`).
    #[tokio::test(flavor = "multi_thread")]
    async fn two_fetches_of_one_branch_at_once_take_turns() {
        let dir = tempfile::tempdir().unwrap();
        let branch = "paddock/T-1/1";
        let (source, first, _) = source_and_bundle(dir.path(), branch);
        let other = dir.path().join("other");
        git(
            dir.path(),
            &["clone", "-q", source.to_str().unwrap(), "other"],
        );
        git(&other, &["checkout", "-q", "-b", branch]);
        std::fs::write(other.join("other.txt"), "other\n").unwrap();
        git(&other, &["add", "other.txt"]);
        git(&other, &["commit", "-q", "-m", "the other job's"]);
        let second = dir.path().join("other.bundle");
        git(
            &other,
            &[
                "bundle",
                "create",
                "-q",
                second.to_str().unwrap(),
                &format!("main..{branch}"),
            ],
        );
        let jobs = dir.path().join("jobs");
        let held = crate::workspace::source_lock::hold(&jobs, &source)
            .await
            .unwrap();
        let fetches = [("job-1", &first), ("job-2", &second)].map(|(job, bundle)| {
            fetch_soon(
                job.into(),
                source.clone(),
                bundle.clone(),
                branch.to_string(),
                jobs.clone(),
                JOB_GIT_CPU,
            )
        });
        drop(held);
        let [a, b] = fetches;
        let (a, b) = tokio::join!(a, b);
        let at = head(&source, branch);
        let refused = |job: &str| {
            format!(
                "the source {} already has a branch {branch} (at {at}), and Paddock never \
                 rewrites a branch",
                source.display()
            ) + &format!(" [{job}]")
        };
        let outcome = |job: &str, r: Result<(), String>| match r {
            Ok(()) => "fetched".to_string(),
            Err(e) => {
                e.split_once(": ")
                    .map_or(e.clone(), |(head, _)| head.to_string())
                    + &format!(" [{job}]")
            }
        };
        let mut seen = vec![outcome("job-1", a), outcome("job-2", b)];
        seen.sort();
        let mut want = vec!["fetched".to_string()];
        // Whichever came second is refused.
        want.push(match seen.iter().any(|s| s.ends_with("[job-1]")) {
            true => refused("job-1"),
            false => refused("job-2"),
        });
        want.sort();
        assert_eq!(seen, want);
    }

    /// The commit `name` is at in `dir`.
    fn head(dir: &Path, name: &str) -> String {
        git(dir, &["rev-parse", name]).trim().to_string()
    }

    /// No branch yet: fetched; a branch at the base: fast-forwarded.
    #[tokio::test]
    async fn a_new_branch_or_one_the_job_continues_is_fetched() {
        let dir = tempfile::tempdir().unwrap();
        let branch = "paddock/T-1/1";
        let (source, bundle, tip) = source_and_bundle(dir.path(), branch);
        fetch_branch(
            "job-1",
            &source,
            &bundle,
            branch,
            &dir.path().join("jobs"),
            JOB_GIT_CPU,
        )
        .await
        .unwrap();
        assert_eq!(head(&source, branch), tip);

        git(&source, &["branch", "-f", branch, "main"]);
        fetch_branch(
            "job-1",
            &source,
            &bundle,
            branch,
            &dir.path().join("jobs"),
            JOB_GIT_CPU,
        )
        .await
        .unwrap();
        assert_eq!(head(&source, branch), tip);
    }

    /// Started at once, not when first awaited: the branch is in the
    /// source before anyone asks for the outcome, and every waiter gets
    /// the same outcome; a refusal is git's, as [`fetch_branch`] says it.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_fetch_started_soon_runs_before_it_is_awaited() {
        let dir = tempfile::tempdir().unwrap();
        let branch = "paddock/T-1/1";
        let (source, bundle, tip) = source_and_bundle(dir.path(), branch);
        let fetching = fetch_soon(
            "job-1".into(),
            source.clone(),
            bundle.clone(),
            branch.to_string(),
            dir.path().join("jobs"),
            JOB_GIT_CPU,
        );
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while git(&source, &["branch", "--list", branch]).is_empty() {
            assert!(std::time::Instant::now() < deadline, "never fetched");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(
            (
                fetching.clone().await,
                fetching.await,
                head(&source, branch)
            ),
            (Ok(()), Ok(()), tip)
        );

        // The branch moved on in the source: refused, and said why.
        git(&source, &["branch", "-f", branch, "main"]);
        git(&source, &["checkout", "-q", branch]);
        let refused = fetch_soon(
            "job-1".into(),
            source.clone(),
            bundle.clone(),
            branch.to_string(),
            dir.path().join("jobs"),
            JOB_GIT_CPU,
        )
        .await;
        let Err(said) = refused else {
            panic!("a checked-out branch was fetched into");
        };
        assert!(
            said.contains("already has a branch paddock/T-1/1")
                && said.contains("fatal: refusing to fetch into branch"),
            "{said}"
        );
    }

    /// A rerun of the same ticket and attempt: the source's branch holds
    /// another commit. It is left as it was, and the error says where it
    /// is, git's reason and how to take the job's branch.
    #[tokio::test]
    async fn a_branch_the_job_does_not_continue_is_kept_and_said_so() {
        let dir = tempfile::tempdir().unwrap();
        let branch = "paddock/T-1/1";
        let (source, bundle, _) = source_and_bundle(dir.path(), branch);
        git(&source, &["checkout", "-q", "-b", branch]);
        std::fs::write(source.join("other.txt"), "an earlier run's\n").unwrap();
        git(&source, &["add", "other.txt"]);
        git(&source, &["commit", "-q", "-m", "an earlier run"]);
        let earlier = head(&source, "HEAD");
        git(&source, &["checkout", "-q", "main"]);

        let err = fetch_branch(
            "job-1",
            &source,
            &bundle,
            branch,
            &dir.path().join("jobs"),
            JOB_GIT_CPU,
        )
        .await
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "the source {s} already has a branch {branch} (at {earlier}), and Paddock never \
                 rewrites a branch: git said `! [rejected] {branch} -> {branch} \
                 (non-fast-forward)`; to take this job's under another name: `git -C {s} fetch \
                 {b} {branch}:NAME`, or run the ticket's next attempt with `paddock run SPEC \
                 --attempt-after job-1`",
                s = source.display(),
                b = bundle.display(),
            )
        );
        assert_eq!(head(&source, branch), earlier);

        // Checked out, even a branch the job continues is not updated:
        // git's reason names it.
        git(&source, &["branch", "-f", branch, "main"]);
        git(&source, &["checkout", "-q", branch]);
        let err = fetch_branch(
            "job-1",
            &source,
            &bundle,
            branch,
            &dir.path().join("jobs"),
            JOB_GIT_CPU,
        )
        .await
        .unwrap_err();
        let SourceFetchError::Exists { git: said, .. } = &err else {
            panic!("not the branch's refusal: {err}");
        };
        assert!(
            said.contains("fatal: refusing to fetch into branch"),
            "{said}"
        );
    }
}
