//! What the user may write wherever a job id is taken: the full id, any
//! unique prefix of it (`job-0193a…`, like git's short hashes), the same
//! without the `job-` every id starts with (`0193a…`), or `latest` (the
//! newest job). An ambiguous prefix is an error that lists the
//! candidates.

use crate::store::{Store, StoreError};

/// What every job id starts with.
const ID_PREFIX: &str = "job-";

/// A new job id: `job-` and a UUIDv7 (time-ordered) in hex.
pub fn new_id() -> String {
    format!("{ID_PREFIX}{}", uuid::Uuid::now_v7().simple())
}

/// The word that names the newest job.
pub const LATEST: &str = "latest";

/// How many candidates an ambiguous prefix lists at most.
const CANDIDATES: u32 = 10;

#[derive(Debug, thiserror::Error)]
pub enum JobRefError {
    #[error("no job `{given}` (no job id is or starts with it)")]
    NoMatch { given: String },
    #[error("no jobs yet: `latest` names none")]
    NoJobs,
    #[error(
        "`{given}` is ambiguous: it starts {} (give more characters)",
        list(candidates)
    )]
    Ambiguous {
        given: String,
        candidates: Vec<String>,
    },
    #[error("a job id cannot be empty")]
    Empty,
    #[error("look up job `{given}`")]
    Lookup {
        given: String,
        #[source]
        source: StoreError,
    },
}

fn list(candidates: &[String]) -> String {
    let shown: Vec<&str> = candidates
        .iter()
        .take(CANDIDATES as usize - 1)
        .map(String::as_str)
        .collect();
    let more = if candidates.len() >= CANDIDATES as usize {
        ", …"
    } else {
        ""
    };
    format!("{}{more}", shown.join(", "))
}

/// The full id of the job `given` names: as written, else (a prefix no
/// id starts with, written without the `job-` every id starts with, as
/// the hex of the id is copied) with `job-` before it. Before, `0193a…`
/// named no job, as the docs said it would.
pub async fn resolve(store: &dyn Store, given: &str) -> Result<String, JobRefError> {
    match resolve_as_written(store, given).await {
        Err(JobRefError::NoMatch { .. }) if !given.is_empty() && !given.starts_with(ID_PREFIX) => {
            let prefixed = format!("{ID_PREFIX}{given}");
            match resolve_as_written(store, &prefixed).await {
                Err(JobRefError::NoMatch { .. }) => Err(JobRefError::NoMatch {
                    given: given.to_owned(),
                }),
                Err(JobRefError::Ambiguous { candidates, .. }) => Err(JobRefError::Ambiguous {
                    given: given.to_owned(),
                    candidates,
                }),
                other => other,
            }
        }
        other => other,
    }
}

/// The full id of the job `given` names, taken as written.
async fn resolve_as_written(store: &dyn Store, given: &str) -> Result<String, JobRefError> {
    let lookup = |source| JobRefError::Lookup {
        given: given.to_owned(),
        source,
    };
    if given.is_empty() {
        return Err(JobRefError::Empty);
    }
    if given == LATEST {
        let newest = store.jobs(1).await.map_err(lookup)?;
        return newest
            .into_iter()
            .next()
            .map(|j| j.id)
            .ok_or(JobRefError::NoJobs);
    }
    if store.job(given).await.map_err(lookup)?.is_some() {
        return Ok(given.to_owned());
    }
    let mut ids = store
        .job_ids_with_prefix(given, CANDIDATES)
        .await
        .map_err(lookup)?;
    match ids.len() {
        0 => Err(JobRefError::NoMatch {
            given: given.to_owned(),
        }),
        1 => Ok(ids.remove(0)),
        _ => Err(JobRefError::Ambiguous {
            given: given.to_owned(),
            candidates: ids,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fixtures::job;

    async fn store_with(ids: &[(&str, i64)]) -> crate::store::SqliteStore {
        let store = crate::store::SqliteStore::open_in_memory().await.unwrap();
        for (id, offset) in ids {
            store.insert_job(&job(id, *offset), "{}").await.unwrap();
        }
        store
    }

    #[tokio::test]
    async fn full_id_unique_prefix_and_latest_resolve() {
        let store = store_with(&[("abc111", 0), ("abd222", 10), ("x_z", 20)]).await;
        assert_eq!(resolve(&store, "abc111").await.unwrap(), "abc111");
        assert_eq!(resolve(&store, "abc").await.unwrap(), "abc111");
        assert_eq!(resolve(&store, "abd").await.unwrap(), "abd222");
        assert_eq!(resolve(&store, "latest").await.unwrap(), "x_z");
    }

    #[tokio::test]
    async fn ambiguous_prefix_lists_the_candidates_newest_first() {
        let store = store_with(&[("abc111", 0), ("abd222", 10)]).await;
        let e = resolve(&store, "ab").await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "`ab` is ambiguous: it starts abd222, abc111 (give more characters)"
        );
    }

    #[tokio::test]
    async fn like_wildcards_match_only_themselves() {
        let store = store_with(&[("abc111", 0), ("x_z", 10)]).await;
        assert!(matches!(
            resolve(&store, "a%").await.unwrap_err(),
            JobRefError::NoMatch { given } if given == "a%"
        ));
        assert!(matches!(
            resolve(&store, "_").await.unwrap_err(),
            JobRefError::NoMatch { given } if given == "_"
        ));
        assert_eq!(resolve(&store, "x_").await.unwrap(), "x_z");
    }

    /// The id's hex without its `job-`, as it is copied, names the job
    /// too (whole, or a prefix of it); a prefix several ids start with is
    /// ambiguous naming what was written; one that ids start with as
    /// written is taken as written.
    #[tokio::test]
    async fn an_id_without_its_job_prefix_names_the_job() {
        let store = store_with(&[("job-0193aa11", 0), ("job-0193ab22", 10), ("0193c", 20)]).await;
        let mut named = Vec::new();
        for given in [
            "0193aa11",
            "0193aa",
            "job-0193ab",
            "0193a",
            "0193c",
            "0193d",
        ] {
            named.push(match resolve(&store, given).await {
                Ok(id) => id,
                Err(e) => e.to_string(),
            });
        }
        assert_eq!(
            named,
            [
                "job-0193aa11",
                "job-0193aa11",
                "job-0193ab22",
                "`0193a` is ambiguous: it starts job-0193ab22, job-0193aa11 (give more characters)",
                "0193c",
                "no job `0193d` (no job id is or starts with it)",
            ]
        );
    }

    #[tokio::test]
    async fn latest_without_jobs_and_unknown_ids_are_errors() {
        let store = store_with(&[]).await;
        assert!(matches!(
            resolve(&store, "latest").await.unwrap_err(),
            JobRefError::NoJobs
        ));
        assert!(matches!(
            resolve(&store, "").await.unwrap_err(),
            JobRefError::Empty
        ));
        assert!(matches!(
            resolve(&store, "zz").await.unwrap_err(),
            JobRefError::NoMatch { given } if given == "zz"
        ));
    }
}
