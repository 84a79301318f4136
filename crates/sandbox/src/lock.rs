//! Landlock, the second wall: the same read-only and writable paths as the
//! mount view, enforced by the kernel's Landlock LSM on every file access,
//! plus (ABI 6) scoping of signals and abstract Unix sockets to the
//! sandbox. Applied after the view is built; a kernel without Landlock
//! makes the setup fail (fail closed).

use std::path::PathBuf;

use landlock::{
    path_beneath_rules, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};

use crate::error::SetupError;
use crate::own_parts;

/// The Landlock ABI Paddock asks for; older kernels get what they support,
/// but at least ABI 1 (filesystem rules) must be enforced.
pub const TARGET_ABI: ABI = ABI::V6;

/// Restricts this process and its descendants to reading and executing
/// `ro` and doing anything under `rw`.
pub fn restrict(ro: &[PathBuf], rw: &[PathBuf]) -> Result<(), SetupError> {
    let e = |detail: String| SetupError::Landlock { detail };
    let abi = TARGET_ABI;
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(|x| e(x.to_string()))?
        .scope(Scope::Signal | Scope::AbstractUnixSocket)
        .map_err(|x| e(x.to_string()))?
        .create()
        .map_err(|x| e(x.to_string()))?
        .add_rules(path_beneath_rules(ro, AccessFs::from_read(abi)))
        .map_err(|x| e(x.to_string()))?
        .add_rules(path_beneath_rules(rw, AccessFs::from_all(abi)))
        .map_err(|x| e(x.to_string()))?
        .add_rules(path_beneath_rules(
            own_parts::DEVICES.iter().chain(&["/dev/pts", "/dev/shm"]),
            AccessFs::from_all(abi),
        ))
        .map_err(|x| e(x.to_string()))?
        .add_rules(path_beneath_rules(["/dev"], AccessFs::from_read(abi)))
        .map_err(|x| e(x.to_string()))?
        // Directories can be listed everywhere in the view; files are read
        // only under the rules above.
        .add_rules(path_beneath_rules(["/"], AccessFs::ReadDir))
        .map_err(|x| e(x.to_string()))?
        .restrict_self()
        .map_err(|x| e(x.to_string()))?;
    match status.ruleset {
        RulesetStatus::FullyEnforced | RulesetStatus::PartiallyEnforced => Ok(()),
        RulesetStatus::NotEnforced => Err(e(
            "the kernel does not enforce Landlock (not built in or not in the `lsm=` list)".into(),
        )),
    }
}
