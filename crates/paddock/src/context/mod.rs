//! Context assembly: everything an engine finds in its checkout and prompt
//! besides the repository itself. From the job spec and a few plain inputs
//! ([`ContextInputs`]: the host profile's advisory and denied commands, the
//! repository's own `AGENTS.md`/`CLAUDE.md`, the tools on the engine's PATH)
//! it renders the generated `AGENTS.md` and `CLAUDE.md` (minijinja templates,
//! overridable per project), `.paddock/environment.json`,
//! `.paddock/tools.json`, the skills, and the prompt with its appendices.
//! [`Prepared::load`] reads and checks templates and skills at admission, so
//! bad input stops the job before anything is written; [`Prepared::render`]
//! is pure; [`install`] writes the result into a workspace, where none of it
//! reaches the job's patch.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use paddock_protocol::{plain_text, EngineKind, JobSpec};
use serde::Serialize;

use crate::workspace::Workspace;

pub mod install;
pub mod manifest;
pub mod skills;
pub mod templates;

#[cfg(test)]
mod tests;

pub use install::{install, write_to_dir, InstallError};
pub use skills::{Skill, SkillError};
pub use templates::{TemplateError, Templates};

/// Where the generated machine-readable files live in the checkout.
pub const PADDOCK_DIR: &str = ".paddock";

#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    #[error(transparent)]
    Template(#[from] TemplateError),
    #[error(transparent)]
    Skill(#[from] SkillError),
    #[error("context: cannot encode {file}: {message}")]
    Encode { file: String, message: String },
    #[error("context: cannot read the repository's {file} in {checkout}: {source}")]
    Repository {
        checkout: PathBuf,
        file: &'static str,
        source: std::io::Error,
    },
    #[error(transparent)]
    Install(#[from] InstallError),
}

/// The host profile as the context sees it: plain data, filled by the
/// policy part (the HostProfile) and empty when the job has none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PolicyContext {
    /// The profile's id, e.g. `constrained-local`.
    pub profile: Option<String>,
    /// The advisory text rendered into AGENTS.md/CLAUDE.md, e.g. "verify
    /// with targeted tests and push; CI runs the full build".
    pub advisory: Option<String>,
    /// Commands the host forbids (shown in the instructions and tools.json).
    pub denied_commands: Vec<String>,
    /// The OS limits the job runs under, as the profile states them.
    pub cpu_limit: Option<String>,
    pub memory_limit_mb: Option<u64>,
    pub max_concurrent_jobs: Option<u32>,
}

/// A repository's own instructions file at the checkout root.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Existing {
    #[default]
    Absent,
    /// A regular file with this text: kept and extended.
    File(String),
    /// A symbolic link (often `CLAUDE.md -> AGENTS.md`): left alone.
    Symlink,
    /// A regular file longer than [`MAX_INSTRUCTIONS_BYTES`] (its length):
    /// not read, left alone as a link is.
    Longer(u64),
}

/// The most of a repository's own instructions file (`AGENTS.md`,
/// `CLAUDE.md`) read, 16 MiB: what the patch reads back of a file Paddock
/// extended. The checkout is the repository's (a server's submitter names
/// any) or, on a next attempt, the branch an earlier job made, whose file
/// it could make a GiB long; read whole, it was held in Paddock's memory
/// several times over (the text, the file extending it, the other file's
/// template quoting it, the record of the extension).
pub const MAX_INSTRUCTIONS_BYTES: u64 = 16 << 20;

impl Existing {
    /// What is at `dir/name`: a link is not followed, a file that is not
    /// regular (a FIFO) is an error, never waited on.
    pub fn probe(dir: &Path, name: &str) -> std::io::Result<Existing> {
        use std::io::Read as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let path = dir.join(name);
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
            .open(&path)
        {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Existing::Absent),
            // O_NOFOLLOW's answer for a link.
            Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => return Ok(Existing::Symlink),
            Err(e) => return Err(e),
            Ok(file) => file,
        };
        let meta = file.metadata()?;
        if !meta.file_type().is_file() {
            return Err(std::io::Error::other("not a regular file"));
        }
        if meta.len() > MAX_INSTRUCTIONS_BYTES {
            return Ok(Existing::Longer(meta.len()));
        }
        let mut bytes = Vec::new();
        file.take(MAX_INSTRUCTIONS_BYTES + 1)
            .read_to_end(&mut bytes)?;
        if bytes.len() as u64 > MAX_INSTRUCTIONS_BYTES {
            return Ok(Existing::Longer(bytes.len() as u64));
        }
        String::from_utf8(bytes)
            .map(Existing::File)
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8"))
    }

    fn present(&self) -> bool {
        !matches!(self, Existing::Absent)
    }
}

