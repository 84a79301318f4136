//! The conclude step of a job's results, in two halves. [`keep_branch`]
//! runs while the workspace exists: the patch's tree committed on the base
//! as `paddock/<ticket>/<attempt>` in Paddock's own git directory and saved
//! as a bundle beside the patch. [`publish`] needs only that bundle, the
//! spec, the record and the events, so `paddock publish JOB` can run it
//! again later: the branch fetched into a local source, pushed and
//! proposed as a pull request on the forge (only for a job that is `done`),
//! the closeout rendered, posted and saved. A failure to push or to reach
//! the forge is the job's failure with the forge's message; the patch and
//! the bundle stay.

use std::path::{Path, PathBuf};

use paddock_protocol::{GitHubCredential, JobRecord, JobSpec, JobStatus, PushCredential};

use super::base_objects;
use super::closeout::{self, CloseoutInput};
use super::forge::{Forge, ForgeBackend, Posted, PullRequest, PullRequestDraft};
use super::github::GitHub;
use super::github_app;
use super::github_app_record;
use super::gitlab_token;
use super::outbox::Outbox;
use super::push::{self, PushAuth};
use super::source::{self, SourceFetching};
use super::token_record::Pass;
use crate::secret::{Secret, SecretKind};
use crate::workspace::{Patch, StartedBundle, Workspace};
use tokio_util::sync::CancellationToken;

/// The branch's bundle, in the job's artifacts directory.
pub use crate::workspace::BUNDLE;
/// The closeout's text, in the job's artifacts directory.
pub const CLOSEOUT: &str = "closeout.md";
/// The outbox directory, in the job's artifacts directory.
pub const OUTBOX: &str = "outbox";
/// How the reason of a job whose publishing failed starts.
pub const PUBLISH_FAILED: &str = "publishing the result failed: ";
/// How long a publish cut short by a cancel still tries to revoke the
/// token minted for it (the forge may be what hung); past it the token's
/// record stays for `paddock publish` and the reaper.
const REVOKE_AFTER_CANCEL: std::time::Duration = std::time::Duration::from_secs(10);

/// The result branch as kept: its commit and bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptBranch {
    pub commit: String,
    pub bundle: PathBuf,
    /// Why the bundle holds the branch's whole history rather than the
    /// job's new objects on the base, when that is news (`None`: only the
    /// new objects, or a source Paddock made for the job, which keeps
    /// nothing after it).
    pub whole: Option<String>,
}

/// The job's patch and its result branch, made together: the work tree
/// staged as a tree ([`Workspace::stage`]), then its diff and the branch
/// ([`keep_branch`]: a commit of that tree and its bundle), which need only
/// the tree, side by side rather than one after the other (the branch's
/// two git processes no longer wait for the diff's). A tree the job did not
/// change (an empty diff) keeps no branch: the bundle made beside the diff
/// is removed. The patch, or why it could not be made; the branch, or why
/// it could not be kept.
pub async fn patch_and_branch(
    ws: &Workspace,
    spec: &JobSpec,
    artifacts: &Path,
) -> Result<(Patch, KeptOrNot), crate::workspace::WorkspaceError> {
    let jobs_root = ws.root.parent().unwrap_or(&ws.root);
    // The diff and the bundle's pack are started while the tree is staged,
    // given the trees and the commit once they exist: their start-ups run
    // beside the staging instead of after it (issue #14).
    let bundle = artifacts.join(BUNDLE);
    let _ = std::fs::remove_file(&bundle);
    let whole = !base_objects::kept_on_host(spec, jobs_root);
    let held = (!whole).then(|| base_objects::holds_base_soon(spec, jobs_root, &ws.base_commit));
    let mut early = None;
    let staged = ws
        .stage_starting(&mut || {
            if early.is_none() {
                early = Some((ws.start_diff(), ws.start_bundle(&bundle, whole)));
            }
        })
        .await?;
    let (diff, pack) = match early {
        Some(started) => started,
        None => (ws.start_diff(), ws.start_bundle(&bundle, whole)),
    };
    let tree = staged.tree.clone();
    let (patch, kept) = tokio::join!(
        ws.diff_staged_with(staged, diff, spec.limits.max_disk_bytes),
        keep_branch(ws, spec, &tree, artifacts, jobs_root, held, Some(pack))
    );
    let patch = match patch {
        Ok(patch) => patch,
        Err(e) => {
            // No patch, no branch: the bundle made beside it goes too.
            let _ = std::fs::remove_file(&bundle);
            return Err(e);
        }
    };
    let kept = match kept {
        Ok(k) if patch.changed_files.is_empty() => std::fs::remove_file(&k.bundle)
            .map(|()| None)
            .map_err(|source| crate::workspace::WorkspaceError::Remove {
                path: k.bundle.clone(),
                source,
            }),
        kept => kept.map(Some),
    };
    Ok((patch, kept))
}

/// The result branch as [`patch_and_branch`] left it: kept, not kept (an
/// empty patch), or why it could not be.
pub type KeptOrNot = Result<Option<KeptBranch>, crate::workspace::WorkspaceError>;

/// Starts fetching the kept branch into the spec's local source
/// ([`source::fetch_soon`]), when the job has one, changed something and
/// ended as it goes there on its own ([`into_source_at_end`]: not
/// cancelled): the fetch (at 10,000 files its connectivity walk is most
/// of the job's publish) then runs beside the patch's saving and the
/// job's events instead of after them (issue #14); [`publish`] awaits it.
pub fn fetch_into_source_soon(
    (job, status): (&str, JobStatus),
    spec: &JobSpec,
    patch: &Patch,
    kept: &KeptOrNot,
    ws: &crate::workspace::Workspace,
) -> Option<SourceFetching> {
    let jobs_root = ws.root.parent().unwrap_or(&ws.root);
    let (Some(source), Ok(Some(kept)), true) =
        (&spec.repository.path, kept, into_source_at_end(status))
    else {
        return None;
    };
    (!patch.changed_files.is_empty()).then(|| {
        source::fetch_soon(
            job.to_owned(),
            source.clone(),
            kept.bundle.clone(),
            spec.branch(),
            jobs_root.to_path_buf(),
            ws.git_cpu(),
        )
    })
}

