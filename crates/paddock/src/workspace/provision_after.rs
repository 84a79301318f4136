//! What a workspace is provisioned after and under, beyond its source and
//! branch (`Workspace::provision_after`): the prior attempt's branch it
//! starts on, when the source may lack it, the CPU each git on the
//! base's content may use (the checkout reads the repository's attribute
//! rules, as hostile as the job's), and the disk the base's checkout may
//! take (`checkout_size.rs`). Passed whole through the layouts'
//! provisioning, which each need them.

use super::{CheckoutBound, PriorBranch};

/// The prior attempt's branch a workspace starts on and its gits' CPU.
#[derive(Debug, Clone, Copy)]
pub struct ProvisionAfter<'a> {
    /// The branch of the attempt it resumes on (its `base_ref`), taken
    /// from its bundle when the source lacks it (`prior_branch.rs`).
    pub prior: Option<&'a PriorBranch>,
    /// The CPU each git on the base's content may use
    /// (`host_git::job_git_cpu`).
    pub git_cpu: std::time::Duration,
    /// The disk the base's checkout may take: the job's
    /// `limits.max_disk_bytes`, and the host's reserve kept free.
    pub disk: CheckoutBound,
}
