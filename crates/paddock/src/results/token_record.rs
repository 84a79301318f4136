//! The files a publish leaves in a job's artifacts while a forge token it
//! minted is alive (`.gitlab-token-*.json`, `.github-token-*.json`), as the
//! reaper and the next `paddock publish` read them back: listed as regular
//! files only, read without following a link or blocking (a FIFO swapped
//! in after the listing is refused, not waited on) and at most
//! [`MAX_BYTES`], removed with gone-already as success. What a record
//! holds and how its token is revoked is each forge's module's.

use std::path::{Path, PathBuf};

use super::forge::ForgeError;

/// The most bytes of a record read.
pub const MAX_BYTES: u64 = 4096;

/// What one pass over a job's token records did: the tokens revoked (by
/// record, never by value) and what failed (those records stay for a later
/// pass). Both are reported: a bad record never hides a revocation.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pass {
    pub revoked: Vec<String>,
    pub errors: Vec<String>,
}

impl Pass {
    /// A pass that failed before any record was read.
    pub fn failed(error: String) -> Pass {
        Pass {
            revoked: Vec::new(),
            errors: vec![error],
        }
    }

    /// Adds `other`'s revocations and errors to this pass.
    pub fn extend(&mut self, other: Pass) {
        self.revoked.extend(other.revoked);
        self.errors.extend(other.errors);
    }
}

/// The records in `artifacts` whose names start with `prefix`, sorted
/// (regular files only; a link is never followed).
pub fn list(artifacts: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(artifacts) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

/// The text of record `path`: no link followed, no blocking open, a
/// regular file only, at most [`MAX_BYTES`]; errors name the file.
pub fn read_text(path: &Path) -> Result<String, String> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let failed = |e: &dyn std::fmt::Display| format!("read {}: {e}", path.display());
    let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits())
        .open(path)
        .map_err(|e| failed(&e))?;
    if !file.metadata().map_err(|e| failed(&e))?.is_file() {
        return Err(failed(&"not a regular file"));
    }
    let mut text = String::new();
    file.take(MAX_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| failed(&e))?;
    Ok(text)
}

/// Removes record `path` of `forge` (gone already is fine).
pub fn remove(path: &Path, forge: &'static str) -> Result<(), ForgeError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(ForgeError::TokenRecord {
            forge,
            path: path.to_path_buf(),
            step: "remove it",
            source,
        }),
    }
}
