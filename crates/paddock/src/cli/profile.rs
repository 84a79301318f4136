//! `paddock profile`: host profiles in the store (the work is in `policy_cmd`).

use paddock::paths::Paths;

use super::{exit, open_store, Failure};
use crate::policy_cmd;

pub async fn exec(cmd: policy_cmd::ProfileCmd, paths: &Paths) -> Result<u8, Failure> {
    let store = open_store(paths).await?;
    let out = policy_cmd::run_profile(&cmd, &store)
        .await
        .map_err(|e| match e {
            policy_cmd::ProfileFailure::BadInput(e) => Failure::BadInput(e),
            policy_cmd::ProfileFailure::Internal(e) => Failure::Internal(e),
        })?;
    out!("{out}");
    Ok(exit::DONE)
}
