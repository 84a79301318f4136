//! Spend as charts the server draws: one horizontal bar chart per `paddock
//! usage` dimension (day, model, project, task type), each bar's length its
//! cost relative to the dimension's largest. The geometry is computed here
//! and drawn as inline SVG by the `spend.html` template (escaped like any
//! text: project names and task types come from specs). No script, no
//! library: the page renders with scripts off and under the strict CSP.

use serde::Serialize;

use crate::broker::prices::format_usd;
use crate::usage::{Report, Rollup};

/// The drawable width of a bar, in SVG units.
pub const BAR_WIDTH: u64 = 480;
/// The height of one row.
pub const ROW: u64 = 24;
/// Bars shown per chart at most (the costliest).
pub const MAX_BARS: usize = 30;

/// One bar.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bar {
    pub key: String,
    pub cost_micros: i64,
    /// `$0.012345`.
    pub usd: String,
    pub calls: u64,
    /// The bar's length (0 to [`BAR_WIDTH`]).
    pub width: u64,
    /// The row's top.
    pub y: u64,
}

/// One chart: a dimension's bars.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Chart {
    /// `day`, `model`, `project`, `task_type`: the SVG's id is `spend-<name>`.
    pub name: &'static str,
    pub title: &'static str,
    pub bars: Vec<Bar>,
    /// The SVG's height.
    pub height: u64,
}

/// The four charts of `report`.
pub fn charts(report: &Report) -> Vec<Chart> {
    vec![
        chart("day", "Spend by day", &report.by_day, false),
        chart("model", "Spend by model", &report.by_model, true),
        chart("project", "Spend by project", &report.by_project, true),
        chart(
            "task_type",
            "Spend by task type",
            &report.by_task_type,
            true,
        ),
    ]
}

/// The chart of `rows`: by cost, costliest first (`by_cost`), else in the
/// report's order (days ascending, the latest [`MAX_BARS`]).
fn chart(name: &'static str, title: &'static str, rows: &[Rollup], by_cost: bool) -> Chart {
    let mut rows: Vec<&Rollup> = rows.iter().collect();
    if by_cost {
        rows.sort_by(|a, b| b.cost_micros.cmp(&a.cost_micros).then(a.key.cmp(&b.key)));
        rows.truncate(MAX_BARS);
    } else if rows.len() > MAX_BARS {
        rows.drain(..rows.len() - MAX_BARS);
    }
    let top = rows.iter().map(|r| r.cost_micros.max(0)).max().unwrap_or(0);
    let bars: Vec<Bar> = rows
        .iter()
        .zip(0u64..)
        .map(|(r, i)| Bar {
            key: r.key.clone(),
            cost_micros: r.cost_micros,
            usd: format_usd(r.cost_micros),
            calls: r.calls,
            width: scaled(r.cost_micros, top),
            y: i * ROW,
        })
        .collect();
    let height = (bars.len() as u64).max(1) * ROW;
    Chart {
        name,
        title,
        bars,
        height,
    }
}

/// `value` of `top` as a share of [`BAR_WIDTH`]; a non-zero value shows
/// at least one unit.
fn scaled(value: i64, top: i64) -> u64 {
    if value <= 0 || top <= 0 {
        return 0;
    }
    let w = (value as u128 * BAR_WIDTH as u128 / top as u128) as u64;
    w.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rollup(key: &str, cost: i64) -> Rollup {
        Rollup {
            key: key.into(),
            calls: 1,
            tokens: Default::default(),
            cost_micros: cost,
            jobs: 1,
            tickets: 1,
            done_tickets: 0,
            cost_per_ticket_micros: None,
            bounce_rate: None,
            time_to_done_ms: None,
        }
    }

    #[test]
    fn bars_are_scaled_to_the_costliest_and_sorted_by_cost() {
        let c = chart(
            "model",
            "Spend by model",
            &[rollup("a", 250_000), rollup("b", 1_000_000), rollup("c", 1)],
            true,
        );
        let got: Vec<(String, u64, u64, String)> = c
            .bars
            .iter()
            .map(|b| (b.key.clone(), b.width, b.y, b.usd.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("b".into(), 480, 0, "$1.000000".into()),
                ("a".into(), 120, 24, "$0.250000".into()),
                ("c".into(), 1, 48, "$0.000001".into()),
            ]
        );
        assert_eq!(c.height, 72);
    }

    #[test]
    fn days_keep_their_order_and_the_latest_are_kept() {
        let days: Vec<Rollup> = (0..40).map(|i| rollup(&format!("d{i:02}"), 0)).collect();
        let c = chart("day", "Spend by day", &days, false);
        let keys: Vec<&str> = c.bars.iter().map(|b| b.key.as_str()).collect();
        let expected: Vec<String> = (10..40).map(|i| format!("d{i:02}")).collect();
        assert_eq!(keys, expected);
        assert!(c.bars.iter().all(|b| b.width == 0));
    }
}
