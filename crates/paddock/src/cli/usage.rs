//! `paddock usage`: spend rolled up by day, project, task type, engine and
//! model (`--by DIM`: one of them), or the ledger a page at a time
//! (`--ledger`); the same library code as `GET /v1/usage` and `GET
//! /v1/ledger`.

use anyhow::Context as _;
use paddock::broker::prices::format_usd;
use paddock::paths::Paths;
use paddock::usage::{Dimension, Report};

use super::{exit, open_store_or_empty, Failure};

#[derive(clap::Args)]
pub struct UsageArgs {
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Only this dimension and the total: day, project, task_type, engine
    /// or model.
    #[arg(long, value_name = "DIM", value_parser = parse_dimension, conflicts_with = "ledger")]
    pub by: Option<Dimension>,
    /// Print a page of the ledger (its model calls, oldest first) as JSON
    /// instead, with the cursor of the next page.
    #[arg(long)]
    pub ledger: bool,
    /// With --ledger: start after this page's `next_cursor`.
    #[arg(long, requires = "ledger")]
    pub cursor: Option<String>,
    /// With --ledger: at most this many calls (1 to 500, default 100).
    #[arg(long, requires = "ledger")]
    pub limit: Option<u32>,
}

fn parse_dimension(name: &str) -> Result<Dimension, String> {
    Dimension::parse(name).map_err(|e| e.to_string())
}

pub async fn exec(args: UsageArgs, paths: &Paths) -> Result<u8, Failure> {
    let store = open_store_or_empty(paths).await?;
    if args.ledger {
        let page = paddock::ledger::page(store.as_ref(), args.cursor.as_deref(), args.limit)
            .await
            .map_err(|e| match e {
                paddock::ledger::LedgerError::Read(_) => Failure::Internal(anyhow::Error::new(e)),
                _ => Failure::BadInput(anyhow::Error::new(e)),
            })?;
        outln!(
            "{}",
            paddock::terminal_text::json::to_string(&page).context("serialize the ledger page")?
        );
        // Its first page empty: said on stderr, as the report says it.
        if page.calls.is_empty() && args.cursor.is_none() {
            errln!(
                "no usage yet in {}: no model call has been made (`paddock run SPEC` runs one)",
                paddock::terminal_text::line(&paths.db.to_string())
            );
        }
        return Ok(exit::DONE);
    }
    let report = paddock::usage::from_store(store.as_ref())
        .await
        .context("read the ledger")?;
    match (args.by, args.json) {
        (Some(by), true) => outln!(
            "{}",
            paddock::terminal_text::json::to_string(&report.by(by))
                .context("serialize the usage report")?
        ),
        (None, true) => outln!(
            "{}",
            paddock::terminal_text::json::to_string(&report)
                .context("serialize the usage report")?
        ),
        // Nothing to roll up: said in words, no table of zeros.
        (_, false) if report.total.jobs == 0 => {}
        (by, false) => out!("{}", render(&report, by)),
    }
    if report.total.jobs == 0 {
        errln!(
            "no usage yet in {}: no job has run (`paddock run SPEC` runs one)",
            paddock::terminal_text::line(&paths.db.to_string())
        );
    }
    Ok(exit::DONE)
}

/// The report as text tables, one per dimension (only `by`'s and the
/// total's when given).
fn render(report: &Report, by: Option<Dimension>) -> String {
    let mut out = String::new();
    for (dimension, title, rows) in [
        (None, "total", std::slice::from_ref(&report.total)),
        (Some(Dimension::Day), "day", report.by_day.as_slice()),
        (
            Some(Dimension::Project),
            "project",
            report.by_project.as_slice(),
        ),
        (
            Some(Dimension::TaskType),
            "task type",
            report.by_task_type.as_slice(),
        ),
        (
            Some(Dimension::Engine),
            "engine",
            report.by_engine.as_slice(),
        ),
        (Some(Dimension::Model), "model", report.by_model.as_slice()),
    ] {
        if by.is_some() && dimension.is_some() && dimension != by {
            continue;
        }
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
                // The key is the spec's free text (project, task type,
                // model), which a dispatcher writes through the API.
                paddock::terminal_text::line(&r.key),
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
        if rows.is_empty() {
            // Jobs that made no model call (failed before one): no row of
            // this table, said in words, where the header stood alone.
            out.push_str("(none: no job has made a model call yet)\n");
        }
        out.push('\n');
    }
    out
}
