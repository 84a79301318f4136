//! What a spec needs of the host that runs it, beyond its engine, its
//! sandbox and its source (`engine_bin.rs`, `sandbox_view.rs`,
//! `source_here.rs`, which every admission asks): every file or directory
//! it names (`JobSpec::host_references`: its templates, skills and
//! scenario, its host profile file, a push's repository and known hosts)
//! there, every secret it names (`env:`,
//! `file:`) resolving there, and, for the scripted upstream, a paddock
//! built with it. A server asks it of a queued job it claimed before the
//! job is admitted again ([`check`], `Runner::has_here`): a job admitted
//! on another server of the fleet may name what that host has and this
//! one has not, and is passed over for a server that has it
//! (`server::queue`), not failed. `paddock run` and a server's turn run
//! on the host that admits them, whose admission refuses what is missing
//! as it always did.

use paddock_protocol::{HostReference, JobSpec, KeyRef, ProviderKind};

use super::error::NotHere;
use crate::broker::Secret;
use crate::secret::SecretKind;

/// Refuses `spec` when this host lacks what it names (the first such,
/// in `JobSpec::host_references`' order, the scripted upstream first).
/// `engine.binary` is left to `resolve_engine`, which knows PATH's rules.
pub(super) fn check(spec: &JobSpec) -> Result<(), NotHere> {
    if spec.upstream.provider == ProviderKind::Scripted && !cfg!(feature = "scripted") {
        return Err(NotHere::ScriptedNotBuilt);
    }
    let publishing = super::admit::result_secrets(spec);
    for reference in spec.host_references() {
        match reference {
            // The local source is looked at as a repository by every
            // admission (`source_here.rs`), not as a path that can be
            // read here.
            HostReference::Path {
                field: "engine.binary",
                ..
            }
            | HostReference::Source(_) => {}
            HostReference::Path { field, path } => {
                if let Err(error) = std::fs::metadata(path) {
                    return Err(NotHere::Path {
                        field,
                        path: path.to_path_buf(),
                        error,
                    });
                }
            }
            HostReference::Secret { field, key } => {
                let (kind, multiline) = publishing
                    .iter()
                    .find(|(f, ..)| *f == field)
                    .map_or((kind_of(field), false), |(_, kind, _, multiline)| {
                        (*kind, *multiline)
                    });
                resolve(field, kind, key, multiline)?;
            }
            // The host's own cloud credentials are looked for by the
            // provider at admission (`NotHere::of_admission`); where the
            // host connects is not looked at before the job runs.
            HostReference::Ambient { .. } | HostReference::Destination { .. } => {}
        }
    }
    Ok(())
}

/// The kind of secret a field outside `[results]` names.
fn kind_of(field: &str) -> SecretKind {
    match field {
        "repository.token" => SecretKind::RepositoryToken,
        _ => SecretKind::ProviderKey,
    }
}

/// Resolves `key`, named by `field`, as its user reads it.
fn resolve(
    field: &'static str,
    kind: SecretKind,
    key: &KeyRef,
    multiline: bool,
) -> Result<(), NotHere> {
    let resolved = if multiline {
        Secret::resolve_multiline(kind, key)
    } else {
        Secret::resolve(kind, key)
    };
    resolved
        .map(drop)
        .map_err(|error| NotHere::Secret { field, error })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A spec naming `extra` (TOML lines at its top level's end, or a
    /// table) over a scripted Codex job whose files are all under `root`.
    fn spec(root: &std::path::Path, upstream: &str, extra: &str) -> JobSpec {
        let text = format!(
            "[ticket]\nid = \"T-1\"\ntitle = \"t\"\nproject = \"p\"\ndescription = \"d\"\n\
             [repository]\npath = \"{root}/repo\"\nbase_ref = \"main\"\n\
             [engine]\nkind = \"codex\"\nmodel = \"gpt-5\"\n\
             [upstream]\n{upstream}\n{extra}",
            root = root.display(),
        );
        JobSpec::from_toml(&text, &root.join("job.toml")).unwrap()
    }

    /// Each file, directory and secret the spec names is looked for on
    /// this host, and the first one missing refuses it, naming its field,
    /// what it names and what is wrong; a spec whose every one is here
    /// passes, the engine's binary not looked at (PATH's rules resolve
    /// it, `resolve_engine`), nor the local source (every admission's,
    /// `source_here.rs`).
    #[test]
    fn what_the_spec_names_is_looked_for_on_this_host() {
        let dir = tempfile::tempdir().unwrap();
        let root = crate::paths::canonical(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("repo/.git")).unwrap();
        std::fs::write(root.join("scenario.toml"), "").unwrap();
        std::fs::write(root.join("key"), "k\n").unwrap();
        std::fs::write(root.join("empty"), "").unwrap();
        let scripted = format!(
            "provider = \"scripted\"\nscenario = \"{}/scenario.toml\"",
            root.display()
        );
        let got: Vec<Result<(), String>> = [
            spec(&root, &scripted, ""),
            {
                let mut s = spec(&root, &scripted, "");
                s.engine.binary = Some(root.join("nowhere/codex"));
                s
            },
            spec(
                &root,
                "provider = \"openai\"\nkey = \"env:PADDOCK_HOST_NEEDS_NEVER_SET\"",
                "",
            ),
            spec(
                &root,
                &format!(
                    "provider = \"openai\"\nkey = \"file:{}/key\"",
                    root.display()
                ),
                "",
            ),
            spec(
                &root,
                &format!(
                    "provider = \"openai\"\nkey = \"file:{}/empty\"",
                    root.display()
                ),
                "",
            ),
            spec(
                &root,
                &format!(
                    "provider = \"scripted\"\nscenario = \"{}/gone.toml\"",
                    root.display()
                ),
                "",
            ),
            spec(
                &root,
                &scripted,
                &format!(
                    "[context]\ntemplates_dir = \"{}/no-templates\"\n",
                    root.display()
                ),
            ),
            {
                let mut s = spec(&root, &scripted, "");
                s.repository.path = Some(root.join("no-repo"));
                s
            },
        ]
        .iter()
        .map(|s| check(s).map_err(|e| e.to_string()))
        .collect();
        assert_eq!(
            got,
            vec![
                Ok(()),
                Ok(()),
                Err(
                    "upstream.key: provider key env:PADDOCK_HOST_NEEDS_NEVER_SET: environment \
                     variable is not set, on this host; the server that runs the job reads the \
                     variable from its own environment: start this server with it set for this \
                     server to run the job"
                        .into()
                ),
                Ok(()),
                Err(format!(
                    "upstream.key: provider key file:{}/empty: the value is empty, on this \
                     host; the server that runs the job reads its own value: give this server a \
                     value of one line for this server to run the job",
                    root.display()
                )),
                Err(format!(
                    "upstream.scenario {}/gone.toml: cannot be read on this host (No such file \
                     or directory (os error 2)); the server that runs the job reads it there: \
                     put it at that path on this host for this server to run the job",
                    root.display()
                )),
                Err(format!(
                    "context.templates_dir {}/no-templates: cannot be read on this host (No \
                     such file or directory (os error 2)); the server that runs the job reads \
                     it there: put it at that path on this host for this server to run the job",
                    root.display()
                )),
                // The source is every admission's to look at.
                Ok(()),
            ]
        );
    }
}
