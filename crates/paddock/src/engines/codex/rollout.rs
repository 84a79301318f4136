//! The calls Codex refused, read from its rollout files
//! (`$CODEX_HOME/sessions/**/rollout-*.jsonl`) once it has exited: its
//! `--json` stream shows nothing for a refused call (codex-cli 0.171.0),
//! the rollout keeps the call (`function_call`) and the refusal
//! (`function_call_output`, same `call_id`). A refusal is read only in the
//! exact forms Codex writes one (`refused_by`): `exec_command failed:
//! CreateProcess { message: "Rejected(… rejected: REASON)" }` and `Command
//! blocked by PreToolUse hook: REASON`, the host profile's when REASON
//! starts with [`JUSTIFICATION_MARK`] (its execpolicy rules, the hook),
//! else, in the first form, Codex's own (its safety check of `rm -f`
//! forms, for one). A command that ran and printed the mark is no
//! refusal. The files are written by the job (it can write a rollout
//! file of any text): what they report is the engine's report, never
//! Paddock's own seeing, and its events say so
//! (`denial::ReportedIn::Files`). The walk
//! starts from `$CODEX_HOME` opened without following a link (itself, or
//! `sessions`, a link to a host directory, is not read: another job's
//! saved rollouts would become this job's denial events), goes through
//! descriptors only (`workspace::beneath`), and each file is read only
//! when it is a regular file, bounded; the walk is bounded too. What is
//! read is bounded as well: all files together at most
//! [`MAX_TOTAL_BYTES`], a line longer than [`MAX_LINE_BYTES`] skipped
//! unparsed, each command kept to
//! [`MAX_COMMAND_CHARS`](crate::engines::denial::MAX_COMMAND_CHARS) characters, and
//! the first [`MAX_FOUND_AFTER`] refusals taken, the rest only counted: a
//! job wrote one shell call of a megabyte and 8,000 refusals of it, and
//! Paddock held a copy of the command for each, 8 GiB, in its own memory
//! (`tests/it/denial_attacks.rs`).

use std::collections::HashMap;
use std::io::Read as _;
use std::os::fd::{AsFd as _, OwnedFd};
use std::path::Path;

use rustix::fs::{FileType, OFlags};
use serde_json::Value;

use crate::engines::denial::{
    kept, rule_in, DeniedBy, EngineDenial, FoundAfter, JUSTIFICATION_MARK, MAX_FOUND_AFTER,
};
use crate::workspace::beneath;

/// The most read of one rollout file.
const MAX_ROLLOUT_BYTES: u64 = 64 << 20;
/// The most read of all rollout files together.
const MAX_TOTAL_BYTES: u64 = 128 << 20;
/// The longest rollout line parsed: a longer one is skipped whole (a
/// line parsed as a JSON value can take many times its length in
/// memory). A refusal's lines are short; a call whose line is longer is
/// named by no command.
const MAX_LINE_BYTES: usize = 1 << 20;
/// The most rollout files read, and how deep the walk goes
/// (`sessions/YYYY/MM/DD/rollout-….jsonl` is four levels).
const MAX_FILES: usize = 64;
const MAX_DEPTH: usize = 6;
/// The most directory entries the walk looks at, all levels together (a
/// job may fill `sessions` with millions of names).
const MAX_ENTRIES: usize = 10_000;
/// The most of Codex's reason kept in an event.
const MAX_REASON_CHARS: usize = 500;

/// The refused calls recorded under `codex_home` (itself and everything
/// under it taken through no link), in file order: the first
/// [`MAX_FOUND_AFTER`], and how many more.
pub fn refused_calls(codex_home: &Path) -> FoundAfter {
    let mut found = FoundAfter::default();
    let Ok(home) = beneath::open_root(codex_home) else {
        return found;
    };
    let Ok(sessions) = beneath::open_beneath(home.as_fd(), b"sessions", DIR) else {
        return found;
    };
    let mut files = Vec::new();
    let mut entries_left = MAX_ENTRIES;
    collect_jsonl(&sessions, Vec::new(), 0, (&mut files, &mut entries_left));
    files.sort();
    let mut bytes_left = MAX_TOTAL_BYTES;
    for rel in &files {
        if bytes_left == 0 {
            break;
        }
        let bytes = read_regular(&sessions, rel, bytes_left.min(MAX_ROLLOUT_BYTES));
        bytes_left = bytes_left.saturating_sub(bytes.len() as u64);
        in_rollout(&String::from_utf8_lossy(&bytes), &mut found);
    }
    found
}

/// How a directory of the walk is opened (with `O_NOFOLLOW`, by
/// `beneath`).
const DIR: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NONBLOCK);

