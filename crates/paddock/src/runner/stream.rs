//! Stream: the engine's stdout read into the raw artifact and, line by
//! line, parsed into stored events (with the engine's refusals on its
//! stream as denials), the broker's ledger rows and policy notices shown
//! as they arrive, a denied command the engine ran stopping the job
//! (`policy::backstop`, judged beside this loop, its queue bounded by not
//! reading on while it is full), and the job's timeout and cancellation
//! enforced, while commands are judged too. Only
//! the engine's exit ends the timeout and cancellation: whatever it prints
//! (or stops printing), neither stops holding. Its stderr is copied to its
//! artifact meanwhile, keeping a short tail for the job's reason.

use std::future::Future;
use std::time::Duration;

use paddock_protocol::{EventBody, JobStatus};
use tokio::io::AsyncReadExt;

use super::calls::record_call;
use super::emit::Emitter;
use super::launch::{step, Running};
use super::network;
use super::{Job, LaunchFailure};
use crate::engines::{self, EngineAdapter};
use crate::output::{ArtifactWriter, Line, LineSplitter, Tail, Utf8Decoder};
use crate::policy::backstop::{Backstop, Violation};
use crate::store::StoreError;

/// How much of the engine's output is read at once.
pub(super) const READ_CHUNK: usize = 64 << 10;
/// How long the rest of the engine's output is drained once it exited.
pub(super) const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// A timer that never fires in a job's lifetime (100 years).
const NEVER_SECS: u64 = 100 * 365 * 24 * 3600;
/// The end of the engine's stderr kept for the job's reason, in bytes.
const STDERR_TAIL: usize = 1000;
/// How much of a line that cannot be parsed its `error` event shows.
const LINE_HEAD: usize = 1000;

/// How the stream ended.
pub(super) struct Streamed {
    /// Stopped by the runner: timed out or cancelled.
    pub ended: Option<JobStatus>,
    /// The engine's exit, when it exited by itself.
    pub exited: Option<std::process::ExitStatus>,
    /// The last budget notice, the reason of a held job.
    pub held_reason: Option<String>,
    /// Why the runner stopped a job that failed (`ended` is `Failed`):
    /// the limit its output passed.
    pub failed_reason: Option<String>,
    /// Why the runner stopped a job that timed out (`ended` is
    /// `TimedOut`): the limit that ran out (`clock.rs`).
    pub timeout_reason: Option<String>,
    /// A call's settled row is on neither the broker's nor the runner's
    /// write (`calls.rs`): it is settled `interrupted` at teardown.
    pub unwritten_rows: bool,
    /// Stopped for a denied command the engine ran (`policy::backstop`):
    /// nothing of the job is published.
    pub withheld: bool,
}