/// What the context takes besides the spec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContextInputs {
    pub policy: PolicyContext,
    /// The checkout's own `AGENTS.md`.
    pub agents_md: Existing,
    /// The checkout's own `CLAUDE.md`.
    pub claude_md: Existing,
    /// Commands found on the engine's PATH (see [`manifest::probe_tools`]).
    pub available_tools: Vec<String>,
}

impl ContextInputs {
    /// Reads the repository's instructions files from a checkout.
    /// What the context leaves as it is and why: an instructions file
    /// longer than Paddock reads.
    pub fn warnings(&self) -> Vec<String> {
        [
            ("AGENTS.md", &self.agents_md),
            ("CLAUDE.md", &self.claude_md),
        ]
        .into_iter()
        .filter_map(|(name, e)| match e {
            Existing::Longer(len) => Some(format!(
                "{name}: the checkout's is {len} bytes long, more than the \
                     {MAX_INSTRUCTIONS_BYTES} Paddock reads of a repository's instructions \
                     file; it is left as it is, without Paddock's section"
            )),
            _ => None,
        })
        .collect()
    }

    pub fn with_repository(mut self, checkout: &Path) -> Result<ContextInputs, ContextError> {
        let probe = |file: &'static str| {
            Existing::probe(checkout, file).map_err(|source| ContextError::Repository {
                checkout: checkout.to_path_buf(),
                file,
                source,
            })
        };
        self.agents_md = probe("AGENTS.md")?;
        self.claude_md = probe("CLAUDE.md")?;
        Ok(self)
    }
}

/// The assemble step of a job: reads the checkout's own instructions files,
/// renders the context with `policy` (the seam with the policy part) and the
/// tools on the engine's PATH, and installs it into the workspace. Nothing is
/// written unless every file can be. With it, what was left as it is and
/// why ([`ContextInputs::warnings`]).
pub async fn assemble(
    prepared: &Prepared,
    spec: &JobSpec,
    ws: &Workspace,
    policy: PolicyContext,
    path_env: &str,
) -> Result<(Assembled, Vec<String>), ContextError> {
    let inputs = ContextInputs {
        policy,
        available_tools: manifest::probe_tools(path_env),
        ..ContextInputs::default()
    }
    .with_repository(&ws.work)?;
    let assembled = prepared.render(spec, &inputs)?;
    install(&assembled, ws).await?;
    Ok((assembled, inputs.warnings()))
}

/// A generated repository file extending a file the repository has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extension {
    /// The repository's text.
    pub original: String,
    /// What Paddock appends (the whole of it, separator included).
    pub appended: String,
}

/// One file Paddock puts into the checkout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedFile {
    /// Relative to the checkout root.
    pub path: String,
    /// The file as the engine will see it.
    pub contents: Vec<u8>,
    /// Set when the file extends the repository's own file.
    pub extends: Option<Extension>,
    /// Counted in the context size (false for skills, which engines load on demand).
    pub counted: bool,
}

/// The rendered context of one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assembled {
    pub prompt: String,
    pub files: Vec<GeneratedFile>,
}

/// One line of the size report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SizeLine {
    pub path: String,
    pub bytes: usize,
    pub tokens: usize,
}

/// The size of the rendered context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SizeReport {
    /// The prompt and every generated file but skills.
    pub files: Vec<SizeLine>,
    /// Skill files (loaded by the engines on demand).
    pub skills: Vec<SizeLine>,
    pub bytes: usize,
    pub tokens: usize,
    pub skill_bytes: usize,
    pub skill_tokens: usize,
}

