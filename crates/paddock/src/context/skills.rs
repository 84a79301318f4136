//! Skills: loaded from the spec's library directory (`context.skills_dir`,
//! one directory per skill with a `SKILL.md`) and from inline
//! `[[context.skill]]` tables, validated before anything is written: a name
//! is lowercase letters, digits and `-` (so no `..`, no `/`, no absolute
//! path), names do not collide, supporting files stay inside their skill,
//! and sizes are capped. Each skill is installed as
//! `.agents/skills/<name>/` and `.claude/skills/<name>/`.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use paddock_protocol::ContextSpec;

/// Where skills are written in the checkout: the Agent Skills location (Codex
/// and others) and Claude Code's project skills.
pub const SKILL_ROOTS: [&str; 2] = [".agents/skills", ".claude/skills"];
/// At most this many skills per job.
pub const MAX_SKILLS: usize = 32;
/// At most this many bytes in one `SKILL.md`.
pub const MAX_SKILL_MD_BYTES: usize = 32 * 1024;
/// At most this many bytes in one skill, supporting files included.
pub const MAX_SKILL_BYTES: usize = 512 * 1024;
/// At most this many files in one skill, `SKILL.md` included.
pub const MAX_SKILL_FILES: usize = 64;
const MAX_NAME: usize = 64;
const MAX_DESCRIPTION: usize = 1024;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SkillError {
    #[error("skill `{name}` ({origin}): {reason}")]
    InvalidName {
        name: String,
        origin: String,
        reason: &'static str,
    },
    #[error("skill `{name}` is given twice: {first} and {second}")]
    Collision {
        name: String,
        first: String,
        second: String,
    },
    #[error("skill `{name}` ({origin}): file `{file}`: {reason}")]
    InvalidFile {
        name: String,
        origin: String,
        file: String,
        reason: String,
    },
    #[error("skill `{name}` ({origin}): {reason}")]
    Invalid {
        name: String,
        origin: String,
        reason: String,
    },
    #[error("skill library {path} (context.skills_dir): cannot read: {message}")]
    Library { path: PathBuf, message: String },
    #[error("context.skills: skill `{name}` is not in the library {library} (context.skills_dir)")]
    NotInLibrary { name: String, library: PathBuf },
    #[error("too many skills: {count} (at most {MAX_SKILLS})")]
    TooMany { count: usize },
}

/// One validated skill, ready to be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// Where it came from (`library DIR` or `inline context.skill[i]`), for messages.
    pub origin: String,
    /// Relative path inside the skill's directory → contents; always has `SKILL.md`.
    pub files: BTreeMap<String, Vec<u8>>,
}

