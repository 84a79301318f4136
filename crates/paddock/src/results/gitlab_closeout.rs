//! Which GitLab note is a job's closeout: the record Paddock writes into
//! the job's artifacts (`.gitlab-closeout.json`: the merge request's iid
//! and the note's id) once it has posted or edited it, which a later
//! publish reads back to edit that note in place. Who wrote a note cannot
//! tell: each publish's token has its own bot user (a later publish's
//! closeout is not by the bot that opened the merge request), and a
//! revoked token's bot user may be deleted, its notes then GitLab's
//! ghost's, as are the notes of anyone who deleted their account (a copy
//! of the closeout among them). A note's id is GitLab's and never given
//! twice.
//!
//! The record is hostile input where a `process`-rung job could write it
//! (it runs as Paddock's user): read without following a link or waiting
//! on a FIFO, at most [`MAX_BYTES`], unknown fields refused; it can name
//! only a note of this job's merge request (the iid must be the one the
//! publish found, the path is the spec's project), and only one holding
//! this job's closeout is edited. A record missing or refused is as none:
//! the closeout is looked for by the author's id (`gitlab.rs`).

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The record's file name, in the job's artifacts.
pub const RECORD: &str = ".gitlab-closeout.json";

/// The most bytes of a record read.
const MAX_BYTES: u64 = 1024;

/// Where the job's closeout note is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloseoutNote {
    /// The merge request's iid.
    pub merge_request: u64,
    /// The note's id.
    pub note: u64,
}

/// The note `path` records for merge request `iid`; `None` when there is
/// no record, it cannot be read (a link, a FIFO, too long, not JSON) or it
/// names another merge request.
pub fn read(path: &Path, iid: u64) -> Option<u64> {
    let text = crate::own_file::read(path, MAX_BYTES).ok()?;
    let record: CloseoutNote = serde_json::from_str(&text).ok()?;
    (record.merge_request == iid).then_some(record.note)
}

/// Records `note` as the closeout on merge request `iid` (never through a
/// link planted at `path`).
pub fn write(path: &Path, iid: u64, note: u64) -> std::io::Result<()> {
    let record = CloseoutNote {
        merge_request: iid,
        note,
    };
    let text = serde_json::to_string(&record).map_err(std::io::Error::other)?;
    crate::own_file::write(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A record is read back for its own merge request only; a link to
    /// one, a FIFO, an unknown field, a record too long or none at all
    /// reads as no record, and a write never goes through a link.
    #[test]
    fn a_record_is_its_merge_requests_and_never_a_links() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RECORD);
        write(&path, 3, 507).unwrap();
        let linked = dir.path().join("linked.json");
        std::os::unix::fs::symlink(&path, &linked).unwrap();
        let fifo = dir.path().join("fifo.json");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let extra = dir.path().join("extra.json");
        std::fs::write(&extra, r#"{"merge_request":3,"note":9,"url":"x"}"#).unwrap();
        let long = dir.path().join("long.json");
        std::fs::write(
            &long,
            format!("{{\"merge_request\":3,\"note\":9}}{}", " ".repeat(2000)),
        )
        .unwrap();
        let outside = dir.path().join("outside");
        std::fs::write(&outside, "theirs").unwrap();
        let planted = dir.path().join("planted.json");
        std::os::unix::fs::symlink(&outside, &planted).unwrap();
        assert_eq!(
            (
                [&path, &linked, &fifo, &extra, &long]
                    .map(|p| read(p, 3))
                    .to_vec(),
                read(&path, 4),
                read(&dir.path().join("none.json"), 3),
                write(&planted, 3, 1).is_err(),
                std::fs::read_to_string(&outside).unwrap()
            ),
            (
                vec![Some(507), None, None, None, None],
                None,
                None,
                true,
                "theirs".to_string()
            )
        );
    }
}
