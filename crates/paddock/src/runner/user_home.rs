//! The home directories of the user Paddock runs as, and the places
//! inside them where programs keep keys, tokens and session histories
//! (`~/.ssh`, `~/.aws`, `~/.config/gcloud`, `~/.netrc`, the engines' own
//! `~/.codex/auth.json` and `~/.claude/.credentials.json`, …): places no
//! read-only path of a sandboxed job's view may show (`sandbox_view.rs`,
//! `launcher::shows_private`). A home is private as a whole (a path that
//! is or holds it is refused); a directory inside it is bound as the
//! engine needs (`~/.nvm/…/bin`, `~/.cargo/bin`) unless it is, holds or
//! lies inside one of these stores: `~/.config` holds the cloud SDKs'
//! keys, a `[jobs] read_only` of `~/.ssh/config.d` is inside the SSH
//! keys' directory. The list names the well-known stores; a secret kept
//! elsewhere in the home is private only as part of the home, which is
//! why docs/sandbox.md asks for engines installed in directories of their
//! own. The user's homes are looked up once per process (the passwd
//! entry is an NSS call, a directory service's on some hosts, and every
//! sandboxed job's admission and provisioning ask for them); the stores in
//! them are looked for at each ask, since a login made later (`gcloud auth
//! login` in a server's lifetime) makes one.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::launcher::Private;

/// A store of secrets inside a home: its path relative to the home, what
/// it holds, and whether every path inside it is private too (a
/// directory of keys) or only the store as a whole (a directory an
/// engine may be installed in, `~/.claude/local`, beside its secrets).
struct Store {
    path: &'static str,
    what: &'static str,
    inside_too: bool,
}

/// A store private whole: a file, or a directory everything inside which
/// is private too.
const fn secret(path: &'static str, what: &'static str) -> Store {
    Store {
        path,
        what,
        inside_too: true,
    }
}

/// A directory private as a whole, beside what may be bound inside it.
const fn beside(path: &'static str, what: &'static str) -> Store {
    Store {
        path,
        what,
        inside_too: false,
    }
}

/// The well-known stores of keys, tokens and histories in a home.
const STORES: &[Store] = &[
    secret(".ssh", "SSH keys"),
    secret(".gnupg", "GnuPG keys"),
    secret(".aws", "AWS credentials"),
    secret(".azure", "Azure credentials"),
    secret(".config/gcloud", "Google Cloud credentials"),
    secret(".kube", "Kubernetes credentials"),
    secret(".docker", "container registry credentials"),
    secret(".config/gh", "GitHub CLI tokens"),
    secret(".config/glab-cli", "GitLab CLI tokens"),
    secret(".config/hub", "hub's GitHub token"),
    secret(".password-store", "pass's password store"),
    secret(".local/share/keyrings", "the desktop keyring"),
    secret(
        ".mozilla",
        "Firefox's profiles: cookies and saved passwords",
    ),
    secret(
        ".config/google-chrome",
        "Chrome's profiles: cookies and saved passwords",
    ),
    secret(
        ".config/chromium",
        "Chromium's profiles: cookies and saved passwords",
    ),
    secret(".terraform.d", "Terraform's credentials"),
    secret(".netrc", "netrc's login passwords"),
    secret(".git-credentials", "git's stored credentials"),
    secret(".config/git/credentials", "git's stored credentials"),
    secret(".npmrc", "npm's registry tokens"),
    secret(".pypirc", "PyPI's upload tokens"),
    secret(".cargo/credentials", "crates.io's token"),
    secret(".cargo/credentials.toml", "crates.io's token"),
    secret(".gem/credentials", "RubyGems' API key"),
    secret(".pgpass", "PostgreSQL passwords"),
    secret(".my.cnf", "MySQL passwords"),
    secret(".vault-token", "Vault's token"),
    // The engines' own: their logins and every session's transcript. The
    // directories themselves may hold an engine's install
    // (`~/.claude/local`), so only the secrets inside are private whole.
    beside(".codex", "Codex's home: its login and sessions"),
    secret(".codex/auth.json", "Codex's login"),
    secret(".codex/sessions", "Codex's session transcripts"),
    beside(".claude", "Claude Code's home: its login and sessions"),
    secret(".claude/.credentials.json", "Claude Code's login"),
    secret(".claude/projects", "Claude Code's session transcripts"),
    secret(".claude.json", "Claude Code's account and project history"),
];

