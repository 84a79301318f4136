//! Real package clients in a real sandbox through the job's egress proxy:
//! a job's `[setup]` runs `pip download` against a PEP 503 index stand-in
//! and `npm ci` / `npm install` against an npm registry stand-in (both in
//! `paddock-test-support`, on loopback, opened explicitly in the test's host
//! profile and on the setup phase's list); the files they fetched are in
//! the job. The engine (agent phase, empty list) runs the same commands:
//! they fail, and the refused destinations are `network` events.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use paddock_protocol::{EgressPhase, EgressRecord};
use paddock_test_support::npm_registry::{NpmRegistryStandIn, NPM_PACKAGE, NPM_VERSION};
use paddock_test_support::prelude::*;
use paddock_test_support::pypi_index::{PypiIndexStandIn, PYPI_PROJECT, PYPI_VERSION, PYPI_WHEEL};

/// The system Python (CI installs `python3-pip`, `.ci/run`).
const PYTHON: &str = "/usr/bin/python3";

/// `pip download` of the index's project into `dest`, through the proxy
/// the job's variables name (no `--proxy`: pip reads them; loopback is on
/// NO_PROXY, for the broker: emptied here), no retries.
fn pip_download(index: &PypiIndexStandIn, dest: &str) -> String {
    format!(
        "NO_PROXY= no_proxy= {PYTHON} -m pip download --no-cache-dir --disable-pip-version-check --retries 0 --timeout 10 --no-deps --index-url {} -d {dest} {PYPI_PROJECT}=={PYPI_VERSION}",
        index.index_url()
    )
}

/// `npm <args>` against the registry, through the proxy the job's
/// variables name (npm reads them), no retries.
fn npm(registry: &NpmRegistryStandIn, args: &str) -> String {
    format!(
        "NO_PROXY= no_proxy= npm {args} --registry {} --cache \"$HOME/.npm\" --fetch-retries 0 --no-audit --no-fund --no-update-notifier",
        registry.url()
    )
}

