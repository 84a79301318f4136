//! Admission: everything that can be checked before a job exists. The
//! provider key and the cloud credentials, the model's price and
//! allowlist, the scenario, the templates, the isolation rung (`auto`
//! resolved on this host) and the host profile (admitted fail closed, its
//! timeout cap applied). The result is an [`Admitted`] job with its id
//! minted, which a queue can hold before it runs. `paddock context` goes
//! through the same [`shape`] step, so it renders what a run would.

use std::sync::Arc;

use paddock_protocol::{Isolation, JobSpec, KeyRef, ProviderKind};
use time::OffsetDateTime;

use super::error::AdmitError;
use crate::broker::{self, PriceTable, Secret};
use crate::context::Prepared;
use crate::policy::JobPolicy;
use crate::rung::{Rung, Rungs};
#[cfg(feature = "scripted")]
use crate::scripted::Scenario;
use crate::secret::SecretKind;
use crate::session::{Continuation, Prior};
use crate::store::Store;
#[cfg(not(feature = "scripted"))]
use std::convert::Infallible as Scenario;

/// A spec as a job runs it, shared by `run` and `context`.
#[derive(Debug)]
pub struct Shaped {
    /// The spec with its rung resolved and its timeout capped by the host
    /// profile.
    pub spec: JobSpec,
    /// Its templates and skills, loaded and checked.
    pub prepared: Prepared,
    /// The rung the job runs on.
    pub rung: Arc<dyn Rung>,
    /// Why `auto` is not the sandbox, when it fell back.
    pub fallback: Option<String>,
    /// The host profile, admitted.
    pub policy: Option<JobPolicy>,
    /// The `process` rung, for an `auto` job on the `sandbox` rung: where
    /// it moves when its sandbox cannot be set up at its first launch and
    /// a fresh probe says none starts on this host
    /// (`runner/rung_fallback.rs`).
    pub fallback_rung: Option<Arc<dyn Rung>>,
}

/// A job admitted to run: what it runs with, and its id.
pub struct Admitted {
    /// The job's id, minted at admission.
    pub id: String,
    /// When the job was admitted (its record's `created_at`).
    pub submitted: OffsetDateTime,
    /// Keep the workspace after the job (for debugging).
    pub keep: bool,
    /// Where the spec came from (its file, `<stdin>`), set by the caller
    /// that read it: a refusal after the job exists names it, as the
    /// caller's own admission errors do (`AdmitError::in_spec_file`): the
    /// host profile's refusal of an `auto` job moved to the `process`
    /// rung (`rung_fallback.rs`). `None`: a server's submitted spec.
    pub spec_file: Option<std::path::PathBuf>,
    pub(super) shaped: Shaped,
    /// The spec as submitted, stored with the job.
    pub(super) spec_json: String,
    /// The resolved key, redacted from everything the job writes.
    pub(super) key: Option<Secret>,
    /// The provider and its credentials.
    pub(super) provider: broker::Provider,
    pub(super) scenario: Option<Arc<Scenario>>,
    /// The prior attempt it follows and whether its engine session is
    /// resumed ([`Admitted::follow`]).
    pub(super) continuation: Option<Continuation>,
}

impl Admitted {
    /// The spec as the job runs it.
    pub fn spec(&self) -> &JobSpec {
        &self.shaped.spec
    }

    /// The CPU each of Paddock's gits on the job's content may use: its
    /// host profile's `git_cpu_secs`, else the default
    /// (`host_git::job_git_cpu`).
    pub fn git_cpu(&self) -> std::time::Duration {
        crate::workspace::host_git::job_git_cpu(self.shaped.policy.as_ref().map(|p| &p.profile))
    }

    /// Makes the job the next attempt after `prior`: it resumes the prior
    /// engine session when the engine, model and rung are the same, else
    /// it forks a new one; either way it starts on the prior attempt's
    /// branch (the pull request still asking to merge into the spec's
    /// base: the review is about that tree), but when the prior pull
    /// request was merged (its work is in the base, where the attempt
    /// starts). `base`, when given, is the branch its pull request asks
    /// to merge into where the spec leaves that to `HEAD`
    /// (`Runner::prior_base`). The decision.
    pub fn follow(&mut self, prior: Prior, base: Option<String>) -> &Continuation {
        let spec = &mut self.shaped.spec;
        let can_resume = crate::engines::adapter(spec.engine.kind)
            .capabilities()
            .resume;
        let now = (
            spec.engine.kind.as_str(),
            spec.engine.model.as_str(),
            spec.isolation.as_str(),
        );
        let continuation = Continuation::decide(prior, now, can_resume);
        if let Prior {
            branch: Some(branch),
            ended: None,
            ..
        } = continuation.prior()
        {
            if spec.results.base_branch.is_none() {
                let base = base.unwrap_or_else(|| crate::results::base_branch(spec));
                spec.results.base_branch = Some(base);
            }
            spec.repository.base_ref = branch.clone();
        }
        self.continuation.insert(continuation)
    }
}

