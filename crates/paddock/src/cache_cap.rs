//! The size cap on the caches under the jobs directory (issue #14): the
//! bare mirrors of URL sources (`.mirrors/<key>.git`), the overlay
//! snapshots of base commits (`.snapshots/<commit>-<key>`) and the setup
//! cache's entries (`.setup-cache/<key>-<commit>`) together may take at
//! most the config file's `[caches] max_size` (`config::CachesFile`,
//! 10 GiB unless set). Pruning by age (`workspace/prune.rs`) alone lets
//! them grow without bound within 14 days, and a user on a laptop never
//! runs `paddock gc`: so [`enforce`] runs after every job (the detached
//! remover `paddock run` starts as it exits, [`after_job_main`]; the
//! background thread of `paddock serve`) and in `paddock gc`.
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

/// One pass of the cap over the caches under `jobs_root` (module text).
pub fn enforce(jobs_root: &Path, max_bytes: u64) -> Capped {
    let mut capped = Capped {
        max_bytes,
        ..Capped::default()
    };
    let mut candidates = Vec::new();
    let mut measure = |kind: Option<Kind>, path: PathBuf, seen: Option<SystemTime>| {
        let bytes = disk_usage::of(&path).bytes;
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
                    Some(_) => std::fs::remove_dir_all(&c.path)
                        .map(|()| true)
                        .map_err(|e| format!("prune {}: cannot remove: {e}", c.path.display())),
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

/// The hidden subcommand `paddock __empty-trash JOBS [MAX_BYTES]`, which
/// `paddock run` starts detached as it exits (`workspace::trash::
/// empty_detached`): empties the trash, then enforces the cap when one is
/// given. 0, or 1 when something could not be done (a later pass retries).
pub fn after_job_main(mut args: impl Iterator<Item = std::ffi::OsString>) -> i32 {
    let (Some(jobs), cap, None) = (args.next(), args.next(), args.next()) else {
        return 2;
    };
    let cap = match cap.map(|c| c.to_str().and_then(|c| c.parse::<u64>().ok())) {
        None => None,
        Some(Some(c)) => Some(c),
        Some(None) => return 2,
    };
    let jobs = Path::new(&jobs);
    let mut failed = !crate::workspace::trash::empty(jobs, true).is_empty();
    if let Some(cap) = cap {
        failed |= !enforce(jobs, cap).errors.is_empty();
    }
    i32::from(failed)
}
