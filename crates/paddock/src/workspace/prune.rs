//! Pruning of the caches under the jobs directory, which otherwise grow
//! forever: the bare mirrors of URL sources (`.mirrors/<key>.git`,
//! `mirror.rs`), the overlay snapshots of base commits (`.snapshots/
//! <commit>-<key>`, `snapshot.rs`) and the locks of the fetches into
//! local sources (`.source-locks/<key>.lock`, `source_lock.rs`: in use
//! while a fetch holds it; removed while the pass holds it). A mirror's or
//! a snapshot's lock file is removed with it, while the pass holds it, and
//! one without its mirror or snapshot as a source's is; a job waiting for
//! a removed one takes the one made anew (`lease::lock_file`), so no lock
//! file outlives what it locks. The rule: an entry not used for
//! [`UNUSED_FOR`] (its last use stamped as its lock file's, or its own,
//! modification time each time a job takes it) is removed, never one in
//! use. A mirror is in use while a job holds its `<key>.lock` (pruning
//! takes the same exclusive `flock`, without waiting, and removes the
//! mirror while holding it); a snapshot is in use while a job holds its
//! `<name>.lock` shared (from before it stamps the snapshot until its
//! `meta/overlay` names it) and while any job directory names it as its
//! overlay's lower layer (`meta/overlay`), kept or dead alike. Nothing is
//! followed: entries are looked at with `lstat`, a link or other
//! non-directory in place of an entry is left alone, and the removal
//! (`remove.rs`: no stack or descriptor per level, whatever the depth)
//! unlinks links inside without following them. Run by the reaper
//! (`paddock gc`, and the start of `paddock run` and `paddock serve`).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use nix::fcntl::{Flock, FlockArg};

use super::mirror::MIRRORS;
use super::snapshot::SNAPSHOTS;
use super::source_lock::SOURCE_LOCKS;
use super::OVERLAY;

/// How long a cache entry may go unused before it is pruned.
pub const UNUSED_FOR: Duration = Duration::from_secs(14 * 24 * 3600);

/// What one pruning pass removed, and what it could not.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Pruned {
    /// Removed entries (mirrors, snapshots, setup cache entries).
    pub removed: Vec<PrunedEntry>,
    pub errors: Vec<String>,
}

/// One removed cache entry, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PrunedEntry {
    pub path: PathBuf,
    pub reason: Reason,
    /// What it took on disk (measured by the size cap's pass only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
}

impl PrunedEntry {
    /// An entry pruned for its age.
    pub fn unused(path: PathBuf) -> PrunedEntry {
        PrunedEntry {
            path,
            reason: Reason::Age,
            bytes: None,
        }
    }
}

/// Why a cache entry was removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Reason {
    /// Unused for [`UNUSED_FOR`].
    Age,
    /// The least recently used while the caches were over their size cap
    /// (`crate::cache_cap`).
    Cap,
}

/// Stamps `path` (a lock file, a snapshot directory) as used now: only a
/// regular file or a directory, opened without following a link or
/// waiting on a FIFO (one planted there held the job at the open for
/// ever; a link had another file stamped).
pub(crate) fn stamp(path: &Path) {
    use std::os::unix::fs::OpenOptionsExt as _;
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(crate::own_file::NO_LINK | nix::libc::O_CLOEXEC)
        .open(path)
    else {
        return;
    };
    if file.metadata().is_ok_and(|m| m.is_file() || m.is_dir()) {
        let _ = file.set_modified(SystemTime::now());
    }
}

/// When `path` (a lock file, a snapshot directory) was last used: its
/// modification time, the link itself when it is one.
pub(crate) fn last_use(path: &Path) -> Option<SystemTime> {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .ok()
}

/// Whether `path`'s modification time is at least `unused_for` ago.
fn unused(path: &Path, now: SystemTime, unused_for: Duration) -> bool {
    crate::file_age::of(path, now).is_some_and(|age| age >= unused_for)
}

/// The directories (not links) directly under `dir`, with their names.
pub(crate) fn subdirs(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    out.sort();
    out
}