/// Checks a skill name: 1–64 of `a-z 0-9 -`, not starting or ending with `-`.
pub fn check_name(name: &str, origin: &str) -> Result<(), SkillError> {
    let bad = |reason| {
        Err(SkillError::InvalidName {
            name: name.to_string(),
            origin: origin.to_string(),
            reason,
        })
    };
    if name.is_empty() {
        return bad("the name is empty");
    }
    if name.starts_with('/') {
        return bad("the name is an absolute path; a skill name is one directory name");
    }
    if name.contains("..") {
        return bad("the name contains `..`; a skill may not leave its directory");
    }
    if name.contains('/') || name.contains('\\') {
        return bad("the name contains a path separator; a skill name is one directory name");
    }
    if name.len() > MAX_NAME {
        return bad("the name is longer than 64 characters");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        || name.starts_with('-')
        || name.ends_with('-')
    {
        return bad(
            "a skill name is lowercase letters, digits and `-`, not starting or ending with `-`",
        );
    }
    Ok(())
}

/// Checks a supporting file's path: relative, inside the skill, not `SKILL.md`.
fn check_file_path(skill: &str, origin: &str, file: &str) -> Result<(), SkillError> {
    let bad = |reason: &str| {
        Err(SkillError::InvalidFile {
            name: skill.to_string(),
            origin: origin.to_string(),
            file: file.to_string(),
            reason: reason.to_string(),
        })
    };
    let path = Path::new(file);
    if file.is_empty() {
        return bad("the path is empty");
    }
    if path.is_absolute() {
        return bad("the path is absolute; give it relative to the skill's directory");
    }
    if !path.components().all(|c| matches!(c, Component::Normal(_))) {
        return bad("the path leaves the skill's directory (`..` or `.`)");
    }
    if file == "SKILL.md" {
        return bad("`SKILL.md` is written from the skill's name, description and body");
    }
    Ok(())
}

fn check_description(name: &str, origin: &str, description: &str) -> Result<(), SkillError> {
    // One line of plain text, as a ticket's title: the description is
    // written into AGENTS.md/CLAUDE.md and SKILL.md, which the engine
    // reads, so an escape, a bidirectional control or an invisible
    // character (tag characters spelling hidden text) is refused by its
    // code point, never echoed (`paddock_protocol::plain_text`).
    let reason = if description.trim().is_empty() {
        "the description is empty".to_string()
    } else if description.len() > MAX_DESCRIPTION {
        "the description is longer than 1024 characters".to_string()
    } else if description.contains(['\n', '\r']) {
        "the description must be one line".to_string()
    } else if let Some(at) = paddock_protocol::plain_text::first_not_plain(description) {
        format!("the description must be plain text: {at}")
    } else {
        return Ok(());
    };
    Err(SkillError::Invalid {
        name: name.to_string(),
        origin: origin.to_string(),
        reason,
    })
}

fn check_sizes(skill: &Skill) -> Result<(), SkillError> {
    let invalid = |reason: String| SkillError::Invalid {
        name: skill.name.clone(),
        origin: skill.origin.clone(),
        reason,
    };
    let md = skill.files.get("SKILL.md").map(Vec::len).unwrap_or(0);
    if md > MAX_SKILL_MD_BYTES {
        return Err(invalid(format!(
            "SKILL.md has {md} bytes (at most {MAX_SKILL_MD_BYTES})"
        )));
    }
    if skill.files.len() > MAX_SKILL_FILES {
        return Err(invalid(format!(
            "{} files (at most {MAX_SKILL_FILES})",
            skill.files.len()
        )));
    }
    let total: usize = skill.files.values().map(Vec::len).sum();
    if total > MAX_SKILL_BYTES {
        return Err(invalid(format!(
            "{total} bytes in all (at most {MAX_SKILL_BYTES})"
        )));
    }
    Ok(())
}

/// The `SKILL.md` of an inline skill: Agent Skills front matter, then the body.
pub fn skill_md(name: &str, description: &str, body: &str) -> String {
    let body = body.trim_end();
    format!("---\nname: {name}\ndescription: {description}\n---\n\n{body}\n")
}

/// Reads `name:` and `description:` from a `SKILL.md`'s front matter.
fn front_matter(text: &str) -> Option<(String, String)> {
    let mut lines = text.lines();
    if lines.next()?.trim_end() != "---" {
        return None;
    }
    let mut name = None;
    let mut description = None;
    for line in lines {
        if line.trim_end() == "---" {
            return Some((name?, description?));
        }
        if let Some(v) = line.strip_prefix("name:") {
            name = Some(unquote(v.trim()));
        } else if let Some(v) = line.strip_prefix("description:") {
            description = Some(unquote(v.trim()));
        }
    }
    None
}

fn unquote(v: &str) -> String {
    let q = |c| v.len() >= 2 && v.starts_with(c) && v.ends_with(c);
    if q('"') || q('\'') {
        v[1..v.len() - 1].to_string()
    } else {
        v.to_string()
    }
}

/// Loads and validates every skill the spec asks for. Nothing is written.
pub fn load(spec: &ContextSpec) -> Result<Vec<Skill>, SkillError> {
    let mut skills: Vec<Skill> = Vec::new();
    if let Some(library) = &spec.skills_dir {
        let names = match &spec.skills {
            Some(names) => names.clone(),
            None => library_names(library)?,
        };
        for name in names {
            let origin = format!("library {}", library.display());
            check_name(&name, &origin)?;
            skills.push(load_from_library(library, &name, &origin)?);
        }
    }
    for (i, inline) in spec.inline_skills.iter().enumerate() {
        let origin = format!("inline context.skill[{i}]");
        check_name(&inline.name, &origin)?;
        check_description(&inline.name, &origin, &inline.description)?;
        let mut files = BTreeMap::new();
        for (path, text) in &inline.files {
            check_file_path(&inline.name, &origin, path)?;
            files.insert(path.clone(), text.clone().into_bytes());
        }
        files.insert(
            "SKILL.md".to_string(),
            // The body is the spec's text of several lines, plain as the
            // ticket's texts are in the brief (its line breaks and tabs
            // kept; no escape, bidirectional or invisible character).
            skill_md(
                &inline.name,
                &inline.description,
                &paddock_protocol::plain_text::text(&inline.body),
            )
            .into_bytes(),
        );
        skills.push(Skill {
            name: inline.name.clone(),
            description: inline.description.clone(),
            origin,
            files,
        });
    }
    for (i, s) in skills.iter().enumerate() {
        if let Some(first) = skills[..i].iter().find(|o| o.name == s.name) {
            return Err(SkillError::Collision {
                name: s.name.clone(),
                first: first.origin.clone(),
                second: s.origin.clone(),
            });
        }
        check_sizes(s)?;
    }
    if skills.len() > MAX_SKILLS {
        return Err(SkillError::TooMany {
            count: skills.len(),
        });
    }
    Ok(skills)
}

/// The skill directories of a library, sorted.
fn library_names(library: &Path) -> Result<Vec<String>, SkillError> {
    let read_err = |e: std::io::Error| SkillError::Library {
        path: library.to_path_buf(),
        message: e.to_string(),
    };
    let mut names = Vec::new();
    for entry in std::fs::read_dir(library).map_err(read_err)? {
        let entry = entry.map_err(read_err)?;
        if entry.file_type().map_err(read_err)?.is_dir() {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    Ok(names)
}

fn load_from_library(library: &Path, name: &str, origin: &str) -> Result<Skill, SkillError> {
    let dir = library.join(name);
    // A link named as a skill could lead anywhere on the host; listing
    // the library skips one, and naming it is refused as its files are.
    if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(SkillError::Invalid {
            name: name.to_string(),
            origin: origin.to_string(),
            reason: "is a symbolic link; a library's skills are directories".to_string(),
        });
    }
    if !dir.is_dir() {
        return Err(SkillError::NotInLibrary {
            name: name.to_string(),
            library: library.to_path_buf(),
        });
    }
    let mut files = BTreeMap::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let here = dir.join(&rel);
        let rd = std::fs::read_dir(&here).map_err(|e| SkillError::Library {
            path: here.clone(),
            message: e.to_string(),
        })?;
        for entry in rd {
            let entry = entry.map_err(|e| SkillError::Library {
                path: here.clone(),
                message: e.to_string(),
            })?;
            let rel_path = rel.join(entry.file_name());
            let shown = rel_path.display().to_string();
            let invalid = |reason: &str| SkillError::InvalidFile {
                name: name.to_string(),
                origin: origin.to_string(),
                file: shown.clone(),
                reason: reason.to_string(),
            };
            let ft = entry
                .file_type()
                .map_err(|e| invalid(&format!("cannot read: {e}")))?;
            if ft.is_symlink() {
                return Err(invalid(
                    "is a symbolic link; skills hold regular files only",
                ));
            } else if ft.is_dir() {
                stack.push(rel_path);
            } else if ft.is_file() {
                if files.len() >= MAX_SKILL_FILES {
                    return Err(SkillError::Invalid {
                        name: name.to_string(),
                        origin: origin.to_string(),
                        reason: format!("more than {MAX_SKILL_FILES} files"),
                    });
                }
                let bytes = std::fs::read(entry.path())
                    .map_err(|e| invalid(&format!("cannot read: {e}")))?;
                files.insert(shown, bytes);
            } else {
                return Err(invalid("is not a regular file"));
            }
        }
    }
    let Some(md) = files.get("SKILL.md") else {
        return Err(SkillError::Invalid {
            name: name.to_string(),
            origin: origin.to_string(),
            reason: "has no SKILL.md".to_string(),
        });
    };
    let text = String::from_utf8_lossy(md);
    let Some((fm_name, description)) = front_matter(&text) else {
        return Err(SkillError::Invalid {
            name: name.to_string(),
            origin: origin.to_string(),
            reason: "SKILL.md must start with front matter (`---`, `name:`, `description:`, `---`)"
                .to_string(),
        });
    };
    if fm_name != name {
        return Err(SkillError::Invalid {
            name: name.to_string(),
            origin: origin.to_string(),
            reason: format!("SKILL.md says `name: {fm_name}`; it must match the directory name"),
        });
    }
    check_description(name, origin, &description)?;
    Ok(Skill {
        name: name.to_string(),
        description,
        origin: origin.to_string(),
        files,
    })
}

/// Every file a skill set installs, relative to the checkout root, in both roots.
pub fn install_paths(skills: &[Skill]) -> Vec<(String, &Skill, &str)> {
    let mut out = Vec::new();
    for root in SKILL_ROOTS {
        for s in skills {
            for file in s.files.keys() {
                out.push((format!("{root}/{}/{file}", s.name), s, file.as_str()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
