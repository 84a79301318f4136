//! Rebuilds the crate when a migration is added, so that `sqlx::migrate!`
//! embeds every file in `migrations/` (it notices edits, not additions).

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
