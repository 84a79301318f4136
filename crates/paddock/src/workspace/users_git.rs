//! The user's own git, as Paddock runs it on a repository it names (a
//! local source, a URL's mirror, Paddock's clone of a source, the working
//! tree `paddock apply` writes): the user's configuration (their remotes,
//! credentials, safe directories), but never a repository the environment
//! names. Git takes its repository from `GIT_DIR`, `GIT_WORK_TREE`,
//! `GIT_COMMON_DIR`, `GIT_INDEX_FILE`, `GIT_OBJECT_DIRECTORY` and the rest
//! before the directory it runs in: inherited (a shell with a dotfiles
//! repository's `GIT_DIR` and `GIT_WORK_TREE` exported, a git hook's
//! environment), they made `paddock apply` in a plain directory write the
//! job's files into that other work tree, and its refusal of a git
//! directory answer about another repository. Each is taken out of the
//! command's environment ([`REPOSITORY_ENV`]): those git itself drops when
//! it runs a git on another repository (`git rev-parse --local-env-vars`,
//! less the command line's `-c` settings, which git passes on, and which
//! cannot move a repository). `GIT_CEILING_DIRECTORIES` and
//! `GIT_DISCOVERY_ACROSS_FILESYSTEM` ([`DISCOVERY_ENV`]) are kept for a
//! git run on a repository Paddock names: they only stop git's search
//! above it. A git asking where a directory is ([`locating_command`],
//! `paddock apply`'s) runs without them: a ceiling stops the search
//! short of the repository that holds the directory, so git finds none
//! (`GIT_CEILING_DIRECTORIES=/r/.git` in `/r/.git/hooks`), and a directory
//! in no repository is one `paddock apply --outside-git` writes the job's
//! files into (before, they were kept, and it wrote them among git's
//! hooks).

use std::process::Command;

use super::host_git;

/// The variables that name a repository or a part of one, which
/// [`command`] leaves out.
pub const REPOSITORY_ENV: &[&str] = &[
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_CONFIG",
    "GIT_DIR",
    "GIT_GRAFT_FILE",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_OBJECT_DIRECTORY",
    "GIT_PREFIX",
    "GIT_REPLACE_REF_BASE",
    "GIT_SHALLOW_FILE",
    "GIT_WORK_TREE",
];

/// The variables that only stop git's search for a repository above the
/// directory it runs in, which [`locating_command`] also leaves out.
pub const DISCOVERY_ENV: &[&str] = &["GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM"];

/// [`command`] without [`DISCOVERY_ENV`] either: for asking where a
/// directory is (and acting on that answer), whose answer is the
/// repository that holds it, wherever the user's environment stops
/// git's search (git's own default then stops it at a filesystem's
/// mount point).
pub fn locating_command() -> Command {
    let mut cmd = command();
    for name in DISCOVERY_ENV {
        cmd.env_remove(name);
    }
    cmd
}

/// The user's git (`host_git::git_program`), not started: this process's
/// environment less [`REPOSITORY_ENV`], no prompt for a credential. The
/// caller names the repository (`-C DIR`, a clone's source and target).
pub fn command() -> Command {
    let mut cmd = Command::new(host_git::git_program());
    for name in REPOSITORY_ENV {
        cmd.env_remove(name);
    }
    cmd.env("GIT_TERMINAL_PROMPT", "0");
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The variables left out are those git drops for another repository,
    /// as the host's git lists them, less the two that carry `-c`
    /// settings: a git that adds one fails this test.
    #[test]
    fn the_variables_left_out_are_gits_own_list() {
        let out = Command::new("git")
            .args(["rev-parse", "--local-env-vars"])
            .output()
            .unwrap();
        assert!(out.status.success());
        let mut gits: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .filter(|v| !["GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT"].contains(v))
            .map(str::to_owned)
            .collect();
        gits.sort();
        assert_eq!(REPOSITORY_ENV, gits.as_slice());
    }

    /// A command's environment has none of them, whatever this process's
    /// holds, and no prompt.
    #[test]
    fn a_command_takes_none_of_them() {
        let cmd = command();
        let envs: Vec<(String, Option<String>)> = cmd
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.map(|v| v.to_string_lossy().into_owned()),
                )
            })
            .collect();
        let mut expected: Vec<(String, Option<String>)> = REPOSITORY_ENV
            .iter()
            .map(|v| (v.to_string(), None))
            .collect();
        expected.push(("GIT_TERMINAL_PROMPT".into(), Some("0".into())));
        expected.sort();
        assert_eq!(envs, expected);
    }

    /// A locating command also has neither of the discovery limits.
    #[test]
    fn a_locating_command_takes_no_discovery_limit_either() {
        let cmd = locating_command();
        let mut removed: Vec<String> = cmd
            .get_envs()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        removed.sort();
        let mut expected: Vec<String> = REPOSITORY_ENV
            .iter()
            .chain(DISCOVERY_ENV)
            .map(|v| v.to_string())
            .collect();
        expected.sort();
        assert_eq!(removed, expected);
    }
}
