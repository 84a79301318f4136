//! Where the host keeps a job's base commit, so that the result branch's
//! bundle need carry only the job's new objects
//! (`workspace/result_branch.rs`): a local source's own object directory,
//! or a URL source's bare mirror (`<jobs>/.mirrors`, `workspace/mirror.rs`).
//! A local source fetches such a bundle itself; a push's scratch
//! repository borrows these objects read-only (it names them in its
//! `objects/info/alternates`: git reads an alternate, never writes to it).
//! What keeps nothing gets a bundle with the branch's whole history: a
//! source inside Paddock's jobs directory (a turn's inline source, removed
//! when its job ends), no source at all, and a holder that no longer has
//! the base (a source rewritten and pruned during the job, a mirror made
//! again from a remote that dropped it). That is decided while the job's
//! workspace, which has the base, still exists ([`holds_base`]).
//!
//! A bundle is Paddock's file, but its objects are the job's content: it is
//! verified where it is fetched (`git bundle verify` in a push's scratch
//! repository; `git fetch` of a bundle verifies it itself), and its new objects
//! checked (`fetch.fsckObjects`) as they are indexed (a whole-history
//! bundle is only verified: its history is the user's own, which need not
//! pass today's `fsck`; its job's new objects alone were checked as it
//! was made, `workspace/new_objects.rs`).

use std::io::BufRead as _;
use std::path::{Path, PathBuf};

use paddock_protocol::JobSpec;

use crate::workspace::host_git::{HostGit, GIT_TIMEOUT};
use crate::workspace::{mirror, user_git};

/// The most header a bundle may have before its pack (its prerequisites
/// and refs: Paddock's have one or two lines).
const MAX_HEADER: u64 = 64 * 1024;

/// The repository that keeps the base of `spec`'s jobs on this host: a
/// local source (not one inside `jobs_root`), or a URL's mirror under it.
enum Holder {
    Source(PathBuf),
    Mirror(PathBuf),
}

fn holder(spec: &JobSpec, jobs_root: &Path) -> Option<Holder> {
    match (&spec.repository.path, &spec.repository.url) {
        (Some(path), _) if path.starts_with(jobs_root) => None,
        (Some(path), _) => Some(Holder::Source(path.clone())),
        (None, Some(url)) => Some(Holder::Mirror(mirror::dir_of(jobs_root, url))),
        (None, None) => None,
    }
}

/// Whether anything on this host keeps the base of `spec`'s jobs after
/// they end (no: a source Paddock made for the job, removed with it).
pub fn kept_on_host(spec: &JobSpec, jobs_root: &Path) -> bool {
    holder(spec, jobs_root).is_some()
}

/// The object directory holding the base of `spec`'s jobs, for a push to
/// borrow: absolute, a directory, and a name an alternates file can hold
/// (no newline).
pub async fn objects_dir(spec: &JobSpec, jobs_root: &Path) -> Option<PathBuf> {
    let dir = match holder(spec, jobs_root)? {
        Holder::Source(path) => {
            let out = user_git(
                &path,
                [
                    "rev-parse",
                    "--path-format=absolute",
                    "--git-path",
                    "objects",
                ],
            )
            .await
            .ok()?;
            PathBuf::from(out.trim_end_matches('\n'))
        }
        Holder::Mirror(dir) => dir.join("objects"),
    };
    let plain = dir.is_absolute() && !dir.to_string_lossy().contains(['\n', '\r']);
    (plain && dir.is_dir()).then_some(dir)
}

/// Whether the holder of `spec`'s base has the commit `base` and its tree
/// (`git cat-file -e`: one process, where `git bundle verify` walks the
/// prerequisites' connectivity too, twice the time; the fetch into the
/// source and the push's scratch repository verify the bundle anyway; a
/// mirror as it was when a job's base name resolved to `base` there is
/// known to have it with no process, `mirror::holds_unchanged`); `Err`
/// says why not.
pub async fn holds_base(spec: &JobSpec, jobs_root: &Path, base: &str) -> Result<(), String> {
    holder_holds(holder(spec, jobs_root), base.to_owned()).await
}

