//! The setup cache for one job (`crate::setup_cache`, docs/egress.md#the-setup-cache):
//! its key from the job (source, the base commit's lockfiles and
//! manifests, setup commands and list, rung, host profile, PATH), a
//! restore instead of the commands when the cache has a fitting entry
//! produced from the job's base commit or one of its ancestors (an entry
//! another branch's setup produced is never restored: its scripts ran),
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
    /// The job's base commit: what a stored entry is produced from.
    commit: String,
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
        profile: job.policy.as_ref().map(|p| &p.profile),
        path_env,
        tools_env: &job.config.tools.env,
        read_only: &job.config.tools.read_only,
    });
    Ok(Some(Cached {
        cache: SetupCache::under(jobs_root),
        key,
        commit: ws.base_commit.clone(),
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

/// What a restore did with the producing job's directory, for the event.
fn rewritten(s: &Summary) -> String {
    match (&s.not_rewritten, s.rewritten) {
        (Some((from, to)), _) => format!(
            "; `{from}` where files name it is not rewritten to `{to}` (their lengths differ)"
        ),
        (None, 0) => String::new(),
        (None, 1) => "; the first job's directory rewritten to this job's in 1 file or link".into(),
        (None, n) => {
            format!("; the first job's directory rewritten to this job's in {n} files and links")
        }
    }
}

/// A commit's name as events show it.
fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// The commits of the key's entries, and which one the job may restore:
/// the one used last of those produced from its base commit or an
/// ancestor of it. `None` when the cache failed (said in an event).
struct Entries {
    trusted: Option<String>,
    all: Vec<String>,
}

async fn entries(
    em: &mut Emitter,
    c: &Cached,
    ws: &Workspace,
) -> Result<Option<Entries>, LaunchFailure> {
    let (cache, key) = (c.cache.clone(), c.key.clone());
    let commits = match blocking(ws, move |_| cache.commits(&key)).await {
        Ok(commits) => commits,
        Err(e) => {
            failed(em, "setup cache: listing the entries", e).await?;
            return Ok(None);
        }
    };
    for commit in &commits {
        match ws.descends_from(commit).await {
            Ok(true) => {
                return Ok(Some(Entries {
                    trusted: Some(commit.clone()),
                    all: commits,
                }))
            }
            Ok(false) => {}
            Err(e) => {
                failed(em, "setup cache: checking an entry's commit", e).await?;
                return Ok(None);
            }
        }
    }
    Ok(Some(Entries {
        trusted: None,
        all: commits,
    }))
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
    let key_short = key.short().to_string();
    let restored = match entries(em, c, ws).await? {
        Some(Entries {
            trusted: Some(commit),
            ..
        }) => {
            let from = commit.clone();
            Some((
                commit,
                blocking(ws, move |t| cache.restore(&key, &from, t)).await,
            ))
        }
        Some(Entries {
            trusted: None,
            all: commits,
        }) if !commits.is_empty() => {
            let n = commits.len();
            say(
                em,
                format!(
                    "not restored from the setup cache (key {key_short}): {} made from {} that base commit {} does not descend from (another branch's setup ran code this job does not trust); the setup commands run",
                    if n == 1 { "its entry was".to_string() } else { format!("its {n} entries were") },
                    commits.iter().map(|c| format!("commit {}", short(c))).collect::<Vec<_>>().join(", "),
                    short(&c.commit),
                ),
            )
            .await?;
            None
        }
        Some(_) => Some((String::new(), Ok(Restore::Miss))),
        None => None,
    };
    match restored {
        Some((commit, Ok(Restore::Restored(s)))) => {
            say(
                em,
                format!(
                    "restored from the setup cache (key {key_short}, commit {}): {}{}; the setup commands did not run",
                    short(&commit),
                    size(&s),
                    rewritten(&s)
                ),
            )
            .await?;
            return Ok(true);
        }
        Some((_, Ok(Restore::Miss))) => {
            say(
                em,
                format!("not in the setup cache (key {key_short}); the setup commands run"),
            )
            .await?;
        }
        Some((_, Ok(Restore::Unfit(why)))) => {
            say(
                em,
                format!("not restored from the setup cache (key {key_short}): {why}; the setup commands run"),
            )
            .await?;
        }
        Some((_, Err(e))) => failed(em, "setup cache: restore", e).await?,
        None => {}
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

/// Says that what the (successful) setup added is not stored, and why
/// (the job's disk past its limit when it ended).
pub(super) async fn decline(
    em: &mut Emitter,
    cached: Cached,
    why: &str,
) -> Result<(), LaunchFailure> {
    if cached.before.is_none() {
        return Ok(());
    }
    say(
        em,
        format!(
            "not stored in the setup cache (key {}): {why}",
            cached.key.short()
        ),
    )
    .await
}

/// Stores what the (successful) setup added.
pub(super) async fn store(
    em: &mut Emitter,
    cached: Cached,
    ws: &Workspace,
) -> Result<(), LaunchFailure> {
    let Cached {
        cache,
        key,
        commit,
        before,
    } = cached;
    let Some(before) = before else {
        return Ok(());
    };
    let key_short = key.short().to_string();
    let commit_short = short(&commit).to_string();
    match blocking(ws, move |t| cache.store(&key, &commit, t, &before)).await {
        Ok(Stored::Stored(s)) => {
            let mut detail = format!(
                "stored in the setup cache (key {key_short}, commit {commit_short}): {}",
                size(&s)
            );
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
                format!("not stored in the setup cache (key {key_short}): {why}"),
            )
            .await
        }
        Err(e) => failed(em, "setup cache: store", e).await,
    }
}
