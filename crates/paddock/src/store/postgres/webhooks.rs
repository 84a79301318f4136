//! The `webhook_deliveries` table on PostgreSQL: the shared statements (`sql/webhooks.rs`).

use super::PgStore;

crate::store::sql::webhooks::webhook_queries!(PgStore);
