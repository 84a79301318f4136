//! `paddock doctor`: what this host supports for each isolation rung.

use anyhow::Context as _;

use super::{exit, Failure};
use crate::doctor;

#[derive(clap::Args)]
pub struct DoctorArgs {
    #[arg(long)]
    pub json: bool,
}

pub fn exec(args: DoctorArgs) -> Result<u8, Failure> {
    let report = doctor::report();
    if args.json {
        outln!(
            "{}",
            serde_json::to_string(&report).context("serialize the report")?
        );
    } else {
        out!("{}", doctor::render(&report));
    }
    Ok(if report.rungs.iter().all(|r| r.supported) {
        exit::DONE
    } else {
        exit::FAILED
    })
}