/// Up to `max` bytes of the regular file `rel` beneath `dir`, through no
/// link; nothing when it is not a regular file (a FIFO put in its place
/// is opened without blocking and not read) or unreadable.
fn read_regular(dir: &OwnedFd, rel: &[u8], max: u64) -> Vec<u8> {
    let Ok(fd) = beneath::open_beneath(dir.as_fd(), rel, OFlags::RDONLY | OFlags::NONBLOCK) else {
        return Vec::new();
    };
    match rustix::fs::fstat(&fd) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile => {}
        _ => return Vec::new(),
    }
    let mut out = Vec::new();
    if std::fs::File::from(fd)
        .take(max)
        .read_to_end(&mut out)
        .is_err()
    {
        return Vec::new();
    }
    out
}

/// The refused calls of one rollout file's text, added to `found` (past
/// [`MAX_FOUND_AFTER`] only counted).
pub fn in_rollout(text: &str, found: &mut FoundAfter) {
    let mut commands: HashMap<String, String> = HashMap::new();
    for line in text.lines() {
        if line.len() > MAX_LINE_BYTES {
            continue;
        }
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let Some(item) = v.get("payload") else {
            continue;
        };
        let call_id = item.get("call_id").and_then(Value::as_str);
        match (item.get("type").and_then(Value::as_str), call_id) {
            (Some("function_call"), Some(id)) => {
                commands.insert(id.to_string(), kept(&call_command(item)));
            }
            (Some("function_call_output"), Some(id)) => {
                let Some(by) = refused_by(&output_text(item)) else {
                    continue;
                };
                if found.denials.len() >= MAX_FOUND_AFTER {
                    found.more = found.more.saturating_add(1);
                    continue;
                }
                found.denials.push(EngineDenial {
                    command: commands.get(id).cloned().unwrap_or_default(),
                    call_id: Some(kept(id)),
                    by,
                });
            }
            _ => {}
        }
    }
}

/// How the hook's refusal starts a call's output: Codex's words, then
/// the hook's reason, which starts with [`JUSTIFICATION_MARK`].
const HOOK_BLOCKED: &str = "Command blocked by PreToolUse hook: ";

/// Who refused the call whose output is `output`, in the exact forms
/// Codex writes a refusal (codex-cli 0.171.0): its execpolicy's (the
/// rules Paddock wrote: `exec_command failed: CreateProcess { message:
/// "Rejected(…rejected: REASON)" }`, the process never created) or the
/// hook's (`Command blocked by PreToolUse hook: REASON`), each the host
/// profile's when REASON starts with [`JUSTIFICATION_MARK`] and else, for
/// the execpolicy's form, Codex's own. Anything else is no refusal: the
/// output of a command that ran (`Chunk ID: …` or `Exit code: …`, then
/// what it printed) that prints the mark and a profile's reason is not
/// the profile's denial. `None` for it.
fn refused_by(output: &str) -> Option<DeniedBy> {
    let profile = |reason: &str| DeniedBy::Profile {
        rule: rule_in(reason).map(|r| kept(&r)),
    };
    if let Some(reason) = output.strip_prefix(HOOK_BLOCKED) {
        return reason
            .starts_with(JUSTIFICATION_MARK)
            .then(|| profile(reason));
    }
    let reason = own_refusal(output)?;
    // The rule from the reason alone: the command before it is the job's.
    Some(match reason.starts_with(JUSTIFICATION_MARK) {
        true => profile(&reason),
        false => DeniedBy::Engine { reason },
    })
}

/// Codex's reason for a call it refused on its own: the output of a call
/// whose process was never created because Codex rejected it.
fn own_refusal(output: &str) -> Option<String> {
    let rest = output.strip_prefix("exec_command failed: CreateProcess { message: ")?;
    let start = rest.find("Rejected(")?;
    let rejected = &rest[start + "Rejected(".len()..];
    // "`/bin/bash -lc '…'` rejected: REASON\")\" }" (escaped once more).
    let reason = match rejected.find(" rejected: ") {
        Some(i) => &rejected[i + " rejected: ".len()..],
        None => rejected,
    };
    let reason = reason
        .trim_end_matches(" }")
        .trim_end_matches('"')
        .trim_end_matches(')')
        .trim_end_matches('"')
        .trim_end_matches('\\');
    Some(reason.chars().take(MAX_REASON_CHARS).collect())
}