/// Whether a job that ended `status` has its branch fetched into its
/// local source at its own end: every job but a cancelled one. A job
/// the user stopped (Ctrl-C, SIGTERM, SIGHUP, the API's cancel and the
/// dashboard's Cancel, `paddock serve` shut down) publishes nothing of its own
/// accord: a partial branch in the source surprised its rerun, whose
/// branch of the same name it then was. Its patch and bundle are kept,
/// and `paddock publish JOB` fetches the branch (a publish asked for,
/// [`PublishInput::asked`]). A job stopped by a limit (`held` at its
/// budget, `timed_out`) ended on its own and keeps its branch in the
/// source, as a failed one does.
pub fn into_source_at_end(status: JobStatus) -> bool {
    status != JobStatus::Cancelled
}

/// Commits the tree `tree` on the job's branch and bundles it into
/// `artifacts`: the job's new objects on the base, when the repository
/// that keeps the base on this host (`base_objects.rs`, under `jobs_root`)
/// has it; else the whole history, saying why. The caller decides whether
/// there is a change to keep ([`patch_and_branch`]). `pack`: the bundle
/// started already ([`Workspace::start_bundle`], to `artifacts`' bundle,
/// whole when nothing keeps the base), or `None` to make it here; `held`:
/// whether the base is kept, asked already
/// ([`base_objects::holds_base_soon`]), or `None` to ask here.
pub async fn keep_branch(
    ws: &Workspace,
    spec: &JobSpec,
    tree: &str,
    artifacts: &Path,
    jobs_root: &Path,
    held: Option<tokio::task::JoinHandle<Result<(), String>>>,
    pack: Option<Result<StartedBundle, crate::workspace::WorkspaceError>>,
) -> Result<KeptBranch, crate::workspace::WorkspaceError> {
    let message = format!(
        "{}: {}\n\nPaddock job for ticket {}, attempt {}.\n",
        spec.ticket.id,
        spec.ticket.title.trim(),
        spec.ticket.id,
        spec.attempt()
    );
    let bundle = artifacts.join(BUNDLE);
    // A source Paddock made for the job (a turn's, removed with it)
    // keeps nothing: its one commit's whole history, and no news.
    let kept = base_objects::kept_on_host(spec, jobs_root);
    let made = async {
        let commit = ws.commit_result(tree, &message).await?;
        match pack {
            Some(started) => started?.finish(&commit).await?,
            None => {
                let _ = std::fs::remove_file(&bundle);
                ws.bundle_result(&commit, &bundle, !kept).await?;
            }
        }
        Ok::<_, crate::workspace::WorkspaceError>(commit)
    };
    if !kept {
        return Ok(KeptBranch {
            commit: made.await?,
            bundle,
            whole: None,
        });
    }
    // Whether the host still holds the base is asked (a git process of its
    // own) while the commit and its bundle are made, not after them.
    let asked = async {
        match held {
            Some(asked) => asked
                .await
                .unwrap_or_else(|e| Err(format!("the check of the base stopped: {e}"))),
            None => base_objects::holds_base(spec, jobs_root, &ws.base_commit).await,
        }
    };
    let (commit, held) = tokio::join!(made, asked);
    let commit = commit?;
    let whole = match held {
        Ok(()) => None,
        Err(why) => {
            std::fs::remove_file(&bundle).map_err(|source| {
                crate::workspace::WorkspaceError::Remove {
                    path: bundle.clone(),
                    source,
                }
            })?;
            ws.bundle_result(&commit, &bundle, true).await?;
            Some(format!(
                "the branch's bundle holds its whole history, not only the job's new objects: \
                 the base commit {} is kept nowhere on this host ({why})",
                ws.base_commit
            ))
        }
    };
    Ok(KeptBranch {
        commit,
        bundle,
        whole,
    })
}

/// What publishing did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Published {
    /// The branch was fetched into the local source repository.
    pub in_source: bool,
    pub pull_request: Option<PullRequest>,
    /// Where the closeout was posted or written.
    pub closeout_url: Option<String>,
    /// The closeout's text (also in `artifacts/closeout.md`).
    pub closeout: String,
    /// Non-fatal problems (the local fetch failed, the source was dirty).
    pub warnings: Vec<String>,
    /// Why publishing failed: the job is `failed` with this reason.
    pub failure: Option<String>,
}

/// What a publish says of a local source's uncommitted changes: a fact
/// of the job's run (`uncommitted_record.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceDirty {
    /// The job's own end: how many the source had, read while the job ran
    /// (`None`: read them now). Said as a warning and in the closeout,
    /// and kept in the job's artifacts for later publishes.
    AtEnd(Option<usize>),
    /// A later `paddock publish`: the count the job's end kept, stated in
    /// the closeout again (the source as it is now is not the job's); how
    /// many it has now is read for the publish's warning.
    Kept,
}

/// What [`publish`] works from.
pub struct PublishInput<'a> {
    pub spec: &'a JobSpec,
    /// The job as it ends (status, reason, counts, duration).
    pub record: &'a JobRecord,
    /// What the job's events tell (read a page at a time).
    pub events: &'a super::closeout::EventFacts,
    /// The job's artifacts directory (`<data>/artifacts/<job>`).
    pub artifacts: &'a Path,
    /// The result commit, when there was a change (its bundle is
    /// `artifacts/branch.bundle`).
    pub commit: Option<&'a str>,
    /// The patch's left-out build output.
    pub left_out: &'a [String],
    /// Paddock's jobs directory (a URL source's mirror, which keeps the
    /// base a push borrows, is under it).
    pub jobs_root: &'a Path,
    /// What is said of a local source's uncommitted changes.
    pub source_dirty: SourceDirty,
    /// The earlier attempts' branches the job's is built on and their
    /// bundles (nearest first), for a source that lost them since the job
    /// ran (`source::fetch_branch_after`); empty at the job's own end,
    /// when its bundle was made for what the source held.
    pub earlier_bundles: Vec<(String, PathBuf)>,
    /// The base's holder (the source, a URL's mirror) was seen to keep the
    /// base as this job's branch was made, moments ago: the push borrows
    /// it without asking again. `false` (a later `paddock publish`): the
    /// push checks it, and fetches a URL's base again when it is gone.
    pub base_held: bool,
    /// The branch's fetch into the local source, already under way
    /// ([`fetch_into_source_soon`]); `None`: fetched here.
    pub into_source: Option<SourceFetching>,
    /// The publish was asked for (`paddock publish JOB`), not the job's
    /// own end: a cancelled job's branch goes into its local source only
    /// then ([`into_source_at_end`]).
    pub asked: bool,
    /// Cancelled: the forge's requests and the push (git and what it
    /// started, killed as a process group) are dropped where they are,
    /// the minted token revoked within [`REVOKE_AFTER_CANCEL`], and a
    /// `done` job fails at publishing saying so (`paddock publish`
    /// finishes it).
    pub cancel: &'a CancellationToken,
    /// What fired `cancel` when no one cancelled the job ([`StopCause`]);
    /// `None`: only a cancel fires it.
    pub stopped_by: Option<&'a StopCause>,
    /// The CPU each git of the push may use (`host_git::job_git_cpu`).
    pub git_cpu: std::time::Duration,
}

