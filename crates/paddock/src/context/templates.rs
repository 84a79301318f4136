//! The templates that render the generated `AGENTS.md`, `CLAUDE.md` and the
//! prompt, with minijinja. Paddock's defaults are compiled in (from
//! `crates/paddock/templates/`); a project overrides any of them with a file
//! of the same name in `context.templates_dir`. Every template is loaded and
//! compiled when the job is admitted, so a broken override is bad input
//! before anything runs. The variables are documented in docs/context.md.

use std::path::{Path, PathBuf};

use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;

/// The templates, by name, with Paddock's default text.
pub const DEFAULTS: [(&str, &str); 4] = [
    ("brief.md.j2", include_str!("../../templates/brief.md.j2")),
    ("agents.md.j2", include_str!("../../templates/agents.md.j2")),
    ("claude.md.j2", include_str!("../../templates/claude.md.j2")),
    ("prompt.md.j2", include_str!("../../templates/prompt.md.j2")),
];

#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("context templates {dir}: cannot read {file}: {source}")]
    Read {
        dir: PathBuf,
        file: String,
        source: std::io::Error,
    },
    #[error("context templates {dir}: {file} is not a known template (expected one of brief.md.j2, agents.md.j2, claude.md.j2, prompt.md.j2)")]
    Unknown { dir: PathBuf, file: String },
    #[error("context template {origin}: {message}")]
    Compile { origin: String, message: String },
    #[error("context template {name}: cannot render: {message}")]
    Render { name: String, message: String },
}

/// The compiled templates of one job.
#[derive(Debug)]
pub struct Templates {
    env: Environment<'static>,
}

impl Templates {
    /// The defaults, with every file of `overrides` (when given) replacing
    /// the default of the same name.
    pub fn load(overrides: Option<&Path>) -> Result<Templates, TemplateError> {
        let mut sources: Vec<(String, String, String)> = DEFAULTS
            .iter()
            .map(|(name, text)| {
                (
                    name.to_string(),
                    text.to_string(),
                    format!("{name} (default)"),
                )
            })
            .collect();
        if let Some(dir) = overrides {
            let read = |source| TemplateError::Read {
                dir: dir.to_path_buf(),
                file: ".".to_string(),
                source,
            };
            let mut files = Vec::new();
            for entry in std::fs::read_dir(dir).map_err(read)? {
                let entry = entry.map_err(read)?;
                files.push(entry.file_name().to_string_lossy().into_owned());
            }
            files.sort();
            for file in files {
                let Some(slot) = sources.iter_mut().find(|(name, _, _)| *name == file) else {
                    return Err(TemplateError::Unknown {
                        dir: dir.to_path_buf(),
                        file,
                    });
                };
                let path = dir.join(&file);
                slot.1 = std::fs::read_to_string(&path).map_err(|source| TemplateError::Read {
                    dir: dir.to_path_buf(),
                    file: file.clone(),
                    source,
                })?;
                slot.2 = path.display().to_string();
            }
        }
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_keep_trailing_newline(true);
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        // Markdown, not HTML: no escaping.
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
        for (name, text, origin) in sources {
            env.add_template_owned(name, text)
                .map_err(|e| TemplateError::Compile {
                    origin,
                    message: describe(&e),
                })?;
        }
        Ok(Templates { env })
    }

    /// Renders one template with `vars`.
    pub fn render(&self, name: &str, vars: &impl Serialize) -> Result<String, TemplateError> {
        let render_err = |e: minijinja::Error| TemplateError::Render {
            name: name.to_string(),
            message: describe(&e),
        };
        let tmpl = self.env.get_template(name).map_err(render_err)?;
        tmpl.render(vars).map_err(render_err)
    }
}

/// A minijinja error with its location and cause chain.
fn describe(e: &minijinja::Error) -> String {
    let mut s = e.to_string();
    if let (Some(name), Some(line)) = (e.name(), e.line()) {
        if !s.contains(&format!("line {line}")) {
            s.push_str(&format!(" ({name} line {line})"));
        }
    }
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        s.push_str(&format!(": {inner}"));
        source = inner.source();
    }
    s
}
