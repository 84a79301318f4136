//! `paddock run`: run a job spec to its end, with live progress on stderr
//! and the summary (or the job record as JSON) on stdout.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use paddock::broker::PriceTable;
use paddock::paths::Paths;
use paddock::runner::{self, RunError, RunOptions};
use paddock_protocol::{JobSpec, JobStatus};

use super::{exit, open_store, Failure};
use crate::progress;

#[derive(clap::Args)]
pub struct RunArgs {
    pub spec: PathBuf,
    /// Print the final job record as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Keep the workspace after the job.
    #[arg(long)]
    pub keep: bool,
    /// A price table merged over the shipped one (its models replace or
    /// add to the shipped ones; `paddock prices` shows the result).
    #[arg(long, env = "PADDOCK_PRICES")]
    pub prices: Option<PathBuf>,
}

pub async fn exec(args: RunArgs, paths: &Paths, host_dir: Option<PathBuf>) -> Result<u8, Failure> {
    let RunArgs {
        spec,
        json,
        keep,
        prices,
    } = args;
    let spec = JobSpec::load(&spec).map_err(|e| Failure::BadInput(e.into()))?;
    let prices =
        PriceTable::effective(prices.as_deref()).map_err(|e| Failure::BadInput(e.into()))?;
    let store = open_store(paths).await?;
    // Teardown also after a crash: what earlier `paddock` processes
    // left behind when they died mid-job (what `paddock gc` does).
    for line in paddock::reaper::render(&paddock::reaper::reap(paths, &store).await) {
        errln!("paddock: {line}");
    }
    let opts = RunOptions {
        paths: paths.clone(),
        keep,
        prices: Arc::new(prices),
        host_path: std::env::var_os("PATH"),
        host_dir: host_dir
            .unwrap_or_else(|| paths.jobs.parent().unwrap_or(&paths.jobs).join("host")),
        paddock_exe: std::env::current_exe().ok(),
    };
    let mut view = progress::Progress::new();
    // Listen for Ctrl-C, and for SIGTERM and SIGHUP (what systemd,
    // Docker and CI send, a closed terminal), from now on: each
    // cancels the job. `ctrl_c()` would install its handler only
    // when first polled, and a signal before that (the job waiting
    // for a host slot) would kill paddock uncleaned.
    let cancel = cancel_signals().context("listen for Ctrl-C, SIGTERM and SIGHUP")?;
    let result = runner::run(&spec, &store, &opts, &mut view, cancel).await;
    view.finish();
    if let Ok(r) = &result {
        if let Some(dir) = &r.kept_workspace {
            errln!("paddock: workspace kept at {}", dir.display());
        }
    }
    let result = match result {
        Ok(r) => r,
        Err(RunError::BadInput(msg)) => return Err(Failure::BadInput(anyhow::anyhow!(msg))),
        Err(e) => return Err(Failure::Internal(e.into())),
    };
    if json {
        let out = serde_json::to_string(&result.record).context("serialize the job record")?;
        outln!("{out}");
    } else {
        out!("{}", progress::summary(&result.record));
    }
    Ok(match result.record.status {
        _ if result.bad_input => exit::BAD_INPUT,
        JobStatus::Done => exit::DONE,
        JobStatus::Failed | JobStatus::Running => exit::FAILED,
        JobStatus::Held => exit::HELD,
        JobStatus::TimedOut => exit::TIMED_OUT,
        JobStatus::Cancelled => exit::CANCELLED,
    })
}

/// Resolves on the first SIGINT, SIGTERM or SIGHUP; the handlers are
/// installed before this returns.
fn cancel_signals() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    Ok(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
            _ = hup.recv() => {}
        }
    })
}