/// Why a publish was stopped when it was not cancelled (the host
/// profile's grace for publishing ran out, `runner/clock.rs`), set before
/// its cancel is fired: the publish's failure, warnings and closeout name
/// it, not a cancel nobody asked for. Its text completes "stopped when …".
pub type StopCause = std::sync::OnceLock<String>;

/// A publish's cancel and what fired it when that was not a cancel
/// ([`PublishInput::cancel`], [`PublishInput::stopped_by`]).
pub type Stopping<'a> = (&'a CancellationToken, &'a StopCause);

/// Why a publish that `cancel` stopped failed (after [`PUBLISH_FAILED`]):
/// what stopped it when that was not a cancel (`stopped_by`).
fn cancelled_reason(job_id: &str, stopped_by: Option<&StopCause>) -> String {
    let stopped = match stopped_by.and_then(|c| c.get()) {
        Some(cause) => format!("it was stopped when {cause},"),
        None => "it was cancelled (paddock was stopped, or the job cancelled)".to_string(),
    };
    format!(
        "{stopped} before the branch was pushed and proposed; the patch and the branch's bundle \
         are kept, and `paddock publish {job_id}` finishes it"
    )
}

/// What a publish step came to: its own result, or the publish's cancel.
enum Step<T> {
    Done(T),
    Cancelled,
}

/// Runs `step` unless `cancel` comes first (then `step` is dropped where
/// it is).
async fn unless_cancelled<T>(
    cancel: &CancellationToken,
    step: impl std::future::Future<Output = T>,
) -> Step<T> {
    tokio::select! {
        biased;
        () = cancel.cancelled() => Step::Cancelled,
        done = step => Step::Done(done),
    }
}

/// The branch the pull request asks to merge into: `results.base_branch`,
/// else `repository.base_ref` less `origin/`, `refs/heads/` or
/// `refs/remotes/origin/`.
pub fn base_branch(spec: &JobSpec) -> String {
    spec.results.base_branch.clone().unwrap_or_else(|| {
        let base = &spec.repository.base_ref;
        base.strip_prefix("origin/")
            .or_else(|| base.strip_prefix("refs/heads/"))
            .or_else(|| base.strip_prefix("refs/remotes/origin/"))
            .unwrap_or(base)
            .to_string()
    })
}

/// [`pull_request_base`] as the job whose artifacts directory is
/// `artifacts` kept it when it was provisioned (`pinned_base.rs`: a
/// `HEAD` read again later names whatever branch the source is on by
/// then), else read now (a job from before the record). `Err` is the
/// whole reason.
pub async fn job_pull_request_base(
    spec: &JobSpec,
    jobs_root: &Path,
    artifacts: &Path,
) -> Result<String, String> {
    match super::pinned_base::read(artifacts)? {
        Some(base) => Ok(base),
        None => pull_request_base(spec, jobs_root).await,
    }
}

/// The branch a job's pull request asks to merge into, read where the
/// base is kept on this host (by the runner once the job's workspace is
/// provisioned, before its engine starts, and kept for every later look,
/// [`job_pull_request_base`]; at a later look for a job that kept none):
/// `results.base_branch` as set; for a `base_ref` of `HEAD` (the default)
/// the branch it means (`base_objects::head_branch`), never the name
/// `HEAD`, which no forge takes as a base; a `base_ref` written as a short
/// name must be a branch there as git reads the name (a tag's short name,
/// or one that is a tag and a branch, which git reads as the tag, is
/// refused: `base_objects::is_branch`); never the job's own branch (a
/// source with that branch checked out, the user reviewing the job's
/// change, and a `HEAD` base), which no forge takes as the base of its
/// own pull request. `Err` is the whole reason, saying what to set.
pub async fn pull_request_base(spec: &JobSpec, jobs_root: &Path) -> Result<String, String> {
    let base = any_pull_request_base(spec, jobs_root).await?;
    let branch = spec.branch();
    if base != branch {
        return Ok(base);
    }
    let names = match (
        spec.results.base_branch.is_some(),
        spec.repository.base_ref.as_str(),
    ) {
        (true, _) => "results.base_branch names it".to_string(),
        (false, "HEAD") => match &spec.repository.path {
            Some(path) => format!(
                "repository.base_ref is HEAD, and the source {} has it checked out",
                path.display()
            ),
            None => "repository.base_ref is HEAD, and the remote's HEAD names it".to_string(),
        },
        (false, written) => format!("repository.base_ref {written} names it"),
    };
    Err(format!(
        "the pull request would ask to merge the job's branch {branch} into itself ({names}): \
         check out the branch the change is for, or set repository.base_ref or \
         results.base_branch"
    ))
}

/// [`pull_request_base`] before the job's own branch is ruled out.
async fn any_pull_request_base(spec: &JobSpec, jobs_root: &Path) -> Result<String, String> {
    let base = base_branch(spec);
    let written = &spec.repository.base_ref;
    if spec.results.base_branch.is_some() {
        return Ok(base);
    }
    if base == "HEAD" {
        // A URL source's mirror gone since the job (removed, pruned):
        // made again from the URL to read the remote's default branch.
        let mut _again = None;
        if let (None, Some(url)) = (&spec.repository.path, &spec.repository.url) {
            _again = crate::workspace::mirror_again_if_gone(jobs_root, &spec.repository, url)
                .await
                .map_err(|e| {
                    format!(
                        "the pull request needs a branch to merge into and repository.base_ref \
                         is HEAD, which the mirror of {url} names, but the mirror {} is gone and \
                         could not be made again ({e}): `paddock publish` the job again once \
                         {url} can be fetched, or set results.base_branch",
                        crate::workspace::mirror::dir_of(jobs_root, url).display()
                    )
                })?;
        }
        return base_objects::head_branch(spec, jobs_root)
            .await
            .map_err(|why| {
                format!(
                    "the pull request needs a branch to merge into and repository.base_ref is \
                     HEAD, but {why}: set results.base_branch"
                )
            });
    }
    if written.starts_with("origin/") || written.starts_with("refs/") {
        return Ok(base);
    }
    base_objects::is_branch(spec, jobs_root, written)
        .await
        .map(|()| base)
        .map_err(|why| format!("repository.base_ref {why}"))
}

