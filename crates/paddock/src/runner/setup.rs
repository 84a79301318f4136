//! Setup: the spec's `[setup] commands`, one after the other, each a
//! `/bin/sh -c` on the job's rung (the sandbox, with the job's host
//! profile, on the `sandbox` rung) in the work tree, before the engine
//! starts. They get the engine's base environment (its HOME, TMPDIR, PATH
//! and the proxy variables: `engines::base_env`), never the broker or its
//! token; the egress proxy is in
//! its setup phase meanwhile (`setup.network`), and its records are taken
//! in as they come. Each command is a `tool_call` event (tool `setup`) and
//! its output and exit code a `tool_result`. The whole setup has one
//! timeout (`setup.timeout_secs`, capped by the host profile's
//! `timeout_min` at admission, and by what provisioning left of that cap
//! on the whole job when less: `clock.rs`). A command that fails or times out ends
//! the job with an error naming it and its exit code; either way nothing
//! it started is left running (its rung kills the command's tree, then
//! whatever still points into the job's directory), and the proxy's
//! records are taken in before the job ends. The setup cache
//! (`setup_cache.rs`) restores what an earlier job's identical setup
//! added instead of running the commands, or stores what they added:
//! only when no destination was refused or unreached during setup (the
//! proxy's records settled first, `network::settle`), since a command
//! that ignores a failed fetch (`npm ci || true`) exits 0 with its output
//! partial, and every later job would restore that instead of fetching;
//! nor when a command left processes running when it exited (its rung
//! killed them and said how many: `EngineProcess::left_running`; or they
//! still pointed into the job's directory), since a download or install
//! in the background (`cmd &`, `nohup`) was cut off halfway. Such a
//! command is a warning (a non-fatal `error` event), not a failure: a
//! harmless daemon (a watcher) is common, and the engine starts.

use std::future::Future;
use std::process::ExitStatus;
use std::time::Duration;

use paddock_protocol::EventBody;
use tokio::io::AsyncReadExt;
use tokio::time::Instant;

use super::emit::Emitter;
use super::network::{self, Egress};
use super::{Job, LaunchFailure};
use crate::engines::CommandSpec;
use crate::output::Tail;
use crate::rung::{EngineProcess, LeftRunning, Output, RungJob};

/// How much of a command's output its `tool_result` keeps: its end.
const OUTPUT_TAIL: usize = 64 << 10;
/// How long a stopped command's tree may take to go.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How long a command's output is read once it exited (something it left
/// may hold the pipe open).
const DRAIN: Duration = Duration::from_secs(2);

/// How one command ended.
enum Ended {
    Exited(ExitStatus),
    TimedOut,
    Cancelled,
}

/// How the setup ended when the engine is not to start.
pub(super) enum SetupStop {
    /// A command failed, timed out or could not start: the job fails.
    Failed(LaunchFailure),
    /// The job was cancelled during setup.
    Cancelled(String),
}

impl From<LaunchFailure> for SetupStop {
    fn from(e: LaunchFailure) -> Self {
        SetupStop::Failed(e)
    }
}

impl From<crate::store::StoreError> for SetupStop {
    fn from(e: crate::store::StoreError) -> Self {
        SetupStop::Failed(LaunchFailure::Store(e))
    }
}

