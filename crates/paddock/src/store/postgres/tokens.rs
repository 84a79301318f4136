//! The `api_tokens` table on PostgreSQL: the shared statements
//! (`sql/tokens.rs`); revoking keeps the first revocation time.

use super::PgStore;

crate::store::sql::tokens::api_tokens_queries!(PgStore);
