//! The `egress_attempts` table: the egress proxy's record of a job, one row
//! per connection it tried (an `EgressRecord`, kept whole as JSON, with
//! host, port, phase, allowed and rule as columns), numbered per job
//! (`seq`, unique) in the order they ended. A row written again as it is
//! stored (a retried write whose first commit landed) counts as written;
//! another row at its seq is refused with `EgressConflict`.

/// `record_egress` and `egress` for the store type `$store` (a struct
/// with a sqlx `pool`).
macro_rules! egress_queries {
    ($store:ident) => {
        const _: () = {
            use paddock_protocol::EgressRecord;
            use $crate::store::sqlite::codec::RowRef;
            use $crate::store::sqlite::{is_foreign_key_violation, is_unique_violation};
            use $crate::store::StoreError;

            impl $store {
                /// Appends attempt `seq` of `job_id`. Its job must exist (`NoSuchJob`
                /// otherwise) and `(job_id, seq)` must be new, or hold this very
                /// attempt (a retried write whose first commit landed: written);
                /// another there fails with `EgressConflict`, naming the job's last
                /// seq.
                pub(super) async fn record_egress(
                    &self,
                    job_id: &str,
                    seq: u64,
                    record: &EgressRecord,
                ) -> Result<(), StoreError> {
                    let row = RowRef::new("egress_attempts", format!("{job_id}/{seq}"));
                    let seq_column = row.int("seq", seq)?;
                    let body = serde_json::to_string(record).map_err(|e| StoreError::Encode {
                        table: "egress_attempts",
                        column: "body",
                        row: format!("{job_id}/{seq}"),
                        message: e.to_string(),
                    })?;
                    let record_error = |source| StoreError::RecordEgress {
                        job_id: job_id.to_owned(),
                        seq,
                        source,
                    };
                    let done = sqlx::query(
                        "INSERT INTO egress_attempts \
                         (job_id, seq, host, port, phase, allowed, rule, body) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                    )
                    .bind(job_id)
                    .bind(seq_column)
                    .bind(&record.host)
                    .bind(i64::from(record.port))
                    .bind(record.phase.as_str())
                    .bind(record.allowed)
                    .bind(record.rule.as_deref())
                    .bind(body.as_str())
                    .execute(&self.pool)
                    .await;
                    match done {
                        Ok(_) => return Ok(()),
                        Err(source) if is_foreign_key_violation(&source) => {
                            return Err(StoreError::NoSuchJob {
                                job_id: job_id.to_owned(),
                            })
                        }
                        Err(source) if is_unique_violation(&source) => {}
                        Err(source) => return Err(record_error(source)),
                    }
                    // The seq is taken: by this very attempt (written), or not.
                    let stored: Option<String> = sqlx::query_scalar(
                        "SELECT body FROM egress_attempts WHERE job_id = $1 AND seq = $2",
                    )
                    .bind(job_id)
                    .bind(seq_column)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(record_error)?;
                    if stored.as_deref() == Some(body.as_str()) {
                        return Ok(());
                    }
                    let last: Option<i64> = sqlx::query_scalar(
                        "SELECT MAX(seq) FROM egress_attempts WHERE job_id = $1",
                    )
                    .bind(job_id)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(record_error)?;
                    Err(StoreError::EgressConflict {
                        job_id: job_id.to_owned(),
                        seq,
                        last: row.narrow("seq", last.unwrap_or(0))?,
                    })
                }

                /// Every attempt of `job_id`, by seq.
                pub(super) async fn egress(
                    &self,
                    job_id: &str,
                ) -> Result<Vec<EgressRecord>, StoreError> {
                    let rows = sqlx::query_as::<_, (i64, String)>(
                        "SELECT seq, body FROM egress_attempts WHERE job_id = $1 ORDER BY seq",
                    )
                    .bind(job_id)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(|source| StoreError::ReadEgress {
                        job_id: job_id.to_owned(),
                        source,
                    })?;
                    rows.into_iter()
                        .map(|(seq, body)| {
                            serde_json::from_str(&body).map_err(|e| StoreError::Decode {
                                table: "egress_attempts",
                                column: "body",
                                row: format!("{job_id}/{seq}"),
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
