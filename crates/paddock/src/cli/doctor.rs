//! `paddock doctor`: what this host supports for each isolation rung, and
//! whether a job works where jobs live here.

use anyhow::Context as _;

use paddock::paths::Paths;

use super::{exit, Failure};
use crate::doctor;

#[derive(clap::Args)]
pub struct DoctorArgs {
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

pub fn exec(args: DoctorArgs, paths: &Paths) -> Result<u8, Failure> {
    let report = doctor::report(paths);
    if args.json {
        outln!(
            "{}",
            serde_json::to_string(&report).context("serialize the report")?
        );
    } else {
        out!("{}", doctor::render(&report));
    }
    Ok(
        if report.rungs.iter().all(|r| r.supported)
            && report.checks.iter().chain(&report.setup).all(|c| c.ok)
        {
            exit::DONE
        } else {
            exit::FAILED
        },
    )
}
