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

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use paddock_protocol::{EngineKind, EventBody, HostProfile};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::engines::denial::{rule_in, JUSTIFICATION_MARK};

/// The most shell calls waiting for their results: a stream naming more
/// calls than this without results is not followed past it.
const MAX_PENDING: usize = 4096;

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

/// One engine run's shell calls, judged.
#[derive(Debug)]
pub struct Backstop {
    engine: EngineKind,
    /// `paddock`, whose `hook pre-tool-use` judges.
    exe: PathBuf,
    /// The profile as one line of JSON, the first line of the judge's
    /// stdin: never a file, which the job could reach.
    profile: String,
    /// Shell calls whose results have not come yet: id, command.
    pending: HashMap<String, String>,
}

impl Backstop {
    /// The backstop for `engine` under `profile`, judged by `exe`.
    pub fn new(profile: &HostProfile, engine: EngineKind, exe: PathBuf) -> Backstop {
        Backstop {
            engine,
            exe,
            // One line: JSON escapes the newlines in its strings.
            profile: serde_json::to_string(profile).unwrap_or_default(),
            pending: HashMap::new(),
        }
    }

    /// Follows one parsed event of the engine's stream: the command of a
    /// shell call whose result says it ran, to be [`judged`](Self::judge).
    pub fn observe(&mut self, body: &EventBody) -> Option<String> {
        match body {
            EventBody::ToolCall {
                call_id: Some(id),
                command: Some(command),
                ..
            } => {
                if self.pending.len() < MAX_PENDING || self.pending.contains_key(id) {
                    self.pending.insert(id.clone(), command.clone());
                }
                None
            }
            EventBody::ToolResult {
                call_id: Some(id),
                exit_code,
                is_error,
                output,
            } => {
                let command = self.pending.remove(id)?;
                ran(self.engine, *exit_code, *is_error, output).then_some(command)
            }
            _ => None,
        }
    }

    /// Judges a command that ran: a violation when the profile denies it
    /// or it cannot be judged.
    pub async fn judge(&self, command: &str) -> Option<Violation> {
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

/// Whether a call's result says its command ran, as each engine reports
/// one it refused: Codex gives a command that ran its exit code (one
/// refused is `declined`, without one); Claude Code gives a refused call
/// an error result whose text is the refusal (the hook's reason, which
/// starts with [`JUSTIFICATION_MARK`], or its permission rules' "Permission
/// to use …"), and a command that ran and failed "Exit code N" and its
/// output.
fn ran(engine: EngineKind, exit_code: Option<i64>, is_error: bool, output: &str) -> bool {
    match engine {
        EngineKind::Claude => {
            !is_error
                || !(output.starts_with(JUSTIFICATION_MARK)
                    || output.starts_with("Permission to use "))
        }
        _ => exit_code.is_some() || !is_error,
    }
}

impl Violation {
    /// Why the job failed, naming the command, the rule and the profile.
    pub fn reason(&self, profile_id: &str) -> String {
        format!(
            "the engine ran `{}`, which host profile `{profile_id}` denies (`{}`, deny_commands), \
             without the hook judging it: the hook failed open, so the job was stopped",
            self.command, self.rule
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
            events
                .iter()
                .filter_map(|e| b.observe(e))
                .collect::<Vec<_>>()
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
                result("6", None, false, "no call"),
            ],
        );
        assert_eq!(claude, vec!["c", "d"]);
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
                message: "the engine ran `bash -lc 'make all'`, which host profile `box` denies \
                          (`make all`, deny_commands), without the hook judging it: the hook \
                          failed open, so the job was stopped"
                    .into(),
            }
        );
    }
}
