//! The one line an event shows as in the live views: `paddock run`'s
//! progress, `paddock events`, and the dashboard's job page (server/
//! dashboard), so a browser shows a job exactly as the terminal does. What
//! the agent says, the commands it runs (a `bash -lc` wrapper left out), the
//! files it changes, errors and policy decisions; usage and raw events show
//! no line. Every text here comes from the job: each line is made safe
//! for a terminal before it is returned (`terminal_text`: control
//! characters and bidirectional overrides shown escaped), and the
//! dashboard sets it as text, never as markup. Each text the job gives
//! is put on the event's one line (whitespace runs as one space, a file's
//! name with its line breaks escaped), so no text of the job starts a
//! line of its own: before, a session id, a changed file's name, a
//! policy message quoting a command, a tool's name or a host holding a
//! newline showed as a line of Paddock's (`▸ done: …`). Only an edit's
//! hunk spans lines, each of them marked as the hunk's (`edit.rs`).

use paddock_protocol::{AgentEvent, ChangeKind, EventBody};

mod edit;

/// The most of a message of Paddock's own (an `error` event of source
/// `paddock`, `paddock publish`) a line shows: in practice all of it.
pub const OWN_MESSAGE_CHARS: usize = 4000;

/// `s` on one line (whitespace runs collapsed), cut to `max` characters.
pub fn one_line(s: &str, max: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > max {
        let mut t: String = flat.chars().take(max).collect();
        t.push('…');
        t
    } else {
        flat
    }
}

/// The script of a command line that only runs a shell on it (Codex runs
/// every command as `/bin/bash -lc '…'`), so both engines show the
/// command the agent wrote; any other command line as it is.
fn shell_script(command: &str) -> std::borrow::Cow<'_, str> {
    match shlex::split(command).as_deref() {
        Some([shell, flag, script])
            if matches!(shell.as_str(), "/bin/bash" | "bash" | "/bin/sh" | "sh")
                && matches!(flag.as_str(), "-lc" | "-c") =>
        {
            std::borrow::Cow::Owned(script.clone())
        }
        _ => std::borrow::Cow::Borrowed(command),
    }
}

/// Event lines with memory of the tool calls still open: a result that
/// does not come right after its own call (engines run calls in parallel)
/// names the call it answers, so both engines' progress reads the same.
#[derive(Default)]
pub struct Lines {
    /// Open calls: id and a short label (the command, else the tool).
    open: Vec<(String, String)>,
    /// The call whose line was the last one shown.
    last_call: Option<String>,
}

impl Lines {
    pub fn line(&mut self, e: &AgentEvent) -> Option<String> {
        let line = self.unsafe_line(e)?;
        Some(crate::terminal_text::text(&line).into_owned())
    }

    /// The line before it is made safe for a terminal (a call's label, the
    /// job's text, is put into a result's line here).
    fn unsafe_line(&mut self, e: &AgentEvent) -> Option<String> {
        let line = raw_line(e)?;
        let last_call = self.last_call.take();
        match &e.body {
            EventBody::ToolCall {
                call_id: Some(id),
                tool,
                command,
                ..
            } => {
                let label = match command {
                    Some(c) => one_line(&shell_script(c), 40),
                    None => one_line(tool, 40),
                };
                self.open.push((id.clone(), label));
                self.last_call = Some(id.clone());
                Some(line)
            }
            EventBody::ToolResult {
                call_id: Some(id), ..
            } => {
                let right_after = last_call.as_deref() == Some(id.as_str());
                let at = self.open.iter().position(|(open, _)| open == id);
                let label = at.map(|i| self.open.remove(i).1);
                Some(match label {
                    Some(label) if !right_after => line.replacen("↳ ", &format!("↳ {label}: "), 1),
                    _ => line,
                })
            }
            _ => Some(line),
        }
    }
}

/// The one line an event shows as in progress views (`paddock run`,
/// `paddock events`); `None` for events that show no line (usage, raw).
/// Safe to print on a terminal (`terminal_text::text`).
pub fn event_line(e: &AgentEvent) -> Option<String> {
    raw_line(e).map(|l| crate::terminal_text::text(&l).into_owned())
}

