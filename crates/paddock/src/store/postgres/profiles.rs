//! Host profiles (`host_profiles`) on PostgreSQL: SQLite's statements,
//! decoded by its `decode`.

use paddock_protocol::HostProfile;
use time::OffsetDateTime;

use super::{PgStore, StoreError};
use crate::store::sqlite::profiles::decode;

impl PgStore {
    pub(super) async fn put_profile(&self, profile: &HostProfile) -> Result<(), StoreError> {
        let body = serde_json::to_string(profile).map_err(|e| StoreError::Encode {
            table: "host_profiles",
            column: "body",
            row: profile.id.clone(),
            message: e.to_string(),
        })?;
        let now = OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .map_err(|e| StoreError::Encode {
                table: "host_profiles",
                column: "updated_at",
                row: profile.id.clone(),
                message: e.to_string(),
            })?;
        sqlx::query(
            "INSERT INTO host_profiles (id, body, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (id) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at",
        )
        .bind(&profile.id)
        .bind(body)
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(|source| StoreError::SaveProfile {
            id: profile.id.clone(),
            source,
        })?;
        Ok(())
    }

    pub(super) async fn profile(&self, id: &str) -> Result<Option<HostProfile>, StoreError> {
        let body = sqlx::query_scalar::<_, String>("SELECT body FROM host_profiles WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(|source| StoreError::ReadProfile {
                id: id.to_owned(),
                source,
            })?;
        body.map(|b| decode(id, &b)).transpose()
    }

    pub(super) async fn remove_profile(&self, id: &str) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM host_profiles WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(|source| StoreError::RemoveProfile {
                id: id.to_owned(),
                source,
            })?;
        Ok(done.rows_affected() > 0)
    }

    pub(super) async fn profiles(&self) -> Result<Vec<HostProfile>, StoreError> {
        let rows =
            sqlx::query_as::<_, (String, String)>("SELECT id, body FROM host_profiles ORDER BY id")
                .fetch_all(&self.pool)
                .await
                .map_err(|source| StoreError::ReadProfile {
                    id: "*".to_owned(),
                    source,
                })?;
        rows.iter().map(|(id, body)| decode(id, body)).collect()
    }
}