/// Prunes the caches under `jobs_root` of entries unused for `unused_for`.
pub fn prune(jobs_root: &Path, unused_for: Duration) -> Pruned {
    let now = SystemTime::now();
    let mut pruned = Pruned::default();
    prune_mirrors(&jobs_root.join(MIRRORS), now, unused_for, &mut pruned);
    prune_snapshots(jobs_root, now, unused_for, &mut pruned);
    // Lock files without what they lock: a source's always, a mirror's
    // or a snapshot's when a pass removed it before its lock went too
    // (an older Paddock, a failure) or a job took the lock and made
    // nothing (a clone that failed).
    let without = |suffix: &'static str| move |lock: &Path| !lock.with_extension(suffix).exists();
    prune_locks(
        &jobs_root.join(MIRRORS),
        now,
        unused_for,
        &mut pruned,
        without("git"),
    );
    prune_locks(
        &jobs_root.join(SNAPSHOTS),
        now,
        unused_for,
        &mut pruned,
        without(""),
    );
    prune_locks(
        &jobs_root.join(SOURCE_LOCKS),
        now,
        unused_for,
        &mut pruned,
        |_| true,
    );
    pruned
}

fn remove(dir: &Path, pruned: &mut Pruned) {
    match remove_unless_gone(dir) {
        Ok(true) => pruned.removed.push(PrunedEntry::unused(dir.to_path_buf())),
        Ok(false) => {}
        Err(e) => pruned.errors.push(e),
    }
}

/// Removes `dir` with what is in it; `false` when another pass (a `paddock
/// gc`, a job's detached cap pass, `serve`'s) removed it first: it is
/// gone, which is what was wanted, and neither an error nor this pass's
/// removal. Anything else that fails is an error naming `dir`.
pub(crate) fn remove_unless_gone(dir: &Path) -> Result<bool, String> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Ok(m) if !m.is_dir() => {
            return Err(format!(
                "prune {}: cannot remove: not a directory",
                dir.display()
            ))
        }
        _ => {}
    }
    // A snapshot's files a `process`-rung job could write: removed with no
    // stack or descriptor per level, whatever its depth (`remove.rs`).
    match super::remove::remove_tree(dir) {
        Ok(()) => Ok(true),
        // Another pass at it too, done first.
        Err(_) if std::fs::symlink_metadata(dir).is_err() => Ok(false),
        Err(e) => Err(format!("prune {}: cannot remove: {e}", dir.display())),
    }
}

/// Where a mirror's last use is stamped: its lock file, or the mirror
/// itself when it has none.
pub(crate) fn mirror_stamp(dir: &Path) -> PathBuf {
    let lock = dir.with_extension("lock");
    if lock.exists() {
        lock
    } else {
        dir.to_path_buf()
    }
}

/// Removes the mirror `dir` (`<key>.git`) if no job holds it and none has
/// used it since `seen` (its last use when it was chosen); whether it did.
pub(crate) fn remove_mirror_if_unused(dir: &Path, seen: SystemTime) -> Result<bool, String> {
    let lock_path = dir.with_extension("lock");
    let mut pruned = Pruned::default();
    let Some(held) = lock(&lock_path, &mut pruned) else {
        return pruned.errors.pop().map_or(Ok(false), Err);
    };
    if last_use(&mirror_stamp(dir)).is_some_and(|t| t > seen) {
        return Ok(false);
    }
    let removed = remove_held(dir).and_then(|r| remove_lock_held(&lock_path).map(|()| r));
    drop(held);
    removed
}

/// Removes `dir`, whose lock the caller holds; `true` when it did (a pass
/// that held the lock before may have removed it already).
fn remove_held(dir: &Path) -> Result<bool, String> {
    remove_unless_gone(dir)
}

