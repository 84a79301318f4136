//! The scenario file format: what a scripted model says and does, turn by turn.
//!
//! A scenario is TOML: optional `description` and `served_model`, then an
//! ordered list of `[[turn]]` tables. A turn holds, in the order the model
//! produces them, `reasoning`, `text`, `[[turn.action]]`s (`shell`, `write`,
//! `edit`, `read`) and `usage`; or it fails (`error`, `stream_error`,
//! `disconnect`). Parsing is strict (unknown fields are errors) and every
//! error names the file, the line and the field, so that a typo in a demo
//! scenario is caught when it is loaded, not when an engine trips over it.
//! The user-facing description is `docs/scenarios.md`.

use std::path::{Component, Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

/// A scenario that failed to load. Every variant carries the file's path.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("cannot read scenario {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML or does not fit the format (unknown field,
    /// wrong type, missing field). `line` and `column` are 1-based.
    #[error("{}: {message}", location(path, *line, *column))]
    Parse {
        path: PathBuf,
        line: Option<usize>,
        column: Option<usize>,
        message: String,
    },
    /// The file has no `[[turn]]`.
    #[error("{}: the scenario has no turns; add at least one [[turn]]", path.display())]
    Empty { path: PathBuf },
    /// A turn is well-formed TOML but makes no sense (for example an action
    /// path outside the checkout). `turn` is 1-based; `line` is the line of
    /// the turn's `[[turn]]` header.
    #[error("{}: turn {turn}: {field}: {message}", location(path, Some(*line), None))]
    Turn {
        path: PathBuf,
        line: usize,
        turn: usize,
        field: String,
        message: String,
    },
}

fn location(path: &Path, line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(line), Some(column)) => format!("{}:{line}:{column}", path.display()),
        (Some(line), None) => format!("{}:{line}", path.display()),
        (None, _) => path.display().to_string(),
    }
}

/// A loaded, validated scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario {
    origin: PathBuf,
    description: Option<String>,
    served_model: Option<String>,
    turns: Vec<Turn>,
}

/// One model answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Turn {
    pub reasoning: Option<String>,
    pub text: Option<String>,
    pub actions: Vec<Action>,
    pub usage: Usage,
    pub ending: Ending,
    pub served_model: Option<String>,
    /// The first requests for this turn fail this way before it is answered.
    pub transient: Option<Transient>,
}

/// A turn's transient failure: its first `times` requests get this HTTP
/// error (with the upstream's retry headers), later ones the turn itself.
/// The only state a scenario has: counted per scripted server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Transient {
    pub times: u32,
    pub failure: HttpFailure,
    /// `Retry-After`, as given (seconds or an HTTP date).
    pub retry_after: Option<String>,
    /// `retry-after-ms`.
    pub retry_after_ms: Option<u64>,
}

/// How a turn ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ending {
    /// A complete answer with usage.
    Complete,
    /// An HTTP error response instead of an answer.
    HttpError(HttpFailure),
    /// A 200 stream that starts, then reports a failure in-stream.
    StreamError(StreamFailure),
    /// A 200 stream that starts, then the connection is cut.
    Disconnect,
}

/// An HTTP error response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HttpFailure {
    pub status: u16,
    pub message: String,
    /// The provider's error `type`; a default per status when absent.
    pub kind: Option<String>,
    /// OpenAI's error `code`; a default per status when absent.
    pub code: Option<String>,
}

/// A failure reported inside a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StreamFailure {
    pub message: String,
    /// Anthropic's error `type` / OpenAI's error `code`; a default per wire
    /// when absent.
    pub kind: Option<String>,
}

/// An engine-neutral tool call. Paths are relative to the checkout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    Shell {
        command: String,
        description: Option<String>,
    },
    Write {
        path: String,
        content: String,
    },
    Edit {
        path: String,
        old: String,
        new: String,
    },
    Read {
        path: String,
    },
    /// A raw call of a tool the engine offers, by name (e.g. Codex's
    /// `exec_command` with `tty`, then `write_stdin`); see `call.rs`.
    Call {
        name: String,
        arguments: serde_json::Value,
    },
}

