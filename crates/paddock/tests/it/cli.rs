//! The `paddock` binary's handling of bad input: every error names what and
//! where, exits with the documented code, and leaves nothing behind.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use paddock_protocol::{EventBody, JobStatus};
use paddock_test_support::prelude::*;

const ONE_TURN: &str = "[[turn]]\ntext = \"hi\"\nusage = { input = 1, output = 1 }\n";

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test]
async fn unknown_spec_field_is_bad_input_naming_the_field() {
    let home = Home::new();
    let spec = scripted_job(&home, ONE_TURN);
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("[engine]\n", "[engine]\nflavour = \"x\"\n");
    std::fs::write(&spec, text).unwrap();
    let out = home.paddock(&["run", spec.to_str().unwrap()], &[]).await;
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "job spec {}: field `engine.flavour`: unknown field `flavour`",
            spec.display()
        )),
        "{err}"
    );
    assert!(err.contains("line 12"), "{err}");
    // No job was created.
    assert_eq!(home.store().await.jobs(10).await.unwrap(), vec![]);
}

#[tokio::test]
async fn invalid_values_name_field_and_reason() {
    let home = Home::new();
    let spec = scripted_job(&home, ONE_TURN);
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("id = \"T-1\"", "id = \"../etc\"");
    std::fs::write(&spec, text).unwrap();
    let out = home.paddock(&["run", spec.to_str().unwrap()], &[]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("field `ticket.id`: `../etc` must be ASCII letters, digits"),
        "{}",
        stderr(&out)
    );
}

/// A host path written from `~` (`path = "~/src/app"`, `key =
/// "file:~/.openai-key"`, `scenario = "~/s.toml"`) is refused as the spec
/// is read, naming the field: nothing expands `~`, and a relative path is
/// read from the spec's directory. Before, the repository's was a job
/// failed at provisioning with "repository <spec's directory>/~/src/app:
/// no such directory", a path the user never wrote, and a key's "cannot
/// read" it.
#[tokio::test]
async fn a_path_written_from_home_is_refused_naming_the_field() {
    let home = Home::new();
    let repo = repo(home.path());
    let repo_line = format!("path = \"{}\"", repo.display());
    let mut said = Vec::new();
    for (upstream, from, to) in [
        (SCRIPTED, repo_line.as_str(), "path = \"~/src/app\""),
        (
            "[upstream]\nprovider = \"openai\"\nkey = \"file:~/.openai-key\"\n",
            "",
            "",
        ),
        (
            "[upstream]\nprovider = \"scripted\"\nscenario = \"~/s.toml\"\n",
            "",
            "",
        ),
    ] {
        let spec = job(home.path(), "codex", &repo, upstream, Some(ONE_TURN));
        if !from.is_empty() {
            let text = std::fs::read_to_string(&spec).unwrap().replace(from, to);
            std::fs::write(&spec, text).unwrap();
        }
        let out = home.paddock(&["run", spec.to_str().unwrap()], &[]).await;
        said.push((out.status.code(), stderr(&out)));
    }
    let refused = |field: &str, path: &str| {
        (
            Some(2),
            format!(
                "paddock: job spec {}: field `{field}`: `{path}`: `~` is not expanded here (a \
                 relative path is read from the spec's directory): write the path in full\n",
                home.path().join("job.toml").display()
            ),
        )
    };
    assert_eq!(
        (said, home.data().join("paddock.db").exists()),
        (
            vec![
                refused("repository.path", "~/src/app"),
                refused("upstream.key", "~/.openai-key"),
                refused("upstream.scenario", "~/s.toml"),
            ],
            false
        )
    );
}

#[tokio::test]
async fn unset_key_variable_is_bad_input() {
    let home = Home::new();
    let repo = repo(home.path());
    let up = "[upstream]\nprovider = \"openai\"\nkey = \"env:PADDOCK_TEST_UNSET_KEY\"\n";
    let spec = job(home.path(), "codex", &repo, up, None);
    let out = home.paddock(&["run", spec.to_str().unwrap()], &[]).await;
    assert_eq!(
        (out.status.code(), stderr(&out)),
        (
            Some(2),
            "paddock: upstream.key: provider key env:PADDOCK_TEST_UNSET_KEY: environment \
             variable is not set\n"
                .to_owned()
        )
    );
}

/// A forge or push credential that does not resolve refuses the job
/// before it starts, as the provider key does: it was read only when the
/// job published, after its engine ran and its model calls were paid
/// for, and the job failed at publishing.
#[tokio::test]
async fn an_unset_forge_token_is_bad_input_before_the_job_starts() {
    let home = Home::new();
    let spec = scripted_job(&home, ONE_TURN);
    let text = std::fs::read_to_string(&spec).unwrap();
    let missing = home.path().join("no-such-key");
    let mut said = Vec::new();
    for results in [
        "[results.github]\nrepository = \"acme/widgets\"\ntoken = \"env:PADDOCK_TEST_UNSET_GH\"\n"
            .to_owned(),
        format!(
            "[results.push]\nurl = \"ssh://git@git.example/a/w.git\"\nssh_key = \"file:{}\"\n\
             known_hosts = \"/etc/hosts\"\n",
            missing.display()
        ),
    ] {
        std::fs::write(&spec, format!("{text}\n{results}")).unwrap();
        let out = home.paddock(&["run", spec.to_str().unwrap()], &[]).await;
        said.push((out.status.code(), stderr(&out)));
    }
    assert_eq!(
        said,
        vec![
            (
                Some(2),
                "paddock: results.github.token: GitHub token env:PADDOCK_TEST_UNSET_GH: \
                 environment variable is not set (needed to publish the job's result)\n"
                    .to_owned()
            ),
            (
                Some(2),
                format!(
                    "paddock: results.push.ssh_key: push SSH key file:{}: cannot read the file: \
                     {} (needed to publish the job's result)\n",
                    missing.display(),
                    std::io::Error::from_raw_os_error(2)
                )
            ),
        ]
    );
    // No job was created.
    assert_eq!(home.store().await.jobs(10).await.unwrap(), vec![]);
}

#[tokio::test]
async fn bad_scenario_is_bad_input_naming_the_file() {
    let home = Home::new();
    let spec = scripted_job(&home, "[[turn]]\ntxet = \"typo\"\n");
    let out = home.paddock(&["run", spec.to_str().unwrap()], &[]).await;
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("scenario.toml"), "{err}");
    assert!(err.contains("txet"), "{err}");
}

/// A scenario file that is not there is refused naming the spec's field
/// (`upstream.scenario`) and the path, exit code 2, no job; before, only
/// the path was named.
#[tokio::test]
async fn a_missing_scenario_is_refused_naming_the_field() {
    let home = Home::new();
    let spec = scripted_job(&home, ONE_TURN);
    let scenario = spec.with_file_name("scenario.toml");
    std::fs::remove_file(&scenario).unwrap();
    let out = home.paddock(&["run", spec.to_str().unwrap()], &[]).await;
    assert_eq!(
        (out.status.code(), stderr(&out)),
        (
            Some(2),
            format!(
                "paddock: upstream.scenario: cannot read scenario {}: No such file or directory \
                 (os error 2)\n",
                scenario.display()
            )
        )
    );
    assert_eq!(home.store().await.jobs(10).await.unwrap(), vec![]);
}

