//! URL sources cached as bare mirrors: `<jobs>/.mirrors/<url key>.git`,
//! made once by `git clone --mirror` and brought up to date by `git
//! fetch --prune` before each job (a base commit no advertised ref
//! reaches then asked for by name, [`fetch_commit`]; for a job whose base
//! is `HEAD`, the mirror's `HEAD` pointed at the remote's default branch
//! as it is now, [`follow_remote_head`], which a fetch never moves), which then clones
//! from it (a local,
//! hard-linked clone into Paddock's own git directory; the job never sees
//! either). Jobs on one URL take turns (an exclusive `flock` on
//! `<url key>.lock` while the mirror is made or fetched and a job clones
//! from it). A broken mirror
//! (not a repository, or a commit its refs name missing: `git fsck
//! --connectivity-only` fails after the fetch) is removed and made again,
//! and the job says so (a non-fatal error event); what the job reads from
//! the mirror (its base commit's name) is read beside that check and kept
//! only if it passes. The check is left out when the fetch left the
//! mirror as the last passing check saw it (nothing written since:
//! `mirror_state.rs`), as it is on most jobs, unless what the job reads
//! from it then fails (checked after all, made again if broken); there
//! the base's name read by an earlier job under the same state is taken
//! as it was (no `git rev-parse`: `mirror_names.rs`); the
//! fetch writes no `FETCH_HEAD`, which nothing reads. A URL that is a
//! bundle on this host is not fetched at all while its refs and the
//! mirror are as they were at the mirror's last fetch from it
//! (`bundle_source.rs`: that fetch would write nothing). No git process is started that the job does not
//! need: no automatic maintenance after a fetch, no commit-graph or
//! multi-pack-index verification in a mirror that has neither. Made with the user's git
//! configuration (their credentials for the URL), like a clone of the URL,
//! or with the spec's `repository.token`: an `http.extraHeader` in the
//! environment of each git process (`GIT_CONFIG_COUNT`), never on its
//! command line or in the mirror's configuration, whose `origin` is the
//! URL as the spec gives it (a spec's URL carries no credential). With
//! or without the token, a clone or fetch reaches the URL's server and no
//! other: no `url.<base>.insteadOf` of any configuration applies (an SSH
//! rewrite would have used the user's keys and agent, a path rewrite a
//! repository of the host's), nor does a redirect of the URL's server
//! (another host, one the server reaches and the submitter does not):
//! `remote_config.rs`. Git's
//! error text has any `user:password@` of a URL it echoes (a user's
//! `insteadOf` may add one) cut before it becomes a job's error.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use nix::fcntl::{Flock, FlockArg};
use sha2::{Digest as _, Sha256};
use tokio::process::Command;

pub(crate) use super::mirror_names::Names;
use super::remote_config::RemoteConfig;
use super::{bundle_source, host_git, mirror_state, WorkspaceError};
use crate::secret::Secret;

/// Where the mirrors live, under the jobs directory.
pub(crate) const MIRRORS: &str = ".mirrors";

/// A mirror ready to clone from, and what happened to it on the way;
/// no other job fetches or remakes it while this is held.
#[derive(Debug)]
pub(super) struct Mirror {
    pub dir: PathBuf,
    /// Why it was made again (a broken mirror), for the job's events.
    pub remade: Option<String>,
    _lock: Flock<std::fs::File>,
}

/// The up-to-date mirror of `url` under `jobs_root`.
#[cfg(test)]
pub(super) async fn fetched(
    jobs_root: &Path,
    url: &str,
    token: Option<&Secret>,
) -> Result<Mirror, WorkspaceError> {
    fetched_then(jobs_root, url, token, false, |_, _| async {})
        .await
        .map(|(mirror, ())| mirror)
}

/// What a job reads from its mirror ([`fetched_then`]): whether that read
/// failed, which has a mirror whose check was left out checked after all.
pub(super) trait MirrorRead {
    fn failed(&self) -> bool;
}

impl MirrorRead for () {
    fn failed(&self) -> bool {
        false
    }
}

impl<A, E> MirrorRead for Result<A, E> {
    fn failed(&self) -> bool {
        self.is_err()
    }
}

