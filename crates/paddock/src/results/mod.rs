//! Results: where a job's work goes when it ends (DESIGN.md, "conclude").
//! The change becomes a commit on `paddock/<ticket>/<attempt>` in Paddock's
//! own git directory and a bundle beside the patch (`conclude.rs`: only the
//! job's new objects where `base_objects.rs` finds the base kept on the
//! host); the branch is fetched into a local source (`source.rs`) and pushed with
//! credentials only Paddock holds (`push.rs`), never one that changes a CI
//! definition the forge would run at the push unless the spec allows it
//! (`ci_definitions.rs`); a forge (`forge.rs`: GitHub
//! in `github.rs` with a per-job App token from `github_app.rs` (recorded
//! until revoked by `github_app_record.rs`), GitLab in
//! `gitlab.rs` with a per-job project access token from `gitlab_token.rs`
//! (its closeout note recorded by `gitlab_closeout.rs`, a GitHub
//! closeout comment by `github_closeout.rs`, both over `closeout_record.rs`),
//! both over `forge_http.rs`, or the file outbox in `outbox.rs`) gets a
//! pull (merge) request
//! and the closeout (`closeout.rs`); `republish.rs` publishes a finished
//! job again from what it kept (`paddock publish`); `bounce.rs` the prior
//! attempts of `paddock run --attempt-after JOB`, review comments included;
//! `ended_pull.rs` refuses a rerun of an attempt whose pull request ended. Nothing here merges, approves or
//! enables auto-merge.

pub mod base_objects;
pub mod bounce;
pub mod ci_definitions;
pub mod closeout;
pub mod closeout_record;
pub mod conclude;
pub mod ended_pull;
pub mod forge;
pub mod forge_answer;
pub mod forge_http;
pub mod forge_url;
pub mod found_closeout;
pub mod github;
pub mod github_app;
pub mod github_app_record;
pub mod github_closeout;
pub mod gitlab;
pub mod gitlab_closeout;
pub mod gitlab_token;
pub mod line_record;
pub mod outbox;
pub mod pinned_base;
pub mod push;
pub mod republish;
pub mod scope;
pub mod source;
pub mod source_pack;
pub mod start_branch;
pub mod token_record;
pub mod uncommitted_record;
pub mod worktree_heads;

pub use conclude::{
    base_branch, conclude_job, fetch_into_source_soon, into_source_at_end, keep_branch,
    patch_and_branch, publish, revoke_leftover_tokens, tokens_left, KeptBranch, KeptOrNot,
    PublishInput, Published, StopCause,
};
pub use forge::{
    Forge, ForgeBackend, ForgeError, Posted, PullRequest, PullRequestDraft, ReviewComment, Reviews,
};
pub use source::SourceFetching;