/// Follows the running engine until it exited and its stdout is drained,
/// or the job timed out or was cancelled.
pub(super) async fn stream(
    job: &Job,
    em: &mut Emitter,
    run: &mut Running,
    adapter: &dyn EngineAdapter,
    cancel: impl Future<Output = ()>,
) -> Result<Streamed, LaunchFailure> {
    let spec = &job.spec;
    let kind = adapter.kind().as_str();
    let max_line = usize::try_from(spec.limits.max_line_bytes).unwrap_or(usize::MAX);
    let mut lines = LineSplitter::new(max_line);
    let mut buf = vec![0u8; READ_CHUNK];
    let deadline = tokio::time::sleep_until(run.deadline.at);
    tokio::pin!(deadline);
    tokio::pin!(cancel);
    // Armed when the engine exits: what is left of its output is drained
    // for this long at most.
    let grace = tokio::time::sleep(Duration::from_secs(NEVER_SECS));
    tokio::pin!(grace);
    let mut out = Streamed {
        ended: None,
        exited: None,
        held_reason: None,
        failed_reason: None,
        timeout_reason: None,
        unwritten_rows: false,
        withheld: false,
    };
    let max_output = spec.limits.max_output_bytes;
    let mut printed: u64 = 0;
    // The engine's own refusals already reported (by call id, else command):
    // its stream may name one twice (as it happens, and again at the end).
    let mut refused = std::collections::HashSet::new();
    // Denied commands the engine reports as run (`policy::backstop`).
    let mut backstop = job
        .policy
        .as_ref()
        .and_then(|p| p.backstop(adapter.kind(), &job.config.helper_exe));
    let mut stdout_open = true;
    while stdout_open || out.exited.is_none() {
        tokio::select! {
            // Not while the backstop's queue is full: the engine waits on
            // its pipe, and the timeout, cancellation and the rest act.
            n = run.stdout.read(&mut buf), if stdout_open && backstop.as_ref().is_none_or(Backstop::has_room) => match n {
                Ok(0) => stdout_open = false,
                Ok(n) => {
                    // Past the limit nothing more is kept or parsed: the
                    // engine is stopped.
                    let room = usize::try_from(max_output.saturating_sub(printed)).unwrap_or(n);
                    let kept = &buf[..n.min(room)];
                    printed = printed.saturating_add(n as u64);
                    run.raw.write(kept).await;
                    for line in lines.push(kept) {
                        on_line(job, em, run, adapter, line, max_line, &mut refused, &mut backstop).await?;
                    }
                    if printed > max_output && out.exited.is_none() {
                        run.process.stop();
                        let message = format!(
                            "the engine printed more than limits.max_output_bytes ({max_output} bytes) on its output; it was stopped, and what it printed past the limit is not kept"
                        );
                        em.emit(EventBody::Policy { rule: "limits".into(), message: message.clone() }).await?;
                        out.ended = Some(JobStatus::Failed);
                        out.failed_reason = Some(message);
                        break;
                    }
                }
                Err(e) => {
                    em.error(kind, format!("cannot read the engine's output: {e}"), false).await?;
                    stdout_open = false;
                }
            },
            status = run.process.wait(), if out.exited.is_none() => {
                let status = status.map_err(|e| step("wait for the engine", e))?;
                out.exited = Some(status);
                // What the engine left running goes with it.
                run.process.kill();
                grace.as_mut().reset(tokio::time::Instant::now() + DRAIN_GRACE);
            }
            () = &mut grace, if out.exited.is_some() => {
                // Not while the backstop holds the reading back: the
                // rest may name commands that ran.
                if backstop.as_ref().is_none_or(Backstop::has_room) {
                    break;
                }
                grace.as_mut().reset(tokio::time::Instant::now() + DRAIN_GRACE);
            }
            // A command the engine ran judged (`policy::backstop`).
            judged = judged(&mut backstop), if backstop.as_ref().is_some_and(Backstop::busy) => {
                if let Some(reason) = violated(job, em, judged).await? {
                    fail_open(run, &mut out, reason);
                    break;
                }
            }
            Some(call) = run.broker.calls.recv() => {
                out.unwritten_rows |= record_call(em, call, run.broker.spent_micros()).await?;
            }
            Some(rec) = network::next(&mut run.egress) => {
                network::record(em, rec).await?;
            }
            Some(notice) = run.broker.policy.recv() => {
                out.held_reason = Some(notice.message.clone());
                em.emit_job(EventBody::Policy { rule: notice.rule, message: notice.message }).await?;
            }
            () = &mut deadline, if out.exited.is_none() || backstop.as_ref().is_some_and(Backstop::busy) => {
                if out.exited.is_none() {
                    run.process.stop();
                }
                out.ended = Some(JobStatus::TimedOut);
                out.timeout_reason = Some(run.deadline.reason());
                em.emit(run.deadline.event()).await?;
                break;
            }
            () = &mut cancel, if out.exited.is_none() || backstop.as_ref().is_some_and(Backstop::busy) => {
                if out.exited.is_none() {
                    run.process.stop();
                }
                out.ended = Some(JobStatus::Cancelled);
                break;
            }
        }
    }
    if !stdout_open && !out.withheld {
        if let Some(line) = lines.finish() {
            on_line(
                job,
                em,
                run,
                adapter,
                line,
                max_line,
                &mut refused,
                &mut backstop,
            )
            .await?;
        }
    }
    if let Some(b) = backstop.as_mut() {
        if out.ended.is_none() {
            // The engine exited by itself: what it ran is judged before
            // anything of the job is kept, under its timeout and
            // cancellation still.
            b.stream_ended();
            while b.busy() {
                tokio::select! {
                    judged = b.next() => {
                        if let Some(reason) = violated(job, em, judged).await? {
                            fail_open(run, &mut out, reason);
                            break;
                        }
                    }
                    () = &mut deadline => {
                        out.ended = Some(JobStatus::TimedOut);
                        out.timeout_reason = Some(run.deadline.reason());
                        em.emit(run.deadline.event()).await?;
                        break;
                    }
                    () = &mut cancel => {
                        out.ended = Some(JobStatus::Cancelled);
                        break;
                    }
                }
            }
        }
        // Stopped before all it ran was judged: nothing of the job is
        // kept (a denied command may be among them).
        if b.busy() {
            out.withheld = true;
        }
    }
    Ok(out)
}

