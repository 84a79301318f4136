//! Host profiles in the store (`host_profiles`): saved whole as their
//! snake_case JSON (rows of earlier versions in camelCase are read as
//! they are), looked up by id. Saving an id again replaces it.

use paddock_protocol::HostProfile;

use crate::store::StoreError;

/// A stored profile's JSON `body`, checked.
pub(in crate::store) fn decode(id: &str, body: &str) -> Result<HostProfile, StoreError> {
    HostProfile::from_stored_json(body, &format!("host_profiles.{id}")).map_err(|e| {
        StoreError::Decode {
            table: "host_profiles",
            column: "body",
            row: id.to_owned(),
            message: e.to_string(),
        }
    })
}

/// `put_profile`, `profile`, `remove_profile` and `profiles` for the store
/// type `$store` (a struct with a sqlx `pool`).
macro_rules! profile_queries {
    ($store:ident) => {
        const _: () = {
            use paddock_protocol::HostProfile;
            use time::OffsetDateTime;
            use $crate::store::sql::profiles::decode;
            use $crate::store::StoreError;

            impl $store {
                /// Saves `profile`, replacing a stored profile with the same id.
                pub(super) async fn put_profile(
                    &self,
                    profile: &HostProfile,
                ) -> Result<(), StoreError> {
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
                         ON CONFLICT (id) DO UPDATE \
                         SET body = excluded.body, updated_at = excluded.updated_at",
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

                /// The stored profile `id`, if any.
                pub(super) async fn profile(
                    &self,
                    id: &str,
                ) -> Result<Option<HostProfile>, StoreError> {
                    let body = sqlx::query_scalar::<_, String>(
                        "SELECT body FROM host_profiles WHERE id = $1",
                    )
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(|source| StoreError::ReadProfile {
                        id: id.to_owned(),
                        source,
                    })?;
                    body.map(|b| decode(id, &b)).transpose()
                }

                /// Removes the stored profile `id`; whether there was one.
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

                /// Every stored profile, by id.
                pub(super) async fn profiles(&self) -> Result<Vec<HostProfile>, StoreError> {
                    let rows = sqlx::query_as::<_, (String, String)>(
                        "SELECT id, body FROM host_profiles ORDER BY id",
                    )
                    .fetch_all(&self.pool)
                    .await
                    .map_err(|source| StoreError::ReadProfile {
                        id: "*".to_owned(),
                        source,
                    })?;
                    rows.iter().map(|(id, body)| decode(id, body)).collect()
                }
            }
        };
    };
}
pub(in crate::store) use profile_queries;
