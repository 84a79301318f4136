//! The file outbox: the forge when none is configured. The pull request a
//! forge would get is written as `pull-request.md` (a header of `key:
//! value` lines, a blank line, the body) and the closeout as
//! `closeout.md`, in the job's `outbox/` beside its patch; a reviewer's
//! answer put there as `review.md` is read back as the review of the
//! branch for the next attempt. No link is followed there, either way
//! (Paddock may run as root, and what it reads becomes the next job's
//! brief): a `review.md` that is a link or not a regular file (a FIFO
//! would block the read) is refused with an error saying so, only its
//! first [`MAX_REVIEW_BYTES`] are read (the brief keeps far less of a
//! review: `bounce.rs`), and a link in place of `pull-request.md` or
//! `closeout.md`, or of the outbox itself, is refused, never written
//! through.

use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::PathBuf;

use async_trait::async_trait;

use super::forge::{
    Forge, ForgeError, Posted, PullRequest, PullRequestDraft, ReviewComment, Reviews,
};

/// The outbox of one job.
pub struct Outbox {
    pub dir: PathBuf,
}

/// The pull request's file.
pub const PULL_REQUEST: &str = "pull-request.md";
/// The closeout's file.
pub const CLOSEOUT: &str = "closeout.md";
/// Where a reviewer's answer is read from.
pub const REVIEW: &str = "review.md";
/// The most of a reviewer's answer read (the next job's brief keeps
/// its first 8,000 bytes): a file of any size is not read whole into
/// memory.
pub const MAX_REVIEW_BYTES: u64 = 1 << 20;

use crate::own_file::NO_LINK;

impl Outbox {
    fn write(&self, name: &str, text: &str) -> Result<PathBuf, ForgeError> {
        let err = |step| {
            let path = self.dir.join(name);
            move |source| ForgeError::Outbox { path, step, source }
        };
        std::fs::create_dir_all(&self.dir).map_err(err("create the directory"))?;
        self.not_a_link().map_err(err("open the directory"))?;
        let path = self.dir.join(name);
        let mut file =
            crate::own_file::open_to_write(&path).map_err(err("open (a link is not followed)"))?;
        std::io::Write::write_all(&mut file, text.as_bytes()).map_err(err("write"))?;
        Ok(path)
    }

    /// The outbox is a directory, not a link to one.
    fn not_a_link(&self) -> std::io::Result<()> {
        match std::fs::symlink_metadata(&self.dir)?.file_type() {
            t if t.is_dir() => Ok(()),
            _ => Err(std::io::Error::other(
                "a link or not a directory; Paddock does not follow it",
            )),
        }
    }

    /// The reviewer's answer (module text); `None` when there is none.
    fn read_review(&self) -> Result<Option<String>, ForgeError> {
        let path = self.dir.join(REVIEW);
        let err = |step| {
            let path = path.clone();
            move |source| ForgeError::Outbox { path, step, source }
        };
        match std::fs::symlink_metadata(&self.dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            _ => self.not_a_link().map_err(err("open the directory"))?,
        }
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(NO_LINK)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(err("read (a link is not followed)")(e)),
        };
        let meta = file.metadata().map_err(err("read"))?;
        if !meta.is_file() {
            return Err(err("read")(std::io::Error::other("not a regular file")));
        }
        let mut bytes = Vec::new();
        file.take(MAX_REVIEW_BYTES)
            .read_to_end(&mut bytes)
            .map_err(err("read"))?;
        Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
    }
}

