//! How many uncommitted changes a local source had when the job ended,
//! kept in the job's artifacts (`source-uncommitted`, one number) for
//! every later closeout of the job. The closeout says "the source
//! repository had N uncommitted change(s); the job ran on the committed
//! base, not on them": a fact of the job's run. A `paddock publish` of the
//! job, hours later, read the source again and stated what it held then
//! (the user's next edits, the job's own patch applied since) as that
//! fact in the closeout it renders again and posts. Now it states the
//! kept count (its warning still says what the source has now); a job
//! from before this record states the count now, as before.
//!
//! The record is Paddock's, written whole by a rename and read with no
//! link followed and no FIFO waited on, at most 64 bytes; it must be a
//! decimal number, else the read is an error naming the file.

use std::path::{Path, PathBuf};

/// The record's name in the job's artifacts directory.
pub const FILE: &str = "source-uncommitted";

/// The longest record read.
const MAX: u64 = 64;

/// The record's path for the artifacts directory `artifacts`.
pub fn path(artifacts: &Path) -> PathBuf {
    artifacts.join(FILE)
}

/// What the record keeps, as its errors name it.
const WHAT: &str = "the source's uncommitted changes";

/// Keeps `count` as the source's uncommitted changes at the job's end.
pub fn write(artifacts: &Path, count: usize) -> Result<(), String> {
    super::line_record::write(&path(artifacts), &count.to_string(), WHAT)
}

/// The count kept for the job whose artifacts directory is `artifacts`:
/// `None` when there is no record; `Err` names the file and what is wrong
/// with it.
pub fn read(artifacts: &Path) -> Result<Option<usize>, String> {
    let path = path(artifacts);
    let Some(number) = super::line_record::read(&path, MAX, WHAT)? else {
        return Ok(None);
    };
    let number = number.as_str();
    match number.bytes().all(|b| b.is_ascii_digit()) {
        true => number.parse().map(Some).map_err(|_| ()),
        false => Err(()),
    }
    .map_err(|()| {
        format!(
            "the source's uncommitted changes kept in {} are no number: {:?}",
            path.display(),
            crate::cut_text::cut(number, crate::cut_text::Cut::chars(32))
        )
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_kept_count_reads_back_and_anything_else_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let none = read(dir.path());
        write(dir.path(), 3).unwrap();
        let three = read(dir.path());
        std::fs::write(path(dir.path()), "-1\n").unwrap();
        let bad = read(dir.path());
        std::fs::write(path(dir.path()), "").unwrap();
        let empty = read(dir.path());
        assert_eq!(
            (none, three, bad, empty),
            (
                Ok(None),
                Ok(Some(3)),
                Err(format!(
                    "the source's uncommitted changes kept in {} are no number: \"-1\"",
                    path(dir.path()).display()
                )),
                Err(format!(
                    "the source's uncommitted changes kept in {} are no number: \"\"",
                    path(dir.path()).display()
                )),
            )
        );
    }
}
