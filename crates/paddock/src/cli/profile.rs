//! `paddock profile add|list|show|rm`: host profiles in the store
//! (docs/host-profile.md). Adding a profile with deprecated (camelCase)
//! keys warns once per key on stderr.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Subcommand;
use paddock::paths::Paths;
use paddock::policy::profile::{self, PRESETS};
use paddock::store::Store;
use paddock_protocol::HostProfile;

use super::{exit, open_store, open_store_or_empty, Failure};

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

pub async fn exec(cmd: ProfileCmd, paths: &Paths) -> Result<u8, Failure> {
    // Only `add` creates the database: a missing one has no stored
    // profiles (the presets are still listed and shown, `rm` finds none).
    let store = match &cmd {
        ProfileCmd::Add { .. } => open_store(paths).await?,
        ProfileCmd::List | ProfileCmd::Show { .. } | ProfileCmd::Rm { .. } => {
            open_store_or_empty(paths).await?
        }
    };
    let out = run_profile(&cmd, &*store).await?;
    out!("{out}");
    Ok(exit::DONE)
}

/// Runs a profile subcommand against the store; what it prints.
async fn run_profile(cmd: &ProfileCmd, store: &dyn Store) -> Result<String, Failure> {
    match cmd {
        ProfileCmd::Add { file } => {
            let loaded = HostProfile::load(file).map_err(|e| Failure::BadInput(e.into()))?;
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
            Err(Failure::BadInput(anyhow::anyhow!(why)))
        }
        ProfileCmd::Show { id } => {
            let (p, _) = profile::resolve(id, store).await.map_err(|e| match e {
                profile::ResolveError::Store { .. } => Failure::Internal(e.into()),
                profile::ResolveError::Load(_) | profile::ResolveError::Unknown { .. } => {
                    Failure::BadInput(e.into())
                }
            })?;
            Ok(format!(
                "{}\n",
                paddock::terminal_text::json::to_string_pretty(&p)
                    .context("serialize the profile")?
            ))
        }
    }
}