/// The base the outbox's pull request names: [`base_branch`], a `HEAD`
/// read as the branch it names when it names one (never a failure: no
/// forge is asked to merge into it).
async fn outbox_base(spec: &JobSpec, jobs_root: &Path) -> String {
    let base = base_branch(spec);
    if base != "HEAD" || spec.results.base_branch.is_some() {
        return base;
    }
    base_objects::head_branch(spec, jobs_root)
        .await
        .unwrap_or(base)
}

/// Whether the job `record` failed only at publishing its result (it
/// ended `done`, and its publish failed: `paddock publish` finishes it).
pub fn failed_at_publishing(record: &JobRecord) -> bool {
    record.status == JobStatus::Failed
        && record
            .reason
            .as_deref()
            .is_some_and(|r| r.starts_with(PUBLISH_FAILED))
}

/// Whether the job `record` proposed its change (or began to): it made
/// one and ended `done`, or failed only at publishing it; a job that
/// failed, was held, timed out or was cancelled on its own proposes
/// nothing ([`opens_forge`]).
pub fn proposed(record: &JobRecord) -> bool {
    !record.changed_files.is_empty()
        && (record.status == JobStatus::Done || failed_at_publishing(record))
}

/// Whether a job of `spec` opens a pull request (a forge is configured).
pub fn proposes(spec: &JobSpec) -> bool {
    spec.results.github.is_some() || spec.results.gitlab.is_some()
}

/// Whether a publish of a job of `spec` pushes its branch to a remote (a
/// forge's, or `[results.push]`'s), where CI may run it.
fn pushes(spec: &JobSpec) -> bool {
    proposes(spec) || spec.results.push.is_some()
}

/// Whether a publish of a job that ended `status` with the result commit
/// `commit` opens its forge: the outbox (a directory, no credential) for
/// every job; GitHub and GitLab only for a `done` job's change, all that is
/// sent there (its push, its pull request and the closeout on it). A job
/// that did not end `done` (failed, held, timed out, cancelled), or
/// changed nothing, has no pull request for its closeout: no token is
/// minted for it and no request sent (before, a GitHub App's installation
/// token or a GitLab project access token was minted and revoked to post
/// nothing).
fn opens_forge(spec: &JobSpec, status: JobStatus, commit: Option<&str>) -> bool {
    !proposes(spec) || (commit.is_some() && status == JobStatus::Done)
}

/// The forge of a job for one publish (or one read of its review): the
/// backend, the token its push uses, and the token minted for this session
/// (a GitHub App's installation token, a GitLab project access token),
/// which [`ForgeSession::close`] then revokes.
pub(super) struct ForgeSession {
    pub forge: ForgeBackend,
    pub token: Option<Secret>,
    minted: Minted,
}

/// A token minted for one session.
enum Minted {
    /// The spec's own token: nothing to revoke.
    None,
    /// The GitHub App's installation token the GitHub client uses, and
    /// its record.
    GitHubApp(github_app_record::Recorded),
    GitLab(gitlab_token::Issued),
}

impl ForgeSession {
    /// Ends the session, revoking a minted token; `Some(warning)` when the
    /// revocation failed.
    pub(super) async fn close(self) -> Option<String> {
        match (&self.forge, self.minted) {
            (ForgeBackend::GitHub(gh), Minted::GitHubApp(recorded)) => github_app::close(gh, recorded).await.err().map(|e| {
                format!("the job's installation token was not revoked (GitHub expires it within the hour; `paddock gc`, the next start of `paddock run` or `paddock serve`, and `paddock publish` try again): {e}")
            }),
            (_, Minted::GitLab(issued)) => gitlab_token::revoke(issued).await.err().map(|e| {
                format!("the job's project access token was not revoked (GitLab expires it tomorrow; `paddock gc`, the next start of `paddock run` or `paddock serve`, and `paddock publish` try again): {e}")
            }),
            (_, Minted::GitHubApp(_) | Minted::None) => None,
        }
    }
}

