//! The `webhook_deliveries` table: every attempt to deliver a job's final
//! record to a completion webhook, in the order they were made.

/// `record_webhook_attempt` and `webhook_attempts` for the store type
/// `$store` (a struct with a sqlx `pool`).
macro_rules! webhook_queries {
    ($store:ident) => {
        const _: () = {
            use $crate::store::sqlite::codec::RowRef;
            use $crate::store::sqlite::is_foreign_key_violation;
            use $crate::store::StoreError;
            use $crate::store::WebhookAttempt;

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
            }
        };
    };
}
pub(in crate::store) use webhook_queries;
