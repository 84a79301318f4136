//! `paddock context`: render a job's context into a directory without
//! running an engine, and report its size.

use std::path::PathBuf;

use anyhow::Context as _;
use paddock::paths::Paths;
use paddock_protocol::JobSpec;

use super::context_render;
use super::{exit, open_store_or_empty, Failure};

#[derive(clap::Args)]
pub struct ContextArgs {
    /// The job spec, a .toml or .json file (docs/job-spec.md).
    pub spec: PathBuf,
    /// The directory to write into (created; must be empty).
    #[arg(long, default_value = "paddock-context")]
    pub out: PathBuf,
    /// Print the size report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

pub async fn exec(args: ContextArgs, paths: &Paths) -> Result<u8, Failure> {
    let ContextArgs { spec, out, json } = args;
    let spec_file = spec;
    let config = super::run::user_config(super::config_reads::CONTEXT)?;
    let tools = super::run::job_tools(&config.jobs)?.path;
    let loaded = JobSpec::load(&spec_file).map_err(|e| Failure::BadInput(e.into()))?;
    let profile_from = super::run::profile_from_config(&config, &loaded);
    let spec = config.apply(loaded);
    let store = match spec.policy.profile {
        // Read for a stored profile; no database is created.
        Some(_) => Some(open_store_or_empty(paths).await?),
        None => None,
    };
    let report = context_render::render(
        &spec,
        (&spec_file, profile_from),
        paths,
        store.as_deref(),
        (&out, &tools),
    )
    .await?;
    if json {
        let text = paddock::terminal_text::json::to_string(&serde_json::json!({
            "out": out.display().to_string(),
            "report": report,
        }))
        .context("serialize the size report")?;
        outln!("{text}");
    } else {
        out!("{}", context_render::table(&spec, &out, &report));
    }
    Ok(exit::DONE)
}