/// [`holds_base`] started now on a task of its own, its answer awaited
/// later: at the job's end it is asked as the patch begins, beside the
/// staging of the work tree, not after the result commit is written (its
/// git process had been the last step of the patch; issue #14). The job
/// has ended by then, so the answer is the one asking later gives.
pub fn holds_base_soon(
    spec: &JobSpec,
    jobs_root: &Path,
    base: &str,
) -> tokio::task::JoinHandle<Result<(), String>> {
    tokio::spawn(holder_holds(holder(spec, jobs_root), base.to_owned()))
}

async fn holder_holds(holder: Option<Holder>, base: String) -> Result<(), String> {
    let tree = format!("{base}^{{tree}}");
    let check = ["cat-file", "-e", &tree];
    match holder {
        None => Err("no repository on this host keeps it: the source is one Paddock made for the job, removed with it".into()),
        Some(Holder::Source(path)) => user_git(&path, check)
            .await
            .map(|_| ())
            .map_err(|_| "the source does not have it any more".to_string()),
        Some(Holder::Mirror(dir)) => {
            if !dir.is_dir() {
                return Err(format!("the mirror {} is gone", dir.display()));
            }
            // As it was when a job's base name resolved to `base` there:
            // no git (`mirror::holds_unchanged`).
            let (unchanged_dir, commit) = (dir.clone(), base.clone());
            let unchanged = tokio::task::spawn_blocking(move || {
                mirror::holds_unchanged(&unchanged_dir, &commit)
            })
            .await
            .unwrap_or(false);
            if unchanged {
                return Ok(());
            }
            let git = HostGit {
                git_dir: Some(dir.clone()),
                work_tree: None,
                index: None,
                excludes: None,
                root: dir,
                timeout: GIT_TIMEOUT,
                cpu_limit: None,
            };
            git.run(check, None)
                .await
                .map(|_| ())
                .map_err(|_| "the source's mirror does not have it any more".to_string())
        }
    }
}

/// The branch a `base_ref` of `HEAD` (the default) means for a pull
/// request, which needs a branch to merge into: the branch the local
/// source has checked out, or the one the URL's remote named as its default
/// when the mirror was made (the mirror's `HEAD`). `Err` says why there is
/// none (a detached source, no repository on the host keeps the base).
pub async fn head_branch(spec: &JobSpec, jobs_root: &Path) -> Result<String, String> {
    let args = ["symbolic-ref", "--quiet", "--short", "HEAD"];
    let named = match holder(spec, jobs_root) {
        None => return Err("no repository on this host names the source's HEAD".into()),
        Some(Holder::Source(path)) => user_git(&path, args)
            .await
            .map_err(|_| format!("the source {} has no branch checked out", path.display()))?,
        Some(Holder::Mirror(dir)) => {
            let git = HostGit {
                git_dir: Some(dir.clone()),
                work_tree: None,
                index: None,
                excludes: None,
                root: dir.clone(),
                timeout: GIT_TIMEOUT,
                cpu_limit: None,
            };
            let out = git.run(args, None).await.map_err(|_| {
                format!(
                    "the mirror {} does not name the remote's default branch",
                    dir.display()
                )
            })?;
            String::from_utf8_lossy(&out).into_owned()
        }
    };
    let named = named.trim();
    let named = named.strip_prefix("heads/").unwrap_or(named);
    if named.is_empty() || named.contains(['\n', '\r']) {
        return Err("its HEAD names no branch".into());
    }
    Ok(named.to_string())
}

