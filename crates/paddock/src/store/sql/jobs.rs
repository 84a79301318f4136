//! The `jobs` table's inserts, and a job's owner, heartbeat and cancel
//! requests on it (`store/owner.rs` holds those statements and the
//! types): the insert of a queued job and of a job its own process runs,
//! the heartbeat's renewal, the reclaim's
//! compare-and-set, the running jobs with their owners, a cancel asked of
//! a running job by another process, and whether one was asked. Word for
//! word the same on both backends.

/// `insert_job_with_priority`, `insert_owned_job`, `heartbeat`, `reclaim_job`, `running_jobs`,
/// `request_cancel`, `cancel_requested` and `job_owners` for the store type `$store` (a
/// struct with a sqlx `pool`, a `job` method, and a `bind_job` function
/// in the expanding module binding `id` then the `COLUMNS`).
macro_rules! jobs_queries {
    ($store:ident) => {
        const _: () = {
            use paddock_protocol::event::EventBody;
            use paddock_protocol::job::JobRecord;
            use time::OffsetDateTime;
            use $crate::store::owner::{self, Owner, RunningJob};
            use $crate::store::sql::events::APPEND_NEXT;
            use $crate::store::sqlite::codec::RowRef;
            use $crate::store::sqlite::jobs::{insert_error, INSERT};
            use $crate::store::StoreError;

            impl $store {
                /// Every job still `running` with its owner, oldest first.
                pub(super) async fn running_jobs(&self) -> Result<Vec<RunningJob>, StoreError> {
                    sqlx::query_as::<_, owner::RunningRow>(owner::RUNNING)
                        .fetch_all(&self.pool)
                        .await
                        .map_err(|source| StoreError::ListJobs { source })?
                        .into_iter()
                        .map(owner::running_job)
                        .collect()
                }

                /// Records a new job with its spec and queue priority
                /// (higher runs first); `JobExists` if the id is taken.
                pub(super) async fn insert_job_with_priority(
                    &self,
                    job: &JobRecord,
                    spec_json: &str,
                    priority: i64,
                ) -> Result<(), StoreError> {
                    self.insert_row(job, spec_json, priority, None).await
                }

                /// Records a new job `running` on `owner`, its heartbeat `at`.
                pub(super) async fn insert_owned_job(
                    &self,
                    job: &JobRecord,
                    spec_json: &str,
                    owner: &Owner,
                    at: OffsetDateTime,
                ) -> Result<(), StoreError> {
                    self.insert_row(job, spec_json, 0, Some((owner, at))).await
                }

                /// The insert of both: with the owner's columns when there
                /// is one.
                async fn insert_row(
                    &self,
                    job: &JobRecord,
                    spec_json: &str,
                    priority: i64,
                    owner: Option<(&Owner, OffsetDateTime)>,
                ) -> Result<(), StoreError> {
                    let sql = match owner {
                        Some(_) => owner::INSERT_OWNED.as_str(),
                        None => INSERT.as_str(),
                    };
                    let mut query = bind_job(sqlx::query(sql), job)?
                        .bind(spec_json)
                        .bind(priority);
                    if let Some((owner, at)) = owner {
                        let row = RowRef::new("jobs", format!("job {}", job.id));
                        query = query
                            .bind(owner.host.as_str())
                            .bind(owner.name.as_str())
                            .bind(row.time("heartbeat_at", at)?);
                    }
                    query
                        .execute(&self.pool)
                        .await
                        .map_err(|source| insert_error(&job.id, source))?;
                    Ok(())
                }

                /// Renews job `id`'s heartbeat if `host` still owns it running.
                pub(super) async fn heartbeat(
                    &self,
                    id: &str,
                    host: &str,
                    at: OffsetDateTime,
                ) -> Result<bool, StoreError> {
                    let row = RowRef::new("jobs", format!("job {id}"));
                    let done = sqlx::query(owner::HEARTBEAT)
                        .bind(id)
                        .bind(host)
                        .bind(row.time("heartbeat_at", at)?)
                        .execute(&self.pool)
                        .await
                        .map_err(|source| StoreError::UpdateJob {
                            job_id: id.to_owned(),
                            source,
                        })?;
                    if done.rows_affected() == 1 {
                        return Ok(true);
                    }
                    match self.job(id).await? {
                        Some(_) => Ok(false),
                        None => Err(StoreError::NoSuchJob {
                            job_id: id.to_owned(),
                        }),
                    }
                }

                /// Overwrites job `job.id` if `host` still owns it running
                /// with the heartbeat `heartbeat`, and appends `last` as its
                /// next event in the same transaction (the job's row held:
                /// an owner appending meanwhile goes after it).
                pub(super) async fn reclaim_job(
                    &self,
                    job: &JobRecord,
                    host: &str,
                    heartbeat: OffsetDateTime,
                    last: &EventBody,
                ) -> Result<bool, StoreError> {
                    let row = RowRef::new("jobs", format!("job {}", job.id));
                    let event = RowRef::new("events", format!("the final event of job {}", job.id));
                    let at = job.finished_at.unwrap_or_else(OffsetDateTime::now_utc);
                    let (at, body) = (event.time("at", at)?, event.json("body", last)?);
                    let failed = |source| StoreError::UpdateJob {
                        job_id: job.id.clone(),
                        source,
                    };
                    let mut tx = self.pool.begin().await.map_err(failed)?;
                    let done = bind_job(sqlx::query(owner::RECLAIM.as_str()), job)?
                        .bind(host)
                        .bind(row.time("heartbeat_at", heartbeat)?)
                        .execute(&mut *tx)
                        .await
                        .map_err(failed)?;
                    if done.rows_affected() != 1 {
                        return Ok(false);
                    }
                    sqlx::query(APPEND_NEXT)
                        .bind(job.id.as_str())
                        .bind(at)
                        .bind(last.kind())
                        .bind(body)
                        .execute(&mut *tx)
                        .await
                        .map_err(failed)?;
                    tx.commit().await.map_err(failed)?;
                    Ok(true)
                }

                /// Records a cancel of the running job `id` asked at `at` by
                /// host `by`: its owner, `None` when it is not running or
                /// has none.
                pub(super) async fn request_cancel(
                    &self,
                    id: &str,
                    by: &str,
                    at: OffsetDateTime,
                ) -> Result<Option<Owner>, StoreError> {
                    let row = RowRef::new("jobs", format!("job {id}"));
                    let owner =
                        sqlx::query_as::<_, (String, Option<String>)>(owner::REQUEST_CANCEL)
                            .bind(id)
                            .bind(row.time("cancel_requested_at", at)?)
                            .bind(by)
                            .fetch_optional(&self.pool)
                            .await
                            .map_err(|source| StoreError::UpdateJob {
                                job_id: id.to_owned(),
                                source,
                            })?;
                    Ok(owner.map(|(host, name)| Owner {
                        host,
                        name: name.unwrap_or_default(),
                    }))
                }

                /// The owners of the `limit` newest jobs that have one.
                pub(super) async fn job_owners(
                    &self,
                    limit: u32,
                ) -> Result<Vec<(String, Owner)>, StoreError> {
                    let rows = sqlx::query_as::<_, (String, Option<String>, Option<String>)>(
                        owner::OWNERS,
                    )
                    .bind(i64::from(limit))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(|source| StoreError::ListJobs { source })?;
                    Ok(rows
                        .into_iter()
                        .filter_map(|(id, host, name)| {
                            host.map(|host| {
                                let name = name.unwrap_or_default();
                                (id, Owner { host, name })
                            })
                        })
                        .collect())
                }

                /// Whether a cancel of job `id` was asked; `NoSuchJob` when
                /// there is no such job.
                pub(super) async fn cancel_requested(&self, id: &str) -> Result<bool, StoreError> {
                    let asked = sqlx::query_scalar::<_, Option<String>>(owner::CANCEL_REQUESTED)
                        .bind(id)
                        .fetch_optional(&self.pool)
                        .await
                        .map_err(|source| StoreError::ReadJob {
                            job_id: id.to_owned(),
                            source,
                        })?;
                    match asked {
                        Some(at) => Ok(at.is_some()),
                        None => Err(StoreError::NoSuchJob {
                            job_id: id.to_owned(),
                        }),
                    }
                }
            }
        };
    };
}

pub(in crate::store) use jobs_queries;
