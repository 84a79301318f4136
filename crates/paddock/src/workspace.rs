//! The per-job workspace: a fresh directory with `work/` (the repository at
//! the base ref on a new branch, hooks disabled, with its own copy of every
//! object), `home/` (HOME, XDG dirs, the engines' config dirs), `tmp/` and
//! `meta/` (Paddock's own files, never in the job's view on the sandbox
//! rung, among them `meta/git`: Paddock's own git directory with the base
//! commit). The job's patch is the diff of `work/`'s content against the
//! base, new files included, Paddock's generated files excluded, computed in
//! `meta/git` without ever reading `work/.git` or obeying anything the job
//! wrote (`host_git.rs`, `final_tree.rs`). The directory is removed at the
//! end unless the job is kept.

pub(crate) mod beneath;
mod bundle_source;
mod check_ignore;
pub(crate) mod checkout_size;
mod commit_object;
pub mod disk_usage;
pub mod disk_walk;
mod final_tree;
pub(crate) mod host_git;
mod ignore_shadow;
pub mod inline_source;
mod job_branch;
mod junk;
pub mod keep;
pub mod lease;
mod loose_object;
pub(crate) mod mirror;
mod mirror_names;
mod mirror_state;
mod new_objects;
pub mod overlay;
mod prior_branch;
mod provision_after;
pub mod prune;
mod raw_diff;
mod remote_config;
pub mod remove;
pub(crate) mod reopen_tree;
mod result_branch;
mod sealed_stage;
pub(crate) mod snapshot;
pub mod source_lock;
pub mod trash;
mod upper;
pub(crate) mod upper_print;
pub mod users_git;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use paddock_protocol::RepositorySpec;
use tokio::process::Command;

pub use checkout_size::CheckoutBound;
pub use commit_object::system_zone;
use final_tree::{nul_list, FinalTree, Tracked};
use host_git::HostGit;
pub use lease::Lease;
pub use overlay::{Chosen, Layout};
pub use prior_branch::PriorBranch;
pub use provision_after::ProvisionAfter;
pub use remote_config::read_ahead as read_remote_config_ahead;
pub use result_branch::{StartedBundle, BUNDLE};
pub use snapshot::SNAPSHOTS;
use snapshot::{Snapshot, Source as SnapSource};

/// What [`WorkspaceError::NotARepository`] says of a directory git does
/// not take for a repository.
const NOT_A_REPOSITORY: &str = "not a git repository";

#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("workspace {path}: cannot create: {source}")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    /// `why`: not a git repository, no such directory, or not a
    /// directory.
    #[error("repository {path}: {why}")]
    NotARepository { path: PathBuf, why: &'static str },
    /// A directory inside a repository's work tree, which git finds the
    /// repository from but cannot clone.
    #[error(
        "repository {path}: it is the directory `{prefix}` inside the git repository {top}, not \
         a repository's top level: set repository.path to {top} (a job works on the whole \
         repository)"
    )]
    NotTopLevel {
        path: PathBuf,
        prefix: String,
        top: String,
    },
    #[error("repository {source_repo}: git clone failed: {stderr}")]
    Clone { source_repo: String, stderr: String },
    #[error(
        "the base commit {base} is neither in the mirror {mirror} nor to be had from {source_repo} any more (fetched again, and asked for by name)"
    )]
    MirrorLacksBase {
        base: String,
        mirror: PathBuf,
        source_repo: String,
    },
    #[error(
        "repository {source_repo}: the base commit {base} is in no ref it advertises, and asked for by name it was not given (the server may refuse a commit no ref reaches: `uploadpack.allowAnySHA1InWant`, `allowReachableSHA1InWant`): {stderr}"
    )]
    BaseByName {
        source_repo: String,
        base: String,
        stderr: String,
    },
    /// `known`: the source's branches, and what to write instead
    /// (`base_ref_names`), or empty.
    #[error("repository {source_repo}: base ref `{base_ref}` is not a commit in it{known}")]
    BaseRef {
        source_repo: String,
        base_ref: String,
        known: String,
    },
    #[error(
        "the prior attempt's branch `{branch}` is not in the source, and its bundle {} cannot \
         give it: {why}",
        bundle.display()
    )]
    PriorBundle {
        bundle: PathBuf,
        branch: String,
        why: String,
    },
    /// A base ref whose `^{/…}` search made git compute past the CPU
    /// its gits on a job's content may use (`host_git::job_git_cpu`).
    #[error(
        "repository {source_repo}: reading base ref `{base_ref}` used more than {limit:?} of \
         CPU (a `^{{/…}}` search matches its regex against each commit message of the history \
         it walks); it was ended: name a branch, a tag or a commit, or search with a simpler \
         regex"
    )]
    BaseRefCpuLimit {
        source_repo: String,
        base_ref: String,
        limit: std::time::Duration,
    },
    #[error(
        "repository {source_repo}: it has no commit yet (an empty repository: its branch is \
         unborn), so base ref `{base_ref}` names nothing; the job runs on a committed base: \
         commit one first"
    )]
    NoCommits {
        source_repo: String,
        base_ref: String,
    },
    #[error(
        "repository {source_repo}: base ref `{base_ref}` is no branch or commit of it, only its \
         remote-tracking branch `origin/{base_ref}` (the remote's branch as last fetched) is: \
         set base_ref = \"origin/{base_ref}\" to start from that"
    )]
    BaseRefRemoteOnly {
        source_repo: String,
        base_ref: String,
    },
    #[error("workspace {path}: cannot write the result branch's commit: {source}")]
    Commit {
        path: PathBuf,
        #[source]
        source: commit_object::CommitError,
    },
    #[error("workspace {path}: `git {args}` failed: {stderr}")]
    Git {
        path: PathBuf,
        args: String,
        stderr: String,
    },
    #[error(
        "workspace {path}: the result branch's commit {commit} is not kept: the job's new \
         objects fail git's check of a fetch (`git index-pack --strict`): {fsck}"
    )]
    NewObjectsRefused {
        path: PathBuf,
        commit: String,
        fsck: String,
    },
    #[error("workspace {path}: `git {args}` did not finish within {after:?}; it was killed")]
    GitTimeout {
        path: PathBuf,
        args: String,
        after: std::time::Duration,
    },
    #[error(
        "workspace {path}: `git {args}` used more than {limit:?} of CPU on the job's content or \
         its repository's (their ignore or attribute rules, or their files, made git compute that \
         long); it was ended"
    )]
    GitCpuLimit {
        path: PathBuf,
        args: String,
        limit: std::time::Duration,
    },
    #[error("workspace {path}: `git {args}` printed more than {limit} bytes; it was stopped and what it printed is not kept")]
    GitOutputPastLimit {
        path: PathBuf,
        args: String,
        limit: u64,
    },
    #[error(
        "workspace {path}: `git {args}` lists more than {limit} bytes {what}, the most Paddock \
         holds; it was stopped"
    )]
    ListingPastLimit {
        path: PathBuf,
        args: String,
        what: &'static str,
        limit: u64,
    },
    /// The base's checkout, totalled before it is written
    /// (`checkout_size.rs`), past the job's disk limit.
    #[error(
        "workspace {path}: the base commit {commit} checks out to at least {bytes} bytes, past \
         limits.max_disk_bytes ({limit} bytes); nothing was checked out"
    )]
    CheckoutPastLimit {
        path: PathBuf,
        commit: String,
        bytes: u64,
        limit: u64,
    },
    /// The base's checkout, totalled before it is written, past what the
    /// jobs file system has free above the host's reserve.
    #[error(
        "workspace {path}: the base commit {commit} checks out to at least {bytes} bytes, past \
         the {free} bytes free on the jobs file system less the host's reserve of {reserve} \
         bytes (PADDOCK_DISK_RESERVE_MB); nothing was checked out"
    )]
    CheckoutPastFree {
        path: PathBuf,
        commit: String,
        bytes: u64,
        free: u64,
        reserve: u64,
    },
    #[error(
        "workspace {path}: the job's work tree lists more than {limit} bytes of paths (each \
         path's bytes and {per_path} for holding it), the most the patch holds; it was stopped"
    )]
    FinalTreePastLimit {
        path: PathBuf,
        limit: u64,
        per_path: u64,
    },
    #[error("workspace {path}: cannot run git: {source}")]
    Spawn {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("workspace {path}: cannot write {file}: {source}")]
    Write {
        path: PathBuf,
        file: String,
        source: std::io::Error,
    },
    #[error("workspace {path}: cannot read {file}: {source}")]
    Read {
        path: PathBuf,
        file: String,
        source: std::io::Error,
    },
    #[error("workspace {path}: {file} already exists in the checkout; Paddock does not overwrite the repository's files")]
    Exists { path: PathBuf, file: String },
    #[error("workspace {path}: {file} is not a regular file (a link, a FIFO, a device); Paddock's git reads it by path, so the patch is refused")]
    NotAFile { path: PathBuf, file: String },
    /// The staging made while the job runs (`sealed_stage.rs`) does not
    /// read this; the patch is made by path once the job has ended.
    #[error("workspace {path}: the patch is not staged beside the job: {file}: {why}")]
    SealedStaging {
        path: PathBuf,
        file: String,
        why: String,
    },
    #[error("repository {source_repo}: cannot read its token: {source}")]
    Token {
        source_repo: String,
        source: crate::secret::SecretError,
    },
    #[error("workspace {path}: cannot remove: {source}")]
    Remove {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}=`{value}` names no workspace layout (`clone` or `overlay`; unset: the overlay where the host can mount it, else the clone)", overlay::LAYOUT_ENV)]
    LayoutEnv { value: String },
    #[error("workspace {path}: {}=overlay, but {why}", overlay::LAYOUT_ENV)]
    OverlayRefused { path: PathBuf, why: String },
    #[error("workspace {path}: cannot make the kept overlay work tree a plain directory: {step}: {source}")]
    Keep {
        path: PathBuf,
        step: &'static str,
        source: std::io::Error,
    },
}

/// One job's directories.
#[derive(Debug, Clone)]
pub struct Workspace {
    pub root: PathBuf,
    pub work: PathBuf,
    pub home: PathBuf,
    pub tmp: PathBuf,
    pub meta: PathBuf,
    /// The job's lease, held while it runs: the start-up reaper leaves the
    /// directory alone (`reaper.rs`).
    pub lease: Lease,
    /// The commit the job starts from.
    pub base_commit: String,
    pub branch: String,
    /// What provisioning has to tell the job (a URL's mirror made again).
    pub notes: Vec<String>,
    /// The layout `work/` got, and why.
    pub layout: overlay::Chosen,
    /// The base's paths as Paddock's index lists them (`ls-files`), the
    /// patch's first step, read beside the engine once it is started
    /// ([`Workspace::list_base_soon`]); `None` inside when that read
    /// failed (the patch reads it itself then).
    base_listing: BaseListing,
    /// The base commit's tree, read beside the engine with the listing
    /// (the patch's diff is started before the final tree exists and
    /// compares two trees); `None` inside when that read failed.
    base_tree: BaseTree,
    /// Whether [`Workspace::list_base_soon`] started those reads.
    early_reads: Arc<std::sync::atomic::AtomicBool>,
    /// Whether the patch is staged without git reading the work tree by
    /// path ([`Workspace::sealed`]).
    sealed: bool,
    /// The CPU each of Paddock's gits on the job's content may use
    /// (`host_git::job_git_cpu`: the host profile's, else 60 s; shorter in tests).
    git_cpu: std::time::Duration,
}

/// The base's listing, shared by a workspace's copies and the task that
/// reads it early.
type BaseListing = Arc<tokio::sync::OnceCell<Option<Arc<Tracked>>>>;

/// The base commit's tree, likewise.
type BaseTree = Arc<tokio::sync::OnceCell<Option<String>>>;

/// What the job changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    /// `git diff --binary` of the work tree against the base commit.
    pub diff: String,
    /// The changed paths as they are (UTF-8 names unquoted), sorted.
    pub changed_files: Vec<String>,
    /// Untracked build output left out of the patch (`workspace/junk.rs`):
    /// a directory as `dir/`, a file as its path.
    pub left_out: Vec<String>,
    /// What could not be kept exactly (an extended file the agent mangled,
    /// build output left out).
    pub warnings: Vec<String>,
    /// The final tree's object name in Paddock's own git directory (the
    /// result branch is committed from it).
    pub tree: String,
}

/// The work tree's content staged as a tree, before its diff
/// ([`Workspace::stage`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staged {
    /// The final tree's object name in Paddock's own git directory.
    pub tree: String,
    /// As [`Patch::left_out`].
    pub left_out: Vec<String>,
    /// As [`Patch::warnings`].
    pub warnings: Vec<String>,
}

/// Where the workspace records the files it extended (in `meta/`).
const EXTENDED: &str = "extended.jsonl";

/// Where the workspace records its base commit (in `meta/`), so that a
/// reaper can compute the patch of a job whose process died.
const BASE_COMMIT: &str = "base_commit";

/// Where an overlay workspace records its lower layer (in `meta/`): its
/// presence says `work/` is an overlay mount (`overlay.rs`).
const OVERLAY: &str = "overlay";
/// An overlay workspace's upper layer and overlay's work directory (in
/// `meta/`, never in the job's view).
const UPPER: &str = "upper";
const OVERLAY_WORK: &str = "overlay-work";

/// The most of a job's diff (its `--raw` names and patch text) Paddock
/// reads into memory, whatever the job's `limits.max_disk_bytes`: a job
/// within its disk can still make a diff this long (a file of many
/// gigabytes, its base85 text longer still), which the process that runs
/// every job of a server would otherwise hold twice over. Past it the job
/// fails naming the bound; its branch's commits are not kept either. It
/// also bounds what the patch's staging has git read of the files the job
/// changed (their lengths together, `final_tree::Budget`): a sparse file
/// is any length without holding disk, and git hashed every byte of it.
pub const MAX_PATCH_BYTES: u64 = 1 << 30;

/// The most of the base commit's lockfiles and manifests (their paths
/// and blob ids together) the setup cache's key reads
/// ([`Workspace::base_files`]): some 40,000 `package.json` files under
/// 100-byte paths.
pub const MAX_BASE_FILES_BYTES: u64 = 8 << 20;

/// The most of the base's paths (their bytes and, for each path and
/// directory held, `final_tree::HELD_PER_PATH`, 64, together) the patch
/// reads from Paddock's index (`final_tree::Tracked`), whatever the
/// checkout holds: a repository of a million files under 100-byte paths
/// (some 170 MiB charged) fits; one of a million under 4 KB paths, or of
/// ten million one-byte names, fails the patch naming the bound, never
/// held whole in the memory of the process that runs every job.
pub const MAX_BASE_PATH_BYTES: u64 = 256 << 20;

/// The most of the paths the walk of the job's final tree lists (each
/// path's bytes and `final_tree::HELD_PER_PATH`, 64, together:
/// `final_tree::Budget::max_paths`): a checkout of a million files under
/// 100-byte paths is charged some 164 MiB, leaving the job room for as
/// many again; a job that made millions of empty files under long paths
/// (which its disk limit lets it) fails the patch naming the bound, its
/// names never all held in the memory of the process that runs every job.
pub const MAX_FINAL_PATH_BYTES: u64 = 256 << 20;

/// The longest record of a listing of the base's paths read
/// ([`HostGit::each_record`]): a path is at most `PATH_MAX` (4096) bytes
/// where it is checked out, with its mode and object name before it.
const MAX_LISTED_RECORD: usize = 64 * 1024;

/// How many of the files left out of the patch as too long to stage its
/// warning names (the rest are counted).
const NAMED_TOO_LONG: usize = 20;

/// The diff's options (after `diff` or `diff-tree --stdin -r -M`): every
/// choice that shapes the text spelled out (see [`Workspace::diff_to`]).
const DIFF_ARGS: [&str; 10] = [
    "--binary",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-relative",
    "--src-prefix=a/",
    "--dst-prefix=b/",
    "--patch",
    "--raw",
    "-z",
];

/// The patch text and the changed names of a diff's `--patch --raw -z`
/// output (`raw_diff.rs`); `None` when it is not in that shape.
fn diff_and_names(out: &[u8]) -> Option<(String, Vec<String>)> {
    let (names, diff) = raw_diff::split(out)?;
    let changed_files = names
        .into_iter()
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .collect();
    Some((String::from_utf8_lossy(diff).into_owned(), changed_files))
}

/// How the patch's files are staged: by path, by the `update-index`
/// started before the walk, or sealed, read by Paddock with the rules
/// from the shadow (`sealed_stage.rs`).
enum Staging {
    ByPath(Box<host_git::Started>),
    Sealed(ignore_shadow::IgnoreShadow),
}

/// A diff of [`Workspace::start_diff`]: running, waiting for the trees.
pub struct StartedDiff {
    started: host_git::Started,
    base_tree: String,
}

/// A full object name as `git rev-parse` prints it (SHA-1 or SHA-256).
pub(crate) fn is_object_name(s: &str) -> bool {
    matches!(s.len(), 40 | 64) && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The most of a file Paddock extended (AGENTS.md, CLAUDE.md) read back
/// for the patch: the job writes it, and may make it any length without
/// holding disk (a sparse file), which read whole would be held in
/// Paddock's memory.
const MAX_EXTENDED_BYTES: u64 = 16 << 20;

/// The most of a `meta/` record naming a path or an object (`base_commit`,
/// `overlay`) read (`own_file::read`): a path is at most `PATH_MAX` (4096)
/// bytes.
pub(super) const MAX_NAME_RECORD: u64 = 64 * 1024;

/// The most of `meta/extended.jsonl` read back: each line holds an
/// extended file's original text and what was appended (the context's
/// instructions, `context::MAX_INSTRUCTIONS_BYTES` at most), JSON-escaped,
/// for the few files a context extends.
const MAX_EXTENDED_RECORD: u64 = 256 << 20;

/// A file of the repository that Paddock extended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Extended {
    path: String,
    original: String,
    appended: String,
}

/// The agent's version of an extended file without Paddock's section: the
/// exact appended text removed, or else everything from the
/// `<!-- paddock:begin` marker line to the `<!-- paddock:end -->` line.
/// `None` when neither is found.
fn strip_extension(current: &str, ext: &Extended) -> Option<String> {
    if let Some(i) = current.rfind(&ext.appended) {
        return Some(format!(
            "{}{}",
            &current[..i],
            &current[i + ext.appended.len()..]
        ));
    }
    let begin = current.find(BEGIN_MARKER)?;
    let end_marker = begin + current[begin..].find(END_MARKER)?;
    let end = current[end_marker..]
        .find('\n')
        .map(|n| end_marker + n + 1)
        .unwrap_or(current.len());
    // The separator Paddock put before its section goes with it.
    let sep_len = ext.appended.find(BEGIN_MARKER).unwrap_or(0);
    let sep = &ext.appended[..sep_len];
    let head = &current[..begin];
    let head = head.strip_suffix(sep).unwrap_or(head);
    Some(format!("{head}{}", &current[end..]))
}

/// The first line of Paddock's section in an extended file.
pub const BEGIN_MARKER: &str = "<!-- paddock:begin";
/// The last line of Paddock's section in an extended file.
pub const END_MARKER: &str = "<!-- paddock:end -->";

