//! The `host_profiles` table on SQLite: the shared statements (`sql/profiles.rs`).

use super::SqliteStore;

crate::store::sql::profiles::profile_queries!(SqliteStore);
