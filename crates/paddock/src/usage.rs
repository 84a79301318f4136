//! `paddock usage`: the ledger rolled up by day, project, task type, engine
//! and model: calls, tokens by kind, cost, cost per ticket, bounce rate
//! (attempts per done ticket, by attempt number) and time to done (first attempt created to
//! the done attempt finished, median).
//!
//! Call figures come from the ledger; ticket figures from the jobs. A job
//! counts toward a day by the day it was created, toward a model if it made
//! calls on that model; a ticket is `(project, ticket id)`.
//!
//! `paddock usage --by DIM` and `GET /v1/usage?by=DIM` answer one
//! dimension with the total ([`Dimension`], [`Report::by`]): the same
//! [`UsageBy`] from the same code.

use std::collections::{BTreeMap, BTreeSet};

use paddock_protocol::TokenUsage;
use serde::Serialize;

use crate::store::{UsageCalls, UsageJob};

/// One group of one dimension.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Rollup {
    pub key: String,
    pub calls: u64,
    pub tokens: TokenUsage,
    pub cost_micros: i64,
    pub jobs: u64,
    pub tickets: u64,
    pub done_tickets: u64,
    /// Cost divided by tickets, in micro-dollars (rounded down).
    pub cost_per_ticket_micros: Option<i64>,
    /// Attempts of the done tickets per done ticket: each done ticket counts
    /// its highest attempt number, so 1.0 means done first time, and reruns
    /// of one attempt (the same spec run again) are not bounces.
    pub bounce_rate: Option<f64>,
    /// Median milliseconds from a done ticket's first attempt to its done attempt.
    pub time_to_done_ms: Option<u64>,
}

/// The whole report: one list of rollups per dimension.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub total: Rollup,
    pub by_day: Vec<Rollup>,
    pub by_project: Vec<Rollup>,
    pub by_task_type: Vec<Rollup>,
    pub by_engine: Vec<Rollup>,
    pub by_model: Vec<Rollup>,
}

#[derive(Default)]
struct Acc {
    calls: u64,
    tokens: TokenUsage,
    cost: i64,
    jobs: BTreeSet<String>,
}

/// The group a job's calls on one model and day belong to, per dimension.
type CallKey = fn(&UsageJob, &UsageCalls) -> String;

/// Builds the report from every job and its calls.
pub fn report(jobs: &[UsageJob], calls: &[UsageCalls]) -> Report {
    let by_id: BTreeMap<&str, &UsageJob> = jobs.iter().map(|j| (j.id.as_str(), j)).collect();
    let dims: [CallKey; 6] = [
        |_, _| "all".to_string(),
        |_, c| c.day.clone(),
        |j, _| j.project.clone(),
        |j, _| j.task_type.clone(),
        |j, _| j.engine.clone(),
        |_, c| c.model.clone(),
    ];
    let job_key: [fn(&UsageJob) -> Option<String>; 6] = [
        |_| Some("all".to_string()),
        |j| Some(day_of(j.created_at)),
        |j| Some(j.project.clone()),
        |j| Some(j.task_type.clone()),
        |j| Some(j.engine.clone()),
        |_| None, // a job belongs to a model through its calls
    ];
    let mut out: Vec<Vec<Rollup>> = Vec::new();
    for (i, key_of) in dims.iter().enumerate() {
        let mut groups: BTreeMap<String, Acc> = BTreeMap::new();
        for c in calls {
            let Some(j) = by_id.get(c.job_id.as_str()) else {
                continue;
            };
            let acc = groups.entry(key_of(j, c)).or_default();
            acc.calls = acc.calls.saturating_add(c.calls);
            acc.tokens.add(&c.tokens);
            acc.cost = acc.cost.saturating_add(c.cost_micros);
            acc.jobs.insert(j.id.clone());
        }
        for j in jobs {
            if let Some(k) = job_key[i](j) {
                groups.entry(k).or_default().jobs.insert(j.id.clone());
            }
        }
        out.push(
            groups
                .into_iter()
                .map(|(key, acc)| rollup(key, acc, &by_id))
                .collect(),
        );
    }
    let mut it = out.into_iter();
    let mut next = || it.next().unwrap_or_default();
    let total = next()
        .into_iter()
        .next()
        .unwrap_or_else(|| rollup("all".to_string(), Acc::default(), &BTreeMap::new()));
    Report {
        total,
        by_day: next(),
        by_project: next(),
        by_task_type: next(),
        by_engine: next(),
        by_model: next(),
    }
}

/// A dimension of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Dimension {
    Day,
    Project,
    TaskType,
    Engine,
    Model,
}

