//! One file per `paddock` subcommand: its arguments (a clap `Args`
//! struct) and what it does (`exec`). `main.rs` parses the command line
//! and dispatches here; what the subcommands share (the exit codes, the
//! failure kinds, opening the store) lives in this file.

use anyhow::Context as _;
use paddock::paths::Paths;
use paddock::store::Store;

pub mod color;
pub mod completions;
pub mod context;
pub mod doctor;
pub mod error_chain;
pub mod events;
pub mod gc;
pub mod jobs;
pub mod local_time;
pub mod profile;
pub mod run;
pub mod usage;

/// Process exit codes.
pub mod exit {
    pub const DONE: u8 = 0;
    pub const FAILED: u8 = 1;
    pub const BAD_INPUT: u8 = 2;
    pub const HELD: u8 = 3;
    pub const TIMED_OUT: u8 = 4;
    pub const CANCELLED: u8 = 5;
    pub const INTERNAL: u8 = 70;
}

/// Why a subcommand failed: the caller's input (exit 2) or Paddock itself (exit 70).
pub enum Failure {
    BadInput(anyhow::Error),
    Internal(anyhow::Error),
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Internal(e)
    }
}

pub async fn open_store(paths: &Paths) -> Result<Store, Failure> {
    Store::open(&paths.db)
        .await
        .with_context(|| format!("open the store at {}", paths.db.display()))
        .map_err(Failure::Internal)
}

/// The full id of the job `given` names (an id, a unique prefix, `latest`):
/// a name that matches no job, or several, is the caller's mistake.
pub async fn resolve_job(store: &Store, given: &str, paths: &Paths) -> Result<String, Failure> {
    use paddock::job_ref::{resolve, JobRefError};
    resolve(store, given).await.map_err(|e| match e {
        JobRefError::Lookup { .. } => Failure::Internal(e.into()),
        JobRefError::NoMatch { .. } | JobRefError::NoJobs => {
            Failure::BadInput(anyhow::anyhow!("{e} in {}", paths.db.display()))
        }
        e => Failure::BadInput(e.into()),
    })
}
