//! The `jobs` table's inserts, and a job's owner, heartbeat and cancel
//! requests on it (`store/owner.rs` holds those statements and the
//! types): the insert of a queued job and of a job its own process runs,
//! the heartbeat's renewal, the reclaim's
//! transaction (its compare-and-set, final event, ledger settled, totals
//! and next attempt), the running jobs with their owners, a cancel asked of
//! a running job by another process, and whether one was asked. Word for
//! word the same on both backends.

/// `insert_job_with_priority`, `insert_owned_job`, `job_follows`, `heartbeat`, `reclaim_job`, `running_jobs`,
/// `request_cancel`, `unclaim_job`, `claimed_by`, `cancel_requested`, `job_owner`, `claim_standing`, `job_owners`, and a passed-over job's
/// `pass_over` and `mark_able` (`store/passed_over.rs`) for the store type `$store` (a
/// struct with a sqlx `pool`, a `job` method, and a `bind_job` function
/// in the expanding module binding `id` then the `COLUMNS`).
macro_rules! jobs_queries {
    ($store:ident) => {
        const _: () = {
            use paddock_protocol::event::TokenUsage;
            use paddock_protocol::job::JobRecord;
            use time::OffsetDateTime;
            use $crate::store::owner::{self, CancelRequest, Owner, Reclaim, RunningJob};
            use $crate::store::passed_over;
            use $crate::store::sql::events::APPEND_NEXT;
            use $crate::store::sql::ledger;
            use $crate::store::sqlite::codec::RowRef;
            use $crate::store::sqlite::jobs::{insert_error, INSERT, UPDATE};
            use $crate::store::{Follows, StoreError};

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
                    follows: Option<&Follows>,
                ) -> Result<(), StoreError> {
                    self.insert_row(job, spec_json, (priority, follows), None)
                        .await
                }

                /// Records a new job `running` on `owner`, its heartbeat `at`.
                pub(super) async fn insert_owned_job(
                    &self,
                    job: &JobRecord,
                    spec_json: &str,
                    owner: &Owner,
                    at: OffsetDateTime,
                ) -> Result<(), StoreError> {
                    self.insert_row(job, spec_json, (0, None), Some((owner, at)))
                        .await
                }

                /// The insert of both: with the owner's columns when there
                /// is one.
                async fn insert_row(
                    &self,
                    job: &JobRecord,
                    spec_json: &str,
                    (priority, follows): (i64, Option<&Follows>),
                    owner: Option<(&Owner, OffsetDateTime)>,
                ) -> Result<(), StoreError> {
                    let sql = match owner {
                        Some(_) => owner::INSERT_OWNED.as_str(),
                        None => INSERT.as_str(),
                    };
                    let mut query = bind_job(sqlx::query(sql), job)?
                        .bind(spec_json)
                        .bind(priority)
                        .bind(follows.map(|f| f.job.as_str()))
                        .bind(follows.and_then(|f| f.ended.as_deref()))
                        .bind(follows.and_then(|f| f.closed.as_deref()));
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

                /// The prior job that job `id` was queued to follow.
                pub(super) async fn job_follows(
                    &self,
                    id: &str,
                ) -> Result<Option<Follows>, StoreError> {
                    sqlx::query_as::<_, $crate::store::follows::Row>($crate::store::follows::SELECT)
                        .bind(id)
                        .fetch_optional(&self.pool)
                        .await
                        .map($crate::store::follows::from_row)
                        .map_err(|source| StoreError::ReadJob {
                            job_id: id.to_owned(),
                            source,
                        })
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

                /// Reclaims a dead host's running job in one transaction
                /// (`Reclaim`): the compare-and-set on its owner, heartbeat
                /// and cancel request, its final event with the next seq
                /// (the job's row held: an owner appending meanwhile goes
                /// after it), its calls in flight settled, its totals
                /// summed from the ledger, its next attempt queued. Whether
                /// it did; nothing is written when it did not.
                pub(super) async fn reclaim_job(
                    &self,
                    reclaim: &Reclaim<'_>,
                ) -> Result<bool, StoreError> {
                    let job = reclaim.job;
                    let row = RowRef::new("jobs", format!("job {}", job.id));
                    let event = RowRef::new("events", format!("the final event of job {}", job.id));
                    let at = job.finished_at.unwrap_or_else(OffsetDateTime::now_utc);
                    let (at, body) = (event.time("at", at)?, event.json("body", reclaim.last)?);
                    let failed = |source| StoreError::UpdateJob {
                        job_id: job.id.clone(),
                        source,
                    };
                    let mut tx = self.pool.begin().await.map_err(failed)?;
                    let done = bind_job(sqlx::query(owner::RECLAIM.as_str()), job)?
                        .bind(reclaim.host)
                        .bind(row.time("heartbeat_at", reclaim.heartbeat)?)
                        .bind(reclaim.cancel_asked)
                        .execute(&mut *tx)
                        .await
                        .map_err(failed)?;
                    if done.rows_affected() != 1 {
                        return Ok(false);
                    }
                    sqlx::query(APPEND_NEXT)
                        .bind(job.id.as_str())
                        .bind(at)
                        .bind(reclaim.last.kind())
                        .bind(body)
                        .execute(&mut *tx)
                        .await
                        .map_err(failed)?;
                    sqlx::query(ledger::INTERRUPT)
                        .bind(job.id.as_str())
                        .bind(reclaim.interrupted)
                        .execute(&mut *tx)
                        .await
                        .map_err(|source| StoreError::InterruptModelCalls {
                            job_id: job.id.clone(),
                            source,
                        })?;
                    let calls = sqlx::query_as::<_, ledger::ModelCallRow>(ledger::SELECT)
                        .bind(job.id.as_str())
                        .fetch_all(&mut *tx)
                        .await
                        .map_err(|source| StoreError::ReadModelCalls {
                            job_id: job.id.clone(),
                            source,
                        })?;
                    let mut whole = job.clone();
                    whole.tokens = TokenUsage::default();
                    whole.cost_micros = 0;
                    whole.model_calls = u64::try_from(calls.len()).unwrap_or(u64::MAX);
                    for call in calls {
                        let call = call.into_call()?;
                        whole.tokens.add(&call.tokens);
                        whole.cost_micros = whole.cost_micros.saturating_add(call.cost_micros);
                    }
                    bind_job(sqlx::query(UPDATE.as_str()), &whole)?
                        .execute(&mut *tx)
                        .await
                        .map_err(failed)?;
                    if let Some(next) = &reclaim.next {
                        bind_job(sqlx::query(INSERT.as_str()), next.job)?
                            .bind(next.spec_json)
                            .bind(next.priority)
                            .bind(next.follows.map(|f| f.job.as_str()))
                            .bind(next.follows.and_then(|f| f.ended.as_deref()))
                            .bind(next.follows.and_then(|f| f.closed.as_deref()))
                            .execute(&mut *tx)
                            .await
                            .map_err(|source| insert_error(&next.job.id, source))?;
                    }
                    tx.commit().await.map_err(failed)?;
                    Ok(true)
                }

                /// Records that job `id` was passed over at `at` unless an
                /// earlier pass was (`passed_over::PASS_OVER`): where it
                /// stands for the fleet, `None` when there is no such job.
                pub(super) async fn pass_over(
                    &self,
                    id: &str,
                    at: OffsetDateTime,
                ) -> Result<Option<passed_over::PassedOver>, StoreError> {
                    let row = RowRef::new("jobs", format!("job {id}"));
                    sqlx::query_as::<_, passed_over::PassOverRow>(passed_over::PASS_OVER)
                        .bind(id)
                        .bind(row.time("passed_over_at", at)?)
                        .fetch_optional(&self.pool)
                        .await
                        .map_err(|source| StoreError::UpdateJob {
                            job_id: id.to_owned(),
                            source,
                        })?
                        .map(|r| passed_over::passed_over(id, r))
                        .transpose()
                }

                /// Marks queued job `id` as one server `owner` can run, at
                /// `at` (`passed_over::MARK_ABLE`): false when it is not
                /// queued.
                pub(super) async fn mark_able(
                    &self,
                    id: &str,
                    owner: &Owner,
                    at: OffsetDateTime,
                ) -> Result<bool, StoreError> {
                    let row = RowRef::new("jobs", format!("job {id}"));
                    let done = sqlx::query(passed_over::MARK_ABLE)
                        .bind(id)
                        .bind(row.time("able_at", at)?)
                        .bind(owner.host.as_str())
                        .bind(owner.name.as_str())
                        .execute(&self.pool)
                        .await
                        .map_err(|source| StoreError::UpdateJob {
                            job_id: id.to_owned(),
                            source,
                        })?;
                    Ok(done.rows_affected() == 1)
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
                    if owner.is_some() {
                        self.announce_cancel(id).await;
                    }
                    Ok(owner.map(|(host, name)| Owner {
                        host,
                        name: name.unwrap_or_default(),
                    }))
                }

                /// Puts the claimed job `id` back in the queue with
                /// `reason` (`owner::UNCLAIM`): whether it did (false: it
                /// is not running on `host` any more, or a cancel was
                /// asked of it).
                pub(super) async fn unclaim_job(
                    &self,
                    id: &str,
                    host: &str,
                    reason: &str,
                ) -> Result<bool, StoreError> {
                    let done = sqlx::query(owner::UNCLAIM)
                        .bind(id)
                        .bind(host)
                        .bind(reason)
                        .execute(&self.pool)
                        .await
                        .map_err(|source| StoreError::UpdateJob {
                            job_id: id.to_owned(),
                            source,
                        })?;
                    Ok(done.rows_affected() == 1)
                }

                /// The job `owner` claimed from the queue at `at` (the
                /// claim's key: its `claimed_at`), if it still runs on that
                /// host: what a claim retried after its commit landed and
                /// its answer was lost finds, instead of claiming another.
                pub(super) async fn claimed_by(
                    &self,
                    owner: &Owner,
                    at: OffsetDateTime,
                ) -> Result<Option<JobRecord>, StoreError> {
                    let at = RowRef::new("jobs", "claimed".to_owned()).time("claimed_at", at)?;
                    let id = sqlx::query_scalar::<_, String>(owner::CLAIMED_BY)
                        .bind(owner.host.as_str())
                        .bind(at)
                        .fetch_optional(&self.pool)
                        .await
                        .map_err(|source| StoreError::ClaimJob { source })?;
                    match id {
                        Some(id) => self.job(&id).await,
                        None => Ok(None),
                    }
                }

                /// The owner of job `id`: `None` when it has none (never
                /// ran, or recorded before owners were) or there is no such
                /// job.
                pub(super) async fn job_owner(
                    &self,
                    id: &str,
                ) -> Result<Option<Owner>, StoreError> {
                    Ok(self.claim_standing(id).await?.and_then(|s| s.owner))
                }

                /// The status, owner and cancel request of job `id`, as
                /// one row; `None` when there is no such job.
                pub(super) async fn claim_standing(
                    &self,
                    id: &str,
                ) -> Result<Option<owner::ClaimStanding>, StoreError> {
                    sqlx::query_as::<_, owner::StandingRow>(owner::STANDING)
                        .bind(id)
                        .fetch_optional(&self.pool)
                        .await
                        .map_err(|source| StoreError::ReadJob {
                            job_id: id.to_owned(),
                            source,
                        })?
                        .map(|row| owner::standing(id, row))
                        .transpose()
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

                /// The cancel asked of job `id`, if one was; `NoSuchJob`
                /// when there is no such job.
                pub(super) async fn cancel_requested(
                    &self,
                    id: &str,
                ) -> Result<Option<CancelRequest>, StoreError> {
                    match self.claim_standing(id).await? {
                        Some(standing) => Ok(standing.cancel),
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