/// The up-to-date mirror of `url` under `jobs_root`, and what `then`
/// reads from it (the base commit's name): on a mirror that was there, run
/// beside its check (`git fsck`, a process of its own) once the fetch has
/// succeeded and kept only if the check passes (the check left out for a
/// mirror as its last passing check saw it, unless the read fails: then
/// `then` is given the names read under that state, `mirror_names.rs`,
/// else names that answer nothing); on a mirror made (again), run after
/// it is made. With `follow_head` (a job whose base is `HEAD`), a mirror
/// that was there has its `HEAD` pointed at the remote's default branch
/// as it is now ([`follow_remote_head`]), not as it was when the mirror
/// was made.
pub(super) async fn fetched_then<T, F, Fut>(
    jobs_root: &Path,
    url: &str,
    token: Option<&Secret>,
    follow_head: bool,
    then: F,
) -> Result<(Mirror, T), WorkspaceError>
where
    T: MirrorRead,
    F: Fn(PathBuf, Names) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let root = jobs_root.join(MIRRORS);
    std::fs::create_dir_all(&root).map_err(|source| WorkspaceError::Create {
        path: root.clone(),
        source,
    })?;
    let key = key_of(url);
    let dir = root.join(format!("{key}.git"));
    let lock_path = root.join(format!("{key}.lock"));
    let lock = super::lease::lock_file(&lock_path, FlockArg::LockExclusive)
        .await
        .map_err(|source| WorkspaceError::Create {
            path: lock_path.clone(),
            source,
        })?;
    // Used now (what pruning reads, `prune.rs`).
    super::prune::stamp(&lock_path);
    let mut remade = None;
    let mut read_early = None;
    if dir.is_dir() {
        let fetch = [
            "--git-dir",
            &arg(&dir),
            "fetch",
            "--prune",
            "--quiet",
            "--no-write-fetch-head",
            "origin",
        ];
        // A bundle on this host whose header the mirror, unchanged since,
        // was last fetched from: the fetch would write nothing
        // (`bundle_source.rs`).
        let bundle = bundle_source::read(url);
        let done = bundle.as_ref().and_then(|b| {
            mirror_state::unchanged(&dir)
                .filter(|(_, state)| bundle_source::fetched_from(&dir, b, state))
        });
        let (fetched, unchanged, ran) = match done {
            Some((names, _)) => (Ok(()), Some(names), false),
            None => {
                bundle_source::forget(&dir);
                #[cfg(test)]
                checks::fetch_counted(&dir);
                // The remote's `HEAD` is asked for beside the fetch (one
                // round trip, not two) and followed once the fetch is in.
                let (fetched, head) = match follow_head && bundle.is_none() {
                    true => tokio::join!(
                        git(&dir, url, true, token, &fetch),
                        remote_head(&dir, url, token)
                    ),
                    false => (git(&dir, url, true, token, &fetch).await, Ok(None)),
                };
                let fetched = match (fetched, head) {
                    (Ok(()), Ok(Some(named))) => follow_remote_head(&dir, url, &named).await,
                    (Ok(()), Ok(None)) => Ok(()),
                    (Ok(()), Err(e)) | (Err(e), _) => Err(e),
                };
                let unchanged = match fetched {
                    Ok(()) => mirror_state::unchanged_names(&dir),
                    Err(_) => None,
                };
                (fetched, unchanged, true)
            }
        };
        let check = match (fetched.as_ref(), unchanged) {
            // As the last passing check saw it (`mirror_state.rs`): not
            // checked, unless what the job reads from it fails; the
            // names read under that state answer (`mirror_names.rs`).
            (Ok(()), Some(names)) => {
                let read = then(dir.clone(), names).await;
                let check = match read.failed() {
                    true => broken(&dir, url).await,
                    false => None,
                };
                if check.is_none() {
                    if read.failed() {
                        mirror_state::checked(&dir);
                    }
                    read_early = Some(read);
                }
                check
            }
            (Ok(()), None) => {
                let (check, read) =
                    tokio::join!(broken(&dir, url), then(dir.clone(), Names::none(&dir)));
                read_early = Some(read);
                if check.is_none() {
                    mirror_state::checked(&dir);
                }
                check
            }
            (Err(_), _) => broken(&dir, url).await,
        };
        match (fetched, check) {
            (_, Some(why)) => {
                read_early = None;
                remade = Some(format!(
                    "the mirror of {url} was broken ({why}); it was made again"
                ));
                // A tree a `process`-rung job could have written into:
                // removed whatever its depth (`remove.rs`).
                super::remove::remove_tree(&dir).map_err(|source| WorkspaceError::Create {
                    path: dir.clone(),
                    source,
                })?;
            }
            (Err(e), None) => return Err(e),
            // Fetched from a bundle, the mirror checked (or as its last
            // passing check saw it): kept for the next job's fetch.
            (Ok(()), None) => {
                if let (true, Some(bundle)) = (ran, &bundle) {
                    if let Some((_, state)) = mirror_state::unchanged(&dir) {
                        bundle_source::keep(&dir, url, bundle, &state);
                    }
                }
            }
        }
    }
    if !dir.is_dir() {
        let tmp = root.join(format!(".tmp-{key}-{}", std::process::id()));
        if tmp.exists() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        let cloned = git(
            &root,
            url,
            true,
            token,
            &[
                "clone",
                "--mirror",
                "--quiet",
                "--template=",
                "--",
                url,
                &arg(&tmp),
            ],
        )
        .await;
        let placed = cloned.and_then(|()| {
            std::fs::rename(&tmp, &dir).map_err(|source| WorkspaceError::Create {
                path: dir.clone(),
                source,
            })
        });
        if tmp.exists() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        placed?;
    }
    let read = match read_early {
        Some(read) => read,
        None => then(dir.clone(), Names::none(&dir)).await,
    };
    Ok((
        Mirror {
            dir,
            remade,
            _lock: lock,
        },
        read,
    ))
}