/// An engine `paddock run` cannot find (`engine.binary` naming no file, a
/// file that is not executable, a bare name not on PATH; no
/// `engine.binary` and only the other engine on PATH: never a fallback to
/// it) is refused at admission, exit code 2, naming the field and the spec
/// file, or PATH, and what to do: no job row, no job directory. Before,
/// the job was recorded, provisioned and failed (`engine codex: binary …
/// does not exist or is not executable`).
#[tokio::test]
async fn an_engine_that_cannot_be_found_is_refused_before_the_job_exists() {
    let home = Home::new();
    let spec = scripted_job(&home, ONE_TURN);
    let text = std::fs::read_to_string(&spec).unwrap();
    let plain = home.path().join("plain-codex");
    std::fs::write(&plain, "#!/bin/sh\nexit 99\n").unwrap();
    // Only Claude Code on this PATH.
    let bin = home.path().join("only-claude");
    std::fs::create_dir_all(&bin).unwrap();
    paddock_test_support::script::write_script(&bin.join("claude"), "#!/bin/sh\nexit 99\n");
    let only_claude = format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display());
    let pins = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install-engines"),
    )
    .unwrap();
    let codex_version = pins
        .lines()
        .find_map(|l| l.strip_prefix("CODEX_VERSION="))
        .unwrap()
        .to_owned();
    let spec_s = spec.display().to_string();
    let cases = [
        (
            Some("/nonexistent/bin/codex".to_string()),
            None,
            format!(
                "engine.binary /nonexistent/bin/codex in job spec {spec_s} does not exist or is \
                 not executable (set engine.binary to the engine's executable, or remove it to \
                 run `codex` from PATH)"
            ),
        ),
        (
            Some(plain.display().to_string()),
            None,
            format!(
                "engine.binary {} in job spec {spec_s} does not exist or is not executable (set \
                 engine.binary to the engine's executable, or remove it to run `codex` from \
                 PATH)",
                plain.display()
            ),
        ),
        (
            Some("codex-nightly".to_string()),
            None,
            format!(
                "engine.binary `codex-nightly` in job spec {spec_s} was not found on PATH (add \
                 its directory to PATH, or set engine.binary to the executable's path)"
            ),
        ),
        (
            None,
            Some(only_claude.as_str()),
            format!(
                "`codex` was not found on PATH (engine.binary is not set); Paddock is tested \
                 with @openai/codex {codex_version}: from Paddock's checkout: export \
                 PATH=\"$(scripts/install-engines):$PATH\"; or: npm install -g \
                 @openai/codex@{codex_version}; or set engine.binary to the engine's executable"
            ),
        ),
    ];
    let mut got = Vec::new();
    let mut want = Vec::new();
    for (binary, path, said) in cases {
        let written = match binary {
            Some(b) => text.replace("[engine]\n", &format!("[engine]\nbinary = \"{b}\"\n")),
            None => text.clone(),
        };
        std::fs::write(&spec, written).unwrap();
        let env: Vec<(&str, &str)> = path.into_iter().map(|p| ("PATH", p)).collect();
        let out = home
            .paddock(&["run", "--json", spec.to_str().unwrap()], &env)
            .await;
        got.push((
            out.status.code(),
            stderr(&out),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            home.store().await.jobs(10).await.unwrap(),
            // No job's directory (the jobs directory's own files aside).
            std::fs::read_dir(home.jobs())
                .map(|rd| {
                    rd.map(|e| e.unwrap())
                        .filter(|e| e.file_type().unwrap().is_dir())
                        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default(),
        ));
        want.push((
            Some(2),
            format!("paddock: job refused before start: engine codex: {said}\n"),
            String::new(),
            vec![],
            Vec::<String>::new(),
        ));
    }
    assert_eq!(got, want);
}

#[tokio::test]
async fn bad_base_ref_is_a_failed_job_and_leaves_no_workspace() {
    let home = Home::new();
    let repo = repo(home.path());
    let spec = job(home.path(), "codex", &repo, SCRIPTED, Some(ONE_TURN));
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("base_ref = \"main\"", "base_ref = \"no-such-branch\"");
    std::fs::write(&spec, text).unwrap();
    // Any executable will do: the job must stop before launching it.
    let out = home
        .paddock(
            &["run", "--json", spec.to_str().unwrap()],
            &[("PATH", &fake_engine_path(&home))],
        )
        .await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let rec = record(&out);
    assert_eq!(rec.status, JobStatus::Failed);
    assert_eq!(
        rec.reason.as_deref(),
        Some(
            format!(
                "repository {}: base ref `no-such-branch` is not a commit in it; its branches: \
                 main; set repository.base_ref to one of them, a tag or a commit",
                repo.display()
            )
            .as_str()
        )
    );
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
}

/// A PATH holding a `codex` that is never run, plus the system dirs for git.
fn fake_engine_path(home: &Home) -> String {
    let bin = home.path().join("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let codex = bin.join("codex");
    paddock_test_support::script::write_script(&codex, "#!/bin/sh\nexit 99\n");
    format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display())
}

#[tokio::test]
async fn events_of_an_unknown_job_is_bad_input() {
    let home = Home::new();
    home.store().await.close().await;
    let out = home.paddock(&["events", "job-nope"], &[]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no job `job-nope`"),
        "{}",
        stderr(&out)
    );
}

/// The read-only commands on a fresh install (no store yet in the default
/// place) answer from an empty store, naming the file, and create
/// nothing: `paddock jobs` and `paddock usage` (`--ledger` too) say there
/// are no jobs or usage yet and exit 0, as `paddock token list` does; a
/// command naming a job says it names none in that file (exit 2). Before,
/// `jobs` and `usage` exited 2 ("no store at …: nothing has run with this
/// database (check --db)") on a fresh install. A store `--db` or
/// `PADDOCK_DB` names that is not there (a typo, an unmounted share) is
/// an error naming it and which named it, exit 2, nothing created:
/// before, it read as empty too, and `paddock usage` said $0, exit 0.
#[tokio::test]
async fn read_only_commands_read_a_missing_store_as_empty_and_create_nothing() {
    let home = Home::new();
    let db = home.db();
    let db = db.to_str().unwrap();
    let typo = home.path().join("no-such-dir/paddock.bd");
    let typo_s = typo.to_str().unwrap();
    let header =
        "JOB  STATUS  TICKET  ATTEMPT  ENGINE  MODEL  ISOLATION  DURATION  COST  CREATED  HOST\n";
    // `--ledger`'s first page, empty.
    const LEDGER_EMPTY: &str = "{\"calls\":[],\"next_cursor\":\"0\",\"more\":false}\n";
    let missing = |by: &str| {
        format!(
            "paddock: no store at {typo_s}, which {by} names: nothing has run with this \
             database (check {by})\n"
        )
    };
    let mut seen = Vec::new();
    for args in [
        vec!["jobs"],
        vec!["jobs", "--json"],
        vec!["jobs", "--status", "done", "--engine", "codex"],
        vec!["usage"],
        vec!["usage", "--by", "model"],
        vec!["show", "latest"],
        vec!["events", "job-nope"],
        vec!["usage", "--ledger"],
        vec!["--db", typo_s, "jobs"],
        vec!["--db", typo_s, "events", "latest"],
        vec!["--db", typo_s, "usage", "--ledger"],
    ] {
        let out = home.paddock(&args, &[]).await;
        seen.push((
            args.join(" "),
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr(&out),
        ));
    }
    let row = |args: &str, code, stdout: &str, stderr: String| {
        (args.to_owned(), Some(code), stdout.to_owned(), stderr)
    };
    assert_eq!(
        seen,
        vec![
            row(
                "jobs",
                0,
                header,
                format!("no jobs yet in {db} (`paddock run SPEC` runs one)\n")
            ),
            row(
                "jobs --json",
                0,
                "",
                format!("no jobs yet in {db} (`paddock run SPEC` runs one)\n")
            ),
            row(
                "jobs --status done --engine codex",
                0,
                header,
                format!("no jobs with --status done --engine codex in {db}\n")
            ),
            row(
                "usage",
                0,
                "",
                format!("no usage yet in {db}: no job has run (`paddock run SPEC` runs one)\n")
            ),
            row(
                "usage --by model",
                0,
                "",
                format!("no usage yet in {db}: no job has run (`paddock run SPEC` runs one)\n")
            ),
            row(
                "show latest",
                2,
                "",
                format!("paddock: no jobs yet: `latest` names none in {db}\n")
            ),
            row(
                "events job-nope",
                2,
                "",
                format!("paddock: no job `job-nope` (no job id is or starts with it) in {db}\n")
            ),
            row(
                "usage --ledger",
                0,
                LEDGER_EMPTY,
                format!(
                    "no usage yet in {db}: no model call has been made (`paddock run SPEC` runs \
                     one)\n"
                )
            ),
            row(&format!("--db {typo_s} jobs"), 2, "", missing("--db")),
            row(
                &format!("--db {typo_s} events latest"),
                2,
                "",
                missing("--db")
            ),
            row(
                &format!("--db {typo_s} usage --ledger"),
                2,
                "",
                missing("--db")
            ),
        ]
    );
    let mut by_env = Vec::new();
    for args in [vec!["usage", "--json"], vec!["show", "latest"]] {
        let out = home.paddock(&args, &[("PADDOCK_DB", typo_s)]).await;
        by_env.push((
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr(&out),
        ));
    }
    let refused = (Some(2), String::new(), missing("PADDOCK_DB"));
    assert_eq!(by_env, vec![refused.clone(), refused]);
    assert_eq!(
        (
            typo.parent().unwrap().exists(),
            home.db().exists(),
            home.data().exists()
        ),
        (false, false, false)
    );
}

/// `paddock usage` over jobs that made no model call (failed before one)
/// says so in words where its model table stood empty, a header alone.
#[tokio::test]
async fn usage_says_in_words_that_no_job_made_a_model_call() {
    let home = Home::new();
    let store = home.store().await;
    let job = paddock_test_support::jobs::stored_record(
        "job-1",
        "gpt-5-codex",
        "process",
        JobStatus::Failed,
        0,
    );
    store.insert_job(&job, "{}").await.unwrap();
    store.close().await;
    let out = home.paddock(&["usage", "--by", "model"], &[]).await;
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr(&out)
        ),
        (
            Some(0),
            "total                 calls      input     cached   cache-wr    output    reason         cost tickets   per ticket  bounce    to done\n\
             all                       0          0          0          0         0         0    $0.000000       1    $0.000000       -          -\n\
             \n\
             model                 calls      input     cached   cache-wr    output    reason         cost tickets   per ticket  bounce    to done\n\
             (none: no job has made a model call yet)\n\
             \n"
            .to_owned(),
            String::new()
        )
    );
}

