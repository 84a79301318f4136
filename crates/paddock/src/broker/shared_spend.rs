//! Budgets that span jobs, kept current while a job runs. A ticket's
//! budget (across attempts) and a project's daily budget are shared by
//! every job of that ticket or project, also by jobs running at the same
//! time, possibly from other `paddock` processes on this host's store. The
//! broker reads what the others spent when the job starts; this task then
//! re-reads it from the ledger every [`EVERY`] while the job runs, so each
//! job sees the others' settled calls within that period, and a job that
//! the others pushed past a ceiling gets its next call refused (held). What
//! the others have in flight is not seen: the overshoot bound of
//! docs/broker.md grows by one call's cost per other running job.

use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;

use super::budget::{Budget, Scope};
use crate::store::{SharedStore, SpendScope};

/// How often other jobs' spend is re-read.
pub const EVERY: Duration = Duration::from_millis(500);

/// What to re-read for one job.
#[derive(Debug, Clone)]
pub struct Shared {
    pub job_id: String,
    pub project: String,
    pub ticket_id: String,
}

/// The re-reading task of one job; dropping it stops the task.
#[derive(Debug)]
pub struct Follower(tokio::task::JoinHandle<()>);

impl Drop for Follower {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Starts re-reading other jobs' spend into `budget` for each of its
/// ceilings that spans jobs; `None` when it has none.
pub fn follow(
    budget: Arc<Budget>,
    store: SharedStore,
    job: Shared,
    every: Duration,
) -> Option<Follower> {
    let scopes: Vec<Scope> = budget
        .ceilings()
        .iter()
        .map(|c| c.scope)
        .filter(|s| matches!(s, Scope::Ticket | Scope::ProjectDay))
        .collect();
    if scopes.is_empty() {
        return None;
    }
    Some(Follower(tokio::spawn(async move {
        // The job's start already read it: the first re-read is one period on.
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            for scope in &scopes {
                let spend = match scope {
                    Scope::Ticket => SpendScope::Ticket {
                        project: job.project.clone(),
                        ticket_id: job.ticket_id.clone(),
                    },
                    Scope::ProjectDay => SpendScope::ProjectDay {
                        project: job.project.clone(),
                        at: OffsetDateTime::now_utc(),
                    },
                    Scope::Job => continue,
                };
                let spent = store.spent_micros(&spend, &job.job_id).await;
                match spent {
                    Ok(micros) => budget.set_prior(*scope, micros),
                    // The last figure stays; the next tick tries again.
                    Err(e) => tracing::warn!(job = %job.job_id, error = %e, "re-read shared spend"),
                }
            }
        }
    })))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use paddock_protocol::ledger::ModelCall;

    use super::super::budget::{Admission, Ceiling};
    use super::*;
    use crate::store::{fixtures, SqliteStore, Store};

    #[tokio::test]
    async fn another_jobs_settled_spend_reaches_a_running_job() {
        let store = SqliteStore::open_in_memory().await.unwrap();
        for id in ["job-a", "job-b"] {
            let mut j = fixtures::job(id, 0);
            j.project = "p".into();
            j.ticket_id = "T-1".into();
            store.insert_job(&j, "{}").await.unwrap();
        }
        // Job A may spend 1000 on the ticket; nobody has spent anything yet.
        let budget = Budget::new(vec![Ceiling {
            scope: Scope::Ticket,
            limit_micros: 1000,
            prior_micros: 0,
        }]);
        let task = follow(
            budget.clone(),
            std::sync::Arc::new(store.clone()),
            Shared {
                job_id: "job-a".into(),
                project: "p".into(),
                ticket_id: "T-1".into(),
            },
            Duration::from_millis(10),
        )
        .unwrap();
        // Job A's own row is not "another job's" spend.
        for (job, cost) in [("job-a", 300), ("job-b", 1000)] {
            store
                .insert_model_call(&ModelCall {
                    cost_micros: cost,
                    ..fixtures::model_call(job, 1)
                })
                .await
                .unwrap();
        }
        let mut prior = 0;
        for _ in 0..200 {
            prior = budget.ceilings()[0].prior_micros;
            if prior != 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(prior, 1000);
        match budget.admit(1, 10).await {
            Admission::Refused(message) => assert_eq!(
                message,
                "paddock broker: ticket budget (across attempts) spent ($0.001000 of $0.001000); the job is held"
            ),
            Admission::Admitted(_) => panic!("admitted past the shared ceiling"),
        }
        drop(task);
    }

    #[tokio::test]
    async fn jobs_without_shared_ceilings_need_no_task() {
        let budget = Budget::new(vec![Ceiling {
            scope: Scope::Job,
            limit_micros: 1,
            prior_micros: 0,
        }]);
        let store = SqliteStore::open_in_memory().await.unwrap();
        assert!(follow(
            budget,
            std::sync::Arc::new(store),
            Shared {
                job_id: "j".into(),
                project: "p".into(),
                ticket_id: "t".into()
            },
            EVERY
        )
        .is_none());
    }
}
