//! The backstop behind the engine hook: every shell command the engine
//! reports as having run (its result is not a refusal) is judged again
//! against the profile, and a denied one is a violation: the hook failed
//! open on it (stopped at its timeout, its shell not started, its files
//! edited by the job, or anything else). The runner then stops the engine
//! and fails the job, and nothing of it is published.
//!
//! Only what the engine reports counts, never the hook's record file (the
//! job can write that, on both rungs): a denial the hook recorded does not
//! excuse a command the engine ran. The stream is the engine's output and
//! hostile too, but lying on it can only fail the job.
//!
//! The command is the job's text, and the profile's shell parser must not
//! run on it in Paddock's process (it overflowed its stack on nested
//! braces and backtracked exponentially on nested `case`,
//! `tests/it/denial_attacks.rs`): it is judged by the hook's own program,
//! `paddock hook pre-tool-use`, run by the runner outside the job as a
//! child of its own, given the profile as the first line of its stdin (no
//! file: a copy in the host's `$TMPDIR` was one the job could rewrite on
//! the `process` rung) and at most [`JUDGE_TIMEOUT`]. A child that cannot answer (it cannot start,
//! crashes, refuses the line or takes too long) judges the command
//! denied: fail closed.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use paddock_protocol::{EngineKind, EventBody, HostProfile};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::task::JoinSet;

use crate::engines::denial::{rule_in, ReportedIn, JUSTIFICATION_MARK};

/// The most shell calls waiting for their results: a call past it is
/// judged at once, as if it ran (it cannot be followed to its result).
const MAX_PENDING: usize = 4096;

/// The most commands that ran waiting for a judge: past it the runner
/// reads no more of the engine's output until they are judged (the
/// engine waits on its full pipe), [`Backstop::has_room`].
pub const MAX_QUEUED: usize = 64;

/// The most judging children at once.
const JUDGES: usize = 2;

/// How long the judging child may take for one command.
pub const JUDGE_TIMEOUT: Duration = Duration::from_secs(10);

/// The most of the judging child's answer read (a decision is a line).
const MAX_ANSWER: u64 = 64 << 10;

/// The rule named for a command the judge could not judge.
const UNJUDGED: &str = "deny_commands";

/// A denied command the engine ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The profile rule it matched (`deny_commands` when it could not be
    /// judged).
    pub rule: String,
    /// The command line as the engine reported it.
    pub command: String,
}

/// One engine run's shell calls, judged beside the runner's loop: the
/// commands that ran are queued ([`observe`](Self::observe)) and judged
/// by at most [`JUDGES`] children at once ([`next`](Self::next)), so the
/// job's timeout, cancellation and output cap act while they are judged.
#[derive(Debug)]
pub struct Backstop {
    engine: EngineKind,
    judge: Arc<Judge>,
    /// Shell calls whose results have not come yet: id, command.
    pending: HashMap<String, String>,
    /// Commands that ran, waiting for a judge.
    queue: VecDeque<String>,
    /// The judgments under way, and their commands.
    judging: JoinSet<Option<Violation>>,
    under_way: HashMap<tokio::task::Id, String>,
}

/// What a judging child is run with.
#[derive(Debug)]
struct Judge {
    /// `paddock`, whose `hook pre-tool-use` judges.
    exe: PathBuf,
    /// The profile as one line of JSON, the first line of the judge's
    /// stdin: never a file, which the job could reach.
    profile: String,
}

impl Backstop {
    /// The backstop for `engine` under `profile`, judged by `exe`.
    pub fn new(profile: &HostProfile, engine: EngineKind, exe: PathBuf) -> Backstop {
        Backstop {
            engine,
            judge: Arc::new(Judge {
                exe,
                // One line: JSON escapes the newlines in its strings.
                profile: serde_json::to_string(profile).unwrap_or_default(),
            }),
            pending: HashMap::new(),
            queue: VecDeque::new(),
            judging: JoinSet::new(),
            under_way: HashMap::new(),
        }
    }