impl Admitted {
    /// The prior job it follows, as a queue stores it with the job
    /// (`store::Follows`): none unless [`Admitted::follow`] made it a next
    /// attempt.
    pub fn follows(&self) -> Option<crate::store::Follows> {
        self.continuation.as_ref().map(|c| {
            let prior = c.prior();
            crate::store::Follows {
                job: prior.job_id.clone(),
                ended: prior.ended.clone(),
                closed: prior.closed.clone(),
            }
        })
    }

    /// How it continues the prior attempt, when it follows one.
    pub fn continuation(&self) -> Option<&Continuation> {
        self.continuation.as_ref()
    }
}

impl std::fmt::Debug for Admitted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admitted")
            .field("id", &self.id)
            .field("spec", &self.shaped.spec)
            .finish_non_exhaustive()
    }
}

/// Refuses `spec` unless it runs under `host`, the profile every job of
/// this host must run under (the config file's `host_profile`), when there
/// is one: a spec naming another profile, or none, would choose its own
/// limits (its network maximum among them) instead of the host's.
pub fn host_profile(spec: &JobSpec, host: Option<&str>) -> Result<(), AdmitError> {
    match (host, spec.policy.profile.as_deref()) {
        (None, _) => Ok(()),
        (Some(host), Some(named)) if named == host => Ok(()),
        (Some(host), named) => Err(AdmitError::NotHostProfile {
            named: named.map(str::to_string),
            host: host.to_string(),
        }),
    }
}

/// Admits `spec` against `prices`, `store` (its host profiles) and the
/// `rungs` it may run on.
pub async fn admit(
    spec: &JobSpec,
    prices: &PriceTable,
    store: &dyn Store,
    rungs: &Rungs,
) -> Result<Admitted, AdmitError> {
    let key = match (spec.upstream.provider, &spec.upstream.key) {
        (ProviderKind::Scripted, _) | (_, None) => None,
        (_, Some(reference)) => Some(Secret::resolve(SecretKind::ProviderKey, reference).map_err(
            |error| AdmitError::Secret {
                field: "upstream.key",
                error,
                publish: false,
            },
        )?),
    };
    // The forge's and the push's credentials are used only when the job
    // publishes, after its engine ran and its model calls were paid for:
    // one that does not resolve (a variable not exported, a file not
    // there) refuses the job now, as the provider key does.
    result_credentials(spec)?;
    // The provider and its credentials: cloud credentials found (and,
    // without a key, a first token fetched) before the job exists.
    let provider = broker::Provider::from_spec(&spec.upstream, key.clone()).await?;
    priced(spec, prices)?;
    allowed(spec)?;
    let scenario = scenario(spec)?;
    let prepared = Prepared::load(spec).map_err(|e| AdmitError::LoadTemplates(e.to_string()))?;
    let spec_json =
        serde_json::to_string(spec).map_err(|e| AdmitError::SerializeSpec(e.to_string()))?;
    let shaped = shape_prepared(spec, prepared, Some(store), rungs).await?;
    Ok(Admitted {
        id: crate::job_ref::new_id(),
        submitted: OffsetDateTime::now_utc(),
        keep: false,
        spec_file: None,
        shaped,
        spec_json,
        key,
        provider,
        scenario,
        continuation: None,
    })
}

/// Refuses what is wrong with `spec` wherever it runs, checked without
/// reading anything of the host's: a provider that needs a key named
/// with none, a model the price table (`prices`: a fleet meters with one
/// table) has no price for and the spec does not run unpriced (a model
/// written wrong, most often), a model outside the spec's own
/// allowlist. A server asks it of a submitted spec before it looks at
/// what the spec names on its host (`server::queue`): what is the host's
/// is left to the server that claims the job, what is the spec's is
/// refused at once. [`admit`] makes each check in its place.
pub fn spec_own(spec: &JobSpec, prices: &PriceTable) -> Result<(), AdmitError> {
    use crate::broker::provider::ProviderError;
    let needs_key = broker::Provider::key_needed(spec.upstream.provider);
    if let (Some(provider), None) = (needs_key, &spec.upstream.key) {
        return Err(AdmitError::Provider(ProviderError::NoKey { provider }));
    }
    priced(spec, prices)?;
    allowed(spec)
}

/// Refuses `spec`'s model when `prices` has no price for it and the
/// spec does not run it unpriced.
fn priced(spec: &JobSpec, prices: &PriceTable) -> Result<(), AdmitError> {
    if prices.price(&spec.engine.model).is_none() && !spec.upstream.allow_unpriced {
        return Err(AdmitError::Unpriced {
            model: spec.engine.model.clone(),
            table: prices.version.to_string(),
        });
    }
    Ok(())
}