#[async_trait]
impl Forge for Outbox {
    fn name(&self) -> &'static str {
        "outbox"
    }

    /// A file has no state to end it: never one found.
    async fn find_pull_request(
        &self,
        _branch: &str,
        _base: &str,
    ) -> Result<Option<PullRequest>, ForgeError> {
        Ok(None)
    }

    async fn propose(
        &self,
        draft: &PullRequestDraft,
        _found: Option<PullRequest>,
    ) -> Result<PullRequest, ForgeError> {
        let created = !self.dir.join(PULL_REQUEST).exists();
        let text = format!(
            "title: {}\nhead: {}\nbase: {}\ndraft: {}\nlabels: {}\n\n{}",
            draft.title,
            draft.head,
            draft.base,
            draft.draft,
            draft.labels.join(", "),
            draft.body
        );
        let path = self.write(PULL_REQUEST, &text)?;
        Ok(PullRequest {
            number: 0,
            url: Some(format!("file://{}", path.display())),
            refused_url: None,
            created,
            ended: None,
            draft: draft.draft,
            author: None,
        })
    }

    async fn post_closeout(
        &self,
        _pull_request: Option<&PullRequest>,
        body: &str,
    ) -> Result<Posted, ForgeError> {
        let path = self.write(CLOSEOUT, body)?;
        Ok(Posted::at(format!("file://{}", path.display())))
    }

    /// The outbox's review is the user's own (a file they wrote).
    async fn review_comments(&self, _branch: &str, _base: &str) -> Result<Reviews, ForgeError> {
        let comments = match self.read_review()? {
            Some(text) if !text.trim().is_empty() => vec![ReviewComment {
                author: "reviewer".into(),
                body: text.trim_end().to_string(),
                path: None,
                line: None,
                state: Some("CHANGES_REQUESTED".into()),
            }],
            _ => Vec::new(),
        };
        Ok(Reviews {
            comments,
            untrusted: 0,
            unread: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_outbox_holds_what_a_forge_would_get() {
        let dir = tempfile::tempdir().unwrap();
        let outbox = Outbox {
            dir: dir.path().join("outbox"),
        };
        let draft = PullRequestDraft {
            head: "paddock/T-1/1".into(),
            base: "main".into(),
            title: "T-1: Fix it".into(),
            body: "Body.\n".into(),
            draft: true,
            labels: vec!["paddock".into(), "bot".into()],
        };
        let pr = outbox.open_pull_request(&draft).await.unwrap();
        let again = outbox.open_pull_request(&draft).await.unwrap();
        let closeout = outbox.post_closeout(None, "Done.\n").await.unwrap();
        let none = outbox
            .review_comments("paddock/T-1/1", "main")
            .await
            .unwrap()
            .comments;
        std::fs::write(outbox.dir.join(REVIEW), "Use tabs.\n").unwrap();
        let review = outbox
            .review_comments("paddock/T-1/1", "main")
            .await
            .unwrap()
            .comments;
        let file = |n: &str| std::fs::read_to_string(outbox.dir.join(n)).unwrap();
        let url = |n: &str| format!("file://{}", outbox.dir.join(n).display());
        assert_eq!(
            (
                pr.created,
                again.created,
                pr.url,
                closeout.url,
                file(PULL_REQUEST),
                file(CLOSEOUT),
                none,
                review
            ),
            (
                true,
                false,
                Some(url(PULL_REQUEST)),
                Some(url(CLOSEOUT)),
                "title: T-1: Fix it\nhead: paddock/T-1/1\nbase: main\ndraft: true\nlabels: paddock, bot\n\nBody.\n".to_string(),
                "Done.\n".to_string(),
                vec![],
                vec![ReviewComment {
                    author: "reviewer".into(),
                    body: "Use tabs.".into(),
                    path: None,
                    line: None,
                    state: Some("CHANGES_REQUESTED".into()),
                }]
            )
        );
    }

    /// Whatever is put in the outbox in place of its files, nothing is
    /// read or written through it: a `review.md` linked to a file outside
    /// (as root, Paddock would have put that file into the next job's
    /// brief) and a FIFO (the read would have waited for ever) are
    /// refused, each error naming the file and why, and of one past the
    /// bound only the bound is read; a link
    /// in place of `closeout.md` or `pull-request.md` is refused and its
    /// target left as it was, and an outbox that is a link is neither
    /// read nor written.
    #[tokio::test]
    async fn nothing_in_the_outbox_is_followed_or_read_past_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let outbox = Outbox {
            dir: dir.path().join("outbox"),
        };
        std::fs::create_dir(&outbox.dir).unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "the host's secret\n").unwrap();
        let review = outbox.dir.join(REVIEW);
        let said = |r: Result<Vec<ReviewComment>, ForgeError>| match r {
            Ok(c) => format!("read {c:?}"),
            Err(e) => e.to_string(),
        };
        let at = review.display().to_string();
        let mut seen = Vec::new();
        std::os::unix::fs::symlink(&secret, &review).unwrap();
        seen.push(said(
            outbox
                .review_comments("b", "main")
                .await
                .map(|r| r.comments),
        ));
        std::fs::remove_file(&review).unwrap();
        nix::unistd::mkfifo(&review, nix::sys::stat::Mode::S_IRWXU).unwrap();
        seen.push(said(
            outbox
                .review_comments("b", "main")
                .await
                .map(|r| r.comments),
        ));
        std::fs::remove_file(&review).unwrap();
        std::fs::write(&review, vec![b'x'; MAX_REVIEW_BYTES as usize * 3]).unwrap();
        let whole = outbox.review_comments("b", "main").await.unwrap().comments;
        assert_eq!(
            whole.iter().map(|c| c.body.len()).collect::<Vec<_>>(),
            vec![MAX_REVIEW_BYTES as usize]
        );
        std::fs::remove_file(&review).unwrap();
        for name in [CLOSEOUT, PULL_REQUEST] {
            std::os::unix::fs::symlink(&secret, outbox.dir.join(name)).unwrap();
        }
        seen.push(said(
            outbox.post_closeout(None, "Done.\n").await.map(|_| vec![]),
        ));
        let draft = PullRequestDraft {
            head: "h".into(),
            base: "main".into(),
            title: "t".into(),
            body: "b".into(),
            draft: true,
            labels: vec![],
        };
        seen.push(said(outbox.propose(&draft, None).await.map(|_| vec![])));
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::write(elsewhere.join(REVIEW), "read from elsewhere\n").unwrap();
        let linked = Outbox {
            dir: dir.path().join("linked"),
        };
        std::os::unix::fs::symlink(&elsewhere, &linked.dir).unwrap();
        seen.push(said(
            linked
                .review_comments("b", "main")
                .await
                .map(|r| r.comments),
        ));
        seen.push(said(
            linked.post_closeout(None, "Done.\n").await.map(|_| vec![]),
        ));
        let eloop = std::io::Error::from_raw_os_error(nix::libc::ELOOP).to_string();
        let link_dir = "a link or not a directory; Paddock does not follow it";
        let out = |n: &str| outbox.dir.join(n).display().to_string();
        let lin = |n: &str| linked.dir.join(n).display().to_string();
        assert_eq!(
            seen,
            vec![
                format!("outbox {at}: cannot read (a link is not followed): {eloop}"),
                format!("outbox {at}: cannot read: not a regular file"),
                format!(
                    "outbox {}: cannot open (a link is not followed): {eloop}",
                    out(CLOSEOUT)
                ),
                format!(
                    "outbox {}: cannot open (a link is not followed): {eloop}",
                    out(PULL_REQUEST)
                ),
                format!(
                    "outbox {}: cannot open the directory: {link_dir}",
                    lin(REVIEW)
                ),
                format!(
                    "outbox {}: cannot open the directory: {link_dir}",
                    lin(CLOSEOUT)
                ),
            ]
        );
        assert_eq!(
            (
                std::fs::read_to_string(&secret).unwrap(),
                std::fs::read_dir(&elsewhere).unwrap().count()
            ),
            ("the host's secret\n".to_string(), 1)
        );
    }
}
