//! Which GitHub comment is a job's closeout: the record Paddock writes
//! into the job's artifacts (`.github-closeout.json`: the pull request's
//! number, the comment's id and the id of the account that posted it) once
//! it has posted or edited it, which a later publish reads back to edit
//! that comment in place. The pull request's opener cannot tell: a job's
//! publish may run under another account's token than the one that opened
//! it (the token changed between a publish that failed once the pull
//! request was open and `paddock publish`, or the spec moved from a token
//! to an App), and its closeout is then that account's, which a lookup by
//! the opener never finds: each later publish posted another. A comment's
//! id is GitHub's and never given twice.
//!
//! Before a closeout is posted, the record names the account about to
//! post it (the token's account, by id, asked of `GET /user`): a publish
//! killed between the post and the record of its comment (or whose post's
//! answer was lost) leaves that, and the next publish edits the closeout
//! that account posted instead of posting a second. An App's installation
//! token has no account `GET /user` answers for (403): its poster is the
//! App's bot account (`github.rs`, `GitHub::app_account`). Each record
//! is written whole or not at all (a new file renamed over the old:
//! `own_file::replace`), never through a link.
//!
//! The record is hostile input where a `process`-rung job could write it
//! (it runs as Paddock's user): read without following a link or waiting
//! on a FIFO, at most 1 KiB, unknown fields refused (`closeout_record.rs`); it can name
//! only a comment of this job's pull request (the number must be the one
//! the publish found, and the comment's own `issue_url` must name it), and
//! only one holding this job's closeout, by the account recorded, is
//! edited. A record
//! missing (a job published before records were kept) has the closeout
//! looked for by the id of this publish's token's account (`github.rs`),
//! never the opener's as such (anyone may open the job's branch first); one for another pull request
//! (the job's closeout went there: its branch's pull request was
//! ended and opened again) by its poster's, never the opener's, who
//! may be anyone (a copy of the closeout in their comment was edited into
//! Paddock's and recorded as it). A record there
//! but not read whole (a link, a FIFO, cut short, not a record) fails the
//! closeout: neither a closeout posted beside the one it may name nor a
//! comment edited.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The record's file name, in the job's artifacts.
pub const RECORD: &str = ".github-closeout.json";

/// Where the job's closeout comment is, or who is posting it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloseoutComment {
    /// The pull request's number.
    pub pull_request: u64,
    /// The comment's id, once its post was answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<u64>,
    /// The id of the account that posted it (or is about to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poster: Option<u64>,
}

impl super::closeout_record::Record for CloseoutComment {
    const CLOSEOUT: &'static str = "comment";
    fn proposal(&self) -> u64 {
        self.pull_request
    }
    fn names_something(&self) -> bool {
        self.comment.is_some() || self.poster.is_some()
    }
}

/// The record at `path` for pull request `number` (`closeout_record::read`).
pub fn read(path: &Path, number: u64) -> std::io::Result<Option<CloseoutComment>> {
    super::closeout_record::read(path, number)
}

/// The record at `path` whichever pull or merge request it names
/// (`closeout_record::read_any`).
pub fn read_any(path: &Path) -> std::io::Result<Option<CloseoutComment>> {
    super::closeout_record::read_any(path)
}

/// Records `record` at `path` (`closeout_record::write`).
pub fn write(path: &Path, record: CloseoutComment) -> std::io::Result<()> {
    super::closeout_record::write(path, &record)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn comment(pull_request: u64, comment: u64) -> CloseoutComment {
        CloseoutComment {
            pull_request,
            comment: Some(comment),
            poster: Some(7),
        }
    }

    /// A record is read back for its own pull request only, one naming
    /// only its poster too; none at all reads as none; a link to one, a
    /// FIFO, an unknown field, a record too long, cut short or naming
    /// nothing is an error; a write replaces a link planted there (its
    /// target keeps its text).
    #[test]
    fn a_record_is_its_pull_requests_and_never_a_links() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RECORD);
        write(&path, comment(3, 507)).unwrap();
        let linked = dir.path().join("linked.json");
        std::os::unix::fs::symlink(&path, &linked).unwrap();
        let fifo = dir.path().join("fifo.json");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let plant = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let posting = plant("posting.json", r#"{"pull_request":3,"poster":9}"#);
        let extra = plant("extra.json", r#"{"pull_request":3,"comment":9,"url":"x"}"#);
        let long = plant(
            "long.json",
            &format!("{{\"pull_request\":3,\"comment\":9}}{}", " ".repeat(2000)),
        );
        let torn = plant("torn.json", r#"{"pull_request":3,"co"#);
        let empty = plant("empty.json", "");
        let nothing = plant("nothing.json", r#"{"pull_request":3}"#);
        let outside = plant("outside", "theirs");
        let planted = dir.path().join("planted.json");
        std::os::unix::fs::symlink(&outside, &planted).unwrap();
        write(&planted, comment(3, 1)).unwrap();
        let read_as = |p: &Path| read(p, 3).map_err(|_| "refused");
        assert_eq!(
            (
                [&path, &posting, &planted].map(|p| read_as(p)).to_vec(),
                [&linked, &fifo, &extra, &long, &torn, &empty, &nothing]
                    .map(|p| read_as(p))
                    .to_vec(),
                read(&path, 4).unwrap(),
                read(&dir.path().join("none.json"), 3).unwrap(),
                std::fs::read_to_string(&outside).unwrap(),
            ),
            (
                vec![
                    Ok(Some(comment(3, 507))),
                    Ok(Some(CloseoutComment {
                        pull_request: 3,
                        comment: None,
                        poster: Some(9)
                    })),
                    Ok(Some(comment(3, 1)))
                ],
                vec![Err("refused"); 7],
                None,
                None,
                "theirs".to_string(),
            )
        );
    }
}
