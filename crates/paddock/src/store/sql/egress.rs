//! The `egress_attempts` table: the egress proxy's record of a job, one row
//! per connection it tried (an `EgressRecord`, kept whole as JSON, with
//! host, port, phase, allowed and rule as columns), in the order they
//! ended.

/// `record_egress` and `egress` for the store type `$store` (a struct
/// with a sqlx `pool`).
macro_rules! egress_queries {
    ($store:ident) => {
        const _: () = {
            use paddock_protocol::EgressRecord;
            use $crate::store::sqlite::is_foreign_key_violation;
            use $crate::store::StoreError;

            impl $store {
                /// Appends one attempt of `job_id`.
                pub(super) async fn record_egress(
                    &self,
                    job_id: &str,
                    record: &EgressRecord,
                ) -> Result<(), StoreError> {
                    let body = serde_json::to_string(record).map_err(|e| StoreError::Encode {
                        table: "egress_attempts",
                        column: "body",
                        row: job_id.to_owned(),
                        message: e.to_string(),
                    })?;
                    sqlx::query(
                        "INSERT INTO egress_attempts \
                         (job_id, host, port, phase, allowed, rule, body) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    )
                    .bind(job_id)
                    .bind(&record.host)
                    .bind(i64::from(record.port))
                    .bind(record.phase.as_str())
                    .bind(record.allowed)
                    .bind(record.rule.as_deref())
                    .bind(body)
                    .execute(&self.pool)
                    .await
                    .map_err(|source| {
                        if is_foreign_key_violation(&source) {
                            StoreError::NoSuchJob {
                                job_id: job_id.to_owned(),
                            }
                        } else {
                            StoreError::RecordEgress {
                                job_id: job_id.to_owned(),
                                source,
                            }
                        }
                    })?;
                    Ok(())
                }

                /// Every attempt of `job_id`, in the order they were recorded.
                pub(super) async fn egress(
                    &self,
                    job_id: &str,
                ) -> Result<Vec<EgressRecord>, StoreError> {
                    let rows = sqlx::query_as::<_, (i64, String)>(
                        "SELECT id, body FROM egress_attempts WHERE job_id = $1 ORDER BY id",
                    )
                    .bind(job_id)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(|source| StoreError::ReadEgress {
                        job_id: job_id.to_owned(),
                        source,
                    })?;
                    rows.into_iter()
                        .map(|(id, body)| {
                            serde_json::from_str(&body).map_err(|e| StoreError::Decode {
                                table: "egress_attempts",
                                column: "body",
                                row: format!("{job_id}/{id}"),
                                message: e.to_string(),
                            })
                        })
                        .collect()
                }
            }
        };
    };
}
pub(in crate::store) use egress_queries;
