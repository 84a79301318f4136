//! Denials found while and after the engine runs, as records the runner
//! turns into `policy` events. The hook (both engines) appends one JSON line
//! per denial to the job's record file, followed by [`RecordTail`]. Claude
//! Code's own permission rules deny without the hook: its stream shows such
//! a call as a tool result "Permission to use Bash with command … has been
//! denied." and lists every denial, the hook's too, in the `result` event's
//! `permission_denials` ([`claude_line`]); records share the tool-use id, so
//! a call is counted once. Codex shows nothing in its `--json`
//! stream for a forbidden call, so its rollout files
//! (`$CODEX_HOME/sessions/**/rollout-*.jsonl`) are read: a
//! `function_call_output` carrying [`JUSTIFICATION_MARK`] is a denial, and its
//! `function_call` (same `call_id`) gives the command.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::engine_files::JUSTIFICATION_MARK;
use super::matcher::Matcher;

#[derive(Debug, thiserror::Error)]
pub enum DenialsError {
    #[error("cannot append to the denial record {path}: {source}")]
    Append {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// One denied tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DenialRecord {
    /// The profile rule (a `deny_commands` entry).
    pub rule: String,
    /// The command line the agent tried.
    pub command: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
}

/// Appends one record (one line, one `write`: safe for concurrent hooks).
pub fn append(path: &Path, record: &DenialRecord) -> Result<(), DenialsError> {
    let err = |source| DenialsError::Append {
        path: path.to_path_buf(),
        source,
    };
    let mut line = serde_json::to_string(record).map_err(|e| err(e.into()))?;
    line.push('\n');
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .map_err(err)
}

/// The most of a record file read at once. The file is writable from
/// inside the job (the hook appends to it), so it is hostile input: it is
/// never followed through a link and never read past this bound per read.
const MAX_RECORD_READ: u64 = 4 << 20;

/// Up to [`MAX_RECORD_READ`] bytes of the record file from `offset`: the
/// file opened without following a link and only when it is a regular
/// file (a FIFO or device put in its place reads as nothing).
fn read_from(path: &Path, offset: u64) -> Vec<u8> {
    use std::io::{Read as _, Seek as _};
    use std::os::unix::fs::OpenOptionsExt as _;
    let Ok(mut file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
    else {
        return Vec::new();
    };
    match file.metadata() {
        Ok(m) if m.is_file() && m.len() > offset => {}
        _ => return Vec::new(),
    }
    let mut out = Vec::new();
    if file.seek(std::io::SeekFrom::Start(offset)).is_err()
        || file.take(MAX_RECORD_READ).read_to_end(&mut out).is_err()
    {
        return Vec::new();
    }
    out
}

fn records(bytes: &[u8]) -> Vec<DenialRecord> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The records in `path` (a missing file has none; a garbled line is skipped).
pub fn read(path: &Path) -> Vec<DenialRecord> {
    records(&read_from(path, 0))
}

/// Follows a record file while the engine runs, so that each denial
/// becomes an event right after the engine reports the call.
#[derive(Debug)]
pub struct RecordTail {
    path: PathBuf,
    offset: u64,
    seen: Vec<DenialRecord>,
}

impl RecordTail {
    pub fn new(path: PathBuf) -> RecordTail {
        RecordTail {
            path,
            offset: 0,
            seen: Vec::new(),
        }
    }

    /// Complete records appended since the last poll.
    pub fn poll(&mut self) -> Vec<DenialRecord> {
        // Only the bytes appended since the last poll, and only whole
        // lines: a hook may be writing the next one.
        let rest = read_from(&self.path, self.offset);
        let complete = match rest.iter().rposition(|&b| b == b'\n') {
            Some(i) => i + 1,
            // A line longer than one read is garbage: skip it whole.
            None if rest.len() as u64 >= MAX_RECORD_READ => rest.len(),
            None => 0,
        };
        self.offset += complete as u64;
        let new = records(&rest[..complete]);
        self.seen.extend(new.iter().cloned());
        new
    }

    /// Records of `others` not yet seen (same call id), marked as seen.
    pub fn unseen(&mut self, others: Vec<DenialRecord>) -> Vec<DenialRecord> {
        let mut out = Vec::new();
        for r in others {
            let dup = self
                .seen
                .iter()
                .any(|s| s == &r || (r.call_id.is_some() && s.call_id == r.call_id));
            if !dup {
                self.seen.push(r.clone());
                out.push(r);
            }
        }
        out
    }
}

/// The rule of a denial made by Claude Code's permission rules whose
/// command Paddock's matcher does not see (Paddock sets only `Bash(RULE:*)`
/// rules, so this is a `deny_commands` denial all the same).
pub const CLAUDE_PERMISSION_RULE: &str = "deny_commands";

/// The denials one line of Claude Code's stream-json reports: a tool
/// result carrying Claude's own denial text (as it happens), and the
/// `result` event's `permission_denials` (all of them, at the end).
pub fn claude_line(line: &str, matcher: &Matcher) -> Vec<DenialRecord> {
    let Ok(v) = serde_json::from_str::<Value>(line) else {
        return Vec::new();
    };
    let record = |tool: &str, command: String, id: Option<&str>| {
        let rule = matcher.check(&command).map(|d| d.rule);
        DenialRecord {
            rule: rule.unwrap_or_else(|| match tool {
                "Bash" => CLAUDE_PERMISSION_RULE.to_string(),
                other => format!("permissions ({other})"),
            }),
            command,
            call_id: id.map(str::to_string),
        }
    };
    match v.get("type").and_then(Value::as_str) {
        Some("result") => v
            .get("permission_denials")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|d| {
                let tool = d.get("tool_name").and_then(Value::as_str).unwrap_or("");
                let input = d.get("tool_input").unwrap_or(&Value::Null);
                let command = match input.get("command").and_then(Value::as_str) {
                    Some(c) => c.to_string(),
                    None => input.to_string(),
                };
                record(tool, command, d.get("tool_use_id").and_then(Value::as_str))
            })
            .collect(),
        Some("user") => v
            .pointer("/message/content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
            .filter(|b| b.get("is_error").and_then(Value::as_bool) == Some(true))
            .filter_map(|b| {
                let text = match b.get("content") {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Array(parts)) => parts
                        .iter()
                        .filter_map(|p| p.get("text").and_then(Value::as_str))
                        .collect::<Vec<_>>()
                        .join(""),
                    _ => return None,
                };
                let (tool, command) = claude_denial_text(&text)?;
                Some(record(
                    &tool,
                    command,
                    b.get("tool_use_id").and_then(Value::as_str),
                ))
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Claude Code's own denial: "Permission to use TOOL with command COMMAND
/// has been denied." (or without "with command").
fn claude_denial_text(text: &str) -> Option<(String, String)> {
    let rest = text.strip_prefix("Permission to use ")?;
    let rest = rest.strip_suffix(" has been denied.")?;
    Some(match rest.split_once(" with command ") {
        Some((tool, command)) => (tool.to_string(), command.to_string()),
        None => (rest.to_string(), String::new()),
    })
}

/// The forbidden calls recorded in Codex's rollout files under `codex_home`.
pub fn codex_rollouts(codex_home: &Path, matcher: &Matcher) -> Vec<DenialRecord> {
    let mut files = Vec::new();
    collect_jsonl(&codex_home.join("sessions"), &mut files);
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let mut commands: HashMap<String, String> = HashMap::new();
        for line in text.lines() {
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let Some(item) = v.get("payload") else {
                continue;
            };
            let call_id = item.get("call_id").and_then(Value::as_str);
            match (item.get("type").and_then(Value::as_str), call_id) {
                (Some("function_call"), Some(id)) => {
                    commands.insert(id.to_string(), call_command(item));
                }
                (Some("function_call_output"), Some(id)) => {
                    let output = output_text(item);
                    if !output.contains(JUSTIFICATION_MARK) {
                        continue;
                    }
                    let command = commands.get(id).cloned().unwrap_or_default();
                    let rule = matcher
                        .check(&command)
                        .map(|d| d.rule)
                        .or_else(|| rule_in(&output))
                        .unwrap_or_default();
                    out.push(DenialRecord {
                        rule,
                        command,
                        call_id: Some(id.to_string()),
                    });
                }
                _ => {}
            }
        }
    }
    out
}

fn collect_jsonl(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_jsonl(&p, out);
        } else if p.extension().is_some_and(|x| x == "jsonl") {
            out.push(p);
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

/// The rule named in a Paddock justification: "... denies `RULE` on this host".
fn rule_in(text: &str) -> Option<String> {
    let start = text.find("denies `")? + "denies `".len();
    let end = text[start..].find("` on this host")? + start;
    Some(text[start..end].to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The record file is written from inside the job: a link put in its
    /// place is not followed, and a line longer than one read is skipped
    /// whole without stopping the records after it.
    #[test]
    fn a_hostile_record_file_is_bounded_and_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("denials.jsonl");
        let a = DenialRecord {
            rule: "curl".into(),
            command: "curl x".into(),
            call_id: Some("call_1".into()),
        };
        let target = dir.path().join("elsewhere.jsonl");
        append(&target, &a).unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        assert_eq!(read(&path), vec![]);
        assert_eq!(RecordTail::new(path.clone()).poll(), vec![]);

        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, vec![b'x'; (MAX_RECORD_READ + 10) as usize]).unwrap();
        let mut tail = RecordTail::new(path.clone());
        assert_eq!(tail.poll(), vec![]);
        // The rest of the garbage line, its newline, then a real record.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut f, b"\n").unwrap();
        append(&path, &a).unwrap();
        assert_eq!(tail.poll(), vec![a]);
    }

    #[test]
    fn records_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("denials.jsonl");
        assert_eq!(read(&path), vec![]);
        let a = DenialRecord {
            rule: "make all".into(),
            command: "cd x && make all".into(),
            call_id: Some("toolu_1".into()),
        };
        append(&path, &a).unwrap();
        append(&path, &a).unwrap();
        assert_eq!(read(&path), vec![a.clone(), a]);
    }

    #[test]
    fn tail_returns_whole_new_lines_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("denials.jsonl");
        let mut tail = RecordTail::new(path.clone());
        assert_eq!(tail.poll(), vec![]);
        let rec = |id: &str| DenialRecord {
            rule: "make all".into(),
            command: "make all".into(),
            call_id: Some(id.into()),
        };
        append(&path, &rec("a")).unwrap();
        assert_eq!(tail.poll(), vec![rec("a")]);
        assert_eq!(tail.poll(), vec![]);
        // A half-written line waits for its end.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(b"{\"rule\":"))
            .unwrap();
        assert_eq!(tail.poll(), vec![]);
        assert_eq!(tail.unseen(vec![rec("a"), rec("b")]), vec![rec("b")]);
        assert_eq!(tail.unseen(vec![rec("b")]), vec![]);
    }

    #[test]
    fn claude_denials_from_tool_results_and_the_result_event() {
        let matcher = Matcher::new(&["curl".to_string()]);
        let denied = r#"{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_2","type":"tool_result","content":"Permission to use Bash with command ls && curl x has been denied.","is_error":true}]},"tool_use_result":"Error: Permission to use Bash with command ls && curl x has been denied."}"#;
        let rec = |rule: &str, cmd: &str, id: &str| DenialRecord {
            rule: rule.into(),
            command: cmd.into(),
            call_id: Some(id.into()),
        };
        assert_eq!(
            claude_line(denied, &matcher),
            vec![rec("curl", "ls && curl x", "toolu_2")]
        );
        // A failed command is no denial; nor is the hook's reason (the
        // hook recorded it already).
        let failed = r#"{"type":"user","message":{"content":[{"tool_use_id":"toolu_3","type":"tool_result","content":"Exit code 1","is_error":true}]}}"#;
        let hooked = r#"{"type":"user","message":{"content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"paddock policy: host profile `p` denies `curl` on this host","is_error":true}]}}"#;
        assert_eq!(claude_line(failed, &matcher), vec![]);
        assert_eq!(claude_line(hooked, &matcher), vec![]);
        let result = r#"{"type":"result","subtype":"success","permission_denials":[{"tool_name":"Bash","tool_use_id":"toolu_1","tool_input":{"command":"curl x","description":"d"}},{"tool_name":"Bash","tool_use_id":"toolu_4","tool_input":{"command":"c=curl; $c x"}},{"tool_name":"WebFetch","tool_use_id":"toolu_5","tool_input":{"url":"http://x"}}]}"#;
        assert_eq!(
            claude_line(result, &matcher),
            vec![
                rec("curl", "curl x", "toolu_1"),
                rec("deny_commands", "c=curl; $c x", "toolu_4"),
                rec(
                    "permissions (WebFetch)",
                    "{\"url\":\"http://x\"}",
                    "toolu_5"
                ),
            ]
        );
        assert_eq!(claude_line("not json", &matcher), vec![]);
    }

    #[test]
    fn rule_from_justification() {
        assert_eq!(
            rule_in("paddock policy: host profile `x` denies `make all` on this host"),
            Some("make all".into())
        );
    }
}
