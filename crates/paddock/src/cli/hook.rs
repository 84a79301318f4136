//! `paddock hook pre-tool-use` (hidden): the engines' PreToolUse hook runs
//! it for every shell call of a job. It reads the hook JSON on stdin,
//! answers a deny decision on stdout and records the denial; it exits 2
//! with a reason when it cannot judge, which both engines treat as a
//! denial: fail closed. The decision itself is `paddock::policy::hook`.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Subcommand;
use paddock::policy::denials::{self, DenialRecord};
use paddock::policy::hook::{self, Decision};
use paddock_protocol::HostProfile;

#[derive(Subcommand)]
pub enum HookCmd {
    /// Claude Code's PreToolUse hook: JSON on stdin, a decision on stdout.
    PreToolUse {
        /// The job's host profile (JSON).
        #[arg(long, required_unless_present = "profile_on_stdin")]
        profile: Option<PathBuf>,
        /// The profile is stdin's first line (JSON), the hook input the rest.
        #[arg(long, conflicts_with = "profile", hide = true)]
        profile_on_stdin: bool,
        /// Where denials are appended (JSONL).
        #[arg(long)]
        record: Option<PathBuf>,
    },
}

/// Runs the hook; the process exit code.
pub fn exec(cmd: &HookCmd) -> u8 {
    match cmd {
        HookCmd::PreToolUse {
            profile,
            profile_on_stdin: _,
            record,
        } => match pre_tool_use(profile.as_deref(), record.as_deref()) {
            Ok(()) => 0,
            Err(e) => {
                // Exit 2: Claude Code blocks the call and shows this reason.
                errln!(
                    "paddock policy: {}",
                    paddock::error_chain::chain(e.as_ref())
                );
                2
            }
        },
    }
}

/// Judges the call on stdin under the profile at `profile`, else the one
/// on stdin's first line.
fn pre_tool_use(profile: Option<&Path>, record: Option<&Path>) -> anyhow::Result<()> {
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .context("read the hook input from stdin")?;
    let profile = match profile {
        Some(path) => HostProfile::load(path)?.profile,
        None => {
            let (line, rest) = input
                .split_once('\n')
                .context("read the host profile from stdin: no line ends it")?;
            let profile = HostProfile::from_json(line, "the host profile on stdin")?;
            input = rest.to_string();
            profile
        }
    };
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