/// The job id an artifacts directory is named after.
fn job_id_of(artifacts: &Path) -> String {
    artifacts
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Whether a record of a minted token (GitLab's, a GitHub App's) is left
/// in the job's `artifacts`: a revocation that failed or did not finish
/// in time (a cancel's 10 s). The process that published then leaves the
/// job's lease file in place instead of deleting it, so the reaper's next
/// pass (`paddock gc`, the start of `paddock run` or `paddock serve`)
/// visits the job and revokes what the records hold.
pub fn tokens_left(artifacts: &Path) -> bool {
    !github_app_record::leftover_records(artifacts).is_empty()
        || !gitlab_token::leftover_records(artifacts).is_empty()
}

/// Revokes the tokens a killed publish (or review read) of the job
/// `job_id` left, as its records in `artifacts` name them: GitLab project
/// access tokens through its stored spec's `[results.gitlab]`, GitHub App
/// installation tokens at its `[results.github]` API root (the reaper,
/// `paddock publish`, a dispose); the names revoked and what failed
/// (records stay for a later pass). Nothing is read when there is no
/// record.
pub async fn revoke_leftover_tokens(
    store: &dyn crate::store::Store,
    job_id: &str,
    artifacts: &Path,
) -> Pass {
    let gitlab = !gitlab_token::leftover_records(artifacts).is_empty();
    let github = !github_app_record::leftover_records(artifacts).is_empty();
    if !gitlab && !github {
        return Pass::default();
    }
    let failed = |e: String| Pass::failed(format!("revoke the job's forge tokens: {e}"));
    let text = match store.job_spec(job_id).await {
        Ok(text) => text.unwrap_or_default(),
        Err(e) => return failed(e.to_string()),
    };
    // A spec stored under older rules still names the forge its tokens
    // are revoked at.
    let spec = match JobSpec::from_stored_for_cleanup(&text, Path::new("the store")) {
        Ok(spec) => spec,
        Err(e) => return failed(e.to_string()),
    };
    let mut pass = Pass::default();
    if gitlab {
        pass.extend(match &spec.results.gitlab {
            None => failed("its spec has no [results.gitlab]".into()),
            Some(gl) => {
                gitlab_token::revoke_leftovers(
                    &gl.api_url,
                    &gl.project,
                    || {
                        Secret::resolve(SecretKind::GitLabToken, &gl.token)
                            .map_err(|e| format!("results.gitlab.token: {e}"))
                    },
                    job_id,
                    artifacts,
                )
                .await
            }
        });
    }
    if github {
        pass.extend(match &spec.results.github {
            None => failed("its spec has no [results.github]".into()),
            Some(gh) => match gh.owner_and_name() {
                Err(e) => failed(format!("results.github.repository: {e}")),
                Ok((owner, name)) => {
                    github_app_record::revoke_leftovers(&gh.api_url, owner, name, artifacts).await
                }
            },
        });
    }
    pass
}

/// Why a forge session did not open ([`open_forge`]): what to say, and
/// whether the forge did not answer (`ForgeError::unavailable`: a token's
/// mint that got no answer, a 5xx, a rate limit) rather than refused or
/// was misconfigured.
#[derive(Debug, Clone)]
pub(super) struct NotOpened {
    pub message: String,
    pub unavailable: bool,
}

impl NotOpened {
    /// A session the spec or the host's secrets keep from opening.
    fn said(message: String) -> NotOpened {
        NotOpened {
            message,
            unavailable: false,
        }
    }
}

impl From<super::forge::ForgeError> for NotOpened {
    fn from(e: super::forge::ForgeError) -> NotOpened {
        NotOpened {
            unavailable: e.unavailable(),
            message: e.to_string(),
        }
    }
}

impl std::fmt::Display for NotOpened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Opens the forge of `spec`: GitHub with its token or a token minted for
/// this job by its App, GitLab with a project access token its host-held
/// token mints for this job, else the outbox.
pub(super) async fn open_forge(
    spec: &JobSpec,
    artifacts: &Path,
) -> Result<ForgeSession, NotOpened> {
    if let Some(gl) = &spec.results.gitlab {
        gl.check_project()
            .map_err(|e| NotOpened::said(format!("results.gitlab.project: {e}")))?;
        let host = Secret::resolve(SecretKind::GitLabToken, &gl.token)
            .map_err(|e| NotOpened::said(format!("results.gitlab.token: {e}")))?;
        let today = time::OffsetDateTime::now_utc().date();
        let (client, token, issued) = gitlab_token::mint(
            &gl.api_url,
            &gl.project,
            host,
            &job_id_of(artifacts),
            artifacts,
            today,
        )
        .await
        .map_err(NotOpened::from)?;
        let client = client.with_closeout_record(artifacts.join(super::gitlab_closeout::RECORD));
        return Ok(ForgeSession {
            forge: ForgeBackend::GitLab(client),
            token: Some(token),
            minted: Minted::GitLab(issued),
        });
    }
    let Some(gh) = &spec.results.github else {
        return Ok(ForgeSession {
            forge: ForgeBackend::Outbox(Outbox {
                dir: artifacts.join(OUTBOX),
            }),
            token: None,
            minted: Minted::None,
        });
    };
    let (owner, name) = gh
        .owner_and_name()
        .map_err(|e| NotOpened::said(format!("results.github.repository: {e}")))?;
    let record = artifacts.join(super::github_closeout::RECORD);
    match gh
        .credential()
        .map_err(|e| NotOpened::said(format!("results.github: {e}")))?
    {
        GitHubCredential::Token(reference) => {
            let token = Secret::resolve(SecretKind::GitHubToken, reference)
                .map_err(|e| NotOpened::said(format!("results.github.token: {e}")))?;
            let client = GitHub::new(&gh.api_url, owner, name, token.clone())
                .map_err(NotOpened::from)?
                .with_closeout_record(record);
            Ok(ForgeSession {
                forge: ForgeBackend::GitHub(client),
                token: Some(token),
                minted: Minted::None,
            })
        }
        GitHubCredential::App(app) => {
            let key = Secret::resolve_multiline(SecretKind::GitHubAppKey, &app.private_key)
                .map_err(|e| NotOpened::said(format!("results.github.app.private_key: {e}")))?;
            let now = time::OffsetDateTime::now_utc();
            let (client, token, recorded) =
                github_app::mint(&gh.api_url, owner, name, app, &key, now, artifacts)
                    .await
                    .map_err(NotOpened::from)?;
            Ok(ForgeSession {
                forge: ForgeBackend::GitHub(client.with_closeout_record(record)),
                token: Some(token),
                minted: Minted::GitHubApp(recorded),
            })
        }
    }
}

/// Pushes `record`'s branch of `bundle` where the spec says: `[results.push]` with
/// its token or deploy key, else the GitHub (GitLab) forge's push URL with
/// the forge's token as `x-access-token` (`oauth2`); neither: nowhere (the
/// outbox).
async fn push_result(
    input: &PublishInput<'_>,
    bundle: &Path,
    forge_token: Option<&Secret>,
) -> Result<(), String> {
    let (spec, scratch, jobs_root) = (input.spec, input.artifacts, input.jobs_root);
    let (job, branch) = (input.record.id.as_str(), input.record.branch.as_str());
    let base_held = input.base_held;
    // Nowhere to push (the outbox): nothing to read or borrow, no
    // process started for it (the source's object directory was asked
    // for every local job).
    if !pushes(spec) {
        return Ok(());
    }
    // A bundle of the new objects only: the push borrows the base's.
    let thin = base_objects::prerequisites(bundle)
        .map_err(|e| format!("the branch's bundle {}: {e}", bundle.display()))?;
    let mut borrowed = match thin.is_empty() {
        true => None,
        false => base_objects::objects_dir(spec, jobs_root).await,
    };
    // A URL source's mirror gone since the job (pruned, removed): made
    // again from the URL, held while the push borrows it; one that is
    // there but lacks the base (made again after the remote was
    // rewritten): fetched again, the base asked for by name. Either fails
    // naming the base, the mirror and the URL when the remote lost it too.
    let mut _refetched = None;
    if let (Some(base), None, Some(url)) =
        (thin.first(), &spec.repository.path, &spec.repository.url)
    {
        let gone = borrowed.is_none();
        if gone
            || (!base_held
                && base_objects::holds_base(spec, jobs_root, base)
                    .await
                    .is_err())
        {
            let mirror =
                crate::workspace::refetch_mirror_for(jobs_root, &spec.repository, url, base)
                    .await
                    .map_err(|e| match gone {
                        true => {
                            format!("the base's mirror is gone and could not be made again: {e}")
                        }
                        false => format!("the base's mirror lacks it: {e}"),
                    })?;
            borrowed = Some(mirror.objects());
            _refetched = Some(mirror);
        }
    }
    let from = push::Bundle {
        job,
        bundle,
        base: thin.first().map(String::as_str),
        borrow: borrowed.as_deref(),
        git_cpu: input.git_cpu,
    };
    let Some(target) = &spec.results.push else {
        if let Some(gh) = &spec.results.github {
            let auth = forge_token.map_or(PushAuth::None, PushAuth::Token);
            return push::push_branch(&from, branch, &gh.push_url(), auth, scratch)
                .await
                .map_err(|e| e.to_string());
        }
        if let Some(gl) = &spec.results.gitlab {
            let url = gl
                .push_url()
                .map_err(|e| format!("results.gitlab.push_url: {e}"))?;
            let auth = forge_token.map_or(PushAuth::None, PushAuth::OAuth2);
            return push::push_branch(&from, branch, &url, auth, scratch)
                .await
                .map_err(|e| e.to_string());
        }
        return Ok(());
    };
    let secret;
    let auth = match target
        .credential()
        .map_err(|e| format!("results.push: {e}"))?
    {
        PushCredential::None => PushAuth::None,
        PushCredential::Token(reference) => {
            secret = Secret::resolve(SecretKind::PushToken, reference)
                .map_err(|e| format!("results.push.token: {e}"))?;
            PushAuth::Token(&secret)
        }
        PushCredential::SshKey { key, known_hosts } => {
            secret = Secret::resolve_multiline(SecretKind::PushSshKey, key)
                .map_err(|e| format!("results.push.ssh_key: {e}"))?;
            PushAuth::SshKey {
                key: &secret,
                known_hosts,
            }
        }
    };
    push::push_branch(&from, branch, &target.url, auth, scratch)
        .await
        .map_err(|e| e.to_string())
}

/// Publishes the job's result (see the module comment). Never fails: what
/// went wrong is in `warnings` or `failure`.
pub async fn publish(input: &PublishInput<'_>) -> Published {
    let spec = input.spec;
    let mut out = Published::default();
    let bundle = input.artifacts.join(BUNDLE);
    let mut source_dirty = 0;
    // 1. A local source gets the branch, whatever the job's status, but
    // a cancelled job's only when a publish of it is asked for.
    let into_source = input.asked || into_source_at_end(input.record.status);
    if let (Some(_), Some(_), false) = (&spec.repository.path, input.commit, into_source) {
        out.warnings.push(format!(
            "the job was cancelled: its branch {} was not fetched into the source (it is kept \
             in {}; `paddock publish {}` fetches it there)",
            input.record.branch,
            bundle.display(),
            input.record.id
        ));
    }
    if let (Some(path), Some(_), true) = (&spec.repository.path, input.commit, into_source) {
        let fetched = match &input.into_source {
            Some(fetching) => fetching.clone().await,
            None => source::fetch_branch_after(
                &input.record.id,
                path,
                (&bundle, &input.record.branch),
                input.jobs_root,
                &input.earlier_bundles,
                input.git_cpu,
            )
            .await
            .map_err(|e| e.to_string()),
        };
        match fetched {
            Ok(()) => out.in_source = true,
            Err(e) => out.warnings.push(format!(
                "the branch {} was not fetched into the source (it is kept in {}): {e}",
                input.record.branch,
                bundle.display()
            )),
        }
    }
    // Said in the closeout too: it is what a reviewer reads.
    let in_closeout = out.warnings.clone();
    // The job ran on the committed base whether or not it changed
    // anything: a job that found nothing to do may have missed what the
    // source holds uncommitted, so that is said for it too.
    if let Some(path) = &spec.repository.path {
        let now = match &input.source_dirty {
            SourceDirty::AtEnd(Some(count)) => *count,
            SourceDirty::AtEnd(None) | SourceDirty::Kept => {
                source::uncommitted(path).await.map_or(0, |d| d.len())
            }
        };
        // The closeout's count is the job's end's: kept then, read back
        // by a later publish (a job from before the record: the count
        // now, as before).
        source_dirty = match &input.source_dirty {
            SourceDirty::AtEnd(_) => {
                if let Err(e) = super::uncommitted_record::write(input.artifacts, now) {
                    out.warnings.push(e);
                }
                now
            }
            SourceDirty::Kept => match super::uncommitted_record::read(input.artifacts) {
                Ok(kept) => kept.unwrap_or(now),
                Err(e) => {
                    out.warnings.push(e);
                    now
                }
            },
        };
        if now > 0 {
            out.warnings.push(format!(
                "the source repository has {now} uncommitted change(s); the job ran on the \
                 committed base"
            ));
        }
    }
    let mut links = Vec::new();
    if out.in_source {
        links.push((
            "branch".to_string(),
            format!(
                "{} in the source repository",
                closeout::code(&input.record.branch)
            ),
        ));
    }
    // A `HEAD`-based job's commit is on the branch the source had
    // checked out when it started (kept then), not on `HEAD`.
    let started_on = match spec.repository.base_ref.as_str() {
        "HEAD" => super::start_branch::read(input.artifacts).unwrap_or_else(|e| {
            out.warnings.push(e);
            None
        }),
        _ => None,
    };
    let render = |record: &JobRecord, links: &[(String, String)]| {
        closeout::render_facts(
            record,
            input.events,
            &CloseoutInput {
                ticket_title: &spec.ticket.title,
                ticket_url: spec.results.ticket_url.as_deref(),
                commit: input.commit,
                left_out: input.left_out,
                source_dirty,
                touch_only: &spec.ticket.touch_only,
                links: links.to_vec(),
                publish_warnings: &in_closeout,
                started_on: started_on.as_deref(),
            },
        )
        .unwrap_or_else(|e| e.to_string())
    };
    // 2. The forge: a pull request for a finished change, the closeout;
    // the forge's requests and the push dropped on a cancel.
    let cancel = input.cancel;
    // A cancel while the forge is opened (a token being minted) lets the
    // mint's answer come, for up to REVOKE_AFTER_CANCEL, so that a token
    // the forge made is recorded and revoked below, not left unknown
    // (GitHub lists no installation tokens: one whose answer was dropped
    // lives its hour). A publish cancelled before it began mints nothing.
    let opened = opens_forge(spec, input.record.status, input.commit);
    // A change to a CI definition is not pushed (the forge would run it
    // at the push) unless the spec allows it: refused before the forge
    // is opened, so no token is minted for it.
    let ci_refused = match (pushes(spec), input.commit, input.record.status) {
        (true, Some(_), JobStatus::Done) if !spec.results.allow_ci_changes => {
            super::ci_definitions::refusal(&input.record.id, &input.record.changed_files)
        }
        _ => None,
    };
    let session = match (opened && ci_refused.is_none(), cancel.is_cancelled()) {
        (false, _) | (_, true) => None,
        (true, false) => {
            let opening = open_forge(spec, input.artifacts);
            tokio::pin!(opening);
            tokio::select! {
                biased;
                () = cancel.cancelled() => {
                    tokio::time::timeout(REVOKE_AFTER_CANCEL, &mut opening).await.ok()
                }
                session = &mut opening => Some(session),
            }
        }
    };
    let mut ended_note = None;
    let proposed = async {
        // Nothing for the forge: the closeout is the record's and the
        // artifacts' alone.
        if !opened {
            return Ok((None, Posted::default(), render(input.record, &links)));
        }
        if let Some(why) = &ci_refused {
            return Err(Some(why.clone()));
        }
        let Some(session) = &session else {
            return Err(None);
        };
        let ForgeSession { forge, token, .. } =
            session.as_ref().map_err(|e| Some(e.message.clone()))?;
        let mut pull_request = None;
        let mut links = links.clone();
        if let (Some(_), JobStatus::Done) = (input.commit, input.record.status) {
            let base = match proposes(spec) {
                true => job_pull_request_base(spec, input.jobs_root, input.artifacts)
                    .await
                    .map_err(Some)?,
                // The outbox's request is for a person to read: HEAD's
                // branch when it names one, else the base as written.
                false => outbox_base(spec, input.jobs_root).await,
            };
            // The branch's pull request, asked before the push: one
            // merged or closed on the forge is left as it is, and its
            // branch is not pushed again (the forge, or a reviewer, may
            // have deleted it after the merge: a push would re-create it).
            let found = forge
                .find_pull_request(&input.record.branch, &base)
                .await
                .map_err(|e| Some(e.to_string()))?;
            let pr = match found {
                Some(ended) if ended.ended.is_some() => ended,
                found => {
                    push_result(input, &bundle, token.as_ref())
                        .await
                        .map_err(Some)?;
                    // A plain git remote is named, as a forge's pull
                    // request is: the closeout says where the branch went.
                    if let Some(target) = &spec.results.push {
                        links.push((
                            "branch".to_string(),
                            format!(
                                "{} pushed to {}",
                                closeout::code(&input.record.branch),
                                closeout::code(&target.url)
                            ),
                        ));
                    }
                    let closeout = render(input.record, &links);
                    let draft = PullRequestDraft {
                        head: input.record.branch.clone(),
                        base,
                        title: format!("{}: {}", spec.ticket.id, spec.ticket.title.trim()),
                        body: closeout::pull_request_body(
                            &closeout,
                            spec.results.ticket_url.as_deref(),
                        ),
                        draft: spec.results.draft,
                        labels: spec.results.labels.clone(),
                    };
                    forge
                        .propose(&draft, found)
                        .await
                        .map_err(|e| Some(e.to_string()))?
                }
            };
            if let Some(how) = &pr.ended {
                ended_note = Some(ended_pull_request(&pr.page(), how, input.record));
            }
            pull_request = Some(pr);
        }
        if let Some(pr) = &pull_request {
            let label = match &pr.ended {
                None => "pull request".to_string(),
                Some(how) => format!(
                    "pull request ({how} on the forge before this publish: left as it is, the \
                     branch not pushed again)"
                ),
            };
            links.push((label, pr.page()));
        }
        let closeout = render(input.record, &links);
        let posted = forge
            .post_closeout(pull_request.as_ref(), &closeout)
            .await
            .map_err(|e| Some(e.to_string()))?;
        Ok::<_, Option<String>>((pull_request, posted, closeout))
    };
    // `Err(None)`: cancelled. Nothing sent to the forge: nothing a
    // cancel cuts short.
    let proposed = match opened {
        false => proposed.await,
        true => match unless_cancelled(cancel, proposed).await {
            Step::Done(proposed) => proposed,
            Step::Cancelled => Err(None),
        },
    };
    if let Some(Ok(session)) = session {
        let closing = session.close();
        out.warnings.extend(match cancel.is_cancelled() {
            false => closing.await,
            // The forge may be what hung: bounded, the record kept past it.
            true => tokio::time::timeout(REVOKE_AFTER_CANCEL, closing)
                .await
                .unwrap_or_else(|_| {
                    Some(format!(
                        "the token minted for the job was not revoked within {} s of the cancel \
                         (its record in {} is kept: `paddock gc`, the next start of `paddock run` \
                         or `paddock serve`, and `paddock publish` revoke it, and the forge \
                         expires it)",
                        REVOKE_AFTER_CANCEL.as_secs(),
                        input.artifacts.display()
                    ))
                }),
        });
    }
    out.warnings.extend(ended_note);
    match proposed {
        Ok((pr, posted, closeout)) => {
            // The forge's addresses not kept (`forge_url.rs`), said once.
            let refused = pr.as_ref().and_then(|pr| pr.refused_url.clone());
            out.warnings
                .extend(refused.into_iter().chain(posted.refused_url));
            out.pull_request = pr;
            out.closeout_url = posted.url;
            out.warnings.extend(posted.warning);
            out.closeout = closeout;
        }
        // A job that did not end `done` proposes nothing and opens no
        // forge but the outbox (`opens_forge`): a cancel or a failure cut
        // short only the closeout's writing there, which `paddock
        // publish` does again. Its own status and reason stay: made
        // "failed at publishing", the next `paddock publish` would have
        // finished it as `done`.
        Err(message) if input.record.status != JobStatus::Done => {
            out.warnings.push(match message {
                None => format!(
                    "publishing was {} before the closeout was posted (it is saved in the job's \
                     artifacts; `paddock publish {}` posts it)",
                    match input.stopped_by.and_then(|c| c.get()) {
                        Some(cause) => format!("stopped when {cause},"),
                        None => "cancelled".to_string(),
                    },
                    input.record.id
                ),
                Some(message) => format!(
                    "{PUBLISH_FAILED}{message} (the job stays {}; the closeout is saved in the \
                     job's artifacts, and `paddock publish {}` posts it)",
                    input.record.status.as_str(),
                    input.record.id
                ),
            });
            out.closeout = render(input.record, &links);
        }
        Err(message) => {
            let message =
                message.unwrap_or_else(|| cancelled_reason(&input.record.id, input.stopped_by));
            let mut failed = input.record.clone();
            failed.status = JobStatus::Failed;
            failed.reason = Some(format!("{PUBLISH_FAILED}{message}"));
            out.closeout = render(&failed, &links);
            out.failure = failed.reason;
        }
    }
    let path = input.artifacts.join(CLOSEOUT);
    // Never through a link planted there (`own_file.rs`).
    if let Err(e) = crate::own_file::write(&path, out.closeout.as_bytes()) {
        out.warnings.push(format!(
            "cannot save the closeout to {}: {e}",
            path.display()
        ));
    }
    out
}

/// The warning of a publish that found the branch's pull request `url`
/// ended (`how`: merged, closed, locked) on the forge.
fn ended_pull_request(url: &str, how: &str, record: &JobRecord) -> String {
    format!(
        "the pull request {url} for {} was {how} on the forge: it is left as it is (not \
         reopened, updated or opened again) and the branch is not pushed again (the forge or a \
         reviewer may have deleted it); the closeout goes on it. A next attempt is `paddock run \
         SPEC --attempt-after {}`",
        record.branch, record.id
    )
}

/// The job's conclude step (the runner's one call): the branch as
/// [`patch_and_branch`] kept it, the events read back from the store, the
/// result published.
/// `source_dirty`: a local source's uncommitted changes, read while the
/// job ran (`None`: read when publishing); `cancel`: the publish's cancel
/// ([`PublishInput::cancel`]) and what fired it when that was not a
/// cancel ([`PublishInput::stopped_by`]). `workspace_done` is called once the branch
/// is kept, before publishing: nothing reads the workspace after it, so
/// the runner removes it then, beside the publish.
pub async fn conclude_job(
    ws: &Workspace,
    spec: &JobSpec,
    (patch, kept): (&Patch, KeptOrNot),
    record: &JobRecord,
    store: &dyn crate::store::Store,
    artifacts: &Path,
    (source_dirty, into_source, cancel, workspace_done): (
        Option<Vec<String>>,
        Option<SourceFetching>,
        Stopping<'_>,
        impl FnOnce(),
    ),
) -> Published {
    let (cancel, stopped_by) = cancel;
    let mut warnings = Vec::new();
    // The ticket's scope, in the job's events as well as its closeout.
    warnings.extend(super::scope::warning(
        &spec.ticket.touch_only,
        &patch.changed_files,
    ));
    let jobs_root = ws.root.parent().unwrap_or(&ws.root);
    let kept = match kept {
        Ok(kept) => {
            warnings.extend(kept.as_ref().and_then(|k| k.whole.clone()));
            kept
        }
        Err(e) => {
            warnings.push(format!("the result branch was not kept: {e}"));
            None
        }
    };
    workspace_done();
    let events = match super::closeout::EventFacts::read(store, &record.id).await {
        Ok(events) => events,
        Err(e) => {
            warnings.push(format!("the closeout lacks the job's events: {e}"));
            super::closeout::EventFacts::default()
        }
    };
    let mut published = publish(&PublishInput {
        spec,
        record,
        events: &events,
        artifacts,
        commit: kept.as_ref().map(|k| k.commit.as_str()),
        left_out: &patch.left_out,
        jobs_root,
        source_dirty: SourceDirty::AtEnd(source_dirty.map(|d| d.len())),
        earlier_bundles: Vec::new(),
        // `keep_branch` asked while it made the branch: a bundle of the
        // job's new objects only means the holder kept the base.
        base_held: kept.as_ref().is_some_and(|k| k.whole.is_none()),
        into_source,
        asked: false,
        cancel,
        stopped_by: Some(stopped_by),
        git_cpu: ws.git_cpu(),
    })
    .await;
    warnings.append(&mut published.warnings);
    published.warnings = warnings;
    published
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A publish stopped by its cancel before the forge, for a job that
    /// was to end `done` and for one already failed: what it says of the
    /// stop, with no cause (a cancel) and with one (the host profile's
    /// grace ran out). Before, both said "it was cancelled (paddock was
    /// stopped, or the job cancelled)", though nobody had cancelled it.
    #[tokio::test]
    async fn a_publish_stopped_by_its_grace_names_the_grace_not_a_cancel() {
        let dir = tempfile::tempdir().unwrap();
        let text = "isolation = \"process\"\n\
             [ticket]\nid = \"T-1\"\ntitle = \"t\"\nproject = \"p\"\n\
             [repository]\nurl = \"https://example.invalid/r.git\"\nbase_ref = \"main\"\n\
             [engine]\nkind = \"codex\"\nmodel = \"gpt-5.5\"\n\
             [upstream]\nprovider = \"scripted\"\nscenario = \"s.toml\"\nallow_unpriced = true\n";
        let spec = JobSpec::from_toml(text, &dir.path().join("job.toml")).unwrap();
        let cancel = CancellationToken::new();
        cancel.cancel();
        let grace = StopCause::new();
        grace.set("its 10 s grace ran out".to_string()).unwrap();
        let mut got = Vec::new();
        for status in [JobStatus::Done, JobStatus::Failed] {
            for stopped_by in [None, Some(&grace)] {
                let mut record = crate::store::fixtures::job("job-1", 0);
                record.status = status;
                let published = publish(&PublishInput {
                    spec: &spec,
                    record: &record,
                    events: &crate::results::closeout::EventFacts::default(),
                    artifacts: dir.path(),
                    commit: Some("0123456789abcdef0123456789abcdef01234567"),
                    left_out: &[],
                    jobs_root: dir.path(),
                    source_dirty: SourceDirty::AtEnd(None),
                    earlier_bundles: Vec::new(),
                    base_held: true,
                    into_source: None,
                    asked: false,
                    cancel: &cancel,
                    stopped_by,
                    git_cpu: crate::workspace::host_git::JOB_GIT_CPU,
                })
                .await;
                got.push((published.failure, published.warnings));
            }
        }
        let kept = "before the branch was pushed and proposed; the patch and the branch's bundle \
                    are kept, and `paddock publish job-1` finishes it";
        let posts = "before the closeout was posted (it is saved in the job's artifacts; \
                     `paddock publish job-1` posts it)";
        assert_eq!(
            got,
            [
                (
                    Some(format!(
                        "{PUBLISH_FAILED}it was cancelled (paddock was stopped, or the job \
                         cancelled) {kept}"
                    )),
                    vec![]
                ),
                (
                    Some(format!(
                        "{PUBLISH_FAILED}it was stopped when its 10 s grace ran out, {kept}"
                    )),
                    vec![]
                ),
                (None, vec![format!("publishing was cancelled {posts}")]),
                (
                    None,
                    vec![format!(
                        "publishing was stopped when its 10 s grace ran out, {posts}"
                    )]
                ),
            ]
        );
    }
}