/// A path as a `.gitignore`-style pattern matching only itself.
fn exclude_pattern(rel: &str) -> String {
    let mut out = String::new();
    for c in rel.chars() {
        if matches!(c, '*' | '?' | '[' | '\\' | '!' | '#' | ' ') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn create_dir(root: &Path, dir: &Path) -> Result<(), WorkspaceError> {
    std::fs::create_dir_all(dir).map_err(|source| WorkspaceError::Create {
        path: if dir.starts_with(root) {
            dir.to_path_buf()
        } else {
            root.to_path_buf()
        },
        source,
    })
}

fn append(root: &Path, file: &Path, data: &[u8]) -> Result<(), WorkspaceError> {
    use std::io::Write as _;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .and_then(|mut f| f.write_all(data))
        .map_err(|source| WorkspaceError::Write {
            path: root.to_path_buf(),
            file: file.display().to_string(),
            source,
        })
}

fn write_new(root: &Path, file: &Path, data: &[u8]) -> Result<(), WorkspaceError> {
    use std::io::Write as _;
    std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .open(file)
        .and_then(|mut f| f.write_all(data))
        .map_err(|source| WorkspaceError::Write {
            path: root.to_path_buf(),
            file: file.display().to_string(),
            source,
        })
}

impl Workspace {
    /// Creates `<jobs_root>/<job_id>` and checks the repository out into it,
    /// on a lease of its own (a scratch workspace: no job is recorded).
    /// On failure nothing is left behind: what it made is removed, then
    /// the lease file deleted (kept for the reaper only when the removal
    /// failed).
    pub async fn provision(
        jobs_root: &Path,
        job_id: &str,
        repo: &RepositorySpec,
        branch: &str,
    ) -> Result<Workspace, WorkspaceError> {
        let root = jobs_root.join(job_id);
        let lease = Lease::take(jobs_root, job_id).map_err(|source| WorkspaceError::Create {
            path: root.clone(),
            source,
        })?;
        let made = Workspace::provision_leased(
            jobs_root,
            job_id,
            lease.clone(),
            repo,
            branch,
            ProvisionAfter {
                prior: None,
                git_cpu: host_git::JOB_GIT_CPU,
                disk: CheckoutBound::NONE,
            },
        )
        .await;
        if let Err(e) = &made {
            let theirs = matches!(e, WorkspaceError::Create { path, .. } if *path == root);
            if theirs || !root.exists() {
                // Not deleted: the next reaper pass finds it abandoned
                // and removes it, with nothing left to reap.
                let _ = lease.release();
            }
        }
        made
    }

    /// [`Workspace::provision`] for a job whose lease (`reaper.rs`) the
    /// caller already holds, after `after` (`provision_after.rs`: the
    /// prior attempt's branch, the CPU each git on the base's content may
    /// use, the disk its checkout may take).
    pub async fn provision_leased(
        jobs_root: &Path,
        job_id: &str,
        lease: Lease,
        repo: &RepositorySpec,
        branch: &str,
        after: ProvisionAfter<'_>,
    ) -> Result<Workspace, WorkspaceError> {
        let layout = Layout::from_env().map_err(|value| WorkspaceError::LayoutEnv { value })?;
        Workspace::provision_after(jobs_root, job_id, lease, repo, branch, layout, after).await
    }

    /// [`Workspace::provision_leased`] with the given `layout`.
    pub async fn provision_as(
        jobs_root: &Path,
        job_id: &str,
        lease: Lease,
        repo: &RepositorySpec,
        branch: &str,
        layout: Layout,
    ) -> Result<Workspace, WorkspaceError> {
        let after = ProvisionAfter {
            prior: None,
            git_cpu: host_git::JOB_GIT_CPU,
            disk: CheckoutBound::NONE,
        };
        Workspace::provision_after(jobs_root, job_id, lease, repo, branch, layout, after).await
    }

    /// [`Workspace::provision_as`] after the attempt whose branch is
    /// `after.prior`, each git on the base's content held to
    /// `after.git_cpu`.
    pub async fn provision_after(
        jobs_root: &Path,
        job_id: &str,
        lease: Lease,
        repo: &RepositorySpec,
        branch: &str,
        layout: Layout,
        after: ProvisionAfter<'_>,
    ) -> Result<Workspace, WorkspaceError> {
        let root = jobs_root.join(job_id);
        // Held until what a failure made is removed: the caller's may be
        // the lease's only other holder, which a failure drops on the way
        // out, and a reaper must not find the lease free meanwhile.
        let held = lease.clone();
        let result = match layout {
            Layout::Auto | Layout::Overlay => {
                let forced = layout == Layout::Overlay;
                let (to, layered) = (root.clone(), (repo, branch, forced));
                Workspace::provision_layered(jobs_root, to, lease, layered, after).await
            }
            Layout::Clone => Workspace::provision_in(root.clone(), lease, repo, branch, after)
                .await
                .map(|ws| Workspace {
                    layout: Chosen::clone_because(format!("{}=clone", overlay::LAYOUT_ENV)),
                    ..ws
                }),
        };
        // Only what this call made is removed: a directory that was
        // already there (creating it failed) is not ours to delete.
        let ours = !matches!(&result, Err(WorkspaceError::Create { path, .. }) if *path == root);
        if result.is_err() && ours && root.exists() {
            let _ = overlay::unmount(&root.join("work"));
            let _ = std::fs::remove_dir_all(&root);
        }
        drop(held);
        result
    }

    /// An overlay workspace (`overlay.rs`) on the base's snapshot when the
    /// source is a local repository and the host allows the mount; else a
    /// clone, as [`Workspace::provision_in`] makes (an error instead when
    /// the overlay is `forced`).
    async fn provision_layered(
        jobs_root: &Path,
        root: PathBuf,
        lease: Lease,
        (repo, branch, forced): (&RepositorySpec, &str, bool),
        after: ProvisionAfter<'_>,
    ) -> Result<Workspace, WorkspaceError> {
        let ProvisionAfter { prior, git_cpu, .. } = after;
        match overlay_unavailable(jobs_root, &root, repo) {
            Ok(()) => {}
            Err(why) if forced => return Err(WorkspaceError::OverlayRefused { path: root, why }),
            Err(why) => {
                let ws = Workspace::provision_in(root, lease, repo, branch, after).await?;
                return Ok(Workspace {
                    layout: Chosen::clone_because(why),
                    ..ws
                });
            }
        }
        let (source, base_commit, snap, mirror) = match (&repo.path, &repo.url) {
            (Some(path), _) => {
                let source = path.display().to_string();
                let base_commit =
                    match resolve_in_source(path, &source, &repo.base_ref, true, git_cpu).await {
                        Ok(commit) => commit,
                        // The prior attempt's branch, gone from the source:
                        // from its bundle, into a clone of the job's own.
                        Err(e) if !forced && prior.is_some_and(|p| p.answers(&e)) => {
                            return Workspace::provision_on_prior(root, lease, repo, branch, after)
                                .await;
                        }
                        Err(e) => {
                            // Not a repository at all is the error to report, then.
                            Workspace::source_of(repo).await?;
                            return Err(e);
                        }
                    };
                let snap = SnapSource::Path(&source);
                let snap = match Snapshot::get_or_make(
                    jobs_root,
                    &snap,
                    &base_commit,
                    (git_cpu, after.disk),
                )
                .await
                {
                    Ok(snap) => snap,
                    Err(e) => {
                        // A directory git finds a repository from but
                        // cannot clone (inside a work tree) is the
                        // error to report, then.
                        Workspace::source_of(repo).await?;
                        return Err(e);
                    }
                };
                (source, base_commit, snap, None)
            }
            (None, Some(url)) => {
                // The URL's mirror, fetched (and held: no other job
                // fetches it) until the snapshot is made or found.
                // The base's name is read beside the mirror's check; on
                // an unchanged mirror, taken as read before under its
                // state when it was (no git: `mirror_names.rs`).
                let resolve = |dir: PathBuf, names: mirror::Names| async move {
                    if let Some(commit) = names.resolved(&repo.base_ref) {
                        return Ok(commit);
                    }
                    let commit =
                        resolve_in_source(&dir, url, &repo.base_ref, false, git_cpu).await?;
                    names.remember(&repo.base_ref, &commit);
                    Ok(commit)
                };
                let (mirror, base_commit) =
                    fetched_mirror_then(jobs_root, repo, url, resolve).await?;
                let base_commit = match base_commit {
                    // A commit no advertised ref reaches: asked for by name.
                    Err(WorkspaceError::BaseRef { .. }) if is_object_name(&repo.base_ref) => {
                        base_by_name(&mirror.dir, repo, url).await?;
                        resolve_in_source(&mirror.dir, url, &repo.base_ref, false, git_cpu).await?
                    }
                    // The prior attempt's branch, never pushed: from its
                    // bundle, into a clone of the job's own (never the
                    // mirror, which other jobs share).
                    Err(e) if !forced && prior.is_some_and(|p| p.answers(&e)) => {
                        drop(mirror);
                        return Workspace::provision_on_prior(root, lease, repo, branch, after)
                            .await;
                    }
                    read => read?,
                };
                let from = mirror.dir.display().to_string();
                let snap = SnapSource::Url { url, mirror: &from };
                let snap =
                    Snapshot::get_or_make(jobs_root, &snap, &base_commit, (git_cpu, after.disk))
                        .await?;
                (url.clone(), base_commit, snap, Some(mirror))
            }
            (None, None) => {
                return Err(WorkspaceError::NotARepository {
                    path: PathBuf::new(),
                    why: NOT_A_REPOSITORY,
                })
            }
        };
        let mut ws = Workspace::make_dirs(root, lease, branch)?.with_git_cpu(git_cpu);
        ws.notes
            .extend(mirror.as_ref().and_then(|m| m.remade.clone()));
        let meta = |name: &str| ws.meta.join(name);
        for dir in [ws.work.clone(), meta(UPPER), meta(OVERLAY_WORK)] {
            create_dir(&ws.root, &dir)?;
        }
        if let Err(e) = overlay::mount_at(&snap.tree(), &meta(UPPER), &meta(OVERLAY_WORK), &ws.work)
        {
            // Refused here (no overlayfs, a file system overlay cannot
            // stack on): the clone, saying why.
            let why = format!("the overlay mount was refused: {e}");
            if forced {
                return Err(WorkspaceError::OverlayRefused { path: ws.root, why });
            }
            for dir in [ws.work.clone(), meta(UPPER), meta(OVERLAY_WORK)] {
                let _ = std::fs::remove_dir(dir);
            }
            let from = mirror
                .as_ref()
                .map_or(source.clone(), |m| m.dir.display().to_string());
            let ws =
                Workspace::provision_clone(ws, &source, &from, &base_commit, (None, after.disk))
                    .await?;
            return Ok(Workspace {
                layout: Chosen::clone_because(why),
                ..ws
            });
        }
        let lower = format!("{}\n", snap.tree().display());
        write_new(&ws.root, &meta(OVERLAY), lower.as_bytes())?;
        ws.borrowing_git_dir(&snap)?;
        // The job's branch at the base, then HEAD on it, where the
        // snapshot's is detached (`job_branch.rs`): `checkout -b` would
        // refresh and rewrite the index, copying it up.
        ws.start_branch(branch, &base_commit).await?;
        write_new(
            &ws.root,
            &meta(BASE_COMMIT),
            format!("{base_commit}\n").as_bytes(),
        )?;
        let layout = Chosen {
            overlay: true,
            why: format!("on the snapshot of {}", short(&base_commit)),
        };
        Ok(Workspace {
            base_commit,
            layout,
            ..ws
        })
    }

    /// Paddock's own git directory of an overlay workspace: empty, its
    /// objects borrowed from the snapshot's (`objects/info/alternates`),
    /// the index of the snapshot's checkout (its stat stamps are those the
    /// overlay shows for every file the job leaves alone).
    fn borrowing_git_dir(&self, snap: &Snapshot) -> Result<(), WorkspaceError> {
        let git = self.git_dir();
        for dir in [
            "objects/info",
            "objects/pack",
            "refs/heads",
            "refs/tags",
            "info",
        ] {
            create_dir(&self.root, &git.join(dir))?;
        }
        let files = [
            ("HEAD", "ref: refs/heads/main\n".to_string()),
            (
                "config",
                "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n"
                    .to_string(),
            ),
            (
                "objects/info/alternates",
                format!("{}\n", snap.git().join("objects").display()),
            ),
        ];
        for (name, text) in files {
            write_new(&self.root, &git.join(name), text.as_bytes())?;
        }
        let index = git.join("index");
        link_index(&snap.git().join("index"), &index).map_err(|source| WorkspaceError::Write {
            path: self.root.clone(),
            file: index.display().to_string(),
            source,
        })?;
        Ok(())
    }

    /// A clone on the prior attempt's branch, which only its bundle
    /// keeps (`prior_branch.rs`), saying so as the layout's reason.
    async fn provision_on_prior(
        root: PathBuf,
        lease: Lease,
        repo: &RepositorySpec,
        branch: &str,
        after: ProvisionAfter<'_>,
    ) -> Result<Workspace, WorkspaceError> {
        let ws = Workspace::provision_in(root, lease, repo, branch, after).await?;
        Ok(Workspace {
            layout: Chosen::clone_because(format!(
                "the prior attempt's branch {} is only in its bundle, fetched into the job's own \
                 clone",
                repo.base_ref
            )),
            ..ws
        })
    }

    async fn provision_in(
        root: PathBuf,
        lease: Lease,
        repo: &RepositorySpec,
        branch: &str,
        after: ProvisionAfter<'_>,
    ) -> Result<Workspace, WorkspaceError> {
        let ProvisionAfter { prior, git_cpu, .. } = after;
        let source = Workspace::source_of(repo).await?;
        let ws = Workspace::make_dirs(root, lease, branch)?.with_git_cpu(git_cpu);
        // A URL is cloned from its mirror, fetched for this job.
        let mirror = match (&repo.path, &repo.url, ws.root.parent()) {
            (None, Some(url), Some(jobs_root)) => {
                let (mirror, ()) =
                    fetched_mirror_then(jobs_root, repo, url, |_, _| async {}).await?;
                // A commit no advertised ref reaches: asked for by name.
                if is_object_name(&repo.base_ref)
                    && !mirror::has_commit(&mirror.dir, url, &repo.base_ref).await
                {
                    base_by_name(&mirror.dir, repo, url).await?;
                }
                Some(mirror)
            }
            _ => None,
        };
        let from = mirror
            .as_ref()
            .map_or(source.clone(), |m| m.dir.display().to_string());
        // A local source's base is read in the source itself, as the
        // overlay's is: Paddock's bare clone of it has its branches and
        // tags, not its remote-tracking branches (`origin/X`).
        let base = match &repo.path {
            Some(path) => {
                match resolve_in_source(path, &source, &repo.base_ref, true, git_cpu).await {
                    Ok(commit) => commit,
                    // Read from the prior attempt's bundle in the clone.
                    Err(e) if prior.is_some_and(|p| p.answers(&e)) => repo.base_ref.clone(),
                    Err(e) => return Err(e),
                }
            }
            None => repo.base_ref.clone(),
        };
        let ws = Workspace::provision_clone(ws, &source, &from, &base, (prior, after.disk)).await?;
        let notes = mirror.and_then(|m| m.remade).into_iter().collect();
        Ok(Workspace { notes, ..ws })
    }

    /// The clone of `source` (from `from`: itself, or its mirror) into the
    /// made directories of `ws`.
    async fn provision_clone(
        ws: Workspace,
        source: &str,
        from: &str,
        base_ref: &str,
        (prior, bound): (Option<&PriorBranch>, CheckoutBound),
    ) -> Result<Workspace, WorkspaceError> {
        Workspace::clone_bare(&ws.root, from, &ws.git_dir()).await?;
        let base_commit = match (ws.base_commit(source, base_ref).await, prior) {
            (Err(e), Some(prior)) if prior.answers(&e) => {
                prior.fetch_into(&ws.root, &ws.git_dir()).await?;
                ws.base_commit(source, base_ref).await?
            }
            (read, _) => read?,
        };
        std::fs::create_dir_all(ws.git_dir().join("info")).map_err(|e| WorkspaceError::Create {
            path: ws.git_dir().join("info"),
            source: e,
        })?;
        // `-B`: the clone's one branch, named as the source's HEAD, is
        // the job's own when the source has that checked out (the user
        // reviewing the job's change); the job's branch starts at its
        // base all the same (`job_branch.rs`).
        let checkout = ["checkout", "--quiet", "-B", &ws.branch, &base_commit];
        let (cpu, checkout) = (ws.git_cpu, (&checkout[..], base_commit.as_str()));
        Workspace::clone_job(
            &ws.root,
            source,
            &ws.git_dir(),
            &ws.work,
            checkout,
            cpu,
            bound,
        )
        .await?;
        // 3. Paddock's index of the base: the fresh checkout's, whose file
        // stamps let the patch skip hashing what the job did not touch.
        let index = ws.git_dir().join("index");
        copy_index(&ws.work.join(".git/index"), &index).map_err(|source| {
            WorkspaceError::Write {
                path: ws.root.clone(),
                file: index.display().to_string(),
                source,
            }
        })?;
        write_new(
            &ws.root,
            &ws.meta.join(BASE_COMMIT),
            format!("{base_commit}\n").as_bytes(),
        )?;
        Ok(Workspace { base_commit, ..ws })
    }

    /// The source to clone: a local repository's path (checked to be one,
    /// at its top level: a directory inside a work tree is refused naming
    /// the top) or the URL.
    async fn source_of(repo: &RepositorySpec) -> Result<String, WorkspaceError> {
        Ok(match (&repo.path, &repo.url) {
            (Some(path), _) => {
                // The directory's path below its work tree's top level
                // (the second line): empty at the top, in a bare
                // repository and in a git directory.
                let probe = user_git(path, ["rev-parse", "--git-dir", "--show-prefix"]).await;
                let prefix = probe
                    .as_ref()
                    .ok()
                    .and_then(|out| out.lines().nth(1))
                    .unwrap_or_default();
                if path.is_dir() && !prefix.is_empty() {
                    let top = user_git(path, ["rev-parse", "--show-toplevel"])
                        .await
                        .unwrap_or_default();
                    return Err(WorkspaceError::NotTopLevel {
                        path: path.clone(),
                        prefix: prefix.to_string(),
                        top: top.trim_end_matches('\n').to_string(),
                    });
                }
                if !path.is_dir() || probe.is_err() {
                    let why = if !path.exists() {
                        "no such directory"
                    } else if !path.is_dir() {
                        "not a directory"
                    } else {
                        NOT_A_REPOSITORY
                    };
                    return Err(WorkspaceError::NotARepository {
                        path: path.clone(),
                        why,
                    });
                }
                path.display().to_string()
            }
            (None, Some(url)) => url.clone(),
            (None, None) => {
                return Err(WorkspaceError::NotARepository {
                    path: PathBuf::new(),
                    why: NOT_A_REPOSITORY,
                })
            }
        })
    }

    /// The job's directory `root` (private) and its `home`, `tmp`, `meta`.
    fn make_dirs(root: PathBuf, lease: Lease, branch: &str) -> Result<Workspace, WorkspaceError> {
        if let Some(parent) = root.parent() {
            std::fs::create_dir_all(parent).map_err(|source| WorkspaceError::Create {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        std::fs::create_dir(&root).map_err(|source| WorkspaceError::Create {
            path: root.clone(),
            source,
        })?;
        set_private(&root);
        let meta = root.join("meta");
        for dir in ["home", "tmp", "meta"] {
            let dir = root.join(dir);
            std::fs::create_dir_all(&dir).map_err(|source| WorkspaceError::Create {
                path: dir.clone(),
                source,
            })?;
        }
        Ok(Workspace {
            work: root.join("work"),
            home: root.join("home"),
            tmp: root.join("tmp"),
            meta,
            lease,
            root,
            base_commit: String::new(),
            branch: branch.to_string(),
            notes: Vec::new(),
            layout: Chosen::clone_because("the clone"),
            base_listing: BaseListing::default(),
            base_tree: BaseTree::default(),
            early_reads: Arc::default(),
            sealed: false,
            git_cpu: host_git::JOB_GIT_CPU,
        })
    }

    /// Step 1 of a clone workspace, and of a snapshot: `source` into
    /// Paddock's own bare `git_dir` (`root` names the directory in errors).
    async fn clone_bare(root: &Path, source: &str, git_dir: &Path) -> Result<(), WorkspaceError> {
        // 1. The source into Paddock's own git directory, with the user's
        // git configuration (their remotes, credentials, safe directories):
        // nothing of the job exists yet. Bare, so nothing is checked out or
        // filtered; a local source's objects are hard-linked, which is safe
        // because the job never sees `meta/`.
        let mut clone = Command::from(users_git::command());
        clone
            .args([
                "-c",
                "core.hooksPath=/dev/null",
                "clone",
                "--quiet",
                "--bare",
                "--template=",
                "--",
            ])
            .arg(source)
            .arg(git_dir)
            .stdin(Stdio::null());
        let args = format!("clone --bare {source}");
        let out = host_git::finished_within(clone, root, &args, host_git::CLONE_TIMEOUT).await?;
        if !out.status.success() {
            return Err(WorkspaceError::Clone {
                source_repo: source.to_string(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(())
    }

    /// The commit `base` names in Paddock's clone of `source` (`origin/X`:
    /// also the source's branch `X`).
    async fn base_commit(&self, source: &str, base: &str) -> Result<String, WorkspaceError> {
        let paddock_git = self.paddock_git(None, false);
        let mut candidates = vec![format!("{base}^{{commit}}")];
        if let Some(branch) = base.strip_prefix("origin/") {
            // The source's branch, as a clone of it names it.
            candidates.push(format!("refs/heads/{branch}^{{commit}}"));
        }
        let mut base_commit = None;
        for candidate in candidates {
            let args = [
                "rev-parse",
                "--verify",
                "--quiet",
                "--end-of-options",
                &candidate,
            ];
            match paddock_git.run(args, None).await {
                Ok(c) => {
                    base_commit = Some(String::from_utf8_lossy(&c).trim().to_string());
                    break;
                }
                // A `^{/…}` search held to the job's CPU: said as such,
                // not as a ref the source lacks.
                Err(WorkspaceError::GitCpuLimit { limit, .. }) => {
                    return Err(WorkspaceError::BaseRefCpuLimit {
                        source_repo: source.to_string(),
                        base_ref: base.to_string(),
                        limit,
                    })
                }
                Err(_) => {}
            }
        }
        let Some(base_commit) = base_commit else {
            return Err(WorkspaceError::BaseRef {
                source_repo: source.to_string(),
                base_ref: base.to_string(),
                known: String::new(),
            });
        };
        Ok(base_commit)
    }

    /// Step 2 of a clone workspace, and of a snapshot: the job's
    /// repository at `work`, cloned from Paddock's `git_dir`, then
    /// `checkout` run in it, held to `cpu` of CPU: the checkout matches
    /// every path against the repository's `.gitattributes`, whose rules
    /// can make git compute for hours on a few thousand paths (the
    /// repository is as hostile as the job: `host_git::JOB_GIT_CPU`).
    async fn clone_job(
        root: &Path,
        source: &str,
        git_dir: &Path,
        work: &Path,
        (checkout, commit): (&[&str], &str),
        cpu: std::time::Duration,
        bound: CheckoutBound,
    ) -> Result<u64, WorkspaceError> {
        // 2. The job's repository: a clone of Paddock's that copies every
        // object (no hard link to, nor alternate of, anything outside the
        // job), hooks off for good, an identity for commits; the remote is
        // the source again. Run hardened: a `.gitattributes` the source
        // commits names no driver that exists, so the checkout runs nothing.
        let cloner = HostGit {
            git_dir: None,
            work_tree: None,
            index: None,
            excludes: None,
            root: root.to_path_buf(),
            timeout: host_git::GIT_TIMEOUT,
            // Copies the objects, reading no path's rules.
            cpu_limit: None,
        };
        let mut clone = vec![
            "clone",
            "--quiet",
            "--no-hardlinks",
            // A source borrowing objects (`objects/info/alternates`) passes
            // the borrowing on: copy those objects too, so the job's
            // repository points at nothing outside it.
            "--dissociate",
            "--no-checkout",
            "--template=",
            "--config",
            "core.hooksPath=/dev/null",
            "--config",
            "user.name=Paddock",
            "--config",
            "user.email=paddock@localhost",
            "--",
        ]
        .into_iter()
        .map(std::ffi::OsString::from)
        .collect::<Vec<_>>();
        clone.push(git_dir.as_os_str().to_owned());
        clone.push(work.as_os_str().to_owned());
        cloner.run(&clone, None).await?;
        let job_git = HostGit {
            git_dir: Some(work.join(".git")),
            work_tree: Some(work.to_path_buf()),
            cpu_limit: Some(cpu),
            ..cloner
        };
        job_git
            .run(["remote", "set-url", "origin", source], None)
            .await?;
        // Before anything is checked out: what it would write, against
        // the job's disk limit and the host's free space.
        let bytes = checkout_size::checked(root, &work.join(".git"), commit, cpu, bound).await?;
        job_git.run(checkout, None).await?;
        Ok(bytes)
    }

    /// The workspace `<jobs_root>/<job_id>` of a job whose process is gone,
    /// adopted by whoever now holds its `lease` (the reaper), to compute
    /// the patch of the work done so far. `None` when the job never got as
    /// far as a checkout (no recorded base commit).
    pub fn reopen(
        jobs_root: &Path,
        job_id: &str,
        lease: Lease,
        branch: &str,
    ) -> Result<Option<Workspace>, WorkspaceError> {
        let root = jobs_root.join(job_id);
        let meta = root.join("meta");
        let file = meta.join(BASE_COMMIT);
        let base_commit = match crate::own_file::read(&file, MAX_NAME_RECORD) {
            Ok(text) => text.trim().to_string(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(WorkspaceError::Read {
                    path: root,
                    file: file.display().to_string(),
                    source,
                })
            }
        };
        if !is_object_name(&base_commit) {
            return Err(WorkspaceError::Read {
                path: root,
                file: file.display().to_string(),
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "not a full object name",
                ),
            });
        }
        let layout = match crate::own_file::is_file(&meta.join(OVERLAY)) {
            true => Chosen {
                overlay: true,
                why: "reopened".into(),
            },
            false => Chosen::clone_because("reopened"),
        };
        let ws = Workspace {
            work: root.join("work"),
            home: root.join("home"),
            tmp: root.join("tmp"),
            meta,
            lease,
            root,
            base_commit,
            branch: branch.to_string(),
            notes: Vec::new(),
            layout,
            base_listing: BaseListing::default(),
            base_tree: BaseTree::default(),
            early_reads: Arc::default(),
            sealed: false,
            git_cpu: host_git::JOB_GIT_CPU,
        };
        ws.remount()?;
        Ok(Some(ws))
    }

    /// The base commit's files whose name (the path's last part) `wanted`
    /// accepts, as (path, blob id), read from Paddock's own git directory
    /// (never the job's repository). The listing is read record by record
    /// ([`HostGit::each_record`]), only the files taken held: at most
    /// [`MAX_BASE_FILES_BYTES`] of their paths and ids together, past it
    /// `ListingPastLimit` (a repository can list paths without end: a tree
    /// holding its own subtrees again and again).
    pub async fn base_files(
        &self,
        wanted: impl Fn(&[u8]) -> bool,
    ) -> Result<Vec<(String, String)>, WorkspaceError> {
        let args = [
            "ls-tree",
            "-r",
            "-z",
            "--full-tree",
            self.base_commit.as_str(),
        ];
        let mut out = Vec::new();
        let mut held = 0usize;
        let past = || WorkspaceError::ListingPastLimit {
            path: self.root.clone(),
            args: args.join(" "),
            what: "of the base commit's lockfiles and manifests (paths and ids)",
            limit: MAX_BASE_FILES_BYTES,
        };
        self.paddock_git(None, false)
            .each_record(args, MAX_LISTED_RECORD, |record| {
                // `MODE TYPE ID\tPATH`.
                let Some(tab) = record.iter().position(|b| *b == b'\t') else {
                    return Ok(());
                };
                let mut head = record[..tab].split(|b| *b == b' ');
                let (_, kind, id) = (head.next(), head.next(), head.next());
                let path = &record[tab + 1..];
                let name = path.rsplit(|b| *b == b'/').next().unwrap_or(path);
                if let (Some(b"blob"), Some(id), true) = (kind, id, wanted(name)) {
                    held = held.saturating_add(path.len() + id.len());
                    if held as u64 > MAX_BASE_FILES_BYTES {
                        return Err(past());
                    }
                    out.push((
                        String::from_utf8_lossy(path).into_owned(),
                        String::from_utf8_lossy(id).into_owned(),
                    ));
                }
                Ok(())
            })
            .await?;
        Ok(out)
    }

    /// Whether the base commit is `commit` or descends from it (`git
    /// merge-base --is-ancestor` in Paddock's own git directory, never the
    /// job's repository). `commit` must be an object name (hex digits); a
    /// commit this directory does not hold is no ancestor of the base (a
    /// clone holds every ancestor of what it checked out).
    pub async fn descends_from(&self, commit: &str) -> Result<bool, WorkspaceError> {
        if commit.is_empty() || !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(false);
        }
        if commit == self.base_commit {
            return Ok(true);
        }
        let (status, _, _) = self
            .paddock_git(None, false)
            .status(
                [
                    "merge-base",
                    "--is-ancestor",
                    commit,
                    self.base_commit.as_str(),
                ],
                None,
            )
            .await?;
        Ok(status.success())
    }

    /// Paddock's own git directory for this job (`meta/git`).
    fn git_dir(&self) -> PathBuf {
        self.meta.join("git")
    }

    /// Paddock's git on its own git directory, with `index` and, when
    /// `with_work`, the job's work tree as content.
    fn paddock_git(&self, index: Option<&Path>, with_work: bool) -> HostGit {
        HostGit {
            git_dir: Some(self.git_dir()),
            work_tree: with_work.then(|| self.work.clone()),
            index: index.map(Path::to_path_buf),
            excludes: None,
            root: self.root.clone(),
            timeout: host_git::GIT_TIMEOUT,
            cpu_limit: Some(self.git_cpu),
        }
    }

    /// Writes a new file Paddock generates (`rel` is relative to the
    /// checkout, parents are created) and keeps it out of the patch via
    /// `.git/info/exclude`. A path that already exists is an error: the
    /// repository's files are never overwritten.
    pub async fn write_generated(&self, rel: &str, contents: &[u8]) -> Result<(), WorkspaceError> {
        let target = self.work.join(rel);
        if std::fs::symlink_metadata(&target).is_ok() {
            return Err(WorkspaceError::Exists {
                path: self.root.clone(),
                file: rel.to_string(),
            });
        }
        // Paddock's own exclude file decides the patch; the job's copy
        // keeps the file out of the agent's `git status`.
        let pattern = format!("/{}\n", exclude_pattern(rel));
        for info in [self.git_dir().join("info"), self.work.join(".git/info")] {
            create_dir(&self.root, &info)?;
            append(&self.root, &info.join("exclude"), pattern.as_bytes())?;
        }
        if let Some(parent) = target.parent() {
            create_dir(&self.root, parent)?;
        }
        write_new(&self.root, &target, contents)
    }

    /// Writes a file [`Workspace::write_generated`] made again, whole
    /// (before anything of the job ran: a job moved to another rung); only
    /// a regular file is written, never through a link.
    pub async fn rewrite_generated(
        &self,
        rel: &str,
        contents: &[u8],
    ) -> Result<(), WorkspaceError> {
        let target = self.work.join(rel);
        crate::own_file::write(&target, contents).map_err(|source| WorkspaceError::Write {
            path: self.root.clone(),
            file: target.display().to_string(),
            source,
        })
    }

    /// Extends a file the repository tracks: the checkout gets `original`
    /// followed by `appended`, and the patch later drops `appended` again, so
    /// that it holds exactly the agent's change to the file.
    pub async fn extend_tracked(
        &self,
        rel: &str,
        original: &str,
        appended: &str,
    ) -> Result<(), WorkspaceError> {
        let record = Extended {
            path: rel.to_string(),
            original: original.to_string(),
            appended: appended.to_string(),
        };
        let mut line = serde_json::to_string(&record).map_err(|e| WorkspaceError::Write {
            path: self.root.clone(),
            file: self.meta.join(EXTENDED).display().to_string(),
            source: std::io::Error::other(e),
        })?;
        line.push('\n');
        append(&self.root, &self.meta.join(EXTENDED), line.as_bytes())?;
        let target = self.work.join(rel);
        std::fs::write(&target, format!("{original}{appended}")).map_err(|source| {
            WorkspaceError::Write {
                path: self.root.clone(),
                file: target.display().to_string(),
                source,
            }
        })
    }

    /// The files [`Workspace::extend_tracked`] extended.
    fn extended(&self) -> Result<Vec<Extended>, WorkspaceError> {
        let path = self.meta.join(EXTENDED);
        let text = match crate::own_file::read(&path, MAX_EXTENDED_RECORD) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(WorkspaceError::Read {
                    path: self.root.clone(),
                    file: path.display().to_string(),
                    source,
                })
            }
        };
        text.lines()
            .map(|l| {
                serde_json::from_str(l).map_err(|e| WorkspaceError::Read {
                    path: self.root.clone(),
                    file: path.display().to_string(),
                    source: std::io::Error::other(e),
                })
            })
            .collect()
    }

    /// The diff of the work tree's content against the base commit, with
    /// new files and without ignored or excluded ones, computed in Paddock's
    /// own git directory: nothing in `work/` but file content, links and
    /// `.gitignore`/`.gitattributes` data is read, and nothing the job wrote
    /// is run or obeyed. The job's own repository is not touched.
    pub async fn patch(&self) -> Result<Patch, WorkspaceError> {
        let staged = self.stage().await?;
        self.diff_staged(staged).await
    }

    /// The first half of [`Workspace::patch`]: the work tree's content
    /// staged and written as a tree in Paddock's own git directory, without
    /// its diff. Whatever needs only the tree (the result branch's commit,
    /// `results::keep_branch`) can start while [`Workspace::diff_staged`]
    /// makes the diff.
    pub async fn stage(&self) -> Result<Staged, WorkspaceError> {
        self.stage_starting(&mut || {}).await
    }

    /// [`Workspace::stage`], calling `start` once while it runs: after the
    /// walk's first depth was asked of `check-ignore` (or after the walk,
    /// if it had no second depth), so that what `start` starts (the diff
    /// and the bundle's pack, `results::patch_and_branch`) does not hold
    /// up the start of the processes the walk waits for.
    pub async fn stage_starting(
        &self,
        start: &mut (dyn FnMut() + Send),
    ) -> Result<Staged, WorkspaceError> {
        let index = self.meta.join("patch.index");
        let _ = std::fs::remove_file(&index);
        // A lock an earlier patch's killed `update-index` left.
        let _ = std::fs::remove_file(self.meta.join("patch.index.lock"));
        link_index(&self.git_dir().join("index"), &index).map_err(|source| {
            WorkspaceError::Write {
                path: self.root.clone(),
                file: index.display().to_string(),
                source,
            }
        })?;
        // A sealed staging's gits have no work tree: each runs in Paddock's
        // git directory, and none reads the job's tree.
        let git = HostGit {
            excludes: host_git::user_excludes_file().await,
            ..self.paddock_git(Some(&index), !self.sealed)
        };
        // What the job closed (a file or directory its owner cannot read),
        // readable again when Paddock is not root: root reads it as it is.
        // Not while the job may still run (a sealed staging): a file it
        // cannot read fails that staging, and the patch is made after it.
        if !self.sealed {
            reopen_tree::open_for_reading(&self.work).map_err(|source| WorkspaceError::Read {
                path: self.root.clone(),
                file: self.work.display().to_string(),
                source,
            })?;
        }
        let (tree, tracked) = self.stage_work_tree(&git, &index, start).await?;
        // Named in the warnings as the closeout's lists name files.
        let shown = |p: &[u8]| crate::terminal_text::path(&String::from_utf8_lossy(p));
        let left_out: Vec<String> = tree
            .junk
            .iter()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect();
        let mut warnings = Vec::new();
        if !left_out.is_empty() {
            let names: Vec<String> = tree.junk.iter().map(|p| shown(p)).collect();
            warnings.push(format!(
                "left out of the patch as build output, not the job's work: {}",
                names.join(", ")
            ));
        }
        if !tree.refused.is_empty() {
            let names: Vec<String> = tree.refused.iter().map(|p| shown(p)).collect();
            warnings.push(format!(
                "left out of the patch, named as git's own directory (.git) under another \
                 spelling, which git never stages: {}",
                names.join(", ")
            ));
        }
        if !tree.too_long.is_empty() {
            // A job can leave any number: the first ones named, the rest counted.
            let mut names: Vec<String> = tree
                .too_long
                .iter()
                .take(NAMED_TOO_LONG)
                .map(|(p, len)| format!("{} ({len} bytes)", shown(p)))
                .collect();
            if tree.too_long.len() > NAMED_TOO_LONG {
                names.push(format!("and {} more", tree.too_long.len() - NAMED_TOO_LONG));
            }
            warnings.push(format!(
                "{}: left out of the patch, longer than Paddock stages: it reads at most \
                 {MAX_PATCH_BYTES} bytes of the files the job changed, together, the most of a \
                 patch it reads",
                names.join(", ")
            ));
        }
        warnings.extend(self.restore_extended(&git, &tree, &tracked).await?);
        let tree_id = git.run(["write-tree"], None).await?;
        let tree_id = String::from_utf8_lossy(&tree_id).trim().to_string();
        let _ = std::fs::remove_file(&index);
        Ok(Staged {
            tree: tree_id,
            left_out,
            warnings,
        })
    }

    /// The second half of [`Workspace::patch`]: the diff from the base
    /// commit to the tree `staged` holds, and the names it changes.
    pub async fn diff_staged(&self, staged: Staged) -> Result<Patch, WorkspaceError> {
        self.diff_staged_with(staged, None, MAX_PATCH_BYTES).await
    }

    /// [`Workspace::diff_staged`] by the diff `started` early
    /// ([`Workspace::start_diff`]), if there is one; a diff longer than
    /// `max` bytes (or [`MAX_PATCH_BYTES`]) is not read past them: a
    /// `GitOutputPastLimit` error.
    pub async fn diff_staged_with(
        &self,
        staged: Staged,
        started: Option<StartedDiff>,
        max: u64,
    ) -> Result<Patch, WorkspaceError> {
        let max = max.min(MAX_PATCH_BYTES);
        let Staged {
            tree,
            left_out,
            warnings,
        } = staged;
        let (diff, changed_files) = match started {
            Some(started) => self.diff_started(started, &tree, max).await?,
            None => self.diff_to(&tree, max).await?,
        };
        Ok(Patch {
            diff,
            changed_files,
            left_out,
            warnings,
            tree,
        })
    }

    /// Starts reading the base's paths from Paddock's index (`git
    /// ls-files --stage`, parsed), the patch's first step, on a task of its
    /// own, so that the patch at the job's end finds them read (at 10,000
    /// files, a 1 MB index listed and parsed). Paddock's index is its own
    /// (`meta/git`, which the job never sees) and nothing writes it after
    /// provisioning, so the listing is what the patch would have read.
    /// A failed read leaves it to the patch, which reports its error.
    /// The base's tree and the user's excludes file (once per process)
    /// are read beside it. Called once the engine is started (issue #14):
    /// these three `git` processes then run beside the engine's turn,
    /// not beside the job's launch, whose CPU they took on a busy host.
    pub fn list_base_soon(&self) {
        self.early_reads
            .store(true, std::sync::atomic::Ordering::SeqCst);
        tokio::spawn(host_git::user_excludes_file());
        let cell = self.base_listing.clone();
        // The index alone is read: no work tree.
        let git = self.paddock_git(Some(&self.git_dir().join("index")), false);
        tokio::spawn(async move {
            cell.get_or_init(|| async move {
                let tracked = Tracked::read(&git, MAX_BASE_PATH_BYTES, MAX_LISTED_RECORD);
                Some(Arc::new(tracked.await.ok()?))
            })
            .await;
        });
        let cell = self.base_tree.clone();
        let git = self.paddock_git(None, false);
        let tree_of = format!("{}^{{tree}}", self.base_commit);
        tokio::spawn(async move {
            cell.get_or_init(|| async move {
                let args = ["rev-parse", "--verify", "--end-of-options", &tree_of];
                let out = git.run(args, None).await.ok()?;
                let tree = String::from_utf8_lossy(&out).trim().to_string();
                is_object_name(&tree).then_some(tree)
            })
            .await;
        });
    }

    /// Starts the patch's diff before the final tree exists, when the base
    /// commit's tree was read early ([`Workspace::list_base_soon`]): `git
    /// diff-tree --stdin` (plumbing, so `-r -M` are spelled out: `git
    /// diff`'s recursion and its default rename detection) reads the two
    /// trees from its stdin once the tree is written
    /// ([`Workspace::diff_staged_with`]), its start-up beside the patch's
    /// staging (issue #14). `None` otherwise: [`Workspace::diff_staged`]
    /// runs `git diff` then, as before.
    pub fn start_diff(&self) -> Option<StartedDiff> {
        let base_tree = self.base_tree.get()?.clone()?;
        let mut args = vec!["diff-tree", "--stdin", "-r", "-M"];
        args.extend(DIFF_ARGS);
        let started = self.paddock_git(None, false).start(args).ok()?;
        Some(StartedDiff { started, base_tree })
    }

    /// Whether the patch's early reads ([`Workspace::list_base_soon`])
    /// were started, shared with the workspace's copies.
    #[cfg(test)]
    pub(crate) fn early_reads(&self) -> Arc<std::sync::atomic::AtomicBool> {
        self.early_reads.clone()
    }

    /// The base's paths: as [`Workspace::list_base_soon`] read them
    /// (awaited if it is still reading), else read now from `git`'s index
    /// (a copy of Paddock's).
    async fn base_paths(&self, git: &HostGit) -> Result<Arc<Tracked>, WorkspaceError> {
        // Settles the listing as absent unless the early read holds it
        // (or is under way: then this waits for it).
        let early = self
            .base_listing
            .get_or_init(|| std::future::ready(None))
            .await;
        match early {
            Some(tracked) => Ok(tracked.clone()),
            None => Ok(Arc::new(
                Tracked::read(git, MAX_BASE_PATH_BYTES, MAX_LISTED_RECORD).await?,
            )),
        }
    }

    /// Stages the work tree's content in `git`'s index (a copy of the
    /// checkout's): files gone removed, files read added, build output
    /// left out. The work tree as listed. On an overlay only what its
    /// upper layer names is read (`upper.rs`); the base's files the job
    /// left alone stay as the index has them.
    ///
    /// The `update-index` that stages what the walk read is started before
    /// the walk, reading its paths from stdin once the walk has listed
    /// them: its start-up (exec, the index read) runs beside the walk
    /// instead of after it (issue #14). It replaces a tracked path that a
    /// staged one conflicts with (a file become a directory, or the
    /// reverse: `--replace`), and the tracked paths that are gone are
    /// removed after it: the index that results is the one removing them
    /// first made, since such a conflicting path is always among them.
    ///
    /// A sealed copy ([`Workspace::sealed`]) reads the files itself instead
    /// (`sealed_stage.rs`), with ignore and attribute rules from a shadow
    /// of the tree's ignore and attribute files (`ignore_shadow.rs`), and
    /// refuses a tree with a file git would convert by its attributes.
    async fn stage_work_tree(
        &self,
        git: &HostGit,
        index: &Path,
        start: &mut (dyn FnMut() + Send),
    ) -> Result<(FinalTree, Arc<Tracked>), WorkspaceError> {
        let add = ["update-index", "--add", "--replace", "-z", "--stdin"];
        let staging = if self.sealed {
            let tracked = self.base_paths(git).await?;
            let shadow = ignore_shadow::IgnoreShadow::make(
                git,
                &self.meta,
                &self.work,
                tracked.read_by_git(),
            )
            .await?;
            (Staging::Sealed(shadow), tracked)
        } else {
            let adding = git.start(add)?;
            (
                Staging::ByPath(Box::new(adding)),
                self.base_paths(git).await?,
            )
        };
        let (staging, tracked) = staging;
        let shadow = match &staging {
            Staging::Sealed(shadow) => Some(shadow),
            Staging::ByPath(_) => None,
        };
        let upper = self.upper_layer();
        let mut started = false;
        let mut after_level = |depth: usize| {
            if depth >= 1 && !std::mem::replace(&mut started, true) {
                start();
            }
        };
        let budget = final_tree::Budget {
            changed_after: modified_at(index),
            max: MAX_PATCH_BYTES,
            max_paths: MAX_FINAL_PATH_BYTES,
        };
        let mut tree = final_tree::list_with(
            git,
            &self.work,
            &tracked,
            upper.as_ref(),
            budget,
            &mut after_level,
            shadow,
        )
        .await?;
        if !started {
            start();
        }
        // `update-index` wants a work tree to remove paths, though it
        // reads none: a sealed staging's is the shadow, Paddock's own.
        // The shadow is kept until the removal is done.
        let (remover, _shadow) = match staging {
            Staging::ByPath(adding) => {
                let (status, _, stderr) = adding.finish(&nul_list(&tree.staged)).await?;
                if !status.success() {
                    return Err(git.failed(add, &stderr));
                }
                tree.refused = final_tree::refused_paths(&stderr);
                (git.clone(), None)
            }
            Staging::Sealed(shadow) => {
                tree.refused = sealed_stage::stage(
                    git,
                    &self.work,
                    &tree.staged,
                    &shadow,
                    self.base_commit.len() == 64,
                )
                .await?;
                let remover = HostGit {
                    work_tree: Some(shadow.dir().to_path_buf()),
                    ..git.clone()
                };
                (remover, Some(shadow))
            }
        };
        if !tree.gone.is_empty() {
            let args = ["update-index", "--force-remove", "-z", "--stdin"];
            remover.run(args, Some(&nul_list(&tree.gone))).await?;
        }
        Ok((tree, tracked))
    }

    /// This workspace, its patch staged without git reading its work tree
    /// by path (`sealed_stage.rs`): what a patch made while a confined job
    /// is still alive reads (`runner/early_patch.rs`). A tree it does not
    /// read fails the staging with `SealedStaging`.
    pub(crate) fn sealed(&self) -> Workspace {
        Workspace {
            sealed: true,
            ..self.clone()
        }
    }

    /// This workspace, its gits on the job's content held to `cpu` (the
    /// host profile's `git_cpu_secs`: `host_git::job_git_cpu`).
    pub(crate) fn with_git_cpu(self, cpu: std::time::Duration) -> Workspace {
        Workspace {
            git_cpu: cpu,
            ..self
        }
    }

    /// The CPU each of its gits on the job's content may use.
    pub(crate) fn git_cpu(&self) -> std::time::Duration {
        self.git_cpu
    }

    /// The print of everything the job wrote (`upper_print.rs`), on an
    /// overlay workspace whose `work/` is mounted; `None` otherwise, or
    /// when it cannot be taken whole. Blocking: it reads the job's files.
    pub(crate) fn upper_print(&self) -> Option<upper_print::UpperPrint> {
        self.upper_layer()?;
        upper_print::UpperPrint::take(&self.meta.join(UPPER), &self.work)
    }

    /// A print of the same layer to compare with `earlier`, taken with its
    /// key.
    pub(crate) fn upper_print_again(
        &self,
        earlier: &upper_print::UpperPrint,
    ) -> Option<upper_print::UpperPrint> {
        self.upper_layer()?;
        earlier.again(&self.meta.join(UPPER), &self.work)
    }

    /// The upper layer of an overlay workspace whose `work/` is mounted
    /// (what the patch reads narrows to); `None` for a clone, a kept
    /// workspace made a plain directory, or an upper layer that cannot be
    /// opened as a directory (the whole tree is walked then).
    fn upper_layer(&self) -> Option<upper::Upper> {
        if !crate::own_file::is_file(&self.meta.join(OVERLAY)) || !overlay::is_mounted(&self.work) {
            return None;
        }
        upper::Upper::open(&self.meta.join(UPPER)).ok()
    }

    /// Stages the files Paddock extended (AGENTS.md, CLAUDE.md) without
    /// Paddock's generated section, or as they were when the agent rewrote
    /// that section; the warnings for the latter.
    async fn restore_extended(
        &self,
        git: &HostGit,
        tree: &FinalTree,
        tracked: &Tracked,
    ) -> Result<Vec<String>, WorkspaceError> {
        let mut warnings = Vec::new();
        for ext in self.extended()? {
            // Deleted, or no longer a plain file: the agent's change stands.
            if !tree.is_present(tracked, ext.path.as_bytes()) {
                continue;
            }
            let current = match beneath::read_text(&self.work, &ext.path, MAX_EXTENDED_BYTES) {
                None => continue,
                Some(beneath::Text::Whole(text)) => Some(text),
                Some(beneath::Text::Longer(len)) => {
                    warnings.push(format!(
                        "{}: the agent made it {len} bytes long, more than the {MAX_EXTENDED_BYTES} \
                         Paddock reads of a file it extended; the file is left out of the patch",
                        ext.path
                    ));
                    None
                }
            };
            let restored = match current.as_deref().map(|c| strip_extension(c, &ext)) {
                Some(Some(text)) => text,
                Some(None) => {
                    warnings.push(format!(
                        "{}: the agent rewrote Paddock's generated section; the file is left out of the patch",
                        ext.path
                    ));
                    ext.original.clone()
                }
                None => ext.original.clone(),
            };
            let args = ["hash-object", "-w", "--no-filters", "--stdin"];
            let sha = git.run(args, Some(restored.as_bytes())).await?;
            let sha = String::from_utf8_lossy(&sha).trim().to_string();
            let staged = git
                .run(["ls-files", "--stage", "-z", "--", &ext.path], None)
                .await?;
            let mode = Tracked::parse(&staged)
                .mode(ext.path.as_bytes())
                .unwrap_or("100644")
                .to_string();
            let info = format!("{mode},{sha},{}", ext.path);
            git.run(["update-index", "--add", "--cacheinfo", &info], None)
                .await?;
        }
        Ok(warnings)
    }

    /// The diff from the base commit to `tree_id` and the names it changes,
    /// from one git: `--raw -z` before the patch gives each changed path
    /// NUL-terminated, exactly as it is, never quoted. Two trees compared:
    /// no work tree, no index. Every choice that shapes the text is spelled
    /// out (prefixes, paths relative to the top, no colour, no external or
    /// textconv driver), so the patch is the same whatever configuration
    /// git could still read.
    async fn diff_to(
        &self,
        tree_id: &str,
        max: u64,
    ) -> Result<(String, Vec<String>), WorkspaceError> {
        let mut args = vec!["diff"];
        args.extend(DIFF_ARGS);
        args.extend([self.base_commit.as_str(), tree_id, "--"]);
        let objects = self.paddock_git(None, false);
        let (status, out, stderr) = objects.start(&args)?.at_most(max).finish(&[]).await?;
        if !status.success() {
            return Err(objects.failed(&args, &stderr));
        }
        diff_and_names(&out)
            .ok_or_else(|| objects.failed(&args, b"its --raw output is not what git writes"))
    }

    /// [`Workspace::diff_to`] by the `diff-tree` started early: the base's
    /// tree and `tree_id` on its stdin; it prints that line back before
    /// its output, which is `git diff`'s.
    async fn diff_started(
        &self,
        started: StartedDiff,
        tree_id: &str,
        max: u64,
    ) -> Result<(String, Vec<String>), WorkspaceError> {
        let line = format!("{} {tree_id}\n", started.base_tree);
        // The trees' line it prints back first is not the patch's.
        let held = max.saturating_add(line.len() as u64);
        let (status, out, stderr) = started
            .started
            .at_most(held)
            .finish(line.as_bytes())
            .await
            .map_err(|e| match e {
                WorkspaceError::GitOutputPastLimit { path, args, .. } => {
                    WorkspaceError::GitOutputPastLimit {
                        path,
                        args,
                        limit: max,
                    }
                }
                e => e,
            })?;
        let args = ["diff-tree", "--stdin", "-r", "-M"];
        if !status.success() {
            return Err(self.paddock_git(None, false).failed(args, &stderr));
        }
        out.strip_prefix(line.as_bytes())
            .and_then(diff_and_names)
            .ok_or_else(|| {
                self.paddock_git(None, false).failed(
                    args,
                    b"its output is not the trees' line, then what git diff writes",
                )
            })
    }

    /// Removes the whole job directory from its place: it is renamed into
    /// the jobs directory's trash, an overlay workspace's mount with it
    /// (one `rename(2)`: a mount inside a directory moves with it), and
    /// both the unmount and the deletion are done off the job's path by
    /// whoever empties the trash (`trash.rs`: the mount first, never a
    /// walk through it; only the upper layer is removed). The unmount is
    /// not cheap: it evicts every file of the tree the job's gits looked
    /// up (at 10,000 files ≈ 20 ms of CPU time on a loaded machine, issue
    /// #14). Where the rename fails, the mount is unmounted and the
    /// directory deleted in place.
    pub fn remove(&self) -> Result<(), WorkspaceError> {
        let failed = |source| WorkspaceError::Remove {
            path: self.root.clone(),
            source,
        };
        match trash::discard(&self.root) {
            Ok(_) => Ok(()),
            Err(_) => {
                overlay::unmount_work(&self.root).map_err(failed)?;
                remove::remove_tree(&self.root).map_err(failed)
            }
        }
    }

    /// A kept workspace made a plain directory when it is an overlay
    /// (`keep.rs`); `None` for a clone, or one done already.
    pub fn settle_kept(&self) -> Result<Option<keep::Settled>, WorkspaceError> {
        keep::settle(&self.root)
    }

    /// [`Workspace::remove`] deleting in place, now (a job unwinding,
    /// whose trash no one would empty until the next reaper pass).
    pub fn remove_now(&self) -> Result<(), WorkspaceError> {
        let failed = |source| WorkspaceError::Remove {
            path: self.root.clone(),
            source,
        };
        overlay::unmount_work(&self.root).map_err(failed)?;
        remove::remove_tree(&self.root).map_err(failed)
    }

    /// Mounts an overlay workspace's `work/` again when it is not (the
    /// host restarted since the job ran), so its patch sees the job's
    /// work; a clone workspace, or one whose snapshot is gone, is left.
    fn remount(&self) -> Result<(), WorkspaceError> {
        let Ok(lower) = crate::own_file::read(&self.meta.join(OVERLAY), MAX_NAME_RECORD) else {
            return Ok(());
        };
        let lower = PathBuf::from(lower.trim_end_matches('\n'));
        if overlay::is_mounted(&self.work) || !lower.is_dir() {
            return Ok(());
        }
        let (upper, workdir) = (self.meta.join(UPPER), self.meta.join(OVERLAY_WORK));
        overlay::forget_volatile(&workdir).map_err(|source| WorkspaceError::Remove {
            path: workdir.clone(),
            source,
        })?;
        overlay::mount_at(&lower, &upper, &workdir, &self.work).map_err(|source| {
            WorkspaceError::Create {
                path: self.work.clone(),
                source,
            }
        })
    }
}

/// The up-to-date mirror of the URL source `url` under `jobs_root`, with
/// the spec's token, and what `then` read from it
/// ([`mirror::fetched_then`]).
async fn fetched_mirror_then<T, F, Fut>(
    jobs_root: &Path,
    repo: &RepositorySpec,
    url: &str,
    then: F,
) -> Result<(mirror::Mirror, T), WorkspaceError>
where
    T: mirror::MirrorRead,
    F: Fn(PathBuf, mirror::Names) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let token = repository_token(repo, url)?;
    // A `HEAD` base is the remote's default branch as it is now.
    let follow_head = repo.base_ref == "HEAD";
    mirror::fetched_then(jobs_root, url, token.as_ref(), follow_head, then).await
}

/// Fetches the job's base, a full commit name (`repo.base_ref`) that the
/// mirror `dir` of `url` lacks after its fetch (no ref the URL advertises
/// reaches it: a force-push dropped it), from the URL by its name (`git
/// fetch origin <commit>`, no ref written; the mirror's automatic gc is
/// off, so nothing prunes it while a job uses it), as a later publish
/// does ([`refetch_mirror_for`]). A server that refuses to give a commit
/// no ref reaches is a `BaseByName` error naming the URL, the commit and
/// git's message.
async fn base_by_name(dir: &Path, repo: &RepositorySpec, url: &str) -> Result<(), WorkspaceError> {
    let token = repository_token(repo, url)?;
    match mirror::fetch_commit(dir, url, token.as_ref(), &repo.base_ref).await {
        Ok(()) => Ok(()),
        Err(e) => Err(WorkspaceError::BaseByName {
            source_repo: url.to_string(),
            base: repo.base_ref.clone(),
            stderr: match e {
                WorkspaceError::Clone { stderr, .. } => stderr,
                other => other.to_string(),
            },
        }),
    }
}

/// The spec's `repository.token` for the URL source `url`, resolved.
fn repository_token(
    repo: &RepositorySpec,
    url: &str,
) -> Result<Option<crate::secret::Secret>, WorkspaceError> {
    repo.token
        .as_ref()
        .map(|r| crate::secret::Secret::resolve(crate::secret::SecretKind::RepositoryToken, r))
        .transpose()
        .map_err(|source| WorkspaceError::Token {
            source_repo: url.to_string(),
            source,
        })
}

/// A URL source's mirror made again for a later publish whose base the
/// host lost (the mirror pruned or removed after the job): its objects,
/// and its lock held until this is dropped, so no prune or job remakes it
/// while a push borrows them.
#[derive(Debug)]
pub struct RefetchedMirror(mirror::Mirror);

impl RefetchedMirror {
    /// The mirror's object directory.
    pub fn objects(&self) -> PathBuf {
        self.0.dir.join("objects")
    }
}

/// The mirror of the URL source `url` of `repo` under `jobs_root` made
/// again (cloned afresh, as a job's start makes it) when it is gone
/// (removed by hand, or pruned), for a later publish that reads what it
/// names (its `HEAD`: the remote's default branch, a `HEAD`-based job's
/// pull request base); `None` when it is there.
pub async fn mirror_again_if_gone(
    jobs_root: &Path,
    repo: &RepositorySpec,
    url: &str,
) -> Result<Option<RefetchedMirror>, WorkspaceError> {
    if mirror::dir_of(jobs_root, url).is_dir() {
        return Ok(None);
    }
    let token = repository_token(repo, url)?;
    let (held, ()) =
        mirror::fetched_then(jobs_root, url, token.as_ref(), false, |_, _| async {}).await?;
    Ok(Some(RefetchedMirror(held)))
}

/// The mirror of the URL source `url` of `repo` under `jobs_root`, made
/// to hold the commit `base` a later publish needs: fetched (or cloned
/// afresh) as a job's start fetches it, then, should `base` still be
/// missing (the remote rewritten, a force-push, and the mirror made again
/// since), asked for by name (a server that keeps the dropped commit and
/// lets a client want it, as GitHub does, gives it back; nothing names it
/// in the mirror, whose automatic gc is off). A `MirrorLacksBase` error
/// names the base, the mirror and the URL when the remote has lost it.
pub async fn refetch_mirror_for(
    jobs_root: &Path,
    repo: &RepositorySpec,
    url: &str,
    base: &str,
) -> Result<RefetchedMirror, WorkspaceError> {
    let lacks = || WorkspaceError::MirrorLacksBase {
        base: base.to_string(),
        mirror: mirror::dir_of(jobs_root, url),
        source_repo: url.to_string(),
    };
    // Only a commit's full name reaches git's command line.
    if !matches!(base.len(), 40 | 64) || !base.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(lacks());
    }
    let token = repository_token(repo, url)?;
    let (held, ()) =
        mirror::fetched_then(jobs_root, url, token.as_ref(), false, |_, _| async {}).await?;
    if !mirror::has_commit(&held.dir, url, base).await {
        // Refused by a server that gives only what its refs reach.
        let _ = mirror::fetch_commit(&held.dir, url, token.as_ref(), base).await;
        if !mirror::has_commit(&held.dir, url, base).await {
            return Err(lacks());
        }
    }
    Ok(RefetchedMirror(held))
}

/// Whether an overlay workspace can be had for `repo` at `root` under
/// `jobs_root`; why not when it cannot.
fn overlay_unavailable(jobs_root: &Path, root: &Path, repo: &RepositorySpec) -> Result<(), String> {
    if repo
        .path
        .as_ref()
        .is_some_and(|path| path.starts_with(jobs_root))
    {
        // A turn's inline files (`inline_source.rs`): used once, a
        // snapshot of them would be made for nothing.
        return Err("the source is inside Paddock's jobs directory, used once".into());
    }
    if !overlay::may_mount() {
        return Err("this process cannot mount (no CAP_SYS_ADMIN)".into());
    }
    if !overlay::nameable(root) {
        return Err(
            "the jobs directory's path holds `,`, `:` or `\\`, which overlay's options cannot name"
                .into(),
        );
    }
    Ok(())
}

/// The first 12 characters of an object name.
fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// The commit `base` names in `source`, read with the user's git in the
/// repository at `path`: the local source itself (`local`), or a URL's
/// bare mirror. `origin/X` is a branch literally named `origin/X`, then,
/// in a local source, its remote-tracking branch `refs/remotes/origin/X`
/// (what git itself reads `origin/X` as there: the remote's branch as last
/// fetched), then its own branch `X` (as a clone of the source names it;
/// a mirror's remote-tracking refs are the remote's own business, never
/// read). A name found only as a local source's remote-tracking branch
/// (`X` with `refs/remotes/origin/X` alone) is refused saying to write
/// `origin/X`, as `git rev-parse X` refuses it.
///
/// Each `git rev-parse` is held to `cpu` (`host_git::job_git_cpu`): a
/// spec's `^{/REGEX}` is matched against every commit message it walks,
/// and a regex within the syntax a spec may write (`(a|aa)*(a|aa)*b`)
/// against a long message takes git minutes of the host's CPU (before,
/// unbounded: a hostile spec given to `paddock serve` spun the host).
/// Its end at the limit is `BaseRefCpuLimit`.
async fn resolve_in_source(
    path: &Path,
    source: &str,
    base: &str,
    local: bool,
    cpu: std::time::Duration,
) -> Result<String, WorkspaceError> {
    let mut candidates = vec![format!("{base}^{{commit}}")];
    if let Some(branch) = base.strip_prefix("origin/") {
        candidates = vec![format!("refs/heads/{base}^{{commit}}")];
        if local {
            candidates.push(format!("refs/remotes/{base}^{{commit}}"));
        }
        candidates.push(format!("refs/heads/{branch}^{{commit}}"));
    }
    for candidate in candidates {
        let args = [
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &candidate,
        ];
        let read = user_git_given(path, args, &[], &[], UserGitInput::None, Some(cpu)).await;
        match read {
            Ok(out) if is_object_name(out.trim()) => return Ok(out.trim().to_string()),
            Err(WorkspaceError::GitCpuLimit { limit, .. }) => {
                return Err(WorkspaceError::BaseRefCpuLimit {
                    source_repo: source.to_string(),
                    base_ref: base.to_string(),
                    limit,
                })
            }
            Ok(_) | Err(_) => {}
        }
    }
    let tracking = format!("refs/remotes/origin/{base}");
    let plain = !base.starts_with("refs/") && !base.starts_with("origin/");
    if local
        && plain
        && user_git(path, ["show-ref", "--verify", "--quiet", &tracking])
            .await
            .is_ok()
    {
        return Err(WorkspaceError::BaseRefRemoteOnly {
            source_repo: source.to_string(),
            base_ref: base.to_string(),
        });
    }
    // A repository with no commit at all (made by `git init`, its branch
    // unborn) has no base to name: said so, not as a ref it lacks.
    if local
        && user_git(path, ["for-each-ref", "--count=1", "--format=%(refname)"])
            .await
            .is_ok_and(|refs| refs.trim().is_empty())
    {
        return Err(WorkspaceError::NoCommits {
            source_repo: source.to_string(),
            base_ref: base.to_string(),
        });
    }
    Err(WorkspaceError::BaseRef {
        source_repo: source.to_string(),
        base_ref: base.to_string(),
        known: base_ref_names(path).await,
    })
}

/// How many of a source's branches a refused base ref lists.
const NAMED_BRANCHES: usize = 8;

/// The branches of the repository at `path` (a local source, a URL's
/// mirror), for a base ref it lacks: `; its branches: main, dev (and 3
/// more); set repository.base_ref to one of them, a tag or a commit`, the
/// most recently committed first, at most [`NAMED_BRANCHES`] of them, each
/// cut to 100 characters (a remote's names are its own); empty when none
/// can be read. Before, the refusal named no branch, and a mistyped
/// `mian` left the user to look.
async fn base_ref_names(path: &Path) -> String {
    let Ok(out) = user_git(
        path,
        [
            "for-each-ref",
            "--sort=-committerdate",
            "--format=%(refname:short)",
            "refs/heads/",
        ],
    )
    .await
    else {
        return String::new();
    };
    let names: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    if names.is_empty() {
        return String::new();
    }
    let shown: Vec<String> = names
        .iter()
        .take(NAMED_BRANCHES)
        .map(|n| crate::cut_text::cut(n, crate::cut_text::Cut::chars(100)))
        .collect();
    let more = match names.len().saturating_sub(NAMED_BRANCHES) {
        0 => String::new(),
        n => format!(" (and {n} more)"),
    };
    format!(
        "; its branches: {}{more}; set repository.base_ref to one of them, a tag or a commit",
        shown.join(", ")
    )
}

/// Copies the index `from` to `to` with `from`'s modification time: git
/// takes an entry stamped in the same second as its index or later as
/// racily clean and compares its content, so a file the job changed
/// (keeping its size) in the second its checkout was made is not missed
/// because a copy of the index looked newer.
fn copy_index(from: &Path, to: &Path) -> std::io::Result<u64> {
    let copied = std::fs::copy(from, to)?;
    let modified = std::fs::metadata(from)?.modified()?;
    std::fs::File::options()
        .write(true)
        .open(to)?
        .set_modified(modified)?;
    Ok(copied)
}

/// The index `from` given a second name `to` (a hard link: its content
/// and modification time are `from`'s, as [`copy_index`] makes them), or a
/// copy where no link can be made (another file system, a link count at
/// its maximum). Git never writes an index file in place: it writes
/// `to.lock` and renames it over `to`, so `from` is left as it is by
/// whatever git does with `to` (issue #14: at 10,000 files the index is
/// about a megabyte, copied once at provisioning and once a patch, on
/// the job's path). Only for an index Paddock made and the job cannot
/// write (its snapshot's, its own `meta/git`): a link to a file of the
/// job's tree would let the job write Paddock's index through its own
/// name.
fn link_index(from: &Path, to: &Path) -> std::io::Result<()> {
    match std::fs::hard_link(from, to) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(e),
        Err(_) => copy_index(from, to).map(|_| ()),
    }
}

/// `path`'s modification time (seconds, nanoseconds); `None` when it
/// cannot be read.
fn modified_at(path: &Path) -> Option<(i64, i64)> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.mtime(), meta.mtime_nsec()))
}