/// The next judgment of the backstop (it is busy).
async fn judged(backstop: &mut Option<Backstop>) -> Option<Violation> {
    match backstop {
        Some(b) => b.next().await,
        None => None,
    }
}

/// A violation the backstop found: its `policy` event stored, the job's
/// reason to fail.
async fn violated(
    job: &Job,
    em: &mut Emitter,
    found: Option<Violation>,
) -> Result<Option<String>, StoreError> {
    let (Some(v), Some(p)) = (found, &job.policy) else {
        return Ok(None);
    };
    em.emit_job(v.event(&p.profile.id)).await?;
    Ok(Some(v.reason(&p.profile.id)))
}

/// Stops the engine for a denied command it ran (`policy::backstop`):
/// the job fails with `reason` (its `policy` event is stored already).
fn fail_open(run: &mut Running, out: &mut Streamed, reason: String) {
    if out.exited.is_none() {
        run.process.stop();
    }
    out.ended = Some(JobStatus::Failed);
    out.failed_reason = Some(reason);
    out.withheld = true;
}

/// One whole line: its events (each shown to the backstop, which queues
/// the shell commands that ran to be judged), and the refusals the engine
/// reported in it: its own (a `policy` event each, once, with or without a
/// profile) and the profile's (through the profile).
#[allow(clippy::too_many_arguments)]
async fn on_line(
    job: &Job,
    em: &mut Emitter,
    run: &mut Running,
    adapter: &dyn EngineAdapter,
    line: Line,
    max_line: usize,
    refused: &mut std::collections::HashSet<String>,
    backstop: &mut Option<Backstop>,
) -> Result<(), StoreError> {
    let kind = adapter.kind().as_str();
    let mut turn_ended = false;
    let emitted = emit_line(
        em,
        run.parser.as_mut(),
        line,
        max_line,
        kind,
        (&mut turn_ended, backstop),
    )
    .await?;
    // The turn's end starts the patch beside the engine's exit.
    if turn_ended {
        if let Some((early, inputs)) = run.early_patch.take() {
            early.start(inputs);
        }
    }
    let Some(line) = emitted else {
        return Ok(());
    };
    // Every refusal here is the job side's report (the engine's output,
    // the hook's record file), and its event says whose.
    use crate::engines::denial::ReportedIn;
    let found = adapter.stream_denials(&line);
    for denial in &found {
        let Some(event) = denial.refusal_event(adapter.kind(), ReportedIn::Output) else {
            continue;
        };
        let key = denial
            .call_id
            .clone()
            .unwrap_or_else(|| denial.command.clone());
        if refused.insert(key) {
            em.emit_job(event).await?;
        }
    }
    if let (Some(p), Some(tail)) = (&job.policy, run.denials.as_mut()) {
        let (hooks, in_output) = p.new_denials(tail, found);
        for denial in &hooks {
            em.emit_job(p.denial_event(denial, ReportedIn::Record))
                .await?;
        }
        for denial in &in_output {
            em.emit_job(p.denial_event(denial, ReportedIn::Output))
                .await?;
        }
    }
    Ok(())
}

