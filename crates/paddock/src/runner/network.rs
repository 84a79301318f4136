//! The job's egress proxy as the runner sees it: started beside the broker
//! (on the job's rung, [`crate::rung::Rung::bind_egress`]) when the spec
//! lets setup or the agent reach anything, each attempt it records taken
//! in as the job runs (a row of the store's `egress_attempts` and a
//! `network` event), and at the end stopped (every connection it relays
//! closed) and drained: no record is dropped while the proxy's own
//! connections finish. A job whose host profile holds credentials gets its
//! CA bundle under its HOME and their placeholders in its environment.

use std::path::{Path, PathBuf};
use std::time::Duration;

use paddock_protocol::{EgressRecord, EventBody, JobSpec};
use tokio::sync::mpsc;

use super::emit::Emitter;
use super::launch::step;
use super::{Job, LaunchFailure};
use crate::egress::direct::DirectReports;
use crate::egress::EgressConfig;
use crate::rung::{EgressHandle, RungJob};
use crate::secret::Secret;
use crate::store::StoreError;

/// Records the proxy may hold before a connection's end waits for the
/// runner to take them in.
const RECORDS: usize = 1024;
/// How long the records of connections closed at the job's end are
/// waited for.
pub(super) const DRAIN: Duration = Duration::from_secs(2);

/// A job's running proxy and its records.
pub(super) struct Egress {
    /// The proxy, when the spec's lists allow anything.
    pub handle: Option<EgressHandle>,
    /// The report socket of direct connection attempts, on a rung that
    /// watches for them (`egress::direct`).
    pub direct: Option<DirectReports>,
    pub records: mpsc::Receiver<EgressRecord>,
    /// What the job's credentials add to its environment (the CA bundle's
    /// variables, the placeholders).
    pub env: Vec<(String, String)>,
    /// The credentials' real values (for the job's redactor only).
    pub secrets: Vec<Secret>,
}

/// Where the job's CA bundle is, under its HOME.
pub(super) const CA_BUNDLE: &str = ".paddock/egress-ca.pem";

/// Whether the job gets a proxy: its setup or its agent may reach
/// something besides the model.
pub(super) fn wanted(spec: &JobSpec) -> bool {
    !spec.network.allow.is_empty() || !spec.setup.network.is_empty()
}

/// Starts the job's proxy on its rung, when it gets one, and the report
/// socket of its direct connection attempts, on a rung that watches for
/// them.
pub(super) async fn start(
    job: &Job,
    on_rung: &RungJob<'_>,
) -> Result<Option<Egress>, LaunchFailure> {
    let (tx, records) = mpsc::channel(RECORDS);
    let direct = match job.rung.direct_reports(on_rung) {
        Some(path) => Some(
            DirectReports::bind(&path, tx.clone())
                .map_err(|e| step("listen for the job's direct connection attempts", e))?,
        ),
        None => None,
    };
    if !on_rung.egress {
        // The channel closes with the report socket's reader.
        drop(tx);
        return Ok(direct.map(|direct| Egress {
            handle: None,
            direct: Some(direct),
            records,
            env: Vec::new(),
            secrets: Vec::new(),
        }));
    }
    let profile = job.policy.as_ref().map(|p| &p.profile);
    let config = EgressConfig::for_job(on_rung.job_id, &job.spec, profile)
        .map_err(|e| step("configure the egress proxy", e))?;
    let (env, secrets) = match &config.credentials {
        Some(creds) => {
            let path = write_bundle(&on_rung.ws.home, &creds.bundle)
                .await
                .map_err(|e| step("write the job's CA bundle", e))?;
            let mut env = crate::egress::env::ca_env(&path.display().to_string());
            env.extend(creds.placeholders());
            (env, creds.secrets().cloned().collect())
        }
        None => (Vec::new(), Vec::new()),
    };
    let handle = job
        .rung
        .bind_egress(on_rung, config, tx)
        .await
        .map_err(|e| LaunchFailure::Step(e.to_string()))?;
    Ok(Some(Egress {
        handle: Some(handle),
        direct,
        records,
        env,
        secrets,
    }))
}

