//! The HostProfile, enforced (DESIGN.md "policy"): where a job's profile
//! comes from (`profile`: a file, the store, the shipped presets), layer 1
//! the advisory text for the generated context (`advisory`), layer 2 the
//! engines' own enforcement (the files each engine reads are written by
//! its adapter in `engines/` from [`EnginePolicy`](crate::engines::EnginePolicy);
//! `hook`: the `paddock hook pre-tool-use` decision; `matcher`: which
//! command lines run a denied command), the denials found while and after
//! the engine runs (`denials`, from the hook's record and what the
//! adapter reads of the engine's own reports), the backstop behind the
//! hook (`backstop`: a denied command the engine reports as run fails the
//! job), and layer 3
//! (`hidden`: denied programs absent from a sandboxed job's view; `job` ties them together for one job; `admission`: what the job's rung and engine can enforce, refused before
//! start otherwise; `semaphore`: the per-host `max_concurrent_jobs` slots).
//! Documented in docs/host-profile.md.

pub mod admission;
pub mod advisory;
pub mod backstop;
pub mod denials;
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
