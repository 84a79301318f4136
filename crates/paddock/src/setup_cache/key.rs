//! The setup cache's key: a SHA-256 of everything that decides what setup
//! produces and that Paddock can name before it runs: the source's
//! identity (a local repository's path or the URL), the base commit's
//! lockfiles and package manifests (their paths and blob ids, anywhere in
//! the tree), the setup commands, the setup phase's destination list, the
//! rung, the host profile and the PATH the commands get (which names the
//! engine's Node). The profile counts whole, as it was read, not by its
//! id: its rules decide what setup may fetch and run (`setup_allow`,
//! `open_addresses`, its credentials, the programs it hides), and one id
//! can name other rules over time (a profile saved again, narrowed) or at
//! once (a file giving the id of the store's profile); keyed by the id, a
//! job under the narrow rules restored what setup had fetched under the
//! wide ones. The source alone is also hashed, so entries of one
//! source can be counted and pruned together, and no other source's key
//! can ever equal its. An entry is named by its key and the commit it was
//! produced from (`mod.rs` says who may restore it): one key can have
//! entries from several commits, a branch's beside main's.

use paddock_protocol::HostProfile;
use serde::Serialize;
use sha2::{Digest as _, Sha256};

/// Lockfiles and manifests whose content decides what a package manager
/// installs (npm, Yarn, pnpm, Bun, Cargo, Go, Python, Ruby, PHP, Elixir,
/// Nix, NuGet, Gradle, Dart, Swift).
pub(crate) const KEY_FILES: &[&str] = &[
    "package.json",
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "bun.lock",
    "bun.lockb",
    "Cargo.toml",
    "Cargo.lock",
    "go.mod",
    "go.sum",
    "pyproject.toml",
    "poetry.lock",
    "Pipfile",
    "Pipfile.lock",
    "uv.lock",
    "pdm.lock",
    "requirements.txt",
    "setup.py",
    "setup.cfg",
    "Gemfile",
    "Gemfile.lock",
    "composer.json",
    "composer.lock",
    "mix.exs",
    "mix.lock",
    "flake.lock",
    "packages.lock.json",
    "gradle.lockfile",
    "pubspec.lock",
    "Package.resolved",
];

/// Whether a file name is one of [`KEY_FILES`].
pub(crate) fn is_key_file(name: &[u8]) -> bool {
    KEY_FILES.iter().any(|k| k.as_bytes() == name)
}

/// What the key is made of.
#[derive(Debug, Serialize)]
pub(crate) struct KeyInput<'a> {
    pub source: &'a str,
    /// (path, blob id) of the base commit's key files, sorted.
    pub key_files: Vec<(String, String)>,
    pub commands: &'a [String],
    pub network: Vec<String>,
    pub rung: &'a str,
    /// The job's host profile, every rule of it.
    pub profile: Option<&'a HostProfile>,
    pub path_env: &'a str,
    /// The host's variables and read-only paths every job gets (the
    /// config file's `[jobs]`: a toolchain setup runs); left out when
    /// none, so a host without them keeps its keys.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub tools_env: &'a [(String, String)],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub read_only: &'a [std::path::PathBuf],
}

/// A key and its source's part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Key {
    /// 64 hex digits.
    pub full: String,
    /// 16 hex digits of the source's own hash.
    pub source: String,
}

impl Key {
    pub fn of(mut input: KeyInput<'_>) -> Key {
        input.key_files.sort();
        let mut h = Sha256::new();
        h.update(b"paddock setup cache 2\n");
        // Serializing these plain types cannot fail; an empty hash would
        // only make every key of this kind equal, which the source part
        // still separates.
        h.update(serde_json::to_vec(&input).unwrap_or_default());
        let full = hex::encode(h.finalize());
        Key {
            source: source_id(input.source),
            full,
        }
    }

    /// What the directory name of each of this key's entries starts
    /// with: the source's part first, so one source's entries are found by
    /// prefix, then the key.
    pub fn prefix(&self) -> String {
        format!("{}-{}-", self.source, self.full)
    }

    /// The directory name of this key's entry produced from `commit`.
    pub fn entry_name(&self, commit: &str) -> String {
        format!("{}{commit}", self.prefix())
    }

    /// The short form events show.
    pub fn short(&self) -> &str {
        &self.full[..12]
    }
}

