//! A one-line record Paddock keeps in a job's artifacts (the pull
//! request's base, `pinned_base.rs`; the source's uncommitted changes,
//! `uncommitted_record.rs`): written whole by a rename, read with no link
//! followed and no FIFO waited on, at most a given size, its line handed
//! back without its newline for its module to check. Each error names
//! what the record keeps and its file.

use std::path::Path;

/// Keeps `line` as the record at `path`; `what` names what it keeps in
/// the error ("the pull request's base").
pub fn write(path: &Path, line: &str, what: &str) -> Result<(), String> {
    crate::own_file::replace(path, format!("{line}\n").as_bytes())
        .map_err(|e| format!("cannot keep {what} in {}: {e}", path.display()))
}

/// The line of the record at `path` (read up to `max` bytes), without
/// its newline: `None` when there is no record.
pub fn read(path: &Path, max: u64, what: &str) -> Result<Option<String>, String> {
    match crate::own_file::read(path, max) {
        Ok(mut text) => {
            if text.ends_with('\n') {
                text.pop();
            }
            Ok(Some(text))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!(
            "{what} kept in {} cannot be read: {e}",
            path.display()
        )),
    }
}
