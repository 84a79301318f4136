//! The HostProfile, enforced (DESIGN.md "policy"): where a job's profile
//! comes from (`profile`: a file, the store, the shipped presets), layer 1
//! the advisory text for the generated context (`advisory`), layer 2 the
//! engines' own enforcement (`engine_files`: Claude Code's PreToolUse hook
//! and permission deny rules, Codex's execpolicy rules; `hook`: the
//! `paddock hook pre-tool-use` decision; `matcher`: which command lines run a
//! denied command), the denials found afterwards (`denials`), and layer 3
//! (`hidden`: denied programs absent from a sandboxed job's view; `job` ties them together for one job; `admission`: what the job's rung and engine can enforce, refused before
//! start otherwise; `semaphore`: the per-host `max_concurrent_jobs` slots).
//! Documented in docs/host-profile.md.

pub mod admission;
pub mod advisory;
pub mod denials;
pub mod engine_files;
pub mod hidden;
pub mod hook;
pub mod job;
pub mod matcher;
pub mod profile;
pub mod semaphore;

pub use admission::{admit, Admission, Refusal};
pub use advisory::advisory;
pub use job::{JobPolicy, JobPolicyError};
pub use matcher::{Denial, Matcher};
pub use profile::{resolve, ProfileSource, ResolveError};
pub use semaphore::{HostSemaphore, SemaphoreError, Slot};