/// Estimated tokens of a text: one per four characters, rounded up, the
/// usual rule of thumb for English prose and code with BPE tokenizers.
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// The name of the prompt in reports and in `paddock context` output.
pub const PROMPT_FILE: &str = "PROMPT.md";

impl Assembled {
    pub fn size(&self) -> SizeReport {
        let line = |path: &str, bytes: &[u8]| SizeLine {
            path: path.to_string(),
            bytes: bytes.len(),
            tokens: estimate_tokens(&String::from_utf8_lossy(bytes)),
        };
        let mut files = vec![line(PROMPT_FILE, self.prompt.as_bytes())];
        let mut skills = Vec::new();
        for f in &self.files {
            if f.counted {
                files.push(line(&f.path, &f.contents));
            } else {
                skills.push(line(&f.path, &f.contents));
            }
        }
        SizeReport {
            bytes: files.iter().map(|l| l.bytes).sum(),
            tokens: files.iter().map(|l| l.tokens).sum(),
            skill_bytes: skills.iter().map(|l| l.bytes).sum(),
            skill_tokens: skills.iter().map(|l| l.tokens).sum(),
            files,
            skills,
        }
    }
}

/// Templates and skills of one job, loaded and checked.
#[derive(Debug)]
pub struct Prepared {
    pub templates: Templates,
    pub skills: Vec<Skill>,
}

/// The variables the templates see (docs/context.md lists them).
#[derive(Debug, Serialize)]
struct Vars<'a> {
    ticket: TicketVars<'a>,
    attempt: u32,
    branch: String,
    engine: EngineVars<'a>,
    isolation: &'a str,
    limits: LimitVars,
    policy: &'a PolicyContext,
    skills: Vec<SkillVars<'a>>,
    bounces: Vec<AttemptVars<'a>>,
    /// Standing instructions (`context.instructions`; a turn's), plain.
    instructions: Option<Cow<'a, str>>,
    /// The file being rendered (`AGENTS.md`, `CLAUDE.md`; `PROMPT.md` for the prompt).
    file: &'a str,
    /// The file the engine reads its instructions from.
    instructions_file: &'a str,
    /// The file extends the repository's own.
    extends: bool,
    /// The repository's other instructions file, when only it exists.
    other_conventions: Option<&'a str>,
    /// That file's text (none when it is a symbolic link).
    other_conventions_text: Option<&'a str>,
}

/// The ticket as the templates see it: every text of the spec plain
/// ([`paddock_protocol::plain_text`]): a name one line, a text of several
/// lines its line breaks and tabs only, no escape, NUL, carriage return or
/// bidirectional control reaching the engine's instructions or prompt.
#[derive(Debug, Serialize)]
struct TicketVars<'a> {
    id: &'a str,
    title: Cow<'a, str>,
    #[serde(rename = "type")]
    kind: Cow<'a, str>,
    project: Cow<'a, str>,
    description: Cow<'a, str>,
    done_when: Vec<Cow<'a, str>>,
    constraints: Vec<Cow<'a, str>>,
    comments: Vec<CommentVars<'a>>,
    prior_attempts: Vec<AttemptVars<'a>>,
}

#[derive(Debug, Serialize)]
struct CommentVars<'a> {
    author: Cow<'a, str>,
    body: Cow<'a, str>,
    at: Option<Cow<'a, str>>,
}

#[derive(Debug, Clone, Serialize)]
struct AttemptVars<'a> {
    attempt: u32,
    outcome: Cow<'a, str>,
    summary: Cow<'a, str>,
    branch: Option<Cow<'a, str>>,
    tried: Vec<Cow<'a, str>>,
    failed: Vec<Cow<'a, str>>,
    bounce_comment: Option<Cow<'a, str>>,
}

/// Each of `texts` as plain text of several lines.
fn plain_texts(texts: &[String]) -> Vec<Cow<'_, str>> {
    texts.iter().map(|t| plain_text::text(t)).collect()
}

