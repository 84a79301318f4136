//! The base's checked-out size, totalled before the checkout writes it
//! (`Workspace::clone_job`, in both layouts): the repository is as hostile
//! as the job, and a few MB of one highly compressible blob at several
//! paths check out to many GB, which git writes as fast as the disk takes
//! them. The base tree is listed with each blob's size (`git ls-tree -r -t
//! -l -z --full-tree`), record by record, the git held to the job's git CPU
//! (`host_git::job_git_cpu`): each file counted as the disk watcher counts
//! it (whole 4 KiB blocks, at least one), each directory one block (`-t`
//! lists every tree where it occurs: before, directories were not counted,
//! and 100 entries naming one 1,500-deep subtree checked out 150,100
//! directories charged as 100 files), the listing stopped as soon as
//! the total is past the bound, so neither a tree of many entries nor one
//! holding its own subtrees again and again costs more than the limit
//! allows. The checkout is refused when its total is past the job's
//! `limits.max_disk_bytes` (the checkout counts against it), or past the
//! free space of the jobs file system less the host's reserve
//! (`PADDOCK_DISK_RESERVE_MB`, `runner/disk_watch.rs`).

use std::path::Path;
use std::time::Duration;

use super::host_git::{self, HostGit};
use super::WorkspaceError;

/// The disk one file of the checkout is counted for at least, and the
/// unit it is rounded up to (`disk_usage.rs` counts entries so).
const BLOCK: u64 = 4096;

/// The longest record of the listing read: its mode, type, id, size and
/// path.
const MAX_RECORD: usize = 64 * 1024;

/// What a checkout may write: at most `max_bytes` (the job's
/// `limits.max_disk_bytes`), and no more than leaves `reserve` bytes free
/// on the jobs file system (`0`: no reserve).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckoutBound {
    /// The job's `limits.max_disk_bytes`.
    pub max_bytes: u64,
    /// The host's reserve (`runner::disk_watch::reserve_from`).
    pub reserve: u64,
}

impl CheckoutBound {
    /// No bound: a scratch workspace of Paddock's own (`Workspace::provision`).
    pub const NONE: CheckoutBound = CheckoutBound {
        max_bytes: u64::MAX,
        reserve: 0,
    };
}

/// The disk the checkout of `commit` from the repository `git_dir` takes,
/// checked against `bound` before anything is written: `root` is the
/// directory it is written under (its file system's free space is read),
/// `cpu` what the listing may use.
pub async fn checked(
    root: &Path,
    git_dir: &Path,
    commit: &str,
    cpu: Duration,
    bound: CheckoutBound,
) -> Result<u64, WorkspaceError> {
    let free = free_bytes(root).saturating_sub(bound.reserve);
    let room = bound.max_bytes.min(free);
    let git = HostGit {
        git_dir: Some(git_dir.to_path_buf()),
        work_tree: None,
        index: None,
        excludes: None,
        root: root.to_path_buf(),
        timeout: host_git::GIT_TIMEOUT,
        cpu_limit: Some(cpu),
    };
    let args = ["ls-tree", "-r", "-t", "-l", "-z", "--full-tree", commit];
    let mut total = 0u64;
    let past = |total: u64| match total > bound.max_bytes {
        true => WorkspaceError::CheckoutPastLimit {
            path: root.to_path_buf(),
            commit: commit.to_string(),
            bytes: total,
            limit: bound.max_bytes,
        },
        false => WorkspaceError::CheckoutPastFree {
            path: root.to_path_buf(),
            commit: commit.to_string(),
            bytes: total,
            free: free.saturating_add(bound.reserve),
            reserve: bound.reserve,
        },
    };
    git.each_record(args, MAX_RECORD, |record| {
        total = total.saturating_add(charge(record));
        match total > room {
            true => Err(past(total)),
            false => Ok(()),
        }
    })
    .await?;
    Ok(total)
}

/// What one record of `ls-tree -l` (`MODE TYPE ID SIZE\tPATH`) is counted
/// for: a blob's size in whole blocks, at least one; a directory (a tree,
/// size `-`) or a submodule's commit (size `-`, nothing checked out but
/// its directory), one block.
fn charge(record: &[u8]) -> u64 {
    let head = record
        .iter()
        .position(|b| *b == b'\t')
        .map_or(record, |tab| &record[..tab]);
    let size = head
        .rsplit(|b| *b == b' ')
        .next()
        .and_then(|s| std::str::from_utf8(s).ok())
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0);
    size.div_ceil(BLOCK).max(1).saturating_mul(BLOCK)
}

/// The bytes free to an unprivileged writer on the file system of `root`;
/// unknown (no `statvfs`) is no bound.
fn free_bytes(root: &Path) -> u64 {
    match nix::sys::statvfs::statvfs(root) {
        #[allow(clippy::useless_conversion)]
        Ok(fs) => u64::from(fs.blocks_available()).saturating_mul(u64::from(fs.fragment_size())),
        Err(_) => u64::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_file_counts_whole_blocks_at_least_one() {
        let rec = |size: &str| format!("100644 blob {} {size:>7}\tpath/a", "a".repeat(40));
        assert_eq!(
            [
                charge(rec("0").as_bytes()),
                charge(rec("1").as_bytes()),
                charge(rec("4096").as_bytes()),
                charge(rec("4097").as_bytes()),
                charge(format!("160000 commit {}       -\tsub", "b".repeat(40)).as_bytes()),
                charge(format!("040000 tree {}       -\tdir", "c".repeat(40)).as_bytes()),
            ],
            [4096, 4096, 4096, 8192, 4096, 4096]
        );
    }
}
