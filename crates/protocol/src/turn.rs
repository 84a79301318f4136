//! A turn request (`POST /v1/turns` of `paddock serve`, docs/api.md#turns):
//! one assistant turn, streamed back on the same response. It is a job
//! spec in short form: the engine and the upstream as a spec has them, the
//! agent's standing `instructions`, the user's text (`input`), inline
//! `skills`, and either inline `files` (the turn's workspace starts as
//! exactly these files) or a `repository` as a spec's. Unknown fields are
//! errors. [`TurnRequest::from_json`] parses and checks the turn's own
//! fields (each error names the field); [`TurnRequest::to_spec`] makes the
//! job spec the runner admits, whose own checks name the turn's fields
//! where a turn has them ([`turn_field`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::context::{ContextSpec, InlineSkill};
use crate::spec::{
    BudgetSpec, EngineSpec, Isolation, JobSpec, LimitsSpec, PolicySpec, RepositorySpec, SpecError,
    Ticket, UpstreamSpec, LIST_LIMIT,
};

/// The most bytes of `input` (a spec's `ticket.description`).
pub const INPUT_LIMIT: usize = 65_536;
/// The most bytes of `instructions` (a spec's `context.instructions`).
pub const INSTRUCTIONS_LIMIT: usize = 65_536;
/// The most bytes of one inline file.
pub const FILE_LIMIT: usize = 524_288;
/// The most bytes of all inline files together.
pub const FILES_LIMIT: usize = 1_048_576;
/// The most bytes of one inline file's path.
pub const PATH_LIMIT: usize = 4_096;
/// The task type every turn is recorded with.
pub const TURN_TYPE: &str = "turn";
/// How a turn's errors name it.
pub const ORIGIN: &str = "<turn request>";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnRequest {
    pub engine: EngineSpec,
    pub upstream: UpstreamSpec,
    /// Standing instructions: the generated `AGENTS.md`/`CLAUDE.md`.
    #[serde(default)]
    pub instructions: String,
    /// The user's text: the turn's prompt.
    pub input: String,
    /// Inline skills, as a spec's `[[context.skill]]`.
    #[serde(default)]
    pub skills: Vec<InlineSkill>,
    /// The workspace's files: a relative path → its text.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// A repository instead of `files`, as a spec's `[repository]`.
    #[serde(default)]
    pub repository: Option<RepositorySpec>,
    /// The project the turn is accounted to.
    #[serde(default = "default_project")]
    pub project: String,
    #[serde(default)]
    pub budget: BudgetSpec,
    #[serde(default)]
    pub limits: LimitsSpec,
    #[serde(default)]
    pub isolation: Isolation,
    #[serde(default)]
    pub policy: PolicySpec,
}

fn default_project() -> String {
    "default".to_string()
}

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> SpecError {
    SpecError::Invalid {
        path: PathBuf::from(ORIGIN),
        field: field.into(),
        reason: reason.into(),
    }
}

impl TurnRequest {
    /// Parses a turn request and checks its own fields.
    pub fn from_json(text: &str) -> Result<TurnRequest, SpecError> {
        let mut de = serde_json::Deserializer::from_str(text);
        let turn: TurnRequest = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let (field, message) = crate::parse_error::json(e);
            SpecError::Parse {
                path: PathBuf::from(ORIGIN),
                field,
                message,
            }
        })?;
        turn.validate()?;
        Ok(turn)
    }

    /// The turn's own checks (the rest are the job spec's).
    pub fn validate(&self) -> Result<(), SpecError> {
        if self.input.trim().is_empty() {
            return Err(invalid("input", "must not be empty"));
        }
        if self.input.len() > INPUT_LIMIT {
            return Err(invalid(
                "input",
                format!(
                    "{} bytes, over the limit of {INPUT_LIMIT} bytes",
                    self.input.len()
                ),
            ));
        }
        if self.instructions.len() > INSTRUCTIONS_LIMIT {
            return Err(invalid(
                "instructions",
                format!(
                    "{} bytes, over the limit of {INSTRUCTIONS_LIMIT} bytes",
                    self.instructions.len()
                ),
            ));
        }
        if self.repository.is_some() && !self.files.is_empty() {
            return Err(invalid("files", "give `files` or `repository`, not both"));
        }
        check_files(&self.files)
    }

    /// The job spec of this turn: ticket `ticket_id` of type `turn`, the
    /// input as its description, the instructions and skills as its
    /// context, the repository given or `source` (where the server wrote
    /// the inline files). Parsed and checked as a spec, relative paths
    /// resolved against `base`; errors name the turn's fields.
    pub fn to_spec(
        &self,
        ticket_id: &str,
        source: Option<&Path>,
        base: &Path,
    ) -> Result<JobSpec, SpecError> {
        let repository = match (&self.repository, source) {
            (Some(r), _) => r.clone(),
            (None, source) => RepositorySpec {
                path: Some(source.unwrap_or(Path::new(".")).to_path_buf()),
                url: None,
                base_ref: "HEAD".into(),
                token: None,
            },
        };
        let context = ContextSpec {
            inline_skills: self.skills.clone(),
            instructions: Some(self.instructions.clone()).filter(|i| !i.trim().is_empty()),
            ..ContextSpec::default()
        };
        let ticket = Ticket {
            id: ticket_id.to_owned(),
            title: title(&self.input),
            kind: TURN_TYPE.into(),
            project: self.project.clone(),
            description: self.input.clone(),
            done_when: Vec::new(),
            constraints: Vec::new(),
            touch_only: Vec::new(),
            comments: Vec::new(),
            prior_attempts: Vec::new(),
        };
        let value = serde_json::json!({
            "ticket": ticket,
            "repository": repository,
            "engine": self.engine,
            "upstream": self.upstream,
            "budget": self.budget,
            "limits": self.limits,
            "isolation": self.isolation,
            "context": context,
            "policy": self.policy,
        });
        JobSpec::from_text(&value.to_string(), Path::new(ORIGIN), base).map_err(|e| match e {
            SpecError::Parse {
                path,
                field,
                message,
            } => SpecError::Parse {
                path,
                field: turn_field(&field),
                message,
            },
            SpecError::Invalid {
                path,
                field,
                reason,
            } => SpecError::Invalid {
                path,
                field: turn_field(&field),
                reason,
            },
            other => other,
        })
    }
}