#[derive(Debug, Serialize)]
struct EngineVars<'a> {
    kind: &'a str,
    model: Cow<'a, str>,
}

#[derive(Debug, Serialize)]
struct LimitVars {
    timeout_secs: u64,
    /// The time budget in words: `30 min`, `90 s`.
    time: String,
    /// The model budget in dollars with two decimals, or none.
    budget_usd: Option<String>,
}

#[derive(Debug, Serialize)]
struct SkillVars<'a> {
    name: &'a str,
    description: &'a str,
}

/// The instructions file each engine reads (its adapter says which).
pub fn instructions_file(kind: EngineKind) -> &'static str {
    crate::engines::adapter(kind).instructions_file()
}

impl Prepared {
    /// Loads the spec's templates and skills; nothing is written.
    pub fn load(spec: &JobSpec) -> Result<Prepared, ContextError> {
        Ok(Prepared {
            templates: Templates::load(spec.context.templates_dir.as_deref())?,
            skills: skills::load(&spec.context)?,
        })
    }

    /// Renders the whole context. Pure: same inputs, same output.
    pub fn render<'a>(
        &self,
        spec: &'a JobSpec,
        inputs: &'a ContextInputs,
    ) -> Result<Assembled, ContextError> {
        let t = &spec.ticket;
        let attempts: Vec<AttemptVars<'_>> = t
            .prior_attempts
            .iter()
            .map(|a| AttemptVars {
                attempt: a.attempt,
                outcome: plain_text::line(&a.outcome),
                summary: plain_text::text(&a.summary),
                branch: a.branch.as_deref().map(plain_text::line),
                tried: plain_texts(&a.tried),
                failed: plain_texts(&a.failed),
                bounce_comment: a
                    .bounce_comment
                    .as_deref()
                    .map(plain_text::text)
                    .filter(|c| !c.trim().is_empty()),
            })
            .collect();
        let secs = spec.limits.timeout_secs;
        let base =
            |file: &'static str, extends: bool, other: Option<(&'static str, &'a Existing)>| Vars {
                ticket: TicketVars {
                    id: &t.id,
                    title: plain_text::line(&t.title),
                    kind: plain_text::line(&t.kind),
                    project: plain_text::line(&t.project),
                    description: plain_text::text(&t.description),
                    done_when: plain_texts(&t.done_when),
                    constraints: plain_texts(&t.constraints),
                    comments: t
                        .comments
                        .iter()
                        .map(|c| CommentVars {
                            author: plain_text::line(&c.author),
                            body: plain_text::text(&c.body),
                            at: c.at.as_deref().map(plain_text::line),
                        })
                        .collect(),
                    prior_attempts: attempts.clone(),
                },
                attempt: spec.attempt(),
                branch: spec.branch(),
                engine: EngineVars {
                    kind: spec.engine.kind.as_str(),
                    model: plain_text::line(&spec.engine.model),
                },
                isolation: spec.isolation.as_str(),
                limits: LimitVars {
                    timeout_secs: secs,
                    time: if secs.is_multiple_of(60) {
                        format!("{} min", secs / 60)
                    } else {
                        format!("{secs} s")
                    },
                    budget_usd: spec.budget.max_usd.map(|usd| format!("{usd:.2}")),
                },
                policy: &inputs.policy,
                skills: self
                    .skills
                    .iter()
                    .map(|s| SkillVars {
                        name: &s.name,
                        description: &s.description,
                    })
                    .collect(),
                bounces: attempts
                    .iter()
                    .filter(|a| a.bounce_comment.is_some())
                    .cloned()
                    .collect(),
                instructions: spec.context.instructions.as_deref().map(plain_text::text),
                file,
                instructions_file: instructions_file(spec.engine.kind),
                extends,
                other_conventions: other.map(|(name, _)| name),
                other_conventions_text: match other {
                    Some((_, Existing::File(text))) => Some(text.as_str()),
                    _ => None,
                },
            };

        let mut files = self.instruction_files(inputs, &base)?;
        files.extend(manifests(spec, inputs)?);
        files.extend(
            skills::install_paths(&self.skills)
                .into_iter()
                .map(|(path, skill, file)| GeneratedFile {
                    path,
                    contents: skill.files.get(file).cloned().unwrap_or_default(),
                    extends: None,
                    counted: false,
                }),
        );

        let prompt = self
            .templates
            .render("prompt.md.j2", &base("PROMPT.md", false, None))?;
        Ok(Assembled { prompt, files })
    }

    /// AGENTS.md and CLAUDE.md: generated where the repository has none,
    /// extended where it has one (never through a link); `base` makes the
    /// template's variables for a file.
    fn instruction_files<'i, 'v>(
        &self,
        inputs: &'i ContextInputs,
        base: &impl Fn(&'static str, bool, Option<(&'static str, &'i Existing)>) -> Vars<'v>,
    ) -> Result<Vec<GeneratedFile>, ContextError> {
        let mut files = Vec::new();
        for (name, template, own, other) in [
            (
                "AGENTS.md",
                "agents.md.j2",
                &inputs.agents_md,
                &inputs.claude_md,
            ),
            (
                "CLAUDE.md",
                "claude.md.j2",
                &inputs.claude_md,
                &inputs.agents_md,
            ),
        ] {
            let other_name = if name == "AGENTS.md" {
                "CLAUDE.md"
            } else {
                "AGENTS.md"
            };
            match own {
                Existing::Symlink | Existing::Longer(_) => {}
                Existing::Absent => {
                    let vars = base(name, false, other.present().then_some((other_name, other)));
                    let text = self.templates.render(template, &vars)?;
                    files.push(GeneratedFile {
                        path: name.to_string(),
                        contents: text.into_bytes(),
                        extends: None,
                        counted: true,
                    });
                }
                Existing::File(original) => {
                    let vars = base(name, true, None);
                    let block = self.templates.render(template, &vars)?;
                    let sep = if original.is_empty() || original.ends_with("\n\n") {
                        ""
                    } else if original.ends_with('\n') {
                        "\n"
                    } else {
                        "\n\n"
                    };
                    let appended = format!("{sep}{block}");
                    files.push(GeneratedFile {
                        path: name.to_string(),
                        contents: format!("{original}{appended}").into_bytes(),
                        extends: Some(Extension {
                            original: original.clone(),
                            appended,
                        }),
                        counted: true,
                    });
                }
            }
        }

        Ok(files)
    }
}