/// Whether `name` (a `base_ref` as written, neither `HEAD` nor a full
/// ref name nor `origin/…`) is a branch of the repository that keeps the
/// base on this host, as git reads the name there: git takes a tag before
/// a branch of the same name (`git help revisions`: `refs/tags/<name>`
/// before `refs/heads/<name>`), so a name that is both is the tag, and the
/// job's base was the tag's commit. `Err` says what the name is instead
/// (a tag, a tag and a branch, no branch at all: a commit's short name, a
/// remote-tracking branch of another remote). Nothing to ask (a source
/// Paddock made for the job; a mirror removed since the job, which a
/// later `paddock publish` makes again only for its push, after the
/// runner read the name there before the engine ran): `Ok`.
pub async fn is_branch(spec: &JobSpec, jobs_root: &Path, name: &str) -> Result<(), String> {
    let tag = format!("refs/tags/{name}");
    let branch = format!("refs/heads/{name}");
    let args = ["for-each-ref", "--format=%(refname)", &tag, &branch];
    let (listed, place) = match holder(spec, jobs_root) {
        None => return Ok(()),
        Some(Holder::Source(path)) => {
            let place = format!("the source {}", path.display());
            let out = user_git(&path, args)
                .await
                .map_err(|e| format!("cannot read the refs of {place}: {e}"))?;
            (out, place)
        }
        Some(Holder::Mirror(dir)) if !dir.is_dir() => return Ok(()),
        Some(Holder::Mirror(dir)) => {
            let place = format!("the source's mirror {}", dir.display());
            let git = HostGit {
                git_dir: Some(dir.clone()),
                work_tree: None,
                index: None,
                excludes: None,
                root: dir.clone(),
                timeout: GIT_TIMEOUT,
                cpu_limit: None,
            };
            let out = git
                .run(args, None)
                .await
                .map_err(|e| format!("cannot read the refs of {place}: {e}"))?;
            (String::from_utf8_lossy(&out).into_owned(), place)
        }
    };
    let has = |full: &str| listed.lines().any(|l| l == full);
    match (has(&tag), has(&branch)) {
        (false, true) => Ok(()),
        (true, true) => Err(format!(
            "`{name}` is both the tag {tag} and the branch {branch} in {place}, and git reads it \
             as the tag (the job's base was the tag's commit), which a pull request cannot merge \
             into: set results.base_branch to the branch to merge into (and base_ref = \
             \"{branch}\" to start from the branch)"
        )),
        (true, false) => Err(format!(
            "`{name}` is the tag {tag} in {place}, not a branch, and a pull request can only \
             merge into a branch: set results.base_branch to the branch to merge into"
        )),
        (false, false) => Err(format!(
            "`{name}` is no branch of {place} (no {branch}), and a pull request can only merge \
             into a branch: set results.base_branch to the branch to merge into"
        )),
    }
}

/// The prerequisites `bundle` names (the commits a repository must have
/// to fetch it): none for a bundle with the whole history. Reads only its
/// header (`# v2 git bundle`, or v3 with its capabilities), bounded.
pub fn prerequisites(bundle: &Path) -> std::io::Result<Vec<String>> {
    Ok(header(bundle)?.0)
}

/// The commit `bundle` gives the ref `refs/heads/<branch>` (a job's
/// `branch.bundle` holds its one branch), read from its header; `None`
/// when it names no such ref.
pub fn branch_tip(bundle: &Path, branch: &str) -> std::io::Result<Option<String>> {
    let wanted = format!("refs/heads/{branch}");
    Ok(header(bundle)?
        .1
        .into_iter()
        .find(|(_, name)| *name == wanted)
        .map(|(commit, _)| commit))
}

/// A bundle's refs as its header lists them: (commit, full name).
pub type BundleRefs = Vec<(String, String)>;

/// A bundle's header: its prerequisites and its refs. Opened as
/// `own_file` opens (no link followed, no FIFO waited on) and read only
/// from a regular file: a job's `branch.bundle` lies in its artifacts,
/// which a `process`-rung job (Paddock's own user) can reach, and a FIFO
/// there held `paddock publish` and the next attempt at the open for ever.
fn header(bundle: &Path) -> std::io::Result<(Vec<String>, BundleRefs)> {
    opened(bundle).map(|b| (b.prerequisites, b.refs))
}

/// A bundle opened, its header read ([`header`]), its file at the start
/// of its pack.
pub struct OpenedBundle {
    /// The prerequisites' names.
    pub prerequisites: Vec<String>,
    /// Its refs: (commit, full name).
    pub refs: BundleRefs,
    /// The bundle's file, its offset at the first byte of the pack.
    pub pack: std::fs::File,
}

