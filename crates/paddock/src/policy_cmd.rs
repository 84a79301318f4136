//! The policy subcommands of the `paddock` binary: `paddock profile
//! add|list|show|rm` (host profiles in the store) and the hidden `paddock hook
//! pre-tool-use`, which Claude Code's PreToolUse hook runs for every Bash
//! call of a job (reads the hook JSON on stdin, answers a deny decision on
//! stdout, records the denial; exit 2 with a reason when it cannot judge,
//! which Claude Code treats as a denial: fail closed).

use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Subcommand;
use paddock::policy::denials::{self, DenialRecord};
use paddock::policy::hook::{self, Decision};
use paddock::policy::profile::{self, PRESETS};
use paddock::store::Store;
use paddock_protocol::HostProfile;

#[derive(Subcommand)]
pub enum HookCmd {
    /// Claude Code's PreToolUse hook: JSON on stdin, a decision on stdout.
    PreToolUse {
        /// The job's host profile (JSON).
        #[arg(long)]
        profile: PathBuf,
        /// Where denials are appended (JSONL).
        #[arg(long)]
        record: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
pub enum ProfileCmd {
    /// Save a profile file (.json or .toml) in the store, replacing one with the same id.
    Add {
        /// The profile file (docs/host-profile.md).
        file: PathBuf,
    },
    /// List the stored profiles and the shipped presets.
    List,
    /// Print a profile (store first, then presets) as JSON.
    Show {
        /// The profile's id (a stored profile or a preset).
        id: String,
    },
    /// Remove a profile from the store (presets cannot be removed).
    Rm {
        /// The stored profile's id.
        id: String,
    },
}

/// Runs the hook; the process exit code.
pub fn run_hook(cmd: &HookCmd) -> u8 {
    match cmd {
        HookCmd::PreToolUse { profile, record } => match pre_tool_use(profile, record.as_deref()) {
            Ok(()) => 0,
            Err(e) => {
                // Exit 2: Claude Code blocks the call and shows this reason.
                errln!(
                    "paddock policy: {}",
                    crate::cli::error_chain::render(e.as_ref())
                );
                2
            }
        },
    }
}

fn pre_tool_use(profile: &Path, record: Option<&Path>) -> anyhow::Result<()> {
    let profile = HostProfile::load(profile)?.profile;
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .context("read the hook input from stdin")?;
    match hook::pre_tool_use(&input, &profile)? {
        Decision::Pass => Ok(()),
        Decision::Deny {
            rule,
            command,
            tool_use_id,
            reason,
        } => {
            if let Some(path) = record {
                denials::append(
                    path,
                    &DenialRecord {
                        rule,
                        command,
                        call_id: tool_use_id,
                    },
                )?;
            }
            outln!("{}", hook::deny_answer(&reason));
            Ok(())
        }
    }
}

/// Why a profile subcommand failed: the user's input, or the host.
pub enum ProfileFailure {
    BadInput(anyhow::Error),
    Internal(anyhow::Error),
}

impl From<anyhow::Error> for ProfileFailure {
    fn from(e: anyhow::Error) -> Self {
        ProfileFailure::Internal(e)
    }
}

/// Runs a profile subcommand against the store.
pub async fn run_profile(cmd: &ProfileCmd, store: &Store) -> Result<String, ProfileFailure> {
    match cmd {
        ProfileCmd::Add { file } => {
            let loaded = HostProfile::load(file).map_err(|e| ProfileFailure::BadInput(e.into()))?;
            for d in &loaded.deprecated {
                errln!("paddock: warning: {d}");
            }
            let p = loaded.profile;
            store
                .put_profile(&p)
                .await
                .with_context(|| format!("save host profile `{}`", p.id))?;
            Ok(format!("saved host profile `{}`\n", p.id))
        }
        ProfileCmd::List => {
            let mut out = String::new();
            for p in store.profiles().await.context("list host profiles")? {
                out.push_str(&format!("{}\tstore\n", p.id));
            }
            for (id, _) in PRESETS {
                out.push_str(&format!("{id}\tpreset\n"));
            }
            Ok(out)
        }
        ProfileCmd::Rm { id } => {
            if store
                .remove_profile(id)
                .await
                .with_context(|| format!("remove host profile `{id}`"))?
            {
                return Ok(format!("removed host profile `{id}`\n"));
            }
            let why = if PRESETS.iter().any(|(p, _)| p == id) {
                format!(
                    "`{id}` is a shipped preset, not a stored profile; presets cannot be removed"
                )
            } else {
                format!("no stored host profile `{id}` (`paddock profile list` shows them)")
            };
            Err(ProfileFailure::BadInput(anyhow::anyhow!(why)))
        }
        ProfileCmd::Show { id } => {
            let (p, _) = profile::resolve(id, store).await.map_err(|e| match e {
                profile::ResolveError::Store { .. } => ProfileFailure::Internal(e.into()),
                profile::ResolveError::Load(_) | profile::ResolveError::Unknown { .. } => {
                    ProfileFailure::BadInput(e.into())
                }
            })?;
            Ok(format!(
                "{}\n",
                serde_json::to_string_pretty(&p).context("serialize the profile")?
            ))
        }
    }
}