/// Writes `.paddock/environment.json` again for `spec` (a job moved to
/// another rung before anything of it ran: `runner/rung_fallback.rs`), over
/// the one [`assemble`] generated; the only file of the context that
/// names the rung. Nothing else of the context is rendered again: the
/// checkout now holds Paddock's own files, which a render would read as
/// the repository's.
pub async fn rewrite_environment(
    spec: &JobSpec,
    policy: &PolicyContext,
    ws: &Workspace,
) -> Result<(), ContextError> {
    let name = "environment.json";
    let mut text =
        serde_json::to_string_pretty(&manifest::environment(spec, policy)).map_err(|e| {
            ContextError::Encode {
                file: name.to_string(),
                message: e.to_string(),
            }
        })?;
    text.push('\n');
    ws.rewrite_generated(&format!("{PADDOCK_DIR}/{name}"), text.as_bytes())
        .await
        .map_err(|e| ContextError::Install(InstallError::Workspace(e)))
}

/// `.paddock/environment.json` and `tools.json`.
fn manifests(spec: &JobSpec, inputs: &ContextInputs) -> Result<Vec<GeneratedFile>, ContextError> {
    let mut files = Vec::new();
    let env = manifest::environment(spec, &inputs.policy);
    let tools = manifest::tools(spec, inputs);
    for (name, value) in [("environment.json", env), ("tools.json", tools)] {
        let mut text = serde_json::to_string_pretty(&value).map_err(|e| ContextError::Encode {
            file: name.to_string(),
            message: e.to_string(),
        })?;
        text.push('\n');
        files.push(GeneratedFile {
            path: format!("{PADDOCK_DIR}/{name}"),
            contents: text.into_bytes(),
            extends: None,
            counted: true,
        });
    }
    Ok(files)
}
