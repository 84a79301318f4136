//! Live progress for `paddock run`: one line per meaningful event (what the
//! agent says, the commands it runs, the files it changes, errors, policy
//! decisions) above a spinner that shows tokens and cost so far; and the
//! closing summary.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use paddock::broker::prices::format_usd;
pub use paddock::event_line::Lines;
use paddock::event_line::{one_line, OWN_MESSAGE_CHARS};
use paddock::runner::Observer;
use paddock_protocol::{AgentEvent, EventBody, JobRecord, ModelCall};

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

    /// Shows Paddock's own `text` above the spinner, under `-q` too.
    pub fn notice(&self, text: String) {
        self.line(text, true);
    }

    /// Shows Paddock's own `text` under `-q` only: with progress on, the
    /// event it is made from has its own line saying the same (`▸
    /// session_resumed: …`), and two adjacent lines said it twice.
    pub fn notice_unless_shown(&self, text: String) {
        if self.quiet {
            errln!("{text}");
        }
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
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
/// Every field that can come from the job (the reason, which may quote
/// the engine's stderr; the names of changed files) is shown as one line
/// safe for a terminal (`terminal_text::line`).
pub fn summary(r: &JobRecord) -> String {
    summary_fetched(r, None)
}

/// [`summary`] for the job `paddock run` ran: with the local source
/// repository its branch was fetched into (`in_source`), said after the
/// changed files; nothing of the kind when it was not fetched.
pub fn summary_fetched(r: &JobRecord, in_source: Option<&std::path::Path>) -> String {
    use paddock::terminal_text::line;
    let mut s = String::new();
    s.push_str(&format!("job {}  {}\n", r.id, r.status.as_str()));
    if let Some(reason) = &r.reason {
        // Whole (a record keeps at most its last 2000 bytes): its end
        // says what to do (`set base_ref = "origin/main"`, …).
        s.push_str(&format!(
            "  reason:   {}\n",
            line(&one_line(reason, OWN_MESSAGE_CHARS))
        ));
    }
    s.push_str(&format!(
        "  ticket:   {} (attempt {}) on {}\n",
        line(&r.ticket_id),
        r.attempt,
        line(&r.branch)
    ));
    s.push_str(&format!("  engine:   {} · {}\n", r.engine, r.model));
    s.push_str(&format!("  rung:     {} (isolation)\n", r.isolation));
    if r.changed_files.is_empty() {
        s.push_str("  changed:  nothing\n");
    } else {
        let names: Vec<_> = r.changed_files.iter().map(|f| line(f)).collect();
        s.push_str(&format!("  changed:  {}\n", names.join(", ")));
    }
    // A job that changed nothing has an empty patch: no line points at it.
    if let Some(p) = r
        .patch_path
        .as_ref()
        .filter(|_| !r.changed_files.is_empty())
    {
        s.push_str(&format!("  patch:    {}\n", line(p)));
    }
    if let Some(source) = in_source {
        s.push_str(&format!(
            "  branch:   {} fetched into the source repository {}\n",
            line(&r.branch),
            line(&source.display().to_string())
        ));
    }
    if let Some(at) = r.disposed_at {
        s.push_str(&format!(
            "  disposed: {} (its artifacts, the patch among them, removed)\n",
            paddock::time_text::rfc3339(at)
        ));
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
    fn the_patch_line_is_shown_only_for_a_change() {
        let mut job = JobRecord {
            id: "job-1".to_owned(),
            ticket_id: "T-1".to_owned(),
            project: "acme/widgets".to_owned(),
            attempt: 1,
            engine: "codex".to_owned(),
            model: "gpt-5.5".to_owned(),
            isolation: "sandbox".to_owned(),
            status: paddock_protocol::JobStatus::Done,
            reason: None,
            branch: "paddock/T-1/1".to_owned(),
            base_ref: "main".to_owned(),
            patch_path: Some("/data/artifacts/job-1/patch.diff".to_owned()),
            changed_files: Vec::new(),
            tokens: paddock_protocol::TokenUsage::default(),
            model_calls: 0,
            cost_micros: 0,
            engine_exit_code: None,
            created_at: datetime!(2025-06-01 12:00 UTC),
            finished_at: None,
            duration_ms: None,
            disposed_at: None,
        };
        let lines = |job: &JobRecord| -> Vec<String> {
            summary(job)
                .lines()
                .filter(|l| l.starts_with("  changed:") || l.starts_with("  patch:"))
                .map(str::to_owned)
                .collect()
        };
        let unchanged = lines(&job);
        job.changed_files = vec!["a.txt".to_owned()];
        let fetched: Vec<String> =
            summary_fetched(&job, Some(std::path::Path::new("/home/me/widgets")))
                .lines()
                .filter(|l| {
                    l.starts_with("  changed:")
                        || l.starts_with("  patch:")
                        || l.starts_with("  branch:")
                })
                .map(str::to_owned)
                .collect();
        assert_eq!(
            (unchanged, lines(&job), fetched),
            (
                vec!["  changed:  nothing".to_owned()],
                vec![
                    "  changed:  a.txt".to_owned(),
                    "  patch:    /data/artifacts/job-1/patch.diff".to_owned()
                ],
                vec![
                    "  changed:  a.txt".to_owned(),
                    "  patch:    /data/artifacts/job-1/patch.diff".to_owned(),
                    "  branch:   paddock/T-1/1 fetched into the source repository /home/me/widgets"
                        .to_owned()
                ]
            )
        );
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
                "    ↳ ls: exit 0, 1 line(s) of output",
                "  $ true",
                "    ↳ exit 0, 1 line(s) of output",
            ]
            .map(str::to_owned)
        );
    }

    /// What `paddock run` and `paddock events` show for an engine's
    /// stdout: each line parsed as the runner does, then rendered.
    fn shown(kind: paddock_protocol::EngineKind, jsonl: &str) -> String {
        let work = std::path::Path::new("/tmp/cap/work");
        let mut parser = paddock::engines::adapter(kind).parser(work);
        // The runner's redaction, as the events reach the view.
        let mut redactor = paddock::redact::Redactor::new();
        redactor.add_job_dirs(work, std::path::Path::new("/tmp/cap"));
        let mut lines = Lines::default();
        jsonl
            .lines()
            .flat_map(|l| parser.parse_line(l))
            .filter_map(|body| lines.line(&ev(redactor.event(body))))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Claude Code: two calls in parallel answered out of order, an
    /// indented edit, a multi-edit and a new file.
    const CLAUDE: &str = r#"{"type":"assistant","message":{"model":"m","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"cargo test"}},{"type":"tool_use","id":"t2","name":"Bash","input":{"command":"ls src"}}]}}
{"type":"user","message":{"role":"user","content":[{"tool_use_id":"t2","type":"tool_result","content":"lib.rs","is_error":false}]}}
{"type":"user","message":{"role":"user","content":[{"tool_use_id":"t1","type":"tool_result","content":"Exit code 101\nfailed","is_error":true}]}}
{"type":"assistant","message":{"model":"m","content":[{"type":"tool_use","id":"t3","name":"Edit","input":{"file_path":"/tmp/cap/work/src/lib.rs","old_string":"fn add(a: i32, b: i32) -> i32 {\n    a - b\n}","new_string":"fn add(a: i32, b: i32) -> i32 {\n    // Sum.\n    a + b\n}"}}]}}
{"type":"user","message":{"role":"user","content":[{"tool_use_id":"t3","type":"tool_result","content":"The file has been updated.","is_error":false}]}}
{"type":"assistant","message":{"model":"m","content":[{"type":"tool_use","id":"t4","name":"MultiEdit","input":{"file_path":"/tmp/cap/work/src/main.rs","edits":[{"old_string":"\tprintln!(\"a\");","new_string":"\tprintln!(\"b\");"},{"old_string":"        deep();","new_string":"        deeper();"}]}}]}}
{"type":"user","message":{"role":"user","content":[{"tool_use_id":"t4","type":"tool_result","content":"ok","is_error":false}]}}
{"type":"assistant","message":{"model":"m","content":[{"type":"tool_use","id":"t5","name":"Write","input":{"file_path":"/tmp/cap/work/NOTES.md","content":"one\n  two\n"}}]}}
{"type":"user","message":{"role":"user","content":[{"tool_use_id":"t5","type":"tool_result","content":"File created","is_error":false}]}}"#;

    /// Codex: two commands in parallel finishing out of order, a patch.
    const CODEX: &str = r#"{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc 'cargo test'","aggregated_output":"","exit_code":null,"status":"in_progress"}}
{"type":"item.started","item":{"id":"item_2","type":"command_execution","command":"/bin/bash -lc 'ls src'","aggregated_output":"","exit_code":null,"status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":"/bin/bash -lc 'ls src'","aggregated_output":"lib.rs\n","exit_code":0,"status":"completed"}}
{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc 'cargo test'","aggregated_output":"failed\n","exit_code":101,"status":"failed"}}
{"type":"item.completed","item":{"id":"item_3","type":"file_change","changes":[{"path":"/tmp/cap/work/src/lib.rs","kind":"update"},{"path":"/tmp/cap/work/NOTES.md","kind":"add"}],"status":"completed"}}"#;

    #[test]
    fn claude_progress() {
        insta::assert_snapshot!(shown(paddock_protocol::EngineKind::Claude, CLAUDE));
    }

    #[test]
    fn codex_progress() {
        insta::assert_snapshot!(shown(paddock_protocol::EngineKind::Codex, CODEX));
    }
}
