//! Spend already on the ledger, summed for the budgets that span jobs: a
//! ticket across all its attempts, and a project over one UTC day, by every
//! job but the one asking. The broker enforces them from these sums plus
//! what the running job spends. Each backend words the sums its own way
//! (both saturate at BIGINT instead of failing the budget check).

/// `spent_micros` for the store type `$store` (a struct with a sqlx
/// `pool`), with the statements `$ticket` (project, ticket, except job)
/// and `$project_day` (project, from, to, except job).
macro_rules! spend_queries {
    ($store:ident, $ticket:expr, $project_day:expr) => {
        const _: () = {
            use time::{OffsetDateTime, Time, UtcOffset};

            use $crate::store::sqlite::codec::RowRef;
            use $crate::store::{SpendScope, StoreError};

            impl $store {
                /// Micro-dollars spent in `scope` by every job but `except_job`: a
                /// ticket across all its attempts, or a project on the UTC day
                /// containing `at` (calls started from 00:00:00 UTC that day to the
                /// next).
                pub(super) async fn spent_micros(
                    &self,
                    scope: &SpendScope,
                    except_job: &str,
                ) -> Result<i64, StoreError> {
                    match scope {
                        SpendScope::Ticket { project, ticket_id } => {
                            sqlx::query_scalar::<_, i64>($ticket)
                                .bind(project)
                                .bind(ticket_id)
                                .bind(except_job)
                                .fetch_one(&self.pool)
                                .await
                                .map_err(|source| StoreError::ReadSpend {
                                    scope: format!("ticket {ticket_id} of project {project}"),
                                    source,
                                })
                        }
                        SpendScope::ProjectDay { project, at } => {
                            let scope = || {
                                format!(
                                    "project {project} on {}",
                                    at.to_offset(UtcOffset::UTC).date()
                                )
                            };
                            let row = RowRef::new("model_calls", scope());
                            let day: OffsetDateTime =
                                at.to_offset(UtcOffset::UTC).replace_time(Time::MIDNIGHT);
                            let next = day + time::Duration::days(1);
                            sqlx::query_scalar::<_, i64>($project_day)
                                .bind(project)
                                .bind(row.time("started_at", day)?)
                                .bind(row.time("started_at", next)?)
                                .bind(except_job)
                                .fetch_one(&self.pool)
                                .await
                                .map_err(|source| StoreError::ReadSpend {
                                    scope: scope(),
                                    source,
                                })
                        }
                    }
                }
            }
        };
    };
}
pub(in crate::store) use spend_queries;
