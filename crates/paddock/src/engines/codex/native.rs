//! Codex's native binary behind its npm launcher. `@openai/codex`'s
//! `bin/codex.js` is a Node script: it picks the platform package for this
//! machine (`@openai/codex-linux-x64`, `-linux-arm64`), execs
//! `vendor/<target triple>/bin/codex` from it (or from the package's own
//! `vendor/`), and sets `CODEX_MANAGED_PACKAGE_ROOT` (the package's real
//! path) and `CODEX_MANAGED_BY_NPM=1`. Starting Node for that costs ~78 ms
//! per start against ~6 ms for the binary itself
//! (`../shared/notes/engines.md`), so Paddock resolves the same binary
//! here and starts it directly. Only that exact layout is recognised; the
//! binary's version is still checked against the pin before every job.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

/// The native program and the launcher's variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Native {
    pub program: PathBuf,
    pub env: Vec<(String, String)>,
}

/// The platform package and target triple of this machine, as the
/// launcher maps them (Linux only: Paddock runs there).
fn platform() -> Option<(&'static str, &'static str)> {
    match std::env::consts::ARCH {
        "x86_64" => Some(("codex-linux-x64", "x86_64-unknown-linux-musl")),
        "aarch64" => Some(("codex-linux-arm64", "aarch64-unknown-linux-musl")),
        _ => None,
    }
}

/// The native binary `binary` (a path to, or a link to, the npm package's
/// `bin/codex.js`) would start, or `None` when `binary` is not that
/// launcher or no executable binary is where the launcher looks.
pub fn behind_launcher(binary: &Path) -> Option<Native> {
    let (package, triple) = platform()?;
    behind_launcher_for(binary, package, triple)
}

fn behind_launcher_for(binary: &Path, package: &str, triple: &str) -> Option<Native> {
    let script = binary.canonicalize().ok()?;
    if script.file_name()? != "codex.js" {
        return None;
    }
    let root = script
        .parent()
        .filter(|b| b.file_name() == Some("bin".as_ref()))?
        .parent()?;
    let scope = root.parent()?;
    if root.file_name()? != "codex" || scope.file_name()? != "@openai" {
        return None;
    }
    let relative: PathBuf = ["vendor", triple, "bin", "codex"].iter().collect();
    [scope.join(package).join(&relative), root.join(&relative)]
        .into_iter()
        .find(|p| is_executable_file(p))
        .map(|program| Native {
            program,
            env: vec![
                (
                    "CODEX_MANAGED_PACKAGE_ROOT".to_string(),
                    root.display().to_string(),
                ),
                ("CODEX_MANAGED_BY_NPM".to_string(), "1".to_string()),
            ],
        })
}

fn is_executable_file(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn touch(p: &Path, mode: u32) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// The npm layout: `.bin/codex` links to the launcher, the native
    /// binary in the platform package (preferred) or the package's own
    /// `vendor/`; anything else starts as it is.
    #[test]
    fn the_native_binary_is_found_where_the_launcher_looks() {
        let dir = tempfile::tempdir().unwrap();
        let nm = dir.path().join("node_modules");
        let launcher = nm.join("@openai/codex/bin/codex.js");
        touch(&launcher, 0o755);
        std::fs::create_dir_all(nm.join(".bin")).unwrap();
        std::os::unix::fs::symlink("../@openai/codex/bin/codex.js", nm.join(".bin/codex")).unwrap();
        let triple = "x86_64-unknown-linux-musl";
        let find = || behind_launcher_for(&nm.join(".bin/codex"), "codex-linux-x64", triple);
        // No native binary anywhere: the launcher starts.
        assert_eq!(find(), None);
        // In the package's own vendor/.
        let own = nm
            .join("@openai/codex/vendor")
            .join(triple)
            .join("bin/codex");
        touch(&own, 0o755);
        let root = nm.join("@openai/codex").canonicalize().unwrap();
        let env = vec![
            (
                "CODEX_MANAGED_PACKAGE_ROOT".to_string(),
                root.display().to_string(),
            ),
            ("CODEX_MANAGED_BY_NPM".to_string(), "1".to_string()),
        ];
        assert_eq!(
            find(),
            Some(Native {
                program: own.canonicalize().unwrap(),
                env: env.clone()
            })
        );
        // The platform package wins, as in the launcher; a file there
        // that is not executable does not.
        let platform = nm
            .join("@openai/codex-linux-x64/vendor")
            .join(triple)
            .join("bin/codex");
        touch(&platform, 0o644);
        assert_eq!(find().map(|n| n.program), Some(own.canonicalize().unwrap()));
        std::fs::set_permissions(&platform, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(
            find(),
            Some(Native {
                program: nm
                    .canonicalize()
                    .unwrap()
                    .join("@openai/codex-linux-x64/vendor")
                    .join(triple)
                    .join("bin/codex"),
                env
            })
        );
        // A codex that is not the launcher (a native install, a wrapper).
        let other = dir.path().join("bin/codex");
        touch(&other, 0o755);
        assert_eq!(behind_launcher_for(&other, "codex-linux-x64", triple), None);
    }
}
