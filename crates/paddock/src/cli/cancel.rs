//! `paddock cancel JOB`: cancels a job from another terminal (a `paddock
//! run` elsewhere, a job in a server's queue or running on any host of the
//! store) through the store (`paddock::cancel`), then waits for a running
//! one to end and prints its record as `paddock show` does; a job of
//! this host whose `paddock` was killed is ended by a reaper pass at once.
//! Before, the
//! only cancels were Ctrl-C in the job's own terminal and the API's.

use std::time::Duration;

use anyhow::Context as _;
use paddock::cancel::Asked;
use paddock::paths::Paths;
use paddock_protocol::JobStatus;

use super::{exit, open_store_or_empty, progress, resolve_job, Failure};

/// How long a running job is waited for once its cancel is recorded: its
/// process reads the request within `[hosts] cancel_poll_secs` (1 s) and
/// then stops as Ctrl-C stops it.
const WAIT: Duration = Duration::from_secs(60);

#[derive(clap::Args)]
pub struct CancelArgs {
    /// The job: its id, a unique prefix of it, or `latest`.
    pub job: String,
    /// Print the job's final record as JSON (as `paddock show --json`'s
    /// `record`).
    #[arg(long)]
    pub json: bool,
}

pub async fn exec(args: CancelArgs, paths: &Paths) -> Result<u8, Failure> {
    let store = open_store_or_empty(paths).await?;
    let id = resolve_job(&*store, &args.job, paths).await?;
    let me = paddock::host_id::owner(&paths.jobs)
        .context("this jobs directory's host id")
        .map_err(Failure::Internal)?;
    let asked = paddock::cancel::cancel(&*store, &id, &paddock::cancel::cli_asker(&me.name))
        .await
        .context("cancel the job")
        .map_err(Failure::Internal)?;
    let (record, code) = match asked {
        Asked::NotFound => {
            return Err(Failure::BadInput(anyhow::anyhow!(
                "no job {id} in {}",
                paths.db
            )))
        }
        Asked::Final(record) => {
            errln!(
                "paddock: job {id} had already ended ({}): nothing to cancel",
                record.status.as_str()
            );
            (record, exit::FAILED)
        }
        Asked::Dequeued(record) => {
            errln!("paddock: job {id} was queued: it is cancelled and will not run");
            (record, exit::DONE)
        }
        Asked::Requested(owner) => {
            errln!(
                "paddock: asked job {id} to cancel (it runs on {}); waiting for it to stop",
                paddock::terminal_text::text(&owner.name)
            );
            // This host's job whose `paddock` died (`kill -9`) reads no
            // request: the reaper's pass, as `paddock run` makes at its
            // start, ends it `cancelled` (a live one's lease is held, and
            // the pass leaves it).
            if owner.host == me.host {
                let config = super::run::user_config(super::config_reads::CANCEL)?;
                let liveness = super::run::liveness(paths, &config.hosts)?;
                for line in
                    super::gc::render(&paddock::reaper::reap_here(paths, &*store, &liveness).await)
                {
                    errln!("paddock: {line}");
                }
            }
            let record = wait_for_end(&*store, &id).await?;

            match record.status {
                JobStatus::Cancelled => (record, exit::DONE),
                JobStatus::Running => {
                    errln!(
                        "paddock: job {id} is still running {} s after the cancel was asked: it \
                         stops once its process reads the request; if its `paddock` was killed, \
                         `paddock gc` on its host marks it cancelled",
                        WAIT.as_secs()
                    );
                    (record, exit::FAILED)
                }
                status => {
                    errln!(
                        "paddock: job {id} ended {} before the cancel reached it",
                        status.as_str()
                    );
                    (record, exit::FAILED)
                }
            }
        }
    };
    if args.json {
        outln!(
            "{}",
            paddock::terminal_text::json::to_string(&record).context("serialize the job")?
        );
    } else {
        out!("{}", progress::summary(&record));
    }
    Ok(code)
}

/// Job `id`'s record once it is no longer running, or as it is after
/// [`WAIT`].
async fn wait_for_end(
    store: &dyn paddock::store::Store,
    id: &str,
) -> Result<paddock_protocol::JobRecord, Failure> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let record = store
            .job(id)
            .await
            .context("look up the job")?
            .context("the job vanished")?;
        if record.status != JobStatus::Running || tokio::time::Instant::now() >= deadline {
            return Ok(record);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