/// Runs the setup commands; `Ok(true)` when one ran on the rung (not
/// none, nor the setup cache's copy), `Err` (naming the command) when one
/// fails or the job is cancelled meanwhile.
pub(super) async fn run(
    job: &Job,
    em: &mut Emitter,
    on_rung: &RungJob<'_>,
    env: Vec<(String, String)>,
    (egress, cap_ends): (&mut Option<Egress>, Option<Instant>),
    disk: &super::disk_watch::DiskWatch,
    cancel: &mut (impl Future<Output = ()> + Unpin),
) -> Result<bool, SetupStop> {
    let setup = &job.spec.setup;
    if setup.commands.is_empty() {
        return Ok(false);
    }
    let on_rung = RungJob {
        timeout_secs: setup.timeout_secs,
        phase: paddock_protocol::EgressPhase::Setup,
        ..*on_rung
    };
    let ws = on_rung.ws;
    // The setup cache: restored instead of the commands, or the trees
    // listed to store what they add.
    let mut cached = super::setup_cache::open(job, em, ws, &env).await?;
    if super::setup_cache::restore(em, &mut cached, ws).await? {
        return Ok(false);
    }
    let now = Instant::now();
    let own = now + Duration::from_secs(setup.timeout_secs);
    // What set the timeout: the spec, or the host profile's cap on it;
    // or what provisioning left of that cap, when less.
    let profile = job.policy.as_ref().map(|p| p.profile.id.as_str());
    let (deadline, timeout_secs, limit) = match (cap_ends, profile) {
        (Some(ends), Some(id)) if ends < own => (
            ends,
            super::clock::rounded(ends.saturating_duration_since(now)),
            format!("what provisioning left of the `timeout_min` of host profile `{id}`"),
        ),
        _ => match &job.policy {
            Some(p)
                if p.profile.timeout_min.map(|m| m.saturating_mul(60))
                    == Some(setup.timeout_secs) =>
            {
                (
                    own,
                    setup.timeout_secs,
                    format!("the `timeout_min` of host profile `{}`", p.profile.id),
                )
            }
            _ => (own, setup.timeout_secs, "setup.timeout_secs".to_string()),
        },
    };
    let total = setup.commands.len();
    let mut unmet = Unmet::default();
    let mut left = Left::default();
    for (i, line) in setup.commands.iter().enumerate() {
        let call_id = format!("setup-{}", i + 1);
        em.emit(EventBody::ToolCall {
            call_id: Some(call_id.clone()),
            tool: "setup".into(),
            command: Some(line.clone()),
            input: serde_json::Value::Null,
        })
        .await?;
        let cmd = CommandSpec {
            program: "/bin/sh".into(),
            // One stream, in the order it was written.
            args: vec!["-c".into(), format!("exec 2>&1\n{line}")],
            env: env.clone(),
            cwd: ws.work.clone(),
            stdin: None,
            protect: Vec::new(),
        };
        let what = command_named(i + 1, total, line);
        let launched = match job.rung.launch(&on_rung, &cmd).await {
            // Until the command runs, a failure of the rung's set-up is
            // the rung's, not an exit of the command's.
            Ok(mut process) => tokio::select! {
                started = process.started() => started.map(|()| Some(process)),
                () = &mut *cancel => Ok(None),
            },
            Err(e) => Err(e),
        };
        let result = match launched {
            Ok(Some(process)) => one(em, process, (egress, &mut unmet), deadline, cancel).await,
            Ok(None) => Err(SetupStop::Cancelled(format!(
                "cancelled during {what}; the engine was not started"
            ))),
            Err(e) => Err(super::launch::command_failed(e, i == 0, Some(&what)).into()),
        };
        // Nothing the command started outlives it.
        let strays = super::teardown::leftovers_gone(
            em,
            job.rung.as_ref(),
            &ws.root,
            "a setup command ended",
        )
        .await?;
        left.strays(&what, strays);
        let failure = match result {
            Ok((ended, output, tree)) => {
                let (code, failure) = judge(&ended, &what, timeout_secs, &limit);
                em.emit(EventBody::ToolResult {
                    call_id: Some(call_id),
                    exit_code: code,
                    is_error: failure.is_some(),
                    output,
                })
                .await?;
                // Its background work was cut off: said, whatever the
                // cache.
                if let (None, Some(said)) = (&failure, left.tree(&what, tree)) {
                    em.error("paddock", said, false).await?;
                }
                failure
            }
            Err(e) => Some(e),
        };
        if let Some(failure) = failure {
            // The records of what setup reached are the job's too.
            if let Some(e) = egress.take() {
                network::stop(em, e).await?;
            }
            let in_force =
                crate::egress::refusal::InForce::of(job.policy.as_ref().map(|p| &p.profile));
            return Err(with_refusals(em, failure, &in_force).await?);
        }
    }
    // Every command succeeded and nothing they started is left; what
    // they made is stored only when nothing they asked for was refused
    // or unreached, and within the job's disk (a command that ignored
    // its errors, `cmd || true`, exits 0 on a full disk or without what
    // it could not fetch, its output partial), measured now: the
    // proxy's last records and the watcher's walk may not have come
    // since the last command ended.
    if let Some(c) = cached {
        let settled = network::settle(em, egress).await?;
        for rec in &settled.taken {
            unmet.note(rec);
        }
        let declined = match (left.said().or_else(|| unmet.said()), settled.in_time) {
            (Some(said), _) => Some(said),
            (None, false) => Some(format!(
                "the egress proxy's connections of setup had not all ended {} s after its last \
                 command, so what it refused them is not known",
                network::DRAIN.as_secs()
            )),
            (None, true) => disk.past_limit_now().await,
        };
        match declined {
            Some(why) => super::setup_cache::decline(em, c, &why).await?,
            None => super::setup_cache::store(em, c, ws).await?,
        }
    }
    Ok(true)
}

