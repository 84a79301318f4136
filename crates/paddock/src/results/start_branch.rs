//! The branch a job with a `base_ref` of `HEAD` (the default) started
//! from: the one its source had checked out (a URL's: the remote's
//! `HEAD`) when the job was provisioned, kept in the job's artifacts
//! (`start-branch`) for its closeout, which says on which branch the
//! job's commit is (`one commit … on `main``): it said `on `HEAD``,
//! which names no branch, and read again later would name whatever
//! branch the source was on by then. Kept for a job with or without a
//! forge; a detached `HEAD` keeps none (the closeout then says `HEAD`).
//!
//! The record is Paddock's, written whole by a rename and read with no
//! link followed and no FIFO waited on, at most 1 KiB (`line_record.rs`);
//! it must name a branch as `pinned_base.rs` checks one, else it is an
//! error naming the file. On the `process` rung the job runs as
//! Paddock's user and could write it, as it could its other records.

use std::path::{Path, PathBuf};

/// The record's name in the job's artifacts directory.
pub const FILE: &str = "start-branch";

/// The longest record read.
const MAX: u64 = 1024;

/// What the record keeps, as its errors name it.
const WHAT: &str = "the branch the job started from";

/// The record's path for the artifacts directory `artifacts`.
pub fn path(artifacts: &Path) -> PathBuf {
    artifacts.join(FILE)
}

/// Keeps `branch` as the branch the job started from.
pub fn write(artifacts: &Path, branch: &str) -> Result<(), String> {
    super::line_record::write(&path(artifacts), branch, WHAT)
}

/// The branch kept for the job whose artifacts directory is `artifacts`:
/// `None` when there is no record; `Err` names the file and what is wrong.
pub fn read(artifacts: &Path) -> Result<Option<String>, String> {
    let path = path(artifacts);
    match super::line_record::read(&path, MAX, WHAT)? {
        None => Ok(None),
        Some(name) if super::pinned_base::names_a_branch(&name) => Ok(Some(name)),
        Some(name) => Err(format!(
            "{WHAT} kept in {} names no branch: {:?}",
            path.display(),
            crate::cut_text::cut(&name, crate::cut_text::Cut::chars(80))
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// What is written is read back; no record reads as none; a record
    /// naming no branch is an error naming the file.
    #[test]
    fn the_kept_branch_is_read_back_and_anything_else_refused() {
        let dir = tempfile::tempdir().unwrap();
        let artifacts = dir.path();
        let none = read(artifacts);
        write(artifacts, "feature/x").unwrap();
        let kept = read(artifacts);
        write(artifacts, "a`b **c**").unwrap();
        assert_eq!(
            (none, kept, read(artifacts)),
            (
                Ok(None),
                Ok(Some("feature/x".to_string())),
                Err(format!(
                    "the branch the job started from kept in {} names no branch: \"a`b **c**\"",
                    path(artifacts).display()
                ))
            )
        );
    }
}
