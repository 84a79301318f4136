//! The file outbox: the forge when none is configured. The pull request a
//! forge would get is written as `pull-request.md` (a header of `key:
//! value` lines, a blank line, the body) and the closeout as
//! `closeout.md`, in the job's `outbox/` beside its patch; a reviewer's
//! answer put there as `review.md` is read back as the review of the
//! branch for the next attempt.

use std::path::PathBuf;

use async_trait::async_trait;

use super::forge::{Forge, ForgeError, PullRequest, PullRequestDraft, ReviewComment};

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

impl Outbox {
    fn write(&self, name: &str, text: &str) -> Result<PathBuf, ForgeError> {
        let err = |step| {
            let path = self.dir.join(name);
            move |source| ForgeError::Outbox { path, step, source }
        };
        std::fs::create_dir_all(&self.dir).map_err(err("create the directory"))?;
        let path = self.dir.join(name);
        std::fs::write(&path, text).map_err(err("write"))?;
        Ok(path)
    }
}

#[async_trait]
impl Forge for Outbox {
    fn name(&self) -> &'static str {
        "outbox"
    }

    /// A file has no state to end it: never one found.
    async fn find_pull_request(&self, _branch: &str) -> Result<Option<PullRequest>, ForgeError> {
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
            url: format!("file://{}", path.display()),
            created,
            ended: None,
            draft: draft.draft,
        })
    }

    async fn post_closeout(
        &self,
        _pull_request: Option<&PullRequest>,
        body: &str,
    ) -> Result<Option<String>, ForgeError> {
        let path = self.write(CLOSEOUT, body)?;
        Ok(Some(format!("file://{}", path.display())))
    }

    async fn review_comments(&self, _branch: &str) -> Result<Vec<ReviewComment>, ForgeError> {
        let path = self.dir.join(REVIEW);
        match std::fs::read_to_string(&path) {
            Ok(text) if !text.trim().is_empty() => Ok(vec![ReviewComment {
                author: "reviewer".into(),
                body: text.trim_end().to_string(),
                path: None,
                line: None,
                state: Some("CHANGES_REQUESTED".into()),
            }]),
            Ok(_) => Ok(Vec::new()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(source) => Err(ForgeError::Outbox {
                path,
                step: "read",
                source,
            }),
        }
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
        let none = outbox.review_comments("paddock/T-1/1").await.unwrap();
        std::fs::write(outbox.dir.join(REVIEW), "Use tabs.\n").unwrap();
        let review = outbox.review_comments("paddock/T-1/1").await.unwrap();
        let file = |n: &str| std::fs::read_to_string(outbox.dir.join(n)).unwrap();
        let url = |n: &str| format!("file://{}", outbox.dir.join(n).display());
        assert_eq!(
            (
                pr.created,
                again.created,
                pr.url,
                closeout,
                file(PULL_REQUEST),
                file(CLOSEOUT),
                none,
                review
            ),
            (
                true,
                false,
                url(PULL_REQUEST),
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
}