/// What the setup's commands left running when they exited, killed then
/// (by their rung: its count, `EngineProcess::left_running`; or as
/// processes still pointing into the job's directory): a download or an
/// install in the background (`cmd &`, `nohup`, a double fork) cut off
/// halfway, whose partial output a store would hand every later job.
#[derive(Default)]
struct Left {
    /// Each command's, as the setup cache's declining names it.
    said: Vec<String>,
}

impl Left {
    /// Notes what the rung said `what` (a command) left of its tree
    /// (`None`: the rung does not count); the warning event's text when
    /// it left any, or what the rung said cannot be read.
    fn tree(&mut self, what: &str, said: Option<LeftRunning>) -> Option<String> {
        match said? {
            LeftRunning::Counted(0) => None,
            LeftRunning::Counted(count) => {
                self.said.push(format!(
                    "{what} left {count} process(es) running when it exited"
                ));
                Some(format!(
                    "{what} left {count} process(es) running when it exited; they were killed \
                     (a setup command's background work ends with it: `wait` for it before the \
                     command ends)"
                ))
            }
            LeftRunning::Unreadable => {
                self.said.push(format!(
                    "what its rung said of the processes {what} left running is no single count"
                ));
                Some(format!(
                    "{what} exited, but what its rung said of the processes it left running is \
                     no single count (something else wrote there); whatever it left was killed"
                ))
            }
        }
    }

    /// Notes the `count` processes still pointing into the job's
    /// directory after `what` ended (`teardown::leftovers_gone`, which
    /// said so).
    fn strays(&mut self, what: &str, count: usize) {
        if count > 0 {
            self.said.push(format!(
                "{count} process(es) of the job were still running after {what} ended"
            ));
        }
    }

    /// Why a setup whose commands all exited 0 is not stored, when one
    /// left processes running.
    fn said(&self) -> Option<String> {
        (!self.said.is_empty()).then(|| {
            format!(
                "its commands exited 0, but {}: what was left running was killed then, and \
                 what it was making in the background (a download, an install) may be partial; \
                 the next job runs the setup again",
                self.said.join(" and ")
            )
        })
    }
}

/// The most destinations [`Unmet`] keeps, each once.
const UNMET_KEPT: usize = 64;

/// What the setup's commands asked for that the egress proxy refused or
/// could not reach (as a failed setup's reason counts them:
/// [`refusals_said`]), each destination and rule once, at most
/// [`UNMET_KEPT`] of them and how many more.
#[derive(Default)]
struct Unmet {
    kept: Vec<paddock_protocol::EgressRecord>,
    more: usize,
}

impl Unmet {
    fn note(&mut self, rec: &paddock_protocol::EgressRecord) {
        if !is_unmet(rec) {
            return;
        }
        let same = |r: &paddock_protocol::EgressRecord| {
            r.host == rec.host && r.port == rec.port && r.rule == rec.rule
        };
        if self.kept.iter().any(same) {
            return;
        }
        if self.kept.len() < UNMET_KEPT {
            self.kept.push(rec.clone());
        } else {
            self.more += 1;
        }
    }

    /// Why a setup whose commands all exited 0 is not stored, when
    /// something was refused or unreached: the destinations, each list
    /// named as [`refusals_said`] names it.
    fn said(&self) -> Option<String> {
        let (refused, unreached) =
            crate::egress::refusal::split_unreached(&self.kept, |r| r.rule.as_deref());
        // At most REFUSALS_NAMED named, the rest (and what was past
        // the kept ones) counted.
        let names = |records: Vec<&paddock_protocol::EgressRecord>, more: usize| {
            let named: Vec<String> = records
                .iter()
                .take(REFUSALS_NAMED)
                .map(|r| refusal_named_at(r))
                .collect();
            let rest = records.len().saturating_sub(REFUSALS_NAMED) + more;
            match rest {
                0 => named.join(", "),
                rest => format!("{} and {rest} more", named.join(", ")),
            }
        };
        let mut what = Vec::new();
        if !refused.is_empty() {
            what.push(format!("the egress proxy refused {}", names(refused, 0)));
        }
        if !unreached.is_empty() {
            let who = if what.is_empty() {
                "the egress proxy "
            } else {
                ""
            };
            what.push(format!(
                "{who}did not reach {}, on the setup phase's list",
                names(unreached, 0)
            ));
        }
        // Past the kept ones, counted alone.
        if self.more > 0 {
            what.push(format!(
                "{} more destination(s) were refused or not reached",
                self.more
            ));
        }
        (!what.is_empty()).then(|| {
            format!(
                "its commands exited 0, but during setup {}: what they made may lack what \
                 those would have fetched (a command that ignores a failure, `cmd || true`, \
                 exits 0 without it); the next job runs the setup again (the `network` events \
                 say why each was refused or not reached)",
                what.join(" and ")
            )
        })
    }
}

