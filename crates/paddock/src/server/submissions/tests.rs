//! The check of what a submitted spec names on the host, against real
//! directories (a link inside an allowed one leading out).

use super::*;

/// A spec of `toml` (its paths resolved against `dir`).
fn spec(dir: &Path, toml: &str) -> JobSpec {
    let path = dir.join("job.toml");
    std::fs::write(&path, toml).unwrap();
    JobSpec::load(&path).unwrap()
}

const SCRIPTED: &str =
    "[ticket]\nid = \"T-1\"\ntitle = \"t\"\n[engine]\nkind = \"codex\"\nmodel = \"gpt-5.5\"\n";

#[test]
fn only_what_the_server_allows_may_be_named() {
    let dir = tempfile::tempdir().unwrap();
    let allowed = dir.path().join("allowed");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(allowed.join("repo")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret"), "s").unwrap();
    std::os::unix::fs::symlink(outside.join("secret"), allowed.join("link")).unwrap();
    let with = Submissions {
        refs: vec!["env:OPENAI_API_KEY".into()],
        paths: vec![allowed.clone()],
        hosts: vec!["api.openai.com".into()],
        ..Submissions::default()
    };
    let up = |key: &str, base: &str| {
        format!(
            "{SCRIPTED}[repository]\npath = \"{}\"\n[upstream]\nprovider = \"openai\"\nkey = \"{key}\"\n{base}",
            allowed.join("repo").display()
        )
    };
    let check = |s: &Submissions, toml: &str| s.check(&spec(dir.path(), toml), None);
    // Allowed: the listed reference, a path under the listed directory,
    // the provider's own endpoint or a listed host.
    assert_eq!(check(&with, &up("env:OPENAI_API_KEY", "")), Ok(()));
    assert_eq!(
        check(
            &with,
            &up(
                "env:OPENAI_API_KEY",
                "base_url = \"https://API.openai.com./v1\"\n"
            )
        ),
        Ok(())
    );
    let secret = outside.join("secret");
    assert_eq!(
        (
            check(&with, &up(&format!("file:{}", secret.display()), "")),
            check(
                &with,
                &up(
                    "env:OPENAI_API_KEY",
                    "base_url = \"http://127.0.0.1:9/v1\"\n"
                )
            ),
            check(&Submissions::default(), &up("env:OPENAI_API_KEY", "")),
        ),
        (
            Err(SubmissionError::Ref {
                field: "upstream.key".into(),
                reference: format!("file:{}", secret.display()),
            }),
            Err(SubmissionError::Host {
                field: "upstream.base_url".into(),
                url: "http://127.0.0.1:9/v1".into(),
                host: "127.0.0.1".into(),
            }),
            Err(SubmissionError::Path {
                field: "repository.path".into(),
                path: allowed.join("repo"),
                allowed: "none".into(),
            }),
        )
    );
    // A path out of the allowed directory: plainly, by `..`, by a link.
    let scripted = |scenario: &Path| {
        format!(
            "{SCRIPTED}[repository]\npath = \"{}\"\n[upstream]\nprovider = \"scripted\"\nscenario = \"{}\"\n",
            allowed.join("repo").display(),
            scenario.display()
        )
    };
    let refused = |p: PathBuf| SubmissionError::Path {
        field: "upstream.scenario".into(),
        path: p,
        allowed: allowed.display().to_string(),
    };
    let dotdot = allowed.join("../outside/secret");
    assert_eq!(
        (
            check(&with, &scripted(&secret)),
            check(&with, &scripted(&dotdot)),
            check(&with, &scripted(&allowed.join("link"))),
        ),
        (
            Err(refused(secret.clone())),
            Err(refused(dotdot.clone())),
            Err(refused(allowed.join("link"))),
        )
    );
    // A clone from a host not listed is refused, token or not (the
    // server fetches from where it stands); scp-like too; listed, allowed.
    let clone = |url: &str, token: &str| {
        format!(
            "{SCRIPTED}[repository]\nurl = \"{url}\"\n{token}[upstream]\nprovider = \"scripted\"\nscenario = \"{}\"\n",
            allowed.join("s.toml").display()
        )
    };
    std::fs::write(allowed.join("s.toml"), "").unwrap();
    let mut tokened = with.clone();
    tokened.refs.push("env:GIT_TOKEN".into());
    let host = |url: &str, host: &str| {
        Err(SubmissionError::Host {
            field: "repository.url".into(),
            url: url.into(),
            host: host.into(),
        })
    };
    assert_eq!(
        (
            check(&with, &clone("https://evil.example/r.git", "")),
            check(
                &tokened,
                &clone("https://evil.example/r.git", "token = \"env:GIT_TOKEN\"\n")
            ),
            check(&with, &clone("git@Internal.Example:r.git", "")),
        ),
        (
            host("https://evil.example/r.git", "evil.example"),
            host("https://evil.example/r.git", "evil.example"),
            host("git@Internal.Example:r.git", "internal.example"),
        )
    );
    tokened.hosts.push("git.example".into());
    assert_eq!(
        check(
            &tokened,
            &clone("https://git.example/r.git", "token = \"env:GIT_TOKEN\"\n")
        ),
        Ok(())
    );
    // A `file://` push writes into a repository on the host: a path,
    // refused outside the allowed directories, allowed inside.
    let push = |url: &str| {
        format!(
            "{}[results.push]\nurl = \"{url}\"\n",
            clone("https://git.example/r.git", "token = \"env:GIT_TOKEN\"\n")
        )
    };
    let theirs = format!("file://{}", outside.join("op.git").display());
    let ours = format!("file://{}", allowed.join("ours.git").display());
    assert_eq!(
        (
            check(&tokened, &push(&theirs)),
            check(&tokened, &push(&ours))
        ),
        (
            Err(SubmissionError::Path {
                field: "results.push.url".into(),
                path: outside.join("op.git"),
                allowed: allowed.display().to_string(),
            }),
            Ok(())
        )
    );
    // The `process` rung only where the server allows it; `auto` (unset)
    // and `sandbox` are the operator's to resolve.
    let rung = |isolation: &str| {
        format!(
            "isolation = \"{isolation}\"\n{}",
            up("env:OPENAI_API_KEY", "")
        )
    };
    let mut processes = with.clone();
    processes.process = true;
    assert_eq!(
        (
            check(&with, &rung("process")),
            check(&with, &rung("auto")),
            check(&with, &rung("sandbox")),
            check(&processes, &rung("process")),
        ),
        (Err(SubmissionError::Process), Ok(()), Ok(()), Ok(()))
    );
    // A result pushed though it changes a CI definition only where the
    // server allows it.
    let ci = |allow: bool| {
        up(
            "env:OPENAI_API_KEY",
            &format!("[results]\nallow_ci_changes = {allow}\n"),
        )
    };
    let mut ci_changes = with.clone();
    ci_changes.ci_changes = true;
    assert_eq!(
        (
            check(&with, &ci(true)),
            check(&with, &ci(false)),
            check(&ci_changes, &ci(true)),
        ),
        (Err(SubmissionError::CiChanges), Ok(()), Ok(()))
    );
    // The server's own path (a turn's inline source) is not checked.
    let own = dir.path().join("jobs/.turn-1");
    let turn = format!(
        "{SCRIPTED}[repository]\npath = \"{}\"\n[upstream]\nprovider = \"scripted\"\nscenario = \"{}\"\n",
        own.display(),
        allowed.join("s.toml").display()
    );
    assert_eq!(with.check(&spec(dir.path(), &turn), Some(&own)), Ok(()));
}

/// A stored profile or preset is one the server chooses: a spec may name
/// the server's default profile (an id or a file, as its config writes
/// it) and any other only when listed; a profile file is a path as well.
#[test]
fn a_submitted_spec_chooses_only_an_allowed_profile() {
    let dir = tempfile::tempdir().unwrap();
    let allowed = dir.path().join("allowed");
    std::fs::create_dir_all(allowed.join("repo")).unwrap();
    let file = dir.path().join("profiles/ci.toml");
    let base = format!(
        "{SCRIPTED}[repository]\npath = \"{}\"\n[upstream]\nprovider = \"scripted\"\nscenario = \"{}\"\n",
        allowed.join("repo").display(),
        allowed.join("s.toml").display()
    );
    let naming = |profile: &str| {
        spec(
            dir.path(),
            &format!("{base}[policy]\nprofile = \"{profile}\"\n"),
        )
    };
    // A profile file the submitter wrote where the server allows paths:
    // its policy, not the operator's.
    let planted = allowed.join("open.toml");
    let none = spec(dir.path(), &base);
    let paths = vec![allowed.clone()];
    let default = Submissions {
        paths: paths.clone(),
        default_profile: Some("ci-box".into()),
        ..Submissions::default()
    };
    let listed = Submissions {
        paths: paths.clone(),
        profiles: vec!["remote-full".into()],
        default_profile: Some(file.display().to_string()),
        ..Submissions::default()
    };
    let nothing = Submissions {
        paths,
        ..Submissions::default()
    };
    let profile = |id: &str, allowed: &str| {
        Err(SubmissionError::Profile {
            profile: id.into(),
            allowed: allowed.into(),
        })
    };
    assert_eq!(
        [
            nothing.check(&none, None),
            nothing.check(&naming("constrained-local"), None),
            default.check(&naming("ci-box"), None),
            default.check(&naming("remote-full"), None),
            listed.check(&naming("remote-full"), None),
            listed.check(&naming(&file.display().to_string()), None),
            listed.check(&naming("ci-box"), None),
            default.check(&naming(&file.display().to_string()), None),
            default.check(&naming(&planted.display().to_string()), None),
        ],
        [
            Ok(()),
            profile("constrained-local", "none"),
            Ok(()),
            profile("remote-full", "its default profile `ci-box`"),
            Ok(()),
            Ok(()),
            profile(
                "ci-box",
                &format!("its default profile `{}`, `remote-full`", file.display()),
            ),
            profile(&file.display().to_string(), "its default profile `ci-box`"),
            profile(
                &planted.display().to_string(),
                "its default profile `ci-box`"
            ),
        ]
    );
    assert_eq!(
        profile("remote-full", "none").unwrap_err().to_string(),
        "policy.profile: `remote-full` is a host profile this server does not let a submitted \
         spec choose (it allows none); the server allows one with `[serve] allow_profiles` or \
         `paddock serve --allow-profile remote-full`"
    );
}

/// A remote source without a token is fetched with the server user's own
/// git credentials (helpers, `~/.netrc`, SSH keys): named
/// `git:credentials`, allowed only when listed, even where the host is;
/// with the spec's token it is not.
#[test]
fn the_servers_git_credentials_are_lent_only_where_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = vec!["git.example".to_string()];
    let source = |extra: &str| {
        spec(
            dir.path(),
            &format!(
                "{SCRIPTED}[repository]\nurl = \"https://git.example/o/private.git\"\n{extra}\
                 [upstream]\nprovider = \"scripted\"\nscenario = \"{}\"\n",
                dir.path().join("s.toml").display()
            ),
        )
    };
    let paths = vec![dir.path().to_path_buf()];
    let hosts_only = Submissions {
        paths: paths.clone(),
        hosts: hosts.clone(),
        refs: vec!["env:T".into()],
        ..Submissions::default()
    };
    let lending = Submissions {
        paths,
        hosts,
        refs: vec!["git:credentials".into()],
        ..Submissions::default()
    };
    let refused = hosts_only.check(&source(""), None);
    assert_eq!(
        (
            refused.clone(),
            hosts_only.check(&source("token = \"env:T\"\n"), None),
            lending.check(&source(""), None),
        ),
        (
            Err(SubmissionError::GitCredentials {
                field: "repository.url".into()
            }),
            Ok(()),
            Ok(()),
        )
    );
    assert_eq!(
        refused.unwrap_err().to_string(),
        "repository.url: this server would reach it with its own git credentials (its user's \
         credential helpers, `~/.netrc`, SSH keys and agent: `git:credentials`), which a \
         submitted spec may use only when the server allows it (`[serve] allow_refs` or `paddock \
         serve --allow-ref git:credentials`); give `repository.token` for an HTTPS source (or a \
         key of the spec's for an SSH push)"
    );
}
