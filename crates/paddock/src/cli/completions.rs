//! `paddock completions SHELL` and `paddock man`: shell completion scripts
//! (clap_complete) and the roff man page (clap_mangen), both generated
//! from the same command definition as `--help`.

use super::{exit, Failure};
use anyhow::Context as _;

#[derive(clap::Args)]
pub struct CompletionsArgs {
    /// The shell to write completions for.
    pub shell: clap_complete::Shell,
}

/// Writes the completion script for `args.shell` to stdout.
pub fn completions(args: CompletionsArgs, mut cmd: clap::Command) -> Result<u8, Failure> {
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "paddock", &mut out);
    out!("{}", String::from_utf8_lossy(&out));
    Ok(exit::DONE)
}

/// Writes `paddock(1)` as roff to stdout (`paddock man > paddock.1`).
pub fn man(cmd: clap::Command) -> Result<u8, Failure> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd)
        .render(&mut out)
        .context("render the man page")?;
    out!("{}", String::from_utf8_lossy(&out));
    Ok(exit::DONE)
}