/// How a reason, an error or a warning names setup command `n` of
/// `total`: the spec's text (a submitter's) one line, every control,
/// bidirectional or invisible character shown as its escape
/// (`terminal_text::line`), so a command's line breaks and escapes forge
/// no line of the job's reason, closeout or log.
fn command_named(n: usize, total: usize, line: &str) -> String {
    format!(
        "setup command {n} of {total} (`{}`)",
        crate::terminal_text::line(line)
    )
}

/// Whether a record is of something the setup asked for and did not get:
/// refused or unreached during setup (not a request without a
/// destination, port 0).
fn is_unmet(r: &paddock_protocol::EgressRecord) -> bool {
    !r.allowed && r.phase == paddock_protocol::EgressPhase::Setup && r.port != 0
}

/// The most refused destinations a failed setup's reason names.
const REFUSALS_NAMED: usize = 5;

/// A failed setup's reason with the destinations the egress proxy refused
/// during setup (each once: `host:port` and the rule), the likeliest cause
/// of a failed `npm ci` or `pip download`, and where to ask for them. A
/// cancelled setup's reason, and a failure with no refusal, stay as they
/// are.
async fn with_refusals(
    em: &Emitter,
    failure: SetupStop,
    in_force: &crate::egress::refusal::InForce,
) -> Result<SetupStop, SetupStop> {
    let SetupStop::Failed(LaunchFailure::Step(reason)) = failure else {
        return Ok(failure);
    };
    let records = em.store.egress(&em.job_id).await?;
    Ok(SetupStop::Failed(LaunchFailure::Step(
        match refusals_said(&records, in_force) {
            Some(said) => format!("{reason}. {said}"),
            None => reason,
        },
    )))
}

/// What a failed setup's reason adds about its egress records: the
/// destinations the proxy refused during setup and where to ask for them,
/// those refused by the address they resolved to (`deny_list:…`: listed
/// already, and only a host profile opens such an address), then those on
/// the setup phase's list it could not reach (which asking would not
/// help); `None` when there are none.
fn refusals_said(
    records: &[paddock_protocol::EgressRecord],
    in_force: &crate::egress::refusal::InForce,
) -> Option<String> {
    let setup = records.iter().filter(|r| is_unmet(r));
    let (refused, unreached) =
        crate::egress::refusal::split_unreached(setup, |r| r.rule.as_deref());
    let (by_address, refused): (Vec<_>, Vec<_>) = refused.into_iter().partition(|r| {
        r.rule
            .as_deref()
            .is_some_and(crate::egress::refusal::by_address)
    });
    // Each destination once, in the order first met; one refused by its
    // address with that address, the part its advice is about.
    let named = |records: Vec<&paddock_protocol::EgressRecord>| {
        let mut list: Vec<String> = Vec::new();
        for r in records {
            let named = refusal_named_at(r);
            if !list.contains(&named) {
                list.push(named);
            }
        }
        list
    };
    let (refused, by_address, unreached) = (named(refused), named(by_address), named(unreached));
    let mut said = Vec::new();
    if !refused.is_empty() {
        said.push(format!(
            "The egress proxy refused during setup: {}; a spec asks for a destination in `setup.network`{}",
            named_list(refused),
            in_force.bound("network.setup_allow")
        ));
    }
    if !by_address.is_empty() {
        let opens = in_force.opens();
        said.push(format!(
            "Refused during setup by the address it resolved to: {}; {}{}",
            named_list(by_address),
            opens.get(..1).unwrap_or_default().to_lowercase(),
            opens.get(1..).unwrap_or_default().trim_end_matches('.')
        ));
    }
    if !unreached.is_empty() {
        said.push(format!(
            "On the setup phase's list but not reached (no address, no connection, or its TLS or answer failed; the `network` events say why): {}",
            named_list(unreached)
        ));
    }
    (!said.is_empty()).then(|| said.join(". "))
}

