//! The branch a job's pull request merges into, as it was read when the
//! job was provisioned, kept in the job's artifacts (`pull-request-base`)
//! for every later look at that pull request: the job's own publish, a
//! `paddock publish` again, `--attempt-after`'s review read and a rerun's
//! check for an ended one. A `base_ref` of `HEAD` (the default) means the
//! branch the source has checked out, and a user switches branches: read
//! again at each look, it named whatever branch the source was on then,
//! so a publish after a switch (also one during the job) opened a second
//! pull request of the job's branch into the other branch, and a review
//! read looked there and found none, the reviewers' comments never
//! reaching the next attempt. A job from before this record, or one whose
//! record is gone, has its base read as before.
//!
//! The record is Paddock's, written whole by a rename; it is read with no
//! link followed and no FIFO waited on, at most 1 KiB, and must name a
//! branch as a forge takes one (one line, no control character, space or
//! revision syntax, not starting with `-`): anything else is an error that
//! names the file. On the `process` rung a job runs as Paddock's user and
//! could write it, as it could the job's other records; that rung gives
//! the job the user's own powers (docs/sandbox.md).

use std::path::{Path, PathBuf};

/// The record's name in the job's artifacts directory.
pub const FILE: &str = "pull-request-base";

/// The longest record read.
const MAX: u64 = 1024;

/// The record's path for the artifacts directory `artifacts`.
pub fn path(artifacts: &Path) -> PathBuf {
    artifacts.join(FILE)
}

/// What the record keeps, as its errors name it.
const WHAT: &str = "the pull request's base";

/// Keeps `base` as the job's pull request's base.
pub fn write(artifacts: &Path, base: &str) -> Result<(), String> {
    super::line_record::write(&path(artifacts), base, WHAT)
}

/// The base kept for the job whose artifacts directory is `artifacts`:
/// `None` when there is no record; `Err` names the file and what is
/// wrong with it.
pub fn read(artifacts: &Path) -> Result<Option<String>, String> {
    let path = path(artifacts);
    let Some(name) = super::line_record::read(&path, MAX, WHAT)? else {
        return Ok(None);
    };
    let name = name.as_str();
    match !names_a_branch(name) {
        true => Err(format!(
            "the pull request's base kept in {} names no branch: {:?}",
            path.display(),
            crate::cut_text::cut(name, crate::cut_text::Cut::chars(80))
        )),
        false => Ok(Some(name.to_string())),
    }
}

/// Whether `name` names a branch as a forge takes one: one line, no
/// control character, space or revision syntax, not starting with `-`.
pub(super) fn names_a_branch(name: &str) -> bool {
    !(name.is_empty()
        || name.starts_with('-')
        || name.contains("..")
        || name
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\@{".contains(c)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// What is written is read back; no record reads as none; a record
    /// that names no branch, is too long, or is a link is an error naming
    /// the file.
    #[test]
    fn the_kept_base_is_read_back_and_anything_else_refused() {
        let dir = tempfile::tempdir().unwrap();
        let artifacts = dir.path();
        let none = read(artifacts);
        write(artifacts, "release/2.x").unwrap();
        let kept = read(artifacts);
        let mut refused = Vec::new();
        for text in [
            "",
            "\n",
            "-x\n",
            "a b\n",
            "main~1\n",
            "a..b\n",
            "ma\x1bin\n",
        ] {
            std::fs::write(path(artifacts), text).unwrap();
            refused.push(read(artifacts).is_err_and(|e| e.contains(FILE)));
        }
        std::fs::write(path(artifacts), "m".repeat(2000)).unwrap();
        refused.push(read(artifacts).is_err_and(|e| e.contains(FILE)));
        std::fs::remove_file(path(artifacts)).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", path(artifacts)).unwrap();
        refused.push(read(artifacts).is_err_and(|e| e.contains(FILE)));
        assert_eq!(
            (none, kept, refused),
            (Ok(None), Ok(Some("release/2.x".to_string())), vec![true; 9])
        );
    }
}