/// Refuses `spec`'s model when its own allowlist (`engine.allowed_models`)
/// does not allow it.
fn allowed(spec: &JobSpec) -> Result<(), AdmitError> {
    let allowlist = broker::ModelAllowlist::any().with("job", &spec.engine.allowed_models);
    allowlist
        .check(&spec.engine.model)
        .map_err(|list| AdmitError::ModelNotAllowed {
            model: spec.engine.model.clone(),
            list: list.to_string(),
        })
}

/// Resolves each credential the spec's `[results]` names (as publishing
/// reads it); the error names the field and says what is wrong, never a
/// value.
fn result_credentials(spec: &JobSpec) -> Result<(), AdmitError> {
    for (field, kind, reference, multiline) in result_secrets(spec) {
        let resolved = if multiline {
            Secret::resolve_multiline(kind, reference)
        } else {
            Secret::resolve(kind, reference)
        };
        resolved.map_err(|error| AdmitError::Secret {
            field,
            error,
            publish: true,
        })?;
    }
    Ok(())
}

/// The credentials the spec's `[results]` names, each with its field, its
/// kind and whether it is read as several lines (a PEM key).
pub(super) fn result_secrets(spec: &JobSpec) -> Vec<(&'static str, SecretKind, &KeyRef, bool)> {
    let results = &spec.results;
    let github = results.github.as_ref();
    let push = results.push.as_ref();
    let named = [
        (
            "results.github.token",
            SecretKind::GitHubToken,
            github.and_then(|g| g.token.as_ref()),
            false,
        ),
        (
            "results.github.app.private_key",
            SecretKind::GitHubAppKey,
            github.and_then(|g| g.app.as_ref()).map(|a| &a.private_key),
            true,
        ),
        (
            "results.gitlab.token",
            SecretKind::GitLabToken,
            results.gitlab.as_ref().map(|g| &g.token),
            false,
        ),
        (
            "results.push.token",
            SecretKind::PushToken,
            push.and_then(|p| p.token.as_ref()),
            false,
        ),
        (
            "results.push.ssh_key",
            SecretKind::PushSshKey,
            push.and_then(|p| p.ssh_key.as_ref()),
            true,
        ),
    ];
    named
        .into_iter()
        .filter_map(|(field, kind, reference, multiline)| {
            reference.map(|r| (field, kind, r, multiline))
        })
        .collect()
}

/// The spec as a job would run it (templates, rung, host profile), without
/// its credentials: what `paddock context` renders. `store` holds the host
/// profiles (needed only when the spec names one).
pub async fn shape(
    spec: &JobSpec,
    store: Option<&dyn Store>,
    rungs: &Rungs,
) -> Result<Shaped, AdmitError> {
    let prepared = Prepared::load(spec).map_err(|e| AdmitError::LoadTemplates(e.to_string()))?;
    shape_prepared(spec, prepared, store, rungs).await
}

async fn shape_prepared(
    spec: &JobSpec,
    prepared: Prepared,
    store: Option<&dyn Store>,
    rungs: &Rungs,
) -> Result<Shaped, AdmitError> {
    // The rung: `auto` becomes `sandbox` where one starts, else `process`;
    // an explicit `sandbox` that cannot start refuses the job.
    let (rung, resolved) = rungs.pick(spec.isolation).await?;
    let fallback_rung = (spec.isolation == Isolation::Auto
        && resolved.isolation == Isolation::Sandbox)
        .then(|| rungs.process.clone());
    let mut spec = spec.clone();
    spec.isolation = resolved.isolation;
    // The host profile: resolved and admitted before the job exists (fail
    // closed); its timeout, disk and record caps apply. The rules the
    // rung cannot enforce, kept to tell a refusal for one of them.
    let mut rung_gaps: Vec<&'static str> = Vec::new();
    let policy = match (&spec.policy.profile, store) {
        (Some(name), Some(store)) => Some(
            JobPolicy::admit(name, &spec, store, |p| {
                let gaps = rung.gaps(p);
                rung_gaps = gaps.iter().map(|(rule, _)| *rule).collect();
                gaps
            })
            .await
            .map_err(|e| match e {
                crate::policy::JobPolicyError::Refused(r) => {
                    refused(r, resolved.fallback.as_deref(), &rung_gaps)
                }
                e => AdmitError::HostProfile(e.to_string()),
            })?,
        ),
        _ => None,
    };
    if let Some(p) = &policy {
        capped_by(&mut spec, p);
    }
    Ok(Shaped {
        spec,
        prepared,
        rung,
        fallback: resolved.fallback,
        policy,
        fallback_rung,
    })
}