/// The token and profile commands that only read or remove (and `paddock
/// context` of a spec naming a stored profile) answer from an empty store
/// when there is none, and create neither the database nor its directory;
/// only `token create` and `profile add` do.
#[tokio::test]
async fn token_and_profile_reads_create_no_database() {
    let home = Home::new();
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hello");
    for f in ["repo.bundle", "scenario.toml"] {
        std::fs::copy(examples.join(f), home.path().join(f)).unwrap();
    }
    let spec = home.path().join("job.toml");
    std::fs::write(
        &spec,
        std::fs::read_to_string(examples.join("job.toml")).unwrap()
            + "\n[policy]\nprofile = \"no-such-profile\"\n",
    )
    .unwrap();
    let mut seen = Vec::new();
    for args in [
        vec!["token", "list"],
        vec!["token", "revoke", "abc"],
        vec!["profile", "list"],
        vec!["profile", "show", "constrained-local"],
        vec!["profile", "rm", "mine"],
        vec!["context", spec.to_str().unwrap(), "--out", "ctx"],
    ] {
        let out = home.paddock(&args, &[]).await;
        let stdout = String::from_utf8_lossy(&out.stdout);
        seen.push((
            args[..2].join(" "),
            out.status.code(),
            stdout.lines().next().unwrap_or_default().trim().to_owned(),
            stderr(&out),
        ));
    }
    let presets = paddock::policy::profile::PRESETS;
    assert_eq!(
        seen,
        vec![
            (
                "token list".to_owned(),
                Some(0),
                "ID  SCOPE  NAME  CREATED  REVOKED".to_owned(),
                "no tokens yet (`paddock token create --scope read` makes one)\n".to_owned()
            ),
            (
                "token revoke".to_owned(),
                Some(2),
                String::new(),
                "paddock: no token abc (`paddock token list` shows them)\n".to_owned()
            ),
            (
                "profile list".to_owned(),
                Some(0),
                format!("{}\tpreset", presets[0].0),
                String::new()
            ),
            (
                "profile show".to_owned(),
                Some(0),
                "{".to_owned(),
                String::new()
            ),
            (
                "profile rm".to_owned(),
                Some(2),
                String::new(),
                "paddock: no stored host profile `mine` (`paddock profile list` shows them)\n"
                    .to_owned()
            ),
            (
                format!("context {}", spec.display()),
                Some(2),
                String::new(),
                format!(
                    "paddock: host profile `no-such-profile` is neither in the store nor a \
                     preset ({}); save it with `paddock profile add FILE` or name a profile file\n",
                    presets
                        .iter()
                        .map(|(n, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            ),
        ]
    );
    assert_eq!((home.db().exists(), home.data().exists()), (false, false));
}

/// `scripts/demo` runs from any directory: a spec path and the other
/// arguments are taken as the caller wrote them, relative to where the
/// caller is, and without one it runs the hello ticket. (Stand-ins for
/// the engines, `cargo` and the built `paddock`, which prints where it ran
/// and with what.)
#[test]
fn the_demo_script_takes_paths_relative_to_the_caller() {
    use std::os::unix::fs::PermissionsExt as _;
    let home = Home::new();
    let script = |path: std::path::PathBuf, text: &str| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, format!("#!/bin/sh\n{text}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    let engines = home.path().join("engines");
    let engine_bin = engines.join("node_modules/.bin");
    let pins = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install-engines"),
    )
    .unwrap();
    let pin = |name: &str| {
        pins.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
            .unwrap()
            .to_owned()
    };
    script(
        engine_bin.join("codex"),
        &format!("echo codex-cli {}", pin("CODEX_VERSION")),
    );
    script(
        engine_bin.join("claude"),
        &format!("echo '{} (Claude Code)'", pin("CLAUDE_VERSION")),
    );
    let tools = home.path().join("tools");
    script(tools.join("cargo"), "exit 0");
    let target = home.path().join("target");
    script(target.join("debug/paddock"), r#"echo "in $PWD:" "$@""#);
    let caller = home.path().join("caller");
    std::fs::create_dir_all(&caller).unwrap();
    let caller = caller.canonicalize().unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap();
    let demo = |args: &[&str]| {
        let out = std::process::Command::new(root.join("scripts/demo"))
            .args(args)
            .current_dir(&caller)
            .env("PADDOCK_ENGINES_DIR", &engines)
            .env("CARGO_TARGET_DIR", &target)
            .env(
                "PATH",
                format!("{}:{}", tools.display(), std::env::var("PATH").unwrap()),
            )
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(
        [demo(&["specs/job.toml", "--json"]), demo(&[])],
        [
            format!("in {}: run specs/job.toml --json\n", caller.display()),
            format!(
                "in {}: run {}/examples/hello/job.toml\n",
                caller.display(),
                root.display()
            ),
        ]
    );
}

#[tokio::test]
async fn an_engine_that_dies_fails_the_job_with_its_stderr() {
    let home = Home::new();
    let repo = repo(home.path());
    let bin = home.path().join("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let codex = bin.join("codex");
    paddock_test_support::script::write_script(
        &codex,
        "#!/bin/sh\necho 'not json at all'\necho 'engine exploded' >&2\nexit 3\n",
    );
    let spec = job(home.path(), "codex", &repo, SCRIPTED, Some(ONE_TURN));
    use_engine_binary(&spec, &codex);
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    assert_eq!(out.status.code(), Some(1));
    let rec = record(&out);
    assert_eq!(rec.status, JobStatus::Failed);
    assert_eq!(rec.engine_exit_code, Some(3));
    assert_eq!(
        rec.reason.as_deref(),
        Some("the engine exited with status 3: engine exploded")
    );
    let events = home.store().await.events(&rec.id, 0).await.unwrap();
    // The malformed line is an error event, not lost.
    assert!(events.iter().any(|e| matches!(&e.body, EventBody::Error { message, fatal: false, .. } if message.contains("not json at all"))));
    assert_eq!(home.leftover_workspaces(), Vec::<String>::new());
}

#[tokio::test]
async fn timeout_kills_the_engine_and_its_children() {
    let home = Home::new();
    let repo = repo(home.path());
    let bin = home.path().join("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let codex = bin.join("codex");
    let marker = home.path().join("survivor");
    paddock_test_support::script::write_script(&codex, &format!(
            "#!/bin/sh\n[ \"$1\" = --version ] && {{ echo 'codex-cli {}'; exit 0; }}\n(sleep 3; touch {}) &\nsleep 30\n",
            paddock::engines::codex::PIN.version,
            marker.display()
        ));
    let spec = job(home.path(), "codex", &repo, SCRIPTED, Some(ONE_TURN));
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace(
            "[engine]\n",
            &format!("[engine]\nbinary = \"{}\"\n", codex.display()),
        )
        .replace("timeout_secs = 120", "timeout_secs = 1");
    std::fs::write(&spec, text).unwrap();
    let out = home
        .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
        .await;
    assert_eq!(out.status.code(), Some(4));
    let rec = record(&out);
    assert_eq!(rec.status, JobStatus::TimedOut);
    let events = home.store().await.events(&rec.id, 0).await.unwrap();
    assert!(events
        .iter()
        .any(|e| matches!(&e.body, EventBody::Policy { rule, .. } if rule == "timeout")));
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    assert!(!marker.exists(), "a child of the engine outlived the job");
}

#[tokio::test]
async fn a_model_outside_the_jobs_allowlist_is_bad_input() {
    let home = Home::new();
    let spec = scripted_job(&home, ONE_TURN);
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("[engine]\n", "[engine]\nallowed_models = [\"claude-*\"]\n");
    std::fs::write(&spec, text).unwrap();
    let out = home.paddock(&["run", spec.to_str().unwrap()], &[]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(
            "engine.model `gpt-5.5` is not allowed by the job model allowlist (engine.allowed_models)"
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(home.store().await.jobs(10).await.unwrap(), vec![]);
}

#[tokio::test]
async fn a_model_without_a_price_is_bad_input_unless_allowed() {
    let home = Home::new();
    let spec = scripted_job(&home, ONE_TURN);
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("model = \"gpt-5.5\"", "model = \"local-model\"");
    std::fs::write(&spec, text).unwrap();
    let out = home.paddock(&["run", spec.to_str().unwrap()], &[]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(
            "engine.model `local-model` has no price in price table 2026-11-30; Paddock refuses models it cannot meter (set upstream.allow_unpriced = true to run it unpriced)"
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(home.store().await.jobs(10).await.unwrap(), vec![]);
}

/// `paddock prices` prints the table in effect: the shipped one with
/// `PADDOCK_PRICES` (or `--prices`) merged over it, aligned or as JSON.
#[tokio::test]
async fn prices_prints_the_table_in_effect() {
    let home = Home::new();
    let mine = home.path().join("mine.toml");
    std::fs::write(
        &mine,
        "version = \"acme\"\n[models.in-house]\ninput = \"0.1\"\noutput = \"0.2\"\n",
    )
    .unwrap();
    let out = home
        .paddock(
            &["prices", "--json"],
            &[("PADDOCK_PRICES", mine.to_str().unwrap())],
        )
        .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["version"], "2026-11-30+acme");
    assert_eq!(
        v["models"]["in-house"],
        serde_json::json!({"input": "0.1", "cached_input": "0.1", "cache_write": "0.1",
                           "output": "0.2", "max_output": null})
    );
    assert_eq!(
        v["models"]["gpt-5"]["priority"],
        serde_json::json!({"input": "2.5", "cached_input": "0.25", "cache_write": "2.5", "output": "20"})
    );
    let out = home.paddock(&["prices"], &[]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("price table 2026-11-30 (USD per million tokens; "),
        "{text}"
    );
    let header = lines.iter().find(|l| l.starts_with("MODEL")).unwrap();
    let o3 = lines.iter().find(|l| l.starts_with("o3 ")).unwrap();
    // Aligned: the OUTPUT column ends at the same place on every line.
    let end = header.find("OUTPUT").unwrap() + "OUTPUT".len();
    assert_eq!(&o3[end - 1..end], "8", "{header}\n{o3}");
    assert!(!text.contains("in-house"));
}

/// `paddock prices` prints the table `paddock run` uses: the config
/// file's `prices` (relative to the file) merged over the shipped one
/// when neither `--prices` nor `PADDOCK_PRICES` is given; it printed the
/// shipped table alone. One that does not load is named by that setting
/// and the file, by `paddock prices` and `paddock run` alike, where the
/// error named the table alone (`paddock: price table …/mine.toml: cannot
/// read: …`) and the user looked for what had chosen it.
#[tokio::test]
async fn prices_shows_the_config_files_table_as_run_uses_it() {
    let home = Home::new();
    let dir = home.path().join("config/paddock");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), "prices = \"mine.toml\"\n").unwrap();
    let table = |version: &str| {
        format!(
            "version = \"{version}\"\n[models.in-house]\ninput = \"1\"\ncached_input = \"0.1\"\n\
             output = \"2\"\n"
        )
    };
    std::fs::write(dir.join("mine.toml"), table("config")).unwrap();
    let flag = home.path().join("flag.toml");
    std::fs::write(&flag, table("flag")).unwrap();
    async fn shown(
        home: &Home,
        args: &[&str],
    ) -> (Option<i32>, serde_json::Value, serde_json::Value, String) {
        let mut all = vec!["prices", "--json"];
        all.extend_from_slice(args);
        let out = home.paddock(&all, &[]).await;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        (
            out.status.code(),
            v["version"].clone(),
            v["models"]["in-house"]["input"].clone(),
            stderr(&out),
        )
    }
    let from_config = shown(&home, &[]).await;
    let from_flag = shown(&home, &["--prices", flag.to_str().unwrap()]).await;
    std::fs::remove_file(dir.join("mine.toml")).unwrap();
    let missing = shown(&home, &[]).await;
    let spec = scripted_job(&home, ONE_TURN);
    let run = home.paddock(&["run", spec.to_str().unwrap()], &[]).await;
    let missing_in_run = (
        run.status.code(),
        serde_json::Value::Null,
        serde_json::Value::Null,
        stderr(&run),
    );
    let said = format!(
        "paddock: prices in the config file {}: price table {}: cannot read: {}\n",
        dir.join("config.toml").display(),
        dir.join("mine.toml").display(),
        std::io::Error::from_raw_os_error(2)
    );
    assert_eq!(
        [from_config, from_flag, missing, missing_in_run],
        [
            (
                Some(0),
                serde_json::json!("2026-11-30+config"),
                serde_json::json!("1"),
                String::new()
            ),
            (
                Some(0),
                serde_json::json!("2026-11-30+flag"),
                serde_json::json!("1"),
                String::new()
            ),
            (
                Some(2),
                serde_json::Value::Null,
                serde_json::Value::Null,
                said.clone()
            ),
            (
                Some(2),
                serde_json::Value::Null,
                serde_json::Value::Null,
                said
            ),
        ]
    );
}

/// A running job in `home`'s store, created `offset_s` seconds after a base time.
async fn running_job(home: &Home, id: &str, offset_s: i64) -> paddock_protocol::JobRecord {
    let rec = paddock_test_support::jobs::stored_record(
        id,
        "gpt-5-codex",
        "process",
        JobStatus::Running,
        offset_s,
    );
    home.store().await.insert_job(&rec, "{}").await.unwrap();
    rec
}

fn text_event(job: &str, seq: u64, text: &str) -> paddock_protocol::AgentEvent {
    paddock_protocol::AgentEvent {
        job_id: job.to_owned(),
        seq,
        at: time::macros::datetime!(2025-06-01 12:00 UTC),
        body: EventBody::Text {
            text: text.to_owned(),
        },
    }
}

#[tokio::test]
async fn events_follow_tails_until_the_job_ends() {
    let home = Home::new();
    let mut rec = running_job(&home, "0193follow", 0).await;
    let store = home.store().await;
    store
        .append_event(&text_event(&rec.id, 1, "first"))
        .await
        .unwrap();
    // A prefix of the id names the job.
    let child = home
        .command(&["events", "0193f", "--follow", "--json"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    store
        .append_event(&text_event(&rec.id, 2, "second"))
        .await
        .unwrap();
    rec.status = JobStatus::Done;
    store.finish_job(&rec, JobStatus::Running).await.unwrap();
    // A guard against following forever, not a measure: a loaded host
    // may take seconds to see the end.
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        child.wait_with_output(),
    )
    .await
    .expect("--follow ends when the job ends")
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events: Vec<paddock_protocol::AgentEvent> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        events,
        vec![
            text_event(&rec.id, 1, "first"),
            text_event(&rec.id, 2, "second")
        ]
    );
    // --after past the last event says so (it printed nothing, silently);
    // --after inside prints the rest, and nothing more.
    let mut said = Vec::new();
    for after in ["5", "1"] {
        let out = home
            .paddock(&["events", &rec.id, "--after", after, "--json"], &[])
            .await;
        said.push((
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).lines().count(),
            stderr(&out),
        ));
    }
    assert_eq!(
        said,
        [
            (
                Some(0),
                0,
                format!(
                    "paddock: job {} has no events after seq 5 (its last is 2)\n",
                    rec.id
                )
            ),
            (Some(0), 1, String::new()),
        ]
    );
}

#[tokio::test]
async fn job_ids_take_prefixes_and_latest_and_name_ambiguous_candidates() {
    let home = Home::new();
    running_job(&home, "0193aa-old", 0).await;
    running_job(&home, "0193ab-new", 10).await;
    let store = home.store().await;
    store
        .append_event(&text_event("0193ab-new", 1, "from the newest"))
        .await
        .unwrap();
    let latest = home.paddock(&["events", "latest"], &[]).await;
    assert_eq!(latest.status.code(), Some(0), "{}", stderr(&latest));
    let line = String::from_utf8_lossy(&latest.stdout).into_owned();
    assert!(line.ends_with("  agent: from the newest\n"), "{line}");
    let ambiguous = home.paddock(&["events", "0193a"], &[]).await;
    assert_eq!(ambiguous.status.code(), Some(2));
    assert_eq!(
        stderr(&ambiguous),
        "paddock: `0193a` is ambiguous: it starts 0193ab-new, 0193aa-old (give more characters)\n"
    );
    // An id's hex copied without its `job-` names the job too.
    running_job(&home, "job-0193cc11", -10).await;
    store
        .append_event(&text_event("job-0193cc11", 1, "named without job-"))
        .await
        .unwrap();
    let hex = home.paddock(&["events", "0193cc"], &[]).await;
    assert_eq!(
        (
            hex.status.code(),
            String::from_utf8_lossy(&hex.stdout).ends_with("  agent: named without job-\n")
        ),
        (Some(0), true),
        "{}",
        stderr(&hex)
    );
}

/// `paddock jobs --status S --engine E` lists only those jobs, newest
/// first, as `GET /v1/jobs?status=&engine=` does; an unknown status is
/// exit 2 naming those there are.
#[tokio::test]
async fn jobs_filter_by_status_engine_and_rung() {
    let home = Home::new();
    let store = home.store().await;
    let first = running_job(&home, "0193-a", 0).await;
    for (id, offset, engine, status) in [
        ("0193-a", 0, "codex", JobStatus::Done),
        ("0193-b", 10, "claude", JobStatus::Failed),
        ("0193-c", 20, "codex", JobStatus::Failed),
        ("0193-d", 30, "codex", JobStatus::Running),
    ] {
        let mut rec = paddock_protocol::JobRecord {
            id: id.to_owned(),
            engine: engine.to_owned(),
            isolation: if id == "0193-c" { "sandbox" } else { "process" }.to_owned(),
            created_at: first.created_at + time::Duration::seconds(offset),
            ..first.clone()
        };
        if id != first.id {
            store.insert_job(&rec, "{}").await.unwrap();
        }
        if status != JobStatus::Running {
            rec.status = status;
            store.finish_job(&rec, JobStatus::Running).await.unwrap();
        }
    }
    let listed = |args: &'static [&'static str]| {
        let home = &home;
        async move {
            let mut all = vec!["jobs", "--json"];
            all.extend_from_slice(args);
            let out = home.paddock(&all, &[]).await;
            let ids: Vec<String> = String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(|l| {
                    serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                        .as_str()
                        .unwrap()
                        .to_owned()
                })
                .collect();
            (out.status.code(), ids, stderr(&out))
        }
    };
    let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        vec![
            listed(&["--status", "failed"]).await,
            listed(&["--status", "failed", "-n", "1"]).await,
            listed(&["--engine", "codex", "--status", "done"]).await,
            listed(&["--status", "broken"]).await,
            listed(&["--rung", "process", "-n", "2"]).await,
            listed(&["--rung", "sandbox"]).await,
            listed(&["-n", "0"]).await,
        ],
        vec![
            (Some(0), ids(&["0193-c", "0193-b"]), String::new()),
            (Some(0), ids(&["0193-c"]), String::new()),
            (Some(0), ids(&["0193-a"]), String::new()),
            (
                Some(2),
                Vec::new(),
                "error: invalid value 'broken' for '--status <STATUS>': `broken` is not a job \
                 status (queued, running, done, failed, held, timed_out, cancelled, bounced)\n\n\
                 For more information, try '--help'.\n"
                    .to_owned()
            ),
            (Some(0), ids(&["0193-d", "0193-b"]), String::new()),
            (Some(0), ids(&["0193-c"]), String::new()),
            (
                Some(2),
                Vec::new(),
                "error: invalid value '0' for '--limit <LIMIT>': give at least 1\n\n\
                 For more information, try '--help'.\n"
                    .to_owned()
            ),
        ]
    );
}

#[tokio::test]
async fn completions_and_man_page_are_generated() {
    let home = Home::new();
    for (args, needle) in [
        (&["completions", "bash"][..], "_paddock()"),
        (&["completions", "zsh"][..], "#compdef paddock"),
        (&["completions", "fish"][..], "complete -c paddock"),
        (&["man"][..], ".TH paddock 1"),
    ] {
        let out = home.paddock(args, &[]).await;
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(needle), "{args:?}: {text}");
        assert!(text.contains("events"), "{args:?} names the subcommands");
    }
}

#[tokio::test]
async fn a_missing_spec_file_is_reported_once() {
    let home = Home::new();
    let out = home.paddock(&["run", "/nonexistent/job.toml"], &[]).await;
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    let cause = std::io::Error::from_raw_os_error(2).to_string();
    assert_eq!(err.matches(&cause).count(), 1, "{err}");
}

/// A directory given for a spec (`paddock run examples/hello`) is bad
/// input naming the spec files in it, not "Is a directory (os error 21)".
#[tokio::test]
async fn a_directory_for_a_spec_names_the_spec_files_in_it() {
    let home = Home::new();
    let dir = home.path().join("specs");
    std::fs::create_dir_all(dir.join("sub.toml")).unwrap();
    let empty = home.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    for name in ["b.json", "a.toml", "notes.md"] {
        std::fs::write(dir.join(name), "").unwrap();
    }
    let mut seen = Vec::new();
    for d in [&dir, &empty] {
        let out = home.paddock(&["run", d.to_str().unwrap()], &[]).await;
        seen.push((out.status.code(), stderr(&out)));
    }
    assert_eq!(
        seen,
        [
            (
                Some(2),
                format!(
                    "paddock: job spec {} is a directory; name a spec file in it (a.toml, b.json)\n",
                    dir.display()
                )
            ),
            (
                Some(2),
                format!(
                    "paddock: job spec {} is a directory; name a spec file in it (it has no \
                     .toml or .json file)\n",
                    empty.display()
                )
            ),
        ]
    );
}

/// `paddock serve --max-concurrent-jobs 0` is refused before it serves
/// (it was raised to 1 without a word); so is the config file's
/// `max_concurrent_jobs = 0`, naming the file and line.
#[tokio::test]
async fn a_serve_concurrency_of_zero_is_refused() {
    let home = Home::new();
    let flag = home
        .paddock(
            &[
                "serve",
                "--max-concurrent-jobs",
                "0",
                "--listen",
                "127.0.0.1:0",
            ],
            &[],
        )
        .await;
    let config = home.path().join("config");
    std::fs::create_dir_all(config.join("paddock")).unwrap();
    let file = config.join("paddock/config.toml");
    std::fs::write(&file, "[serve]\nmax_concurrent_jobs = 0\n").unwrap();
    let from_file = home
        .paddock(
            &["serve", "--listen", "127.0.0.1:0"],
            &[("XDG_CONFIG_HOME", config.to_str().unwrap())],
        )
        .await;
    assert_eq!(
        [
            (flag.status.code(), stderr(&flag)),
            (from_file.status.code(), stderr(&from_file))
        ],
        [
            (
                Some(2),
                "error: invalid value '0' for '--max-concurrent-jobs <MAX_CONCURRENT_JOBS>': \
                 give at least 1\n\nFor more information, try '--help'.\n"
                    .to_owned()
            ),
            (
                Some(2),
                format!(
                    "paddock: config file {}, line 2: field `serve.max_concurrent_jobs`: must be at \
                     least 1\n",
                    file.display()
                )
            ),
        ]
    );
}

#[tokio::test]
async fn run_dash_reads_the_spec_from_stdin() {
    let home = Home::new();
    // A spec with an unknown field: the error names stdin as its origin,
    // so the text was read and parsed from there.
    let mut child = home
        .command(&["run", "-"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use tokio::io::AsyncWriteExt as _;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"[ticket]\nid = \"T-1\"\nbogus = 1\n")
            .await
            .unwrap();
    }
    let out = child.wait_with_output().await.unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("<stdin>"), "{}", stderr(&out));
}

#[tokio::test]
async fn profile_rm_removes_a_stored_profile_and_refuses_presets() {
    let home = Home::new();
    let shown = home
        .paddock(&["profile", "show", "constrained-local"], &[])
        .await;
    assert_eq!(shown.status.code(), Some(0), "{}", stderr(&shown));
    let mut preset: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    preset["id"] = serde_json::json!("mine");
    let json = home.path().join("p.json");
    std::fs::write(&json, preset.to_string()).unwrap();
    let add = home
        .paddock(&["profile", "add", json.to_str().unwrap()], &[])
        .await;
    assert_eq!(add.status.code(), Some(0), "{}", stderr(&add));
    let rm = home.paddock(&["profile", "rm", "mine"], &[]).await;
    assert_eq!(
        String::from_utf8_lossy(&rm.stdout),
        "removed host profile `mine`\n"
    );
    let again = home.paddock(&["profile", "rm", "mine"], &[]).await;
    assert_eq!(again.status.code(), Some(2));
    let preset = home
        .paddock(&["profile", "rm", "constrained-local"], &[])
        .await;
    assert_eq!(preset.status.code(), Some(2));
    assert!(
        stderr(&preset).contains("shipped preset"),
        "{}",
        stderr(&preset)
    );
}

/// `paddock profile add` reads a camelCase profile with a warning per
/// deprecated key, and stores it in snake_case.
#[tokio::test]
async fn profile_add_reads_camel_case_keys_with_a_warning_each() {
    let home = Home::new();
    let file = home.path().join("old.toml");
    std::fs::write(
        &file,
        "id = \"old\"\ndenyCommands = [\"make all\"]\nmax_concurrent_jobs = 2\n",
    )
    .unwrap();
    let add = home
        .paddock(&["profile", "add", file.to_str().unwrap()], &[])
        .await;
    assert_eq!(
        (add.status.code(), stderr(&add)),
        (
            Some(0),
            format!(
                "paddock: warning: host profile {}: key `denyCommands` is deprecated, spell it `deny_commands`\n",
                file.display()
            )
        )
    );
    let shown = home.paddock(&["profile", "show", "old"], &[]).await;
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&shown.stdout).unwrap(),
        serde_json::json!({
            "id": "old", "build_policy": "local", "verification": "full-suite",
            "deny_commands": ["make all"], "max_concurrent_jobs": 2
        })
    );
}

/// A spec without any budget runs, with a warning event on the job's
/// stream (shown by `paddock run`, also under `-q`, and by `paddock
/// events`); one with a budget gets none.
#[tokio::test]
async fn a_spec_without_a_budget_gets_a_warning_event() {
    let Some(_) = paddock_test_support::prelude::engine("codex") else {
        return;
    };
    let message = paddock::runner::warnings::NO_BUDGET;
    let home = Home::new();
    let spec = scripted_job(&home, ONE_TURN);
    paddock_test_support::prelude::on_rung(&spec, "process");
    let out = home
        .paddock(&["-q", "run", spec.to_str().unwrap()], &[])
        .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stderr(&out), format!("  ⚠ warning paddock: {message}\n"));
    let store = home.store().await;
    let id = store.jobs(1).await.unwrap()[0].id.clone();
    let warnings: Vec<EventBody> = store
        .events(&id, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.body)
        .filter(|b| matches!(b, EventBody::Error { .. }))
        .collect();
    assert_eq!(
        warnings,
        vec![EventBody::Error {
            message: message.to_string(),
            source: Some("paddock".into()),
            fatal: false
        }]
    );
    let mut text = std::fs::read_to_string(&spec).unwrap();
    text.push_str("\n[budget]\nmax_usd = 1.0\n");
    std::fs::write(&spec, text).unwrap();
    let out = home.paddock(&["run", spec.to_str().unwrap()], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("no [budget]"), "{}", stderr(&out));
}

