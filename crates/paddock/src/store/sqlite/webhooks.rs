//! The `webhook_deliveries` table on SQLite: the shared statements (`sql/webhooks.rs`).

use super::SqliteStore;

crate::store::sql::webhooks::webhook_queries!(SqliteStore);
