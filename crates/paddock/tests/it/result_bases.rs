//! The base a job starts from and the branch its pull request asks to
//! merge into, end to end with the GitHub mock: a tag's short name as
//! `base_ref` refused before the engine runs (a pull request merges into a
//! branch), a local source's remote-tracking branch `origin/X` taken as
//! git reads it, a URL's default branch as the base of a `HEAD` job (its
//! default branch as it is now, after the remote changed it).

use std::path::{Path, PathBuf};

use paddock_protocol::JobStatus;
use paddock_test_support::prelude::*;

use paddock_test_support::git_http::basic;

use super::results::{
    head_based_job, run_with_token, stand_in_job, use_url_source, with_github, TOKEN,
};

/// A job on `repo` (a path, or with `url` the URL source `file://repo`)
/// starting from `base_ref`, proposing to the GitHub mock at `api` with
/// its push to `push_url`; `extra` goes into its `[results]`.
fn job(
    home: &Home,
    repo: &Path,
    (base_ref, url): (&str, bool),
    api: &str,
    push_url: &str,
) -> PathBuf {
    let spec = stand_in_job(home, repo, &finishing("printf 'fixed\\n' > fix.txt"));
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        "base_ref = \"main\"\n",
        &format!("base_ref = \"{base_ref}\"\n"),
    );
    std::fs::write(&spec, text).unwrap();
    if url {
        use_url_source(&spec, repo, &format!("file://{}", repo.display()), None);
    }
    with_github(&spec, api, push_url);
    spec
}

