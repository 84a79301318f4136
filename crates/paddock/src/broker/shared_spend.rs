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
use super::spend::SharedSpend;
use crate::store::SpendScope;

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
    spend: SharedSpend,
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
                let scope_of = match scope {
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
                let spent = spend.spent_micros(&scope_of, &job.job_id).await;
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
    use super::super::spend::SpendSource;
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
        let shared: crate::store::SharedStore = Arc::new(store.clone());
        let task = follow(
            budget.clone(),
            Arc::new(shared),
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
        match budget.admit(1, super::super::budget::WorstCase::fixed(10)).await {
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
        assert!(follow(
            budget,
            Arc::new(FakeSpend::default()),
            Shared {
                job_id: "j".into(),
                project: "p".into(),
                ticket_id: "t".into()
            },
            EVERY
        )
        .is_none());
    }

    /// A spend source answering 700 for every scope, recording what it
    /// was asked.
    #[derive(Default)]
    struct FakeSpend(std::sync::Mutex<Vec<(SpendScope, String)>>);

    #[async_trait::async_trait]
    impl SpendSource for FakeSpend {
        async fn spent_micros(
            &self,
            scope: &SpendScope,
            except_job: &str,
        ) -> Result<i64, crate::store::StoreError> {
            self.0
                .lock()
                .unwrap()
                .push((scope.clone(), except_job.to_string()));
            Ok(700)
        }
    }

    #[tokio::test]
    async fn the_ticket_spend_is_read_through_the_spend_source() {
        let budget = Budget::new(vec![Ceiling {
            scope: Scope::Ticket,
            limit_micros: 1000,
            prior_micros: 0,
        }]);
        let spend = Arc::new(FakeSpend::default());
        let task = follow(
            budget.clone(),
            spend.clone(),
            Shared {
                job_id: "job-a".into(),
                project: "p".into(),
                ticket_id: "T-1".into(),
            },
            Duration::from_millis(10),
        )
        .unwrap();
        for _ in 0..200 {
            if budget.ceilings()[0].prior_micros != 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        drop(task);
        assert_eq!(budget.ceilings()[0].prior_micros, 700);
        let asked = spend.0.lock().unwrap()[0].clone();
        assert_eq!(
            asked,
            (
                SpendScope::Ticket {
                    project: "p".into(),
                    ticket_id: "T-1".into()
                },
                "job-a".to_string()
            )
        );
    }
}