/// Whether the mirror `dir` has the commit `commit` and its tree, told
/// without starting a git (issue #14: a `cat-file -e` was one process on
/// every URL job's end, `results/base_objects.rs`): the mirror is as its
/// last passing check saw it (`mirror_state.rs`: nothing written since,
/// not a ref, a pack, a loose object) and a job's base name read under
/// that very state resolved to `commit` (`mirror_names.rs`). The commit
/// was there then, and its tree with it (`git fsck --connectivity-only`
/// passed on that state; a commit fetched by its name was checked by its
/// fetch), and nothing was removed since. `false` says only that this
/// cannot tell: ask git.
pub(crate) fn holds_unchanged(dir: &Path, commit: &str) -> bool {
    mirror_state::unchanged_names(dir).is_some_and(|names| names.holds(commit))
}

/// Whether the mirror `dir` has the commit `commit` (a full name) and its
/// tree.
pub(super) async fn has_commit(dir: &Path, url: &str, commit: &str) -> bool {
    let tree = format!("{commit}^{{tree}}");
    git(
        dir,
        url,
        false,
        None,
        &["--git-dir", &arg(dir), "cat-file", "-e", &tree],
    )
    .await
    .is_ok()
}

/// Fetches the commit `commit` (a full name, checked by the caller) from
/// the mirror's `origin` by its name, no ref changed, no `FETCH_HEAD`
/// written.
pub(super) async fn fetch_commit(
    dir: &Path,
    url: &str,
    token: Option<&Secret>,
    commit: &str,
) -> Result<(), WorkspaceError> {
    let fetch = [
        "--git-dir",
        &arg(dir),
        "fetch",
        "--quiet",
        "--no-write-fetch-head",
        "origin",
        commit,
    ];
    git(dir, url, true, token, &fetch).await
}

/// The mirror's key: a hash of the URL.
fn key_of(url: &str) -> String {
    hex::encode(&Sha256::digest(url.as_bytes())[..12])
}

/// Where the mirror of `url` under `jobs_root` is (or would be).
pub(crate) fn dir_of(jobs_root: &Path, url: &str) -> PathBuf {
    jobs_root.join(MIRRORS).join(format!("{}.git", key_of(url)))
}

