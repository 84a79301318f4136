//! Assemble: the engine's PATH, its version checked against the pin (a
//! mismatch is a warning, another version may work), and the job's
//! context rendered and checked in full before any of it is written into
//! the workspace. A collision with the repository's files is bad input.
//! The host profile hands its advisory in as plain data (layer 1).

use super::emit::Emitter;
use super::engine_bin::engine_path;
use super::provision::Provisioned;
use super::{Ended, Job, Stop};
use crate::context::{self, Prepared};
use crate::engines;

/// The job's prompt and its engine's PATH.
#[derive(Clone)]
pub(super) struct Assembled {
    pub prompt: String,
    pub path_env: String,
}

/// Assembles the job's context into its workspace; on failure the
/// workspace is removed (unless kept) before the job ends.
pub(super) async fn assemble(
    job: &Job,
    em: &mut Emitter,
    prov: &mut Provisioned,
    prepared: &Prepared,
) -> Result<Assembled, Stop> {
    let spec = &job.spec;
    let path_env = engine_path(
        &prov.binary,
        job.config.host_path.as_deref(),
        &job.config.cwd,
        &job.config.tools.path,
    );
    // Another version than the pinned one may work: a warning, not a failure.
    if let Some(w) = engines::version::mismatch(
        &prov.adapter.install(),
        &prov.adapter.native_program(&prov.binary).0,
        &path_env,
        Some(&job.config.paths.jobs.join(engines::version::REMEMBERED)),
    )
    .await
    {
        em.error(
            "paddock",
            format!("engine {}: {w}", spec.engine.kind),
            false,
        )
        .await?;
    }
    let policy = job.policy.as_ref().map(|p| p.context()).unwrap_or_default();
    match context::assemble(prepared, spec, prov.ws(), policy, &path_env).await {
        Ok((a, warnings)) => {
            for w in warnings {
                em.error("paddock", w, false).await?;
            }
            Ok(Assembled {
                prompt: a.prompt,
                path_env,
            })
        }
        Err(e) => {
            let msg = e.to_string();
            em.error("paddock", msg.clone(), true).await?;
            if let Err(e) = prov.guard.remove_unless_kept() {
                em.error("paddock", e.to_string(), false).await?;
            }
            Err(Stop::End(Ended::failed(msg, true)))
        }
    }
}