/// `(host:port, phase, allowed, rule)` of every attempt, sorted, once each.
/// Left out: the clients' own DNS queries to the host's nameserver
/// (`egress_record::is_own_dns`).
fn destinations(records: &[EgressRecord]) -> Vec<(String, EgressPhase, bool, Option<String>)> {
    let mut out: Vec<_> = records
        .iter()
        .filter(|r| !paddock_test_support::egress_record::is_own_dns(r))
        .map(|r| {
            (
                format!("{}:{}", r.host, r.port),
                r.phase,
                r.allowed,
                r.rule.clone(),
            )
        })
        .collect();
    out.sort_by_key(|d| format!("{d:?}"));
    out.dedup();
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn pip_and_npm_fetch_through_the_proxy_in_setup_and_not_in_the_agent_phase() {
    if !sandbox_available()
        || !program_available(PYTHON, &["-m", "pip", "--version"], "pip (python3-pip)")
        || !program_available("npm", &["--version"], "npm")
        || !program_available("tar", &["--version"], "tar")
    {
        return;
    }
    let index = PypiIndexStandIn::start().await;
    let registry = NpmRegistryStandIn::start().await;
    let home = Home::new();
    let (pip_at, npm_at) = (
        format!("127.0.0.1:{}", index.port),
        format!("127.0.0.1:{}", registry.port),
    );
    std::fs::write(
        home.path().join("profile.toml"),
        format!(
            "id = \"egress-clients\"\n[network]\nsetup_allow = [\"{pip_at}\", \"{npm_at}\"]\nopen_addresses = [\"{pip_at}\", \"{npm_at}\"]\n"
        ),
    )
    .unwrap();
    let agent = [
        "ls \"$HOME/pip\" > \"$HOME/pip-files\"".to_string(),
        "cat node_modules/paddock-standin/index.js > \"$HOME/npm-ci\"".to_string(),
        "cat \"$HOME/inst/node_modules/paddock-standin/index.js\" > \"$HOME/npm-install\""
            .to_string(),
        format!(
            "{} > /dev/null 2>&1; echo \"pip $?\" >> \"$HOME/agent\"",
            pip_download(&index, "\"$HOME/pip-agent\"")
        ),
        "rm -rf node_modules \"$HOME/.npm\"".to_string(),
        format!(
            "{} > /dev/null 2>&1; echo \"npm ci $?\" >> \"$HOME/agent\"",
            npm(&registry, "ci")
        ),
    ]
    .join("\n");
    let spec = fake_codex_job(&home, "sandbox", &agent, 120);
    // The project `npm ci` installs: a manifest and its lockfile, committed.
    let repo = home.path().join("repo");
    let manifest = serde_json::json!({
        "name": "project", "version": "1.0.0",
        "dependencies": {NPM_PACKAGE: NPM_VERSION},
    });
    std::fs::write(repo.join("package.json"), manifest.to_string()).unwrap();
    std::fs::write(repo.join("package-lock.json"), registry.lockfile("project")).unwrap();
    // Committed by an identity of its own: the user running the tests
    // may have none.
    for args in [
        &["add", "."][..],
        &[
            "-c",
            "user.name=Paddock Test",
            "-c",
            "user.email=test@paddock.invalid",
            "commit",
            "-q",
            "-m",
            "npm project",
        ],
    ] {
        let st = std::process::Command::new("git")
            .args(args)
            .current_dir(&repo)
            .status()
            .unwrap();
        assert!(st.success());
    }
    let setup = [
        pip_download(&index, "\"$HOME/pip\""),
        npm(&registry, "ci"),
        format!(
            "mkdir -p \"$HOME/inst\" && cd \"$HOME/inst\" && echo '{{}}' > package.json && {}",
            npm(&registry, &format!("install {NPM_PACKAGE}@{NPM_VERSION}"))
        ),
    ]
    .iter()
    .map(|c| format!("'''{c}'''"))
    .collect::<Vec<_>>()
    .join(", ");
    let text = std::fs::read_to_string(&spec).unwrap();
    let text = format!(
        "{text}\n[setup]\ncommands = [{setup}]\nnetwork = [\"{pip_at}\", \"{npm_at}\"]\ntimeout_secs = 100\n\n[policy]\nprofile = \"profile.toml\"\naccept_degraded = [\"network\"]\n"
    );
    std::fs::write(&spec, text).unwrap();
    let (rec, job_home) = run_kept_script_job(&home, &spec).await;
    let read = |name: &str| std::fs::read_to_string(job_home.join(name)).unwrap_or_default();
    let fetched_wheel = std::fs::read(job_home.join("pip").join(PYPI_WHEEL)).unwrap_or_default();
    assert_eq!(
        (
            read("pip-files"),
            fetched_wheel == *index.wheel,
            read("npm-ci"),
            read("npm-install"),
            read("agent"),
        ),
        (
            format!("{PYPI_WHEEL}\n"),
            true,
            "module.exports = \"hello from the stand-in registry\";\n".to_string(),
            "module.exports = \"hello from the stand-in registry\";\n".to_string(),
            "pip 1\nnpm ci 1\n".to_string(),
        )
    );
    let store = home.store().await;
    let rows = store.egress(&rec.id).await.unwrap();
    let events = home.network_events(&rec.id).await;
    assert_eq!(events, rows);
    let mut expected = vec![
        (pip_at.clone(), EgressPhase::Setup, true, None),
        (npm_at.clone(), EgressPhase::Setup, true, None),
        (
            pip_at,
            EgressPhase::Agent,
            false,
            Some("ip_literal".to_string()),
        ),
        (
            npm_at,
            EgressPhase::Agent,
            false,
            Some("ip_literal".to_string()),
        ),
    ];
    expected.sort_by_key(|d| format!("{d:?}"));
    assert_eq!(destinations(&rows), expected);
    // What the stand-ins served: the index page and the wheel to pip; the
    // tarball to `npm ci` (its lockfile names it), the packument to `npm
    // install` (the tarball it names already in npm's cache); nothing in
    // the agent phase.
    assert_eq!(
        index.requests(),
        vec![
            format!("/simple/{PYPI_PROJECT}/"),
            format!("/files/{PYPI_WHEEL}")
        ]
    );
    assert_eq!(
        registry.requests(),
        vec![
            format!("/{NPM_PACKAGE}/-/{NPM_PACKAGE}-{NPM_VERSION}.tgz"),
            format!("/{NPM_PACKAGE}")
        ]
    );
    std::fs::remove_dir_all(home.jobs().join(&rec.id)).unwrap();
}

/// `git clone` over HTTPS from a loopback smart-HTTP server
/// (`git http-backend` behind rustls, its certificate for `localhost`
/// signed by a self-signed CA the job's repository carries, given to git
/// with `GIT_SSL_CAINFO`) as a setup command on the sandbox rung, through
/// the proxy (a CONNECT to `localhost:PORT` whose ClientHello names
/// `localhost`): the clone's content is there and the row is an allowed
/// one of the setup phase. The engine's same clone is refused (403 to
/// the CONNECT, a refused row of the agent phase) and git fails.
#[tokio::test(flavor = "multi_thread")]
async fn git_clone_over_https_with_a_self_signed_ca_in_setup_and_not_in_the_agent_phase() {
    if !sandbox_available() || !program_available("git", &["--version"], "git") {
        return;
    }
    let remotes = tempfile::tempdir().unwrap();
    let dep = paddock_test_support::git::repo(remotes.path());
    std::fs::write(dep.join("hello.txt"), "hello over https\n").unwrap();
    git(&dep, &["add", "."]);
    git(&dep, &["commit", "-q", "-m", "hello"]);
    git(
        remotes.path(),
        &["clone", "-q", "--bare", dep.to_str().unwrap(), "dep.git"],
    );
    let (server, ca_pem) =
        paddock_test_support::git_http::GitHttpServer::start_https(remotes.path()).await;
    let port = server.port();
    let home = Home::new();
    let at = format!("localhost:{port}");
    // The proxy resolves `localhost` itself: its loopback addresses are
    // opened for this port only.
    std::fs::write(
        home.path().join("profile.toml"),
        format!(
            "id = \"egress-git\"\n[network]\nsetup_allow = [\"{at}\"]\nopen_addresses = [\"127.0.0.1:{port}\", \"[::1]:{port}\"]\n"
        ),
    )
    .unwrap();
    // loopback names are on NO_PROXY (for the broker): emptied.
    let clone = |dest: &str| {
        format!(
            "NO_PROXY= no_proxy= GIT_SSL_CAINFO=\"$PWD/ca.pem\" git clone -q {}/dep.git \"{dest}\"",
            server.url
        )
    };
    let agent = format!(
        "cat \"$HOME/dep/hello.txt\" > \"$HOME/seen\"\n{} > \"$HOME/agent-err\" 2>&1; echo \"clone $?\" > \"$HOME/agent\"",
        clone("$HOME/dep2")
    );
    let spec = fake_codex_job(&home, "sandbox", &agent, 120);
    let repo = home.path().join("repo");
    std::fs::write(repo.join("ca.pem"), &ca_pem).unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "the CA"]);
    let text = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(
        &spec,
        format!(
            "{text}\n[setup]\ncommands = ['''{}''']\nnetwork = [\"{at}\"]\ntimeout_secs = 60\n\n[policy]\nprofile = \"profile.toml\"\naccept_degraded = [\"network\"]\n",
            clone("$HOME/dep")
        ),
    )
    .unwrap();
    let (rec, job_home) = run_kept_script_job(&home, &spec).await;
    let read = |name: &str| std::fs::read_to_string(job_home.join(name)).unwrap_or_default();
    let refused = read("agent-err");
    assert_eq!(
        (
            read("seen"),
            read("agent"),
            refused.contains("CONNECT tunnel failed, response 403"),
            job_home.join("dep2/hello.txt").exists(),
        ),
        (
            "hello over https\n".to_string(),
            "clone 128\n".to_string(),
            true,
            false
        ),
        "{refused}"
    );
    let store = home.store().await;
    let rows = store.egress(&rec.id).await.unwrap();
    let events = home.network_events(&rec.id).await;
    assert_eq!(events, rows);
    assert_eq!(
        destinations(&rows),
        vec![
            (
                at.clone(),
                EgressPhase::Agent,
                false,
                Some("allowlist".to_string())
            ),
            (at, EgressPhase::Setup, true, None),
        ]
    );
    // Every TLS connection the server took named `localhost` (the proxy
    // checked it against the CONNECT).
    let names = server.server_names();
    assert!(!names.is_empty());
    assert_eq!(names, vec![Some("localhost".to_string()); names.len()]);
    std::fs::remove_dir_all(home.jobs().join(&rec.id)).unwrap();
}