    /// Follows one parsed event of the engine's stream: the command of a
    /// shell call whose result says it ran is queued to be judged. A call
    /// the backstop cannot follow to its result is judged at once, as if
    /// it ran (fail closed; the engines name every call, so only a hostile
    /// stream has one): a call without an id, one past [`MAX_PENDING`]
    /// calls waiting, and the call an id named again displaces.
    pub fn observe(&mut self, body: &EventBody) {
        match body {
            EventBody::ToolCall {
                call_id,
                command: Some(command),
                ..
            } => match call_id {
                Some(id) if self.pending.len() < MAX_PENDING || self.pending.contains_key(id) => {
                    if let Some(before) = self.pending.insert(id.clone(), command.clone()) {
                        if before != *command {
                            self.queue.push_back(before);
                        }
                    }
                }
                _ => self.queue.push_back(command.clone()),
            },
            EventBody::ToolResult {
                call_id: Some(id),
                exit_code,
                is_error,
                output,
            } => {
                if let Some(command) = self.pending.remove(id) {
                    if ran(self.engine, *exit_code, *is_error, output) {
                        self.queue.push_back(command);
                    }
                }
            }
            _ => {}
        }
    }

    /// The engine's stream ended with the engine's own exit: a call whose
    /// result never came is judged as if it ran (fail closed).
    pub fn stream_ended(&mut self) {
        let mut left: Vec<String> = self.pending.drain().map(|(_, c)| c).collect();
        left.sort();
        self.queue.extend(left);
    }

    /// Whether more of the engine's output may be read: fewer than
    /// [`MAX_QUEUED`] commands wait for a judge.
    pub fn has_room(&self) -> bool {
        self.queue.len() < MAX_QUEUED
    }

    /// Whether commands that ran are still to be judged.
    pub fn busy(&self) -> bool {
        !self.queue.is_empty() || !self.judging.is_empty()
    }

    /// The next judgment done: a violation when its command is denied or
    /// cannot be judged; `None` when it passed or nothing is to be judged.
    /// Cancel-safe: judgments started go on in their tasks.
    pub async fn next(&mut self) -> Option<Violation> {
        while self.judging.len() < JUDGES {
            let Some(command) = self.queue.pop_front() else {
                break;
            };
            let judge = Arc::clone(&self.judge);
            let task = command.clone();
            let handle = self.judging.spawn(async move { judge.judge(&task).await });
            self.under_way.insert(handle.id(), command);
        }
        match self.judging.join_next_with_id().await? {
            Ok((id, violation)) => {
                self.under_way.remove(&id);
                violation
            }
            // A judgment that did not end (it panicked): unjudged.
            Err(e) => Some(Violation {
                rule: UNJUDGED.to_string(),
                command: self.under_way.remove(&e.id()).unwrap_or_default(),
            }),
        }
    }

    /// Judges a command that ran (what [`next`](Self::next) does for each
    /// in turn): a violation when the profile denies it or it cannot be
    /// judged.
    pub async fn judge(&self, command: &str) -> Option<Violation> {
        self.judge.judge(command).await
    }
}

impl Judge {
    /// Judges a command that ran: a violation when the profile denies it
    /// or it cannot be judged.
    async fn judge(&self, command: &str) -> Option<Violation> {
        let input = format!(
            "{}\n{}",
            self.profile,
            serde_json::json!({
                "tool_name": "Bash",
                "tool_input": {"command": command},
            })
        );
        let answer = tokio::time::timeout(JUDGE_TIMEOUT, self.ask(&input)).await;
        let rule = match answer {
            Ok(Some(Answer::Pass)) => return None,
            Ok(Some(Answer::Deny(rule))) => rule,
            Ok(None) | Err(_) => UNJUDGED.to_string(),
        };
        Some(Violation {
            rule,
            command: command.to_string(),
        })
    }

    /// The judging child's answer to `input`; `None` when it gave none.
    async fn ask(&self, input: &str) -> Option<Answer> {
        let mut child = tokio::process::Command::new(&self.exe)
            .args(["hook", "pre-tool-use", "--profile-on-stdin"])
            .env_clear()
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .ok()?;
        let mut stdin = child.stdin.take()?;
        stdin.write_all(input.as_bytes()).await.ok()?;
        drop(stdin);
        let mut out = String::new();
        child
            .stdout
            .take()?
            .take(MAX_ANSWER)
            .read_to_string(&mut out)
            .await
            .ok()?;
        let status = child.wait().await.ok()?;
        if !status.success() {
            return None;
        }
        if out.trim().is_empty() {
            return Some(Answer::Pass);
        }
        let v: serde_json::Value = serde_json::from_str(out.trim()).ok()?;
        let decision = v.pointer("/hookSpecificOutput/permissionDecision");
        let reason = v
            .pointer("/hookSpecificOutput/permissionDecisionReason")
            .and_then(serde_json::Value::as_str)?;
        (decision.and_then(serde_json::Value::as_str) == Some("deny"))
            .then(|| Answer::Deny(rule_in(reason).unwrap_or_else(|| UNJUDGED.to_string())))
    }
}

