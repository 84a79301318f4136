//! The results loop (issue #14) end to end with the real `paddock` binary
//! and stand-in engines: the patch and its file list whatever the user's
//! git configuration says.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use crate::common::*;

const ONE_TURN: &str = "[[turn]]\ntext = \"hi\"\nusage = { input = 1, output = 1 }\n";

/// A job spec on the `process` rung whose engine is the shell script
/// `body` (run as Codex, answering the start's version check as the pin).
fn stand_in_job(home: &Home, repo: &Path, body: &str) -> PathBuf {
    let bin = home.path().join("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let engine = bin.join("codex");
    std::fs::write(
        &engine,
        format!(
            "#!/bin/sh\n[ \"$1\" = --version ] && {{ echo 'codex-cli {}'; exit 0; }}\n{body}\n",
            paddock::engines::codex::PIN.version
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&engine, std::fs::Permissions::from_mode(0o755)).unwrap();
    let spec = job(home.path(), "codex", repo, SCRIPTED, Some(ONE_TURN));
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        "[engine]\n",
        &format!("[engine]\nbinary = \"{}\"\n", engine.display()),
    );
    std::fs::write(&spec, format!("{text}\n[budget]\nmax_usd = 1.0\n")).unwrap();
    on_rung(&spec, "process");
    spec
}

/// A user whose git configuration changes every default a patch depends
/// on (no prefixes, mnemonic prefixes, quoted paths, colour, an external
/// diff, paths relative to a subdirectory) still gets a patch that `git
/// apply` takes and a file list naming `café.md` as it is; the job's
/// `__pycache__` is left out.
#[tokio::test]
async fn the_patch_does_not_depend_on_the_users_git_configuration() {
    let home = Home::new();
    let repo = repo(home.path());
    let config = home.path().join("user.gitconfig");
    std::fs::write(
        &config,
        "[diff]\n\tnoprefix = true\n\tmnemonicPrefix = true\n\texternal = /bin/false\n\trelative = true\n\
         [core]\n\tquotePath = true\n[color]\n\tui = always\n\tdiff = always\n",
    )
    .unwrap();
    let spec = stand_in_job(
        &home,
        &repo,
        "mkdir -p docs __pycache__ && printf '# café\\n' > docs/café.md && \
         printf 'x' > __pycache__/m.cpython-312.pyc && printf 'more\\n' >> README.md",
    );
    let config = config.to_str().unwrap();
    let out = home
        .paddock(
            &["run", "--json", spec.to_str().unwrap()],
            &[("GIT_CONFIG_GLOBAL", config)],
        )
        .await;
    let record = record(&out);
    assert_eq!(
        record.changed_files,
        vec!["README.md".to_string(), "docs/café.md".to_string()]
    );
    let patch = std::fs::read_to_string(record.patch_path.unwrap()).unwrap();
    // Applied by the user's own git, with the same configuration.
    let check = std::process::Command::new("git")
        .arg("-C")
        .arg(&repo)
        .args(["apply", "--check", "-"])
        .env("GIT_CONFIG_GLOBAL", config)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child.stdin.take().unwrap().write_all(patch.as_bytes())?;
            child.wait_with_output()
        })
        .unwrap();
    assert_eq!(
        (
            check.status.success(),
            String::from_utf8_lossy(&check.stderr).into_owned()
        ),
        (true, String::new()),
        "{patch}"
    );
    assert!(
        patch.contains("diff --git a/docs/café.md b/docs/café.md\n"),
        "{patch}"
    );
}
