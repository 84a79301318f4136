//! The `api_tokens` table on SQLite: the shared statements
//! (`sql/tokens.rs`).

use super::SqliteStore;

crate::store::sql::tokens::api_tokens_queries!(SqliteStore);