/// The bases of the pull requests the mock was asked to open.
fn bases(mock: &paddock_test_support::github::MockGitHub) -> Vec<String> {
    mock.pulls()
        .iter()
        .map(|pr| pr["base"]["ref"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The parent of the job's branch `paddock/T-1/1` in `repo`, if it is
/// there.
fn parent_of_branch(repo: &Path) -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["rev-parse", "--verify", "--quiet", "paddock/T-1/1^"])
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The bare remote's branches.
fn branches(bare: &Path) -> String {
    git(bare, &["for-each-ref", "--format=%(refname)", "refs/heads"])
}

/// A `base_ref` that is a tag's short name (in the local source, or in a
/// URL source's mirror), with a forge and no `results.base_branch`, ends
/// the job at provisioning, before its engine runs and before anything is
/// pushed, naming the tag and saying to set `results.base_branch`; a name
/// that is both a tag and a branch is the tag, as git reads it (`git help
/// revisions`), and is refused the same way; with `results.base_branch`
/// the tag is a fine base. Before, the job ran, pushed, and asked for a
/// pull request into a "branch" `v1.0`.
#[tokio::test(flavor = "multi_thread")]
async fn a_tag_as_base_ref_is_refused_before_the_engine_runs() {
    let home = Home::new();
    let repo = repo(home.path());
    git(&repo, &["tag", "v1.0"]);
    git(&repo, &["tag", "-a", "-m", "both", "v2"]);
    git(&repo, &["branch", "v2"]);
    let remotes = home.path().join("remotes");
    let bare = bare_remote(&remotes, &repo);
    let mock = paddock_test_support::github::MockGitHub::start("acme", "widgets", TOKEN).await;
    let push = format!("file://{}", bare.display());
    let mut outcomes = Vec::new();
    for (base, url) in [("v1.0", false), ("v2", false), ("v1.0", true)] {
        let spec = job(&home, &repo, (base, url), &mock.url, &push);
        let record = run_with_token(&home, &spec).await;
        outcomes.push((record.status, record.reason, record.engine_exit_code));
    }
    let mirror: Vec<PathBuf> = std::fs::read_dir(home.jobs().join(".mirrors"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "git"))
        .collect();
    let (source, mirror) = (repo.display(), mirror[0].display());
    let refused = |reason: String| (JobStatus::Failed, Some(reason), None);
    assert_eq!(
        (outcomes, mock.requests().len(), branches(&bare)),
        (
            vec![
                refused(format!(
                    "repository.base_ref `v1.0` is the tag refs/tags/v1.0 in the source {source}, \
                     not a branch, and a pull request can only merge into a branch: set \
                     results.base_branch to the branch to merge into"
                )),
                refused(format!(
                    "repository.base_ref `v2` is both the tag refs/tags/v2 and the branch \
                     refs/heads/v2 in the source {source}, and git reads it as the tag (the job's \
                     base was the tag's commit), which a pull request cannot merge into: set \
                     results.base_branch to the branch to merge into (and base_ref = \
                     \"refs/heads/v2\" to start from the branch)"
                )),
                refused(format!(
                    "repository.base_ref `v1.0` is the tag refs/tags/v1.0 in the source's mirror \
                     {mirror}, not a branch, and a pull request can only merge into a branch: set \
                     results.base_branch to the branch to merge into"
                )),
            ],
            0,
            "refs/heads/main\nrefs/heads/v2\n".to_string()
        )
    );
    // With the branch to merge into named, the tag is the job's base.
    let spec = job(&home, &repo, ("v1.0", false), &mock.url, &push);
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("[results]\n", "[results]\nbase_branch = \"main\"\n");
    std::fs::write(&spec, text).unwrap();
    let record = run_with_token(&home, &spec).await;
    assert_eq!(
        (record.status, record.reason, bases(&mock)),
        (JobStatus::Done, None, vec!["main".to_string()])
    );
}

/// A local source whose `origin/feature` is only a remote-tracking branch
/// (`refs/remotes/origin/feature`, what the user last fetched; its own
/// `feature` elsewhere, at `main`): `base_ref = "origin/feature"` starts
/// the job from the remote-tracking branch, as git reads the name in the
/// source, on either workspace layout (the overlay's snapshot, the clone,
/// whose bare copy of the source has no remote-tracking refs); the branch
/// comes back into the source on that base and the pull request asks to
/// merge into `feature`. A name that is only a remote-tracking branch
/// (`release`) is refused before the engine runs, saying to write
/// `origin/release`. Before, `origin/feature` was the source's own
/// `feature` when it had one, and "not a commit" when it had none.
#[tokio::test(flavor = "multi_thread")]
async fn a_local_sources_remote_tracking_branch_is_a_base() {
    let mut outcomes = Vec::new();
    let layouts: Vec<&str> = ["overlay", "clone"]
        .into_iter()
        .filter(|l| *l != "overlay" || paddock_test_support::skip::overlay_available())
        .collect();
    for layout in layouts.iter().copied() {
        let home = Home::new();
        let repo = repo(home.path());
        let main = git(&repo, &["rev-parse", "main"]).trim().to_string();
        git(&repo, &["checkout", "-q", "-b", "fetched"]);
        commit_file(&repo, "upstream.txt", "from origin\n", "upstream's");
        let fetched = git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
        git(&repo, &["checkout", "-q", "main"]);
        git(&repo, &["branch", "-q", "-D", "fetched"]);
        git(
            &repo,
            &["update-ref", "refs/remotes/origin/feature", &fetched],
        );
        git(
            &repo,
            &["update-ref", "refs/remotes/origin/release", &fetched],
        );
        git(&repo, &["branch", "feature", &main]);
        let remotes = home.path().join("remotes");
        bare_remote(&remotes, &repo);
        let server =
            paddock_test_support::git_http::GitHttpServer::start(&remotes, &basic(TOKEN)).await;
        let mock = paddock_test_support::github::MockGitHub::start("acme", "widgets", TOKEN).await;
        let push = format!("{}/widgets.git", server.url);
        let env = [
            ("PADDOCK_TEST_GH_TOKEN", TOKEN),
            ("PADDOCK_WORKSPACE_LAYOUT", layout),
        ];
        let run = |spec: PathBuf| {
            let home = &home;
            async move {
                record(
                    &home
                        .paddock(&["run", "--json", spec.to_str().unwrap()], &env)
                        .await,
                )
            }
        };
        let done = run(job(
            &home,
            &repo,
            ("origin/feature", false),
            &mock.url,
            &push,
        ))
        .await;
        let refused = run(job(&home, &repo, ("release", false), &mock.url, &push)).await;
        outcomes.push((
            layout,
            (done.status, done.reason),
            parent_of_branch(&repo) == Some(fetched.clone()),
            bases(&mock),
            (refused.status, refused.reason, refused.engine_exit_code),
        ));
        let reason = format!(
            "repository {}: base ref `release` is no branch or commit of it, only its \
             remote-tracking branch `origin/release` (the remote's branch as last fetched) is: \
             set base_ref = \"origin/release\" to start from that",
            repo.display()
        );
        assert_eq!(
            outcomes.last().unwrap().4,
            (JobStatus::Failed, Some(reason), None),
            "{layout}"
        );
    }
    let expected = |layout| {
        (
            layout,
            (JobStatus::Done, None),
            true,
            vec!["feature".to_string()],
        )
    };
    assert_eq!(
        outcomes
            .into_iter()
            .map(|(l, d, on_fetched, b, _)| (l, d, on_fetched, b))
            .collect::<Vec<_>>(),
        layouts.into_iter().map(expected).collect::<Vec<_>>()
    );
}

/// A URL source whose remote's default branch is `trunk`, with the
/// default `base_ref` (`HEAD`): the pull request asks to merge into
/// `trunk`, the branch the mirror records as the remote's HEAD (eba69b7
/// was tested with a local source only).
#[tokio::test(flavor = "multi_thread")]
async fn a_url_sources_default_branch_is_the_pull_requests_base() {
    let home = Home::new();
    let repo = repo(home.path());
    git(&repo, &["checkout", "-q", "-b", "trunk"]);
    git(&repo, &["branch", "-q", "-D", "main"]);
    let remotes = home.path().join("remotes");
    bare_remote(&remotes, &repo);
    let server =
        paddock_test_support::git_http::GitHttpServer::start(&remotes, &basic(TOKEN)).await;
    let mock = paddock_test_support::github::MockGitHub::start("acme", "widgets", TOKEN).await;
    let push = format!("{}/widgets.git", server.url);
    let spec = job(&home, &repo, ("HEAD", true), &mock.url, &push);
    let record = run_with_token(&home, &spec).await;
    assert_eq!(
        (record.status, record.reason, bases(&mock)),
        (JobStatus::Done, None, vec!["trunk".to_string()])
    );
}

/// A URL source whose remote changed its default branch after its mirror
/// was made (`main` to `trunk`, as projects rename `master`): a later job
/// of the default `base_ref` (`HEAD`) starts from `trunk` and asks to
/// merge into it, while the remote keeps `main` and once it deleted it.
/// Before, `git fetch` never moved the mirror's `HEAD` from `main`: the
/// second job was based on the old branch and proposed into it, and the
/// third failed at provisioning, `base ref HEAD is not a commit in it`.
#[tokio::test(flavor = "multi_thread")]
async fn a_url_sources_new_default_branch_is_the_base_of_later_jobs() {
    let home = Home::new();
    let repo = repo(home.path());
    let remotes = home.path().join("remotes");
    let bare = bare_remote(&remotes, &repo);
    let server =
        paddock_test_support::git_http::GitHttpServer::start(&remotes, &basic(TOKEN)).await;
    let mock = paddock_test_support::github::MockGitHub::start("acme", "widgets", TOKEN).await;
    let push = format!("{}/widgets.git", server.url);
    let spec = job(&home, &repo, ("HEAD", true), &mock.url, &push);
    let ticket = |id: &str| {
        let text = std::fs::read_to_string(&spec)
            .unwrap()
            .replace("id = \"T-1\"", &format!("id = \"{id}\""));
        let other = spec.with_file_name(format!("{id}.toml"));
        std::fs::write(&other, text).unwrap();
        other
    };
    let first = run_with_token(&home, &spec).await;
    assert_eq!((first.status, first.reason), (JobStatus::Done, None));
    // The remote's default branch becomes `trunk`, a commit ahead of `main`.
    git(&repo, &["checkout", "-q", "-b", "trunk"]);
    commit_file(&repo, "trunk.txt", "on trunk\n", "trunk");
    let trunk = git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    let parent = |branch: &str| git(&bare, &["rev-parse", &format!("{branch}^")]);
    let kept = run_with_token(&home, &ticket("T-2")).await;
    assert_eq!((kept.status, kept.reason), (JobStatus::Done, None));
    assert_eq!(parent("paddock/T-2/1").trim(), trunk);
    git(&repo, &["branch", "-q", "-D", "main"]);
    let deleted = run_with_token(&home, &ticket("T-3")).await;
    assert_eq!((deleted.status, deleted.reason), (JobStatus::Done, None));
    assert_eq!(parent("paddock/T-3/1").trim(), trunk);
    assert_eq!(bases(&mock), ["main", "trunk", "trunk"]);
}

/// A local source with the job's own branch checked out (the user
/// reviewing attempt 1's change) and the spec run again with the default
/// `base_ref` (`HEAD`): without a forge the job builds on that branch, in
/// either layout, and so does a later one once `main` has reached that
/// commit (an overlay then reuses the snapshot made while the branch was
/// checked out); with a forge it is refused before its engine runs, as its
/// pull request would merge its branch into itself. Before, each failed at
/// provisioning with git's `cannot lock ref …: reference already exists`
/// (overlay) or `a branch named … already exists` (clone), the later one
/// with the source on `main`.
#[tokio::test(flavor = "multi_thread")]
async fn the_jobs_own_branch_checked_out_in_the_source_is_a_base() {
    let mut outcomes = Vec::new();
    let layouts: Vec<&str> = ["overlay", "clone"]
        .into_iter()
        .filter(|l| *l != "overlay" || paddock_test_support::skip::overlay_available())
        .collect();
    let reviewed = |repo: &Path| {
        git(repo, &["checkout", "-q", "-b", "paddock/T-1/1"]);
        commit_file(repo, "reviewed.txt", "attempt 1\n", "attempt 1");
        git(repo, &["rev-parse", "HEAD"]).trim().to_string()
    };
    for layout in layouts.iter().copied() {
        let home = Home::new();
        let repo = repo(home.path());
        let commit = reviewed(&repo);
        let spec = head_based_job(&home, &repo, &finishing("printf 'fixed\\n' > fix.txt"));
        let run = || async {
            let out = home
                .paddock(
                    &["run", "--json", spec.to_str().unwrap()],
                    &[("PADDOCK_WORKSPACE_LAYOUT", layout)],
                )
                .await;
            let record = record(&out);
            (out.status.code(), record.status, record.reason)
        };
        let on_branch = run().await;
        git(&repo, &["checkout", "-q", "main"]);
        git(&repo, &["merge", "-q", "--ff-only", "paddock/T-1/1"]);
        git(&repo, &["branch", "-q", "-D", "paddock/T-1/1"]);
        let on_main = run().await;
        outcomes.push((
            layout,
            on_branch,
            on_main,
            parent_of_branch(&repo) == Some(commit),
        ));
    }
    let home = Home::new();
    let repo = repo(home.path());
    reviewed(&repo);
    let remotes = home.path().join("remotes");
    bare_remote(&remotes, &repo);
    let server =
        paddock_test_support::git_http::GitHttpServer::start(&remotes, &basic(TOKEN)).await;
    let mock = paddock_test_support::github::MockGitHub::start("acme", "widgets", TOKEN).await;
    let push = format!("{}/widgets.git", server.url);
    let spec = job(&home, &repo, ("HEAD", false), &mock.url, &push);
    let out = home
        .paddock(
            &["run", "--json", spec.to_str().unwrap()],
            &[("PADDOCK_TEST_GH_TOKEN", TOKEN)],
        )
        .await;
    let forge = record(&out);
    let done = (Some(0), JobStatus::Done, None);
    assert_eq!(
        outcomes,
        layouts
            .iter()
            .map(|l| (*l, done.clone(), done.clone(), true))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        (
            out.status.code(),
            forge.status,
            forge.reason,
            mock.pulls().len()
        ),
        (
            Some(2),
            JobStatus::Failed,
            Some(format!(
                "the pull request would ask to merge the job's branch paddock/T-1/1 into itself \
                 (repository.base_ref is HEAD, and the source {} has it checked out): check out \
                 the branch the change is for, or set repository.base_ref or results.base_branch",
                repo.display()
            )),
            0
        )
    );
}

/// A local source with no branch checked out (a detached HEAD) and the
/// default `base_ref`: with a forge, the job ends at provisioning, before
/// its engine runs, saying to set `results.base_branch` (before, the
/// engine ran and the publish failed); without one, the job is done and
/// its outbox's request names the base as written (before, its publish
/// failed asking for a branch to merge into, though no forge was asked).
#[tokio::test(flavor = "multi_thread")]
async fn a_detached_source_needs_a_base_branch_only_with_a_forge() {
    let home = Home::new();
    let repo = repo(home.path());
    git(&repo, &["checkout", "-q", "--detach"]);
    let remotes = home.path().join("remotes");
    let bare = bare_remote(&remotes, &repo);
    let mock = paddock_test_support::github::MockGitHub::start("acme", "widgets", TOKEN).await;
    let push = format!("file://{}", bare.display());
    let forge = run_with_token(&home, &job(&home, &repo, ("HEAD", false), &mock.url, &push)).await;
    let spec = head_based_job(&home, &repo, &finishing("printf 'fixed\\n' > fix.txt"));
    let outbox = run_with_token(&home, &spec).await;
    let request = std::fs::read_to_string(
        home.data()
            .join("artifacts")
            .join(&outbox.id)
            .join("outbox/pull-request.md"),
    )
    .unwrap_or_default();
    assert_eq!(
        (
            (forge.status, forge.reason, forge.engine_exit_code),
            (outbox.status, outbox.reason),
            request.lines().nth(2).map(str::to_string),
            mock.requests().len(),
        ),
        (
            (
                JobStatus::Failed,
                Some(format!(
                    "the pull request needs a branch to merge into and repository.base_ref is \
                     HEAD, but the source {} has no branch checked out: set results.base_branch",
                    repo.display()
                )),
                None
            ),
            (JobStatus::Done, None),
            Some("base: HEAD".to_string()),
            0
        )
    );
}
