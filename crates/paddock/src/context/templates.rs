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
    #[error("context.templates_dir {dir}: cannot read {file}: {source}")]
    Read {
        dir: PathBuf,
        file: String,
        source: std::io::Error,
    },
    #[error("context.templates_dir {dir}: cannot read the directory: {source}")]
    Dir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("context.templates_dir {dir}: {file} is not a known template (expected one of brief.md.j2, agents.md.j2, claude.md.j2, prompt.md.j2)")]
    Unknown { dir: PathBuf, file: String },
    #[error("context.templates_dir {dir}: {file} is a symbolic link or not a regular file; templates are regular files only")]
    NotRegular { dir: PathBuf, file: String },
    #[error("context template {origin}: {message}")]
    Compile { origin: String, message: String },
    #[error("context template {name}: cannot render: {message}")]
    Render { name: String, message: String },
}

/// The text of template `file` of `dir`, opened without following a
/// link and only when it is a regular file (a FIFO would hold admission):
/// a link among a directory's templates could lead anywhere on the host,
/// and a submitted spec names only directories the server allows
/// (`server::submissions`), so what they hold is read as it is.
fn read_regular(dir: &Path, file: &str) -> Result<String, TemplateError> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let read = |source| TemplateError::Read {
        dir: dir.to_path_buf(),
        file: file.to_owned(),
        source,
    };
    let not_regular = || TemplateError::NotRegular {
        dir: dir.to_path_buf(),
        file: file.to_owned(),
    };
    let mut handle = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(dir.join(file))
    {
        Ok(h) => h,
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => return Err(not_regular()),
        Err(e) => return Err(read(e)),
    };
    if !handle.metadata().map_err(read)?.is_file() {
        return Err(not_regular());
    }
    let mut text = String::new();
    handle.read_to_string(&mut text).map_err(read)?;
    Ok(text)
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
            let read = |source| TemplateError::Dir {
                dir: dir.to_path_buf(),
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
                slot.1 = read_regular(dir, &file)?;
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
    crate::error_chain::with_causes(s, std::error::Error::source(e))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A templates directory that is not there is named as one (it was
    /// "cannot read .").
    #[test]
    fn a_missing_templates_directory_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("templates");
        assert_eq!(
            Templates::load(Some(&gone)).err().map(|e| e.to_string()),
            Some(format!(
                "context.templates_dir {}: cannot read the directory: {}",
                gone.display(),
                std::io::Error::from_raw_os_error(2)
            ))
        );
    }

    /// A template that is a link (to a file anywhere on the host) or a
    /// FIFO is refused by name, never read through or waited on; a
    /// regular file is read.
    #[test]
    fn templates_are_regular_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret");
        std::fs::write(&secret, "TOPSECRET\n").unwrap();
        let tpl = dir.path().join("tpl");
        std::fs::create_dir(&tpl).unwrap();
        std::os::unix::fs::symlink(&secret, tpl.join("prompt.md.j2")).unwrap();
        let refused = |file: &str| {
            format!(
                "context.templates_dir {}: {file} is a symbolic link or not a regular file; \
                 templates are regular files only",
                tpl.display()
            )
        };
        assert_eq!(
            Templates::load(Some(&tpl)).unwrap_err().to_string(),
            refused("prompt.md.j2")
        );
        std::fs::remove_file(tpl.join("prompt.md.j2")).unwrap();
        nix::unistd::mkfifo(&tpl.join("brief.md.j2"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert_eq!(
            Templates::load(Some(&tpl)).unwrap_err().to_string(),
            refused("brief.md.j2")
        );
        std::fs::remove_file(tpl.join("brief.md.j2")).unwrap();
        std::fs::write(tpl.join("prompt.md.j2"), "Do {{ x }}.\n").unwrap();
        let loaded = Templates::load(Some(&tpl)).unwrap();
        assert_eq!(
            loaded
                .env
                .get_template("prompt.md.j2")
                .unwrap()
                .render(minijinja::context! { x => "it" })
                .unwrap(),
            "Do it.\n"
        );
    }
}
