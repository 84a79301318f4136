//! `paddock events`: a job's stored events, one readable line each (the
//! lines `paddock run` shows), or JSONL with `--json`; `--follow` tails
//! them until the job reaches a final state.

use std::time::Duration;

use anyhow::Context as _;
use jiff::tz::TimeZone;
use paddock::paths::Paths;
use paddock::store::event_pages::Pages;
use paddock::store::Store;
use paddock_protocol::{AgentEvent, JobStatus};

use super::progress;
use super::{exit, local_time, open_store_or_empty, resolve_job, Failure};

/// How often `--follow` looks for new events.
const POLL: Duration = Duration::from_millis(250);

#[derive(clap::Args)]
pub struct EventsArgs {
    /// The job: its id, a unique prefix of it, or `latest`.
    pub job: String,
    /// Only events after this sequence number.
    #[arg(long, default_value_t = 0)]
    pub after: u64,
    /// Keep printing new events until the job ends (done, failed, held,
    /// timed out or cancelled).
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Print the events as JSONL (one JSON object per line), as stored.
    #[arg(long)]
    pub json: bool,
}

pub async fn exec(args: EventsArgs, paths: &Paths) -> Result<u8, Failure> {
    let store = open_store_or_empty(paths).await?;
    let job_id = resolve_job(&*store, &args.job, paths).await?;
    let tz = local_time::system();
    let mut lines = progress::Lines::default();
    let mut after = args.after;
    let mut seen = false;
    loop {
        // The status first: events written before the job turned final
        // are all read below, so none is missed on the last round.
        let status = job_status(&*store, &job_id).await?;
        // A page at a time: a job's events may be gigabytes in all.
        let mut pages = Pages::new(&*store, &job_id, after);
        while let Some(events) = pages.next().await.context("read events")? {
            let mut out = String::new();
            for e in &events {
                out.push_str(&render(e, args.json, &tz, &mut lines)?);
                after = e.seq;
                seen = true;
            }
            out!("{out}");
        }
        if !args.follow || !matches!(status, JobStatus::Queued | JobStatus::Running) {
            if !seen && args.after > 0 {
                // An --after past the end printed nothing and said nothing.
                let last = store.last_event_seq(&job_id).await.context("read events")?;
                errln!(
                    "paddock: job {job_id} has no events after seq {} (its last is {last})",
                    args.after
                );
            }
            return Ok(exit::DONE);
        }
        tokio::time::sleep(POLL).await;
    }
}

async fn job_status(store: &dyn Store, job_id: &str) -> Result<JobStatus, Failure> {
    Ok(store
        .job(job_id)
        .await
        .context("look up the job")?
        .map(|j| j.status)
        .unwrap_or(JobStatus::Failed))
}

/// One event as printed: its JSON line, or its readable line (nothing for
/// events without one).
fn render(
    e: &AgentEvent,
    json: bool,
    tz: &TimeZone,
    lines: &mut progress::Lines,
) -> Result<String, Failure> {
    if json {
        let mut line = paddock::terminal_text::json::to_string(e).context("serialize an event")?;
        line.push('\n');
        return Ok(line);
    }
    Ok(match lines.line(e) {
        Some(line) => format!(
            "{:>4} {} {line}\n",
            e.seq,
            local_time::format(e.at, tz, "%H:%M:%S")
        ),
        None => String::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use paddock_protocol::EventBody;
    use time::macros::datetime;

    #[test]
    fn readable_and_json_lines() {
        let e = AgentEvent {
            job_id: "j1".to_owned(),
            seq: 7,
            at: datetime!(2025-06-01 12:30:45 UTC),
            body: EventBody::Text {
                text: "all\n done".to_owned(),
            },
        };
        assert_eq!(
            render(&e, false, &TimeZone::UTC, &mut progress::Lines::default()).unwrap_or_default(),
            "   7 12:30:45   agent: all done\n"
        );
        let json =
            render(&e, true, &TimeZone::UTC, &mut progress::Lines::default()).unwrap_or_default();
        let back: AgentEvent = serde_json::from_str(&json).unwrap();
        assert_eq!(back, e);
    }
}