/// Removes the snapshot `dir` (`.snapshots/<name>`) if no job holds its
/// lock, none names it as its lower layer, and none has used it since
/// `seen`; whether it did.
pub(crate) fn remove_snapshot_if_unused(
    jobs_root: &Path,
    dir: &Path,
    seen: SystemTime,
) -> Result<bool, String> {
    let lock_path = dir.with_extension("lock");
    let lock_path = match dir.file_name() {
        // A commit-key name has no dot: `with_extension` is the lock's name.
        Some(name) if !name.to_string_lossy().contains('.') => lock_path,
        _ => return Ok(false),
    };
    let mut pruned = Pruned::default();
    let Some(held) = lock(&lock_path, &mut pruned) else {
        return pruned.errors.pop().map_or(Ok(false), Err);
    };
    let named = lower_layers(jobs_root)
        .iter()
        .any(|lower| lower.starts_with(dir));
    if named || last_use(dir).is_some_and(|t| t > seen) {
        return Ok(false);
    }
    let removed = remove_held(dir).and_then(|r| remove_lock_held(&lock_path).map(|()| r));
    drop(held);
    removed
}

/// Removes the lock file `path`, which the caller holds (after removing
/// what it locks): a job waiting for it then finds it is no longer the
/// file at its path and takes the one made there anew
/// (`lease::lock_file`), so lock files do not outlive what they lock.
fn remove_lock_held(path: &Path) -> Result<(), String> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(format!("prune {}: cannot remove: {e}", path.display()))
        }
        _ => Ok(()),
    }
}

/// What [`remove_mirror_if_unused`] or [`remove_snapshot_if_unused`]
/// answered, noted in `pruned` as removed for its age or as an error.
fn note_age(dir: &Path, removed: Result<bool, String>, pruned: &mut Pruned) {
    match removed {
        Ok(true) => pruned.removed.push(PrunedEntry::unused(dir.to_path_buf())),
        Ok(false) => {}
        Err(e) => pruned.errors.push(e),
    }
}

/// The age pass over the mirrors: the size cap's in-use rules
/// ([`remove_mirror_if_unused`]) with the last use allowed at `now -
/// unused_for`.
fn prune_mirrors(root: &Path, now: SystemTime, unused_for: Duration, pruned: &mut Pruned) {
    let Some(cutoff) = now.checked_sub(unused_for) else {
        return;
    };
    for (name, dir) in subdirs(root) {
        if !name.ends_with(".git") {
            // A clone left half-made by a process that died (`.tmp-…`).
            if name.starts_with(".tmp-") && unused(&dir, now, unused_for) {
                remove(&dir, pruned);
            }
            continue;
        }
        // Judged first without the lock (taking it makes its file).
        if unused(&mirror_stamp(&dir), now, unused_for) {
            note_age(&dir, remove_mirror_if_unused(&dir, cutoff), pruned);
        }
    }
}

/// The age pass over the snapshots: the size cap's in-use rules
/// ([`remove_snapshot_if_unused`]) for made ones. A half-made one
/// (`.tmp-…`) is its maker's until it is old: no job holds a lock on it or
/// names it, so it is then removed as a mirror's half-made clone is.
fn prune_snapshots(jobs_root: &Path, now: SystemTime, unused_for: Duration, pruned: &mut Pruned) {
    let Some(cutoff) = now.checked_sub(unused_for) else {
        return;
    };
    for (name, dir) in subdirs(&jobs_root.join(SNAPSHOTS)) {
        if !unused(&dir, now, unused_for) {
            continue;
        }
        if name.starts_with(".tmp-") {
            remove(&dir, pruned);
        } else {
            note_age(
                &dir,
                remove_snapshot_if_unused(jobs_root, &dir, cutoff),
                pruned,
            );
        }
    }
}

