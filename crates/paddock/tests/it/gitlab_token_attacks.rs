//! Hostile token records (`results/gitlab_token.rs`): the file the reaper
//! and `paddock publish` read to revoke a killed job's GitLab project
//! access token. It lies in `<artifacts>/<job>/`, outside a sandboxed
//! job's view; these tests write what a `process`-rung job (the user's
//! uid) or a corrupted disk could leave there, against the GitLab mock
//! (the one part that cannot be real here) and a second mock standing for
//! a place the host token must never go.

use std::path::Path;
use std::time::Duration;

use paddock::results::gitlab_token::{mint, revoke_leftovers};
use paddock::secret::Secret;
use paddock_test_support::gitlab::MockGitLab;

const TOKEN: &str = "glpat-host-maintainer-token";
const JOB: &str = "job-0192a0b0c0d0e0f00000000000000001";
const OTHER: &str = "job-0192a0b0c0d0e0f00000000000000002";

fn record(dir: &Path, nonce: &str, text: &[u8]) -> std::path::PathBuf {
    let path = dir.join(format!(".gitlab-token-{nonce}.json"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Every record a job could leave that is not its own token's: another
/// job's token (by name, and by id with this job's name), a record naming
/// an API root of its own, one that is not JSON, one of 10 MB, one not
/// UTF-8, a FIFO, a link to a host file and a directory by a record's
/// name. The reaper's pass returns at once (no FIFO waited on, no huge
/// read), each error names its file, the other job's token stays active,
/// nothing reaches the other place, and the records that are not this
/// job's stay for a person to look at.
#[tokio::test(flavor = "multi_thread")]
async fn a_record_cannot_redirect_the_host_token_or_revoke_another_jobs() {
    let gitlab = MockGitLab::start("acme/widgets", TOKEN).await;
    let elsewhere = MockGitLab::start("acme/widgets", TOKEN).await;
    let tmp = tempfile::tempdir().unwrap();
    let (ours, theirs) = (tmp.path().join(JOB), tmp.path().join(OTHER));
    let today = time::OffsetDateTime::now_utc().date();
    // Another job's token, minted for real (its record in its own place).
    let (_, _, _issued) = mint(
        &gitlab.url,
        "acme/widgets",
        Secret::new(TOKEN.into()),
        OTHER,
        &theirs,
        today,
    )
    .await
    .unwrap();
    let other_token = gitlab.access_tokens()[0].clone();
    let other_id = other_token["id"].as_u64().unwrap();
    let other_name = other_token["name"].as_str().unwrap().to_string();
    std::fs::create_dir_all(&ours).unwrap();
    let by_name = record(
        &ours,
        "a1",
        format!(r#"{{"name":"{other_name}","token_id":null}}"#).as_bytes(),
    );
    // This job's name, the other job's id: the listed token's name differs.
    let by_id = record(
        &ours,
        "a2",
        format!(r#"{{"name":"paddock-{JOB}-deadbeef","token_id":{other_id}}}"#).as_bytes(),
    );
    let redirect = record(
        &ours,
        "a3",
        format!(
            r#"{{"name":"paddock-{JOB}-00000000","token_id":null,"api_url":"{}"}}"#,
            elsewhere.url
        )
        .as_bytes(),
    );
    let garbage = record(&ours, "a4", b"not json\n");
    let huge = record(&ours, "a5", &vec![b' '; 10 << 20]);
    let binary = record(&ours, "a6", b"\xff\xfe{\"name\":1}");
    nix::unistd::mkfifo(
        &ours.join(".gitlab-token-a7.json"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    std::fs::write(tmp.path().join("host-file"), "host\n").unwrap();
    std::os::unix::fs::symlink(
        tmp.path().join("host-file"),
        ours.join(".gitlab-token-a8.json"),
    )
    .unwrap();
    std::fs::create_dir(ours.join(".gitlab-token-a9.json")).unwrap();

    let pass = {
        let (url, ours) = (gitlab.url.clone(), ours.clone());
        tokio::spawn(async move {
            revoke_leftovers(
                &url,
                "acme/widgets",
                || Ok(Secret::new(TOKEN.into())),
                JOB,
                &ours,
            )
            .await
        })
    };
    // The FIFO waited on would block its reader for good (it has no
    // writer): a guard against that, far above what a loaded host (the
    // suites side by side on two cores) takes. The pass runs on a worker
    // of its own, so a read that blocks its thread cannot block this
    // timeout's as well (it did, on the one thread the test had).
    let pass = tokio::time::timeout(Duration::from_secs(120), pass)
        .await
        .expect("the pass returned")
        .unwrap();
    let errors = pass.errors;
    // Each error starts with the file it is about (the by-id record names
    // no token the project has under its name: nothing to revoke, it goes).
    let named: Vec<bool> = [&by_name, &redirect, &garbage, &huge, &binary]
        .iter()
        .map(|p| errors.iter().any(|e| e.contains(&p.display().to_string())))
        .collect();
    let mut left: Vec<String> = std::fs::read_dir(&ours)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    let deletes: Vec<String> = gitlab
        .requests()
        .into_iter()
        .filter(|r| r.method == "DELETE")
        .map(|r| r.path)
        .collect();
    assert_eq!(
        (
            errors.len(),
            named,
            by_id.exists(),
            left,
            deletes,
            gitlab.access_tokens()[0]["active"].clone(),
            elsewhere.requests().len(),
            std::fs::read_to_string(tmp.path().join("host-file")).unwrap(),
        ),
        (
            5,
            vec![true; 5],
            false,
            [
                ".gitlab-token-a1.json",
                ".gitlab-token-a3.json",
                ".gitlab-token-a4.json",
                ".gitlab-token-a5.json",
                ".gitlab-token-a6.json",
                ".gitlab-token-a7.json",
                ".gitlab-token-a8.json",
                ".gitlab-token-a9.json",
            ]
            .map(String::from)
            .to_vec(),
            Vec::<String>::new(),
            serde_json::Value::Bool(true),
            0,
            "host\n".to_string(),
        ),
        "{errors:#?}"
    );
}

/// A record of this job's own token, next to hostile ones, is still
/// revoked and removed: a bad record does not stop the pass.
#[tokio::test]
async fn a_bad_record_does_not_keep_the_jobs_own_token_alive() {
    let gitlab = MockGitLab::start("acme/widgets", TOKEN).await;
    let tmp = tempfile::tempdir().unwrap();
    let ours = tmp.path().join(JOB);
    let today = time::OffsetDateTime::now_utc().date();
    // Minted, then "killed": the record stays, the token is alive.
    let (_, _, issued) = mint(
        &gitlab.url,
        "acme/widgets",
        Secret::new(TOKEN.into()),
        JOB,
        &ours,
        today,
    )
    .await
    .unwrap();
    drop(issued);
    let garbage = record(&ours, "00", b"{\"name\":");
    let got = revoke_leftovers(
        &gitlab.url,
        "acme/widgets",
        || Ok(Secret::new(TOKEN.into())),
        JOB,
        &ours,
    )
    .await;
    let errors = got.errors;
    assert_eq!(
        (
            got.revoked.len(),
            errors.len(),
            errors[0].starts_with(&format!("read {}: ", garbage.display())),
            gitlab.access_tokens()[0]["active"].clone(),
            paddock::results::gitlab_token::leftover_records(&ours),
        ),
        (
            1,
            1,
            true,
            serde_json::Value::Bool(false),
            vec![garbage.clone()]
        )
    );
}