/// A spec's field as the turn names it: `ticket.*` is `input` (the title
/// and the description come from it), `context.skill` is `skills`,
/// `context.instructions` is `instructions`, `ticket.project` is
/// `project`; the rest are spelled alike.
pub fn turn_field(field: &str) -> String {
    if field == "ticket.project" {
        return "project".into();
    }
    if field == "ticket" || field.starts_with("ticket.") {
        return "input".into();
    }
    if let Some(rest) = field.strip_prefix("context.skill") {
        return format!("skills{rest}");
    }
    if field == "context.instructions" {
        return "instructions".into();
    }
    field.to_owned()
}

/// The ticket's title: the input's first non-blank line, cut to 120
/// characters.
fn title(input: &str) -> String {
    let line = input
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("turn");
    // A title is one line of plain text (`JobSpec::validate`): the input's
    // control characters (a tab, an escape) and bidirectional controls
    // are left out of it.
    let plain = crate::plain_text::line(line);
    let plain = plain.trim();
    if plain.is_empty() {
        return "turn".to_string();
    }
    let mut title: String = plain.chars().take(120).collect();
    if title.len() < plain.len() {
        title.push('…');
    }
    title
}

/// The inline files: at most [`LIST_LIMIT`], each path relative with plain
/// segments (no `.`, `..`, empty or `.git` segment, no control
/// characters), none a directory of another, each text within
/// [`FILE_LIMIT`] and all within [`FILES_LIMIT`].
fn check_files(files: &BTreeMap<String, String>) -> Result<(), SpecError> {
    if files.len() > LIST_LIMIT {
        return Err(invalid(
            "files",
            format!("{} files, over the limit of {LIST_LIMIT}", files.len()),
        ));
    }
    let mut total = 0usize;
    for (path, text) in files {
        let field = format!("files[{path:?}]");
        check_path(path).map_err(|reason| invalid(&field, reason))?;
        if text.len() > FILE_LIMIT {
            return Err(invalid(
                &field,
                format!("{} bytes, over the limit of {FILE_LIMIT} bytes", text.len()),
            ));
        }
        total = total.saturating_add(text.len());
        let mut dir = path.as_str();
        while let Some((parent, _)) = dir.rsplit_once('/') {
            if files.contains_key(parent) {
                return Err(invalid(
                    &field,
                    format!("`{parent}` is given as a file, so it cannot be a directory"),
                ));
            }
            dir = parent;
        }
    }
    if total > FILES_LIMIT {
        return Err(invalid(
            "files",
            format!("{total} bytes in all, over the limit of {FILES_LIMIT} bytes"),
        ));
    }
    Ok(())
}