impl Dimension {
    pub const ALL: [Dimension; 5] = [
        Dimension::Day,
        Dimension::Project,
        Dimension::TaskType,
        Dimension::Engine,
        Dimension::Model,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Dimension::Day => "day",
            Dimension::Project => "project",
            Dimension::TaskType => "task_type",
            Dimension::Engine => "engine",
            Dimension::Model => "model",
        }
    }

    /// The dimension named `name` (`day`, `project`, `task_type`,
    /// `engine`, `model`).
    pub fn parse(name: &str) -> Result<Dimension, UnknownDimension> {
        Dimension::ALL
            .into_iter()
            .find(|d| d.as_str() == name)
            .ok_or_else(|| UnknownDimension {
                given: name.to_owned(),
            })
    }
}

/// A dimension name that is none of them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown usage dimension `{given}` (expected day, project, task_type, engine or model)")]
pub struct UnknownDimension {
    pub given: String,
}

/// One dimension of the report with the total.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct UsageBy {
    pub by: Dimension,
    pub total: Rollup,
    /// One per group, by key.
    pub rollups: Vec<Rollup>,
}

impl Report {
    /// Dimension `by` of the report, with the total.
    pub fn by(&self, by: Dimension) -> UsageBy {
        let rollups = match by {
            Dimension::Day => &self.by_day,
            Dimension::Project => &self.by_project,
            Dimension::TaskType => &self.by_task_type,
            Dimension::Engine => &self.by_engine,
            Dimension::Model => &self.by_model,
        };
        UsageBy {
            by,
            total: self.total.clone(),
            rollups: rollups.clone(),
        }
    }
}

/// The report of everything `store` holds.
pub async fn from_store(
    store: &dyn crate::store::Store,
) -> Result<Report, crate::store::StoreError> {
    let (jobs, calls) = store.usage().await?;
    Ok(report(&jobs, &calls))
}

fn day_of(t: time::OffsetDateTime) -> String {
    t.to_offset(time::UtcOffset::UTC).date().to_string()
}