/// The age pass over lock files in `root` (`<name>.lock`) that `orphan`
/// says lock nothing that is there: the locks of the fetches into local
/// sources (`source_lock.rs`), and a mirror's or a snapshot's without its
/// mirror or snapshot. A lock file (a regular file, never a link) unused
/// for `unused_for` is removed while this pass holds it, taken without
/// waiting (one held is in use: left), its age judged again once held (a
/// job may have stamped it meanwhile), the file held checked to be the one
/// at the path and `orphan` asked again (a job may have made what it locks).
fn prune_locks(
    root: &Path,
    now: SystemTime,
    unused_for: Duration,
    pruned: &mut Pruned,
    orphan: impl Fn(&Path) -> bool,
) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    let mut locks: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter(|e| e.file_name().to_string_lossy().ends_with(".lock"))
        .map(|e| e.path())
        .collect();
    locks.sort();
    for path in locks {
        if !unused(&path, now, unused_for) || !orphan(&path) {
            continue;
        }
        // Opened, never made: one another pass removed stays removed.
        let Ok(file) = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags_nofollow()
            .open(&path)
        else {
            continue;
        };
        let Ok(held) = Flock::lock(file, FlockArg::LockExclusiveNonblock) else {
            continue;
        };
        if !unused(&path, now, unused_for) || !super::lease::is_at(&held, &path) || !orphan(&path) {
            continue;
        }
        match std::fs::remove_file(&path) {
            Ok(()) => pruned.removed.push(PrunedEntry::unused(path)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => pruned
                .errors
                .push(format!("prune {}: cannot remove: {e}", path.display())),
        }
        drop(held);
    }
}

/// The lock at `path`, taken exclusively without waiting; `None` when a
/// job holds it (or it cannot be opened: an error is noted).
fn lock(path: &Path, pruned: &mut Pruned) -> Option<Flock<std::fs::File>> {
    let file = match std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .custom_flags_nofollow()
        .open(path)
    {
        Ok(f) => f,
        Err(e) => {
            pruned.errors.push(format!("prune {}: {e}", path.display()));
            return None;
        }
    };
    Flock::lock(file, FlockArg::LockExclusiveNonblock).ok()
}

/// The lower layers job directories under `jobs_root` name
/// (`<job>/meta/overlay`), read as `own_file::read` reads a record (no link,
/// no FIFO waited on, bounded).
fn lower_layers(jobs_root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    // The trash's job directories too: one is moved there with its
    // overlay still mounted (`Workspace::remove`), unmounted only when the
    // trash is emptied; until then its snapshot is a mount's lower layer.
    let trashed = subdirs(&jobs_root.join(super::trash::TRASH));
    for (name, dir) in subdirs(jobs_root).into_iter().chain(trashed) {
        if name.starts_with('.') {
            continue;
        }
        let file = dir.join("meta").join(OVERLAY);
        // None: a clone workspace (or an overlay being set up, whose
        // snapshot was stamped as used just before).
        if let Ok(text) = crate::own_file::read(&file, super::MAX_NAME_RECORD) {
            out.push(PathBuf::from(text.trim_end_matches('\n')));
        }
    }
    out
}

/// `O_NOFOLLOW` on an `OpenOptions`, and `O_NONBLOCK`: a FIFO planted
/// in a lock's place (the caches are the user's files, which a
/// `process`-rung job can write) is refused at once (`ENXIO`) instead of
/// holding the prune at its open; a regular file's lock is the same.
trait NoFollow {
    fn custom_flags_nofollow(&mut self) -> &mut Self;
}

impl NoFollow for std::fs::OpenOptions {
    fn custom_flags_nofollow(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt as _;
        self.custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const DAY: Duration = Duration::from_secs(24 * 3600);

    /// Sets `path`'s modification time `age` ago, the path itself when it
    /// is a link.
    fn age(path: &Path, age: Duration) {
        use nix::sys::stat::{utimensat, UtimensatFlags};
        use nix::sys::time::TimeSpec;
        let then = SystemTime::now() - age;
        let secs = then.duration_since(SystemTime::UNIX_EPOCH).unwrap();
        let t = TimeSpec::from_duration(secs);
        utimensat(None, path, &t, &t, UtimensatFlags::NoFollowSymlink).unwrap();
    }

    /// A directory another pass removed first (two cap passes racing for
    /// one snapshot) is gone, which is neither this pass's removal nor an
    /// error; what cannot be removed is an error naming it.
    #[test]
    fn a_directory_another_pass_removed_is_not_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("snap");
        entry(&dir, 0);
        let first = remove_unless_gone(&dir);
        let second = remove_unless_gone(&dir);
        std::fs::write(&dir, "not a directory").unwrap();
        let file = remove_unless_gone(&dir).map_err(|e| {
            e.strip_prefix(&format!("prune {}: cannot remove: ", dir.display()))
                .is_some()
        });
        assert_eq!((first, second, file), (Ok(true), Ok(false), Err(true)));
    }

