//! The job's branch in an overlay workspace's repository (the snapshot's
//! checkout seen through the job's overlay, detached at the base): a loose
//! ref `refs/heads/<branch>` at the base commit, created new, and `HEAD`
//! on it, written by Paddock before the job starts, where a `git
//! update-ref` was one more process on every job's provisioning. Only
//! where git would make the same ref: a repository with the files ref
//! backend (`refs/heads` a directory; a reftable repository has a file
//! there), a name made of plain components (letters, digits, `.`, `_`,
//! `-`; none empty, none starting with `.`, none ending in `.lock`, no
//! `..`: a ticket id is held to that already) and no packed ref with the
//! name, under it or above it. Otherwise, or when a file is in the way,
//! `git update-ref` makes it as before, and fails as git does. The
//! branch's reflog gets the line `update-ref` writes.
//!
//! The snapshot's repository is a clone, which made one branch, named as
//! the source's `HEAD` was when the snapshot was made: the job's own
//! branch, when the user had it checked out (reviewing the job's change)
//! and a job of that branch then runs on that commit. That branch is the
//! snapshot's, not the job's, and the job's is put at the base over it;
//! before, `update-ref` refused it (`cannot lock ref …: reference already
//! exists`) and the job failed at provisioning, as a clone workspace's
//! `checkout -b` did (`a branch named … already exists`).

use std::io::Write as _;
use std::path::Path;

use super::host_git::HostGit;
use super::{Workspace, WorkspaceError};

impl Workspace {
    /// Creates `refs/heads/<branch>` at `base_commit` in the job's
    /// repository (`work/.git`) and points its `HEAD` at it.
    pub(super) async fn start_branch(
        &self,
        branch: &str,
        base_commit: &str,
    ) -> Result<(), WorkspaceError> {
        let dot_git = self.work.join(".git");
        let head = format!("refs/heads/{branch}");
        let written = plain_name(branch)
            && dot_git.join("refs/heads").is_dir()
            && !packed_in_the_way(&dot_git, &head)
            && write_ref(&dot_git, &head, base_commit).is_ok();
        if !written {
            let job_git = HostGit {
                git_dir: Some(dot_git.clone()),
                work_tree: Some(self.work.clone()),
                ..self.paddock_git(None, false)
            };
            job_git
                .run(["update-ref", "--no-deref", &head, base_commit], None)
                .await?;
        }
        let head_file = dot_git.join("HEAD");
        std::fs::write(&head_file, format!("ref: {head}\n")).map_err(|source| {
            WorkspaceError::Write {
                path: self.root.clone(),
                file: head_file.display().to_string(),
                source,
            }
        })
    }
}

/// Whether `branch` is made of components git takes as they are.
fn plain_name(branch: &str) -> bool {
    !branch.is_empty()
        && branch.split('/').all(|c| {
            !c.is_empty()
                && !c.starts_with('.')
                && !c.ends_with(".lock")
                && !c.contains("..")
                && c.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        })
}

/// Whether the repository's `packed-refs` holds `head`, a ref under it,
/// or a ref it would be under (an unreadable one counts as in the way).
fn packed_in_the_way(dot_git: &Path, head: &str) -> bool {
    let text = match std::fs::read(dot_git.join("packed-refs")) {
        Ok(bytes) => bytes,
        Err(e) => return e.kind() != std::io::ErrorKind::NotFound,
    };
    text.split(|&b| b == b'\n').any(|line| {
        let Some(space) = line.iter().position(|&b| b == b' ') else {
            return false;
        };
        let name = String::from_utf8_lossy(&line[space + 1..]);
        let under = |a: &str, b: &str| a.strip_prefix(b).is_some_and(|r| r.starts_with('/'));
        name == head || under(&name, head) || under(head, &name)
    })
}

/// Creates the loose ref `head` holding `commit`, never replacing a file,
/// and (when it can) its reflog's first line, as `git update-ref` writes it in the job's
/// repository (whose identity is Paddock's, `clone_job`).
fn write_ref(dot_git: &Path, head: &str, commit: &str) -> std::io::Result<()> {
    let created = |path: &Path, text: String| {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::File::options()
            .write(true)
            .create_new(true)
            .open(path)?
            .write_all(text.as_bytes())
    };
    created(&dot_git.join(head), format!("{commit}\n"))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let zero = "0".repeat(commit.len());
    // A reflog that cannot be written leaves the branch as it is.
    let _ = created(
        &dot_git.join("logs").join(head),
        format!("{zero} {commit} Paddock <paddock@localhost> {now} +0000\n"),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_and_free_places_are_written_directly() {
        let dir = tempfile::tempdir().unwrap();
        let g = dir.path();
        std::fs::write(
            g.join("packed-refs"),
            "# pack-refs with: peeled fully-peeled sorted\n\
             aaaa refs/heads/main\n\
             bbbb refs/heads/paddock/T-2\n\
             cccc refs/heads/paddock/T-3/1/x\n\
             ^dddd\n",
        )
        .unwrap();
        let names = [
            "paddock/T-1/1",
            "paddock/T-1/1.lock",
            "paddock/.T/1",
            "paddock/T..1/1",
            "paddock//1",
            "paddock/T 1/1",
            "",
        ];
        let ways = [
            "refs/heads/paddock/T-1/1",
            "refs/heads/main",
            "refs/heads/paddock/T-2/1",
            "refs/heads/paddock/T-3/1",
        ];
        assert_eq!(
            (
                names.map(plain_name),
                ways.map(|h| packed_in_the_way(g, h)),
                packed_in_the_way(&g.join("none"), "refs/heads/x"),
            ),
            (
                [true, false, false, false, false, false, false],
                [false, true, true, true],
                false,
            )
        );
    }
}
