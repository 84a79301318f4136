//! What a later publish finds of a job's closeout on its pull request
//! (`github.rs`'s and `gitlab.rs`'s `closeout_of`): Paddock's own, which
//! it edits; none, and it posts one; or closeouts it cannot tell from a
//! copy. The last is the forge's ghost case: the job's closeout record
//! names only the account about to post (a publish stopped between its
//! post and its record, or whose answer was lost), that account's
//! closeout is not found, and the forge's ghost, who holds the comments
//! of every deleted account, holds one or more of this job's closeout.
//! One may be Paddock's (the stopped publish's token revoked, its bot
//! account deleted), another a copy someone posted and then deleted their
//! account. None is edited (that may write Paddock's closeout into a
//! copy); a new closeout is posted beside them, and the publish says so
//! ([`left_beside`]). Before, the publish failed, and every later one,
//! until the record was removed by hand: anyone who may comment could
//! hold a job's publish that way.

/// A job's closeout as a later publish found it on the pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// Paddock's own, by its id: edited.
    Ours(u64),
    /// Comments or notes of the job's closeout that the forge's ghost
    /// holds, none of them known to be Paddock's: left as they are, a new
    /// closeout posted.
    Unsure(Vec<u64>),
    /// None: a closeout is posted.
    Nothing,
}

impl Found {
    /// `Ours(id)` for `Some(id)`, else `Nothing`.
    pub fn ours(id: Option<u64>) -> Self {
        id.map_or(Found::Nothing, Found::Ours)
    }

    /// The closeout to edit, if it is Paddock's own, and the ghost's
    /// comments or notes left as they are.
    pub fn into_parts(self) -> (Option<u64>, Vec<u64>) {
        match self {
            Found::Ours(ours) => (Some(ours), Vec::new()),
            Found::Unsure(ghosts) => (None, ghosts),
            Found::Nothing => (None, Vec::new()),
        }
    }
}

/// The publish's warning for the closeout posted at `url` beside `ids`,
/// `what` (`note`, `comment`) of the job's closeout that `ghost` (GitLab's
/// ghost user, GitHub's ghost account) holds on `forge`.
pub fn left_beside(forge: &str, ghost: &str, what: &str, ids: &[u64], url: &str) -> String {
    let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
    format!(
        "{forge}: the closeout was posted again ({url}): {ghost} holds {} {what}(s) of this job's \
         closeout (id {}), which may be the one a publish stopped before recording it posted (its \
         account deleted since) or a copy someone posted before deleting their account; they \
         cannot be told apart, so they are left as they are",
        ids.len(),
        ids.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_warning_names_every_note_left() {
        assert_eq!(
            (
                Found::ours(Some(7)),
                Found::ours(None),
                left_beside(
                    "gitlab",
                    "GitLab's ghost user",
                    "note",
                    &[501, 503],
                    "https://gl/mr/1#note_504"
                )
            ),
            (
                Found::Ours(7),
                Found::Nothing,
                "gitlab: the closeout was posted again (https://gl/mr/1#note_504): GitLab's ghost \
                 user holds 2 note(s) of this job's closeout (id 501, 503), which may be the one a \
                 publish stopped before recording it posted (its account deleted since) or a copy \
                 someone posted before deleting their account; they cannot be told apart, so they \
                 are left as they are"
                    .to_string()
            )
        );
    }
}