/// Whether `s` is a commit's object name as git prints it (40 or 64
/// lowercase hex digits): what may name an entry, and be given to git.
pub(crate) fn is_commit(s: &str) -> bool {
    matches!(s.len(), 40 | 64) && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// 16 hex digits naming a source.
pub(crate) fn source_id(source: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"paddock setup cache source\n");
    h.update(source.as_bytes());
    hex::encode(h.finalize())[..16].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input<'a>(source: &'a str, files: &[(&str, &str)], cmds: &'a [String]) -> KeyInput<'a> {
        KeyInput {
            source,
            key_files: files
                .iter()
                .map(|(p, b)| (p.to_string(), b.to_string()))
                .collect(),
            commands: cmds,
            network: vec!["registries".into()],
            rung: "sandbox",
            profile: None,
            path_env: "/usr/bin:/bin",
            tools_env: &[],
            read_only: &[],
        }
    }

    /// Each part changes the key; the order of the key files does not;
    /// two sources never share one.
    #[test]
    fn every_part_counts() {
        let cmds = vec!["npm ci".to_string()];
        // Two profiles of one id: the second opens less to setup.
        let text = "id = \"p\"\n[network]\nsetup_allow = [\"registries\"]\n";
        let profile = HostProfile::from_toml(text, "p").unwrap();
        let narrowed = HostProfile::from_toml("id = \"p\"\n", "p").unwrap();
        let base = Key::of(input(
            "/r",
            &[("a/package-lock.json", "1"), ("x", "2")],
            &cmds,
        ));
        let same = Key::of(input(
            "/r",
            &[("x", "2"), ("a/package-lock.json", "1")],
            &cmds,
        ));
        assert_eq!(base, same);
        let other_cmds = vec!["npm ci --ignore-scripts".to_string()];
        let tools_env = [("RUSTUP_HOME".to_string(), "/opt/rustup".to_string())];
        let read_only = [std::path::PathBuf::from("/opt/rustup")];
        let changed = [
            Key::of(input(
                "/r",
                &[("a/package-lock.json", "3"), ("x", "2")],
                &cmds,
            )),
            Key::of(input(
                "/s",
                &[("a/package-lock.json", "1"), ("x", "2")],
                &cmds,
            )),
            Key::of(input(
                "/r",
                &[("a/package-lock.json", "1"), ("x", "2")],
                &other_cmds,
            )),
            Key::of(KeyInput {
                rung: "process",
                ..input("/r", &[("a/package-lock.json", "1"), ("x", "2")], &cmds)
            }),
            Key::of(KeyInput {
                network: vec![],
                ..input("/r", &[("a/package-lock.json", "1"), ("x", "2")], &cmds)
            }),
            Key::of(KeyInput {
                profile: Some(&profile),
                ..input("/r", &[("a/package-lock.json", "1"), ("x", "2")], &cmds)
            }),
            Key::of(KeyInput {
                profile: Some(&narrowed),
                ..input("/r", &[("a/package-lock.json", "1"), ("x", "2")], &cmds)
            }),
            Key::of(KeyInput {
                path_env: "/opt/node/bin:/usr/bin",
                ..input("/r", &[("a/package-lock.json", "1"), ("x", "2")], &cmds)
            }),
            Key::of(KeyInput {
                tools_env: &tools_env,
                ..input("/r", &[("a/package-lock.json", "1"), ("x", "2")], &cmds)
            }),
            Key::of(KeyInput {
                read_only: &read_only,
                ..input("/r", &[("a/package-lock.json", "1"), ("x", "2")], &cmds)
            }),
        ];
        for k in &changed {
            assert_ne!(k.full, base.full);
        }
        // One id, other rules: another key.
        assert_ne!(changed[5].full, changed[6].full);
        assert_eq!(
            (
                changed[1].source == base.source,
                changed[0].source == base.source
            ),
            (false, true)
        );
        assert!(is_key_file(b"Cargo.lock") && !is_key_file(b"README.md"));
        let c = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(
            base.entry_name(c),
            format!("{}-{}-{c}", base.source, base.full)
        );
        assert_eq!(
            [
                c,
                &c[1..],
                "0123456789ABCDEF0123456789ABCDEF01234567",
                "-x",
                ""
            ]
            .map(is_commit),
            [true, false, false, false, false]
        );
    }
}
