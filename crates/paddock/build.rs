//! Rebuilds the crate when a migration is added, so that `sqlx::migrate!`
//! embeds every file in `migrations/` and `migrations-postgres/` (it
//! notices edits, not additions).
//! Links the `paddock` binary with packed relative relocations (DT_RELR)
//! on Linux: its ~20,000 relative relocations shrink from a 480 KB table
//! the dynamic loader reads at every start to a few KB, which is most of
//! the exec cost of each `paddock sandbox` run (BENCHMARKS.md).
//! Writes the shipped price tables (`data/prices*.toml`) as JSON into
//! `OUT_DIR`, which the binary embeds: every `paddock run`, `usage` and
//! `serve` parses them at start, and a JSON parse of the same table is a
//! tenth of the TOML parse's CPU (6 M instructions, a tenth of a hello
//! job's `paddock`; issue #14). The TOML files stay the source.

use std::error::Error;
use std::path::Path;

/// The shipped price tables, converted to JSON of the same shape.
const PRICE_TABLES: [&str; 2] = ["prices-litellm", "prices"];

fn main() -> Result<(), Box<dyn Error>> {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=migrations-postgres");
    let out = std::env::var("OUT_DIR")?;
    for table in PRICE_TABLES {
        let source = Path::new("data").join(format!("{table}.toml"));
        println!("cargo:rerun-if-changed={}", source.display());
        let text = std::fs::read_to_string(&source)
            .map_err(|e| format!("read {}: {e}", source.display()))?;
        let value: toml::Value =
            toml::from_str(&text).map_err(|e| format!("parse {}: {e}", source.display()))?;
        let json = serde_json::to_string(&value)?;
        std::fs::write(Path::new(&out).join(format!("{table}.json")), json)?;
    }
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let gnu = std::env::var("CARGO_CFG_TARGET_ENV").is_ok_and(|env| env == "gnu");
    if linux && gnu {
        println!("cargo:rustc-link-arg-bin=paddock=-Wl,-z,pack-relative-relocs");
    }
    Ok(())
}