/// `spec`'s timeouts, disk and record limits as the admitted host profile
/// caps them.
pub(super) fn capped_by(spec: &mut JobSpec, policy: &JobPolicy) {
    spec.limits.timeout_secs = policy.admission.timeout_secs;
    spec.setup.timeout_secs = policy.admission.setup_timeout_secs;
    spec.limits.max_disk_bytes = policy.admission.max_disk_bytes;
    spec.limits.max_records = policy.admission.max_records;
}

/// The host profile's refusal of a job, saying why the job is on the
/// rung that cannot enforce the rule when `isolation = "auto"` fell back
/// to it (`fallback`): the spec did not ask for that rung. A refusal for
/// one of that rung's `gaps` is marked `on_fallback`: a host whose
/// sandbox starts runs the job there, where the rule is enforced.
pub(super) fn refused(
    mut refusal: crate::policy::Refusal,
    fallback: Option<&str>,
    gaps: &[&str],
) -> AdmitError {
    if let Some(why) = fallback {
        refusal.reason = format!("{} ({why})", refusal.reason);
        refusal.on_fallback = gaps.contains(&refusal.rule.as_str());
    }
    AdmitError::PolicyRefused(refusal)
}

#[cfg(feature = "scripted")]
fn scenario(spec: &JobSpec) -> Result<Option<Arc<Scenario>>, AdmitError> {
    match (&spec.upstream.provider, &spec.upstream.scenario) {
        (ProviderKind::Scripted, Some(path)) => Ok(Some(Arc::new(
            // Named by the spec's field too: the file is the spec's
            // choice, and a missing one is most often a path written wrong.
            Scenario::load(path)
                .map_err(|e| AdmitError::LoadScenario(format!("upstream.scenario: {e}")))?,
        ))),
        _ => Ok(None),
    }
}

#[cfg(not(feature = "scripted"))]
fn scenario(spec: &JobSpec) -> Result<Option<Arc<Scenario>>, AdmitError> {
    match spec.upstream.provider {
        ProviderKind::Scripted => Err(AdmitError::ScriptedNotBuilt),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naming(profile: Option<&str>) -> JobSpec {
        let text = "[ticket]\nid = \"T-1\"\ntitle = \"t\"\nproject = \"p\"\ndescription = \"d\"\n\
            [repository]\npath = \"/r\"\nbase_ref = \"main\"\n\
            [engine]\nkind = \"codex\"\nmodel = \"gpt-5\"\n\
            [upstream]\nprovider = \"scripted\"\nscenario = \"s.toml\"\n";
        let mut spec = JobSpec::from_toml(text, std::path::Path::new("job.toml")).unwrap();
        spec.policy.profile = profile.map(str::to_string);
        spec
    }

    /// A refusal on the rung `auto` fell back to says why the job is
    /// there; one on the rung the spec asked for is as admission gave it.
    #[test]
    fn a_refusal_on_a_fallen_back_rung_says_why() {
        let refusal = crate::policy::Refusal {
            profile: "ci-box".into(),
            profile_file: None,
            rule: "network".into(),
            reason: "cannot be enforced on the `process` rung".into(),
            named: None,
            on_fallback: false,
        };
        let fallback = "isolation auto: running on the `process` rung (unconfined) because \
                        this host cannot start Paddock's sandbox: Landlock: not supported";
        assert_eq!(
            [
                refused(refusal.clone(), Some(fallback), &[]).to_string(),
                refused(refusal, None, &[]).to_string(),
            ],
            [
                format!(
                    "job refused before start: host profile `ci-box`: rule `network` cannot be \
                     enforced on the `process` rung ({fallback})"
                ),
                "job refused before start: host profile `ci-box`: rule `network` cannot be \
                 enforced on the `process` rung"
                    .to_string(),
            ]
        );
    }

    /// Without a host profile any spec passes; with one, only a spec
    /// naming it, and the refusal names what the spec named and the host's.
    #[test]
    fn only_the_hosts_profile_passes_when_the_host_has_one() {
        let got = [
            host_profile(&naming(Some("a")), None).map_err(|e| e.to_string()),
            host_profile(&naming(None), None).map_err(|e| e.to_string()),
            host_profile(&naming(Some("ci")), Some("ci")).map_err(|e| e.to_string()),
            host_profile(&naming(Some("wide")), Some("ci")).map_err(|e| e.to_string()),
            host_profile(&naming(None), Some("ci")).map_err(|e| e.to_string()),
        ];
        let refused = |named: &str| {
            Err(format!(
                "policy.profile {named}: this host runs every job under host profile `ci` (host_profile in the config file); a job cannot choose another"
            ))
        };
        assert_eq!(
            got,
            [
                Ok(()),
                Ok(()),
                Ok(()),
                refused("`wide` is not the host's"),
                refused("is not set"),
            ]
        );
    }
}
