//! The `egress_attempts` table on PostgreSQL: the shared statements (`sql/egress.rs`).

use super::PgStore;

crate::store::sql::egress::egress_queries!(PgStore);
