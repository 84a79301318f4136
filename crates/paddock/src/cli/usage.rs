//! `paddock usage`: spend rolled up by day, project, task type, engine and model.

use anyhow::Context as _;
use paddock::broker::prices::format_usd;
use paddock::paths::Paths;
use paddock::usage::Report;

use super::{exit, open_existing_store, Failure};

#[derive(clap::Args)]
pub struct UsageArgs {
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

pub async fn exec(args: UsageArgs, paths: &Paths) -> Result<u8, Failure> {
    let store = open_existing_store(paths).await?;
    let (jobs, calls) = store.usage().await.context("read the ledger")?;
    let report = paddock::usage::report(&jobs, &calls);
    if args.json {
        outln!(
            "{}",
            serde_json::to_string(&report).context("serialize the usage report")?
        );
    } else {
        out!("{}", render(&report));
    }
    Ok(exit::DONE)
}

/// The report as text tables, one per dimension.
fn render(report: &Report) -> String {
    let mut out = String::new();
    for (title, rows) in [
        ("total", std::slice::from_ref(&report.total)),
        ("day", report.by_day.as_slice()),
        ("project", report.by_project.as_slice()),
        ("task type", report.by_task_type.as_slice()),
        ("engine", report.by_engine.as_slice()),
        ("model", report.by_model.as_slice()),
    ] {
        out.push_str(&format!(
            "{title:<20} {:>6} {:>10} {:>10} {:>10} {:>9} {:>9} {:>12} {:>7} {:>12} {:>7} {:>10}\n",
            "calls",
            "input",
            "cached",
            "cache-wr",
            "output",
            "reason",
            "cost",
            "tickets",
            "per ticket",
            "bounce",
            "to done"
        ));
        for r in rows {
            out.push_str(&format!(
                "{:<20} {:>6} {:>10} {:>10} {:>10} {:>9} {:>9} {:>12} {:>7} {:>12} {:>7} {:>10}\n",
                r.key,
                r.calls,
                r.tokens.input_tokens,
                r.tokens.cached_input_tokens,
                r.tokens.cache_write_tokens,
                r.tokens.output_tokens,
                r.tokens.reasoning_tokens,
                format_usd(r.cost_micros),
                r.tickets,
                r.cost_per_ticket_micros
                    .map(format_usd)
                    .unwrap_or_else(|| "-".into()),
                r.bounce_rate
                    .map(|b| format!("{b:.2}"))
                    .unwrap_or_else(|| "-".into()),
                r.time_to_done_ms
                    .map(|ms| format!("{:.1}s", ms as f64 / 1000.0))
                    .unwrap_or_else(|| "-".into()),
            ));
        }
        out.push('\n');
    }
    out
}
