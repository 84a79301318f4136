//! What both forges' closeout records share (`github_closeout.rs`,
//! `gitlab_closeout.rs`): a small JSON file in the job's artifacts naming
//! the pull or merge request, the closeout comment or note once posted,
//! and the account that posted it (or is about to). A `process`-rung job
//! runs as Paddock's user and could write it, so it is read as hostile
//! input: without following a link or waiting on a FIFO, at most
//! [`MAX_BYTES`], unknown fields refused (each forge's type), and one
//! naming neither a closeout nor a poster is torn. It is written whole or
//! not at all (a new file renamed over the old: `own_file::replace`),
//! never through a link.

use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;

/// The most bytes of a record read.
const MAX_BYTES: u64 = 1024;

/// One forge's record.
pub trait Record: Serialize + DeserializeOwned {
    /// What the closeout is called on this forge (`comment`, `note`).
    const CLOSEOUT: &'static str;
    /// The pull or merge request the record is for.
    fn proposal(&self) -> u64;
    /// Whether it names the closeout or its poster.
    fn names_something(&self) -> bool;
}

/// The record at `path` for pull or merge request `number`: `Ok(None)`
/// when there is none or it is another's; an error when one is there but
/// cannot be read whole as a record (a link, a FIFO, too long, cut short,
/// not JSON, naming neither a closeout nor a poster).
pub fn read<R: Record>(path: &Path, number: u64) -> std::io::Result<Option<R>> {
    Ok(read_any::<R>(path)?.filter(|r| r.proposal() == number))
}

/// The record at `path`, whichever pull or merge request it names
/// (`Ok(None)` when there is none; errors as [`read`]'s). One for another
/// pull or merge request than the publish's says that the job's closeout
/// was posted there, by its poster, and that every closeout of the job
/// is recorded: none is looked for by who opened the publish's, which
/// may be anyone (`github.rs`, `gitlab.rs`).
pub fn read_any<R: Record>(path: &Path) -> std::io::Result<Option<R>> {
    let text = match crate::own_file::read(path, MAX_BYTES) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let record: R = serde_json::from_str(&text)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    if !record.names_something() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("names neither a {} nor its poster", R::CLOSEOUT),
        ));
    }
    Ok(Some(record))
}

/// Records `record` at `path`, whole or not at all, never through a link
/// planted there.
pub fn write<R: Record>(path: &Path, record: &R) -> std::io::Result<()> {
    let text = serde_json::to_string(record).map_err(std::io::Error::other)?;
    crate::own_file::replace(path, text.as_bytes())
}