/// The config file's `max_usd` is the budget of a spec without one: no
/// warning, and the budget holds the job (its first call's worst case
/// does not fit $0.000001).
#[tokio::test]
async fn the_config_files_max_usd_budgets_a_spec_without_one() {
    let Some(_) = paddock_test_support::prelude::engine("codex") else {
        return;
    };
    let home = Home::new();
    let spec = scripted_job(&home, ONE_TURN);
    paddock_test_support::prelude::on_rung(&spec, "process");
    home.write_config("max_usd = 0.000001\n");
    let out = home.paddock(&["run", spec.to_str().unwrap()], &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(!stderr(&out).contains("no [budget]"), "{}", stderr(&out));
    let rec = &home.store().await.jobs(1).await.unwrap()[0];
    assert_eq!(rec.status, JobStatus::Held);
    assert!(
        rec.reason
            .as_deref()
            .is_some_and(|r| r.contains("of $0.000001 spent); the job is held")),
        "{:?}",
        rec.reason
    );
}

#[tokio::test]
async fn a_config_file_with_an_unknown_key_is_bad_input_naming_file_and_line() {
    let home = Home::new();
    let spec = scripted_job(&home, ONE_TURN);
    let dir = home.path().join("config/paddock");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), "max_usd = 1.0\nmaxUsd = 2.0\n").unwrap();
    let out = home.paddock(&["run", spec.to_str().unwrap()], &[]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with(&format!(
            "paddock: config file {}, line 2: field `maxUsd`: unknown field `maxUsd`",
            dir.join("config.toml").display()
        )),
        "{}",
        stderr(&out)
    );
}