/// At most [`REFUSALS_NAMED`] of `named`, and how many more.
fn named_list(mut named: Vec<String>) -> String {
    let more = named.len().saturating_sub(REFUSALS_NAMED);
    named.truncate(REFUSALS_NAMED);
    let mut list = named.join(", ");
    if more > 0 {
        list.push_str(&format!(" and {more} more"));
    }
    list
}

/// [`refusal_named`], with the address the proxy resolved the destination
/// to when that address is what was refused (`deny_list:…`): `host:port`
/// at `address` (rule).
fn refusal_named_at(r: &paddock_protocol::EgressRecord) -> String {
    let rule = r.rule.as_deref();
    match r.address.as_deref() {
        Some(at) if rule.is_some_and(crate::egress::refusal::by_address) => format!(
            "{} at {at} ({})",
            destination_named(&r.host, r.port),
            rule.unwrap_or("refused")
        ),
        _ => refusal_named(&r.host, r.port, rule),
    }
}

/// A refused destination as a failed setup's reason names it: `host:port`
/// (an IPv6 address in brackets, as the closeout shows it, so its port is
/// told from its own colons) and the rule.
fn refusal_named(host: &str, port: u16, rule: Option<&str>) -> String {
    format!(
        "{} ({})",
        destination_named(host, port),
        rule.unwrap_or("refused")
    )
}

/// `host:port` in backticks, an IPv6 address in brackets.
fn destination_named(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("`[{host}]:{port}`")
    } else {
        format!("`{host}:{port}`")
    }
}

/// The exit code a `tool_result` shows, and why the engine is not to
/// start when the command did not succeed.
fn judge(
    ended: &Ended,
    what: &str,
    timeout_secs: u64,
    limit: &str,
) -> (Option<i64>, Option<SetupStop>) {
    let failed = |m: String| Some(SetupStop::Failed(LaunchFailure::Step(m)));
    match ended {
        Ended::Exited(status) if status.success() => (Some(0), None),
        Ended::Exited(status) => {
            let code = exit_code(status);
            (
                Some(code),
                failed(format!(
                    "{what} exited with code {code}; the engine was not started"
                )),
            )
        }
        Ended::TimedOut => (
            None,
            failed(format!(
                "{what} was still running when the setup's {timeout_secs} s ({limit}) ran out; it was killed and the engine was not started"
            )),
        ),
        Ended::Cancelled => (
            None,
            Some(SetupStop::Cancelled(format!(
                "cancelled during {what}; the engine was not started"
            ))),
        ),
    }
}

/// A shell-style exit code: the code, or 128 + the signal.
fn exit_code(status: &ExitStatus) -> i64 {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => i64::from(code),
        (None, Some(sig)) => 128 + i64::from(sig),
        (None, None) => -1,
    }
}

/// Waits for one command (taking in the proxy's records meanwhile) until
/// it exits or `deadline`; its end, its output's tail, and how many
/// processes of its tree its rung killed when it exited.
async fn one(
    em: &mut Emitter,
    mut process: Box<dyn EngineProcess>,
    (egress, unmet): (&mut Option<Egress>, &mut Unmet),
    deadline: Instant,
    cancel: &mut (impl Future<Output = ()> + Unpin),
) -> Result<(Ended, String, Option<LeftRunning>), SetupStop> {
    let stdout = process.take_stdout().map(|o| tokio::spawn(tail(o)));
    let stderr = process.take_stderr().map(|o| tokio::spawn(tail(o)));
    let ended = loop {
        tokio::select! {
            status = process.wait() => {
                let status = status.map_err(|e| super::launch::step("wait for a setup command", e))?;
                break Ended::Exited(status);
            }
            Some(rec) = network::next(egress) => {
                unmet.note(&rec);
                network::record(em, rec).await?
            }
            () = tokio::time::sleep_until(deadline) => {
                stop(process.as_mut()).await;
                break Ended::TimedOut;
            }
            () = &mut *cancel => {
                stop(process.as_mut()).await;
                break Ended::Cancelled;
            }
        }
    };
    let tree = match ended {
        Ended::Exited(_) => process.left_running().await,
        Ended::TimedOut | Ended::Cancelled => None,
    };
    // What the command left in its group goes with it.
    process.kill();
    let mut output = String::new();
    for task in [stdout, stderr].into_iter().flatten() {
        let mut task = task;
        match tokio::time::timeout(DRAIN, &mut task).await {
            Ok(Ok(text)) => output.push_str(&text),
            _ => task.abort(),
        }
    }
    Ok((ended, output, tree))
}

