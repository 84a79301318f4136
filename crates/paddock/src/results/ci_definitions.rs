//! CI definitions in a job's result: the files a forge or CI service runs
//! when a branch is pushed (`.github/workflows/`, `.gitlab-ci.yml`, …),
//! in one list ([`CI_DEFINITIONS`]). A result is pushed as a branch into
//! the project's own repository, so such a file the job added, changed,
//! deleted or renamed would run there at the push, with the repository's
//! CI secrets and on the operator's runners, outside the job's sandbox and
//! egress policy and before anyone reviews it. A publish that would push
//! one is refused ([`refusal`]) unless the spec opts in
//! (`results.allow_ci_changes`); the patch and the bundle stay. A local
//! source's fetch of the branch is no push: no CI runs there.

/// The CI definitions, as paths at the top of the repository: one ending
/// in `/` is a directory, everything under it included. Compared without
/// regard to ASCII case (a forge on a case-insensitive file system, and
/// nothing lost by refusing more).
pub const CI_DEFINITIONS: &[&str] = &[
    ".github/workflows/",
    ".github/actions/",
    ".gitlab-ci.yml",
    ".gitlab/ci/",
    ".circleci/",
    "Jenkinsfile",
    ".buildkite/",
    "azure-pipelines.yml",
    ".azure-pipelines/",
    ".travis.yml",
    "bitbucket-pipelines.yml",
    ".gitea/workflows/",
    ".forgejo/workflows/",
    ".woodpecker.yml",
    ".woodpecker/",
    ".drone.yml",
];

/// How many of the CI definitions a refusal names (the rest counted).
const NAMED: usize = 5;

/// Whether the changed path `path` is, holds or stands in for a CI
/// definition: it is one, lies under a directory that is, or is a file (a
/// link) where such a directory's parent is (`.github` made a link to a
/// directory of the job's workflows).
pub fn is_ci_definition(path: &str) -> bool {
    let path = path.to_ascii_lowercase();
    CI_DEFINITIONS.iter().any(|definition| {
        let definition = definition.to_ascii_lowercase();
        match definition.strip_suffix('/') {
            Some(dir) => {
                path == dir || path.starts_with(&definition) || dir.starts_with(&format!("{path}/"))
            }
            None => path == definition || definition.starts_with(&format!("{path}/")),
        }
    })
}

/// The CI definitions among `changed` (the job's changed paths, both sides
/// of a rename), in their order.
pub fn changed_definitions(changed: &[String]) -> Vec<&str> {
    changed
        .iter()
        .map(String::as_str)
        .filter(|p| is_ci_definition(p))
        .collect()
}

/// Why the result of job `job_id`, whose changed paths are `changed`, is
/// not published: the CI definitions it changes, each named as a terminal
/// shows it (at most [`NAMED`], the rest counted), what stays and the
/// opt-in; `None` when it changes none.
pub fn refusal(job_id: &str, changed: &[String]) -> Option<String> {
    let found = changed_definitions(changed);
    if found.is_empty() {
        return None;
    }
    let mut named: Vec<String> = found
        .iter()
        .take(NAMED)
        .map(|p| format!("`{}`", crate::terminal_text::path(p)))
        .collect();
    if found.len() > NAMED {
        named.push(format!("and {} more", found.len() - NAMED));
    }
    Some(format!(
        "the result adds, changes, deletes or renames CI definitions ({}), which the forge would \
         run at the push with the repository's CI secrets, before any review: nothing was pushed \
         (the patch and the branch's bundle stay: `paddock diff {job_id}`, `paddock apply \
         {job_id}`); a spec that means to change CI sets `results.allow_ci_changes = true` \
         (docs/results.md)",
        named.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_ci_definitions_and_what_stands_in_for_them_are_found() {
        let changed: Vec<String> = [
            ".GitHub/Workflows/x.yml",
            ".github",
            ".github/CODEOWNERS",
            ".github/actions/setup/action.yml",
            ".gitlab",
            ".gitlab-ci.yml",
            ".gitlab-ci.yml.bak",
            ".gitlab/ci/deploy.yml",
            ".gitlab/issue_templates/bug.md",
            "Jenkinsfile",
            "src/.gitlab-ci.yml",
            "src/lib.rs",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            changed_definitions(&changed),
            vec![
                ".GitHub/Workflows/x.yml",
                ".github",
                ".github/actions/setup/action.yml",
                ".gitlab",
                ".gitlab-ci.yml",
                ".gitlab/ci/deploy.yml",
                "Jenkinsfile",
            ]
        );
    }

    #[test]
    fn a_refusal_names_the_definitions_escaped_and_counts_the_rest() {
        let mut changed: Vec<String> = (1..=7)
            .map(|i| format!(".github/workflows/w{i}.yml"))
            .collect();
        changed[0] = ".github/workflows/a\nb.yml".into();
        changed.push("src/lib.rs".into());
        assert_eq!(refusal("job-1", &["src/lib.rs".to_string()]), None);
        assert_eq!(
            refusal("job-1", &changed),
            Some(
                "the result adds, changes, deletes or renames CI definitions \
                 (`.github/workflows/a\\u{a}b.yml`, `.github/workflows/w2.yml`, \
                 `.github/workflows/w3.yml`, `.github/workflows/w4.yml`, \
                 `.github/workflows/w5.yml`, and 2 more), which the forge would run at the push \
                 with the repository's CI secrets, before any review: nothing was pushed (the \
                 patch and the branch's bundle stay: `paddock diff job-1`, `paddock apply \
                 job-1`); a spec that means to change CI sets `results.allow_ci_changes = true` \
                 (docs/results.md)"
                    .to_string()
            )
        );
    }
}