/// Writes the job's CA bundle (the system's roots and the job's CA, no key)
/// under its HOME, read-only; its path. Nothing of the job runs yet, but
/// its HOME may be an earlier attempt's: a link in the way is removed,
/// never followed.
async fn write_bundle(home: &Path, bundle: &str) -> std::io::Result<PathBuf> {
    let path = home.join(CA_BUNDLE);
    let (home, bundle, at) = (home.to_path_buf(), bundle.to_string(), path.clone());
    tokio::task::spawn_blocking(move || {
        use std::os::unix::fs::OpenOptionsExt as _;
        let dir = at.parent().unwrap_or(&home);
        match std::fs::symlink_metadata(dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => std::fs::remove_file(dir)?,
            Err(_) => {}
        }
        std::fs::create_dir_all(dir)?;
        match std::fs::remove_file(&at) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o444)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&at)?;
        std::io::Write::write_all(&mut file, bundle.as_bytes())
    })
    .await
    .map_err(std::io::Error::other)??;
    Ok(path)
}

/// The next record of the job's proxy (never, for a job without one).
pub(super) async fn next(egress: &mut Option<Egress>) -> Option<EgressRecord> {
    match egress {
        Some(e) => e.records.recv().await,
        None => std::future::pending().await,
    }
}

/// One attempt on the job's record: its store row (numbered after the
/// last one stored: a retried write finds its own row, `store/retry.rs`),
/// then its event, each among the job's records (past their limit
/// neither is kept). A seq taken by another attempt (rows of the job
/// stored before this process's) moves this one after them.
pub(super) async fn record(em: &mut Emitter, rec: EgressRecord) -> Result<(), StoreError> {
    if !em.records.admit() {
        return Ok(());
    }
    let mut seq = em.egress_seq + 1;
    let mut stored = em.store.record_egress(&em.job_id, seq, &rec).await;
    for _ in 0..super::emit::APPEND_ROUNDS {
        match stored {
            Err(StoreError::EgressConflict { last, .. }) if last >= seq => {
                seq = last + 1;
                stored = em.store.record_egress(&em.job_id, seq, &rec).await;
            }
            _ => break,
        }
    }
    stored?;
    em.egress_seq = seq;
    em.emit_job(EventBody::Network(rec)).await
}

/// What [`settle`] took in.
pub(super) struct Settled {
    /// The records taken in while settling (each also on the record).
    pub taken: Vec<EgressRecord>,
    /// Whether every connection the proxy had accepted ended, and the
    /// direct attempts' reports were taken in, within [`DRAIN`].
    pub in_time: bool,
}

/// Takes in the records of the proxy's connections until none is being
/// served and the direct attempts already reported are taken in, for
/// [`DRAIN`] at most; the proxy keeps serving. Called once the job's
/// processes of a phase are gone (a setup's last command ended): every
/// attempt they made is then on the record, a refusal whose answer a
/// command read before it exited too (the proxy sends a connection's
/// record once it ends, after the answer).
pub(super) async fn settle(
    em: &mut Emitter,
    egress: &mut Option<Egress>,
) -> Result<Settled, StoreError> {
    let mut taken = Vec::new();
    let Some(Egress {
        handle,
        direct,
        records,
        ..
    }) = egress
    else {
        return Ok(Settled {
            taken,
            in_time: true,
        });
    };
    let served = handle.as_ref().map(|h| h.proxy.settled());
    let reported = async {
        if let Some(served) = served {
            served.await;
        }
        if let Some(direct) = direct.as_ref() {
            direct.taken_in().await;
        }
    };
    tokio::pin!(reported);
    let deadline = tokio::time::Instant::now() + DRAIN;
    let in_time = loop {
        tokio::select! {
            () = &mut reported => break true,
            Some(rec) = records.recv() => {
                taken.push(rec.clone());
                record(em, rec).await?;
            }
            () = tokio::time::sleep_until(deadline) => break false,
        }
    };
    // What was sent before the proxy and the reports settled.
    while let Ok(rec) = records.try_recv() {
        taken.push(rec.clone());
        record(em, rec).await?;
    }
    Ok(Settled { taken, in_time })
}

/// Stops the proxy (closing every connection it relays) and takes in the
/// records still coming, for [`DRAIN`] at most.
pub(super) async fn stop(em: &mut Emitter, egress: Egress) -> Result<(), StoreError> {
    let Egress {
        handle,
        direct,
        mut records,
        ..
    } = egress;
    drop(handle);
    // Every command has ended: what they reported is queued.
    if let Some(direct) = direct {
        direct.finish().await;
    }
    let deadline = tokio::time::Instant::now() + DRAIN;
    while let Ok(Some(rec)) = tokio::time::timeout_at(deadline, records.recv()).await {
        record(em, rec).await?;
    }
    Ok(())
}