    /// A directory `dir` with a file, aged `days`.
    fn entry(dir: &Path, days: u32) {
        std::fs::create_dir_all(dir.join("objects")).unwrap();
        std::fs::write(dir.join("objects/pack"), "x").unwrap();
        age(dir, DAY * days);
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut n: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        n.sort();
        n
    }

    /// The locks of the fetches into local sources: an old one removed,
    /// one held by a fetch, a recent one, an old one a fetch has just
    /// taken (stamped as used) and a link in place of one kept; a fetch
    /// that opened the old one before it went finds, once it holds it,
    /// that it is not the file at that path any more (and takes the one
    /// there then). (Before, none was ever removed.)
    #[tokio::test]
    async fn old_source_locks_go_those_held_or_used_stay() {
        let tmp = tempfile::tempdir().unwrap();
        let jobs = tmp.path().join("jobs");
        let locks = jobs.join(SOURCE_LOCKS);
        std::fs::create_dir_all(&locks).unwrap();
        let outside = tmp.path().join("outside");
        std::fs::write(&outside, "keep me").unwrap();
        for (key, days) in [("old", 30), ("busy", 30), ("new", 1)] {
            let lock = locks.join(format!("{key}.lock"));
            std::fs::write(&lock, "").unwrap();
            age(&lock, DAY * days);
        }
        std::os::unix::fs::symlink(&outside, locks.join("planted.lock")).unwrap();
        age(&locks.join("planted.lock"), DAY * 30);
        let source = tmp.path().join("source");
        std::fs::create_dir_all(&source).unwrap();
        let used = super::super::source_lock::path_of(&jobs, &source);
        std::fs::write(&used, "").unwrap();
        age(&used, DAY * 30);
        drop(
            super::super::source_lock::hold(&jobs, &source)
                .await
                .unwrap(),
        );
        let busy = std::fs::File::open(locks.join("busy.lock")).unwrap();
        let busy = Flock::lock(busy, FlockArg::LockExclusive).unwrap();
        let waiting = std::fs::File::open(locks.join("old.lock")).unwrap();

        let pruned = prune(&jobs, UNUSED_FOR);
        drop(busy);
        let mut kept = vec![
            "busy.lock".to_string(),
            "new.lock".to_string(),
            "planted.lock".to_string(),
            used.file_name().unwrap().to_string_lossy().into_owned(),
        ];
        kept.sort();
        assert_eq!(
            (
                pruned,
                names(&locks),
                super::super::lease::is_at(&waiting, &locks.join("old.lock")),
                std::fs::read_to_string(&outside).unwrap(),
            ),
            (
                Pruned {
                    removed: vec![PrunedEntry::unused(locks.join("old.lock"))],
                    errors: vec![],
                },
                kept,
                false,
                "keep me".to_string(),
            )
        );
    }

