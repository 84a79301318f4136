//! The job's egress proxy as the runner sees it: started beside the broker
//! (on the job's rung, [`crate::rung::Rung::bind_egress`]) when the spec
//! lets setup or the agent reach anything, each attempt it records taken
//! in as the job runs (a row of the store's `egress_attempts` and a
//! `network` event), and at the end stopped (every connection it relays
//! closed) and drained: no record is dropped while the proxy's own
//! connections finish.

use std::time::Duration;

use paddock_protocol::{EgressRecord, EventBody, JobSpec};
use tokio::sync::mpsc;

use super::emit::Emitter;
use super::launch::step;
use super::{Job, LaunchFailure};
use crate::egress::EgressConfig;
use crate::rung::{EgressHandle, RungJob};
use crate::store::StoreError;

/// Records the proxy may hold before a connection's end waits for the
/// runner to take them in.
const RECORDS: usize = 1024;
/// How long the records of connections closed at the job's end are
/// waited for.
const DRAIN: Duration = Duration::from_secs(2);

/// A job's running proxy and its records.
pub(super) struct Egress {
    pub handle: EgressHandle,
    pub records: mpsc::Receiver<EgressRecord>,
}

/// Whether the job gets a proxy: its setup or its agent may reach
/// something besides the model.
pub(super) fn wanted(spec: &JobSpec) -> bool {
    !spec.network.allow.is_empty() || !spec.setup.network.is_empty()
}

/// Starts the job's proxy on its rung, when it gets one.
pub(super) async fn start(
    job: &Job,
    on_rung: &RungJob<'_>,
) -> Result<Option<Egress>, LaunchFailure> {
    if !on_rung.egress {
        return Ok(None);
    }
    let profile = job.policy.as_ref().map(|p| &p.profile);
    let config = EgressConfig::for_job(on_rung.job_id, &job.spec, profile)
        .map_err(|e| step("configure the egress proxy", e))?;
    let (tx, records) = mpsc::channel(RECORDS);
    let handle = job
        .rung
        .bind_egress(on_rung, config, tx)
        .await
        .map_err(|e| LaunchFailure::Step(e.to_string()))?;
    Ok(Some(Egress { handle, records }))
}

/// The next record of the job's proxy (never, for a job without one).
pub(super) async fn next(egress: &mut Option<Egress>) -> Option<EgressRecord> {
    match egress {
        Some(e) => e.records.recv().await,
        None => std::future::pending().await,
    }
}

/// One attempt on the job's record: its store row, then its event.
pub(super) async fn record(em: &mut Emitter, rec: EgressRecord) -> Result<(), StoreError> {
    em.store.record_egress(&em.job_id, &rec).await?;
    em.emit(EventBody::Network(rec)).await
}

/// Stops the proxy (closing every connection it relays) and takes in the
/// records still coming, for [`DRAIN`] at most.
pub(super) async fn stop(em: &mut Emitter, egress: Egress) -> Result<(), StoreError> {
    let Egress {
        handle,
        mut records,
    } = egress;
    drop(handle);
    let deadline = tokio::time::Instant::now() + DRAIN;
    while let Ok(Some(rec)) = tokio::time::timeout_at(deadline, records.recv()).await {
        record(em, rec).await?;
    }
    Ok(())
}