/// The most tokens of one kind a scenario's turn may report: far above any
/// model's context, far below what sums of them could overflow.
pub const MAX_TURN_TOKENS: u64 = 1_000_000_000;

/// Token usage in Paddock's normalized kinds: `input` excludes cached and
/// cache-write tokens; `reasoning` is a part of `output`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Usage {
    #[serde(default)]
    pub input: u64,
    #[serde(default)]
    pub cached: u64,
    #[serde(default)]
    pub cache_write: u64,
    #[serde(default)]
    pub output: u64,
    #[serde(default)]
    pub reasoning: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    description: Option<String>,
    served_model: Option<String>,
    #[serde(default)]
    turn: Vec<Spanned<RawTurn>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTurn {
    reasoning: Option<String>,
    text: Option<String>,
    #[serde(default)]
    action: Vec<RawAction>,
    usage: Option<Usage>,
    error: Option<RawHttpError>,
    stream_error: Option<RawStreamError>,
    #[serde(default)]
    disconnect: bool,
    served_model: Option<String>,
    transient: Option<RawTransient>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTransient {
    #[serde(default = "one")]
    times: u32,
    status: u16,
    message: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    retry_after: Option<String>,
    retry_after_ms: Option<u64>,
}

fn one() -> u32 {
    1
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum RawAction {
    Shell {
        command: String,
        description: Option<String>,
    },
    Write {
        path: String,
        content: String,
    },
    Edit {
        path: String,
        old: String,
        new: String,
    },
    Read {
        path: String,
    },
    Call {
        name: String,
        #[serde(default)]
        arguments: toml::Table,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttpError {
    status: u16,
    message: String,
    #[serde(rename = "type")]
    kind: Option<String>,
    code: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStreamError {
    message: String,
    #[serde(rename = "type")]
    kind: Option<String>,
}

impl Scenario {
    /// Reads and validates a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Scenario::from_toml(&text, path)
    }

    /// Parses and validates scenario text; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &Path) -> Result<Scenario, ScenarioError> {
        // As a job spec and the config file say where they failed: the
        // key's path (`turn 2: action 1: path`), in a user's words.
        let raw: RawScenario = serde_path_to_error::deserialize(toml::Deserializer::new(text))
            .map_err(|e| {
                let place = key_path(e.path());
                let err = e.into_inner();
                let (line, column) = match err.span() {
                    Some(span) => {
                        let (line, column) = line_column(text, span.start);
                        (Some(line), Some(column))
                    }
                    None => (None, None),
                };
                // One line (toml's syntax messages span two), in a user's
                // words for types (`expected a number`, not `f64`), and
                // never the name of the span wrapper a turn is read in.
                let message = no_struct_names(&paddock_protocol::parse_error::plain_types(
                    &err.message().trim_end().replace('\n', "; "),
                ));
                ScenarioError::Parse {
                    path: origin.to_path_buf(),
                    line,
                    column,
                    message: match place.is_empty() {
                        true => message,
                        false => format!("{place}: {message}"),
                    },
                }
            })?;
        if raw.turn.is_empty() {
            return Err(ScenarioError::Empty {
                path: origin.to_path_buf(),
            });
        }
        let mut turns = Vec::with_capacity(raw.turn.len());
        for (index, spanned) in raw.turn.into_iter().enumerate() {
            let (line, _) = line_column(text, spanned.span().start);
            let at = TurnAt {
                path: origin,
                line,
                turn: index + 1,
            };
            turns.push(validate_turn(spanned.into_inner(), &at)?);
        }
        Ok(Scenario {
            origin: origin.to_path_buf(),
            description: non_empty(raw.description),
            served_model: non_empty(raw.served_model),
            turns,
        })
    }

    /// Where the scenario came from.
    pub fn origin(&self) -> &Path {
        &self.origin
    }

    /// The scenario's own description, if it has one.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// How many turns (model requests) the scenario answers.
    pub fn turn_count(&self) -> usize {
        self.turns.len()
    }

    pub(crate) fn turns(&self) -> &[Turn] {
        &self.turns
    }

    pub(crate) fn served_model(&self) -> Option<&str> {
        self.served_model.as_deref()
    }
}

/// Where a turn is, for its errors.
struct TurnAt<'a> {
    path: &'a Path,
    line: usize,
    turn: usize,
}

impl TurnAt<'_> {
    fn error(&self, field: impl Into<String>, message: impl Into<String>) -> ScenarioError {
        ScenarioError::Turn {
            path: self.path.to_path_buf(),
            line: self.line,
            turn: self.turn,
            field: field.into(),
            message: message.into(),
        }
    }
}

fn validate_turn(mut raw: RawTurn, at: &TurnAt<'_>) -> Result<Turn, ScenarioError> {
    for (field, value) in [
        ("reasoning", &raw.reasoning),
        ("text", &raw.text),
        ("served_model", &raw.served_model),
    ] {
        if value.as_deref() == Some("") {
            return Err(at.error(field, "is empty; leave it out instead"));
        }
    }
    let ending = ending(
        raw.error.take(),
        raw.stream_error.take(),
        raw.disconnect,
        at,
    )?;
    fields_of_ending(&ending, &raw, at)?;
    let usage = validate_usage(raw.usage.unwrap_or_default(), at)?;
    let mut actions = Vec::with_capacity(raw.action.len());
    for (index, action) in raw.action.into_iter().enumerate() {
        actions.push(validate_action(
            action,
            &format!("action {}", index + 1),
            at,
        )?);
    }
    let transient = raw
        .transient
        .map(|t| validate_transient(t, at))
        .transpose()?;
    Ok(Turn {
        reasoning: raw.reasoning,
        text: raw.text,
        actions,
        usage,
        ending,
        served_model: raw.served_model,
        transient,
    })
}

/// How the turn ends: completes, or fails in one way only.
fn ending(
    error: Option<RawHttpError>,
    stream_error: Option<RawStreamError>,
    disconnect: bool,
    at: &TurnAt<'_>,
) -> Result<Ending, ScenarioError> {
    Ok(match (error, stream_error, disconnect) {
        (None, None, false) => Ending::Complete,
        (Some(error), None, false) => {
            if !(400..=599).contains(&error.status) {
                return Err(at.error(
                    "error.status",
                    format!("must be an HTTP error status (400 to 599), got {}", error.status),
                ));
            }
            Ending::HttpError(HttpFailure {
                status: error.status,
                message: error.message,
                kind: non_empty(error.kind),
                code: non_empty(error.code),
            })
        }
        (None, Some(failure), false) => Ending::StreamError(StreamFailure {
            message: failure.message,
            kind: non_empty(failure.kind),
        }),
        (None, None, true) => Ending::Disconnect,
        _ => {
            return Err(at.error(
                "error",
                "a turn can fail in one way only: choose one of `error`, `stream_error` and `disconnect`",
            ))
        }
    })
}

/// The fields a turn with this `ending` may not have.
fn fields_of_ending(ending: &Ending, raw: &RawTurn, at: &TurnAt<'_>) -> Result<(), ScenarioError> {
    match ending {
        Ending::Complete => {
            if raw.reasoning.is_none() && raw.text.is_none() && raw.action.is_empty() {
                return Err(at.error(
                    "text",
                    "the turn is empty: give it `text`, `reasoning` or an action, or make it fail",
                ));
            }
        }
        Ending::HttpError(_) => {
            for (field, present) in [
                ("reasoning", raw.reasoning.is_some()),
                ("text", raw.text.is_some()),
                ("action", !raw.action.is_empty()),
                ("usage", raw.usage.is_some()),
            ] {
                if present {
                    return Err(at.error(
                        field,
                        "an `error` turn answers with an HTTP error only; remove this field",
                    ));
                }
            }
        }
        Ending::StreamError(_) | Ending::Disconnect => {
            for (field, present) in [
                ("action", !raw.action.is_empty()),
                ("usage", raw.usage.is_some()),
            ] {
                if present {
                    return Err(at.error(
                        field,
                        "a stream that fails carries only `reasoning` and `text` before it breaks; remove this field",
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Token counts a model call could report.
fn validate_usage(usage: Usage, at: &TurnAt<'_>) -> Result<Usage, ScenarioError> {
    for (field, n) in [
        ("usage.input", usage.input),
        ("usage.cached", usage.cached),
        ("usage.cache_write", usage.cache_write),
        ("usage.output", usage.output),
        ("usage.reasoning", usage.reasoning),
    ] {
        if n > MAX_TURN_TOKENS {
            return Err(at.error(
                field,
                format!("{n} tokens is absurd for one model call; at most {MAX_TURN_TOKENS}"),
            ));
        }
    }
    if usage.reasoning > usage.output {
        return Err(at.error(
            "usage.reasoning",
            format!(
                "reasoning tokens are a part of output tokens, so reasoning ({}) cannot exceed output ({})",
                usage.reasoning, usage.output
            ),
        ));
    }
    Ok(usage)
}

/// A transient failure before the turn: how often, with which answer.
fn validate_transient(t: RawTransient, at: &TurnAt<'_>) -> Result<Transient, ScenarioError> {
    if !(1..=10).contains(&t.times) {
        return Err(at.error(
            "transient.times",
            format!("must be 1 to 10, got {}", t.times),
        ));
    }
    if !(400..=599).contains(&t.status) {
        return Err(at.error(
            "transient.status",
            format!(
                "must be an HTTP error status (400 to 599), got {}",
                t.status
            ),
        ));
    }
    if t.retry_after.as_deref() == Some("") {
        return Err(at.error("transient.retry_after", "is empty; leave it out instead"));
    }
    Ok(Transient {
        times: t.times,
        failure: HttpFailure {
            status: t.status,
            message: t
                .message
                .unwrap_or_else(|| format!("scripted transient failure ({})", t.status)),
            kind: non_empty(t.kind),
            code: None,
        },
        retry_after: t.retry_after,
        retry_after_ms: t.retry_after_ms,
    })
}

fn validate_action(raw: RawAction, name: &str, at: &TurnAt<'_>) -> Result<Action, ScenarioError> {
    match raw {
        RawAction::Shell {
            command,
            description,
        } => {
            if command.trim().is_empty() {
                return Err(at.error(format!("{name} (shell) command"), "is empty"));
            }
            Ok(Action::Shell {
                command,
                description: non_empty(description),
            })
        }
        RawAction::Write { path, content } => {
            let path = checkout_path(&path, &format!("{name} (write) path"), at)?;
            Ok(Action::Write { path, content })
        }
        RawAction::Edit { path, old, new } => {
            let path = checkout_path(&path, &format!("{name} (edit) path"), at)?;
            if old.is_empty() {
                return Err(at.error(
                    format!("{name} (edit) old"),
                    "is empty; an edit replaces existing text (use a `write` action to create a file)",
                ));
            }
            if old == new {
                return Err(at.error(
                    format!("{name} (edit) new"),
                    "is the same as `old`; an edit must change something",
                ));
            }
            Ok(Action::Edit { path, old, new })
        }
        RawAction::Read { path } => {
            let path = checkout_path(&path, &format!("{name} (read) path"), at)?;
            Ok(Action::Read { path })
        }
        RawAction::Call {
            name: tool,
            arguments,
        } => {
            if tool.trim().is_empty() {
                return Err(at.error(format!("{name} (call) name"), "is empty"));
            }
            let arguments = serde_json::to_value(arguments)
                .map_err(|e| at.error(format!("{name} (call) arguments"), e.to_string()))?;
            Ok(Action::Call {
                name: tool,
                arguments,
            })
        }
    }
}

/// Action paths are relative to the checkout and stay inside it; returned
/// without `.` components (`./a//b` is `a/b`).
fn checkout_path(path: &str, field: &str, at: &TurnAt<'_>) -> Result<String, ScenarioError> {
    if path.is_empty() {
        return Err(at.error(field, "is empty"));
    }
    if path.contains('\n') {
        return Err(at.error(field, "contains a line break"));
    }
    let mut parts = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_string_lossy()),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => {
                return Err(at.error(
                    field,
                    format!("must be relative to the checkout, got `{path}`"),
                ))
            }
            Component::ParentDir => {
                return Err(at.error(
                    field,
                    format!("must stay inside the checkout (no `..`), got `{path}`"),
                ))
            }
        }
    }
    if parts.is_empty() {
        return Err(at.error(field, "names the checkout itself, not a file in it"));
    }
    Ok(parts.join("/"))
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.filter(|value| !value.is_empty())
}

/// 1-based line and column (in characters) of a byte offset.
/// `message` with the Rust names serde gives what it expected (`expected
/// struct RawTurn`, the span wrapper's `$__serde_spanned_private_…`) said
/// as what a user writes there: `expected a table`.
fn no_struct_names(message: &str) -> String {
    const SAID: &str = "expected struct ";
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find(SAID) {
        out.push_str(&rest[..at]);
        out.push_str("expected a table");
        let name = &rest[at + SAID.len()..];
        let end = name
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
            .unwrap_or(name.len());
        rest = &name[end..];
    }
    out.push_str(rest);
    out
}

/// Where in the scenario a parse error is, in a user's words: `turn 2`,
/// `turn 1: action 3: path`, `turn 1: usage.input`, `served_model`; empty
/// for the document itself or where no key was reached (a syntax error).
/// The span wrapper a turn is read in (`toml::Spanned`) is no key of the
/// file, and is left out.
fn key_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut parts: Vec<String> = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    let mut segments = path.iter().peekable();
    while let Some(segment) = segments.next() {
        match segment {
            Segment::Map { key } if key.starts_with("$__serde_spanned_private_") => {}
            Segment::Map { key } | Segment::Enum { variant: key } => {
                let numbered = matches!(key.as_str(), "turn" | "action")
                    && matches!(segments.peek(), Some(Segment::Seq { .. }));
                if let (true, Some(Segment::Seq { index })) = (numbered, segments.peek()) {
                    if !keys.is_empty() {
                        parts.push(keys.join("."));
                        keys.clear();
                    }
                    parts.push(format!("{key} {}", index + 1));
                    segments.next();
                } else {
                    keys.push(key.clone());
                }
            }
            Segment::Seq { index } => match keys.last_mut() {
                Some(last) => last.push_str(&format!("[{index}]")),
                None => keys.push(format!("[{index}]")),
            },
            Segment::Unknown => return String::new(),
        }
    }
    if !keys.is_empty() {
        parts.push(keys.join("."));
    }
    parts.join(": ")
}

fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |index| index + 1);
    let column = before
        .get(line_start..)
        .map_or(0, |rest| rest.chars().count())
        + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        Scenario::from_toml(text, Path::new("demo.toml"))
    }

    fn parse_error(text: &str) -> String {
        match parse(text) {
            Ok(scenario) => panic!("expected an error, got {scenario:?}"),
            Err(err) => err.to_string(),
        }
    }

    #[test]
    fn parses_a_full_scenario() {
        let scenario = parse(
            r#"
description = "all the parts"
served_model = "gpt-5.5-scripted"

[[turn]]
reasoning = "Look first."
text = "Listing files."
usage = { input = 100, cached = 20, cache_write = 5, output = 40, reasoning = 10 }

[[turn.action]]
type = "shell"
command = "ls"

[[turn.action]]
type = "write"
path = "notes/a.txt"
content = "one\n"

[[turn.action]]
type = "read"
path = "./notes/a.txt"

[[turn.action]]
type = "edit"
path = "notes/a.txt"
old = "one\n"
new = "two\n"

[[turn]]
error = { status = 429, message = "slow down", type = "rate_limit_error", code = "rate_limit_exceeded" }

[[turn]]
text = "partial"
stream_error = { message = "overloaded", type = "overloaded_error" }

[[turn]]
disconnect = true

[[turn]]
text = "Done."
served_model = "other"
"#,
        )
        .unwrap();
        let expected = Scenario {
            origin: PathBuf::from("demo.toml"),
            description: Some("all the parts".into()),
            served_model: Some("gpt-5.5-scripted".into()),
            turns: vec![
                Turn {
                    reasoning: Some("Look first.".into()),
                    text: Some("Listing files.".into()),
                    actions: vec![
                        Action::Shell {
                            command: "ls".into(),
                            description: None,
                        },
                        Action::Write {
                            path: "notes/a.txt".into(),
                            content: "one\n".into(),
                        },
                        Action::Read {
                            path: "notes/a.txt".into(),
                        },
                        Action::Edit {
                            path: "notes/a.txt".into(),
                            old: "one\n".into(),
                            new: "two\n".into(),
                        },
                    ],
                    usage: Usage {
                        input: 100,
                        cached: 20,
                        cache_write: 5,
                        output: 40,
                        reasoning: 10,
                    },
                    ending: Ending::Complete,
                    served_model: None,
                    transient: None,
                },
                Turn {
                    reasoning: None,
                    text: None,
                    actions: vec![],
                    usage: Usage::default(),
                    ending: Ending::HttpError(HttpFailure {
                        status: 429,
                        message: "slow down".into(),
                        kind: Some("rate_limit_error".into()),
                        code: Some("rate_limit_exceeded".into()),
                    }),
                    served_model: None,
                    transient: None,
                },
                Turn {
                    reasoning: None,
                    text: Some("partial".into()),
                    actions: vec![],
                    usage: Usage::default(),
                    ending: Ending::StreamError(StreamFailure {
                        message: "overloaded".into(),
                        kind: Some("overloaded_error".into()),
                    }),
                    served_model: None,
                    transient: None,
                },
                Turn {
                    reasoning: None,
                    text: None,
                    actions: vec![],
                    usage: Usage::default(),
                    ending: Ending::Disconnect,
                    served_model: None,
                    transient: None,
                },
                Turn {
                    reasoning: None,
                    text: Some("Done.".into()),
                    actions: vec![],
                    usage: Usage::default(),
                    ending: Ending::Complete,
                    served_model: Some("other".into()),
                    transient: None,
                },
            ],
        };
        assert_eq!(scenario, expected);
        assert_eq!(scenario.turn_count(), 5);
        assert_eq!(scenario.description(), Some("all the parts"));
    }

    #[test]
    fn unknown_field_names_field_and_line() {
        assert_eq!(
            parse_error("[[turn]]\ntext = \"a\"\n\n[[turn]]\ntxt = \"b\"\n"),
            "demo.toml:5:1: turn 2: txt: unknown field `txt`, expected one of `reasoning`, `text`, `action`, `usage`, `error`, `stream_error`, `disconnect`, `served_model`, `transient`"
        );
    }

    #[test]
    fn unknown_top_level_field() {
        assert_eq!(
            parse_error("name = \"x\"\n[[turn]]\ntext = \"a\"\n"),
            "demo.toml:1:1: name: unknown field `name`, expected one of `description`, `served_model`, `turn`"
        );
    }

    #[test]
    fn unknown_action_field_and_type() {
        assert_eq!(
            parse_error(
                "[[turn]]\n[[turn.action]]\ntype = \"shell\"\ncommand = \"ls\"\ncwd = \"/\"\n"
            ),
            "demo.toml:2:1: turn 1: action 1: unknown field `cwd`, expected `command` or `description`"
        );
        assert_eq!(
            parse_error("[[turn]]\n[[turn.action]]\ntype = \"delete\"\npath = \"a\"\n"),
            "demo.toml:3:8: turn 1: action 1: type: unknown variant `delete`, expected one of `shell`, `write`, `edit`, `read`, `call`"
        );
        assert_eq!(
            parse_error("[[turn]]\n[[turn.action]]\ncommand = \"ls\"\n"),
            "demo.toml:2:1: turn 1: action 1: missing field `type`"
        );
    }

    #[test]
    fn bad_type_names_line_and_column() {
        assert_eq!(
            parse_error("[[turn]]\ntext = 3\n"),
            "demo.toml:2:8: turn 1: text: invalid type: integer `3`, expected a string"
        );
        assert_eq!(
            parse_error("[[turn]]\ntext = \"a\"\nusage = { input = -5 }\n"),
            "demo.toml:3:19: turn 1: usage.input: invalid value: integer `-5`, expected a whole number, 0 or more"
        );
    }

    #[test]
    fn missing_field() {
        assert_eq!(
            parse_error("[[turn]]\n[[turn.action]]\ntype = \"write\"\npath = \"a.txt\"\n"),
            "demo.toml:2:1: turn 1: action 1: missing field `content`"
        );
        assert_eq!(
            parse_error("[[turn]]\nerror = { message = \"no\" }\n"),
            "demo.toml:2:9: turn 1: error: missing field `status`"
        );
    }

    /// Each error names the turn, the action and the key it is in, in a
    /// user's words: never the span wrapper a turn is read in nor a Rust
    /// type. Before, a turn that was no table was said to expect `struct
    /// RawTurn`, and no error named the turn or action it was in.
    #[test]
    fn an_error_names_the_turn_action_and_key_never_a_rust_name() {
        let cases = [
            (
                "turn = [1]\n",
                "demo.toml:1:9: turn 1: invalid type: integer `1`, expected a table",
            ),
            (
                "turn = 3\n",
                "demo.toml:1:8: turn: invalid type: integer `3`, expected a sequence",
            ),
            (
                "[[turn]]\ntext = \"a\"\n[[turn]]\naction = [{ type = \"write\", path = 3, content = \"x\" }]\n",
                "demo.toml:4:10: turn 2: action 1: invalid type: integer `3`, expected a string",
            ),
            (
                "served_model = 3\n[[turn]]\ntext=\"a\"\n",
                "demo.toml:1:16: served_model: invalid type: integer `3`, expected a string",
            ),
            (
                "[[turn]]\ntransient = { status = \"x\" }\n",
                "demo.toml:2:24: turn 1: transient.status: invalid type: string \"x\", expected a whole number, 0 or more",
            ),
            (
                "[[turn]]\nusage = 3\n",
                "demo.toml:2:9: turn 1: usage: invalid type: integer `3`, expected a table",
            ),
        ];
        let got: Vec<(&str, String)> = cases.iter().map(|(t, _)| (*t, parse_error(t))).collect();
        let want: Vec<(&str, String)> = cases.iter().map(|(t, w)| (*t, w.to_string())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn no_struct_names_says_a_table() {
        assert_eq!(
            no_struct_names("invalid type: integer `1`, expected struct $__serde_spanned_private_Spanned; or expected struct RawTurn"),
            "invalid type: integer `1`, expected a table; or expected a table"
        );
    }

    #[test]
    fn invalid_toml() {
        assert_eq!(
            parse_error("[[turn]\ntext = \"a\"\n"),
            "demo.toml:1:7: invalid table header; expected `.`, `]]`"
        );
    }

    #[test]
    fn empty_scenario() {
        assert_eq!(
            parse_error("description = \"nothing\"\n"),
            "demo.toml: the scenario has no turns; add at least one [[turn]]"
        );
        assert!(matches!(parse(""), Err(ScenarioError::Empty { .. })));
    }

    #[test]
    fn empty_turn() {
        assert_eq!(
            parse_error("[[turn]]\ntext = \"a\"\n\n[[turn]]\nusage = { input = 1 }\n"),
            "demo.toml:4: turn 2: text: the turn is empty: give it `text`, `reasoning` or an action, or make it fail"
        );
    }

    #[test]
    fn failure_turns_are_exclusive_and_bare() {
        assert_eq!(
            parse_error("[[turn]]\nerror = { status = 500, message = \"x\" }\ndisconnect = true\n"),
            "demo.toml:1: turn 1: error: a turn can fail in one way only: choose one of `error`, `stream_error` and `disconnect`"
        );
        assert_eq!(
            parse_error("[[turn]]\ntext = \"hi\"\nerror = { status = 500, message = \"x\" }\n"),
            "demo.toml:1: turn 1: text: an `error` turn answers with an HTTP error only; remove this field"
        );
        assert_eq!(
            parse_error("[[turn]]\ndisconnect = true\nusage = { output = 3 }\n"),
            "demo.toml:1: turn 1: usage: a stream that fails carries only `reasoning` and `text` before it breaks; remove this field"
        );
        assert_eq!(
            parse_error("[[turn]]\nerror = { status = 200, message = \"x\" }\n"),
            "demo.toml:1: turn 1: error.status: must be an HTTP error status (400 to 599), got 200"
        );
    }

    /// Usage near `i64::MAX` used to be accepted and make `paddock usage`
    /// print a negative cost.
    #[test]
    fn absurd_usage_is_refused_naming_file_turn_and_field() {
        assert_eq!(
            (
                parse_error("[[turn]]\ntext = \"a\"\nusage = { input = 9223372036854775000 }\n"),
                parse_error("[[turn]]\ntext = \"a\"\nusage = { output = 1000000001 }\n"),
            ),
            (
                "demo.toml:1: turn 1: usage.input: 9223372036854775000 tokens is absurd for one model call; at most 1000000000".to_string(),
                "demo.toml:1: turn 1: usage.output: 1000000001 tokens is absurd for one model call; at most 1000000000".to_string(),
            )
        );
        assert!(Scenario::from_toml(
            "[[turn]]\ntext = \"a\"\nusage = { input = 1000000000 }\n",
            Path::new("demo.toml")
        )
        .is_ok());
    }

    #[test]
    fn usage_and_action_checks() {
        assert_eq!(
            parse_error("[[turn]]\ntext = \"a\"\nusage = { output = 3, reasoning = 4 }\n"),
            "demo.toml:1: turn 1: usage.reasoning: reasoning tokens are a part of output tokens, so reasoning (4) cannot exceed output (3)"
        );
        assert_eq!(
            parse_error("[[turn]]\n[[turn.action]]\ntype = \"write\"\npath = \"/etc/passwd\"\ncontent = \"\"\n"),
            "demo.toml:1: turn 1: action 1 (write) path: must be relative to the checkout, got `/etc/passwd`"
        );
        assert_eq!(
            parse_error("[[turn]]\ntext = \"a\"\n[[turn.action]]\ntype = \"shell\"\ncommand = \"ls\"\n[[turn.action]]\ntype = \"read\"\npath = \"../x\"\n"),
            "demo.toml:1: turn 1: action 2 (read) path: must stay inside the checkout (no `..`), got `../x`"
        );
        assert_eq!(
            parse_error("[[turn]]\n[[turn.action]]\ntype = \"edit\"\npath = \"a\"\nold = \"x\"\nnew = \"x\"\n"),
            "demo.toml:1: turn 1: action 1 (edit) new: is the same as `old`; an edit must change something"
        );
        assert_eq!(
            parse_error("[[turn]]\n[[turn.action]]\ntype = \"read\"\npath = \"./\"\n"),
            "demo.toml:1: turn 1: action 1 (read) path: names the checkout itself, not a file in it"
        );
        assert_eq!(
            parse_error("[[turn]]\ntext = \"\"\n"),
            "demo.toml:1: turn 1: text: is empty; leave it out instead"
        );
    }

    #[test]
    fn load_reports_a_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing.toml");
        let err = Scenario::load(&path).unwrap_err();
        assert!(matches!(&err, ScenarioError::Read { path: p, .. } if p == &path));
        assert_eq!(
            err.to_string(),
            format!(
                "cannot read scenario {}: No such file or directory (os error 2)",
                path.display()
            )
        );
        std::fs::write(&path, "[[turn]]\ntext = \"hi\"\n").unwrap();
        assert_eq!(Scenario::load(&path).unwrap().origin(), path);
    }
}
