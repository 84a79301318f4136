//! What a workspace is provisioned after and under, beyond its source and
//! branch (`Workspace::provision_after`): the prior attempt's branch it
//! starts on, when the source may lack it, and the CPU each git on the
//! base's content may use (the checkout reads the repository's attribute
//! rules, as hostile as the job's). Passed whole through the layouts'
//! provisioning, which each need both.

use super::PriorBranch;

/// The prior attempt's branch a workspace starts on and its gits' CPU.
#[derive(Debug, Clone, Copy)]
pub struct ProvisionAfter<'a> {
    /// The branch of the attempt it resumes on (its `base_ref`), taken
    /// from its bundle when the source lacks it (`prior_branch.rs`).
    pub prior: Option<&'a PriorBranch>,
    /// The CPU each git on the base's content may use
    /// (`host_git::job_git_cpu`).
    pub git_cpu: std::time::Duration,
}