/// Stops a command with its tree; one that does not go in time is killed.
async fn stop(process: &mut dyn EngineProcess) {
    process.stop();
    if tokio::time::timeout(STOP_GRACE, process.wait())
        .await
        .is_err()
    {
        process.kill();
        let _ = process.wait().await;
    }
}

/// The end of what `out` says, lossily decoded, until it closes.
async fn tail(mut out: Output) -> String {
    let mut tail = Tail::new(OUTPUT_TAIL);
    let mut decoder = crate::output::Utf8Decoder::default();
    let mut buf = vec![0u8; 16 << 10];
    loop {
        match out.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => tail.push(&decoder.decode(&buf[..n])),
        }
    }
    tail.push(&decoder.finish());
    tail.text()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A setup command's text is named on one line, its escapes, line
    /// breaks and overrides shown as escapes; a plain one as it is.
    #[test]
    fn a_setup_commands_text_is_named_escaped() {
        assert_eq!(
            [
                command_named(1, 2, "make deps"),
                command_named(2, 2, "true\nprintf '\u{1b}]0;x\u{7}' \u{202e}# done"),
            ],
            [
                "setup command 1 of 2 (`make deps`)".to_string(),
                "setup command 2 of 2 (`true\\u{a}printf '\\u{1b}]0;x\\u{7}' \\u{202e}# done`)"
                    .to_string(),
            ]
        );
    }

    /// What each command left is noted: a count of none says nothing, a
    /// rung that does not count says nothing, a count and an unreadable
    /// report are warned about naming the command, and processes still
    /// pointing into the job's directory after a command are counted
    /// too; the declining reason names each, in order. Nothing noted
    /// declines nothing.
    #[test]
    fn what_commands_left_running_is_warned_about_and_declines_the_store() {
        let mut left = Left::default();
        let quiet = [
            left.tree(
                "setup command 1 of 3 (`true`)",
                Some(LeftRunning::Counted(0)),
            ),
            left.tree("setup command 1 of 3 (`true`)", None),
        ];
        left.strays("setup command 1 of 3 (`true`)", 0);
        let none = left.said();
        let warned = [
            left.tree(
                "setup command 2 of 3 (`a &`)",
                Some(LeftRunning::Counted(2)),
            ),
            left.tree("setup command 3 of 3 (`b`)", Some(LeftRunning::Unreadable)),
        ];
        left.strays("setup command 3 of 3 (`b`)", 1);
        assert_eq!(
            (quiet, none, warned, left.said()),
            (
                [None, None],
                None,
                [
                    Some(
                        "setup command 2 of 3 (`a &`) left 2 process(es) running when it \
                         exited; they were killed (a setup command's background work ends with \
                         it: `wait` for it before the command ends)"
                            .to_string()
                    ),
                    Some(
                        "setup command 3 of 3 (`b`) exited, but what its rung said of the \
                         processes it left running is no single count (something else wrote \
                         there); whatever it left was killed"
                            .to_string()
                    ),
                ],
                Some(
                    "its commands exited 0, but setup command 2 of 3 (`a &`) left 2 \
                     process(es) running when it exited and what its rung said of the \
                     processes setup command 3 of 3 (`b`) left running is no single count and \
                     1 process(es) of the job were still running after setup command 3 of 3 \
                     (`b`) ended: what was left running was killed then, and what it was \
                     making in the background (a download, an install) may be partial; the \
                     next job runs the setup again"
                        .to_string()
                ),
            )
        );
    }

    /// An IPv6 destination is bracketed, so its port reads apart from its
    /// address; a name or an IPv4 address is not.
    /// A timed-out setup names what set its limit.
    #[test]
    fn a_timeout_names_its_limit() {
        let reason = |limit: &str| match judge(
            &Ended::TimedOut,
            "setup command 1 of 1 (`x`)",
            60,
            limit,
        )
        .1
        {
            Some(SetupStop::Failed(LaunchFailure::Step(m))) => m,
            _ => String::new(),
        };
        assert_eq!(
            reason("the `timeout_min` of host profile `box`"),
            "setup command 1 of 1 (`x`) was still running when the setup's 60 s (the `timeout_min` of host profile `box`) ran out; it was killed and the engine was not started"
        );
    }

    /// Destinations on the setup list that did not resolve or take a
    /// connection are named apart from the refused ones, without the
    /// advice to ask for them in `setup.network` (which lists them
    /// already), where they were named among the refused with it.
    #[test]
    fn unreached_destinations_are_not_sent_to_ask_for_them() {
        let setup = |host: &str, port: u16, rule: &str| paddock_protocol::EgressRecord {
            port,
            phase: paddock_protocol::EgressPhase::Setup,
            rule: Some(rule.to_owned()),
            ..crate::store::fixtures::egress_attempt(host)
        };
        let agent = paddock_protocol::EgressRecord {
            rule: Some("allowlist".to_owned()),
            ..crate::store::fixtures::egress_attempt("later.example")
        };
        let allowed = paddock_protocol::EgressRecord {
            allowed: true,
            rule: None,
            ..setup("fine.example", 443, "")
        };
        let refused = setup("evil.example", 443, "allowlist");
        let unreached = [
            setup("localhost", 18799, "connect"),
            setup("nosuchhost.invalid", 443, "resolve"),
            setup("localhost", 18799, "connect"),
        ];
        let both: Vec<_> = [refused.clone(), agent.clone(), allowed.clone()]
            .into_iter()
            .chain(unreached.clone())
            .collect();
        let max = crate::egress::refusal::InForce::Maximum {
            profile: "box".to_owned(),
        };
        assert_eq!(
            [
                refusals_said(&both, &max),
                refusals_said(&unreached, &max),
                refusals_said(&[refused], &max),
                refusals_said(&[agent, allowed], &max),
            ],
            [
                Some("The egress proxy refused during setup: `evil.example:443` (allowlist); a spec asks for a destination in `setup.network`, within host profile `box`'s `network.setup_allow` (docs/egress.md). On the setup phase's list but not reached (no address, no connection, or its TLS or answer failed; the `network` events say why): `localhost:18799` (connect), `nosuchhost.invalid:443` (resolve)".to_owned()),
                Some("On the setup phase's list but not reached (no address, no connection, or its TLS or answer failed; the `network` events say why): `localhost:18799` (connect), `nosuchhost.invalid:443` (resolve)".to_owned()),
                Some("The egress proxy refused during setup: `evil.example:443` (allowlist); a spec asks for a destination in `setup.network`, within host profile `box`'s `network.setup_allow` (docs/egress.md)".to_owned()),
                None,
            ]
        );
    }

    /// A destination refused by the address it resolved to (`deny_list:…`)
    /// is named with that address and the advice a host profile's
    /// `network.open_addresses` gives (no spec field opens it: the
    /// destination is on the list), apart from those the list refused,
    /// where it was told to ask for the destination in `setup.network`,
    /// as a spec that listed it already had (a registry a host's DNS
    /// answers with a private mirror's address); the setup cache's
    /// declining names the address too.
    #[test]
    fn a_destination_refused_by_its_address_gets_the_host_profiles_advice() {
        let setup =
            |host: &str, rule: &str, address: Option<&str>| paddock_protocol::EgressRecord {
                port: 443,
                phase: paddock_protocol::EgressPhase::Setup,
                rule: Some(rule.to_owned()),
                address: address.map(str::to_owned),
                ..crate::store::fixtures::egress_attempt(host)
            };
        let records = [
            setup(
                "registry.npmjs.org",
                "deny_list:documentation",
                Some("203.0.113.80:443"),
            ),
            setup("evil.example", "allowlist", None),
            setup(
                "registry.npmjs.org",
                "deny_list:documentation",
                Some("203.0.113.80:443"),
            ),
            setup("mirror.corp", "deny_list:private", Some("[fd00::5]:443")),
        ];
        let mut unmet = Unmet::default();
        for r in &records {
            unmet.note(r);
        }
        let none = crate::egress::refusal::InForce::NoProfile;
        let unbounded = crate::egress::refusal::InForce::Unbounded {
            profile: "wide".to_owned(),
        };
        let by_address = "Refused during setup by the address it resolved to: `registry.npmjs.org:443` at 203.0.113.80:443 (deny_list:documentation), `mirror.corp:443` at [fd00::5]:443 (deny_list:private); loopback, private, link-local, metadata and other special-purpose addresses and this host's own are closed to jobs; ";
        assert_eq!(
            [
                refusals_said(&records, &none),
                refusals_said(&records[..1], &unbounded),
                unmet.said(),
            ],
            [
                Some(format!("The egress proxy refused during setup: `evil.example:443` (allowlist); a spec asks for a destination in `setup.network` (docs/egress.md; the job runs under no host profile). {by_address}only a host profile can open one, one `address:port` at a time (`network.open_addresses`, docs/egress.md), and the job runs under none")),
                Some("Refused during setup by the address it resolved to: `registry.npmjs.org:443` at 203.0.113.80:443 (deny_list:documentation); loopback, private, link-local, metadata and other special-purpose addresses and this host's own are closed to jobs; only the job's host profile (`wide`) can open one, one `address:port` at a time (`network.open_addresses`, docs/egress.md)".to_owned()),
                Some("its commands exited 0, but during setup the egress proxy refused `registry.npmjs.org:443` at 203.0.113.80:443 (deny_list:documentation), `evil.example:443` (allowlist), `mirror.corp:443` at [fd00::5]:443 (deny_list:private): what they made may lack what those would have fetched (a command that ignores a failure, `cmd || true`, exits 0 without it); the next job runs the setup again (the `network` events say why each was refused or not reached)".to_owned()),
            ]
        );
    }

    /// Past the destinations kept, the rest are counted apart (whether
    /// refused or unreached is not kept for them), never said as refused
    /// with an empty list.
    #[test]
    fn unmet_destinations_past_those_kept_are_counted() {
        let setup = |host: String, rule: &str| paddock_protocol::EgressRecord {
            port: 443,
            phase: paddock_protocol::EgressPhase::Setup,
            rule: Some(rule.to_owned()),
            ..crate::store::fixtures::egress_attempt(&host)
        };
        let mut unmet = Unmet::default();
        for i in 0..UNMET_KEPT + 2 {
            unmet.note(&setup(format!("h{i}.example"), "resolve"));
        }
        let said = unmet.said().unwrap_or_default();
        let head = said.split(": what they made").next().unwrap_or_default();
        assert_eq!(
            head,
            "its commands exited 0, but during setup the egress proxy did not reach `h0.example:443` (resolve), `h1.example:443` (resolve), `h2.example:443` (resolve), `h3.example:443` (resolve), `h4.example:443` (resolve) and 59 more, on the setup phase's list and 2 more destination(s) were refused or not reached"
        );
    }

    /// A failed setup's advice for a refused destination says what bounds
    /// the setup list: the host profile's maximum, a profile that sets
    /// none, or no profile at all; where it named "the host profile's
    /// `network.setup_allow`" whether or not a profile was in force.
    #[test]
    fn a_failed_setups_advice_names_what_bounds_its_list() {
        use crate::egress::refusal::InForce;
        let refused = paddock_protocol::EgressRecord {
            port: 443,
            phase: paddock_protocol::EgressPhase::Setup,
            rule: Some("allowlist".to_owned()),
            ..crate::store::fixtures::egress_attempt("evil.example")
        };
        let said = |in_force: InForce| refusals_said(std::slice::from_ref(&refused), &in_force);
        let head = "The egress proxy refused during setup: `evil.example:443` (allowlist); a spec asks for a destination in `setup.network`";
        assert_eq!(
            [
                said(InForce::Maximum {
                    profile: "ci-box".to_owned()
                }),
                said(InForce::Unbounded {
                    profile: "wide".to_owned()
                }),
                said(InForce::NoProfile),
            ],
            [
                Some(format!(
                    "{head}, within host profile `ci-box`'s `network.setup_allow` (docs/egress.md)"
                )),
                Some(format!(
                    "{head} (docs/egress.md; the job's host profile `wide` sets no maximum)"
                )),
                Some(format!(
                    "{head} (docs/egress.md; the job runs under no host profile)"
                )),
            ]
        );
    }

    #[test]
    fn a_refused_destination_is_named_with_its_port_apart() {
        assert_eq!(
            [
                refusal_named("2001:db8::7", 443, Some("allowlist")),
                refusal_named("registry.example", 80, Some("allowlist")),
                refusal_named("10.0.0.1", 8080, None),
            ],
            [
                "`[2001:db8::7]:443` (allowlist)".to_owned(),
                "`registry.example:80` (allowlist)".to_owned(),
                "`10.0.0.1:8080` (refused)".to_owned(),
            ]
        );
    }
}