/// The line as the job's texts make it, control characters and all.
fn raw_line(e: &AgentEvent) -> Option<String> {
    match &e.body {
        EventBody::Status { phase, detail } => {
            let phase = serde_json::to_value(phase)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            Some(match detail {
                Some(d) => format!("▸ {phase}: {}", one_line(d, OWN_MESSAGE_CHARS)),
                None => format!("▸ {phase}"),
            })
        }
        EventBody::Text { text } => Some(format!("  agent: {}", one_line(text, 200))),
        EventBody::Thought { text } => Some(format!("  thinking: {}", one_line(text, 120))),
        EventBody::ToolCall {
            tool,
            command,
            input,
            ..
        } => Some(match command {
            Some(c) => format!("  $ {}", one_line(&shell_script(c), 160)),
            None => edit::lines(tool, input).unwrap_or_else(|| {
                format!(
                    "  tool {} {}",
                    one_line(tool, 80),
                    one_line(&input.to_string(), 120)
                )
            }),
        }),
        EventBody::ToolResult {
            exit_code,
            is_error,
            output,
            ..
        } => {
            let lines = output.lines().count();
            let status = match (exit_code, is_error) {
                (Some(c), _) => format!("exit {c}"),
                (None, true) => "error".to_string(),
                (None, false) => "ok".to_string(),
            };
            Some(format!("    ↳ {status}, {lines} line(s) of output"))
        }
        EventBody::FileChange { path, change } => {
            let verb = match change {
                ChangeKind::Add => "added",
                ChangeKind::Update => "updated",
                ChangeKind::Delete => "deleted",
            };
            Some(format!("  ✎ {verb} {}", crate::terminal_text::path(path)))
        }
        EventBody::Usage { .. } | EventBody::Raw { .. } => None,
        // Allowed connections are on the record, not on the screen.
        EventBody::Network(r) if r.allowed => None,
        // A request the proxy could not read names no destination.
        EventBody::Network(r) if r.host.is_empty() => Some(format!(
            "  ⊘ network request refused ({})",
            r.rule.as_deref().unwrap_or("denied")
        )),
        EventBody::Network(r) => Some(format!(
            "  ⊘ network {}:{} refused ({})",
            if r.host.contains(':') {
                format!("[{}]", one_line(&r.host, 256))
            } else {
                one_line(&r.host, 256)
            },
            r.port,
            r.rule.as_deref().unwrap_or("denied")
        )),
        EventBody::ArtifactSummary {
            changed_files,
            interrupted,
            ..
        } if changed_files.is_empty() => Some(format!(
            "▸ {}patch: nothing changed",
            if *interrupted {
                "interrupted job's "
            } else {
                ""
            }
        )),
        EventBody::ArtifactSummary {
            patch_path,
            changed_files,
            interrupted,
            ..
        } => Some(format!(
            "▸ {}patch: {} file(s) → {patch_path}",
            if *interrupted {
                "interrupted job's "
            } else {
                ""
            },
            changed_files.len()
        )),
        EventBody::Policy { rule, message } => Some(format!(
            "  ⛔ policy {}: {}",
            one_line(rule, 80),
            one_line(message, OWN_MESSAGE_CHARS)
        )),
        EventBody::Error {
            message,
            source,
            fatal,
        } => {
            let source = source.as_deref().unwrap_or("paddock");
            // Paddock's own messages end with what to do (`git fetch … `,
            // `paddock run … --attempt-after …`): shown whole; an
            // engine's or upstream's (its stderr, an answer's body) cut.
            let max = if source.starts_with("paddock") {
                OWN_MESSAGE_CHARS
            } else {
                300
            };
            Some(format!(
                "  {} {source}: {}",
                if *fatal { "✖ error" } else { "⚠ warning" },
                one_line(message, max)
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(changed: &[&str], interrupted: bool) -> Option<String> {
        event_line(&AgentEvent {
            job_id: "j".to_owned(),
            seq: 1,
            at: time::macros::datetime!(2025-06-01 12:00 UTC),
            body: EventBody::ArtifactSummary {
                patch_path: "/data/artifacts/j/patch.diff".to_owned(),
                changed_files: changed.iter().map(|f| (*f).to_owned()).collect(),
                patch_bytes: 0,
                interrupted,
            },
        })
    }

    #[test]
    fn an_empty_patch_says_nothing_changed_and_points_nowhere() {
        assert_eq!(
            [
                summary(&[], false),
                summary(&[], true),
                summary(&["a", "b"], false)
            ],
            [
                Some("▸ patch: nothing changed".to_owned()),
                Some("▸ interrupted job's patch: nothing changed".to_owned()),
                Some("▸ patch: 2 file(s) → /data/artifacts/j/patch.diff".to_owned()),
            ]
        );
    }
}
