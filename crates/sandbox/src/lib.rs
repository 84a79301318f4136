//! Paddock's Linux sandbox, the `sandbox` isolation rung. The only crate of
//! the workspace allowed `unsafe` (each block carries a `SAFETY` comment).
//!
//! The long-lived caller builds a [`Policy`] and starts a fresh helper
//! process with [`launch::command`] (the `paddock` binary re-executed with
//! the hidden `__sandbox-init` subcommand, which calls [`init::main`]). The
//! helper joins the job's cgroup, unshares every namespace, brings up
//! loopback, the egress forwarder and the direct-connection watcher, and forks the namespace's PID 1,
//! which builds the filesystem view, drops capabilities, sets
//! `no_new_privs`, rlimits, Landlock and seccomp and finally forks and
//! execs the command. The steps that cannot be undone therefore never run
//! in the caller. Any step that fails stops the command from running
//! (exit code [`exit::SETUP_FAILED`], with the step named on stderr).
//!
//! The library prints nothing to the caller; only the helper's own process
//! writes, to its stderr (the run's stderr, as a program's `main` would):
//! `init` allows it, each line starting `paddock sandbox:`.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod absent;
pub mod beneath;
mod bpf;
pub mod caps;
pub mod cgroup;
pub mod cgroup_warm;
pub mod direct;
pub mod error;
pub mod filter;
pub mod fs;
pub mod gate;
pub mod handoff;
pub mod idle;
pub mod idmap;
#[allow(clippy::print_stderr)] // the helper process's own diagnostics
pub mod init;
pub mod launch;
pub mod left;
pub mod lock;
pub mod net;
pub mod notices;
pub mod own_parts;
pub mod packet;
pub mod pass_fd;
pub mod pid_cap;
pub mod policy;
pub mod probe;
pub mod sched;
pub mod signals;
pub mod splice;
mod started;
pub mod trace;
pub mod tun;
pub mod unix_path;
pub mod user_counts;

pub use error::SetupError;
pub use policy::{exit, protected_in, DirectWatch, Forward, Limits, NetMode, Policy};