/// A mistake in one part of the config file stops only the commands that
/// read that part: a typo in `[serve]` leaves `paddock gc` and `paddock
/// run` (which never read it) working, `paddock serve` refuses naming the
/// file, the line and the key, and `paddock doctor` reports every part
/// that does not read with the commands it stops. Before, the typo stopped
/// `gc` and `run` too. `paddock run`'s part, which needs an engine, is
/// its own test (`a_mistake_in_serve_leaves_paddock_run_working`): this one
/// runs without one (before, all of it was skipped without Codex).
#[tokio::test]
async fn a_mistake_in_one_part_of_the_config_file_stops_only_the_commands_reading_it() {
    let home = Home::new();
    let file = home.path().join("config/paddock/config.toml");
    home.write_config(SERVE_TYPO);
    let gc = home.paddock(&["gc"], &[]).await;
    let serve = home
        .paddock(&["serve", "--listen", "127.0.0.1:0"], &[])
        .await;
    let serve_typo = format!(
        "config file {}, line 3: field `serve.listen_adress`: unknown field `listen_adress`, \
         expected one of `listen`, `max_concurrent_jobs`, `drain_grace_secs`, \
         `max_passed_over_secs`, `webhook_url`, `webhook_secret`, `log_format`, `lanes`, \
         `allow_refs`, `allow_paths`, `allow_hosts`, `allow_profiles`, `allow_process`, \
         `allow_ci_changes`, `accept_for_fleet`",
        file.display()
    );
    assert_eq!(
        [
            (gc.status.code(), stderr(&gc)),
            (serve.status.code(), stderr(&serve)),
        ],
        [
            (Some(0), String::new()),
            (Some(2), format!("paddock: {serve_typo}\n")),
        ],
    );
    // A table the file does not know belongs to no part: `[cache]` meant
    // for `[caches]` stops `paddock gc` too, where it ran on the default
    // cap the table was meant to change.
    home.write_config("[cache]\nmax_size = \"1KiB\"\n");
    let gc = home.paddock(&["gc"], &[]).await;
    assert_eq!(
        (gc.status.code(), stderr(&gc)),
        (
            Some(2),
            format!(
                "paddock: config file {}, line 1: field `cache`: unknown field `cache`, expected \
                 one of `max_usd`, `prices`, `isolation`, `profile`, `host_profile`, `serve`, \
                 `caches`, `hosts`, `jobs`\n",
                file.display()
            )
        )
    );
    // A second part that does not read: each command reading it stops on
    // it, and doctor names both.
    home.write_config(
        "max_usd = 1.0\n[serve]\nlisten_adress = \"127.0.0.1:9000\"\n[caches]\nmax_size = \"lots\"\n",
    );
    let gc = home.paddock(&["gc"], &[]).await;
    let doctor = home.paddock(&["doctor", "--json"], &[]).await;
    let report: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let config_checks: Vec<&serde_json::Value> = report["setup"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] == "config file")
        .collect();
    let caches_size = format!(
        "config file {}, line 5: field `caches.max_size`: `lots` is not a size (e.g. \"10GiB\", \
         \"500MiB\", \"unlimited\")",
        file.display()
    );
    assert_eq!(
        (
            gc.status.code(),
            stderr(&gc),
            doctor.status.code(),
            config_checks
        ),
        (
            Some(2),
            format!("paddock: {caches_size}\n"),
            Some(1),
            vec![
                &serde_json::json!({
                    "name": "config file",
                    "ok": false,
                    "detail": format!("[serve]: {serve_typo}"),
                    "fix": "fix it (docs/cli.md#config-file): until then paddock serve refuses to start",
                }),
                &serde_json::json!({
                    "name": "config file",
                    "ok": false,
                    "detail": format!("[caches]: {caches_size}"),
                    "fix": "fix it (docs/cli.md#config-file): until then paddock run, gc and serve \
                            refuse to start",
                }),
            ]
        )
    );
}

