//! `paddock doctor`'s checks of what a user installs: each engine on PATH
//! at its pinned version, git, and the database. Each failure carries its
//! fix. (The state directory, broker socket and a sandbox job are
//! `host_check`'s.)

use std::borrow::Cow;
use std::path::Path;
use std::process::Command;

use crate::engines::{self, Pin};
use crate::host_check::Check;
use crate::paths::Paths;

/// Runs the checks with `host_path` as PATH.
pub fn run(paths: &Paths, host_path: Option<&std::ffi::OsStr>) -> Vec<Check> {
    let mut checks: Vec<Check> = engines::KINDS
        .map(|k| engines::adapter(k).install())
        .iter()
        .map(|p| engine(p, host_path))
        .collect();
    checks.push(git(host_path));
    checks.push(match &paths.db {
        crate::store::StoreAt::File(db) => database(db),
        // A server's database is not reached from here (doctor makes no
        // connections); the first command that opens it names a failure.
        crate::store::StoreAt::Postgres(url) => passed(
            "database",
            format!("PostgreSQL at {url} (not connected to by doctor)"),
        ),
    });
    checks
}

fn failed(name: impl Into<Cow<'static, str>>, detail: String, fix: String) -> Check {
    Check {
        name: name.into(),
        ok: false,
        detail,
        fix: Some(fix),
    }
}

fn passed(name: impl Into<Cow<'static, str>>, detail: String) -> Check {
    Check {
        name: name.into(),
        ok: true,
        detail,
        fix: None,
    }
}

/// `--version` of `binary`, its first line.
fn version(binary: &Path) -> Result<String, String> {
    let out = Command::new(binary)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {} --version: {e}", binary.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text.lines().next().unwrap_or_default().trim().to_owned())
}

fn engine(pin: &Pin, host_path: Option<&std::ffi::OsStr>) -> Check {
    let name = format!("engine {}", pin.binary);
    let cwd = std::env::current_dir().unwrap_or_else(|_| "/".into());
    let Ok(binary) = which::which_in(pin.binary, host_path, cwd) else {
        return failed(
            name,
            format!("`{}` is not on PATH", pin.binary),
            pin.install_hint(),
        );
    };
    match version(&binary) {
        Ok(v) if pin.matches(&v) => passed(name, format!("{} ({v})", binary.display())),
        Ok(v) => failed(
            name,
            format!(
                "{} is `{v}`; Paddock is tested with {} {}",
                binary.display(),
                pin.package,
                pin.version
            ),
            pin.install_hint(),
        ),
        Err(e) => failed(name, e, pin.install_hint()),
    }
}

/// The git Paddock's host gits are (`host_git::git_program_in`: the
/// search path's absolute directories only, never a `git` a relative
/// entry names in the current directory, which was run here for its
/// version).
fn git(host_path: Option<&std::ffi::OsStr>) -> Check {
    let found = crate::workspace::host_git::git_program_in(host_path);
    match found.is_absolute().then_some(found) {
        Some(g) => match version(&g) {
            Ok(v) => passed("git", v),
            Err(e) => failed(
                "git",
                e,
                "reinstall git (Debian: apt-get install git)".into(),
            ),
        },
        None => failed(
            "git",
            "`git` is not on PATH".into(),
            "install git (Debian: apt-get install git)".into(),
        ),
    }
}

/// The database: absent is fine (the first job creates it); present, it
/// must be a readable file.
fn database(db: &Path) -> Check {
    match std::fs::metadata(db) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => passed(
            "database",
            format!("{} (created by the first job)", db.display()),
        ),
        Err(e) => failed(
            "database",
            format!("{}: {e}", db.display()),
            "check the permissions of the database and its directory, or pass --db".into(),
        ),
        Ok(m) if !m.is_file() => failed(
            "database",
            format!("{} is not a file", db.display()),
            "pass --db FILE (or PADDOCK_DB) naming a SQLite file".into(),
        ),
        Ok(_) => match std::fs::File::open(db) {
            Ok(_) => passed("database", db.display().to_string()),
            Err(e) => failed(
                "database",
                format!("{}: {e}", db.display()),
                "check the permissions of the database file, or pass --db".into(),
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_engine_names_the_pin_and_the_install_command() {
        let empty = tempfile::tempdir().unwrap();
        let c = engine(&engines::codex::PIN, Some(empty.path().as_os_str()));
        assert_eq!(
            (c.name.as_ref(), c.ok, c.detail.as_str(), c.fix),
            (
                "engine codex",
                false,
                "`codex` is not on PATH",
                Some(engines::codex::PIN.install_hint())
            )
        );
    }

    #[test]
    fn a_wrong_version_is_a_failure_with_its_fix() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("claude");
        paddock_test_support::script::write_script(&bin, "#!/bin/sh\necho '1.0.0 (Claude Code)'\n");
        let c = engine(&engines::claude::PIN, Some(dir.path().as_os_str()));
        assert_eq!(
            (c.ok, c.detail),
            (
                false,
                format!(
                    "{} is `1.0.0 (Claude Code)`; Paddock is tested with @anthropic-ai/claude-code 2.1.197",
                    bin.display()
                )
            )
        );
    }

    #[test]
    fn a_database_that_is_a_directory_fails() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!database(dir.path()).ok);
        assert!(database(&dir.path().join("none.db")).ok);
    }
}
