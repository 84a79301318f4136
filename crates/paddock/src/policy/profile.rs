//! Where a job's HostProfile comes from: `policy.profile` names a file
//! (`.json`/`.toml`, or any path with a `/`), or an id looked up in the store
//! and then among the shipped presets (`constrained-local`, `remote-full`,
//! vendored in `crates/paddock/data/profiles/`).

use std::path::Path;

use paddock_protocol::{DeprecatedKey, HostProfile, PolicySpec, ProfileError};

use crate::store::{Store, StoreError};

/// The shipped presets, by id.
pub const PRESETS: &[(&str, &str)] = &[
    (
        "constrained-local",
        include_str!("../../data/profiles/constrained-local.json"),
    ),
    (
        "remote-full",
        include_str!("../../data/profiles/remote-full.json"),
    ),
];

#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error(transparent)]
    Load(#[from] ProfileError),
    #[error("host profile `{name}`: {source}")]
    Store {
        name: String,
        #[source]
        source: StoreError,
    },
    #[error("host profile `{name}` is neither in the store nor a preset ({presets}); save it with `paddock profile add FILE` or name a profile file")]
    Unknown { name: String, presets: String },
}

/// Where a profile was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileSource {
    /// A file, with the deprecated keys it spells the old way.
    File {
        path: String,
        deprecated: Vec<DeprecatedKey>,
    },
    Store,
    Preset,
}

/// A shipped preset by id.
pub fn preset(id: &str) -> Result<Option<HostProfile>, ProfileError> {
    PRESETS
        .iter()
        .find(|(name, _)| *name == id)
        .map(|(name, text)| HostProfile::from_json(text, &format!("preset {name}")))
        .transpose()
}

/// The profile `name` refers to.
pub async fn resolve(
    name: &str,
    store: &dyn Store,
) -> Result<(HostProfile, ProfileSource), ResolveError> {
    if PolicySpec::profile_is_file(name) {
        let loaded = HostProfile::load(Path::new(name))?;
        let source = ProfileSource::File {
            path: name.to_string(),
            deprecated: loaded.deprecated,
        };
        return Ok((loaded.profile, source));
    }
    if let Some(p) = store
        .profile(name)
        .await
        .map_err(|source| ResolveError::Store {
            name: name.to_string(),
            source,
        })?
    {
        return Ok((p, ProfileSource::Store));
    }
    match preset(name)? {
        Some(p) => Ok((p, ProfileSource::Preset)),
        None => Err(ResolveError::Unknown {
            name: name.to_string(),
            presets: PRESETS
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn presets_parse_and_carry_their_id() {
        for (id, _) in PRESETS {
            assert_eq!(preset(id).unwrap().unwrap().id, *id);
        }
    }

    #[tokio::test]
    async fn store_before_preset_and_files() {
        let store = crate::store::SqliteStore::open_in_memory().await.unwrap();
        let (p, src) = resolve("remote-full", &store).await.unwrap();
        assert_eq!(
            (p.max_concurrent_jobs, src),
            (Some(8), ProfileSource::Preset)
        );
        let mut mine = p.clone();
        mine.max_concurrent_jobs = Some(2);
        store.put_profile(&mine).await.unwrap();
        assert_eq!(
            resolve("remote-full", &store).await.unwrap(),
            (mine, ProfileSource::Store)
        );
        let e = resolve("nope", &store).await.unwrap_err();
        assert_eq!(e.to_string(), "host profile `nope` is neither in the store nor a preset (constrained-local, remote-full); save it with `paddock profile add FILE` or name a profile file");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("box.toml");
        let name = file.display().to_string();
        std::fs::write(&file, "id = \"box\"\ndeny_commands = [\"make\"]\n").unwrap();
        let (p, src) = resolve(&name, &store).await.unwrap();
        assert_eq!(
            (p.deny_commands, src),
            (
                vec!["make".to_string()],
                ProfileSource::File {
                    path: name.clone(),
                    deprecated: vec![]
                }
            )
        );
        // The former spelling is read, and named.
        std::fs::write(&file, "id = \"box\"\ndenyCommands = [\"make\"]\n").unwrap();
        let (p, src) = resolve(&name, &store).await.unwrap();
        assert_eq!(
            (p.deny_commands, src),
            (
                vec!["make".to_string()],
                ProfileSource::File {
                    path: name.clone(),
                    deprecated: vec![DeprecatedKey {
                        origin: name.clone(),
                        key: "denyCommands".into(),
                        new_key: "deny_commands".into()
                    }]
                }
            )
        );
    }
}
