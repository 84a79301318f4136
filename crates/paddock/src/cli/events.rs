//! `paddock events`: print a job's stored events as JSONL.

use anyhow::Context as _;
use paddock::paths::Paths;

use super::{exit, open_store, Failure};

#[derive(clap::Args)]
pub struct EventsArgs {
    pub job_id: String,
    /// Only events after this sequence number.
    #[arg(long, default_value_t = 0)]
    pub after: u64,
}

pub async fn exec(args: EventsArgs, paths: &Paths) -> Result<u8, Failure> {
    let EventsArgs { job_id, after } = args;
    let store = open_store(paths).await?;
    if store
        .job(&job_id)
        .await
        .context("look up the job")?
        .is_none()
    {
        return Err(Failure::BadInput(anyhow::anyhow!(
            "no job `{job_id}` in {}",
            paths.db.display()
        )));
    }
    let events = store.events(&job_id, after).await.context("read events")?;
    let mut out = String::new();
    for e in &events {
        out.push_str(&serde_json::to_string(e).context("serialize an event")?);
        out.push('\n');
    }
    out!("{out}");
    Ok(exit::DONE)
}
