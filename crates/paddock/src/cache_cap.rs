//! The size cap on the caches under the jobs directory (issue #14): the
//! bare mirrors of URL sources (`.mirrors/<key>.git`), the overlay
//! snapshots of base commits (`.snapshots/<commit>-<key>`) and the setup
//! cache's entries (`.setup-cache/<key>-<commit>`) together may take at
//! most the config file's `[caches] max_size` (`config::CachesFile`,
//! 10 GiB unless set). Pruning by age (`workspace/prune.rs`) alone lets
//! them grow without bound within 14 days, and a user on a laptop never
//! runs `paddock gc`: so [`enforce`] runs after every job (the detached
//! remover that goes once `paddock run` has exited, [`after_job_main`]; the
//! background thread of `paddock serve`), as `paddock serve` starts (a
//! thread of its own; not at `paddock run`'s start, which is the job's
//! path) and in `paddock gc`.
//!
//! A pass measures every entry (`workspace/disk_usage.rs`: `lstat` only,
//! no link followed, no FIFO opened, bounded depth and entry count) and,
//! when the total is over the cap, removes entries least recently used
//! first (the same last-use stamps the age pruning reads) until it is
//! under, never one in use, by the age pruning's rules: a mirror only
//! while holding its `<key>.lock` exclusively (taken without waiting), a
//! snapshot only while holding its `<name>.lock` exclusively and when no
//! job directory's `meta/overlay` names it, a setup cache entry only while
//! holding the setup cache's `.lock` exclusively (restores hold it
//! shared); an entry used after it was measured is skipped. Half-made
//! entries (`.tmp-…`) are counted but left to their maker (and to the age
//! pruning). Entries in use may keep the caches over the cap: nothing
//! waits for them.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;

use crate::workspace::disk_usage;
use crate::workspace::prune::{self, PrunedEntry, Reason};

/// What one pass of the cap did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Capped {
    /// The cap, in bytes.
    pub max_bytes: u64,
    /// The caches' size before the pass and after it.
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// Cache entries measured (half-made ones included).
    pub entries: usize,
    /// Entries removed, least recently used first.
    pub removed: Vec<PrunedEntry>,
    pub errors: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Mirror,
    Snapshot,
    Setup,
}

#[derive(Debug)]
struct Candidate {
    kind: Kind,
    path: PathBuf,
    /// Its last use when measured (`None`: unknown, taken as oldest).
    seen: Option<SystemTime>,
    bytes: u64,
}

/// The memo of the sizes of entries that do not change once in place
/// (snapshots, setup cache entries), under the jobs directory.
const MEMO: &str = ".cache-sizes.json";
/// The most of the memo that is read.
const MEMO_MAX: u64 = 16 << 20;

/// An entry's size, by path, with what identifies the directory measured
/// (its inode and birth time: an entry removed and made again under the
/// same name is measured again).
type Memo = std::collections::BTreeMap<String, (u64, u128, u64)>;

fn read_memo(jobs_root: &Path) -> Memo {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(jobs_root.join(MEMO))
    else {
        return Memo::new();
    };
    let mut text = Vec::new();
    if file.take(MEMO_MAX).read_to_end(&mut text).is_err() {
        return Memo::new();
    }
    serde_json::from_slice(&text).unwrap_or_default()
}

/// The prefix of the memo's temporary files.
const MEMO_TMP: &str = ".cache-sizes.tmp";
/// How old a memo's temporary file must be before a pass takes it for a
/// killed writer's (a live one holds it for milliseconds).
const MEMO_TMP_STALE: std::time::Duration = std::time::Duration::from_secs(60);