#[cfg(unix)]
fn set_private(path: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700));
}

#[cfg(not(unix))]
fn set_private(_path: &Path) {}

/// `git -C dir ARGS` with the user's configuration, for the user's own
/// source repository; no optional lock taken (`status` writes no index).
pub(crate) async fn user_git<I, S>(dir: &Path, args: I) -> Result<String, WorkspaceError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    user_git_with(dir, args, &[]).await
}

/// [`user_git`] with `settings` (key, value) given to git in its
/// environment (`GIT_CONFIG_COUNT`: any key, whatever characters its
/// subsection holds), outranking the user's configuration.
pub(crate) async fn user_git_with<I, S>(
    dir: &Path,
    args: I,
    settings: &[(String, String)],
) -> Result<String, WorkspaceError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    user_git_given(dir, args, settings, &[], UserGitInput::None, None).await
}

/// What a [`user_git_given`] reads on its stdin.
pub(crate) enum UserGitInput<'a> {
    /// Nothing (`/dev/null`).
    None,
    /// These bytes.
    Bytes(&'a [u8]),
    /// This file, from its current offset.
    File(std::fs::File),
}

/// [`user_git_with`] with `env` (name, value) set too, reading `input` on
/// its stdin; held to `cpu` of CPU when given (a git that reads a job's
/// content: its bundle, its pack, `host_git::JOB_GIT_CPU`), its end at it
/// `GitCpuLimit`.
pub(crate) async fn user_git_given<I, S>(
    dir: &Path,
    args: I,
    settings: &[(String, String)],
    env: &[(&str, &str)],
    input: UserGitInput<'_>,
    cpu: Option<std::time::Duration>,
) -> Result<String, WorkspaceError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<String> = args
        .into_iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect();
    let mut cmd = Command::from(users_git::command());
    if !settings.is_empty() {
        cmd.env("GIT_CONFIG_COUNT", settings.len().to_string());
        for (i, (key, value)) in settings.iter().enumerate() {
            cmd.env(format!("GIT_CONFIG_KEY_{i}"), key)
                .env(format!("GIT_CONFIG_VALUE_{i}"), value);
        }
    }
    cmd.arg("-C")
        .arg(dir)
        .args(&args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .envs(env.iter().copied());
    let bytes = match input {
        UserGitInput::None => {
            cmd.stdin(Stdio::null());
            None
        }
        UserGitInput::Bytes(bytes) => Some(bytes),
        UserGitInput::File(file) => {
            cmd.stdin(Stdio::from(file));
            None
        }
    };
    let out = match cpu {
        None => host_git::output_within(cmd, bytes, host_git::GIT_TIMEOUT).await,
        Some(cpu) => host_git::output_within_cpu(cmd, bytes, host_git::GIT_TIMEOUT, cpu).await,
    }
    .map_err(|source| WorkspaceError::Spawn {
        path: dir.to_path_buf(),
        source,
    })?
    .ok_or_else(|| WorkspaceError::GitTimeout {
        path: dir.to_path_buf(),
        args: args.join(" "),
        after: host_git::GIT_TIMEOUT,
    })?;
    host_git::check_cpu(&out.status, cpu, dir, &args)?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(WorkspaceError::Git {
            path: dir.to_path_buf(),
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A temporary directory whose jobs' overlay mounts (`jobs/*/work`)
    /// are unmounted before it is removed, however a test ends: a
    /// workspace a test does not remove is mounted on the default layout.
    struct TmpDir(tempfile::TempDir);

    impl TmpDir {
        fn new() -> TmpDir {
            TmpDir(tempfile::tempdir().unwrap())
        }

        fn path(&self) -> &Path {
            self.0.path()
        }
    }

    impl Drop for TmpDir {
        fn drop(&mut self) {
            let jobs = self.path().join("jobs");
            for dir in [jobs.clone(), jobs.join(trash::TRASH)] {
                if let Ok(jobs) = std::fs::read_dir(dir) {
                    for job in jobs.flatten() {
                        let _ = overlay::unmount(&job.path().join("work"));
                    }
                }
            }
        }
    }

    fn sh(dir: &Path, args: &[&str]) {
        let ok = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }

    fn repo(dir: &Path) -> PathBuf {
        let r = dir.join("repo");
        std::fs::create_dir(&r).unwrap();
        sh(&r, &["init", "-q", "-b", "main"]);
        std::fs::write(r.join("README.md"), "hello\n").unwrap();
        std::fs::write(r.join(".gitignore"), "target/\n").unwrap();
        sh(&r, &["add", "."]);
        sh(&r, &["commit", "-q", "-m", "init"]);
        r
    }

    fn spec(path: PathBuf, base: &str) -> RepositorySpec {
        RepositorySpec {
            path: Some(path),
            url: None,
            base_ref: base.into(),
            token: None,
        }
    }

    /// A job directory that is already there (e.g. a kept workspace) makes
    /// provisioning fail, and is left as it was.
    #[tokio::test]
    async fn a_failed_provision_removes_only_what_it_made() {
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        let jobs = tmp.path().join("jobs");
        std::fs::create_dir_all(jobs.join("job1")).unwrap();
        std::fs::write(jobs.join("job1/keep.txt"), b"kept\n").unwrap();
        let err = Workspace::provision(&jobs, "job1", &spec(r, "main"), "paddock/T-1/1")
            .await
            .unwrap_err();
        assert!(
            matches!(&err, WorkspaceError::Create { path, .. } if *path == jobs.join("job1")),
            "{err}"
        );
        assert_eq!(
            (
                std::fs::read(jobs.join("job1/keep.txt")).unwrap(),
                leases_in(&jobs)
            ),
            (b"kept\n".to_vec(), Vec::<String>::new())
        );
    }

    /// `f` on a thread of its own, given 10 s: "waited" when it is not
    /// done by then (a read held on a FIFO).
    fn within_10s(f: impl FnOnce() -> String + Send + 'static) -> String {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(f()));
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .unwrap_or_else(|_| "waited".to_string())
    }

    /// Paddock's records in `meta/`, which a `process`-rung job (Paddock's
    /// own user) can replace, are read back only as regular files within a
    /// bound: when the reaper reopens the workspace, a FIFO in
    /// `meta/base_commit`'s place is refused at once (was: the reaper's
    /// pass, and the server's start, waited on it for ever), a link to
    /// `/dev/zero` is refused unread (was: read until Paddock's memory was
    /// full), a link to a host file naming a commit is not taken for the
    /// record; a FIFO in `meta/extended.jsonl`'s place fails the patch at
    /// once instead of holding it.
    #[tokio::test]
    async fn planted_meta_records_are_refused_not_followed_or_waited_on() {
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        let jobs = tmp.path().join("jobs");
        let ws = Workspace::provision(&jobs, "job1", &spec(r, "main"), "paddock/T-1/1")
            .await
            .unwrap();
        let base = ws.meta.join(BASE_COMMIT);
        let host = tmp.path().join("host-file");
        std::fs::write(&host, format!("{}\n", ws.base_commit)).unwrap();
        let fifo = || nix::unistd::mkfifo(&base, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let zero = || std::os::unix::fs::symlink("/dev/zero", &base).unwrap();
        let to_host = || std::os::unix::fs::symlink(&host, &base).unwrap();
        let mut said = Vec::new();
        for (i, plant) in [&fifo as &dyn Fn(), &zero, &to_host]
            .into_iter()
            .enumerate()
        {
            std::fs::remove_file(&base).unwrap();
            plant();
            let (jobs, lease) = (
                jobs.clone(),
                Lease::take(&jobs, &format!("reaper{i}")).unwrap(),
            );
            said.push(within_10s(move || {
                match Workspace::reopen(&jobs, "job1", lease, "paddock/T-1/1") {
                    Ok(Some(_)) => "reopened".to_string(),
                    Ok(None) => "none".to_string(),
                    Err(e) => e.to_string(),
                }
            }));
        }
        nix::unistd::mkfifo(&ws.meta.join(EXTENDED), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let extended = ws.meta.join(EXTENDED);
        said.push(within_10s(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            match rt.block_on(ws.patch()) {
                Ok(_) => "patched".to_string(),
                Err(e) => e.to_string(),
            }
        }));
        let cannot = |file: &Path, why: String| {
            format!(
                "workspace {}: cannot read {}: {why}",
                jobs.join("job1").display(),
                file.display()
            )
        };
        let eloop = std::io::Error::from_raw_os_error(nix::libc::ELOOP).to_string();
        assert_eq!(
            said,
            [
                cannot(&base, "not a regular file".into()),
                cannot(&base, eloop.clone()),
                cannot(&base, eloop),
                cannot(&extended, "not a regular file".into()),
            ]
        );
    }

    #[tokio::test]
    async fn provision_patch_and_remove() {
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        let jobs = tmp.path().join("jobs");
        let ws = Workspace::provision(&jobs, "job1", &spec(r, "main"), "paddock/T-1/1")
            .await
            .unwrap();
        assert!(ws.work.join("README.md").exists());
        assert_eq!(
            user_git(&ws.work, ["rev-parse", "--abbrev-ref", "HEAD"])
                .await
                .unwrap()
                .trim(),
            "paddock/T-1/1"
        );
        assert_eq!(
            user_git(&ws.work, ["config", "core.hooksPath"])
                .await
                .unwrap()
                .trim(),
            "/dev/null"
        );
        ws.write_generated("AGENTS.md", b"# brief\n").await.unwrap();
        ws.write_generated(".agents/skills/a b/SKILL.md", b"skill\n")
            .await
            .unwrap();
        let again = ws.write_generated("README.md", b"x").await.unwrap_err();
        assert_eq!(
            again.to_string(),
            format!(
                "workspace {}: README.md already exists in the checkout; Paddock does not overwrite the repository's files",
                ws.root.display()
            )
        );
        std::fs::write(ws.work.join("README.md"), "hello\nworld\n").unwrap();
        std::fs::write(ws.work.join("new.txt"), "new\n").unwrap();
        std::fs::create_dir(ws.work.join("target")).unwrap();
        std::fs::write(ws.work.join("target/out"), "ignored\n").unwrap();
        let p = ws.patch().await.unwrap();
        assert_eq!(
            p.changed_files,
            vec!["README.md".to_string(), "new.txt".to_string()]
        );
        assert!(p.diff.contains("+world"));
        assert!(p.diff.contains("+++ b/new.txt"));
        assert!(!p.diff.contains("AGENTS.md"));
        assert!(!p.diff.contains(".agents"));
        // The work tree's own index is untouched: nothing staged.
        assert_eq!(
            user_git(&ws.work, ["diff", "--cached", "--name-only"])
                .await
                .unwrap(),
            ""
        );
        ws.remove().unwrap();
        assert!(!ws.root.exists());
    }

    /// The base's paths listed early (beside the engine) give the patch
    /// exactly what listing them at the end gives: a changed file, a new
    /// one and a deletion. An early read that failed (Paddock's index a
    /// directory for a moment) leaves the listing to the patch.
    #[tokio::test]
    async fn the_base_listed_early_gives_the_same_patch() {
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        let jobs = tmp.path().join("jobs");
        let mut runs = Vec::new();
        for (id, early) in [
            ("late", None),
            ("early", Some(true)),
            ("failed", Some(false)),
        ] {
            let ws = Workspace::provision(&jobs, id, &spec(r.clone(), "main"), "paddock/T-1/1")
                .await
                .unwrap();
            let index = ws.git_dir().join("index");
            let aside = ws.meta.join("index.aside");
            if early == Some(false) {
                std::fs::rename(&index, &aside).unwrap();
                std::fs::create_dir(&index).unwrap();
            }
            if early.is_some() {
                ws.list_base_soon();
                while ws.base_listing.get().is_none() {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
            }
            if early == Some(false) {
                std::fs::remove_dir(&index).unwrap();
                std::fs::rename(&aside, &index).unwrap();
            }
            std::fs::write(ws.work.join("README.md"), "hello\nworld\n").unwrap();
            std::fs::remove_file(ws.work.join(".gitignore")).unwrap();
            std::fs::write(ws.work.join("new.txt"), "new\n").unwrap();
            let listed = ws.base_listing.get().map(Option::is_some);
            runs.push((id, listed, ws.patch().await.unwrap()));
            ws.remove().unwrap();
        }
        let first = runs[0].2.clone();
        assert_eq!(
            (
                first.changed_files.clone(),
                runs.into_iter()
                    .map(|(id, listed, patch)| (id, listed, patch == first))
                    .collect::<Vec<_>>()
            ),
            (
                vec![
                    ".gitignore".to_string(),
                    "README.md".to_string(),
                    "new.txt".to_string()
                ],
                vec![
                    ("late", None, true),
                    ("early", Some(true), true),
                    ("failed", Some(false), true)
                ]
            )
        );
    }

    /// Teardown never follows a link the job planted: links to a
    /// directory and a file outside, at the top of each of the job's
    /// directories and deep in the tree, and `work/.git` swapped for a
    /// link, are removed as links; what they name is left as it was.
    #[tokio::test]
    async fn teardown_removes_planted_links_without_following_them() {
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        let ws = Workspace::provision(&tmp.path().join("jobs"), "j", &spec(r, "main"), "b")
            .await
            .unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(outside.join("dir")).unwrap();
        std::fs::write(outside.join("dir/precious"), "keep\n").unwrap();
        std::fs::write(outside.join("file"), "keep\n").unwrap();
        let plant = |at: &Path| {
            std::fs::create_dir_all(at).unwrap();
            std::os::unix::fs::symlink(outside.join("dir"), at.join("to-dir")).unwrap();
            std::os::unix::fs::symlink(outside.join("file"), at.join("to-file")).unwrap();
        };
        for at in [&ws.work, &ws.home, &ws.tmp, &ws.work.join("a/b/c")] {
            plant(at);
        }
        // Gone (an overlay renames no directory of its lower layer).
        std::fs::remove_dir_all(ws.work.join(".git")).unwrap();
        std::os::unix::fs::symlink(outside.join("dir"), ws.work.join(".git")).unwrap();
        ws.remove().unwrap();
        let listing = |dir: &Path| {
            let mut names: Vec<String> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        };
        assert_eq!(
            (
                ws.root.exists(),
                listing(&outside),
                listing(&outside.join("dir")),
                std::fs::read_to_string(outside.join("dir/precious")).unwrap(),
                std::fs::read_to_string(outside.join("file")).unwrap(),
            ),
            (
                false,
                vec!["dir".to_string(), "file".to_string()],
                vec!["precious".to_string()],
                "keep\n".to_string(),
                "keep\n".to_string(),
            )
        );
    }

    fn overlay_here() -> bool {
        overlay::testable_here()
    }

    async fn overlay_ws(jobs: &Path, id: &str, r: &Path) -> Workspace {
        let lease = Lease::take(jobs, id).unwrap();
        Workspace::provision_as(
            jobs,
            id,
            lease,
            &spec(r.to_path_buf(), "main"),
            "paddock/T/1",
            Layout::Overlay,
        )
        .await
        .unwrap()
    }

    /// Every file under `dir` (links as their target) with its bytes.
    fn files_of(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
        let mut out = std::collections::BTreeMap::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let e = e.unwrap();
                let t = e.file_type().unwrap();
                if t.is_dir() {
                    stack.push(e.path());
                } else if t.is_symlink() {
                    let target = std::fs::read_link(e.path()).unwrap();
                    out.insert(e.path(), target.as_os_str().as_encoded_bytes().to_vec());
                } else {
                    out.insert(e.path(), std::fs::read(e.path()).unwrap());
                }
            }
        }
        out
    }

    /// An overlay workspace: `work/` is a mount of the base's snapshot on
    /// the job's branch, with hooks off; the job's writes through it (a
    /// tracked file, a new one, a deletion, every object file of its
    /// repository rewritten) change neither the source (files and
    /// objects) nor the snapshot, the patch is the job's change, and
    /// teardown unmounts and removes only the job's directory. A second
    /// job on the same commit reuses the snapshot.
    #[tokio::test]
    async fn an_overlay_workspace_never_writes_through_to_the_source_or_snapshot() {
        if !overlay_here() {
            return;
        }
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        sh(&r, &["gc", "-q"]);
        let jobs = tmp.path().join("jobs");
        let ws = overlay_ws(&jobs, "j1", &r).await;
        // Beside each snapshot, its lock (`<name>.lock`, prune.rs).
        let snapshots: Vec<PathBuf> = std::fs::read_dir(jobs.join(snapshot::SNAPSHOTS))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .collect();
        assert_eq!(snapshots.len(), 1, "{snapshots:?}");
        let mode = |p: &Path| {
            std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(p).unwrap().permissions())
                & 0o777
        };
        assert_eq!(mode(&jobs.join(snapshot::SNAPSHOTS)), 0o700);
        let (source_before, snap_before) = (files_of(&r), files_of(&snapshots[0]));
        assert_eq!(
            (
                overlay::is_mounted(&ws.work),
                user_git(&ws.work, ["rev-parse", "--abbrev-ref", "HEAD"])
                    .await
                    .unwrap(),
                user_git(&ws.work, ["config", "core.hooksPath"])
                    .await
                    .unwrap(),
                user_git(&ws.work, ["status", "--porcelain"]).await.unwrap(),
            ),
            (
                true,
                "paddock/T/1\n".into(),
                "/dev/null\n".into(),
                String::new()
            )
        );
        std::fs::write(ws.work.join("README.md"), "changed\n").unwrap();
        std::fs::write(ws.work.join("new.txt"), "new\n").unwrap();
        std::fs::remove_file(ws.work.join(".gitignore")).unwrap();
        let mut rewritten = 0;
        for (path, _) in files_of(&ws.work.join(".git/objects")) {
            let mut perm = std::fs::metadata(&path).unwrap().permissions();
            std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o644);
            std::fs::set_permissions(&path, perm).unwrap();
            std::fs::write(&path, "rewritten").unwrap();
            rewritten += 1;
        }
        assert!(rewritten > 0);
        let p = ws.patch().await.unwrap();
        assert_eq!(
            p.changed_files,
            [".gitignore", "README.md", "new.txt"]
                .map(String::from)
                .to_vec()
        );
        let again = overlay_ws(&jobs, "j2", &r).await;
        assert_eq!(
            std::fs::read_to_string(again.work.join("README.md")).unwrap(),
            "hello\n"
        );
        ws.remove().unwrap();
        again.remove().unwrap();
        assert_eq!(
            (
                files_of(&r) == source_before,
                files_of(&snapshots[0]) == snap_before,
                ws.root.exists(),
                std::fs::read_dir(jobs.join(snapshot::SNAPSHOTS))
                    .unwrap()
                    .filter(|e| e.as_ref().unwrap().path().is_dir())
                    .count(),
            ),
            (true, true, false, 1)
        );
    }

    /// A snapshot's index (its checkout's, and the copy in its `git`) is
    /// stamped in a later second than every file of the checkout, so no
    /// entry is racily clean and no git that writes a copy of it hashes the
    /// base again (`snapshot::settle_index`); yet a base file the job
    /// rewrites at once, keeping its size and setting its modification time
    /// back, is still in the patch (its `ctime` is new), and the files it
    /// left alone are not.
    #[tokio::test]
    async fn a_snapshot_index_has_no_racy_entry_and_a_same_size_rewrite_is_still_seen() {
        if !overlay_here() {
            return;
        }
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        for i in 0..20 {
            std::fs::write(r.join(format!("f{i}.txt")), format!("file {i}\n")).unwrap();
        }
        sh(&r, &["add", "."]);
        sh(&r, &["commit", "-q", "-m", "files"]);
        let jobs = tmp.path().join("jobs");
        let ws = overlay_ws(&jobs, "j", &r).await;
        let w = &ws.work;
        let before = std::fs::metadata(w.join("f3.txt"))
            .unwrap()
            .modified()
            .unwrap();
        std::fs::write(w.join("f3.txt"), "FILE 3\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(w.join("f3.txt"))
            .unwrap()
            .set_modified(before)
            .unwrap();

        let lower = std::fs::read_to_string(ws.meta.join(OVERLAY)).unwrap();
        let tree = PathBuf::from(lower.trim_end());
        let secs = |p: &Path| {
            std::fs::symlink_metadata(p)
                .unwrap()
                .modified()
                .unwrap()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs()
        };
        let index_secs = secs(&tree.join(".git/index"));
        let racy: Vec<PathBuf> = files_of(&tree)
            .into_keys()
            .filter(|p| !p.starts_with(tree.join(".git")) && secs(p) >= index_secs)
            .collect();
        let p = ws.patch().await.unwrap();
        assert_eq!(
            (
                racy,
                secs(&tree.parent().unwrap().join("git/index")) == index_secs,
                p.changed_files,
            ),
            (Vec::<PathBuf>::new(), true, vec!["f3.txt".to_string()])
        );
        assert!(p.diff.contains("-file 3\n+FILE 3\n"), "{}", p.diff);
        ws.remove().unwrap();
    }

    /// On the overlay a directory of the base renames as in a clone (`git
    /// mv`, `rename(2)`: no `EXDEV`), the patch is the rename, and the
    /// snapshot and source are unchanged; a redirect planted straight into
    /// the upper layer (as a root job on the `process` rung could) shows
    /// at most another part of the snapshot, never a path above it.
    #[tokio::test]
    async fn an_overlay_workspace_renames_base_directories_and_redirects_stay_in_the_snapshot() {
        if !overlay_here() {
            return;
        }
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        for (dir, file) in [("src", "a.txt"), ("other", "b.txt")] {
            std::fs::create_dir(r.join(dir)).unwrap();
            std::fs::write(r.join(dir).join(file), format!("{file}\n")).unwrap();
        }
        sh(&r, &["add", "."]);
        sh(&r, &["commit", "-q", "-m", "dirs"]);
        let jobs = tmp.path().join("jobs");
        let ws = overlay_ws(&jobs, "j1", &r).await;
        let snapshot: PathBuf = std::fs::read_dir(jobs.join(snapshot::SNAPSHOTS))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.is_dir())
            .unwrap();
        let (source_before, snap_before) = (files_of(&r), files_of(&snapshot));
        user_git(&ws.work, ["mv", "src", "lib"]).await.unwrap();
        std::fs::rename(ws.work.join("other"), ws.work.join("renamed")).unwrap();
        let p = ws.patch().await.unwrap();
        assert_eq!(
            p.changed_files,
            ["lib/a.txt", "other/b.txt", "renamed/b.txt", "src/a.txt"]
                .map(String::from)
                .to_vec()
        );
        assert_eq!(
            std::fs::read_to_string(ws.work.join("lib/a.txt")).unwrap(),
            "a.txt\n"
        );
        // Planted redirects: above the snapshot's root, and to its `.git`.
        let upper = ws.root.join("meta/upper");
        for (name, target) in [
            ("up", "/../.."),
            ("dots", "/../../../../etc"),
            ("git", "/.git"),
        ] {
            std::fs::create_dir(upper.join(name)).unwrap();
            rustix::fs::setxattr(
                upper.join(name),
                "trusted.overlay.redirect",
                target.as_bytes(),
                rustix::fs::XattrFlags::empty(),
            )
            .unwrap();
        }
        for name in ["up", "dots"] {
            let shown: Vec<String> = std::fs::read_dir(ws.work.join(name))
                .map(|d| {
                    d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            assert!(
                !shown
                    .iter()
                    .any(|n| n == "passwd" || n == "jobs" || n == "repo"),
                "{name}: {shown:?}"
            );
        }
        ws.remove().unwrap();
        assert_eq!(
            (
                files_of(&r) == source_before,
                files_of(&snapshot) == snap_before
            ),
            (true, true)
        );
    }

    /// Teardown of an overlay workspace follows no link the job planted
    /// through the overlay (they are in its upper layer), and a workspace
    /// reopened after its mount went (a restarted host) is mounted again,
    /// so the reaper's patch is the job's work, not every file deleted.
    #[tokio::test]
    async fn an_overlay_workspace_is_remounted_and_its_links_not_followed() {
        if !overlay_here() {
            return;
        }
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        let jobs = tmp.path().join("jobs");
        let ws = overlay_ws(&jobs, "j", &r).await;
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("precious"), "keep\n").unwrap();
        std::os::unix::fs::symlink(&outside, ws.work.join("to-dir")).unwrap();
        std::fs::create_dir_all(ws.work.join("a/b")).unwrap();
        std::os::unix::fs::symlink(outside.join("precious"), ws.work.join("a/b/to-file")).unwrap();
        std::fs::write(ws.work.join("README.md"), "changed\n").unwrap();
        overlay::unmount(&ws.work).unwrap();
        assert!(!overlay::is_mounted(&ws.work));
        let lease = Lease::take(&jobs, "j-reaper").unwrap();
        let reopened = Workspace::reopen(&jobs, "j", lease, "paddock/T/1")
            .unwrap()
            .unwrap();
        let p = reopened.patch().await.unwrap();
        assert_eq!(
            p.changed_files,
            ["README.md", "a/b/to-file", "to-dir"]
                .map(String::from)
                .to_vec()
        );
        reopened.remove().unwrap();
        assert_eq!(
            (ws.root.exists(), files_of(&outside),),
            (
                false,
                [(outside.join("precious"), b"keep\n".to_vec())]
                    .into_iter()
                    .collect()
            )
        );
    }

    /// A kept overlay workspace becomes a plain directory: the merged
    /// view copied (changes, deletions, links as links, a FIFO left out
    /// and named, setuid dropped), nothing mounted, the layers, Paddock's
    /// git directory and `meta/overlay` gone, so pruning may take the
    /// snapshot; the job's repository works there; a second settle has
    /// nothing to do. Settled again after a restart mid-copy (unmounted,
    /// a half-made copy left): the same tree.
    #[tokio::test]
    async fn a_kept_overlay_workspace_becomes_a_plain_directory() {
        if !overlay_here() {
            return;
        }
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        let jobs = tmp.path().join("jobs");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("precious"), "keep\n").unwrap();
        for (id, interrupted) in [("j1", false), ("j2", true)] {
            let ws = overlay_ws(&jobs, id, &r).await;
            std::fs::write(ws.work.join("README.md"), "changed\n").unwrap();
            std::fs::remove_file(ws.work.join(".gitignore")).unwrap();
            std::fs::create_dir_all(ws.work.join("a/b")).unwrap();
            std::fs::write(ws.work.join("a/b/new.txt"), "new\n").unwrap();
            std::os::unix::fs::symlink(&outside, ws.work.join("to-outside")).unwrap();
            std::fs::write(ws.work.join("suid"), "x").unwrap();
            std::fs::set_permissions(
                ws.work.join("suid"),
                std::fs::Permissions::from_mode(0o4755),
            )
            .unwrap();
            let mut expected = files_of(&ws.work);
            expected = expected
                .into_iter()
                .map(|(p, b)| (p.strip_prefix(&ws.work).unwrap().to_path_buf(), b))
                .collect();
            nix::unistd::mkfifo(
                &ws.work.join("fifo"),
                nix::sys::stat::Mode::from_bits_truncate(0o644),
            )
            .unwrap();
            if interrupted {
                overlay::unmount(&ws.work).unwrap();
                std::fs::create_dir_all(ws.meta.join("kept-work.tmp/half")).unwrap();
            }
            let settled = ws.settle_kept().unwrap().unwrap();
            assert_eq!(settled.left_out, ["fifo".to_string()]);
            let got: std::collections::BTreeMap<PathBuf, Vec<u8>> = files_of(&ws.work)
                .into_iter()
                .map(|(p, b)| (p.strip_prefix(&ws.work).unwrap().to_path_buf(), b))
                .collect();
            let meta_left: Vec<bool> = [
                "overlay",
                "upper",
                "overlay-work",
                "git",
                "kept-work",
                "kept-work.tmp",
            ]
            .iter()
            .map(|n| std::fs::symlink_metadata(ws.meta.join(n)).is_ok())
            .collect();
            assert_eq!(
                (
                    got == expected,
                    overlay::is_mounted(&ws.work),
                    meta_left,
                    std::fs::metadata(ws.work.join("suid"))
                        .unwrap()
                        .permissions()
                        .mode()
                        & 0o7777,
                    std::fs::read_link(ws.work.join("to-outside")).unwrap(),
                    user_git(&ws.work, ["rev-parse", "--abbrev-ref", "HEAD"])
                        .await
                        .unwrap(),
                    user_git(&ws.work, ["status", "--porcelain", "--", "README.md"])
                        .await
                        .unwrap(),
                    ws.settle_kept().unwrap(),
                ),
                (
                    true,
                    false,
                    vec![false; 6],
                    0o755,
                    outside.clone(),
                    "paddock/T/1\n".to_string(),
                    " M README.md\n".to_string(),
                    None,
                ),
                "{id}"
            );
        }
        // No job names the snapshot any more: pruning takes it.
        let pruned = prune::prune(&jobs, std::time::Duration::ZERO);
        assert_eq!(pruned.removed.len(), 1, "{pruned:?}");
        assert_eq!(files_of(&outside).len(), 1);
    }

    /// A URL source gets an overlay too, on a snapshot made from its bare
    /// mirror at the base commit; two URLs of the same commits never
    /// share a snapshot (nor a mirror); the job's `origin` is the URL.
    #[tokio::test]
    async fn url_sources_get_an_overlay_on_a_snapshot_of_their_mirror() {
        if !overlay_here() {
            return;
        }
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        let copy = tmp.path().join("copy.git");
        sh(tmp.path(), &["clone", "-q", "--bare", "repo", "copy.git"]);
        let jobs = tmp.path().join("jobs");
        let url = |p: &Path| format!("file://{}", p.display());
        let mut made = Vec::new();
        for (id, source) in [("u1", url(&r)), ("u2", url(&copy)), ("u3", url(&r))] {
            let lease = Lease::take(&jobs, id).unwrap();
            let spec = RepositorySpec {
                path: None,
                url: Some(source.clone()),
                base_ref: "main".into(),
                token: None,
            };
            let ws =
                Workspace::provision_as(&jobs, id, lease, &spec, "paddock/T/1", Layout::Overlay)
                    .await
                    .unwrap();
            std::fs::write(ws.work.join("README.md"), format!("{id}\n")).unwrap();
            let p = ws.patch().await.unwrap();
            made.push((
                ws.layout.overlay,
                overlay::is_mounted(&ws.work),
                p.changed_files,
                user_git(&ws.work, ["remote", "get-url", "origin"])
                    .await
                    .unwrap(),
            ));
            ws.remove().unwrap();
        }
        let dirs = |name: &str| {
            std::fs::read_dir(jobs.join(name))
                .unwrap()
                .filter(|e| e.as_ref().unwrap().path().is_dir())
                .count()
        };
        let want = |u: String| (true, true, vec!["README.md".to_string()], format!("{u}\n"));
        assert_eq!(
            (made, dirs(snapshot::SNAPSHOTS), dirs(mirror::MIRRORS)),
            (vec![want(url(&r)), want(url(&copy)), want(url(&r))], 2, 2)
        );
    }

    /// A base ref the source lacks is refused naming the source's
    /// branches, at most eight, the rest counted (before, none: a
    /// mistyped `mian` left the user to look).
    #[tokio::test]
    async fn a_missing_base_ref_names_the_sources_branches() {
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        for n in 0..10 {
            sh(&r, &["branch", &format!("b{n}")]);
        }
        let err = resolve_in_source(&r, "src", "mian", true, host_git::JOB_GIT_CPU)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "repository src: base ref `mian` is not a commit in it; its branches: b0, b1, b2, \
             b3, b4, b5, b6, b7 (and 3 more); set repository.base_ref to one of them, a tag or \
             a commit"
        );
    }

    /// A spec's `^{/REGEX}` base is searched by the host's git, held to
    /// the CPU its gits on a job's content get: a regex within the syntax
    /// a spec may write, against a 100 KB commit message (minutes of CPU
    /// unbounded), ends at the limit and is said as the base ref's, in
    /// either layout, nothing left behind. Before, the search ran
    /// unbounded (a hostile spec given to `paddock serve` spun the host).
    #[tokio::test(flavor = "multi_thread")]
    async fn a_base_refs_search_is_held_to_the_jobs_git_cpu() {
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        let message = format!("slow\n\n{}\n", "a".repeat(100_000));
        sh(&r, &["commit", "-q", "--allow-empty", "-m", &message]);
        let base = "HEAD^{/(a|aa)*(a|aa)*(a|aa)*b}";
        assert_eq!(paddock_protocol::ref_name::revision_fault(base), None);
        let jobs = tmp.path().join("jobs");
        let limit = std::time::Duration::from_secs(1);
        let started = std::time::Instant::now();
        let mut ended = Vec::new();
        for (id, layout) in [("j-auto", Layout::Auto), ("j-clone", Layout::Clone)] {
            let lease = Lease::take(&jobs, id).unwrap();
            let after = ProvisionAfter {
                prior: None,
                git_cpu: limit,
                disk: CheckoutBound::NONE,
            };
            let made = Workspace::provision_after(
                &jobs,
                id,
                lease,
                &spec(r.clone(), base),
                "b",
                layout,
                after,
            )
            .await
            .map(|_| ())
            .map_err(|e| e.to_string());
            ended.push((made, jobs.join(id).exists()));
        }
        let refused = format!(
            "repository {}: reading base ref `{base}` used more than 1s of CPU (a `^{{/…}}` \
             search matches its regex against each commit message of the history it walks); it \
             was ended: name a branch, a tag or a commit, or search with a simpler regex",
            r.display()
        );
        assert_eq!(
            ended,
            vec![(Err(refused.clone()), false), (Err(refused), false)]
        );
        let took = started.elapsed();
        assert!(took < std::time::Duration::from_secs(60), "{took:?}");
    }

    #[tokio::test]
    async fn bad_inputs_name_what_and_leave_nothing() {
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        let jobs = tmp.path().join("jobs");
        let err = Workspace::provision(&jobs, "j2", &spec(r.clone(), "nope"), "b")
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "repository {}: base ref `nope` is not a commit in it; its branches: main; set \
                 repository.base_ref to one of them, a tag or a commit",
                r.display()
            )
        );
        assert!(!jobs.join("j2").exists());
        let plain = tmp.path().join("plain");
        std::fs::create_dir(&plain).unwrap();
        let err = Workspace::provision(&jobs, "j3", &spec(plain.clone(), "main"), "b")
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("repository {}: not a git repository", plain.display())
        );
        assert!(!jobs.join("j3").exists());
        // A path that is not there, or a file, is said to be so (a
        // mistyped path read "not a git repository").
        let file = tmp.path().join("a-file");
        std::fs::write(&file, "").unwrap();
        let mut said = Vec::new();
        for (job, path) in [("j4", tmp.path().join("nowhere")), ("j5", file)] {
            let err = Workspace::provision(&jobs, job, &spec(path.clone(), "main"), "b")
                .await
                .unwrap_err();
            said.push((err.to_string(), jobs.join(job).exists()));
        }
        assert_eq!(
            said,
            vec![
                (
                    format!(
                        "repository {}: no such directory",
                        tmp.path().join("nowhere").display()
                    ),
                    false
                ),
                (
                    format!(
                        "repository {}: not a directory",
                        tmp.path().join("a-file").display()
                    ),
                    false
                ),
            ]
        );
        // Nor their leases: before, each failure left its lease file,
        // unlocked, for a reaper pass to find abandoned.
        assert_eq!(leases_in(&jobs), Vec::<String>::new());
    }

    /// The names in the leases directory of `jobs`.
    fn leases_in(jobs: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(jobs.join(lease::LEASES))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// The final tree is listed by Paddock, not by git discovering the
    /// checkout: ignore rules from the work tree's `.gitignore` and
    /// Paddock's own excludes (not the job's `.git/info/exclude`), tracked
    /// files kept inside ignored directories, names git would read as
    /// pathspec magic, a nested repository's files as content, a submodule
    /// of the base kept as it was whatever its `.git` says.
    #[tokio::test]
    async fn the_final_tree_is_listed_without_trusting_the_checkout() {
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        std::fs::create_dir(r.join("target")).unwrap();
        std::fs::write(r.join("target/tracked"), "t\n").unwrap();
        sh(&r, &["add", "-f", "target/tracked"]);
        let sub_commit = "1111111111111111111111111111111111111111";
        sh(
            &r,
            &[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("160000,{sub_commit},sub"),
            ],
        );
        sh(&r, &["commit", "-q", "-m", "more"]);
        let ws = Workspace::provision(&tmp.path().join("jobs"), "j", &spec(r, "main"), "b")
            .await
            .unwrap();
        ws.write_generated("GENERATED.md", b"g\n").await.unwrap();
        let w = &ws.work;
        std::fs::write(w.join("target/tracked"), "t2\n").unwrap();
        std::fs::write(w.join("target/untracked"), "u\n").unwrap();
        std::fs::write(w.join(":(top)magic"), "m\n").unwrap();
        std::fs::write(w.join("hidden-by-job"), "h\n").unwrap();
        append(
            &ws.root,
            &w.join(".git/info/exclude"),
            b"hidden-by-job\n/GENERATED.md\n",
        )
        .unwrap();
        std::fs::create_dir(w.join("nest")).unwrap();
        sh(&w.join("nest"), &["init", "-q"]);
        std::fs::write(w.join("nest/f"), "n\n").unwrap();
        std::fs::create_dir_all(w.join("sub")).unwrap();
        std::fs::write(w.join("sub/.git"), "gitdir: /nonexistent\n").unwrap();
        std::fs::write(w.join("sub/x"), "x\n").unwrap();
        // A sandbox placeholder a killed run left behind is not content.
        std::os::unix::fs::symlink(paddock_sandbox::absent::TARGET, w.join(".bash_login")).unwrap();
        let p = ws.patch().await.unwrap();
        assert_eq!(
            p.changed_files,
            [":(top)magic", "hidden-by-job", "nest/f", "target/tracked"]
                .map(String::from)
                .to_vec()
        );
        // A FIFO where git reads ignore rules would block it: refused. A
        // link there git (2.32 and later) does not read: it is content,
        // and what it names is no rule (here `* text eol=crlf`, which
        // would have made `sub/x`'s blob `x\r\n` had git read it).
        let refused = |file: &str| {
            format!(
                "workspace {}: {file} is not a regular file (a link, a FIFO, a device); Paddock's git reads it by path, so the patch is refused",
                ws.root.display()
            )
        };
        nix::unistd::mkfifo(&w.join("nest/.gitignore"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert_eq!(
            ws.patch().await.unwrap_err().to_string(),
            refused("nest/.gitignore")
        );
        std::fs::remove_file(w.join("nest/.gitignore")).unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("attrs"), "* text eol=crlf\n").unwrap();
        std::os::unix::fs::symlink(outside.path().join("attrs"), w.join(".gitattributes")).unwrap();
        std::fs::write(w.join("plain.txt"), "p\n").unwrap();
        let linked = ws.patch().await.unwrap();
        assert_eq!(
            (
                linked.changed_files,
                linked.diff.contains("+p\r\n"),
                linked.diff.contains("new file mode 120000")
            ),
            (
                [
                    ".gitattributes",
                    ":(top)magic",
                    "hidden-by-job",
                    "nest/f",
                    "plain.txt",
                    "target/tracked"
                ]
                .map(String::from)
                .to_vec(),
                false,
                true
            )
        );
    }

    /// A repository that commits its `.gitignore` as a link (to a shared
    /// rules file) gets its jobs' patches: the link, which git 2.32 and
    /// later do not read, is content like any link, not refused as a
    /// file git reads (every patch of such a repository failed). Its
    /// target's rules are not applied, as git does not apply them.
    #[tokio::test]
    async fn a_committed_gitignore_link_does_not_refuse_the_patch() {
        if !git_reads_no_rule_links().await {
            return;
        }
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        std::fs::write(r.join("shared-ignore"), "*.log\n").unwrap();
        std::fs::remove_file(r.join(".gitignore")).unwrap();
        std::os::unix::fs::symlink("shared-ignore", r.join(".gitignore")).unwrap();
        sh(&r, &["add", "shared-ignore", ".gitignore"]);
        sh(&r, &["commit", "-q", "-m", "linked ignore"]);
        let jobs = tmp.path().join("jobs");
        let ws = Workspace::provision(&jobs, "j", &spec(r, "main"), "b")
            .await
            .unwrap();
        std::fs::write(ws.work.join("fix.txt"), "fixed\n").unwrap();
        std::fs::write(ws.work.join("run.log"), "log\n").unwrap();
        let by_path = ws.patch().await.map(|p| p.changed_files);
        let sealed = ws.sealed().patch().await.map(|p| p.changed_files);
        let expected = ["fix.txt", "run.log"].map(String::from).to_vec();
        assert_eq!(
            (
                by_path.map_err(|e| e.to_string()),
                sealed.map_err(|e| e.to_string())
            ),
            (Ok(expected.clone()), Ok(expected))
        );
        ws.remove().unwrap();
    }

    /// Whether the host's git reads no rules through a link (2.32 and
    /// later); with an older one the link tests skip, saying so.
    async fn git_reads_no_rule_links() -> bool {
        let reads = !host_git::git_follows_rule_links().await;
        if !reads {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "this git follows rule links (older than 2.32)"
            );
            eprintln!("skipping: this git follows rule links (older than 2.32)");
        }
        reads
    }

    /// Links in the work tree are content, never followed: a link to a
    /// directory outside is recorded as the link (nothing under it), at
    /// every depth; and a directory swapped for such a link while the walk
    /// runs (after its parent's level was read) is refused, not walked
    /// (the walk went by path and listed the outside directory's files as
    /// the job's).
    #[tokio::test]
    async fn links_in_the_work_tree_are_never_followed_even_mid_walk() {
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        let ws = Workspace::provision(&tmp.path().join("jobs"), "j", &spec(r, "main"), "b")
            .await
            .unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(outside.join("deep")).unwrap();
        std::fs::write(outside.join("host-secret"), "s\n").unwrap();
        std::fs::write(outside.join("deep/more"), "m\n").unwrap();
        let w = &ws.work;
        std::fs::create_dir_all(w.join("a/b")).unwrap();
        std::os::unix::fs::symlink(&outside, w.join("top-link")).unwrap();
        std::os::unix::fs::symlink(&outside, w.join("a/b/deep-link")).unwrap();
        std::fs::write(w.join("a/b/file"), "f\n").unwrap();
        let p = ws.patch().await.unwrap();
        assert_eq!(
            p.changed_files,
            ["a/b/deep-link", "a/b/file", "top-link"]
                .map(String::from)
                .to_vec()
        );
        assert!(p.diff.contains("new file mode 120000"), "{}", p.diff);

        // The race: `a` is read as a directory at depth 0, then swapped
        // for a link to the outside directory before depth 1 is opened.
        let index = ws.meta.join("race.index");
        std::fs::copy(ws.git_dir().join("index"), &index).unwrap();
        let git = ws.paddock_git(Some(&index), true);
        let tracked = Tracked::parse(&git.run(["ls-files", "--stage", "-z"], None).await.unwrap());
        // Moved within the work tree: an overlay's is its own mount.
        let (work, moved) = (w.clone(), w.join("a-moved"));
        let outside_dir = outside.clone();
        let mut swap = move |depth: usize| {
            if depth == 0 {
                std::fs::rename(work.join("a"), &moved).unwrap();
                std::os::unix::fs::symlink(&outside_dir, work.join("a")).unwrap();
            }
        };
        let listed = final_tree::list_with(
            &git,
            w,
            &tracked,
            None,
            final_tree::Budget::unbounded(),
            &mut swap,
            None,
        )
        .await;
        assert_eq!(
            listed.map_err(|e| e.to_string()),
            Err(format!(
                "workspace {}: cannot read {}: Not a directory (os error 20)",
                ws.root.display(),
                w.join("a").display()
            ))
        );
    }

    /// A source that borrows its objects from another repository
    /// (`clone --shared`): the job's repository gets its own copies, no
    /// alternates file pointing outside (Paddock's own does, the twin).
    #[tokio::test]
    async fn the_jobs_repository_borrows_nothing() {
        let tmp = TmpDir::new();
        let lender = repo(tmp.path());
        let shared = tmp.path().join("shared");
        let ok = std::process::Command::new("git")
            .args(["clone", "-q", "--shared"])
            .arg(&lender)
            .arg(&shared)
            .status()
            .unwrap()
            .success();
        assert!(ok);
        let ws = Workspace::provision(&tmp.path().join("jobs"), "j", &spec(shared, "main"), "b")
            .await
            .unwrap();
        let alternates = |git_dir: &Path| git_dir.join("objects/info/alternates").exists();
        assert_eq!(
            (alternates(&ws.git_dir()), alternates(&ws.work.join(".git"))),
            (true, false)
        );
        let head = user_git(&ws.work, ["cat-file", "-p", &ws.base_commit])
            .await
            .unwrap();
        assert!(head.starts_with("tree "), "{head}");
    }

    /// Files are named as they are (`café.md`, not git's octal-quoted
    /// `"caf\303\251.md"`), in the list and in the patch, and untracked
    /// build output is left out and named in a warning, while a tracked
    /// file under such a name stays content.
    /// The diff started before the final tree exists (`diff-tree --stdin`,
    /// the base's tree read beside the engine) is the patch `git diff`
    /// gives: a rename (`git diff` finds renames by default), an edit, a
    /// deletion, a new binary file and a mode change; without the early
    /// read there is none to start.
    /// A diff longer than its bound is stopped, by the `diff-tree` started
    /// early and by the `git diff` run late alike, and says which bound;
    /// one within it is read whole.
    #[tokio::test]
    async fn a_diff_past_its_bound_is_stopped_not_read_whole() {
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        let jobs = tmp.path().join("jobs");
        let ws = Workspace::provision(&jobs, "j", &spec(r, "main"), "paddock/T-1/1")
            .await
            .unwrap();
        ws.list_base_soon();
        while ws.base_tree.get().is_none() {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        std::fs::write(ws.work.join("big.txt"), "x\n".repeat(200_000)).unwrap();
        let staged = ws.stage().await.unwrap();
        let bound = |r: Result<Patch, WorkspaceError>| match r {
            Err(WorkspaceError::GitOutputPastLimit { limit, .. }) => Some(limit),
            _ => None,
        };
        let early = ws.start_diff();
        let by_diff_tree = ws.diff_staged_with(staged.clone(), early, 100_000).await;
        let by_git_diff = ws.diff_staged_with(staged.clone(), None, 100_000).await;
        let whole = ws.diff_staged_with(staged, None, 1_000_000).await.unwrap();
        assert_eq!(
            (bound(by_diff_tree), bound(by_git_diff), whole.changed_files),
            (Some(100_000), Some(100_000), vec!["big.txt".to_string()])
        );
    }

    #[tokio::test]
    async fn the_diff_started_early_is_the_one_git_diff_gives() {
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        let body: String = (0..40).map(|i| format!("line {i}\n")).collect();
        std::fs::write(r.join("moved.txt"), &body).unwrap();
        std::fs::write(r.join("run.sh"), "echo hi\n").unwrap();
        sh(&r, &["add", "."]);
        sh(&r, &["commit", "-q", "-m", "more"]);
        let jobs = tmp.path().join("jobs");
        let ws = Workspace::provision(&jobs, "j", &spec(r, "main"), "paddock/T-1/1")
            .await
            .unwrap();
        let unread = ws.start_diff().is_none();
        ws.list_base_soon();
        while ws.base_tree.get().is_none() {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        std::fs::rename(ws.work.join("moved.txt"), ws.work.join("renamed.txt")).unwrap();
        std::fs::write(ws.work.join("README.md"), "hello\nworld\n").unwrap();
        std::fs::remove_file(ws.work.join(".gitignore")).unwrap();
        std::fs::write(ws.work.join("blob.bin"), [0u8, 1, 2, 255, 0, 7]).unwrap();
        std::fs::set_permissions(
            ws.work.join("run.sh"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let started = ws.start_diff();
        let early = started.is_some();
        let staged = ws.stage().await.unwrap();
        let by_git_diff = ws.diff_staged(staged.clone()).await.unwrap();
        let by_diff_tree = ws
            .diff_staged_with(staged, started, u64::MAX)
            .await
            .unwrap();
        assert_eq!(
            (unread, early, by_diff_tree.clone()),
            (true, true, by_git_diff.clone())
        );
        assert_eq!(
            by_git_diff.changed_files,
            [
                ".gitignore",
                "README.md",
                "blob.bin",
                "moved.txt",
                "renamed.txt",
                "run.sh"
            ]
            .map(String::from)
            .to_vec()
        );
        assert!(by_git_diff
            .diff
            .contains("rename from moved.txt\nrename to renamed.txt\n"));
        assert!(by_git_diff.diff.contains("GIT binary patch"));
        ws.remove().unwrap();
    }

    /// A tracked file become a directory and a tracked directory become a
    /// file are staged as `git add --all` stages them (the `update-index`
    /// started before the walk replaces what a staged path conflicts
    /// with), in a clone and in an overlay workspace alike.
    #[tokio::test]
    async fn a_file_become_a_directory_and_the_reverse_are_staged_as_git_stages_them() {
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        std::fs::write(r.join("a"), "a\n").unwrap();
        std::fs::create_dir(r.join("c")).unwrap();
        std::fs::write(r.join("c/x"), "x\n").unwrap();
        sh(&r, &["add", "."]);
        sh(&r, &["commit", "-q", "-m", "a file and a directory"]);
        let jobs = tmp.path().join("jobs");
        let mut layouts = vec![Layout::Clone];
        if overlay_here() {
            layouts.push(Layout::Overlay);
        }
        for (i, layout) in layouts.into_iter().enumerate() {
            let id = format!("j{i}");
            let lease = Lease::take(&jobs, &id).unwrap();
            let ws = Workspace::provision_as(
                &jobs,
                &id,
                lease,
                &spec(r.clone(), "main"),
                "paddock/T/1",
                layout,
            )
            .await
            .unwrap();
            std::fs::remove_file(ws.work.join("a")).unwrap();
            std::fs::create_dir(ws.work.join("a")).unwrap();
            std::fs::write(ws.work.join("a/y"), "y\n").unwrap();
            std::fs::remove_dir_all(ws.work.join("c")).unwrap();
            std::fs::write(ws.work.join("c"), "c\n").unwrap();
            // What git itself makes of the same change.
            let expected = tmp.path().join(format!("expected{i}"));
            sh(
                tmp.path(),
                &[
                    "clone",
                    "-q",
                    r.to_str().unwrap(),
                    expected.to_str().unwrap(),
                ],
            );
            std::fs::remove_file(expected.join("a")).unwrap();
            std::fs::create_dir(expected.join("a")).unwrap();
            std::fs::write(expected.join("a/y"), "y\n").unwrap();
            std::fs::remove_dir_all(expected.join("c")).unwrap();
            std::fs::write(expected.join("c"), "c\n").unwrap();
            sh(&expected, &["add", "--all"]);
            let tree = user_git(&expected, ["write-tree"]).await.unwrap();
            let p = ws.patch().await.unwrap();
            assert_eq!(
                (p.tree.clone(), p.changed_files.clone()),
                (
                    tree.trim().to_string(),
                    ["a", "a/y", "c", "c/x"].map(String::from).to_vec()
                ),
                "{id}"
            );
            ws.remove().unwrap();
        }
    }

    #[tokio::test]
    async fn names_are_kept_as_they_are_and_build_output_is_left_out() {
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        std::fs::create_dir(r.join("vendor")).unwrap();
        std::fs::write(r.join("vendor/keep.pyc"), "tracked\n").unwrap();
        sh(&r, &["add", "-f", "vendor/keep.pyc"]);
        sh(&r, &["commit", "-q", "-m", "tracked bytecode"]);
        let ws = Workspace::provision(&tmp.path().join("jobs"), "j", &spec(r, "main"), "b")
            .await
            .unwrap();
        let w = &ws.work;
        std::fs::create_dir_all(w.join("docs")).unwrap();
        std::fs::write(w.join("docs/café.md"), "# café\n").unwrap();
        std::fs::write(w.join("vendor/keep.pyc"), "changed\n").unwrap();
        std::fs::create_dir_all(w.join("src/__pycache__")).unwrap();
        std::fs::write(w.join("src/__pycache__/m.cpython-312.pyc"), "x").unwrap();
        std::fs::write(w.join("src/m.py"), "print(1)\n").unwrap();
        std::fs::write(w.join("src/old.pyc"), "x").unwrap();
        std::fs::create_dir_all(w.join("web/node_modules/left-pad")).unwrap();
        std::fs::write(w.join("web/node_modules/left-pad/index.js"), "x").unwrap();
        let p = ws.patch().await.unwrap();
        assert_eq!(
            (p.changed_files.clone(), p.left_out.clone(), p.warnings.clone()),
            (
                ["docs/café.md", "src/m.py", "vendor/keep.pyc"]
                    .map(String::from)
                    .to_vec(),
                ["src/__pycache__/", "src/old.pyc", "web/node_modules/"]
                    .map(String::from)
                    .to_vec(),
                vec!["left out of the patch as build output, not the job's work: src/__pycache__/, src/old.pyc, web/node_modules/".to_string()]
            )
        );
        assert!(
            p.diff
                .contains("diff --git a/docs/café.md b/docs/café.md\n"),
            "{}",
            p.diff
        );
    }

    /// What git's own `add --all` makes of the work tree `w` (in the job's
    /// repository, its configuration out of the way): the tree, the names
    /// `--name-only -z --no-renames` gives from `base` to it, and the
    /// `--binary` patch.
    fn add_all_in(w: &Path, base: &str) -> (String, Vec<String>, String) {
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .arg("-C")
                .arg(w)
                .args([
                    "-c",
                    "core.quotePath=false",
                    "-c",
                    "core.excludesFile=/dev/null",
                ])
                .args(args)
                .env("HOME", "/dev/null")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}");
            out.stdout
        };
        git(&["add", "--all"]);
        let tree = String::from_utf8(git(&["write-tree"])).unwrap();
        let tree = tree.trim();
        let diff = git(&[
            "diff",
            "--binary",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--no-relative",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            base,
            tree,
            "--",
        ]);
        let names = git(&[
            "diff",
            "--name-only",
            "-z",
            "--no-renames",
            "--no-relative",
            base,
            tree,
            "--",
        ]);
        let names: Vec<String> = names
            .split(|b| *b == 0)
            .filter(|n| !n.is_empty())
            .map(|n| String::from_utf8(n.to_vec()).unwrap())
            .collect();
        (tree.to_string(), names, String::from_utf8(diff).unwrap())
    }

    /// On the overlay the patch reads only the paths the upper layer
    /// names, and decides exactly as the walk of every directory and git's
    /// own `add --all` do: a base directory renamed (`git mv`, a redirect:
    /// walked whole) with a file changed in it, one removed and made again
    /// (opaque: its old files gone, one rewritten as it was), a file
    /// become a directory and a directory a file, a mode-only change, a
    /// file become a link, a new link, a deletion, a new nested
    /// directory, ignored output and build output; the untouched files of
    /// the base are neither read nor staged.
    #[tokio::test]
    async fn the_overlay_patch_reads_only_what_the_upper_layer_names() {
        if !overlay_here() {
            return;
        }
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        let base: &[(&str, &str)] = &[
            ("src/a.rs", "a\n"),
            ("src/deep/b.rs", "b\n"),
            ("opaque/o1", "o1\n"),
            ("opaque/o2", "o2\n"),
            ("file_to_dir", "f\n"),
            ("dir_to_file/p", "p\n"),
            ("dir_to_file/q/r", "r\n"),
            ("run.sh", "echo\n"),
            ("was_file", "w\n"),
            ("gone.txt", "g\n"),
            ("keep/deep/k", "k\n"),
        ];
        for (path, text) in base {
            std::fs::create_dir_all(r.join(path).parent().unwrap()).unwrap();
            std::fs::write(r.join(path), text).unwrap();
        }
        for i in 0..50 {
            std::fs::write(r.join(format!("keep/k{i}")), format!("{i}\n")).unwrap();
        }
        sh(&r, &["add", "."]);
        sh(&r, &["commit", "-q", "-m", "base"]);
        let jobs = tmp.path().join("jobs");
        let ws = overlay_ws(&jobs, "j", &r).await;
        let w = &ws.work;
        user_git(w, ["mv", "src", "lib"]).await.unwrap();
        std::fs::write(w.join("lib/deep/b.rs"), "b changed\n").unwrap();
        std::fs::remove_dir_all(w.join("opaque")).unwrap();
        std::fs::create_dir(w.join("opaque")).unwrap();
        std::fs::write(w.join("opaque/o1"), "o1\n").unwrap();
        std::fs::write(w.join("opaque/o3"), "o3\n").unwrap();
        std::fs::remove_file(w.join("file_to_dir")).unwrap();
        std::fs::create_dir(w.join("file_to_dir")).unwrap();
        std::fs::write(w.join("file_to_dir/inner"), "i\n").unwrap();
        std::fs::remove_dir_all(w.join("dir_to_file")).unwrap();
        std::fs::write(w.join("dir_to_file"), "now a file\n").unwrap();
        let mut perm = std::fs::metadata(w.join("run.sh")).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(w.join("run.sh"), perm).unwrap();
        std::fs::remove_file(w.join("was_file")).unwrap();
        std::os::unix::fs::symlink("keep/k1", w.join("was_file")).unwrap();
        std::os::unix::fs::symlink("README.md", w.join("keep/deep/new_link")).unwrap();
        std::fs::remove_file(w.join("gone.txt")).unwrap();
        std::fs::create_dir_all(w.join("new/dir")).unwrap();
        std::fs::write(w.join("new/dir/f"), "n\n").unwrap();
        std::fs::create_dir_all(w.join("target")).unwrap();
        std::fs::write(w.join("target/out"), "ignored\n").unwrap();
        std::fs::create_dir_all(w.join("keep/__pycache__")).unwrap();
        std::fs::write(w.join("keep/__pycache__/m.pyc"), "x").unwrap();

        // What the walk read and staged, against the walk of everything.
        let index = ws.meta.join("check.index");
        std::fs::copy(ws.git_dir().join("index"), &index).unwrap();
        let git = ws.paddock_git(Some(&index), true);
        let tracked = Tracked::parse(&git.run(["ls-files", "--stage", "-z"], None).await.unwrap());
        let upper = ws.upper_layer().unwrap();
        let narrowed = final_tree::list_with(
            &git,
            w,
            &tracked,
            Some(&upper),
            final_tree::Budget::unbounded(),
            &mut |_| {},
            None,
        )
        .await
        .unwrap();
        let whole = final_tree::list(&git, w, &tracked).await.unwrap();
        let text = |paths: &[Vec<u8>]| -> Vec<String> {
            paths
                .iter()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect()
        };
        assert_eq!(
            (&narrowed.present(&tracked), &narrowed.gone, &narrowed.junk),
            (&whole.present(&tracked), &whole.gone, &whole.junk)
        );
        assert_eq!(
            text(&narrowed.staged),
            [
                "dir_to_file",
                "file_to_dir/inner",
                "keep/deep/new_link",
                "lib/a.rs",
                "lib/deep/b.rs",
                "new/dir/f",
                "opaque/o1",
                "opaque/o3",
                "run.sh",
                "was_file",
            ]
        );
        assert_eq!(whole.staged, whole.present(&tracked));

        let p = ws.patch().await.unwrap();
        assert_eq!(p.left_out, vec!["keep/__pycache__/".to_string()]);
        // Git's `add --all` has no notion of build output.
        std::fs::remove_dir_all(w.join("keep/__pycache__")).unwrap();
        assert_eq!(
            (p.tree.clone(), p.changed_files.clone(), p.diff.clone()),
            add_all_in(w, &ws.base_commit)
        );
        assert_eq!(
            p.changed_files,
            [
                "dir_to_file",
                "dir_to_file/p",
                "dir_to_file/q/r",
                "file_to_dir",
                "file_to_dir/inner",
                "gone.txt",
                "keep/deep/new_link",
                "lib/a.rs",
                "lib/deep/b.rs",
                "new/dir/f",
                "opaque/o2",
                "opaque/o3",
                "run.sh",
                "src/a.rs",
                "src/deep/b.rs",
                "was_file",
            ]
            .map(String::from)
            .to_vec()
        );
        ws.remove().unwrap();
    }

    /// The patch step's fewer gits decide as the many did: the tree is the
    /// one `git add --all` makes of the same work tree (ignore rules at
    /// several depths, a negation, an ignored directory holding a tracked
    /// file), and the patch and the names from one `diff` are those of two
    /// (`--binary` and `--name-only -z --no-renames`): a rename, a
    /// deletion, a file become a link, a binary file, names with a tab, a
    /// newline and a non-ASCII letter. On both layouts: the clone, whose
    /// walk reads every directory, and the overlay (where it can be had),
    /// whose walk reads only what the upper layer names.
    #[tokio::test]
    async fn one_check_ignore_and_one_diff_decide_as_many_did() {
        decide_as_many_did(Layout::Clone).await;
        if overlay_here() {
            decide_as_many_did(Layout::Overlay).await;
        }
    }

    async fn decide_as_many_did(layout: Layout) {
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        std::fs::create_dir_all(r.join("logs")).unwrap();
        std::fs::write(r.join("logs/kept.txt"), "tracked\n").unwrap();
        std::fs::write(r.join("old.txt"), "a\nb\nc\nd\ne\nf\n").unwrap();
        std::fs::write(r.join("gone.txt"), "g\n").unwrap();
        std::fs::write(r.join("link"), "was a file\n").unwrap();
        std::fs::write(r.join(".gitignore"), "target/\n*.log\nlogs/\n").unwrap();
        // Ignore files of the base the job removes and rewrites.
        std::fs::create_dir_all(r.join("sub")).unwrap();
        std::fs::write(r.join("sub/.gitignore"), "*.gen\n").unwrap();
        std::fs::create_dir_all(r.join("mod")).unwrap();
        std::fs::write(r.join("mod/.gitignore"), "*.o\n").unwrap();
        std::fs::write(r.join("mod/lib.c"), "int x;\n").unwrap();
        sh(&r, &["add", "-f", "."]);
        sh(&r, &["commit", "-q", "-m", "more"]);
        let jobs = tmp.path().join("jobs");
        let lease = Lease::take(&jobs, "j").unwrap();
        let ws = Workspace::provision_as(&jobs, "j", lease, &spec(r, "main"), "b", layout)
            .await
            .unwrap();
        assert_eq!(ws.layout.overlay, layout == Layout::Overlay);
        let w = &ws.work;
        std::fs::rename(w.join("old.txt"), w.join("new.txt")).unwrap();
        std::fs::remove_file(w.join("gone.txt")).unwrap();
        std::fs::remove_file(w.join("link")).unwrap();
        std::os::unix::fs::symlink("new.txt", w.join("link")).unwrap();
        std::fs::write(w.join("bin"), b"\0\x01\x02").unwrap();
        std::fs::write(w.join("tab\tname"), "t\n").unwrap();
        std::fs::write(w.join("new\nline"), "n\n").unwrap();
        std::fs::write(w.join("café.md"), "c\n").unwrap();
        std::fs::write(w.join("top.log"), "ignored\n").unwrap();
        std::fs::write(w.join("logs/kept.txt"), "changed\n").unwrap();
        std::fs::write(w.join("logs/new.txt"), "ignored dir\n").unwrap();
        for dir in ["a/b/c", "a/skip", "target"] {
            std::fs::create_dir_all(w.join(dir)).unwrap();
        }
        std::fs::write(w.join("a/.gitignore"), "*.tmp\n!keep.tmp\nskip/\n").unwrap();
        std::fs::write(w.join("a/b/.gitignore"), "deep.txt\n").unwrap();
        for file in ["a/x.tmp", "a/keep.tmp", "a/b/keep.tmp", "a/b/c/deep.txt"] {
            std::fs::write(w.join(file), "f\n").unwrap();
        }
        std::fs::write(w.join("a/b/c/d.txt"), "d\n").unwrap();
        std::fs::write(w.join("a/skip/s.txt"), "s\n").unwrap();
        // A file named as a pattern that matches only directories.
        std::fs::write(w.join("a/b/skip"), "a file\n").unwrap();
        std::fs::write(w.join("target/out"), "t\n").unwrap();
        std::fs::remove_file(w.join("sub/.gitignore")).unwrap();
        std::fs::write(w.join("sub/y.gen"), "no longer ignored\n").unwrap();
        std::fs::write(w.join("mod/.gitignore"), "*.p\n").unwrap();
        std::fs::write(w.join("mod/a.o"), "no longer ignored\n").unwrap();
        std::fs::write(w.join("mod/a.p"), "ignored now\n").unwrap();
        std::fs::write(w.join("tool.sh"), "#!/bin/sh\n").unwrap();
        let mut perm = std::fs::metadata(w.join("tool.sh")).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o744);
        std::fs::set_permissions(w.join("tool.sh"), perm).unwrap();
        // The staging that reads no file by path (the `sandbox` rung's
        // early patch) makes the same patch, and leaves the work tree as
        // it found it.
        let sealed = ws.sealed().patch().await.unwrap();
        let p = ws.patch().await.unwrap();
        assert_eq!(sealed, p);
        // Its copy of the ignore rules went with it.
        assert!(!ws.meta.join("ignore-shadow").exists());
        assert_eq!(
            (p.tree.clone(), p.changed_files.clone(), p.diff.clone()),
            add_all_in(w, &ws.base_commit)
        );
        assert_eq!(
            p.changed_files,
            [
                "a/.gitignore",
                "a/b/.gitignore",
                "a/b/c/d.txt",
                "a/b/keep.tmp",
                "a/b/skip",
                "a/keep.tmp",
                "bin",
                "café.md",
                "gone.txt",
                "link",
                "logs/kept.txt",
                "mod/.gitignore",
                "mod/a.o",
                "new\nline",
                "new.txt",
                "old.txt",
                "sub/.gitignore",
                "sub/y.gen",
                "tab\tname",
                "tool.sh",
            ]
            .map(String::from)
            .to_vec()
        );
        assert!(
            p.diff.contains("rename from old.txt\nrename to new.txt\n"),
            "{}",
            p.diff
        );
    }

    /// A directory of the base that held an ignore file, replaced by the
    /// job with a file or a link, is no directory to the sealed staging's
    /// ignore rules either: a pattern that matches only directories
    /// (`gen/`) leaves the job's file in the patch, as the staging by path
    /// does. The shadow of the ignore files had kept the base's directory
    /// (made for its `.gitignore`), git took the job's file for it, and the
    /// early patch left the file out.
    #[tokio::test]
    async fn a_sealed_staging_takes_a_replaced_directory_for_what_replaced_it() {
        replaced_directories(Layout::Clone).await;
        if overlay_here() {
            replaced_directories(Layout::Overlay).await;
        }
    }

    async fn replaced_directories(layout: Layout) {
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        for dir in ["gen", "out/deep"] {
            std::fs::create_dir_all(r.join(dir)).unwrap();
            std::fs::write(r.join(dir).join(".gitignore"), "*.o\n").unwrap();
        }
        std::fs::write(r.join(".gitignore"), "gen/\nout/\n").unwrap();
        sh(&r, &["add", "-f", "."]);
        sh(&r, &["commit", "-q", "-m", "ignored directories"]);
        let jobs = tmp.path().join("jobs");
        let lease = Lease::take(&jobs, "j").unwrap();
        let ws = Workspace::provision_as(&jobs, "j", lease, &spec(r, "main"), "b", layout)
            .await
            .unwrap();
        let w = &ws.work;
        std::fs::remove_dir_all(w.join("gen")).unwrap();
        std::fs::write(w.join("gen"), "a file now\n").unwrap();
        std::fs::remove_dir_all(w.join("out")).unwrap();
        std::os::unix::fs::symlink("gen", w.join("out")).unwrap();
        let sealed = ws.sealed().patch().await.unwrap();
        let p = ws.patch().await.unwrap();
        assert_eq!(
            (sealed.changed_files.clone(), sealed == p),
            (
                ["gen", "gen/.gitignore", "out", "out/deep/.gitignore"]
                    .map(String::from)
                    .to_vec(),
                true
            )
        );
        ws.remove().unwrap();
    }

    /// A path git never stages (`.git` under another spelling) is left out
    /// of the sealed staging's patch as out of the one by path, and the
    /// patch says so the same: `update-index --index-info` warns and skips
    /// it as `--add` does (it does not fail), and the sealed staging had
    /// dropped the warning, so the early patch left the job's file out
    /// without a word.
    #[tokio::test]
    async fn a_sealed_staging_says_what_git_would_not_stage() {
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        let jobs = tmp.path().join("jobs");
        let ws = Workspace::provision(&jobs, "j", &spec(r, "main"), "b")
            .await
            .unwrap();
        std::fs::create_dir_all(ws.work.join("sub/.GIT")).unwrap();
        std::fs::write(ws.work.join("sub/.GIT/config"), "[core]\n").unwrap();
        std::fs::write(ws.work.join("kept.txt"), "kept\n").unwrap();
        let sealed = ws.sealed().patch().await.unwrap();
        let p = ws.patch().await.unwrap();
        assert_eq!(
            (
                sealed.changed_files.clone(),
                sealed.warnings.clone(),
                sealed == p
            ),
            (
                vec!["kept.txt".to_string()],
                vec![
                    "left out of the patch, named as git's own directory (.git) under another \
                     spelling, which git never stages: sub/.GIT/config"
                        .to_string()
                ],
                true
            )
        );
        ws.remove().unwrap();
    }

    /// The packs in the git directory `git_dir`.
    fn packs(git_dir: &Path) -> usize {
        std::fs::read_dir(git_dir.join("objects/pack"))
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter(|e| e.file_name().to_string_lossy().ends_with(".pack"))
                    .count()
            })
            .unwrap_or(0)
    }

    /// A sealed staging of fewer than 100 files writes their blobs itself
    /// as loose objects (`loose_object.rs`: no `fast-import` started), one
    /// of more hands them to one `fast-import`, which packs them; either
    /// way the patch is the one by path.
    #[tokio::test]
    async fn a_sealed_staging_writes_few_blobs_itself_and_packs_many() {
        let mut seen = Vec::new();
        for n in [3usize, 150] {
            let tmp = TmpDir::new();
            let r = repo(tmp.path());
            let jobs = tmp.path().join("jobs");
            let ws = Workspace::provision(&jobs, "j", &spec(r, "main"), "b")
                .await
                .unwrap();
            std::fs::create_dir_all(ws.work.join("many")).unwrap();
            for i in 0..n {
                std::fs::write(
                    ws.work.join(format!("many/f{i}.txt")),
                    format!("file {i}\n"),
                )
                .unwrap();
            }
            let before = packs(&ws.git_dir());
            let sealed = ws.sealed().patch().await.unwrap();
            let packed = packs(&ws.git_dir()) - before;
            let p = ws.patch().await.unwrap();
            seen.push((sealed.changed_files.len(), packed, sealed == p));
            ws.remove().unwrap();
        }
        assert_eq!(seen, vec![(3, 0, true), (150, 1, true)]);
    }

    /// The same hostile tree staged sealed with 99 entries to read (blobs
    /// written by Paddock, `loose_object.rs`) and with 100 (one `git
    /// fast-import`): both take and refuse the same. Taken, as by path: a
    /// link to a host file (its target, never the file), a name git never
    /// stages (`.GIT`, left out with the same warning), an empty file, a
    /// binary one, an executable, a name with a newline; a FIFO is left
    /// out (not read, not waited on), as by path. Refused before either
    /// writer, naming it: a sparse file past the bound. What session 50's
    /// attack tried on the loose writer that already held.
    #[tokio::test]
    async fn a_sealed_staging_takes_and_refuses_the_same_with_few_blobs_or_many() {
        // The hostile entries read: six of them.
        const HOSTILE: usize = 6;
        let mut seen = Vec::new();
        for total in [99usize, 100] {
            for extra in ["", "fifo", "sparse"] {
                let tmp = TmpDir::new();
                let r = repo(tmp.path());
                let host = tmp.path().join("host-secret");
                std::fs::write(&host, "the host's\n").unwrap();
                let jobs = tmp.path().join("jobs");
                let ws = Workspace::provision(&jobs, "j", &spec(r, "main"), "b")
                    .await
                    .unwrap();
                let w = &ws.work;
                std::os::unix::fs::symlink(&host, w.join("link")).unwrap();
                std::fs::create_dir_all(w.join("sub/.GIT")).unwrap();
                std::fs::write(w.join("sub/.GIT/config"), "[core]\n").unwrap();
                std::fs::write(w.join("empty"), "").unwrap();
                std::fs::write(w.join("binary"), b"\0\x01\r\n\xff").unwrap();
                std::fs::write(w.join("run.sh"), "#!/bin/sh\n").unwrap();
                std::fs::set_permissions(
                    w.join("run.sh"),
                    std::os::unix::fs::PermissionsExt::from_mode(0o755),
                )
                .unwrap();
                std::fs::write(w.join("new\nline"), "x\n").unwrap();
                std::fs::create_dir_all(w.join("many")).unwrap();
                for i in 0..total - HOSTILE {
                    std::fs::write(w.join(format!("many/f{i}")), format!("{i}\n")).unwrap();
                }
                match extra {
                    "fifo" => {
                        nix::unistd::mkfifo(&w.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap()
                    }
                    "sparse" => std::fs::File::create(w.join("sparse"))
                        .unwrap()
                        .set_len(sealed_stage::MAX_SEALED_BYTES + 1)
                        .unwrap(),
                    _ => {}
                }
                let before = packs(&ws.git_dir());
                let sealed = ws.sealed().patch().await;
                let packed = packs(&ws.git_dir()) - before;
                let outcome = match sealed {
                    Ok(sealed) => {
                        let p = ws.patch().await.unwrap();
                        let named: Vec<String> = sealed
                            .changed_files
                            .iter()
                            .filter(|f| !f.starts_with("many/"))
                            .cloned()
                            .collect();
                        Ok((
                            sealed.changed_files.len(),
                            named,
                            sealed.warnings.clone(),
                            sealed == p,
                            !sealed.diff.contains("the host's"),
                        ))
                    }
                    Err(WorkspaceError::SealedStaging { file, .. }) => {
                        Err(file.rsplit('/').next().unwrap_or_default().to_string())
                    }
                    Err(e) => Err(e.to_string()),
                };
                seen.push((total, extra, packed, outcome));
                ws.remove().unwrap();
            }
        }
        let taken = |total: usize| {
            Ok((
                total - 1,
                ["binary", "empty", "link", "new\nline", "run.sh"]
                    .map(String::from)
                    .to_vec(),
                vec![
                    "left out of the patch, named as git's own directory (.git) under another \
                     spelling, which git never stages: sub/.GIT/config"
                        .to_string(),
                ],
                true,
                true,
            ))
        };
        assert_eq!(
            seen,
            vec![
                (99, "", 0, taken(99)),
                (99, "fifo", 0, taken(99)),
                (99, "sparse", 0, Err("sparse".to_string())),
                (100, "", 1, taken(100)),
                (100, "fifo", 1, taken(100)),
                (100, "sparse", 0, Err("sparse".to_string())),
            ]
        );
    }

    /// A tree with attributes is staged sealed when git would convert
    /// none of the files staged, and the patch is the one by path: binary
    /// files under `text=auto`, `-text` files with CRs (here by the job's
    /// own attribute file), plain text, links, a re-encoding named only in
    /// a macro that no staged file takes, on a clone and on an overlay
    /// (where the base's attribute file is not walked). The sealed staging
    /// had refused every tree with a `.gitattributes`, so a repository with
    /// one never had an early patch.
    #[tokio::test]
    async fn a_sealed_staging_takes_a_tree_with_attributes_git_would_not_apply() {
        attributes_not_applied(Layout::Clone).await;
        if overlay_here() {
            attributes_not_applied(Layout::Overlay).await;
        }
    }

    /// The base's attributes for the tests of the sealed staging.
    fn attributes_repo(dir: &Path) -> PathBuf {
        let r = repo(dir);
        std::fs::write(
            r.join(".gitattributes"),
            "* text=auto\n*.id ident\n*.bin -text\n[attr]utf16 working-tree-encoding=UTF-16LE\n\
             *.u16 utf16\n",
        )
        .unwrap();
        sh(&r, &["add", ".gitattributes"]);
        sh(&r, &["commit", "-q", "-m", "attributes"]);
        r
    }

    async fn attributes_not_applied(layout: Layout) {
        let tmp = TmpDir::new();
        let r = attributes_repo(tmp.path());
        let jobs = tmp.path().join("jobs");
        let lease = Lease::take(&jobs, "j").unwrap();
        let ws = Workspace::provision_as(&jobs, "j", lease, &spec(r, "main"), "b", layout)
            .await
            .unwrap();
        let w = &ws.work;
        std::fs::write(w.join("plain.txt"), "one\ntwo\n").unwrap();
        std::fs::write(w.join("image.png"), b"\x89PNG\r\n\x1a\n\0\0\r\n").unwrap();
        std::fs::write(w.join("raw.bin"), "a\r\nb\r\n").unwrap();
        std::fs::write(w.join("noid.id"), "no keyword here\n").unwrap();
        std::os::unix::fs::symlink("x\ry", w.join("link")).unwrap();
        std::fs::create_dir_all(w.join("sub")).unwrap();
        std::fs::write(w.join("sub/.gitattributes"), "*.c -text\n").unwrap();
        std::fs::write(w.join("sub/x.c"), "int x;\r\n").unwrap();
        let sealed = ws.sealed().patch().await.unwrap();
        let p = ws.patch().await.unwrap();
        assert_eq!(
            (sealed.changed_files.clone(), sealed == p),
            (
                [
                    "image.png",
                    "link",
                    "noid.id",
                    "plain.txt",
                    "raw.bin",
                    "sub/.gitattributes",
                    "sub/x.c"
                ]
                .map(String::from)
                .to_vec(),
                true
            )
        );
        assert!(!ws.meta.join("ignore-shadow").exists());
        ws.remove().unwrap();
    }

    /// A file git would convert as it read it by path is refused by the
    /// sealed staging, with an error that names the file and why, and the
    /// patch by path stands, converted: CRLF under `text=auto`, `$Id: ..$`
    /// under `ident`, a re-encoding the job's own attribute file asks for, and
    /// CRLF under the base's rules when the job removed the attribute
    /// file (git then reads the index's copy, and so does the shadow).
    #[tokio::test]
    async fn a_sealed_staging_refuses_a_file_git_would_convert() {
        let tmp = TmpDir::new();
        let r = attributes_repo(tmp.path());
        let jobs = tmp.path().join("jobs");
        type Plant = fn(&Path);
        let cases: [(&str, Plant); 4] = [
            ("win.txt", |w| {
                std::fs::write(w.join("win.txt"), "a\r\n").unwrap()
            }),
            ("v.id", |w| {
                std::fs::write(w.join("v.id"), "$Id: 0123 $\n").unwrap()
            }),
            ("d/a.txt", |w| {
                std::fs::create_dir_all(w.join("d")).unwrap();
                std::fs::write(
                    w.join("d/.gitattributes"),
                    "*.txt working-tree-encoding=latin1\n",
                )
                .unwrap();
                std::fs::write(w.join("d/a.txt"), b"caf\xe9\n").unwrap();
            }),
            ("dos.txt", |w| {
                std::fs::remove_file(w.join(".gitattributes")).unwrap();
                std::fs::write(w.join("dos.txt"), "a\r\nb\r\n").unwrap();
            }),
        ];
        let mut refusals = Vec::new();
        let mut expected = Vec::new();
        for (n, (file, plant)) in cases.into_iter().enumerate() {
            let ws = Workspace::provision(&jobs, &format!("j{n}"), &spec(r.clone(), "main"), "b")
                .await
                .unwrap();
            plant(&ws.work);
            let refused = ws.sealed().patch().await.unwrap_err().to_string();
            let by_path = ws.patch().await.unwrap();
            // What git stored by path is not what the file holds: the
            // refusal was due.
            let converted = match n {
                0 | 3 => !by_path.diff.contains('\r'),
                1 => by_path.diff.contains("+$Id$\n"),
                _ => by_path.diff.contains("+caf\u{e9}\n"),
            };
            refusals.push((
                refused,
                by_path.changed_files.contains(&file.to_string()) && converted,
            ));
            let why = match n {
                0 | 3 => {
                    "its attributes convert its line endings (text, eol or crlf) and it holds a CR"
                }
                1 => "its attributes collapse its $Id$ (ident)",
                _ => "its attributes re-encode it (working-tree-encoding=latin1)",
            };
            expected.push((
                format!(
                    "workspace {}: the patch is not staged beside the job: {}: {why}",
                    ws.root.display(),
                    ws.work.join(file).display()
                ),
                true,
            ));
            assert!(!ws.meta.join("ignore-shadow").exists());
            ws.remove().unwrap();
        }
        assert_eq!(refusals, expected);
    }

    /// A `.gitattributes` that is a link is not read by git by path, but
    /// its blob in the index is, as attribute rules (the link's target):
    /// a link the job made, staged before the files beside it, and a
    /// repository's own linked attribute file both had git convert a CRLF
    /// file by path that the sealed staging, seeing no attribute file in
    /// its shadow, took as it was (the early patch then held the CRs the
    /// patch by path does not). Now a linked attribute file, the base's
    /// or the job's, refuses the sealed staging, and the patch by path
    /// stands.
    #[tokio::test]
    async fn a_sealed_staging_refuses_a_linked_attribute_file() {
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        let linked = tmp.path().join("linked");
        sh(
            tmp.path(),
            &["clone", "-q", r.to_str().unwrap(), linked.to_str().unwrap()],
        );
        std::os::unix::fs::symlink("* text", linked.join(".gitattributes")).unwrap();
        sh(&linked, &["add", ".gitattributes"]);
        sh(&linked, &["commit", "-q", "-m", "linked attributes"]);
        let jobs = tmp.path().join("jobs");
        let (mut seen, mut expected) = (Vec::new(), Vec::new());
        for (n, (source, plant_link)) in [(r, true), (linked, false)].into_iter().enumerate() {
            let ws = Workspace::provision(&jobs, &format!("j{n}"), &spec(source, "main"), "b")
                .await
                .unwrap();
            if plant_link {
                std::os::unix::fs::symlink("* text", ws.work.join(".gitattributes")).unwrap();
            }
            std::fs::write(ws.work.join("win.txt"), "a\r\nb\r\n").unwrap();
            let sealed = ws.sealed().patch().await.map_err(|e| e.to_string());
            let by_path = ws.patch().await.unwrap();
            seen.push((
                sealed.map(|p| p.diff.contains('\r')),
                by_path.changed_files.contains(&"win.txt".to_string()),
                by_path.diff.contains('\r'),
            ));
            let refused = format!(
                "workspace {}: the patch is not staged beside the job: {}: a link, whose target \
                 git reads from the index as attribute rules",
                ws.root.display(),
                ws.work.join(".gitattributes").display()
            );
            expected.push((Err(refused), true, false));
            ws.remove().unwrap();
        }
        assert_eq!(seen, expected);
    }

    /// A job's ignore rules can make git compute for minutes on a few
    /// paths (here 80,000 `a/**/b<n>` patterns against 200 files 60
    /// directories deep: about 10 s of CPU unbounded), CPU that no job
    /// limit covers. Paddock's gits on the job's tree are ended at their
    /// CPU limit, the patch failing with an error that names the command
    /// and the limit, whether staged by path or sealed (the shadow's
    /// check-ignore); with the limit set high the same tree's patch is
    /// made, so the rules, not something else, were what cost.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_git_the_jobs_rules_make_compute_is_ended_at_its_cpu_limit() {
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        let jobs = tmp.path().join("jobs");
        let ws = Workspace::provision(&jobs, "j", &spec(r, "main"), "b")
            .await
            .unwrap();
        let rules: String = (0..80_000).map(|n| format!("a/**/b{n}\n")).collect();
        std::fs::write(ws.work.join(".gitignore"), rules).unwrap();
        let deep: PathBuf = std::iter::once("a")
            .chain(std::iter::repeat_n("x", 60))
            .collect();
        std::fs::create_dir_all(ws.work.join(&deep)).unwrap();
        for i in 0..200 {
            std::fs::write(ws.work.join(&deep).join(format!("f{i}")), "f\n").unwrap();
        }
        let limit = std::time::Duration::from_secs(1);
        let started = std::time::Instant::now();
        let by_path = ws
            .clone()
            .with_git_cpu(limit)
            .patch()
            .await
            .map(|p| p.changed_files.len());
        let sealed = ws
            .clone()
            .with_git_cpu(limit)
            .sealed()
            .patch()
            .await
            .map(|p| p.changed_files.len());
        let ended_within = started.elapsed();
        let cpu_limited = |args: &str| {
            Err(format!(
                "workspace {}: `git {args}` used more than 1s of CPU on the job's content or its \
                 repository's (their ignore or attribute rules, or their files, made git compute \
                 that long); it was ended",
                ws.root.display()
            ))
        };
        assert_eq!(
            (
                by_path.map_err(|e| e.to_string()),
                sealed.map_err(|e| e.to_string())
            ),
            (
                cpu_limited("check-ignore --no-index -z --stdin -v -n"),
                cpu_limited("check-ignore --no-index -z --stdin -v -n"),
            )
        );
        // Each ended at its CPU limit, not at the wall-clock one (600 s).
        assert!(
            ended_within < std::time::Duration::from_secs(60),
            "{ended_within:?}"
        );
        let unbounded = ws
            .clone()
            .with_git_cpu(std::time::Duration::from_secs(600))
            .patch()
            .await
            .unwrap();
        assert_eq!(unbounded.changed_files.len(), 201);
        ws.remove().unwrap();
    }

    fn tracked_agents_md(dir: &Path) -> PathBuf {
        let r = repo(dir);
        std::fs::write(r.join("AGENTS.md"), "# Rules\n\n- Use tabs.\n").unwrap();
        sh(&r, &["add", "AGENTS.md"]);
        sh(&r, &["commit", "-q", "-m", "agents"]);
        r
    }

    const APPENDED: &str =
        "\n<!-- paddock:begin: generated -->\n## Paddock job\n\nbrief\n<!-- paddock:end -->\n";

    #[tokio::test]
    async fn an_extended_file_keeps_only_the_agents_change() {
        let tmp = TmpDir::new();
        let r = tracked_agents_md(tmp.path());
        let ws = Workspace::provision(&tmp.path().join("jobs"), "j", &spec(r, "main"), "b")
            .await
            .unwrap();
        let original = "# Rules\n\n- Use tabs.\n";
        ws.extend_tracked("AGENTS.md", original, APPENDED)
            .await
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(ws.work.join("AGENTS.md")).unwrap(),
            format!("{original}{APPENDED}")
        );
        // Untouched by the agent: no change at all.
        let p = ws.patch().await.unwrap();
        assert_eq!(
            p,
            Patch {
                diff: String::new(),
                changed_files: vec![],
                left_out: vec![],
                warnings: vec![],
                tree: p.tree.clone(),
            }
        );
        // The agent edits the repository's part: exactly that edit.
        std::fs::write(
            ws.work.join("AGENTS.md"),
            format!("# Rules\n\n- Use spaces.\n{APPENDED}"),
        )
        .unwrap();
        let p = ws.patch().await.unwrap();
        assert_eq!(p.changed_files, vec!["AGENTS.md".to_string()]);
        assert!(
            p.diff.contains("-- Use tabs.\n+- Use spaces.\n"),
            "{}",
            p.diff
        );
        assert!(!p.diff.contains("paddock"), "{}", p.diff);
        assert_eq!(p.warnings, Vec::<String>::new());
        // The agent edits inside Paddock's section too: the section goes by its markers.
        std::fs::write(
            ws.work.join("AGENTS.md"),
            "# Rules\n\n- Use spaces.\n\n<!-- paddock:begin: generated -->\nchanged\n<!-- paddock:end -->\nagent tail\n",
        )
        .unwrap();
        let p = ws.patch().await.unwrap();
        assert!(p.diff.contains("+- Use spaces.\n"), "{}", p.diff);
        assert!(p.diff.contains("+agent tail\n"), "{}", p.diff);
        assert!(
            !p.diff.contains("paddock") && !p.diff.contains("changed"),
            "{}",
            p.diff
        );
        // The markers are gone: the repository's text, and a warning.
        std::fs::write(ws.work.join("AGENTS.md"), "rewritten\n").unwrap();
        let p = ws.patch().await.unwrap();
        assert_eq!(p.diff, "");
        assert_eq!(
            p.warnings,
            vec!["AGENTS.md: the agent rewrote Paddock's generated section; the file is left out of the patch".to_string()]
        );
        // Deleted by the agent: the deletion is the change.
        std::fs::remove_file(ws.work.join("AGENTS.md")).unwrap();
        let p = ws.patch().await.unwrap();
        assert_eq!(p.changed_files, vec!["AGENTS.md".to_string()]);
        assert!(p.diff.contains("deleted file mode"), "{}", p.diff);
    }

    /// The agent makes the file Paddock extended longer than Paddock
    /// reads back (`truncate -s`, a sparse file holding no disk, so the
    /// disk limit never sees it): it is not read into Paddock's memory, it
    /// is left out of the patch and a warning says why. Before, the whole
    /// file was read (a `truncate -s 64G AGENTS.md` was 64 GiB in
    /// Paddock's memory) and staged with Paddock's section stripped.
    #[tokio::test]
    async fn an_extended_file_made_longer_than_paddock_reads_is_left_out() {
        let tmp = TmpDir::new();
        let r = tracked_agents_md(tmp.path());
        let ws = Workspace::provision(&tmp.path().join("jobs"), "j", &spec(r, "main"), "b")
            .await
            .unwrap();
        let original = "# Rules\n\n- Use tabs.\n";
        ws.extend_tracked("AGENTS.md", original, APPENDED)
            .await
            .unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(ws.work.join("AGENTS.md"))
            .unwrap()
            .set_len(MAX_EXTENDED_BYTES + 1)
            .unwrap();
        let p = ws.patch().await.unwrap();
        assert_eq!(
            p,
            Patch {
                diff: String::new(),
                changed_files: vec![],
                left_out: vec![],
                warnings: vec![format!(
                    "AGENTS.md: the agent made it {} bytes long, more than the {MAX_EXTENDED_BYTES} \
                     Paddock reads of a file it extended; the file is left out of the patch",
                    MAX_EXTENDED_BYTES + 1
                )],
                tree: p.tree.clone(),
            }
        );
    }

    /// A file the job made longer than the patch's staging reads (a
    /// sparse file: `truncate -s`, no disk held, so the disk limit never
    /// sees it) is left out, tracked or not, named with its length; the
    /// rest of the work is staged, and the files the job changed are read
    /// while their lengths together fit (in path order: `b.bin` does not
    /// fit after `a.bin`, `c.txt` still does). Before, git's `update-index`
    /// read and hashed every byte (`truncate -s 50G`: minutes of CPU, up to
    /// its timeout, then no patch at all) and the patch held them.
    #[tokio::test]
    async fn a_file_longer_than_the_staging_reads_is_left_out() {
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        std::fs::write(r.join("tracked.bin"), "base\n").unwrap();
        sh(&r, &["add", "tracked.bin"]);
        sh(&r, &["commit", "-q", "-m", "tracked"]);
        let ws = Workspace::provision(&tmp.path().join("jobs"), "j", &spec(r, "main"), "b")
            .await
            .unwrap();
        let sparse = |name: &str, len: u64| {
            std::fs::File::create(ws.work.join(name))
                .unwrap()
                .set_len(len)
                .unwrap();
        };
        sparse("huge", 50 << 30);
        sparse("tracked.bin", MAX_PATCH_BYTES + 1);
        sparse("a.bin", MAX_PATCH_BYTES / 2 + 1);
        sparse("b.bin", MAX_PATCH_BYTES / 2);
        std::fs::write(ws.work.join("c.txt"), "work\n").unwrap();
        let p = ws.patch().await.unwrap();
        assert_eq!(
            (p.changed_files, p.left_out, p.warnings),
            (
                vec!["a.bin".to_string(), "c.txt".to_string()],
                vec![],
                vec![format!(
                    "b.bin ({} bytes), huge ({} bytes), tracked.bin ({} bytes): left out of the \
                     patch, longer than Paddock stages: it reads at most {MAX_PATCH_BYTES} bytes \
                     of the files the job changed, together, the most of a patch it reads",
                    MAX_PATCH_BYTES / 2,
                    50u64 << 30,
                    MAX_PATCH_BYTES + 1
                )]
            )
        );
        assert!(
            p.diff.contains("+work\n"),
            "{}",
            &p.diff[..p.diff.len().min(2000)]
        );
    }

    /// Past 20 files left out as too long to stage, the warning names the
    /// first 20 (in path order) and counts the rest: a job can leave any
    /// number, each a line of an event and the closeout otherwise.
    #[tokio::test]
    async fn files_left_out_as_too_long_are_named_up_to_twenty() {
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        let ws = Workspace::provision(&tmp.path().join("jobs"), "j", &spec(r, "main"), "b")
            .await
            .unwrap();
        let len = MAX_PATCH_BYTES + 1;
        for i in 0..25 {
            std::fs::File::create(ws.work.join(format!("f{i:02}")))
                .unwrap()
                .set_len(len)
                .unwrap();
        }
        let p = ws.patch().await.unwrap();
        let named: Vec<String> = (0..20).map(|i| format!("f{i:02} ({len} bytes)")).collect();
        assert_eq!(
            (p.changed_files, p.warnings),
            (
                vec![],
                vec![format!(
                    "{}, and 5 more: left out of the patch, longer than Paddock stages: it reads \
                     at most {MAX_PATCH_BYTES} bytes of the files the job changed, together, the \
                     most of a patch it reads",
                    named.join(", ")
                )]
            )
        );
    }

    /// A whole history's bundle is fetched without git's check of a
    /// fetch (the user's history need not pass it), so the job's new
    /// objects are checked before it is kept: a job's `.gitmodules`
    /// whose submodule URL is an option, or whose submodule's name climbs
    /// out of `.git/modules`, is refused and no bundle is left; the same tree's bundle of only the
    /// new objects (checked where it is fetched) and a harmless tree's
    /// whole bundle are kept. Before, both hostile whole bundles were
    /// kept and fetched into the source unchecked.
    #[tokio::test]
    async fn a_whole_bundle_is_refused_when_the_jobs_objects_fail_fsck() {
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        let jobs = tmp.path().join("jobs");
        let ws = Workspace::provision(&jobs, "job1", &spec(r, "main"), "paddock/T-1/1")
            .await
            .unwrap();
        let bundle = tmp.path().join("branch.bundle");
        let gitmodules = ws.work.join(".gitmodules");
        let mut seen = Vec::new();
        for (what, hostile) in [
            ("an option as its url", true),
            ("a climbing name", true),
            ("plain", false),
        ] {
            let _ = std::fs::remove_file(&gitmodules);
            match what {
                "a climbing name" => std::fs::write(
                    &gitmodules,
                    "[submodule \"../../modules/x\"]\n\tpath = x\n\turl = ./y\n",
                )
                .unwrap(),
                "plain" => std::fs::write(&gitmodules, "").unwrap(),
                _ => std::fs::write(
                    &gitmodules,
                    "[submodule \"x\"]\n\tpath = x\n\turl = -u./payload\n",
                )
                .unwrap(),
            }
            let staged = ws.stage_starting(&mut || {}).await.unwrap();
            let commit = ws.commit_result(&staged.tree, "T-1: x\n").await.unwrap();
            let _ = std::fs::remove_file(&bundle);
            let whole = ws.bundle_result(&commit, &bundle, true).await;
            let refused = matches!(
                &whole,
                Err(WorkspaceError::NewObjectsRefused { fsck, .. }) if fsck.contains("gitmodules")
            );
            let left = bundle.exists();
            let _ = std::fs::remove_file(&bundle);
            let thin = ws.bundle_result(&commit, &bundle, false).await.is_ok();
            seen.push((what, refused, whole.is_ok(), left, thin));
            assert_eq!(refused, hostile, "{what}: {whole:?}");
        }
        assert_eq!(
            seen,
            vec![
                ("an option as its url", true, false, false, true),
                ("a climbing name", true, false, false, true),
                ("plain", false, true, true, true),
            ]
        );
        assert!(!ws.meta.join("new-objects").exists());
    }

    /// `git ARGS` in Paddock's git directory of `ws`, `input` on stdin;
    /// its stdout, trimmed.
    async fn in_paddock_git(ws: &Workspace, args: &[&str], input: &str) -> String {
        let out = ws
            .paddock_git(None, false)
            .run(args, Some(input.as_bytes()))
            .await
            .unwrap();
        String::from_utf8_lossy(&out).trim().to_string()
    }

    /// A commit in `ws`'s git directory whose tree holds `package.json`
    /// under 40 × 40 × 40 directories of 250-byte names, each level one
    /// tree named 40 times: 64,000 paths of 766 bytes (53 MB listed)
    /// from four trees.
    async fn repeating_tree(ws: &Workspace) -> String {
        let blob = in_paddock_git(ws, &["hash-object", "-w", "--stdin"], "{}").await;
        let mut tree = in_paddock_git(
            ws,
            &["mktree", "-z"],
            &format!("100644 blob {blob}\tpackage.json\0"),
        )
        .await;
        for _ in 0..3 {
            let entries: String = (0..40)
                .map(|i| format!("040000 tree {tree}\t{i:02}{}\0", "d".repeat(248)))
                .collect();
            tree = in_paddock_git(ws, &["mktree", "-z"], &entries).await;
        }
        let who = ["-c", "user.name=t", "-c", "user.email=t@t"];
        let args = [&who[..], &["commit-tree", &tree, "-m", "bomb"]].concat();
        in_paddock_git(ws, &args, "").await
    }

    /// The setup cache's key reads the base commit's lockfiles from a
    /// listing read record by record, holding only the files it takes,
    /// at most `MAX_BASE_FILES_BYTES`: a commit whose tree repeats its
    /// subtrees (four trees, 64,000 `package.json` under 766-byte paths,
    /// 53 MB listed) is refused naming the bound, in under 16 MB of
    /// memory, measured in a process of its own (this test's binary run
    /// again for this test alone), where the listing was read whole and
    /// every file kept (over 100 MB; without end for a deeper tree).
    #[tokio::test]
    async fn a_tree_repeating_its_subtrees_is_listed_for_its_lockfiles_in_bounded_memory() {
        const ENV: &str = "PADDOCK_PROBE_BASE_FILES";
        if std::env::var_os(ENV).is_none() {
            let (refused, grew_kib) = paddock_test_support::processes::probe_alone(
                "workspace::tests::a_tree_repeating_its_subtrees_is_listed_for_its_lockfiles_in_bounded_memory",
                ENV,
                "1",
            );
            assert_eq!(
                (refused.as_str(), grew_kib < 16 << 10),
                (
                    "`git ls-tree -r -z --full-tree COMMIT` lists more than 8388608 bytes of the \
                     base commit's lockfiles and manifests (paths and ids), the most Paddock \
                     holds; it was stopped",
                    true
                ),
                "listing grew the peak by {grew_kib} KiB"
            );
            return;
        }
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        let mut ws = Workspace::provision(&tmp.path().join("jobs"), "j", &spec(r, "main"), "b")
            .await
            .unwrap();
        let wanted = |name: &[u8]| name == b"package.json";
        // The code paged in first (this binary's pages count as
        // resident), then the peak reset to what is resident now.
        ws.base_files(wanted).await.unwrap();
        let commit = repeating_tree(&ws).await;
        ws.base_commit = commit.clone();
        let _ = paddock_test_support::processes::own_memory_kib();
        std::fs::write("/proc/self/clear_refs", "5").unwrap();
        let (_, rss) = paddock_test_support::processes::own_memory_kib();
        let listed = ws.base_files(wanted).await;
        let (peak, _) = paddock_test_support::processes::own_memory_kib();
        let shown = match listed {
            Ok(files) => format!("{} files", files.len()),
            Err(e) => e.to_string(),
        };
        let prefix = format!("workspace {}: ", ws.root.display());
        println!(
            "probe: {} {}",
            shown.trim_start_matches(&prefix).replace(&commit, "COMMIT"),
            peak.saturating_sub(rss)
        );
    }

    /// The patch reads the base's paths from Paddock's index record by
    /// record, holding at most the bound given (`MAX_BASE_PATH_BYTES` for
    /// a job): an index listing more (a checkout of many long paths) is
    /// refused naming it, where it was read whole and kept without bound;
    /// so is one of many short paths, each charged what holding it costs
    /// (`HELD_PER_PATH`), where 100,000 paths of 7 bytes were 700 KB
    /// against the bound and some 10 MB held.
    #[tokio::test]
    async fn the_bases_paths_past_the_bound_are_refused_naming_it() {
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        let ws = Workspace::provision(&tmp.path().join("jobs"), "j", &spec(r, "main"), "b")
            .await
            .unwrap();
        let commit = repeating_tree(&ws).await;
        let index = ws.meta.join("bomb.index");
        let git = ws.paddock_git(Some(&index), false);
        git.run(["read-tree", commit.as_str()], None).await.unwrap();
        let base = ws.paddock_git(Some(&ws.git_dir().join("index")), false);
        // 100,000 paths of 7 bytes: 700 KB of names, each held with its
        // vector and its mode's.
        let blob = in_paddock_git(&ws, &["hash-object", "-w", "--stdin"], "").await;
        let short = ws.paddock_git(Some(&ws.meta.join("short.index")), false);
        let info: String = (0..100_000)
            .map(|i| format!("100644 {blob}\td/{i:05}\n"))
            .collect();
        let args = ["update-index", "--add", "--index-info"];
        short.run(args, Some(info.as_bytes())).await.unwrap();
        let read = |git: HostGit, max: u64| async move {
            Tracked::read(&git, max, MAX_LISTED_RECORD)
                .await
                .map(|t| {
                    [&b"README.md"[..], b".gitignore", b"package.json"]
                        .map(|p| t.mode(p).map(str::to_string))
                })
                .map_err(|e| e.to_string())
        };
        let refused = Err(format!(
            "workspace {}: `git ls-files --stage -z` lists more than 1048576 bytes of the base's \
             paths (each path's bytes and 64 for holding it; the patch's first step), the most \
             Paddock holds; it was stopped",
            ws.root.display()
        ));
        assert_eq!(
            (
                read(git, 1 << 20).await,
                read(short, 1 << 20).await,
                read(base, 1 << 20).await
            ),
            (
                refused.clone(),
                refused,
                Ok([Some("100644".to_string()), Some("100644".to_string()), None])
            )
        );
    }

    /// The walk of the job's final tree charges each path it lists (its
    /// bytes and `HELD_PER_PATH`) against `Budget::max_paths`
    /// (`MAX_FINAL_PATH_BYTES` for a job), no directory listed past what
    /// is left: a job's 12,000 empty files under 3,300-byte paths (40 MB
    /// of names, no disk but their directories) past a 4 MiB bound stop
    /// the walk naming it, in under 8 MB of memory, measured in a process
    /// of its own (this test's binary run again for this test alone),
    /// where the walk, its lists and `update-index`'s input held every
    /// path by name, several times over (over 100 MB).
    #[tokio::test]
    async fn a_final_tree_of_long_paths_is_walked_in_bounded_memory() {
        const ENV: &str = "PADDOCK_PROBE_FINAL_TREE";
        if std::env::var_os(ENV).is_none() {
            let (walked, grew_kib) = paddock_test_support::processes::probe_alone(
                "workspace::tests::a_final_tree_of_long_paths_is_walked_in_bounded_memory",
                ENV,
                "1",
            );
            assert_eq!(
                (walked.as_str(), grew_kib < 8 << 10),
                (
                    "the job's work tree lists more than 4194304 bytes of paths (each path's \
                     bytes and 64 for holding it), the most the patch holds; it was stopped",
                    true
                ),
                "the walk grew the peak by {grew_kib} KiB"
            );
            return;
        }
        let tmp = TmpDir::new();
        let r = repo(tmp.path());
        let ws = Workspace::provision(&tmp.path().join("jobs"), "j", &spec(r, "main"), "b")
            .await
            .unwrap();
        let index = ws.meta.join("probe.index");
        std::fs::copy(ws.git_dir().join("index"), &index).unwrap();
        let git = ws.paddock_git(Some(&index), true);
        let tracked = Tracked::parse(&git.run(["ls-files", "--stage", "-z"], None).await.unwrap());
        let budget = final_tree::Budget {
            max_paths: 4 << 20,
            ..final_tree::Budget::unbounded()
        };
        let mut nothing = |_: usize| {};
        let mut walk = async || {
            final_tree::list_with(&git, &ws.work, &tracked, None, budget, &mut nothing, None).await
        };
        // The code paged in first (this binary's pages count as
        // resident), on the checkout alone.
        walk().await.unwrap();
        let mut deep = ws.work.clone();
        for i in 0..12 {
            deep.push(format!("{i:02}{}", "d".repeat(248)));
        }
        std::fs::create_dir_all(&deep).unwrap();
        for i in 0..12_000 {
            std::fs::write(deep.join(format!("{i:05}{}", "f".repeat(245))), "").unwrap();
        }
        let _ = paddock_test_support::processes::own_memory_kib();
        std::fs::write("/proc/self/clear_refs", "5").unwrap();
        let (_, rss) = paddock_test_support::processes::own_memory_kib();
        let walked = walk().await;
        let (peak, _) = paddock_test_support::processes::own_memory_kib();
        let shown = match walked {
            Ok(tree) => format!("{} staged", tree.staged.len()),
            Err(e) => e.to_string(),
        };
        let prefix = format!("workspace {}: ", ws.root.display());
        println!(
            "probe: {} {}",
            shown.trim_start_matches(&prefix),
            peak.saturating_sub(rss)
        );
    }
}