/// A config file whose `[serve]` has a typo (line 3).
const SERVE_TYPO: &str = "max_usd = 1.0\n[serve]\nlisten_adress = \"127.0.0.1:9000\"\n";

/// `paddock run` never reads `[serve]`: a typo there leaves it working
/// (the part of the test above that needs an engine).
#[tokio::test]
async fn a_mistake_in_serve_leaves_paddock_run_working() {
    let Some(_) = paddock_test_support::prelude::engine("codex") else {
        return;
    };
    let home = Home::new();
    let spec = scripted_job(&home, ONE_TURN);
    paddock_test_support::prelude::on_rung(&spec, "process");
    home.write_config(SERVE_TYPO);
    let run = home.paddock(&["run", spec.to_str().unwrap()], &[]).await;
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
}

/// `paddock doctor` reads the config file once and reports a broken
/// `[jobs]` once, with the commands it stops: a table that does not
/// read, or one naming a path this host lacks (which `paddock run`
/// refuses). The engine views, judged with `[jobs]`' tools, are not
/// reported on as a second failure of it. Before, doctor loaded the file
/// again for the engine views and reported the same `[jobs]` twice (the
/// second time as "engine views" without the commands it stops), and a
/// missing path only there.
#[tokio::test]
async fn doctor_reports_a_broken_jobs_table_once_with_the_commands_it_stops() {
    let home = Home::new();
    let file = home.path().join("config/paddock/config.toml");
    let missing = home.path().join("no-such-toolchain/bin");
    let mut seen = Vec::new();
    for config in [
        "[jobs]\npath = \"/usr/bin\"\n".to_owned(),
        format!("[jobs]\npath = [\"{}\"]\n", missing.display()),
    ] {
        home.write_config(&config);
        let doctor = home.paddock(&["doctor", "--json"], &[]).await;
        let report: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
        let checks: Vec<serde_json::Value> = report["setup"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["name"] == "config file" || c["name"] == "engine views")
            .cloned()
            .collect();
        seen.push((doctor.status.code(), checks));
    }
    let fix = "fix it (docs/cli.md#config-file): until then paddock run, context and serve \
               refuse to start, and whether the engines bind into a job's sandbox is checked \
               once it reads";
    assert_eq!(
        seen,
        [
            (
                Some(1),
                vec![serde_json::json!({
                    "name": "config file",
                    "ok": false,
                    "detail": format!(
                        "[jobs]: config file {}, line 2: field `jobs.path`: invalid type: \
                         string \"/usr/bin\", expected a sequence",
                        file.display()
                    ),
                    "fix": fix,
                })]
            ),
            (
                Some(1),
                vec![serde_json::json!({
                    "name": "config file",
                    "ok": false,
                    "detail": format!(
                        "[jobs]: config file {}: jobs.path: {} does not exist on this host \
                         (docs/cli.md#the-hosts-tools-jobs)",
                        file.display(),
                        missing.display()
                    ),
                    "fix": fix,
                })]
            ),
        ]
    );
}