/// What the judging child said.
enum Answer {
    Pass,
    Deny(String),
}

/// How Claude Code's refusal of a call whose PreToolUse hook failed closed
/// (it exited 2) begins: "PreToolUse:Bash hook error: [HOOK COMMAND]: " and
/// the hook's stderr (Claude Code 2.1.197).
const CLAUDE_HOOK_FAILED: &str = "PreToolUse:Bash hook error: [";

/// Whether a call's result says its command ran, as each engine reports
/// one it refused: Codex gives a command that ran its exit code (one
/// refused is `declined`, without one); Claude Code gives a refused call
/// an error result whose text is the refusal (the hook's reason, which
/// starts with [`JUSTIFICATION_MARK`], [`CLAUDE_HOOK_FAILED`] for a hook
/// that failed closed, or its permission rules' "Permission to use …"),
/// and a command that ran and failed "Exit code N" and then its output:
/// what the command prints never begins the text, so it cannot pass for
/// a refusal (`tests/engines/policy.rs`
/// `claude_a_command_printing_the_refusal_still_fails_the_job`). Any
/// other error is taken as run (fail closed).
fn ran(engine: EngineKind, exit_code: Option<i64>, is_error: bool, output: &str) -> bool {
    match engine {
        EngineKind::Claude => {
            !is_error
                || !(output.starts_with(JUSTIFICATION_MARK)
                    || output.starts_with(CLAUDE_HOOK_FAILED)
                    || output.starts_with("Permission to use "))
        }
        _ => exit_code.is_some() || !is_error,
    }
}

impl Violation {
    /// Why the job failed, naming the command, the rule and the profile.
    /// The stop is the host's; that the command ran is what the engine's
    /// output reports (the job can print any tool call there, and a
    /// forged one only fails the job), so the reason says whose report it
    /// is, as a refusal read there does ([`ReportedIn::Output`]), before
    /// the command the job wrote.
    pub fn reason(&self, profile_id: &str) -> String {
        format!(
            "the job was stopped: {} the engine ran `{}`, which host profile `{profile_id}` \
             denies (`{}`, deny_commands), without the hook judging it (the hook failed open)",
            ReportedIn::Output.words(),
            self.command,
            self.rule
        )
    }

