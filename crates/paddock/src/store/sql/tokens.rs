//! The `api_tokens` table: `paddock serve`'s bearer tokens as salted
//! hashes with their scope, creation and revocation times
//! ([`StoredToken`]; the token itself is never given to the store).
//! Revoking keeps the row and the first revocation time.

use crate::api_token::{Scope, StoredToken};
use crate::store::sqlite::codec::RowRef;
use crate::store::StoreError;

/// A row of `api_tokens` as [`SELECT`] reads it.
pub(in crate::store) type Row = (
    String,
    Option<String>,
    String,
    String,
    String,
    String,
    Option<String>,
);

/// Every column of `api_tokens`, in [`Row`]'s order.
pub(in crate::store) const SELECT: &str =
    "SELECT id, name, scope, salt, hash, created_at, revoked_at FROM api_tokens";

/// A [`Row`] checked into a [`StoredToken`].
pub(in crate::store) fn decode(
    (id, name, scope, salt, hash, created_at, revoked_at): Row,
) -> Result<StoredToken, StoreError> {
    let at = RowRef::new("api_tokens", format!("token {id}"));
    Ok(StoredToken {
        scope: scope
            .parse::<Scope>()
            .map_err(|e| at.decode_error("scope", e))?,
        created_at: at.parse_time("created_at", &created_at)?,
        revoked_at: at.opt_parse_time("revoked_at", revoked_at.as_deref())?,
        id,
        name,
        salt,
        hash,
    })
}

/// `insert_api_token`, `api_token`, `api_tokens` and `revoke_api_token`
/// for the store type `$store` (a struct with a sqlx `pool`).
macro_rules! api_tokens_queries {
    ($store:ident) => {
        const _: () = {
            use time::OffsetDateTime;

            use $crate::api_token::StoredToken;
            use $crate::store::sql::tokens::{decode, Row, SELECT};
            use $crate::store::sqlite::codec::RowRef;
            use $crate::store::sqlite::is_unique_violation;
            use $crate::store::StoreError;

            impl $store {
                pub(super) async fn insert_api_token(
                    &self,
                    token: &StoredToken,
                ) -> Result<(), StoreError> {
                    let at = RowRef::new("api_tokens", format!("token {}", token.id));
                    sqlx::query(
                        "INSERT INTO api_tokens \
                         (id, name, scope, salt, hash, created_at, revoked_at) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    )
                    .bind(&token.id)
                    .bind(token.name.as_deref())
                    .bind(token.scope.as_str())
                    .bind(&token.salt)
                    .bind(&token.hash)
                    .bind(at.time("created_at", token.created_at)?)
                    .bind(at.opt_time("revoked_at", token.revoked_at)?)
                    .execute(&self.pool)
                    .await
                    .map_err(|source| {
                        if is_unique_violation(&source) {
                            StoreError::TokenExists {
                                id: token.id.clone(),
                            }
                        } else {
                            StoreError::InsertToken {
                                id: token.id.clone(),
                                source,
                            }
                        }
                    })?;
                    Ok(())
                }

                pub(super) async fn api_token(
                    &self,
                    id: &str,
                ) -> Result<Option<StoredToken>, StoreError> {
                    let row = sqlx::query_as::<_, Row>(&format!("{SELECT} WHERE id = $1"))
                        .bind(id)
                        .fetch_optional(&self.pool)
                        .await
                        .map_err(|source| StoreError::ReadTokens {
                            id: id.to_owned(),
                            source,
                        })?;
                    row.map(decode).transpose()
                }

                pub(super) async fn api_tokens(&self) -> Result<Vec<StoredToken>, StoreError> {
                    let rows =
                        sqlx::query_as::<_, Row>(&format!("{SELECT} ORDER BY created_at, id"))
                            .fetch_all(&self.pool)
                            .await
                            .map_err(|source| StoreError::ReadTokens {
                                id: "*".to_owned(),
                                source,
                            })?;
                    rows.into_iter().map(decode).collect()
                }

                pub(super) async fn revoke_api_token(
                    &self,
                    id: &str,
                    at: OffsetDateTime,
                ) -> Result<Option<StoredToken>, StoreError> {
                    let when =
                        RowRef::new("api_tokens", format!("token {id}")).time("revoked_at", at)?;
                    sqlx::query(
                        "UPDATE api_tokens SET revoked_at = $2 \
                         WHERE id = $1 AND revoked_at IS NULL",
                    )
                    .bind(id)
                    .bind(when)
                    .execute(&self.pool)
                    .await
                    .map_err(|source| StoreError::RevokeToken {
                        id: id.to_owned(),
                        source,
                    })?;
                    self.api_token(id).await
                }
            }
        };
    };
}
pub(in crate::store) use api_tokens_queries;