/// The `.jsonl` files below `dir` (`rel` beneath the walk's start), by
/// their paths from there: directories and regular files by their own
/// type (a link is neither followed nor read), at most [`MAX_DEPTH`]
/// levels, [`MAX_FILES`] files and `entries_left` entries looked at.
fn collect_jsonl(
    dir: &OwnedFd,
    rel: Vec<u8>,
    depth: usize,
    (out, entries_left): (&mut Vec<Vec<u8>>, &mut usize),
) {
    if depth > MAX_DEPTH || out.len() >= MAX_FILES {
        return;
    }
    let Ok(Some(entries)) = beneath::entries_at_most(dir, *entries_left) else {
        return;
    };
    *entries_left -= entries.len();
    for e in entries {
        let path = if rel.is_empty() {
            e.name.clone()
        } else {
            [rel.as_slice(), b"/", e.name.as_slice()].concat()
        };
        match e.file_type {
            FileType::Directory => {
                if let Ok(sub) = beneath::open_beneath(dir.as_fd(), &e.name, DIR) {
                    collect_jsonl(&sub, path, depth + 1, (&mut *out, &mut *entries_left));
                }
            }
            FileType::RegularFile if e.name.len() > 6 && e.name.ends_with(b".jsonl") => {
                if out.len() >= MAX_FILES {
                    return;
                }
                out.push(path);
            }
            _ => {}
        }
    }
}

/// The command of a shell function call (`exec_command {cmd}`,
/// `shell_command {command}`, `shell {command: [argv]}`).
fn call_command(item: &Value) -> String {
    let args: Value = item
        .get("arguments")
        .and_then(Value::as_str)
        .and_then(|a| serde_json::from_str(a).ok())
        .unwrap_or(Value::Null);
    match args.get("cmd").or_else(|| args.get("command")) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(argv)) => {
            let words: Vec<&str> = argv.iter().filter_map(Value::as_str).collect();
            shlex::try_join(words.iter().copied()).unwrap_or_else(|_| words.join(" "))
        }
        _ => String::new(),
    }
}

