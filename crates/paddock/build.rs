//! Rebuilds the crate when a migration is added, so that `sqlx::migrate!`
//! embeds every file in `migrations/` (it notices edits, not additions).
//! Links the `paddock` binary with packed relative relocations (DT_RELR)
//! on Linux: its ~20,000 relative relocations shrink from a 480 KB table
//! the dynamic loader reads at every start to a few KB, which is most of
//! the exec cost of each `paddock sandbox` run (BENCHMARKS.md).

fn main() {
    println!("cargo:rerun-if-changed=migrations");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let gnu = std::env::var("CARGO_CFG_TARGET_ENV").is_ok_and(|env| env == "gnu");
    if linux && gnu {
        println!("cargo:rustc-link-arg-bin=paddock=-Wl,-z,pack-relative-relocs");
    }
}