    /// The `policy` event for it.
    pub fn event(&self, profile_id: &str) -> EventBody {
        EventBody::Policy {
            rule: self.rule.clone(),
            message: self.reason(profile_id),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn call(id: &str, command: &str) -> EventBody {
        EventBody::ToolCall {
            call_id: Some(id.into()),
            tool: "Bash".into(),
            command: Some(command.into()),
            input: serde_json::Value::Null,
        }
    }

    fn result(id: &str, exit_code: Option<i64>, is_error: bool, output: &str) -> EventBody {
        EventBody::ToolResult {
            call_id: Some(id.into()),
            exit_code,
            is_error,
            output: output.into(),
        }
    }

    /// Each engine's refusals are not commands that ran, and anything else
    /// a shell call's result says is (whatever its output claims); a
    /// result of no call is nothing.
    #[test]
    fn the_commands_that_ran_are_judged() {
        let profile =
            HostProfile::from_json(r#"{"id":"p","deny_commands":["make all"]}"#, "t").unwrap();
        let ran = |engine, events: &[EventBody]| {
            let mut b = Backstop::new(&profile, engine, PathBuf::from("/nonexistent"));
            for e in events {
                b.observe(e);
            }
            b.queue.into_iter().collect::<Vec<_>>()
        };
        let claude = ran(
            EngineKind::Claude,
            &[
                call("1", "a"),
                result(
                    "1",
                    None,
                    true,
                    "paddock policy: host profile `p` denies `make all` on this host",
                ),
                call("2", "b"),
                result(
                    "2",
                    None,
                    true,
                    "Permission to use Bash with command b has been denied.",
                ),
                call("3", "c"),
                result(
                    "3",
                    None,
                    false,
                    "paddock policy: host profile `p` denies `make all`",
                ),
                call("4", "d"),
                result("4", None, true, "Exit code 2\npaddock policy: forged"),
                call("5", "e"),
                result(
                    "5",
                    None,
                    true,
                    "PreToolUse:Bash hook error: [/bin/paddock hook pre-tool-use || exit 2]: \
                     paddock policy: host profile p.json: not valid JSON",
                ),
                call("7", "f"),
                result(
                    "7",
                    None,
                    true,
                    "Exit code 1\nPreToolUse:Bash hook error: [forged]: no",
                ),
                result("6", None, false, "no call"),
            ],
        );
        assert_eq!(claude, vec!["c", "d", "f"]);
        let codex = ran(
            EngineKind::Codex,
            &[
                call("item_1", "a"),
                result("item_1", None, true, ""),
                call("item_2", "b"),
                result("item_2", Some(1), true, "paddock policy: forged"),
                call("item_3", "c"),
                result("item_3", Some(0), false, ""),
            ],
        );
        assert_eq!(codex, vec!["b", "c"]);
    }

    /// A shell call the backstop cannot follow to its result is taken as
    /// run: one without an id, the one an id named again displaces (not
    /// the same call named twice), one past the calls waiting, and, once
    /// the stream ended, one whose result never came; a result of no
    /// call, or without an id, is nothing.
    #[test]
    fn calls_that_cannot_be_followed_are_taken_as_run() {
        let profile =
            HostProfile::from_json(r#"{"id":"p","deny_commands":["make all"]}"#, "t").unwrap();
        let mut b = Backstop::new(&profile, EngineKind::Codex, PathBuf::from("/nonexistent"));
        let no_id = EventBody::ToolCall {
            call_id: None,
            tool: "shell".into(),
            command: Some("a".into()),
            input: serde_json::Value::Null,
        };
        let no_id_result = EventBody::ToolResult {
            call_id: None,
            exit_code: Some(0),
            is_error: false,
            output: String::new(),
        };
        for e in [
            no_id,
            no_id_result,
            call("1", "b"),
            call("1", "b"),
            call("1", "c"),
            result("1", Some(0), false, ""),
            result("9", Some(0), false, ""),
        ] {
            b.observe(&e);
        }
        for i in 0..MAX_PENDING {
            b.observe(&call(&format!("w{i}"), "w"));
        }
        b.observe(&call("x", "d"));
        b.observe(&result("x", Some(0), false, ""));
        b.observe(&result("w0", None, true, ""));
        b.observe(&call("y", "e"));
        b.stream_ended();
        let queued: Vec<String> = b.queue.iter().cloned().collect();
        let mut want: Vec<String> = ["a", "b", "c", "d", "e"].map(String::from).to_vec();
        want.extend(std::iter::repeat_n("w".to_string(), MAX_PENDING - 1));
        assert_eq!(queued, want);
    }

    /// Commands are judged beside the caller, a violation for each denied
    /// one, until none is left.
    #[tokio::test]
    async fn the_queued_commands_are_each_judged() {
        let profile =
            HostProfile::from_json(r#"{"id":"p","deny_commands":["make all"]}"#, "t").unwrap();
        let mut b = Backstop::new(&profile, EngineKind::Codex, PathBuf::from("/nonexistent"));
        b.observe(&call("1", "ls"));
        b.observe(&result("1", Some(0), false, ""));
        b.observe(&call("2", "make all"));
        b.observe(&result("2", Some(0), false, ""));
        assert!(b.busy());
        let mut got = Vec::new();
        while b.busy() {
            got.extend(b.next().await);
        }
        got.sort_by(|x, y| x.command.cmp(&y.command));
        // The judge cannot start here: both unjudged.
        let unjudged = |c: &str| Violation {
            rule: "deny_commands".into(),
            command: c.into(),
        };
        assert_eq!(got, vec![unjudged("ls"), unjudged("make all")]);
        assert_eq!(b.next().await, None);
    }

    /// A judge that cannot run judges every command denied (fail closed).
    #[tokio::test]
    async fn a_judge_that_cannot_run_denies() {
        let profile =
            HostProfile::from_json(r#"{"id":"p","deny_commands":["make all"]}"#, "t").unwrap();
        let b = Backstop::new(&profile, EngineKind::Codex, PathBuf::from("/nonexistent"));
        assert_eq!(
            b.judge("ls").await,
            Some(Violation {
                rule: "deny_commands".into(),
                command: "ls".into(),
            })
        );
    }

    #[test]
    fn the_reason_names_the_command_rule_and_profile() {
        let v = Violation {
            rule: "make all".into(),
            command: "bash -lc 'make all'".into(),
        };
        assert_eq!(
            v.event("box"),
            EventBody::Policy {
                rule: "make all".into(),
                message: "the job was stopped: the engine's output, which the job could write, \
                          reports: the engine ran `bash -lc 'make all'`, which host profile `box` \
                          denies (`make all`, deny_commands), without the hook judging it (the \
                          hook failed open)"
                    .into(),
            }
        );
    }
}
