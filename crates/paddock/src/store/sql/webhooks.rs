//! The `webhook_deliveries` table: every attempt to deliver a job's final
//! record to a completion webhook, in the order they were made; and the
//! `webhooks_owed` table: the final records still to send, each leased to
//! the server sending it.

/// The owed rows a server may lease: not settled, their job ended, and
/// not leased, or their lease ran out before `$3` (the shared tail of
/// both lease statements; the outer `UPDATE` checks the lease again, which
/// PostgreSQL re-evaluates on a row another transaction changed first).
macro_rules! leasable {
    () => {
        "o.settled_at IS NULL AND j.status NOT IN ('queued', 'running') \
         AND (o.lease_until IS NULL OR o.lease_until < $3)"
    };
}
pub(in crate::store) use leasable;

/// `record_webhook_attempt`, `webhook_attempts` and the owed records'
/// `owe_webhook`, `lease_owed_webhooks`, `renew_webhook_lease` and
/// `settle_owed_webhook` for the store type `$store` (a struct with a sqlx
/// `pool`).
macro_rules! webhook_queries {
    ($store:ident) => {
        const _: () = {
            use $crate::store::sqlite::codec::RowRef;
            use $crate::store::sqlite::is_foreign_key_violation;
            use $crate::store::StoreError;
            use $crate::store::{WebhookAttempt, WebhookLease};

            impl $store {
                pub(super) async fn record_webhook_attempt(
                    &self,
                    attempt: &WebhookAttempt,
                ) -> Result<(), StoreError> {
                    let row = RowRef::new(
                        "webhook_deliveries",
                        format!("attempt {} of job {}", attempt.attempt, attempt.job_id),
                    );
                    sqlx::query(
                        "INSERT INTO webhook_deliveries \
                         (job_id, url, attempt, at, delivered, http_status, error) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    )
                    .bind(&attempt.job_id)
                    .bind(&attempt.url)
                    .bind(i64::from(attempt.attempt))
                    .bind(row.time("at", attempt.at)?)
                    .bind(attempt.delivered)
                    .bind(attempt.http_status.map(i64::from))
                    .bind(attempt.error.as_deref())
                    .execute(&self.pool)
                    .await
                    .map_err(|source| {
                        if is_foreign_key_violation(&source) {
                            StoreError::NoSuchJob {
                                job_id: attempt.job_id.clone(),
                            }
                        } else {
                            StoreError::RecordWebhook {
                                job_id: attempt.job_id.clone(),
                                source,
                            }
                        }
                    })?;
                    Ok(())
                }

                pub(super) async fn webhook_attempts(
                    &self,
                    job_id: &str,
                ) -> Result<Vec<WebhookAttempt>, StoreError> {
                    let rows = sqlx::query_as::<
                        _,
                        (String, i64, String, bool, Option<i64>, Option<String>),
                    >(
                        "SELECT url, attempt, at, delivered, http_status, error \
                         FROM webhook_deliveries WHERE job_id = $1 ORDER BY id",
                    )
                    .bind(job_id)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(|source| StoreError::ReadWebhooks {
                        job_id: job_id.to_owned(),
                        source,
                    })?;
                    rows.into_iter()
                        .map(|(url, attempt, at, delivered, http_status, error)| {
                            let row = RowRef::new(
                                "webhook_deliveries",
                                format!("attempt {attempt} of job {job_id}"),
                            );
                            Ok(WebhookAttempt {
                                job_id: job_id.to_owned(),
                                url,
                                attempt: row.narrow("attempt", attempt)?,
                                at: row.parse_time("at", &at)?,
                                delivered,
                                http_status: row.opt_narrow("http_status", http_status)?,
                                error,
                            })
                        })
                        .collect()
                }

                pub(super) async fn owe_webhook(
                    &self,
                    job_id: &str,
                    at: time::OffsetDateTime,
                ) -> Result<(), StoreError> {
                    let row = RowRef::new("webhooks_owed", format!("job {job_id}"));
                    sqlx::query(
                        "INSERT INTO webhooks_owed (job_id, since) VALUES ($1, $2) \
                         ON CONFLICT (job_id) DO NOTHING",
                    )
                    .bind(job_id)
                    .bind(row.time("since", at)?)
                    .execute(&self.pool)
                    .await
                    .map_err(|source| {
                        if is_foreign_key_violation(&source) {
                            StoreError::NoSuchJob {
                                job_id: job_id.to_owned(),
                            }
                        } else {
                            StoreError::OweWebhook {
                                job_id: job_id.to_owned(),
                                source,
                            }
                        }
                    })?;
                    Ok(())
                }

                pub(super) async fn lease_owed_webhooks(
                    &self,
                    lease: &WebhookLease<'_>,
                ) -> Result<Vec<String>, StoreError> {
                    let row = RowRef::new("webhooks_owed", format!("the lease of {}", lease.by));
                    let (now, until) = (
                        row.time("lease_until", lease.now)?,
                        row.time("lease_until", lease.until)?,
                    );
                    let query = match lease.job {
                        Some(job) => sqlx::query_scalar::<_, String>(concat!(
                            "UPDATE webhooks_owed SET lease_by = $1, lease_until = $2 \
                             WHERE job_id IN (SELECT o.job_id FROM webhooks_owed o \
                             JOIN jobs j ON j.id = o.job_id WHERE o.job_id = $4 AND ",
                            $crate::store::sql::webhooks::leasable!(),
                            ") AND settled_at IS NULL AND (lease_until IS NULL OR lease_until < $3) \
                             RETURNING job_id"
                        ))
                        .bind(lease.by)
                        .bind(until)
                        .bind(now)
                        .bind(job.to_owned()),
                        None => sqlx::query_scalar::<_, String>(concat!(
                                    "UPDATE webhooks_owed SET lease_by = $1, lease_until = $2 \
                             WHERE job_id IN (SELECT o.job_id FROM webhooks_owed o \
                             JOIN jobs j ON j.id = o.job_id WHERE ",
                                    $crate::store::sql::webhooks::leasable!(),
                                    " ORDER BY o.since, o.job_id LIMIT $4) \
                             AND settled_at IS NULL AND (lease_until IS NULL OR lease_until < $3) \
                             RETURNING job_id"
                                ))
                        .bind(lease.by)
                        .bind(until)
                        .bind(now)
                        .bind(i64::from(lease.limit)),
                    };
                    let mut ids = query.fetch_all(&self.pool).await.map_err(|source| {
                        StoreError::LeaseWebhooks {
                            by: lease.by.to_owned(),
                            source,
                        }
                    })?;
                    ids.sort();
                    Ok(ids)
                }

                pub(super) async fn renew_webhook_lease(
                    &self,
                    job_id: &str,
                    by: &str,
                    until: time::OffsetDateTime,
                ) -> Result<bool, StoreError> {
                    let sql = "UPDATE webhooks_owed SET lease_until = $3 \
                               WHERE job_id = $1 AND lease_by = $2 AND settled_at IS NULL";
                    self.held_owed_row(job_id, by, ("lease_until", sql), until).await
                }

                pub(super) async fn settle_owed_webhook(
                    &self,
                    job_id: &str,
                    by: &str,
                    at: time::OffsetDateTime,
                ) -> Result<bool, StoreError> {
                    let sql = "UPDATE webhooks_owed SET settled_at = $3 \
                               WHERE job_id = $1 AND lease_by = $2 AND settled_at IS NULL";
                    self.held_owed_row(job_id, by, ("settled_at", sql), at).await
                }

                /// Runs `statement`, which sets `column` of job `job_id`'s
                /// owed row to `at` (`$3`) if `by` holds its lease and it
                /// is not settled; whether it did.
                async fn held_owed_row(
                    &self,
                    job_id: &str,
                    by: &str,
                    (column, sql): (&'static str, &'static str),
                    at: time::OffsetDateTime,
                ) -> Result<bool, StoreError> {
                    let row = RowRef::new("webhooks_owed", format!("job {job_id}"));
                    let done = sqlx::query(sql)
                        .bind(job_id)
                        .bind(by)
                        .bind(row.time(column, at)?)
                        .execute(&self.pool)
                        .await
                        .map_err(|source| StoreError::SettleWebhook {
                            job_id: job_id.to_owned(),
                            by: by.to_owned(),
                            source,
                        })?;
                    Ok(done.rows_affected() == 1)
                }
            }
        };
    };
}
pub(in crate::store) use webhook_queries;