fn rollup(key: String, acc: Acc, by_id: &BTreeMap<&str, &UsageJob>) -> Rollup {
    // Tickets of this group, with every attempt of theirs in the group.
    let mut tickets: BTreeMap<(String, String), Vec<&UsageJob>> = BTreeMap::new();
    for id in &acc.jobs {
        if let Some(j) = by_id.get(id.as_str()) {
            tickets
                .entry((j.project.clone(), j.ticket_id.clone()))
                .or_default()
                .push(j);
        }
    }
    let mut done = 0u64;
    let mut done_attempts = 0u64;
    let mut times: Vec<u64> = Vec::new();
    for attempts in tickets.values() {
        let first = attempts.iter().map(|j| j.created_at).min();
        let done_at = attempts
            .iter()
            .filter(|j| j.status == "done")
            .filter_map(|j| j.finished_at)
            .min();
        // How many attempts the ticket took: its highest attempt number (a
        // rerun of one spec repeats its number; a bounce makes the next).
        let tries = attempts.iter().map(|j| j.attempt.max(1)).max().unwrap_or(1);
        if let (Some(first), Some(done_at)) = (first, done_at) {
            done += 1;
            done_attempts += u64::from(tries);
            let ms = (done_at - first).whole_milliseconds();
            times.push(u64::try_from(ms).unwrap_or(0));
        }
    }
    times.sort_unstable();
    let n = tickets.len() as u64;
    Rollup {
        key,
        calls: acc.calls,
        tokens: acc.tokens,
        cost_micros: acc.cost,
        jobs: acc.jobs.len() as u64,
        tickets: n,
        done_tickets: done,
        cost_per_ticket_micros: (n > 0).then(|| acc.cost / n as i64),
        bounce_rate: (done > 0).then(|| done_attempts as f64 / done as f64),
        time_to_done_ms: times
            .get(times.len() / 2)
            .copied()
            .filter(|_| !times.is_empty()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use time::macros::datetime;

    use super::*;

    fn job(
        id: &str,
        ticket: &str,
        status: &str,
        created: time::OffsetDateTime,
        secs: i64,
    ) -> UsageJob {
        attempt(id, ticket, 1, status, created, secs)
    }

    fn attempt(
        id: &str,
        ticket: &str,
        attempt: u32,
        status: &str,
        created: time::OffsetDateTime,
        secs: i64,
    ) -> UsageJob {
        UsageJob {
            attempt,
            id: id.into(),
            ticket_id: ticket.into(),
            project: "p".into(),
            task_type: if ticket == "B-1" { "bug" } else { "chore" }.into(),
            engine: if id == "j3" { "claude" } else { "codex" }.into(),
            status: status.into(),
            created_at: created,
            finished_at: Some(created + time::Duration::seconds(secs)),
        }
    }

    fn calls(job: &str, model: &str, n: u64, input: u64, cost: i64) -> UsageCalls {
        UsageCalls {
            job_id: job.into(),
            model: model.into(),
            day: "2026-11-30".into(),
            calls: n,
            tokens: TokenUsage {
                input_tokens: input,
                output_tokens: 10,
                ..TokenUsage::default()
            },
            cost_micros: cost,
        }
    }

    #[test]
    fn rolls_up_calls_tickets_bounces_and_time_to_done() {
        let t0 = datetime!(2026-11-30 10:00 UTC);
        // B-1: bounced once, done on attempt 2 (10 min after attempt 1).
        // C-1: held, never done.
        let jobs = vec![
            attempt("j1", "B-1", 1, "bounced", t0, 60),
            attempt("j2", "B-1", 2, "done", t0 + time::Duration::minutes(9), 60),
            job("j3", "C-1", "held", t0, 5),
        ];
        let calls = vec![
            calls("j1", "gpt-5.5", 2, 100, 1_000),
            calls("j2", "gpt-5.5", 3, 200, 2_000),
            calls("j3", "claude-sonnet-4-5", 1, 50, 500),
        ];
        let r = report(&jobs, &calls);
        assert_eq!(
            r.total,
            Rollup {
                key: "all".into(),
                calls: 6,
                tokens: TokenUsage {
                    input_tokens: 350,
                    output_tokens: 30,
                    ..TokenUsage::default()
                },
                cost_micros: 3_500,
                jobs: 3,
                tickets: 2,
                done_tickets: 1,
                cost_per_ticket_micros: Some(1_750),
                bounce_rate: Some(2.0),
                time_to_done_ms: Some(600_000),
            }
        );
        let keys = |rs: &[Rollup]| {
            rs.iter()
                .map(|r| (r.key.clone(), r.cost_micros))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            keys(&r.by_task_type),
            vec![("bug".into(), 3_000), ("chore".into(), 500)]
        );
        assert_eq!(
            keys(&r.by_engine),
            vec![("claude".into(), 500), ("codex".into(), 3_000)]
        );
        assert_eq!(
            keys(&r.by_model),
            vec![("claude-sonnet-4-5".into(), 500), ("gpt-5.5".into(), 3_000)]
        );
        assert_eq!(r.by_model[1].bounce_rate, Some(2.0));
        assert_eq!(r.by_model[0].done_tickets, 0);
        assert_eq!(keys(&r.by_day), vec![("2026-11-30".into(), 3_500)]);
        assert_eq!(keys(&r.by_project), vec![("p".into(), 3_500)]);
    }

    /// Running one spec again (a failed run retried, the same attempt
    /// number) is not a bounce; a bounce is a later attempt number.
    #[test]
    fn reruns_of_one_attempt_are_not_bounces() {
        let t0 = datetime!(2026-11-30 10:00 UTC);
        let jobs = vec![
            // failed, rerun from the same spec, done: one attempt.
            attempt("r1", "R-1", 1, "failed", t0, 60),
            attempt("r2", "R-1", 1, "done", t0 + time::Duration::minutes(5), 60),
            // S-1: done on attempt 1, bounced by review, a rerun of attempt
            // 2 that failed, then attempt 2 done: two attempts.
            attempt("s1", "S-1", 1, "bounced", t0, 60),
            attempt(
                "s2",
                "S-1",
                2,
                "failed",
                t0 + time::Duration::minutes(5),
                60,
            ),
            attempt("s3", "S-1", 2, "done", t0 + time::Duration::minutes(9), 60),
        ];
        let r = report(&jobs, &[]);
        assert_eq!(
            (
                r.total.jobs,
                r.total.tickets,
                r.total.done_tickets,
                r.total.bounce_rate
            ),
            (5, 2, 2, Some(1.5))
        );
    }

    #[test]
    fn an_empty_ledger_reports_zeroes() {
        let r = report(&[], &[]);
        assert_eq!(
            (r.total.calls, r.total.tickets, r.total.bounce_rate),
            (0, 0, None)
        );
        assert!(r.by_model.is_empty());
    }

    #[test]
    fn one_dimension_with_the_total() {
        let t0 = datetime!(2026-11-30 10:00 UTC);
        let jobs = vec![attempt("a", "A-1", 1, "done", t0, 60)];
        let r = report(&jobs, &[]);
        let names: Vec<Result<Dimension, UnknownDimension>> = ["task_type", "week"]
            .into_iter()
            .map(Dimension::parse)
            .collect();
        assert_eq!(
            (names, r.by(Dimension::TaskType)),
            (
                vec![
                    Ok(Dimension::TaskType),
                    Err(UnknownDimension {
                        given: "week".into()
                    })
                ],
                UsageBy {
                    by: Dimension::TaskType,
                    total: r.total.clone(),
                    rollups: r.by_task_type.clone(),
                }
            )
        );
    }
}
