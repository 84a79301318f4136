//! The `egress_attempts` table on SQLite: the shared statements (`sql/egress.rs`).

use super::SqliteStore;

crate::store::sql::egress::egress_queries!(SqliteStore);
