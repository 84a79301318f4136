//! Live progress for `paddock run`: one line per meaningful event (what the
//! agent says, the commands it runs, the files it changes, errors, policy
//! decisions) above a spinner that shows tokens and cost so far; and the
//! closing summary.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use paddock::broker::prices::format_usd;
use paddock::runner::Observer;
use paddock_protocol::{AgentEvent, ChangeKind, EventBody, JobRecord, ModelCall};

pub struct Progress {
    bar: ProgressBar,
    tokens: u64,
    calls: u64,
    quiet: bool,
    lines: Lines,
}

impl Progress {
    /// `quiet`: no spinner and no lines (`paddock run -q`).
    pub fn new(quiet: bool) -> Progress {
        if quiet {
            return Progress {
                bar: ProgressBar::hidden(),
                tokens: 0,
                calls: 0,
                quiet,
                lines: Lines::default(),
            };
        }
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {elapsed} · {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(120));
        bar.set_message("starting");
        Progress {
            bar,
            tokens: 0,
            calls: 0,
            quiet,
            lines: Lines::default(),
        }
    }

    /// Shows `text` above the spinner; under `-q` only Paddock's own
    /// warnings (`warning`), which are not progress.
    fn line(&self, text: String, warning: bool) {
        if self.quiet && !warning {
            return;
        }
        self.bar.suspend(|| errln!("{text}"));
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

fn one_line(s: &str, max: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > max {
        let mut t: String = flat.chars().take(max).collect();
        t.push('…');
        t
    } else {
        flat
    }
}

/// Event lines with memory of the tool calls still open: a result that
/// does not answer the latest call (engines run calls in parallel) names
/// the call it answers, so both engines' progress reads the same.
#[derive(Default)]
pub struct Lines {
    /// Open calls: id and a short label (the command, else the tool).
    open: Vec<(String, String)>,
}

impl Lines {
    pub fn line(&mut self, e: &AgentEvent) -> Option<String> {
        let line = event_line(e)?;
        match &e.body {
            EventBody::ToolCall {
                call_id: Some(id),
                tool,
                command,
                ..
            } => {
                let label = one_line(command.as_deref().unwrap_or(tool), 40);
                self.open.push((id.clone(), label));
                Some(line)
            }
            EventBody::ToolResult {
                call_id: Some(id), ..
            } => {
                let latest = self.open.last().is_some_and(|(open, _)| open == id);
                let at = self.open.iter().position(|(open, _)| open == id);
                let label = at.map(|i| self.open.remove(i).1);
                Some(match label {
                    Some(label) if !latest => line.replacen("↳ ", &format!("↳ {label}: "), 1),
                    _ => line,
                })
            }
            _ => Some(line),
        }
    }
}

/// The one line an event shows as in progress views (`paddock run`,
/// `paddock events`); `None` for events that show no line (usage, raw).
pub fn event_line(e: &AgentEvent) -> Option<String> {
    match &e.body {
        EventBody::Status { phase, detail } => {
            let phase = serde_json::to_value(phase)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            Some(match detail {
                Some(d) => format!("▸ {phase}: {d}"),
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
            Some(c) => format!("  $ {}", one_line(c, 160)),
            None => format!("  tool {tool} {}", one_line(&input.to_string(), 120)),
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
            Some(format!("  ✎ {verb} {path}"))
        }
        EventBody::Usage { .. } | EventBody::Raw { .. } => None,
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
        EventBody::Policy { rule, message } => Some(format!("  ⛔ policy {rule}: {message}")),
        EventBody::Error {
            message,
            source,
            fatal,
        } => Some(format!(
            "  {} {}: {}",
            if *fatal { "✖ error" } else { "⚠ warning" },
            source.as_deref().unwrap_or("paddock"),
            one_line(message, 300)
        )),
    }
}

impl Observer for Progress {
    fn event(&mut self, e: &AgentEvent) {
        let warning = matches!(&e.body, EventBody::Error { fatal: false, source: Some(s), .. } if s == "paddock");
        if let Some(t) = self.lines.line(e) {
            self.line(t, warning);
        }
    }

    fn model_call(&mut self, call: &ModelCall, spent_micros: i64) {
        self.calls += 1;
        self.tokens += call.tokens.total();
        self.bar.set_message(format!(
            "{} model call(s) · {} tokens · {}",
            self.calls,
            self.tokens,
            format_usd(spent_micros)
        ));
    }
}

/// The closing summary of `paddock run`.
pub fn summary(r: &JobRecord) -> String {
    let mut s = String::new();
    s.push_str(&format!("job {}  {}\n", r.id, r.status.as_str()));
    if let Some(reason) = &r.reason {
        s.push_str(&format!("  reason:   {}\n", one_line(reason, 300)));
    }
    s.push_str(&format!(
        "  ticket:   {} (attempt {}) on {}\n",
        r.ticket_id, r.attempt, r.branch
    ));
    s.push_str(&format!("  engine:   {} · {}\n", r.engine, r.model));
    s.push_str(&format!("  rung:     {} (isolation)\n", r.isolation));
    if r.changed_files.is_empty() {
        s.push_str("  changed:  nothing\n");
    } else {
        s.push_str(&format!("  changed:  {}\n", r.changed_files.join(", ")));
    }
    if let Some(p) = &r.patch_path {
        s.push_str(&format!("  patch:    {p}\n"));
    }
    s.push_str(&format!(
        "  tokens:   {} input, {} cached, {} cache-write, {} output ({} reasoning) in {} call(s)\n",
        r.tokens.input_tokens,
        r.tokens.cached_input_tokens,
        r.tokens.cache_write_tokens,
        r.tokens.output_tokens,
        r.tokens.reasoning_tokens,
        r.model_calls
    ));
    s.push_str(&format!("  cost:     {}\n", format_usd(r.cost_micros)));
    if let Some(ms) = r.duration_ms {
        s.push_str(&format!("  duration: {:.1} s\n", ms as f64 / 1000.0));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn ev(body: EventBody) -> AgentEvent {
        AgentEvent {
            job_id: "j".to_owned(),
            seq: 1,
            at: datetime!(2025-06-01 12:00 UTC),
            body,
        }
    }

    fn call(id: &str, cmd: &str) -> AgentEvent {
        ev(EventBody::ToolCall {
            call_id: Some(id.to_owned()),
            tool: "shell".to_owned(),
            command: Some(cmd.to_owned()),
            input: serde_json::Value::Null,
        })
    }

    fn result(id: &str, code: i64) -> AgentEvent {
        ev(EventBody::ToolResult {
            call_id: Some(id.to_owned()),
            exit_code: Some(code),
            is_error: false,
            output: "x\n".to_owned(),
        })
    }

    #[test]
    fn parallel_results_name_their_call() {
        let mut lines = Lines::default();
        let shown: Vec<String> = [
            call("a", "cargo test"),
            call("b", "ls"),
            result("a", 1),
            result("b", 0),
            call("c", "true"),
            result("c", 0),
        ]
        .iter()
        .filter_map(|e| lines.line(e))
        .collect();
        assert_eq!(
            shown,
            [
                "  $ cargo test",
                "  $ ls",
                "    ↳ cargo test: exit 1, 1 line(s) of output",
                "    ↳ exit 0, 1 line(s) of output",
                "  $ true",
                "    ↳ exit 0, 1 line(s) of output",
            ]
            .map(str::to_owned)
        );
    }
}