/// A config file's `profile` or `host_profile` naming a profile file by a
/// relative path is read beside the config file, as its `prices` is,
/// whatever directory `paddock run` runs in; a spec naming the same file
/// is under the host's profile. Before, it was read from the current
/// directory, and the job refused: `cannot read host profile ci.toml`.
#[tokio::test]
async fn a_config_files_relative_profile_is_read_beside_it() {
    let Some(_) = paddock_test_support::prelude::engine("codex") else {
        return;
    };
    let mut codes = Vec::new();
    for key in ["profile", "host_profile"] {
        let home = Home::new();
        let spec = scripted_job(&home, ONE_TURN);
        paddock_test_support::prelude::on_rung(&spec, "process");
        let dir = home.path().join("config/paddock");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("ci.toml"), "id = \"ci-box\"\n").unwrap();
        std::fs::write(dir.join("config.toml"), format!("{key} = \"ci.toml\"\n")).unwrap();
        let text = std::fs::read_to_string(&spec).unwrap();
        let naming = home.path().join("naming.toml");
        std::fs::write(
            &naming,
            format!(
                "{text}\n[policy]\nprofile = \"{}\"\n",
                dir.join("ci.toml").display()
            ),
        )
        .unwrap();
        for spec in [&spec, &naming] {
            let out = home.paddock(&["run", spec.to_str().unwrap()], &[]).await;
            codes.push((
                key,
                out.status.code(),
                stderr(&out).contains("host profile"),
            ));
        }
    }
    assert_eq!(
        codes,
        [
            ("profile", Some(0), false),
            ("profile", Some(0), false),
            ("host_profile", Some(0), false),
            ("host_profile", Some(0), false)
        ]
    );
}

/// A host whose config file sets `host_profile` runs every job under it: a
/// spec naming another profile (here the preset `remote-full`, which sets
/// no network maximum) is refused before anything of the job exists,
/// naming both; a spec naming none is given the host's, which then binds
/// it (its network maximum refuses the spec's wider `[network] allow`).
#[tokio::test]
async fn a_host_profile_binds_every_job_which_cannot_name_another() {
    let home = Home::new();
    let spec = scripted_job(&home, ONE_TURN);
    let profile = home.path().join("host.toml");
    std::fs::write(
        &profile,
        "id = \"ci-box\"\n[network]\nallow = [\"*.github.com\"]\n",
    )
    .unwrap();
    home.write_config(&format!("host_profile = \"{}\"\n", profile.display()));
    let text = std::fs::read_to_string(&spec).unwrap();
    let other = home.path().join("other.toml");
    std::fs::write(
        &other,
        format!(
            "{text}\n[policy]\nprofile = \"remote-full\"\n[network]\nallow = [\"example.org\"]\n"
        ),
    )
    .unwrap();
    let wider = home.path().join("wider.toml");
    std::fs::write(
        &wider,
        format!("{text}\n[network]\nallow = [\"example.org\"]\n"),
    )
    .unwrap();
    let refused = home.paddock(&["run", other.to_str().unwrap()], &[]).await;
    let capped = home.paddock(&["run", wider.to_str().unwrap()], &[]).await;
    assert_eq!(
        (
            refused.status.code(),
            stderr(&refused).lines().next().map(str::to_string),
            capped.status.code(),
            stderr(&capped).contains("example.org") && stderr(&capped).contains("*.github.com"),
            home.store().await.jobs(10).await.unwrap().len(),
        ),
        (
            Some(2),
            Some(format!(
                "paddock: policy.profile `remote-full` is not the host's: this host runs every job under host profile `{}` (host_profile in the config file); a job cannot choose another",
                profile.display()
            )),
            Some(2),
            true,
            0,
        ),
        "{}\n{}",
        stderr(&refused),
        stderr(&capped)
    );
}

/// A host profile the config file gives a spec that names none, and that
/// cannot be resolved (in no store, no preset; a file not there), is
/// named with its key and the config file, by `paddock run` and `paddock
/// context` alike; the same name in the spec's own `[policy] profile` is
/// named as before. Before, the refusal read as if the spec had named the
/// profile, and its reader looked for it there. Nothing is recorded.
#[tokio::test]
async fn a_host_profile_from_the_config_file_that_is_not_there_is_said_to_come_from_it() {
    let home = Home::new();
    let spec = scripted_job(&home, ONE_TURN);
    let text = std::fs::read_to_string(&spec).unwrap();
    let naming = home.path().join("naming.toml");
    std::fs::write(&naming, format!("{text}\n[policy]\nprofile = \"nope\"\n")).unwrap();
    let config = home.path().join("config/paddock/config.toml");
    let missing = home.path().join("config/paddock/missing.toml");
    let unknown = "host profile `nope` is neither in the store nor a preset (constrained-local, \
                   remote-full); save it with `paddock profile add FILE` or name a profile file";
    let mut said = Vec::new();
    for (config_text, spec) in [
        ("host_profile = \"nope\"\n", &spec),
        ("profile = \"nope\"\n", &spec),
        ("profile = \"missing.toml\"\n", &spec),
        ("profile = \"other\"\n", &naming),
    ] {
        home.write_config(config_text);
        let ran = home.paddock(&["run", spec.to_str().unwrap()], &[]).await;
        let context = home
            .paddock(
                &[
                    "context",
                    spec.to_str().unwrap(),
                    "--out",
                    home.path().join("ctx").to_str().unwrap(),
                ],
                &[],
            )
            .await;
        said.push((
            ran.status.code(),
            stderr(&ran),
            context.status.code(),
            stderr(&context),
        ));
    }
    let both = |line: String| (Some(2), line.clone(), Some(2), line);
    assert_eq!(
        (said, home.store().await.jobs(10).await.unwrap().len()),
        (
            vec![
                both(format!(
                    "paddock: host_profile in the config file {}: {unknown}\n",
                    config.display()
                )),
                both(format!(
                    "paddock: profile in the config file {}: {unknown}\n",
                    config.display()
                )),
                both(format!(
                    "paddock: profile in the config file {}: cannot read host profile {}: No such \
                     file or directory (os error 2)\n",
                    config.display(),
                    missing.display()
                )),
                both(format!("paddock: {unknown}\n")),
            ],
            0
        )
    );
}

