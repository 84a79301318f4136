//! Denials found while and after the engine runs, as records the runner
//! turns into `policy` events. The hook (both engines) appends one JSON line
//! per denial to the job's record file, followed by [`RecordTail`]. What the
//! engine itself reports (its stream, or files it leaves, read by its
//! adapter as [`EngineDenial`]s) becomes a record through [`from_engine`],
//! the rule found by the profile's matcher; records share the call id, so a
//! call is counted once.

use std::collections::HashSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::matcher::Matcher;
use crate::engines::denial::{DeniedBy, EngineDenial};

#[derive(Debug, thiserror::Error)]
pub enum DenialsError {
    #[error("cannot append to the denial record {path}: {source}")]
    Append {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// One denied tool call.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
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

/// Up to [`MAX_RECORD_READ`] bytes of the record file from `offset`.
fn read_from(path: &Path, offset: u64) -> Vec<u8> {
    crate::own_file::read_from(path, offset, MAX_RECORD_READ)
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
/// becomes an event right after the engine reports the call. What it has
/// seen is kept in hash sets: the records and what the engine reports are
/// the job's (one line of Claude Code's stream can list 50,000 denials),
/// and a list compared against each new record made one such line cost
/// Paddock tens of seconds of CPU (`tests/it/denial_attacks.rs`).
#[derive(Debug)]
pub struct RecordTail {
    path: PathBuf,
    offset: u64,
    seen: HashSet<DenialRecord>,
    /// The call ids of the records seen.
    seen_ids: HashSet<String>,
}

impl RecordTail {
    pub fn new(path: PathBuf) -> RecordTail {
        RecordTail {
            path,
            offset: 0,
            seen: HashSet::new(),
            seen_ids: HashSet::new(),
        }
    }

    /// Marks `record` as seen.
    fn see(&mut self, record: &DenialRecord) {
        if let Some(id) = &record.call_id {
            self.seen_ids.insert(id.clone());
        }
        self.seen.insert(record.clone());
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
        for r in &new {
            self.see(r);
        }
        new
    }

    /// Records of `others` not yet seen (same call id), marked as seen.
    pub fn unseen(&mut self, others: Vec<DenialRecord>) -> Vec<DenialRecord> {
        let mut out = Vec::new();
        for r in others {
            let dup = self.seen.contains(&r)
                || r.call_id
                    .as_ref()
                    .is_some_and(|id| self.seen_ids.contains(id));
            if !dup {
                self.see(&r);
                out.push(r);
            }
        }
        out
    }
}

/// The record of a denial the engine reported under the profile: the
/// first of the profile's rules whose words the command holds one after
/// another ([`rule_in_words`]), else the one the engine named. `None` for
/// a refusal the engine made on its own.
///
/// The command is the job's text, and this runs in Paddock's process:
/// the profile's matcher (a shell parser, `matcher.rs`) is never run on
/// it here. The parser recurses once per nesting level (a command of 1
/// KiB of nested `{ { …` overflowed a 2 MiB thread stack, aborting
/// Paddock) and backtracks exponentially on nested `case` (400
/// characters took 10 s, 500 more than 2 minutes); the hook runs it in
/// the job's own process, where that is the job's concern.
pub fn from_engine(denial: EngineDenial, matcher: &Matcher) -> Option<DenialRecord> {
    let DeniedBy::Profile { rule } = denial.by else {
        return None;
    };
    Some(DenialRecord {
        rule: rule_in_words(&denial.command, matcher)
            .or(rule)
            .unwrap_or_default(),
        command: denial.command,
        call_id: denial.call_id,
    })
}

/// The most of a command [`rule_in_words`] looks at, in bytes.
const MAX_WORDS_BYTES: usize = 16 * 1024;

/// The first rule of `matcher` whose words stand one after another among
/// the command's words (its first word by base name, as the matcher
/// compares a program), the command split at blanks and shell operators
/// with its quotes and backslashes taken off: `ls && curl x` names the
/// rule `curl`, `c=curl; $c x` names none. Linear in the command's
/// length (its first [`MAX_WORDS_BYTES`] looked at): no parser.
fn rule_in_words(command: &str, matcher: &Matcher) -> Option<String> {
    let mut end = command.len().min(MAX_WORDS_BYTES);
    while !command.is_char_boundary(end) {
        end -= 1;
    }
    let words: Vec<String> = command[..end]
        .split(|c: char| c.is_whitespace() || ";&|(){}<>`".contains(c))
        .map(|w| {
            w.chars()
                .filter(|c| !"'\"\\".contains(*c))
                .collect::<String>()
        })
        .filter(|w| !w.is_empty())
        .collect();
    matcher
        .rules()
        .iter()
        .find(|rule| {
            let want = rule.words();
            let Some((program, args)) = want.split_first() else {
                return false;
            };
            words.windows(want.len()).any(|seen| {
                seen.split_first().is_some_and(|(first, rest)| {
                    let base = first.rsplit('/').next().unwrap_or(first);
                    base == program.as_str() && rest == args
                })
            })
        })
        .map(|rule| rule.text.clone())
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
    fn engine_denials_take_the_matchers_rule_first() {
        let matcher = Matcher::new(&["curl".to_string()]);
        let denial = |command: &str, by: DeniedBy| EngineDenial {
            command: command.into(),
            call_id: Some("c".into()),
            by,
        };
        let named = |rule: &str| DeniedBy::Profile {
            rule: Some(rule.into()),
        };
        let rec = |rule: &str, command: &str| DenialRecord {
            rule: rule.into(),
            command: command.into(),
            call_id: Some("c".into()),
        };
        assert_eq!(
            from_engine(denial("ls && curl x", named("deny_commands")), &matcher),
            Some(rec("curl", "ls && curl x"))
        );
        assert_eq!(
            from_engine(denial("c=curl; $c x", named("deny_commands")), &matcher),
            Some(rec("deny_commands", "c=curl; $c x"))
        );
        assert_eq!(
            from_engine(denial("x", DeniedBy::Profile { rule: None }), &matcher),
            Some(rec("", "x"))
        );
        assert_eq!(
            from_engine(
                denial(
                    "rm -f a",
                    DeniedBy::Engine {
                        reason: "no".into()
                    }
                ),
                &matcher
            ),
            None
        );
    }

    /// 50,000 denials one line of Claude Code's stream can list, each a
    /// call of its own, none seen before: all new, in well under a second.
    /// Before, each was compared with every record seen (a list), 1.25
    /// billion comparisons: 34 s of Paddock's CPU for this one line in a
    /// debug build (`tests/it/denial_attacks.rs` runs it through a job).
    #[test]
    fn many_denials_at_once_are_told_apart_in_linear_time() {
        let dir = tempfile::tempdir().unwrap();
        let mut tail = RecordTail::new(dir.path().join("denials.jsonl"));
        let reported = |n: usize| -> Vec<DenialRecord> {
            (0..n)
                .map(|i| DenialRecord {
                    rule: "deny_commands".into(),
                    command: format!("c{i}"),
                    call_id: Some(format!("t{i}")),
                })
                .collect()
        };
        let started = std::time::Instant::now();
        let new = tail.unseen(reported(50_000)).len();
        let again = tail.unseen(reported(50_000)).len();
        let took = started.elapsed();
        assert_eq!(
            (new, again, took < std::time::Duration::from_secs(5)),
            (50_000, 0, true),
            "{took:?}"
        );
    }

    /// Commands the shell parser could not take in Paddock's process: 1
    /// KiB of nested braces (a stack overflow on a 2 MiB thread stack, as
    /// a runtime worker's, before: the process aborted) and 600
    /// characters of nested `case` (exponential: minutes, before). Each
    /// is named by the engine's rule at once, on a 2 MiB stack; a rule
    /// among plain words is still found.
    #[test]
    fn a_denied_command_is_never_parsed_in_paddocks_process() {
        let matcher = Matcher::new(&["curl".to_string()]);
        let nested = |open: &str, close: &str, levels: usize| {
            format!("{}true;{}", open.repeat(levels), close.repeat(levels))
        };
        let commands = [
            nested("{ ", "} ", 256),
            nested("case a in a) ", "esac; ", 32),
            format!("{} curl x", "ls &&".repeat(1000)),
        ];
        let worker = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                let started = std::time::Instant::now();
                let rules: Vec<String> = commands
                    .into_iter()
                    .map(|command| {
                        from_engine(
                            EngineDenial {
                                command,
                                call_id: None,
                                by: DeniedBy::Profile {
                                    rule: Some("deny_commands".into()),
                                },
                            },
                            &matcher,
                        )
                        .unwrap()
                        .rule
                    })
                    .collect();
                (rules, started.elapsed() < std::time::Duration::from_secs(5))
            })
            .unwrap();
        assert_eq!(
            worker.join().unwrap(),
            (
                vec![
                    "deny_commands".to_string(),
                    "deny_commands".to_string(),
                    "curl".to_string()
                ],
                true
            )
        );
    }
}