/// One inline file's path.
fn check_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("the path must not be empty".into());
    }
    if path.len() > PATH_LIMIT {
        return Err(format!(
            "the path is {} bytes, over the limit of {PATH_LIMIT} bytes",
            path.len()
        ));
    }
    if path.starts_with('/') {
        return Err("the path must be relative (no leading `/`)".into());
    }
    if path.chars().any(char::is_control) {
        return Err("the path must not contain control characters".into());
    }
    for segment in path.split('/') {
        match segment {
            "" => {
                return Err(
                    "the path must not have an empty segment (`//` or a trailing `/`)".into(),
                )
            }
            "." | ".." => return Err(format!("the path must not have a `{segment}` segment")),
            s if s.eq_ignore_ascii_case(".git") => {
                return Err("the path must not have a `.git` segment".into())
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    const MINIMAL: &str = r#"{"engine": {"kind": "codex", "model": "gpt-5.5"},
        "upstream": {"provider": "scripted", "scenario": "s.toml"}, "input": "Say hello."}"#;

    fn with(extra: &str) -> Result<TurnRequest, String> {
        let text = MINIMAL.replacen('{', &format!("{{{extra},"), 1);
        TurnRequest::from_json(&text).map_err(|e| e.to_string())
    }

    #[test]
    fn a_turn_becomes_a_job_spec_of_type_turn() {
        let turn =
            with(r#""instructions": "Be brief.", "files": {"a/b.txt": "x"}, "project": "chat""#)
                .unwrap();
        let spec = turn
            .to_spec("turn-1", Some(Path::new("/src")), Path::new("/cwd"))
            .unwrap();
        assert_eq!(
            (
                spec.ticket.id.as_str(),
                spec.ticket.kind.as_str(),
                spec.ticket.project.as_str(),
                spec.ticket.title.as_str(),
                spec.ticket.description.as_str(),
                spec.context.instructions.as_deref(),
                spec.repository.path.as_deref(),
                spec.upstream.scenario.as_deref(),
            ),
            (
                "turn-1",
                "turn",
                "chat",
                "Say hello.",
                "Say hello.",
                Some("Be brief."),
                Some(Path::new("/src")),
                Some(Path::new("/cwd/s.toml")),
            )
        );
    }

    #[test]
    fn each_bad_field_is_named() {
        let cases = [
            (r#""input2": 1"#, "job spec <turn request>: field `input2`: unknown field `input2`, expected one of `engine`, `upstream`, `instructions`, `input`, `skills`, `files`, `repository`, `project`, `budget`, `limits`, `isolation`, `policy` at line 1 column 9"),
            (r#""files": {"/etc/passwd": "x"}"#, "job spec <turn request>: field `files[\"/etc/passwd\"]`: the path must be relative (no leading `/`)"),
            (r#""files": {"a/../b": "x"}"#, "job spec <turn request>: field `files[\"a/../b\"]`: the path must not have a `..` segment"),
            (r#""files": {"x/.GIT/config": "x"}"#, "job spec <turn request>: field `files[\"x/.GIT/config\"]`: the path must not have a `.git` segment"),
            (r#""files": {"a//b": "x"}"#, "job spec <turn request>: field `files[\"a//b\"]`: the path must not have an empty segment (`//` or a trailing `/`)"),
            (r#""files": {"a": "x", "a/b": "y"}"#, "job spec <turn request>: field `files[\"a/b\"]`: `a` is given as a file, so it cannot be a directory"),
            (r#""files": {"a": "x"}, "repository": {"path": "."}"#, "job spec <turn request>: field `files`: give `files` or `repository`, not both"),
        ];
        let got: Vec<String> = cases
            .iter()
            .map(|(extra, _)| with(extra).map(|_| ()).unwrap_err())
            .collect();
        let want: Vec<String> = cases.iter().map(|(_, e)| e.to_string()).collect();
        assert_eq!(got, want);
        let blank = MINIMAL.replace("Say hello.", "  ");
        let big = MINIMAL.replace("Say hello.", &"x".repeat(INPUT_LIMIT + 1));
        assert_eq!(
            (
                TurnRequest::from_json(&blank).map(|_| ()).map_err(|e| e.to_string()),
                TurnRequest::from_json(&big).map(|_| ()).map_err(|e| e.to_string()),
            ),
            (
                Err("job spec <turn request>: field `input`: must not be empty".to_string()),
                Err("job spec <turn request>: field `input`: 65537 bytes, over the limit of 65536 bytes".to_string()),
            )
        );
    }

    #[test]
    fn the_spec_s_own_checks_name_the_turn_s_fields() {
        let spec = |extra: &str| {
            with(extra)
                .unwrap()
                .to_spec("turn-1", Some(Path::new("/src")), Path::new("/cwd"))
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        let skill = format!(
            r#""skills": [{{"name": "s", "description": "d", "body": "{}"}}]"#,
            "b".repeat(32_769)
        );
        assert_eq!(
            (
                spec(r#""project": """#),
                spec(&skill),
                spec(r#""limits": {"timeout_secs": 0}"#),
            ),
            (
                Err("job spec <turn request>: field `project`: must not be empty".to_string()),
                Err("job spec <turn request>: field `skills[0].body`: 32769 bytes, over the limit of 32768 bytes".to_string()),
                Err("job spec <turn request>: field `limits.timeout_secs`: must be at least 1".to_string()),
            )
        );
    }
}