/// Copies the engine's stderr to its artifact as it arrives (decoded once,
/// for both) until it closes or `stop` fires (something the engine left
/// holds it open); its last lines (a short tail), and the artifact's write
/// error if any.
pub(super) async fn save_stderr(
    mut stderr: crate::rung::Output,
    mut artifact: ArtifactWriter,
    stop: tokio::sync::oneshot::Receiver<()>,
    max_output: u64,
) -> (String, Option<String>) {
    let mut buf = vec![0u8; READ_CHUNK];
    // Kept up to `limits.max_output_bytes`; the rest is read (the engine
    // never blocks on it) and dropped, the tail still kept for a reason.
    let mut saved: u64 = 0;
    let mut dropped = false;
    let mut tail = Tail::new(STDERR_TAIL);
    let mut decoder = Utf8Decoder::default();
    tokio::pin!(stop);
    loop {
        let n = tokio::select! {
            n = stderr.read(&mut buf) => n,
            _ = &mut stop => break,
        };
        match n {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let text = decoder.decode(&buf[..n]);
                if saved < max_output {
                    artifact.write_text(&text).await;
                } else if !dropped {
                    dropped = true;
                    artifact
                        .write_text(&format!(
                            "\n[paddock: the rest of the engine's stderr is not kept: past limits.max_output_bytes ({max_output} bytes)]\n"
                        ))
                        .await;
                }
                saved = saved.saturating_add(n as u64);
                tail.push(&text);
            }
        }
    }
    let rest = decoder.finish();
    artifact.write_text(&rest).await;
    tail.push(&rest);
    let error = artifact.finish().await;
    (tail.summary(), error)
}

/// One line of the engine's stdout into events: parsed when held whole and
/// UTF-8 (the line is returned), else an `error` event showing it
/// (lossily, cut). Each event is shown to the backstop.
async fn emit_line(
    em: &mut Emitter,
    parser: &mut dyn engines::StreamParser,
    line: Line,
    max_line: usize,
    kind: &str,
    (turn_ended, backstop): (&mut bool, &mut Option<Backstop>),
) -> Result<Option<String>, StoreError> {
    if !line.complete() {
        let head = &line.bytes[..line.bytes.len().min(LINE_HEAD)];
        let message = format!(
            "the engine printed a line of {} bytes, more than limits.max_line_bytes ({max_line}); it is kept in engine.jsonl but not parsed; it began: {}",
            line.len,
            String::from_utf8_lossy(head)
        );
        em.error_job(kind, message, false).await?;
        return Ok(None);
    }
    match String::from_utf8(line.bytes) {
        Ok(text) => {
            for body in parser.parse_line(&text) {
                // The engine's session id goes into the job's record as
                // the engine announces it, not only at the job's end: a
                // job killed with its `paddock` then still names it, and
                // its next attempt says its session's files are gone
                // rather than that it had no session.
                if let EventBody::Status {
                    phase: paddock_protocol::Phase::SessionStarted,
                    detail: Some(detail),
                } = &body
                {
                    if let Some(session) = engines::session_id(detail) {
                        em.store.set_engine_session(&em.job_id, &session).await?;
                        em.session_stored = Some(session);
                    }
                }
                *turn_ended |= matches!(
                    body,
                    EventBody::Status {
                        phase: paddock_protocol::Phase::TurnCompleted,
                        ..
                    }
                );
                if let Some(b) = backstop.as_mut() {
                    b.observe(&body);
                }
                em.emit_job(body).await?;
            }
            Ok(Some(text))
        }
        Err(e) => {
            let message = format!(
                "the engine printed a line that is not UTF-8 (invalid bytes shown as U+FFFD): {}",
                String::from_utf8_lossy(e.as_bytes())
            );
            em.error_job(kind, message, false).await?;
            Ok(None)
        }
    }
}