fn output_text(item: &Value) -> String {
    match item.get("output") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/rollouts")
                .join(name),
        )
        .unwrap()
    }

    /// A real codex-cli 0.171.0 rollout (see the fixtures' README): its
    /// own refusal of `rm -f` and the profile hook's denial.
    /// The refusals of one rollout's text.
    fn refusals(text: &str) -> Vec<EngineDenial> {
        let mut found = FoundAfter::default();
        in_rollout(text, &mut found);
        assert_eq!(found.more, 0);
        found.denials
    }

    #[test]
    fn codex_own_refusal_and_the_hooks_denial() {
        assert_eq!(
            refusals(&fixture("codex-0.171.0-refused.jsonl")),
            vec![
                EngineDenial {
                    command: "rm -f junk.txt".into(),
                    call_id: Some("call_paddock_1_1".into()),
                    by: DeniedBy::Engine {
                        reason: "rm -f style commands are not permitted. Use a safer approach"
                            .into()
                    },
                },
                EngineDenial {
                    command: "touch /paddock/marks/denied".into(),
                    call_id: Some("call_paddock_2_1".into()),
                    by: DeniedBy::Profile {
                        rule: Some("touch /paddock/marks/denied".into())
                    },
                },
            ]
        );
    }

    /// The rollout files are the job's: a link (to a file or a directory)
    /// is not followed, and a FIFO is not read (it would block).
    #[test]
    fn links_and_fifos_under_sessions_are_not_read() {
        let home = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let real = outside.path().join("rollout-1.jsonl");
        std::fs::write(&real, fixture("codex-0.171.0-refused.jsonl")).unwrap();
        let day = home.path().join("sessions/2026/11/30");
        std::fs::create_dir_all(&day).unwrap();
        std::os::unix::fs::symlink(&real, day.join("rollout-2.jsonl")).unwrap();
        std::os::unix::fs::symlink(outside.path(), day.join("linked")).unwrap();
        nix::unistd::mkfifo(&day.join("rollout-3.jsonl"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert_eq!(refused_calls(home.path()), FoundAfter::default());
        std::fs::copy(&real, day.join("rollout-4.jsonl")).unwrap();
        assert_eq!(refused_calls(home.path()).denials.len(), 2);
    }

    /// `sessions` itself, or `$CODEX_HOME`, a link to a host directory
    /// holding rollouts (another job's saved session): nothing is read
    /// through it. Before, the walk started by following both.
    #[test]
    fn a_linked_sessions_directory_or_codex_home_is_not_read() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        let day = outside.join("sessions/2026/11/30");
        std::fs::create_dir_all(&day).unwrap();
        std::fs::write(
            day.join("rollout-1.jsonl"),
            fixture("codex-0.171.0-refused.jsonl"),
        )
        .unwrap();
        let linked_sessions = tmp.path().join("a");
        std::fs::create_dir_all(&linked_sessions).unwrap();
        std::os::unix::fs::symlink(outside.join("sessions"), linked_sessions.join("sessions"))
            .unwrap();
        let linked_home = tmp.path().join("b");
        std::os::unix::fs::symlink(&outside, &linked_home).unwrap();
        assert_eq!(
            (
                refused_calls(&linked_sessions),
                refused_calls(&linked_home),
                refused_calls(&outside).denials.len()
            ),
            (FoundAfter::default(), FoundAfter::default(), 2)
        );
    }

    /// One shell call of 100,000 characters refused 1,000 times, then a
    /// line past [`MAX_LINE_BYTES`]: the first [`MAX_FOUND_AFTER`]
    /// refusals are taken, each with the command cut to
    /// [`MAX_COMMAND_CHARS`] characters (its length said), the rest
    /// counted, the long line not parsed. Before, each of the 1,000 held
    /// its own copy of the whole command.
    #[test]
    fn refusals_past_the_bound_are_counted_and_commands_cut() {
        use crate::engines::denial::MAX_COMMAND_CHARS;
        let long = "a".repeat(100_000);
        let mut text = format!(
            "{{\"payload\":{{\"type\":\"function_call\",\"arguments\":\"{{\\\"cmd\\\":\\\"{long}\\\"}}\",\"call_id\":\"c\"}}}}\n"
        );
        for i in 0..1_000 {
            text.push_str(&format!(
                "{{\"payload\":{{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":\"exec_command failed: CreateProcess {{ message: Rejected({i} rejected: no) }}\"}}}}\n"
            ));
        }
        let huge = format!(
            "{{\"payload\":{{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":\"exec_command failed: CreateProcess {{ message: Rejected(x rejected: no) }}{}\"}}}}\n",
            " ".repeat(MAX_LINE_BYTES)
        );
        text.push_str(&huge);
        let mut found = FoundAfter::default();
        in_rollout(&text, &mut found);
        let want = format!("{}… (100000 characters)", &long[..MAX_COMMAND_CHARS]);
        assert_eq!(
            (
                found.denials.len(),
                found.more,
                found.denials.iter().all(|d| d.command == want)
            ),
            (MAX_FOUND_AFTER, 1_000 - MAX_FOUND_AFTER as u64, true)
        );
    }

    /// A command that ran and printed the hook's reason (the mark, a
    /// profile, a rule) is no denial, in a rollout line as Codex writes a
    /// call's output (`Chunk ID: …`, then what it printed) or with the
    /// reason anywhere else in it; the two forms Codex writes a refusal in
    /// are read, the mark only at their reason's start.
    #[test]
    fn a_commands_printed_mark_is_no_denial() {
        let output = |call: &str, text: &str| {
            serde_json::json!({"payload": {"type": "function_call_output", "call_id": call, "output": text}})
                .to_string()
        };
        let call = |id: &str| {
            let arguments = serde_json::json!({"cmd": format!("echo {id}")}).to_string();
            serde_json::json!({"payload": {"type": "function_call", "arguments": arguments, "call_id": id}})
                .to_string()
        };
        let reason = "paddock policy: host profile `p` denies `curl` on this host";
        let text = [
            call("c1"),
            output(
                "c1",
                &format!("Chunk ID: 1\nWall time: 0.0 seconds\nProcess exited with code 0\nOutput:\n{reason}\n"),
            ),
            call("c2"),
            output("c2", &format!("Exit code: 0\nOutput:\nCommand blocked by PreToolUse hook: {reason}")),
            call("c3"),
            output("c3", &format!("exec_command failed: CreateProcess {{ message: \"Rejected(\\\"x\\\" rejected: no) {reason}\" }}")),
            call("c4"),
            output("c4", &format!("Command blocked by PreToolUse hook: {reason}. Command: echo c4")),
            call("c5"),
            output("c5", "Command blocked by PreToolUse hook: not paddock's"),
            // The execpolicy's form: the rule is the reason's, never one
            // the command before it names.
            call("c6"),
            output("c6", &format!("exec_command failed: CreateProcess {{ message: \"Rejected(\\\"echo denies `ls` on this host\\\" rejected: {reason})\" }}")),
        ]
        .join("\n");
        assert_eq!(
            refusals(&text),
            vec![
                EngineDenial {
                    command: "echo c3".into(),
                    call_id: Some("c3".into()),
                    by: DeniedBy::Engine {
                        reason: format!("no) {reason}")
                    },
                },
                EngineDenial {
                    command: "echo c4".into(),
                    call_id: Some("c4".into()),
                    by: DeniedBy::Profile {
                        rule: Some("curl".into())
                    },
                },
                EngineDenial {
                    command: "echo c6".into(),
                    call_id: Some("c6".into()),
                    by: DeniedBy::Profile {
                        rule: Some("curl".into())
                    },
                },
            ]
        );
    }
}