/// The places of the user Paddock runs as that no read-only path may
/// show: each home directory ([`user_homes`]: `HOME` and the passwd
/// entry's, looked up once per process), and each well-known store of
/// secrets in it that is there now.
pub fn private_places() -> Vec<Private> {
    static HOMES: OnceLock<Vec<PathBuf>> = OnceLock::new();
    let homes = HOMES.get_or_init(|| {
        let passwd = nix::unistd::User::from_uid(nix::unistd::getuid())
            .ok()
            .flatten()
            .map(|u| u.dir);
        user_homes(std::env::var_os("HOME"), passwd)
    });
    places_in(homes)
}

/// The places of `homes`: each home, and each store of [`STORES`] in it
/// that is there (one that is not cannot be shown, and a path holding
/// where it would be, `~/.config` without `~/.config/gcloud`, shows no
/// secret of it). A store that is a link is private where it leads too
/// (a `~/.ssh` linked to `/data/keys`).
fn places_in(homes: &[PathBuf]) -> Vec<Private> {
    let real = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let mut places = Vec::new();
    for home in homes {
        let home_real = real(home);
        places.push(Private {
            path: home_real.clone(),
            what: "the home directory of the user Paddock runs as, with its keys and credentials"
                .to_string(),
            inside_too: false,
        });
        for store in STORES {
            let path = home_real.join(store.path);
            if std::fs::symlink_metadata(&path).is_err() {
                continue;
            }
            let resolved = real(&path);
            let what = format!(
                "{}, ~/{} of the user Paddock runs as",
                store.what, store.path
            );
            if resolved != path {
                places.push(Private {
                    path: resolved,
                    what: what.clone(),
                    inside_too: store.inside_too,
                });
            }
            places.push(Private {
                path,
                what,
                inside_too: store.inside_too,
            });
        }
    }
    places
}

/// The home directories of the user Paddock runs as: `HOME` (`env`),
/// and its passwd entry's (`passwd`) when that is another, since a `HOME`
/// set elsewhere (or unset) leaves the real one, with its keys, where it
/// is. An empty or relative one is none.
fn user_homes(env: Option<std::ffi::OsString>, passwd: Option<PathBuf>) -> Vec<PathBuf> {
    let mut homes: Vec<PathBuf> = env
        .map(PathBuf::from)
        .into_iter()
        .chain(passwd)
        .filter(|h| h.is_absolute())
        .collect();
    homes.dedup();
    homes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `HOME` and the passwd entry's home are both kept when they differ,
    /// one when they are the same; an empty or relative one is none.
    #[test]
    fn the_users_homes_are_homes_and_its_passwd_entrys() {
        let os = |s: &str| Some(std::ffi::OsString::from(s));
        let path = |s: &str| Some(PathBuf::from(s));
        assert_eq!(
            [
                user_homes(os("/tmp/elsewhere"), path("/home/me")),
                user_homes(os("/home/me"), path("/home/me")),
                user_homes(None, path("/home/me")),
                user_homes(os(""), path("/home/me")),
                user_homes(os("rel"), None),
                user_homes(None, None),
            ],
            [
                vec![PathBuf::from("/tmp/elsewhere"), PathBuf::from("/home/me")],
                vec![PathBuf::from("/home/me")],
                vec![PathBuf::from("/home/me")],
                vec![PathBuf::from("/home/me")],
                vec![],
                vec![],
            ]
        );
    }

    /// A home's places: the home, then each store in it that is there; a
    /// store that is a link is private where it leads as well as where it
    /// is.
    #[test]
    fn a_homes_places_are_it_and_its_stores_linked_ones_where_they_lead() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let home = root.join("home");
        let keys = root.join("data/keys");
        std::fs::create_dir_all(home.join(".claude/local")).unwrap();
        std::fs::create_dir_all(&keys).unwrap();
        std::fs::write(home.join(".claude/.credentials.json"), "{}").unwrap();
        std::os::unix::fs::symlink(&keys, home.join(".ssh")).unwrap();
        let places: Vec<(PathBuf, bool, String)> = places_in(std::slice::from_ref(&home))
            .into_iter()
            .map(|p| (p.path, p.inside_too, p.what))
            .collect();
        let user = "of the user Paddock runs as";
        assert_eq!(
            places,
            vec![
                (
                    home.clone(),
                    false,
                    "the home directory of the user Paddock runs as, with its keys and \
                     credentials"
                        .to_string()
                ),
                (keys, true, format!("SSH keys, ~/.ssh {user}")),
                (home.join(".ssh"), true, format!("SSH keys, ~/.ssh {user}")),
                (
                    home.join(".claude"),
                    false,
                    format!("Claude Code's home: its login and sessions, ~/.claude {user}")
                ),
                (
                    home.join(".claude/.credentials.json"),
                    true,
                    format!("Claude Code's login, ~/.claude/.credentials.json {user}")
                ),
            ]
        );
    }
}
