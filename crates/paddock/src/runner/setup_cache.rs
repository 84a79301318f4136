//! The setup cache for one job (`crate::setup_cache`, docs/egress.md#the-setup-cache):
//! its key from the job (source, the base commit's lockfiles and
//! manifests, setup commands and list, rung, host profile, PATH), a
//! restore instead of the commands when the cache has a fitting entry,
//! else the trees listed before the commands run and what they added
//! stored after they all succeeded (and everything they started is gone,
//! before the engine starts). Each step is a `status` event of phase
//! `setup_cache` saying what happened; a cache that fails is a non-fatal
//! `error` event, and setup runs as without one. Off when the spec says
//! `setup.cache = false` or the host profile `setup_cache = false`.

use paddock_protocol::{EventBody, Phase};

use super::emit::Emitter;
use super::{Job, LaunchFailure};
use crate::setup_cache::{
    is_key_file, Before, JobTrees, Key, KeyInput, Restore, SetupCache, SetupCacheError, Stored,
    Summary,
};
use crate::workspace::Workspace;

/// The job's cache, its key, and the trees before setup.
pub(super) struct Cached {
    cache: SetupCache,
    key: Key,
    before: Option<Before>,
}

async fn say(em: &mut Emitter, detail: String) -> Result<(), LaunchFailure> {
    em.emit(EventBody::Status {
        phase: Phase::SetupCache,
        detail: Some(detail),
    })
    .await?;
    Ok(())
}

async fn failed(
    em: &mut Emitter,
    what: &str,
    e: impl std::fmt::Display,
) -> Result<(), LaunchFailure> {
    em.emit(EventBody::Error {
        message: format!("{what}: {e}; setup runs without the cache"),
        source: Some("setup_cache".into()),
        fatal: false,
    })
    .await?;
    Ok(())
}

/// The job's cache and key; `None` when it is off (said in an event) or
/// the key cannot be made (an error event).
pub(super) async fn open(
    job: &Job,
    em: &mut Emitter,
    ws: &Workspace,
    env: &[(String, String)],
) -> Result<Option<Cached>, LaunchFailure> {
    let setup = &job.spec.setup;
    if !setup.cache {
        say(em, "off (setup.cache = false)".into()).await?;
        return Ok(None);
    }
    if let Some(p) = job
        .policy
        .as_ref()
        .filter(|p| p.profile.setup_cache == Some(false))
    {
        say(
            em,
            format!("off (host profile {}: setup_cache = false)", p.profile.id),
        )
        .await?;
        return Ok(None);
    }
    let (Some(jobs_root), repo) = (ws.root.parent(), &job.spec.repository) else {
        return Ok(None);
    };
    let source = match (&repo.path, &repo.url) {
        (Some(path), _) => path.display().to_string(),
        (None, Some(url)) => url.clone(),
        (None, None) => return Ok(None),
    };
    let key_files = match ws.base_files(is_key_file).await {
        Ok(files) => files,
        Err(e) => {
            failed(em, "setup cache: the base commit's lockfiles", e).await?;
            return Ok(None);
        }
    };
    let path_env = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map_or("", |(_, v)| v.as_str());
    let key = Key::of(KeyInput {
        source: &source,
        key_files,
        commands: &setup.commands,
        network: setup.network.entries(),
        rung: job.rung.isolation().as_str(),
        profile: job.policy.as_ref().map(|p| p.profile.id.as_str()),
        path_env,
    });
    Ok(Some(Cached {
        cache: SetupCache::under(jobs_root),
        key,
        before: None,
    }))
}

fn trees(ws: &Workspace) -> (std::path::PathBuf, std::path::PathBuf) {
    (ws.work.clone(), ws.home.clone())
}

/// `f` on the job's trees, off the runtime's threads.
async fn blocking<T: Send + 'static>(
    ws: &Workspace,
    f: impl FnOnce(JobTrees<'_>) -> Result<T, SetupCacheError> + Send + 'static,
) -> Result<T, String> {
    let (work, home) = trees(ws);
    tokio::task::spawn_blocking(move || {
        f(JobTrees {
            work: &work,
            home: &home,
        })
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| e.to_string())
}

fn size(s: &Summary) -> String {
    format!("{} entries, {} bytes", s.entries, s.bytes)
}

/// Restores the key's entry; `Ok(true)` when it was (the commands are not
/// to run). Otherwise the trees are listed for [`store`], and `cached`
/// becomes `None` when that fails.
pub(super) async fn restore(
    em: &mut Emitter,
    cached: &mut Option<Cached>,
    ws: &Workspace,
) -> Result<bool, LaunchFailure> {
    let Some(c) = cached.as_mut() else {
        return Ok(false);
    };
    let (cache, key) = (c.cache.clone(), c.key.clone());
    let short = key.short().to_string();
    match blocking(ws, move |t| cache.restore(&key, t)).await {
        Ok(Restore::Restored(s)) => {
            say(
                em,
                format!(
                    "restored from the setup cache (key {short}): {}; the setup commands did not run",
                    size(&s)
                ),
            )
            .await?;
            return Ok(true);
        }
        Ok(Restore::Miss) => {
            say(
                em,
                format!("not in the setup cache (key {short}); the setup commands run"),
            )
            .await?;
        }
        Ok(Restore::Unfit(why)) => {
            say(
                em,
                format!("not restored from the setup cache (key {short}): {why}; the setup commands run"),
            )
            .await?;
        }
        Err(e) => failed(em, "setup cache: restore", e).await?,
    }
    match blocking(ws, SetupCache::before).await {
        Ok(before) => c.before = Some(before),
        Err(e) => {
            failed(em, "setup cache: listing the trees before setup", e).await?;
            *cached = None;
        }
    }
    Ok(false)
}

/// Stores what the (successful) setup added.
pub(super) async fn store(
    em: &mut Emitter,
    cached: Cached,
    ws: &Workspace,
) -> Result<(), LaunchFailure> {
    let Cached { cache, key, before } = cached;
    let Some(before) = before else {
        return Ok(());
    };
    let short = key.short().to_string();
    match blocking(ws, move |t| cache.store(&key, t, &before)).await {
        Ok(Stored::Stored(s)) => {
            let mut detail = format!("stored in the setup cache (key {short}): {}", size(&s));
            if s.left_out_count > 0 {
                let named: Vec<String> = s
                    .left_out
                    .iter()
                    .map(|(path, why)| format!("`{path}` ({why})"))
                    .collect();
                detail.push_str(&format!(
                    "; left out ({} in all): {}",
                    s.left_out_count,
                    named.join(", ")
                ));
            }
            say(em, detail).await
        }
        Ok(Stored::Declined(why)) => {
            say(
                em,
                format!("not stored in the setup cache (key {short}): {why}"),
            )
            .await
        }
        Err(e) => failed(em, "setup cache: store", e).await,
    }
}
