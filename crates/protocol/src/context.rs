//! The `[context]` table of a job spec: where the templates that render the
//! generated `AGENTS.md`, `CLAUDE.md` and prompt come from, and which skills
//! the job gets (from a library directory and inline). Only the shape lives
//! here; loading, validation of skill names and rendering are Paddock's
//! context module (docs/context.md).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextSpec {
    /// A directory whose templates (`agents.md.j2`, `claude.md.j2`,
    /// `prompt.md.j2`, `brief.md.j2`) replace Paddock's defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub templates_dir: Option<PathBuf>,
    /// A skill library: one directory per skill, each with a `SKILL.md`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills_dir: Option<PathBuf>,
    /// The library skills this job gets; absent: every skill in the library.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills: Option<Vec<String>>,
    /// Skills written out in the spec itself.
    #[serde(default, rename = "skill", skip_serializing_if = "Vec::is_empty")]
    pub inline_skills: Vec<InlineSkill>,
    /// Standing instructions for the agent, rendered into the generated
    /// `AGENTS.md`/`CLAUDE.md` under "Instructions" (a turn's
    /// `instructions`, docs/api.md#turns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
}

/// A skill given in the spec: Paddock writes its `SKILL.md` (front matter
/// from `name` and `description`, then `body`) and its supporting files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InlineSkill {
    pub name: String,
    pub description: String,
    pub body: String,
    /// Supporting files: a relative path inside the skill's directory → its text.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, String>,
}
