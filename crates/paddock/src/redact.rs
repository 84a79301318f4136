//! Redaction of everything Paddock writes about a job: the job's directories
//! become placeholders (the checkout `<workspace>`, the job directory
//! `<job-dir>`), the secrets Paddock knows (the provider key, the per-job
//! token) and the credential shapes of `rules.rs` (AI providers, source
//! hosts and registries, clouds, payments, chat, URLs with a password,
//! bearer headers, key assignments, private key blocks, JWTs) become
//! `[REDACTED]`. Applied to every event before it is stored or shown, to
//! ledger error messages, to the job's reason and to the engine's raw output
//! and stderr artifacts, and (patterns only) to Paddock's own log lines.

use std::borrow::Cow;
use std::fmt;
use std::path::Path;

use paddock_protocol::EventBody;
use serde_json::Value;

use crate::secret::Secret;

/// What a secret or token becomes.
pub const REDACTED: &str = "[REDACTED]";
/// What the job's checkout path becomes.
pub const WORKSPACE: &str = "<workspace>";
/// What the job's directory (home, tmp, meta and the checkout) becomes.
pub const JOB_DIR: &str = "<job-dir>";

/// Secrets shorter than this are not redacted by value (they would match
/// ordinary text); the token patterns still apply.
pub const MIN_SECRET_LEN: usize = 8;

/// Redacts text for one job (or, without paths and secrets, for any text).
#[derive(Clone, Default)]
pub struct Redactor {
    /// Path prefix → placeholder, longest first.
    paths: Vec<(String, &'static str)>,
    secrets: Vec<Secret>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("paths", &self.paths)
            .field("secrets", &self.secrets.len())
            .finish()
    }
}

/// Starts compiling the token rules on a thread of their own (a process
/// about to run jobs calls it first), so the first event is not held up by
/// the compilation; it waits for whatever is left of it.
pub fn warm_up() {
    rules::warm_up();
}

impl Redactor {
    /// A redactor that knows no paths or secrets: token patterns only.
    pub fn new() -> Redactor {
        Redactor::default()
    }

    /// Replaces `path` (and its canonical form, when different) by `placeholder`.
    pub fn add_path(&mut self, path: &Path, placeholder: &'static str) {
        let mut forms = vec![path.display().to_string()];
        if let Ok(real) = std::fs::canonicalize(path) {
            forms.push(real.display().to_string());
        }
        for form in forms {
            let form = form.trim_end_matches('/').to_string();
            if form.len() > 1 && !self.paths.iter().any(|(p, _)| *p == form) {
                self.paths.push((form, placeholder));
            }
        }
        self.paths.sort_by_key(|p| std::cmp::Reverse(p.0.len()));
    }

    /// The job's checkout and its directory.
    pub fn add_job_dirs(&mut self, work: &Path, root: &Path) {
        self.add_path(work, WORKSPACE);
        self.add_path(root, JOB_DIR);
    }

    /// Redacts this secret's value wherever it appears.
    pub fn add_secret(&mut self, secret: &Secret) {
        if secret.expose().len() >= MIN_SECRET_LEN && !self.secrets.contains(secret) {
            self.secrets.push(secret.clone());
            self.secrets
                .sort_by_key(|s| std::cmp::Reverse(s.expose().len()));
        }
    }

    /// The text with secrets, paths and tokens replaced.
    pub fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for s in &self.secrets {
            if out.contains(s.expose()) {
                out = Cow::Owned(out.replace(s.expose(), REDACTED));
            }
        }
        for (path, placeholder) in &self.paths {
            if out.contains(path.as_str()) {
                out = Cow::Owned(out.replace(path.as_str(), placeholder));
            }
        }
        if let Some(replaced) = rules::redact(&out, REDACTED) {
            out = Cow::Owned(replaced);
        }
        out
    }

    /// Where text being written in windows may be cut: the largest
    /// character boundary at most `keep` bytes before the end of `text`
    /// that no secret, path or token pattern found in `text` spans (0 when
    /// there is none), so redacting the part before it alone redacts it as
    /// in the whole.
    pub fn safe_split(&self, text: &str, keep: usize) -> usize {
        let mut spans: Vec<(usize, usize)> = Vec::new();
        for s in &self.secrets {
            spans.extend(
                text.match_indices(s.expose())
                    .map(|(i, m)| (i, i + m.len())),
            );
        }
        for (path, _) in &self.paths {
            spans.extend(
                text.match_indices(path.as_str())
                    .map(|(i, m)| (i, i + m.len())),
            );
        }
        spans.extend(rules::spans(text));
        let mut at = text.len().saturating_sub(keep);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        // Move before every match that spans the cut, until none does.
        while let Some(start) = spans
            .iter()
            .filter(|(s, e)| *s < at && at < *e)
            .map(|(s, _)| *s)
            .min()
        {
            at = start;
        }
        at
    }

    /// Redacts a string in place.
    pub fn string(&self, s: &mut String) {
        if let Cow::Owned(new) = self.text(s) {
            *s = new;
        }
    }

    /// Redacts every string (keys included) of a JSON value in place.
    pub fn json(&self, value: &mut Value) {
        match value {
            Value::String(s) => self.string(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.json(v)),
            Value::Object(map) => {
                let entries = std::mem::take(map);
                for (k, mut v) in entries {
                    self.json(&mut v);
                    map.insert(self.text(&k).into_owned(), v);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// The event with every text field redacted.
    pub fn event(&self, mut body: EventBody) -> EventBody {
        let opt = |s: &mut Option<String>| {
            if let Some(s) = s {
                self.string(s);
            }
        };
        match &mut body {
            EventBody::Status { detail, .. } => opt(detail),
            EventBody::Text { text } | EventBody::Thought { text } => self.string(text),
            EventBody::ToolCall {
                call_id,
                tool,
                command,
                input,
            } => {
                opt(call_id);
                self.string(tool);
                opt(command);
                self.json(input);
            }
            EventBody::ToolResult {
                call_id, output, ..
            } => {
                opt(call_id);
                self.string(output);
            }
            EventBody::FileChange { path, .. } => self.string(path),
            EventBody::Usage { .. } => {}
            EventBody::ArtifactSummary {
                patch_path,
                changed_files,
                ..
            } => {
                self.string(patch_path);
                changed_files.iter_mut().for_each(|f| self.string(f));
            }
            EventBody::Policy { rule, message } => {
                self.string(rule);
                self.string(message);
            }
            EventBody::Error {
                message, source, ..
            } => {
                self.string(message);
                opt(source);
            }
            EventBody::Network(record) => {
                self.string(&mut record.host);
                opt(&mut record.rule);
                opt(&mut record.reason);
            }
            EventBody::Raw {
                engine,
                event_type,
                data,
            } => {
                self.string(engine);
                self.string(event_type);
                self.json(data);
            }
        }
        body
    }
}

/// A `tracing` writer that redacts token patterns from Paddock's log lines.
pub struct RedactingWriter<W> {
    inner: W,
}

impl<W: std::io::Write> RedactingWriter<W> {
    pub fn new(inner: W) -> RedactingWriter<W> {
        RedactingWriter { inner }
    }
}

impl<W: std::io::Write> std::io::Write for RedactingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let redacted = Redactor::new().text(&text).into_owned();
        self.inner.write_all(redacted.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

mod rules;

#[cfg(test)]
mod tests;