fn arg(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Why the mirror `dir` is broken (`git fsck` fails), or `None`. `fsck`
/// starts `git commit-graph verify` and `git multi-pack-index verify` (a
/// process each) even when the mirror has neither file; for a file that
/// is absent the check is turned off (`core.commitGraph`,
/// `core.multiPackIndex`), so one that exists is still verified.
async fn broken(dir: &Path, url: &str) -> Option<String> {
    #[cfg(test)]
    checks::counted(dir);
    mirror_state::forget(dir);
    let objects = dir.join("objects");
    let absent = |rel: &str| std::fs::symlink_metadata(objects.join(rel)).is_err();
    let mut args: Vec<String> = Vec::new();
    if absent("info/commit-graph") && absent("info/commit-graphs") {
        args.extend(["-c".into(), "core.commitGraph=false".into()]);
    }
    if absent("pack/multi-pack-index") {
        args.extend(["-c".into(), "core.multiPackIndex=false".into()]);
    }
    args.extend(
        [
            "--git-dir",
            &arg(dir),
            "fsck",
            "--connectivity-only",
            "--no-dangling",
        ]
        .map(String::from),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match git(dir, url, false, None, &args).await {
        Ok(()) => None,
        Err(WorkspaceError::Clone { stderr, .. }) => Some(
            stderr
                .lines()
                .next()
                .unwrap_or("git rev-list --all failed")
                .to_string(),
        ),
        Err(e) => Some(e.to_string()),
    }
}

/// Runs the user's git with `args` (hooks off, no prompt) in `cwd`; when
/// it reaches the `remote` (a clone or fetch), with the configuration of
/// `remote_config.rs` and `token` as its `Authorization` header; a
/// failure is a `Clone` error of `url` with git's stderr, credentials in
/// URLs cut.
async fn git_out(
    cwd: &Path,
    url: &str,
    remote: bool,
    token: Option<&Secret>,
    args: &[&str],
) -> Result<Vec<u8>, WorkspaceError> {
    let mut cmd = Command::from(super::users_git::command());
    if remote {
        // The user's configuration less its URL rewrites, redirects not
        // followed (`remote_config.rs`); in this process's environment
        // only: nothing is written into the mirror, nothing is on the
        // command line. With the spec's token, no credential helper of
        // the user's is asked when the token is refused: the token is
        // the fetch's only credential.
        let config = RemoteConfig::read(cwd).await?;
        match token {
            Some(token) => {
                let header = token.basic_auth_header("x-access-token");
                config.apply(
                    &mut cmd,
                    &[
                        ("http.extraHeader", header.expose()),
                        ("credential.helper", ""),
                    ],
                );
            }
            None => config.apply(&mut cmd, &[]),
        }
    }
    // No automatic gc, nor the maintenance a fetch starts after itself
    // (`git maintenance run --auto`, one more process per job): a job may
    // be cloning from it.
    // `-C`, not the child's own directory: started by `posix_spawn`
    // (`host_git::git_program`).
    cmd.arg("-C")
        .arg(cwd)
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "gc.auto=0",
            "-c",
            "maintenance.auto=false",
        ])
        .args(args)
        .stdin(Stdio::null());
    let out = host_git::finished_within(cmd, cwd, &args.join(" "), host_git::CLONE_TIMEOUT).await?;
    if !out.status.success() {
        return Err(WorkspaceError::Clone {
            source_repo: url.to_string(),
            stderr: without_userinfo(String::from_utf8_lossy(&out.stderr).trim()),
        });
    }
    Ok(out.stdout)
}

/// Runs [`git_out`] for its success alone.
async fn git(
    cwd: &Path,
    url: &str,
    remote: bool,
    token: Option<&Secret>,
    args: &[&str],
) -> Result<(), WorkspaceError> {
    git_out(cwd, url, remote, token, args).await.map(drop)
}

/// The branch (`refs/heads/…`) the remote's `HEAD` names now (`git
/// ls-remote --symref origin HEAD`), if it names one; asked beside the
/// mirror's fetch ([`fetched_then`]) and then followed
/// ([`follow_remote_head`]).
async fn remote_head(
    dir: &Path,
    url: &str,
    token: Option<&Secret>,
) -> Result<Option<String>, WorkspaceError> {
    let listed = git_out(
        dir,
        url,
        true,
        token,
        &[
            "--git-dir",
            &arg(dir),
            "ls-remote",
            "--symref",
            "origin",
            "HEAD",
        ],
    )
    .await?;
    Ok(remote_head_branch(&String::from_utf8_lossy(&listed)).map(str::to_string))
}