    /// Mirrors: an old one removed with its lock file (a link planted
    /// inside it unlinked, its target untouched; a job that opened the
    /// lock before finds it is not the file at its path any more), one in
    /// use (its lock held) and a recent one kept, a link in place of a
    /// mirror left alone, an old half-made clone removed, an old lock file
    /// without its mirror removed, a recent one kept. (Before, lock files
    /// were never removed: one per URL ever used.)
    #[test]
    fn old_mirrors_go_those_in_use_or_recent_stay_links_are_never_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let jobs = tmp.path().join("jobs");
        let mirrors = jobs.join(MIRRORS);
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("precious"), "keep me").unwrap();
        for (key, days) in [("old", 30), ("busy", 30), ("new", 1)] {
            let lock = mirrors.join(format!("{key}.lock"));
            entry(&mirrors.join(format!("{key}.git")), days);
            std::fs::write(&lock, "").unwrap();
            age(&lock, DAY * days);
        }
        std::os::unix::fs::symlink(&outside, mirrors.join("old.git/objects/escape")).unwrap();
        std::os::unix::fs::symlink(&outside, mirrors.join("planted.git")).unwrap();
        age(&mirrors.join("planted.git"), DAY * 30);
        entry(&mirrors.join(".tmp-dead-1"), 30);
        for (key, days) in [("gone", 30), ("recent", 1)] {
            let lock = mirrors.join(format!("{key}.lock"));
            std::fs::write(&lock, "").unwrap();
            age(&lock, DAY * days);
        }
        let busy = std::fs::File::open(mirrors.join("busy.lock")).unwrap();
        let busy = Flock::lock(busy, FlockArg::LockExclusive).unwrap();
        let waiting = std::fs::File::open(mirrors.join("old.lock")).unwrap();

        let pruned = prune(&jobs, UNUSED_FOR);
        drop(busy);
        assert_eq!(
            (
                pruned,
                super::super::lease::is_at(&waiting, &mirrors.join("old.lock"))
            ),
            (
                Pruned {
                    removed: vec![
                        PrunedEntry::unused(mirrors.join(".tmp-dead-1")),
                        PrunedEntry::unused(mirrors.join("old.git")),
                        PrunedEntry::unused(mirrors.join("gone.lock"))
                    ],
                    errors: vec![],
                },
                false
            )
        );
        assert_eq!(
            names(&mirrors),
            [
                "busy.git",
                "busy.lock",
                "new.git",
                "new.lock",
                "planted.git",
                "recent.lock"
            ]
        );
        assert_eq!(names(&outside), ["precious"]);
    }

    /// Snapshots: an old one no job names removed; one a job's
    /// `meta/overlay` names (a kept or dead job's, or one in the trash,
    /// whose overlay may still be mounted: it was removed), one a job holds (its
    /// lock shared: between taking it and naming it) and a recent one
    /// kept; an old half-made one (`.tmp-…`) removed, a recent one (its
    /// maker's) kept, and no lock file made for either; the removed one's
    /// lock file removed with it, an old one without its snapshot too.
    #[test]
    fn old_snapshots_go_those_named_held_or_recent_stay() {
        let tmp = tempfile::tempdir().unwrap();
        let jobs = tmp.path().join("jobs");
        let snaps = jobs.join(SNAPSHOTS);
        for (name, days) in [
            ("c1-old", 30),
            ("c2-named", 30),
            ("c3-held", 30),
            ("c4-new", 2),
            (".tmp-c5-dead-1", 30),
            (".tmp-c6-making-2", 0),
        ] {
            entry(&snaps.join(name).join("tree"), 0);
            age(&snaps.join(name), DAY * days);
        }
        // Named by a job, and by a job moved into the trash with its
        // overlay still mounted.
        for (job, snap) in [("job-1", "c2-named"), (".trash/job-2", "c8-trashed")] {
            entry(&snaps.join(snap).join("tree"), 0);
            age(&snaps.join(snap), DAY * 30);
            let meta = jobs.join(job).join("meta");
            std::fs::create_dir_all(&meta).unwrap();
            std::fs::write(
                meta.join(OVERLAY),
                format!("{}\n", snaps.join(snap).join("tree").display()),
            )
            .unwrap();
        }
        let held = std::fs::File::create(snaps.join("c3-held.lock")).unwrap();
        let held = Flock::lock(held, FlockArg::LockShared).unwrap();
        std::fs::write(snaps.join("c7-gone.lock"), "").unwrap();
        age(&snaps.join("c7-gone.lock"), DAY * 30);

        let pruned = prune(&jobs, UNUSED_FOR);
        drop(held);
        assert_eq!(
            pruned,
            Pruned {
                removed: vec![
                    PrunedEntry::unused(snaps.join(".tmp-c5-dead-1")),
                    PrunedEntry::unused(snaps.join("c1-old")),
                    PrunedEntry::unused(snaps.join("c7-gone.lock"))
                ],
                errors: vec![],
            }
        );
        assert_eq!(
            names(&snaps),
            [
                ".tmp-c6-making-2",
                "c2-named",
                "c2-named.lock",
                "c3-held",
                "c3-held.lock",
                "c4-new",
                "c8-trashed",
                "c8-trashed.lock"
            ]
        );
    }
}
