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
//! Before a closeout is posted, the record names the user who is about to
//! post it (the publish's token's bot user, by id, asked of `GET /user`):
//! a publish killed between the post and the record of its note (or whose
//! post's answer was lost) leaves that, and the next publish edits the
//! closeout that user posted instead of posting a second. With it, the
//! newest note's id on the merge request just before the post: when that
//! user is gone by the next publish (the reaper revokes a killed
//! publish's token, and GitLab deletes its bot user, its notes then the
//! ghost's), the closeout it posted is the ghost's note of this job's
//! closeout above that id, taken when it is the only one (an outsider's
//! deleted copy would be a second: a copy comes after what it copies);
//! with two or more, or notes past the bound read, none is edited and a
//! new closeout is posted beside them, with a warning naming them
//! (`found_closeout.rs`; before, the publish failed, and every later
//! one until the record was removed by hand). Each record is
//! written whole or not at all (a new file renamed over the old:
//! `own_file::replace`), never through a link.
//!
//! The record is hostile input where a `process`-rung job could write it
//! (it runs as Paddock's user): read without following a link or waiting
//! on a FIFO, at most 1 KiB, unknown fields refused (`closeout_record.rs`); it can name
//! only a note of this job's merge request (the iid must be the one the
//! publish found, the path is the spec's project), and only one holding
//! this job's closeout and by the user recorded is edited. A record
//! missing (a job published before records were kept) has the closeout
//! looked for by the id of this publish's token's account (`gitlab.rs`),
//! never the opener's as such (anyone may open the job's branch first); one for another merge request
//! (the job's closeout went there: its branch's merge request was
//! ended and opened again) by its poster's, never the opener's, who
//! may be anyone (a copy of the closeout in their note was edited into
//! Paddock's and recorded as it). A record there but not
//! read whole (a link, a FIFO, cut short, not a record) fails the
//! closeout: neither a closeout posted beside the one it may name nor a
//! note edited.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The record's file name, in the job's artifacts.
pub const RECORD: &str = ".gitlab-closeout.json";

/// Where the job's closeout note is, or who is posting it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloseoutNote {
    /// The merge request's iid.
    pub merge_request: u64,
    /// The note's id, once its post was answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<u64>,
    /// The id of the user who posted it (or is about to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poster: Option<u64>,
    /// The newest note's id on the merge request just before the post (0:
    /// none), recorded with the poster: GitLab's note ids only grow, so
    /// the note the post made is above it (module text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newest_before: Option<u64>,
}

impl super::closeout_record::Record for CloseoutNote {
    const CLOSEOUT: &'static str = "note";
    fn proposal(&self) -> u64 {
        self.merge_request
    }
    fn names_something(&self) -> bool {
        self.note.is_some() || self.poster.is_some()
    }
}

/// The record at `path` for merge request `number` (`closeout_record::read`).
pub fn read(path: &Path, number: u64) -> std::io::Result<Option<CloseoutNote>> {
    super::closeout_record::read(path, number)
}

/// The record at `path` whichever pull or merge request it names
/// (`closeout_record::read_any`).
pub fn read_any(path: &Path) -> std::io::Result<Option<CloseoutNote>> {
    super::closeout_record::read_any(path)
}

/// Records `record` at `path` (`closeout_record::write`).
pub fn write(path: &Path, record: CloseoutNote) -> std::io::Result<()> {
    super::closeout_record::write(path, &record)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn note(merge_request: u64, note: u64) -> CloseoutNote {
        CloseoutNote {
            merge_request,
            note: Some(note),
            poster: Some(7),
            newest_before: None,
        }
    }

    /// A record is read back for its own merge request only, an older
    /// record without a poster too; none at all reads as none; a link to
    /// one, a FIFO, an unknown field, a record too long, cut short or
    /// naming nothing is an error; a write replaces a link planted there
    /// (its target keeps its text) and leaves no other file.
    #[test]
    fn a_record_is_its_merge_requests_and_never_a_links() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RECORD);
        write(&path, note(3, 507)).unwrap();
        let linked = dir.path().join("linked.json");
        std::os::unix::fs::symlink(&path, &linked).unwrap();
        let fifo = dir.path().join("fifo.json");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let plant = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let older = plant("older.json", r#"{"merge_request":3,"note":9}"#);
        let extra = plant("extra.json", r#"{"merge_request":3,"note":9,"url":"x"}"#);
        let long = plant(
            "long.json",
            &format!("{{\"merge_request\":3,\"note\":9}}{}", " ".repeat(2000)),
        );
        let torn = plant("torn.json", r#"{"merge_request":3,"no"#);
        let empty = plant("empty.json", "");
        let nothing = plant("nothing.json", r#"{"merge_request":3}"#);
        let outside = plant("outside", "theirs");
        let planted = dir.path().join("planted.json");
        std::os::unix::fs::symlink(&outside, &planted).unwrap();
        let read_as = |p: &Path| read(p, 3).map_err(|_| "refused");
        let mut names: Vec<String> = Vec::new();
        write(&planted, note(3, 1)).unwrap();
        for e in std::fs::read_dir(dir.path()).unwrap() {
            names.push(e.unwrap().file_name().to_string_lossy().into_owned());
        }
        names.sort();
        assert_eq!(
            (
                [&path, &older, &planted].map(|p| read_as(p)).to_vec(),
                [&linked, &fifo, &extra, &long, &torn, &empty, &nothing]
                    .map(|p| read_as(p))
                    .to_vec(),
                read(&path, 4).unwrap(),
                read(&dir.path().join("none.json"), 3).unwrap(),
                std::fs::read_to_string(&outside).unwrap(),
                names.len(),
            ),
            (
                vec![
                    Ok(Some(note(3, 507))),
                    Ok(Some(CloseoutNote {
                        merge_request: 3,
                        note: Some(9),
                        poster: None,
                        newest_before: None,
                    })),
                    Ok(Some(note(3, 1)))
                ],
                vec![Err("refused"); 7],
                None,
                None,
                "theirs".to_string(),
                11,
            )
        );
    }
}
