//! `paddock context JOB.toml`: shapes the job through the runner's own
//! admission step (`runner::admit::shape`: rung, host profile with its
//! refusals), checks out the repository at its base ref
//! in a scratch workspace, renders the job's whole context exactly as a run
//! would (without starting a broker or an engine), writes it into a
//! directory and reports its size in bytes and estimated tokens.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context as _;
use paddock::context::{self, ContextInputs, SizeReport};
use paddock::paths::Paths;
use paddock::runner::{self, Shaped};
use paddock::store::Store;
use paddock::workspace::Workspace;
use paddock_protocol::JobSpec;

use super::Failure;

/// Renders the context of `spec` (read from `spec_file`) into `out`;
/// `store` holds the host profiles (needed only when the spec names one).
pub async fn render(
    spec: &JobSpec,
    (spec_file, profile_from): (&Path, Option<(&'static str, std::path::PathBuf)>),
    paths: &Paths,
    store: Option<&dyn Store>,
    (out, tools): (&Path, &[std::path::PathBuf]),
) -> Result<SizeReport, Failure> {
    let bad = |e: anyhow::Error| Failure::BadInput(e);
    // The spec as a run would shape it (the same admission step): its
    // rung resolved on this host, its host profile admitted (the advisory,
    // the timeout cap).
    let exe = std::env::current_exe().context("locate the paddock binary")?;
    let Shaped {
        spec,
        prepared,
        policy,
        ..
    } = runner::admit::shape(
        spec,
        store,
        &paddock::rung::Rungs::host(&exe, super::run::cgroup_root().as_deref()),
    )
    .await
    .map_err(|e| {
        let e = e.in_spec_file(spec_file);
        bad(match &profile_from {
            Some((key, file)) => e.in_config_file(key, file),
            None => e,
        }
        .into())
    })?;
    let spec = &spec;
    let policy = policy.map(|p| p.context()).unwrap_or_default();
    let host_path = std::env::var_os("PATH");
    let cwd = std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from("/"));
    let path_env = match runner::resolve_engine(spec, host_path.as_deref(), &cwd) {
        Ok(binary) => runner::engine_path(&binary, host_path.as_deref(), &cwd, tools),
        Err(_) => host_path
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    let scratch = format!("context-{}", uuid::Uuid::now_v7().simple());
    let ws = Workspace::provision(&paths.jobs, &scratch, &spec.repository, &spec.branch())
        .await
        .map_err(|e| bad(e.into()))?;
    let rendered = ContextInputs {
        policy,
        available_tools: context::manifest::probe_tools(&path_env),
        ..ContextInputs::default()
    }
    .with_repository(&ws.work)
    .and_then(|inputs| prepared.render(spec, &inputs))
    .map_err(|e| bad(e.into()));
    let removed = ws.remove_now().map_err(anyhow::Error::from).and_then(|()| {
        ws.lease
            .release()
            .context("release the scratch workspace's lease")
    });
    let assembled = rendered?;
    removed.context("remove the scratch workspace")?;
    context::write_to_dir(&assembled, out).map_err(|e| bad(e.into()))?;
    Ok(assembled.size())
}

/// The size report as a table.
pub fn table(spec: &JobSpec, out: &Path, r: &SizeReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Context of {} ({} {}) written to {}",
        spec.ticket.id,
        spec.engine.kind,
        spec.engine.model,
        out.display()
    );
    for l in &r.files {
        let _ = writeln!(
            s,
            "  {:<40} {:>8} bytes {:>7} tokens",
            l.path, l.bytes, l.tokens
        );
    }
    let _ = writeln!(
        s,
        "  {:<40} {:>8} bytes {:>7} tokens (estimated: 1 token per 4 characters)",
        "total", r.bytes, r.tokens
    );
    if !r.skills.is_empty() {
        let _ = writeln!(
            s,
            "  {:<40} {:>8} bytes {:>7} tokens ({} files, loaded by the engine on demand)",
            "skills",
            r.skill_bytes,
            r.skill_tokens,
            r.skills.len()
        );
    }
    s
}