/// Points the mirror `dir`'s `HEAD` at `named`, the branch the remote's
/// `HEAD` names now ([`remote_head`]). `git clone --mirror` sets it once
/// and `git fetch` never moves it, so a remote whose default branch was
/// renamed or changed since the mirror was made (`master` to `main`) had
/// every later job of a `HEAD` base on the old branch: failed (`base ref
/// HEAD is not a commit`) once the fetch pruned it, or, while the remote
/// still had it, based on it and proposed into it. A remote that names no
/// branch for its `HEAD` (a detached one, an old server) leaves the
/// mirror's as it is, and so does a branch the fetch did not bring (the
/// remote changed between the two, which ran side by side: the next
/// job's fetch follows it); the file is written only when it changes, so
/// an unchanged mirror stays as its last check saw it
/// (`mirror_state.rs`).
async fn follow_remote_head(dir: &Path, url: &str, named: &str) -> Result<(), WorkspaceError> {
    let head = dir.join("HEAD");
    let now = crate::own_file::read(&head, 4096).unwrap_or_default();
    if now.trim_end() == format!("ref: {named}") {
        return Ok(());
    }
    let git_dir = arg(dir);
    let fetched = [
        "--git-dir",
        &git_dir,
        "show-ref",
        "--verify",
        "--quiet",
        named,
    ];
    if git(dir, url, false, None, &fetched).await.is_err() {
        return Ok(());
    }
    git(
        dir,
        url,
        false,
        None,
        &["--git-dir", &git_dir, "symbolic-ref", "HEAD", named],
    )
    .await
}