/// Writes the memo (a temporary file renamed into place; a failure only
/// means the next pass measures again). A temporary file a killed pass
/// left is removed by a later pass once it is stale (a regular file by
/// `lstat`; unlinking never follows a link).
fn write_memo(jobs_root: &Path, memo: &Memo) {
    remove_stale_memo_tmp(jobs_root);
    let Ok(text) = serde_json::to_vec(memo) else {
        return;
    };
    let Ok(mut tmp) = tempfile::Builder::new()
        .prefix(MEMO_TMP)
        .tempfile_in(jobs_root)
    else {
        return;
    };
    if std::io::Write::write_all(&mut tmp, &text).is_ok() {
        let _ = tmp.persist(jobs_root.join(MEMO));
    }
}

/// Removes the memo's temporary files older than [`MEMO_TMP_STALE`].
fn remove_stale_memo_tmp(jobs_root: &Path) {
    let Ok(entries) = std::fs::read_dir(jobs_root) else {
        return;
    };
    let now = SystemTime::now();
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(MEMO_TMP) {
            continue;
        }
        let path = entry.path();
        let stale = std::fs::symlink_metadata(&path).is_ok_and(|meta| {
            meta.file_type().is_file()
                && meta
                    .modified()
                    .is_ok_and(|t| crate::file_age::age(t, now) >= MEMO_TMP_STALE)
        });
        if stale {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// The inode and birth time of the directory `path` (not followed).
fn identity(path: &Path) -> Option<(u64, u128)> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::symlink_metadata(path).ok()?;
    let born = meta
        .created()
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    Some((meta.ino(), born))
}

/// One pass of the cap over the caches under `jobs_root` (module text).
/// Mirrors (fetched by every job) are measured each pass; snapshots and
/// setup cache entries, which nothing changes once they are in place, once
/// (`.cache-sizes.json` keeps their sizes by inode and birth time), so a
/// pass under the cap costs a walk of the mirrors and an `lstat` of
/// each other entry.
pub fn enforce(jobs_root: &Path, max_bytes: u64) -> Capped {
    let mut capped = Capped {
        max_bytes,
        ..Capped::default()
    };
    let mut candidates = Vec::new();
    let old_memo = read_memo(jobs_root);
    let mut memo = Memo::new();
    let mut measure = |kind: Option<Kind>, path: PathBuf, seen: Option<SystemTime>| {
        let fixed = matches!(kind, Some(Kind::Snapshot | Kind::Setup));
        let id = identity(&path).filter(|_| fixed);
        let key = path.to_string_lossy().into_owned();
        let known = id.and_then(|(ino, born)| {
            old_memo
                .get(&key)
                .filter(|(i, b, _)| (*i, *b) == (ino, born))
                .map(|(_, _, bytes)| *bytes)
        });
        let (bytes, whole) = match known {
            Some(bytes) => (bytes, true),
            None => {
                let usage = disk_usage::of(&path);
                (usage.bytes, !usage.partial)
            }
        };
        // Only whole figures are kept.
        if let (Some((ino, born)), true) = (id, whole) {
            memo.insert(key, (ino, born, bytes));
        }
        capped.bytes_before = capped.bytes_before.saturating_add(bytes);
        capped.entries += 1;
        if let Some(kind) = kind {
            candidates.push(Candidate {
                kind,
                path,
                seen,
                bytes,
            });
        }
    };
    for (name, dir) in prune::subdirs(&jobs_root.join(crate::workspace::mirror::MIRRORS)) {
        let whole = name.ends_with(".git") && !name.starts_with(".tmp-");
        let seen = prune::last_use(&prune::mirror_stamp(&dir));
        measure(whole.then_some(Kind::Mirror), dir, seen);
    }
    for (name, dir) in prune::subdirs(&jobs_root.join(crate::workspace::snapshot::SNAPSHOTS)) {
        let whole = !name.starts_with(".tmp-");
        let seen = prune::last_use(&dir);
        measure(whole.then_some(Kind::Snapshot), dir, seen);
    }
    let (entries, half_made) = crate::setup_cache::entries_for_cap(jobs_root);
    for (path, seen) in entries {
        measure(Some(Kind::Setup), path, seen);
    }
    for path in half_made {
        measure(None, path, None);
    }
    if memo != old_memo {
        write_memo(jobs_root, &memo);
    }
    capped.bytes_after = capped.bytes_before;
    if capped.bytes_before <= max_bytes {
        return capped;
    }
    candidates.sort_by(|a, b| a.seen.cmp(&b.seen).then_with(|| a.path.cmp(&b.path)));
    // The setup cache's lock, taken once when its first entry is reached.
    let mut setup_lock: Option<Option<std::fs::File>> = None;
    for c in candidates {
        if capped.bytes_after <= max_bytes {
            break;
        }
        let seen = c.seen.unwrap_or(SystemTime::UNIX_EPOCH);
        let removed = match c.kind {
            Kind::Mirror => prune::remove_mirror_if_unused(&c.path, seen),
            Kind::Snapshot => prune::remove_snapshot_if_unused(jobs_root, &c.path, seen),
            Kind::Setup => {
                let lock =
                    setup_lock.get_or_insert_with(|| crate::setup_cache::lock_for_cap(jobs_root));
                match lock {
                    None => Ok(false),
                    Some(_) => prune::remove_unless_gone(&c.path),
                }
            }
        };
        match removed {
            Ok(true) => {
                capped.bytes_after = capped.bytes_after.saturating_sub(c.bytes);
                capped.removed.push(PrunedEntry {
                    path: c.path,
                    reason: Reason::Cap,
                    bytes: Some(c.bytes),
                });
            }
            Ok(false) => {}
            Err(e) => capped.errors.push(e),
        }
    }
    capped
}

/// The hidden subcommand `paddock __empty-trash JOBS [--checkpoint DB]
/// [--cap MAX_BYTES]`, which `paddock run` starts detached while the job's
/// engine runs and which goes once that `paddock` has exited (at the end
/// of its standard input, `main.rs`; `workspace::trash::start_waiting`,
/// or `empty_detached` as it exits): folds the SQLite store `DB`'s
/// write-ahead log into it when given (`store::checkpoint`: `paddock run`
/// leaves its connections to exit with it), empties the trash at the
/// lowest CPU and I/O priority (`paddock_sandbox::idle`), then enforces
/// the cap when one is given, at its normal priority (the pass holds
/// locks jobs wait for). 0, or 1 when something could not be
/// done (a later pass retries); 2 for arguments it does not know.
pub fn after_job_main(mut args: impl Iterator<Item = std::ffi::OsString>) -> i32 {
    let Some(jobs) = args.next() else {
        return 2;
    };
    let (mut db, mut cap) = (None, None);
    while let Some(flag) = args.next() {
        match (flag.to_str(), args.next()) {
            (Some("--checkpoint"), Some(path)) => db = Some(PathBuf::from(path)),
            (Some("--cap"), Some(c)) => match c.to_str().and_then(|c| c.parse::<u64>().ok()) {
                Some(c) => cap = Some(c),
                None => return 2,
            },
            _ => return 2,
        }
    }
    let jobs = Path::new(&jobs);
    // First the trash's lock, at once (this process is still at its
    // normal priority): the next `paddock`'s reaper pass, which does not
    // wait for it, then leaves the trash to this process instead of
    // deleting it on that job's start-up path (which it did whenever it
    // got there before this process's checkpoint was over).
    let held = crate::workspace::trash::lock(jobs, true);
    // Then: the next `paddock` starts with nothing in the log to recover.
    let mut failed = db.is_some_and(|db| crate::store::checkpoint_blocking(&db).is_err());
    // Then the lowest priority (nice 19, `SCHED_IDLE`, the idle I/O
    // class) for the rest: the unmounts, the deletions and the cap's
    // walks use only what nothing else wants, so the job started right
    // after this one does not pay for them (issue #14). Not before the
    // checkpoint: it holds the database's write lock, which that job
    // waits for, and a starved holder would make it wait longer. Not
    // being able to lower it leaves the work to be done as it is.
    //
    // Except the cap's pass: it removes an entry while holding the lock a
    // job waits for to use it (a mirror's, a snapshot's, the setup
    // cache's, which every job's setup restore takes), and a holder
    // starved by a busy host's other work would hold those jobs as long
    // (a priority inversion). It runs on a thread made before the
    // lowering (a thread keeps the priority it was made with), after the
    // trash is emptied (a snapshot a trashed job names is in use until
    // then). A thread that cannot be made leaves the pass to this one.
    let (emptied, wait_emptied) = std::sync::mpsc::channel::<()>();
    let mut cap_pass = None;
    if let Some(cap) = cap {
        let root = jobs.to_path_buf();
        cap_pass = Some(
            std::thread::Builder::new()
                .name("cap".into())
                .spawn(move || {
                    let _ = wait_emptied.recv();
                    enforce(&root, cap)
                })
                .map_err(|_| cap),
        );
    }
    let _ = paddock_sandbox::idle::lowest();
    failed |= match held {
        Ok(Some(held)) => !crate::workspace::trash::empty_held(jobs, &held, None).is_empty(),
        Ok(None) => false,
        Err(_) => true,
    };
    drop(emptied);
    failed |= match cap_pass {
        None => false,
        Some(Ok(thread)) => thread.join().map_or(true, |c| !c.errors.is_empty()),
        Some(Err(cap)) => !enforce(jobs, cap).errors.is_empty(),
    };
    i32::from(failed)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A memo's temporary file a killed pass left goes once stale; a
    /// fresh one (a live writer's), a link and a directory of that name
    /// stay, and the link's target is untouched.
    #[test]
    fn a_killed_passes_memo_tmp_is_removed_once_stale() {
        let jobs = tempfile::tempdir().unwrap();
        let j = jobs.path();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(120);
        let stale = j.join(".cache-sizes.tmpSTALE");
        std::fs::write(&stale, b"{}").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&stale)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let fresh = j.join(".cache-sizes.tmpFRESH");
        std::fs::write(&fresh, b"{}").unwrap();
        let target = j.join("target");
        std::fs::write(&target, b"host").unwrap();
        std::os::unix::fs::symlink(&target, j.join(".cache-sizes.tmpLINK")).unwrap();
        std::fs::create_dir(j.join(".cache-sizes.tmpDIR")).unwrap();
        write_memo(j, &Memo::new());
        let mut names: Vec<String> = std::fs::read_dir(j)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            (names, std::fs::read(&target).unwrap()),
            (
                vec![
                    ".cache-sizes.json".to_string(),
                    ".cache-sizes.tmpDIR".into(),
                    ".cache-sizes.tmpFRESH".into(),
                    ".cache-sizes.tmpLINK".into(),
                    "target".into(),
                ],
                b"host".to_vec()
            )
        );
    }

    fn snapshot(jobs: &Path, name: &str, bytes: usize) -> PathBuf {
        let dir = jobs.join(".snapshots").join(name);
        std::fs::create_dir_all(dir.join("tree")).unwrap();
        std::fs::write(dir.join("tree/f"), vec![1u8; bytes]).unwrap();
        dir
    }

    /// A snapshot's size is measured once and then read from the memo
    /// (bytes added inside it later are not seen); one removed and made
    /// again under the same name is measured again; a mirror is measured
    /// on every pass; a link planted as the memo is not read.
    #[test]
    fn fixed_entries_are_measured_once_mirrors_every_pass() {
        let tmp = tempfile::tempdir().unwrap();
        let jobs = tmp.path().join("jobs");
        let snap = snapshot(&jobs, "c1-k", 64 * 1024);
        let mirror = jobs.join(".mirrors/k.git");
        std::fs::create_dir_all(&mirror).unwrap();
        let first = enforce(&jobs, u64::MAX);
        let snap_size = disk_usage::of(&snap).bytes;
        let mirror_size = disk_usage::of(&mirror).bytes;
        assert_eq!(first.bytes_before, snap_size + mirror_size);

        std::fs::write(snap.join("tree/g"), vec![1u8; 64 * 1024]).unwrap();
        std::fs::write(mirror.join("pack"), vec![1u8; 64 * 1024]).unwrap();
        let mirror_size = disk_usage::of(&mirror).bytes;
        assert_eq!(
            enforce(&jobs, u64::MAX).bytes_before,
            snap_size + mirror_size
        );

        std::fs::remove_dir_all(&snap).unwrap();
        let snap = snapshot(&jobs, "c1-k", 128 * 1024);
        let snap_size = disk_usage::of(&snap).bytes;
        assert_eq!(
            enforce(&jobs, u64::MAX).bytes_before,
            snap_size + mirror_size
        );

        let elsewhere = tmp.path().join("elsewhere.json");
        std::fs::write(&elsewhere, format!("{{\"{}\":[1,1,1]}}", snap.display())).unwrap();
        std::fs::remove_file(jobs.join(MEMO)).unwrap();
        std::os::unix::fs::symlink(&elsewhere, jobs.join(MEMO)).unwrap();
        assert_eq!(read_memo(&jobs), Memo::new());
    }

    /// Over the cap: the least recently used snapshot goes, a held one
    /// (its lock shared, as a job mounting it holds it) stays.
    #[test]
    fn over_the_cap_the_oldest_unheld_entry_goes() {
        use nix::fcntl::{Flock, FlockArg};
        let tmp = tempfile::tempdir().unwrap();
        let jobs = tmp.path().join("jobs");
        let old_held = snapshot(&jobs, "c1-k", 64 * 1024);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let older = snapshot(&jobs, "c2-k", 64 * 1024);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let newest = snapshot(&jobs, "c3-k", 64 * 1024);
        let lock = std::fs::File::create(old_held.with_extension("lock")).unwrap();
        let _held = Flock::lock(lock, FlockArg::LockShared).unwrap();
        let size = disk_usage::of(&older).bytes;
        let capped = enforce(&jobs, 2 * size + size / 2);
        assert_eq!(
            capped.removed,
            vec![PrunedEntry {
                path: older.clone(),
                reason: Reason::Cap,
                bytes: Some(size),
            }]
        );
        assert!(old_held.exists() && newest.exists() && !older.exists());
    }

    fn setup_entry(jobs: &Path, name: &str, bytes: usize) -> PathBuf {
        let dir = jobs.join(crate::setup_cache::DIR).join(name);
        std::fs::create_dir_all(dir.join("work")).unwrap();
        std::fs::write(dir.join("work/f"), vec![1u8; bytes]).unwrap();
        std::fs::write(dir.join("manifest.json"), b"{}").unwrap();
        dir
    }

    /// Setup cache entries over the cap: while a job restores or stores
    /// (the cache's `.lock` held shared) none goes; once it is free, the
    /// least recently used (its manifest's time) goes and the newer stays.
    #[test]
    fn over_the_cap_the_oldest_setup_cache_entry_goes_when_none_is_restoring() {
        use nix::fcntl::{Flock, FlockArg};
        let tmp = tempfile::tempdir().unwrap();
        let jobs = tmp.path().join("jobs");
        let older = setup_entry(&jobs, "k1-c1", 64 * 1024);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let newer = setup_entry(&jobs, "k2-c2", 64 * 1024);
        let lock = std::fs::File::create(jobs.join(crate::setup_cache::DIR).join(".lock")).unwrap();
        let size = disk_usage::of(&older).bytes;
        let cap = size + size / 2;
        let restoring = Flock::lock(lock, FlockArg::LockShared).unwrap();
        let held = enforce(&jobs, cap);
        drop(restoring);
        let free = enforce(&jobs, cap);
        assert_eq!(
            (
                held.removed,
                free.removed,
                free.bytes_after,
                older.exists(),
                newer.exists()
            ),
            (
                Vec::new(),
                vec![PrunedEntry {
                    path: older.clone(),
                    reason: Reason::Cap,
                    bytes: Some(size),
                }],
                free.bytes_before - size,
                false,
                true
            )
        );
    }
}