/// Opens `bundle` as [`header`] does and reads its header; the file is
/// left at its pack's first byte.
pub fn opened(bundle: &Path) -> std::io::Result<OpenedBundle> {
    use std::io::Seek as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(crate::own_file::NO_LINK)
        .open(bundle)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut reader = std::io::BufReader::new(std::io::Read::take(&file, MAX_HEADER));
    let mut line = Vec::new();
    let mut out = Vec::new();
    let mut refs = Vec::new();
    let mut first = true;
    // The header's bytes read so far: where the pack starts.
    let mut at = 0u64;
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line)?;
        if n == 0 {
            return Err(std::io::Error::other("the bundle's header does not end"));
        }
        at += n as u64;
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches('\n');
        if first {
            if !text.starts_with("# v2 git bundle") && !text.starts_with("# v3 git bundle") {
                return Err(std::io::Error::other("not a git bundle"));
            }
            first = false;
            continue;
        }
        if text.is_empty() {
            drop(reader);
            file.seek(std::io::SeekFrom::Start(at))?;
            return Ok(OpenedBundle {
                prerequisites: out,
                refs,
                pack: file,
            });
        }
        if let Some(rest) = text.strip_prefix('-') {
            out.extend(rest.split(' ').next().map(str::to_string));
        } else if let Some((commit, name)) = text.split_once(' ') {
            if !text.starts_with('@') {
                refs.push((commit.to_string(), name.to_string()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_bundles_prerequisites_are_read_from_its_header() {
        let dir = tempfile::tempdir().unwrap();
        let read = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            prerequisites(&path).map_err(|e| e.to_string())
        };
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        assert_eq!(
            (
                read(
                    "thin",
                    format!("# v2 git bundle\n-{a} base subject\n{b} refs/heads/x\n\nPACK\n\0")
                        .as_bytes()
                ),
                read(
                    "v3",
                    format!("# v3 git bundle\n@object-format=sha1\n{b} refs/heads/x\n\nPACK")
                        .as_bytes()
                ),
                read("junk", b"PACK\n\n"),
                read("cut", format!("# v2 git bundle\n-{a}\n").as_bytes()),
            ),
            (
                Ok(vec![a.clone()]),
                Ok(vec![]),
                Err("not a git bundle".to_string()),
                Err("the bundle's header does not end".to_string()),
            )
        );
    }

    #[test]
    fn a_bundles_branch_tip_is_read_from_its_header() {
        let dir = tempfile::tempdir().unwrap();
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let path = dir.path().join("b");
        std::fs::write(
            &path,
            format!("# v3 git bundle\n@object-format=sha1\n-{a} base\n{b} refs/heads/x/1\n\nPACK"),
        )
        .unwrap();
        assert_eq!(
            (
                branch_tip(&path, "x/1").unwrap(),
                branch_tip(&path, "x").unwrap(),
                prerequisites(&path).unwrap(),
            ),
            (Some(b), None, vec![a])
        );
    }

    /// A bundle's header is read only from a regular file: a link (to a
    /// real bundle) is not followed, a FIFO no one writes is refused at
    /// once (was: waited on for ever), a directory is refused.
    #[test]
    fn a_bundle_that_is_no_regular_file_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        let b = "b".repeat(40);
        std::fs::write(&real, format!("# v2 git bundle\n{b} refs/heads/x\n\nPACK")).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        nix::unistd::mkfifo(&dir.path().join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let dir_path = dir.path().to_path_buf();
        std::thread::spawn(move || {
            let said = ["link", "fifo", "."]
                .map(|name| branch_tip(&dir_path.join(name), "x").map_err(|e| e.to_string()));
            tx.send(said)
        });
        let said = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .map_err(|_| "waited");
        let eloop = std::io::Error::from_raw_os_error(nix::libc::ELOOP).to_string();
        assert_eq!(
            (said, branch_tip(&real, "x").unwrap()),
            (
                Ok([
                    Err(eloop),
                    Err("not a regular file".to_string()),
                    Err("not a regular file".to_string()),
                ]),
                Some(b)
            )
        );
    }
}