/// The branch (`refs/heads/…`) that `git ls-remote --symref … HEAD`'s
/// output `listed` says the remote's `HEAD` names, if it names one.
fn remote_head_branch(listed: &str) -> Option<&str> {
    listed.lines().find_map(|line| {
        let target = line.strip_prefix("ref: ")?.strip_suffix("\tHEAD")?;
        let branch = target.strip_prefix("refs/heads/")?;
        let plain = !branch.is_empty()
            && !branch.starts_with('-')
            && !branch.contains("..")
            && !branch
                .chars()
                .any(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\@{".contains(c));
        plain.then_some(target)
    })
}

/// `text` with the user information of every `scheme://user[:password]@`
/// in it replaced by `[REDACTED]`.
pub(crate) fn without_userinfo(text: &str) -> String {
    static USERINFO: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    let re = USERINFO
        .get_or_init(|| regex::Regex::new(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s'\x22]+@").ok());
    match re {
        Some(re) => re.replace_all(text, "${1}[REDACTED]@").into_owned(),
        None => text.to_string(),
    }
}

/// How many times each mirror was checked (`broken`) and fetched into,
/// for the tests.
#[cfg(test)]
pub(super) mod checks {
    use std::collections::HashMap;
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;

    static CHECKS: Mutex<Option<HashMap<PathBuf, usize>>> = Mutex::new(None);

    pub fn counted(dir: &Path) {
        if let Ok(mut map) = CHECKS.lock() {
            *map.get_or_insert_with(HashMap::new)
                .entry(dir.to_path_buf())
                .or_default() += 1;
        }
    }

    static FETCHES: Mutex<Option<HashMap<PathBuf, usize>>> = Mutex::new(None);

    pub fn fetch_counted(dir: &Path) {
        if let Ok(mut map) = FETCHES.lock() {
            *map.get_or_insert_with(HashMap::new)
                .entry(dir.to_path_buf())
                .or_default() += 1;
        }
    }

    /// How many times the mirror `dir` was fetched into so far.
    pub fn fetches_of(dir: &Path) -> usize {
        FETCHES
            .lock()
            .ok()
            .and_then(|map| map.as_ref().and_then(|m| m.get(dir).copied()))
            .unwrap_or(0)
    }

    /// How many times the mirror `dir` was checked so far.
    pub fn of(dir: &Path) -> usize {
        CHECKS
            .lock()
            .ok()
            .and_then(|map| map.as_ref().and_then(|m| m.get(dir).copied()))
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(dir: &Path, args: &[&str]) {
        let ok = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }

    /// The fsck of a mirror leaves out the commit-graph's and the
    /// multi-pack index's checks only while it has no such file: a
    /// mirror without them is intact, one whose commit-graph is corrupt
    /// is found broken and made again.
    #[tokio::test]
    async fn a_mirrors_commit_graph_is_checked_when_it_has_one() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir(&src).unwrap();
        sh(&src, &["init", "-q", "-b", "main"]);
        for i in 0..3 {
            std::fs::write(src.join("f"), format!("{i}\n")).unwrap();
            sh(&src, &["add", "f"]);
            sh(&src, &["commit", "-qm", &format!("c{i}")]);
        }
        let jobs = tmp.path().join("jobs");
        let url = src.display().to_string();
        let first = fetched(&jobs, &url, None).await.unwrap();
        assert_eq!(first.remade, None);
        let dir = first.dir.clone();
        drop(first);
        let again = fetched(&jobs, &url, None).await.unwrap();
        assert_eq!(again.remade, None);
        drop(again);
        sh(&dir, &["commit-graph", "write", "--reachable"]);
        let graph = dir.join("objects/info/commit-graph");
        let mut bytes = std::fs::read(&graph).unwrap();
        let n = bytes.len();
        bytes[n - 40..n - 20].iter_mut().for_each(|b| *b ^= 0xff);
        std::fs::remove_file(&graph).unwrap();
        std::fs::write(&graph, bytes).unwrap();
        let remade = fetched(&jobs, &url, None).await.unwrap();
        assert!(
            remade
                .remade
                .as_deref()
                .is_some_and(|why| why.starts_with(&format!("the mirror of {url} was broken ("))),
            "{:?}",
            remade.remade
        );
        assert!(!graph.exists());
    }

    /// A fetch that leaves the mirror as its last passing check saw it
    /// is not checked again; one that wrote a ref is, and so is a mirror
    /// changed since by anything else (its objects removed), and a mirror
    /// just made, on its first fetch (a corrupt one found so and made
    /// again: `a_mirrors_commit_graph_is_checked_when_it_has_one`).
    #[tokio::test]
    async fn a_mirror_is_checked_only_when_written_since_its_last_check() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir(&src).unwrap();
        sh(&src, &["init", "-q", "-b", "main"]);
        let commit = |i: usize| {
            std::fs::write(src.join("f"), format!("{i}\n")).unwrap();
            sh(&src, &["add", "f"]);
            sh(&src, &["commit", "-qm", &format!("c{i}")]);
        };
        commit(0);
        let jobs = tmp.path().join("jobs");
        let url = src.display().to_string();
        let dir = dir_of(&jobs, &url);
        let mut seen = Vec::new();
        let fetch = || async {
            let m = fetched(&jobs, &url, None).await.unwrap();
            (checks::of(&dir), m.remade.is_some())
        };
        // Made, then fetched twice: checked on the first fetch only.
        seen.push(fetch().await);
        seen.push(fetch().await);
        seen.push(fetch().await);
        // A ref moved: checked, then not.
        commit(1);
        seen.push(fetch().await);
        seen.push(fetch().await);
        // Its objects removed (loose, as a local clone has them; the
        // fetch brings them back): checked, then not.
        for entry in std::fs::read_dir(dir.join("objects")).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().is_some_and(|n| n.len() == 2) {
                std::fs::remove_dir_all(path).unwrap();
            }
        }
        seen.push(fetch().await);
        seen.push(fetch().await);
        seen.push(fetch().await);
        assert_eq!(
            seen,
            vec![
                (0, false),
                (1, false),
                (1, false),
                (2, false),
                (2, false),
                (3, false),
                (3, false),
                (3, false),
            ]
        );
        assert!(!dir.join("FETCH_HEAD").exists());
    }

    /// A mirror as its last passing check saw it holds the commits a name
    /// read under that state resolved to, told with no git; not another
    /// commit, and not once anything is written to it (a ref here): then
    /// git is asked (`results/base_objects.rs`).
    #[tokio::test]
    async fn an_unchanged_mirror_holds_the_commits_its_names_resolved_to() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir(&src).unwrap();
        sh(&src, &["init", "-q", "-b", "main"]);
        std::fs::write(src.join("f"), "0\n").unwrap();
        sh(&src, &["add", "f"]);
        sh(&src, &["commit", "-qm", "c0"]);
        let out = std::process::Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(&src)
            .output()
            .unwrap();
        let base = String::from_utf8(out.stdout).unwrap().trim().to_string();
        let other = "0123456789abcdef0123456789abcdef01234567";
        let jobs = tmp.path().join("jobs");
        let url = src.display().to_string();
        let dir = dir_of(&jobs, &url);
        // Made, then fetched and checked (no names kept on either), then
        // fetched unchanged: `main` read and kept under the state, as a
        // job's provisioning keeps it.
        fetched(&jobs, &url, None).await.unwrap();
        fetched(&jobs, &url, None).await.unwrap();
        let before = holds_unchanged(&dir, &base);
        let base_for = base.clone();
        fetched_then(&jobs, &url, None, false, |_, names| {
            let base = base_for.clone();
            async move { names.remember("main", &base) }
        })
        .await
        .unwrap();
        let kept = (holds_unchanged(&dir, &base), holds_unchanged(&dir, other));
        sh(&dir, &["update-ref", "refs/heads/written", &base]);
        let written = holds_unchanged(&dir, &base);
        assert_eq!((before, kept, written), (false, (true, false), false));
    }

    /// A mirror damaged where its state does not show it (the kept state
    /// written again over the damage, as a bad sector would leave it): its
    /// check is left out, but what the job reads from it fails, so it is
    /// checked after all, found broken and made again, and the read made
    /// again on the new one.
    #[tokio::test]
    async fn a_read_failing_on_an_unchecked_mirror_has_it_checked_and_made_again() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir(&src).unwrap();
        sh(&src, &["init", "-q", "-b", "main"]);
        std::fs::write(src.join("f"), "content\n").unwrap();
        sh(&src, &["add", "f"]);
        sh(&src, &["commit", "-qm", "c"]);
        let out = std::process::Command::new("git")
            .args(["-C", src.to_str().unwrap(), "rev-parse", "main:f"])
            .output()
            .unwrap();
        let blob = String::from_utf8(out.stdout).unwrap().trim().to_string();
        let jobs = tmp.path().join("jobs");
        let url = src.display().to_string();
        let dir = dir_of(&jobs, &url);
        for _ in 0..2 {
            drop(fetched(&jobs, &url, None).await.unwrap());
        }
        assert!(mirror_state::unchanged_names(&dir).is_some());
        // The blob gone (a fetch does not notice: its check walks no
        // blob), the state kept over it.
        std::fs::remove_file(dir.join("objects").join(&blob[..2]).join(&blob[2..])).unwrap();
        mirror_state::checked(&dir);
        let checks = checks::of(&dir);
        let read = |d: PathBuf, _: Names| {
            let blob = blob.clone();
            async move {
                let ok = std::process::Command::new("git")
                    .args(["--git-dir", d.to_str().unwrap(), "cat-file", "-e", &blob])
                    .status()
                    .unwrap()
                    .success();
                ok.then_some(()).ok_or("missing")
            }
        };
        let (mirror, got) = fetched_then(&jobs, &url, None, false, read).await.unwrap();
        assert_eq!(
            (checks::of(&dir) - checks, mirror.remade.is_some(), got),
            (1, true, Ok(()))
        );
    }

    /// A bundle source's mirror is fetched into while the bundle's refs
    /// or the mirror changed since its last fetch, not otherwise: made,
    /// fetched (and checked), then not fetched while nothing changed (a
    /// bundle rewritten with the same refs included); a bundle with a new
    /// commit is fetched (its ref in the mirror after), then not; a mirror
    /// written to is fetched into again.
    #[tokio::test]
    async fn a_bundle_sources_mirror_is_fetched_only_when_its_refs_or_the_mirror_changed() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir(&src).unwrap();
        sh(&src, &["init", "-q", "-b", "main"]);
        let bundle = tmp.path().join("repo.bundle");
        let commit = |i: usize| {
            std::fs::write(src.join("f"), format!("{i}\n")).unwrap();
            sh(&src, &["add", "f"]);
            sh(&src, &["commit", "-qm", &format!("c{i}")]);
            let _ = std::fs::remove_file(&bundle);
            sh(
                &src,
                &["bundle", "create", "-q", bundle.to_str().unwrap(), "--all"],
            );
        };
        let head = || {
            let out = std::process::Command::new("git")
                .args(["-C", src.to_str().unwrap(), "rev-parse", "main"])
                .output()
                .unwrap();
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        };
        commit(0);
        let jobs = tmp.path().join("jobs");
        let url = bundle.display().to_string();
        let dir = dir_of(&jobs, &url);
        let fetch = || async {
            drop(fetched(&jobs, &url, None).await.unwrap());
            let out = std::process::Command::new("git")
                .args(["--git-dir", dir.to_str().unwrap(), "rev-parse", "main"])
                .output()
                .unwrap();
            let main = String::from_utf8(out.stdout).unwrap().trim().to_string();
            (checks::fetches_of(&dir), main)
        };
        let mut seen = Vec::new();
        // Made (no fetch), fetched and checked, then left as it is.
        seen.push(fetch().await);
        seen.push(fetch().await);
        seen.push(fetch().await);
        // The same bundle written again: the same refs.
        let bytes = std::fs::read(&bundle).unwrap();
        std::fs::write(&bundle, &bytes).unwrap();
        seen.push(fetch().await);
        let first = head();
        // A new commit: fetched, then not.
        commit(1);
        seen.push(fetch().await);
        seen.push(fetch().await);
        let second = head();
        // The mirror written to (a ref added): fetched again.
        sh(&dir, &["update-ref", "refs/heads/written", &second]);
        seen.push(fetch().await);
        seen.push(fetch().await);
        assert_eq!(
            seen,
            vec![
                (0, first.clone()),
                (1, first.clone()),
                (1, first.clone()),
                (1, first.clone()),
                (2, second.clone()),
                (2, second.clone()),
                (3, second.clone()),
                (3, second.clone()),
            ]
        );
        // The fetch pruned the ref written by hand.
        assert!(!dir.join("refs/heads/written").exists());
        assert_ne!(first, second);
    }

    /// The mirror's `HEAD` follows the branch the remote names only when
    /// the fetch brought that branch: the remote's `HEAD` is asked for
    /// beside the fetch, and a branch made after the fetch read the
    /// remote's refs (here one the mirror has not got) leaves `HEAD` as
    /// it was, for the next job's fetch to follow, where `HEAD` would
    /// name a branch the mirror lacks and every job of a `HEAD` base
    /// fail until then.
    #[tokio::test]
    async fn the_mirrors_head_follows_only_a_branch_it_has() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir(&src).unwrap();
        sh(&src, &["init", "-q", "-b", "main"]);
        sh(&src, &["commit", "-q", "--allow-empty", "-m", "c"]);
        sh(&src, &["branch", "trunk"]);
        let mirror = tmp.path().join("m.git");
        sh(tmp.path(), &["clone", "-q", "--mirror", "src", "m.git"]);
        let url = src.display().to_string();
        let head = || std::fs::read_to_string(mirror.join("HEAD")).unwrap();
        let mut seen = Vec::new();
        for named in ["refs/heads/later", "refs/heads/trunk", "refs/heads/trunk"] {
            follow_remote_head(&mirror, &url, named).await.unwrap();
            seen.push(head());
        }
        assert_eq!(
            seen,
            [
                "ref: refs/heads/main\n",
                "ref: refs/heads/trunk\n",
                "ref: refs/heads/trunk\n"
            ]
        );
    }

    #[test]
    fn the_remotes_head_is_read_only_as_a_plain_branch() {
        let listed = "ref: refs/heads/trunk\tHEAD\n0123abcd\tHEAD\n";
        assert_eq!(remote_head_branch(listed), Some("refs/heads/trunk"));
        for listed in [
            "0123abcd\tHEAD\n",
            "ref: refs/tags/v1\tHEAD\n",
            "ref: refs/heads/\tHEAD\n",
            "ref: refs/heads/-x\tHEAD\n",
            "ref: refs/heads/a..b\tHEAD\n",
            "ref: refs/heads/a b\tHEAD\n",
            "ref: refs/heads/trunk\tmain\n",
        ] {
            assert_eq!(remote_head_branch(listed), None, "{listed:?}");
        }
    }

    #[test]
    fn urls_in_git_errors_lose_their_user_information() {
        assert_eq!(
            without_userinfo(
                "fatal: repository 'https://x-access-token:s3cret@git.example/r.git/' not found\n\
                 fatal: unable to access 'http://tok@127.0.0.1:9/r.git': refused; see https://git.example/help"
            ),
            "fatal: repository 'https://[REDACTED]@git.example/r.git/' not found\n\
             fatal: unable to access 'http://[REDACTED]@127.0.0.1:9/r.git': refused; see https://git.example/help"
        );
    }
}
