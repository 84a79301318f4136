//! The `host_profiles` table on PostgreSQL: the shared statements (`sql/profiles.rs`).

use super::PgStore;

crate::store::sql::profiles::profile_queries!(PgStore);