/// `paddock run` whose stderr is a pipe nobody reads any more (`paddock
/// run … 2>&1 | head -1`), with the log on (`PADDOCK_LOG=debug`: a line
/// for every store query), runs its job to its end. Before, the log's
/// formatter reported the failed write with `eprintln!`, which panicked on
/// the same closed stderr in the store's worker thread: the job failed
/// mid-run and `paddock` exited 70.
#[tokio::test]
async fn a_run_whose_stderr_reader_went_away_finishes_its_job() {
    let home = Home::new();
    let spec = paddock_test_support::jobs::stand_in_job(home.path(), "process", "true", 30);
    let mut cmd = home.command(&["run", "--json", spec.to_str().unwrap()]);
    cmd.env("PADDOCK_LOG", "debug")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    // The reader goes away before the first line.
    drop(child.stderr.take());
    let out = child.wait_with_output().await.unwrap();
    let rec = record(&out);
    assert_eq!(
        (out.status.code(), rec.status, rec.reason.as_deref()),
        (
            Some(1),
            JobStatus::Failed,
            Some("the engine exited without finishing its turn")
        )
    );
}

/// `paddock run --attempt-after JOB` says it resumed the prior attempt's
/// session once the job has it (its files in the job's home, just before
/// the engine starts), under `-q` too: a next attempt whose provisioning
/// fails (its source moved away after admission's checks) says nothing
/// of a session. Before, the line was printed at admission, and a job
/// that never started an engine said it had resumed one. With progress
/// on, the `session_resumed` status line says it, once: before, `paddock:
/// resumed session …` was printed beside it, the same words twice.
#[tokio::test(flavor = "multi_thread")]
async fn a_next_attempt_says_it_resumed_its_session_only_once_it_has() {
    const SESSION: &str = "0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee";
    let home = Home::new();
    let dir = home.path().join("job");
    std::fs::create_dir_all(&dir).unwrap();
    let body = finishing_session(
        &format!(
            r#"day="$HOME/.codex/sessions/2026/12/02"
mkdir -p "$day"
echo '{{}}' > "$day/rollout-1-{SESSION}.jsonl""#
        ),
        SESSION,
    );
    let spec = stand_in_job(&dir, "process", &body, 120);
    let spec_arg = spec.to_str().unwrap();
    let first = record(&home.paddock(&["run", "--json", spec_arg], &[]).await);
    let sessions = |out: &std::process::Output| -> Vec<String> {
        stderr(out)
            .lines()
            .filter(|l| l.contains("session"))
            .map(str::to_string)
            .collect()
    };
    // The source swapped for a directory admission takes for a git
    // directory (a `HEAD` in it) that git does not: the job is made and
    // fails at its provisioning, before any engine runs.
    let (repo, moved) = (dir.join("repo"), dir.join("repo-moved"));
    std::fs::rename(&repo, &moved).unwrap();
    std::fs::create_dir(&repo).unwrap();
    std::fs::write(repo.join("HEAD"), "").unwrap();
    let failed = home.run_after(spec_arg, &first.id, &[]).await;
    std::fs::remove_dir_all(&repo).unwrap();
    std::fs::rename(&moved, &repo).unwrap();
    let resumed = home
        .paddock(
            &[
                "run",
                "--json",
                "-q",
                spec_arg,
                "--attempt-after",
                &first.id,
            ],
            &[],
        )
        .await;
    let second = record(&resumed);
    // With progress on, its own line says it: once.
    let shown = home.run_after(spec_arg, &second.id, &[]).await;
    assert_eq!(
        (
            first.status,
            record(&failed).status,
            sessions(&failed),
            second.status,
            sessions(&resumed),
            record(&shown).status,
            sessions(&shown),
        ),
        (
            JobStatus::Done,
            JobStatus::Failed,
            Vec::<String>::new(),
            JobStatus::Done,
            vec![format!(
                "paddock: resumed session {SESSION} of attempt 1 (job {})",
                first.id
            )],
            JobStatus::Done,
            vec![
                format!(
                    "▸ session_resumed: resumed session {SESSION} of attempt 2 (job {})",
                    second.id
                ),
                format!("▸ session_started: {SESSION}"),
            ],
        ),
        "{}\n{}\n{}",
        stderr(&failed),
        stderr(&resumed),
        stderr(&shown)
    );
}

/// A spec in a subdirectory naming its repository `../My Repos/repo`:
/// the path is shown, stored and used as `<home>/My Repos/repo`, made
/// plain by its text (no link followed), in the refusal of a run whose
/// repository is not there yet and in the stored spec of one that ran.
/// Before, both said `<home>/specs/../My Repos/repo`.
#[tokio::test(flavor = "multi_thread")]
async fn a_path_written_relative_to_the_spec_is_shown_plain() {
    let home = Home::new();
    let specs = home.path().join("specs");
    std::fs::create_dir_all(&specs).unwrap();
    let spec = stand_in_spec(
        &specs,
        std::path::Path::new("../My Repos/repo"),
        "process",
        &finishing("printf 'hi\\n' > hi.txt"),
    );
    let spec_arg = spec.to_str().unwrap();
    let missing = home.paddock(&["run", "--json", spec_arg], &[]).await;
    let repos = home.path().join("My Repos");
    std::fs::create_dir_all(&repos).unwrap();
    let made = repo(&repos);
    let ran = record(&home.paddock(&["run", "--json", spec_arg], &[]).await);
    let stored = home.store().await.job_spec(&ran.id).await.unwrap().unwrap();
    let stored = paddock_protocol::JobSpec::from_json(&stored, std::path::Path::new("stored"))
        .unwrap()
        .repository
        .path;
    assert_eq!(
        (missing.status.code(), stderr(&missing), ran.status, stored),
        (
            Some(2),
            format!(
                "paddock: repository.path {}: no such directory\n",
                made.display()
            ),
            JobStatus::Done,
            Some(made.clone()),
        )
    );
}

/// A local source that is surely no repository (a `repository.path` or
/// a path or `file://` URL that does not exist, a directory that is no
/// git repository) is refused before the job exists: exit 2 naming the
/// field and what was tried, no job row, no workspace; a remote URL is
/// still tried by the clone (a job made, failed at it). Before, every
/// one made a job and failed it at its clone.
#[tokio::test(flavor = "multi_thread")]
async fn a_local_repository_that_is_not_there_is_refused_before_the_job_exists() {
    let home = Home::new();
    let plain = home.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let gone = home.path().join("gone");
    let spec = stand_in_spec(home.path(), &gone, "process", &finishing("true"));
    let source = |line: &str| {
        let text = std::fs::read_to_string(&spec).unwrap();
        let at = text.find("[repository]\n").unwrap() + "[repository]\n".len();
        let end = at + text[at..].find('\n').unwrap();
        std::fs::write(&spec, format!("{}{line}{}", &text[..at], &text[end..])).unwrap();
    };
    let mut refused = Vec::new();
    for line in [
        format!("path = \"{}\"", gone.display()),
        format!("path = \"{}\"", plain.display()),
        format!("url = \"file://{}\"", gone.display()),
        format!("url = \"{}\"", plain.display()),
    ] {
        source(&line);
        let out = home.paddock(&["run", spec.to_str().unwrap()], &[]).await;
        refused.push((out.status.code(), stderr(&out)));
    }
    let jobs_left = home.store().await.jobs(10).await.unwrap();
    let workspaces = home.leftover_workspaces();
    let not_a_repository = "no git repository (no `.git` in it, and no bare repository's `HEAD`)";
    assert_eq!(
        (refused, jobs_left, workspaces),
        (
            vec![
                (
                    Some(2),
                    format!("paddock: repository.path {}: no such directory\n", gone.display())
                ),
                (
                    Some(2),
                    format!(
                        "paddock: repository.path {}: not a git repository (no `.git` in it, \
                         and no bare repository's `HEAD`)\n",
                        plain.display()
                    )
                ),
                (
                    Some(2),
                    format!(
                        "paddock: repository.url `file://{g}`: {g} does not exist (nor {g}.git, \
                         which git clone also tries)\n",
                        g = gone.display()
                    )
                ),
                (
                    Some(2),
                    format!(
                        "paddock: repository.url `{p}`: {p} is a directory but {not_a_repository}\n",
                        p = plain.display()
                    )
                ),
            ],
            vec![],
            Vec::<String>::new(),
        )
    );
    // A remote URL is not looked at: the clone tries it, and fails the job.
    source("url = \"http://127.0.0.1:9/none.git\"");
    let remote = record(
        &home
            .paddock(&["run", "--json", spec.to_str().unwrap()], &[])
            .await,
    );
    assert_eq!(remote.status, JobStatus::Failed, "{:?}", remote.reason);
}
