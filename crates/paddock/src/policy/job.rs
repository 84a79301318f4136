//! One job's policy, from admission to the denial events: the resolved
//! profile, what admission decided (timeout, accepted gaps), the files the
//! engine reads (the profile for the hook, Claude's settings, Codex's
//! rules) and the `policy` events for denials found afterwards.

use std::path::{Path, PathBuf};

use paddock_protocol::{EngineKind, EventBody, HostProfile, JobSpec};

use super::admission::{admit, Admission, Refusal};
use super::backstop::Backstop;
use super::denials::{self, DenialRecord, RecordTail};
use super::matcher::Matcher;
use super::profile::{resolve, ProfileSource, ResolveError};
use crate::engines::denial::{EngineDenial, ReportedIn};
use crate::engines::EnginePolicy;
use crate::store::Store;

#[derive(Debug, thiserror::Error)]
pub enum JobPolicyError {
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    #[error("job refused before start: {0}")]
    Refused(#[from] Refusal),
    #[error("cannot write the job's host profile to {path}: {source}")]
    WriteProfile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("host profile `{profile}`: cannot build the hook's command line: {message}")]
    HookCommand { profile: String, message: String },
    #[error("host profile `{profile}`: rule `deny_commands` needs the `paddock` executable for the engine hook, and its path is unknown")]
    NoHookExecutable { profile: String },
}

/// The policy of one job.
#[derive(Debug, Clone)]
pub struct JobPolicy {
    pub profile: HostProfile,
    pub source: ProfileSource,
    pub admission: Admission,
    pub matcher: Matcher,
}

/// Where the hook records denials, inside the job's `meta/`.
pub fn record_path(meta: &Path) -> PathBuf {
    meta.join("denials.jsonl")
}

impl JobPolicy {
    /// Resolves `name` and admits the job under it (fail closed).
    pub async fn admit(
        name: &str,
        spec: &JobSpec,
        store: &dyn Store,
        rung_gaps: impl FnOnce(&HostProfile) -> Vec<(&'static str, String)>,
    ) -> Result<JobPolicy, JobPolicyError> {
        let (profile, source) = resolve(name, store).await?;
        let gaps = rung_gaps(&profile);
        let admission = admit(&profile, spec, gaps).map_err(|mut refusal| {
            if let ProfileSource::File { path, .. } = &source {
                refusal.profile_file = Some(path.as_str().into());
            }
            refusal
        })?;
        let matcher = Matcher::new(&profile.deny_commands);
        Ok(JobPolicy {
            profile,
            source,
            admission,
            matcher,
        })
    }

    /// What the job's profile and spec spell the deprecated way: one
    /// warning each (camelCase profile keys, camelCase rule names in
    /// `policy.accept_degraded`).
    pub fn deprecations(&self, spec: &JobSpec) -> Vec<String> {
        let keys = match &self.source {
            ProfileSource::File { deprecated, .. } => deprecated.as_slice(),
            ProfileSource::Store | ProfileSource::Preset => &[],
        };
        let rules = spec
            .policy
            .deprecated_rules()
            .into_iter()
            .map(|(old, new)| {
                format!("policy.accept_degraded: rule `{old}` is deprecated, spell it `{new}`")
            });
        keys.iter().map(ToString::to_string).chain(rules).collect()
    }

    /// Layer 1: the profile as the generated context takes it.
    pub fn context(&self) -> crate::context::PolicyContext {
        super::advisory::context(&self.profile)
    }

    /// The `policy` events for rules accepted as advisory only.
    pub fn degraded_events(&self) -> Vec<EventBody> {
        self.admission
            .degraded
            .iter()
            .map(|(rule, reason)| EventBody::Policy {
                rule: rule.clone(),
                message: format!(
                    "host profile `{}`: `{rule}` {reason}; accepted as degraded by the spec",
                    self.profile.id
                ),
            })
            .collect()
    }

    /// Writes the profile for the hook into `meta` and describes layer 2
    /// for the engine adapter.
    pub fn engine_policy(
        &self,
        engine: EngineKind,
        paddock_exe: Option<&Path>,
        meta: &Path,
    ) -> Result<Option<EnginePolicy>, JobPolicyError> {
        if self.profile.deny_commands.is_empty() {
            return Ok(None);
        }
        let profile_path = meta.join("profile.json");
        let body = serde_json::to_string_pretty(&self.profile).unwrap_or_default();
        crate::own_file::write(&profile_path, body.as_bytes()).map_err(|source| {
            JobPolicyError::WriteProfile {
                path: profile_path.clone(),
                source,
            }
        })?;
        let hook_command = match (engine, paddock_exe) {
            (_, None) => {
                return Err(JobPolicyError::NoHookExecutable {
                    profile: self.profile.id.clone(),
                })
            }
            (_, Some(exe)) => {
                let words = [
                    exe.display().to_string(),
                    "hook".into(),
                    "pre-tool-use".into(),
                    "--profile".into(),
                    profile_path.display().to_string(),
                    "--record".into(),
                    record_path(meta).display().to_string(),
                ];
                let line = shlex::try_join(words.iter().map(String::as_str)).map_err(|e| {
                    JobPolicyError::HookCommand {
                        profile: self.profile.id.clone(),
                        message: e.to_string(),
                    }
                })?;
                // Whatever goes wrong in the hook (a missing binary, a crash)
                // blocks the call: both engines treat exit 2 as a denial.
                format!("{line} || exit 2")
            }
        };
        Ok(Some(EnginePolicy {
            profile_id: self.profile.id.clone(),
            // The rules the matcher keeps (an empty one is none).
            deny_commands: self
                .matcher
                .rules()
                .iter()
                .map(|r| r.text.clone())
                .collect(),
            hook_command,
            hook_timeout_secs: crate::engines::hook_timeout_secs(self.admission.timeout_secs),
        }))
    }

    /// The backstop behind the hook for a run of `engine`, judged by
    /// `exe` (`backstop`): none when the profile denies no command.
    pub fn backstop(&self, engine: EngineKind, exe: &Path) -> Option<Backstop> {
        if self.matcher.rules().is_empty() {
            return None;
        }
        Some(Backstop::new(&self.profile, engine, exe.to_path_buf()))
    }

    /// A tail on the hook's record file (both engines).
    pub fn tail(&self, meta: &Path) -> RecordTail {
        RecordTail::new(record_path(meta))
    }

    /// The denials not yet reported: new hook records, and those of
    /// `found` (what the engine reported, read by its adapter from a line
    /// of its stream or, once it has exited, from the files it left) made
    /// under the profile, each call once (a call the hook recorded is
    /// the hook's).
    pub fn new_denials(
        &self,
        tail: &mut RecordTail,
        found: Vec<EngineDenial>,
    ) -> (Vec<DenialRecord>, Vec<DenialRecord>) {
        let hooks = tail.poll();
        let records = found
            .into_iter()
            .filter_map(|d| denials::from_engine(d, &self.matcher))
            .collect();
        (hooks, tail.unseen(records))
    }

    /// The `policy` event for one denial, read `from` where the job could
    /// write it (the hook's record, the engine's output or files): it
    /// says whose report it is ([`ReportedIn::policy_event`]), never
    /// worded as what the host saw.
    pub fn denial_event(&self, record: &DenialRecord, from: ReportedIn) -> EventBody {
        from.policy_event(
            record.rule.clone(),
            &format!(
                "denied `{}` (host profile `{}`, deny_commands)",
                record.command, self.profile.id
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn policy() -> JobPolicy {
        let profile =
            HostProfile::from_json(r#"{"id":"box","deny_commands":["make all"]}"#, "t").unwrap();
        JobPolicy {
            matcher: Matcher::new(&profile.deny_commands),
            profile,
            source: ProfileSource::Preset,
            admission: Admission {
                timeout_secs: 60,
                setup_timeout_secs: 600,
                max_disk_bytes: 1 << 30,
                max_records: 100_000,
                degraded: vec![],
            },
        }
    }

    /// A denial's event says whose report it is, from where it was read
    /// (the caller must say: the type has no other way), before the
    /// command the job wrote; never as what the host saw.
    #[test]
    fn a_denial_event_says_whose_report_it_is() {
        let record = DenialRecord {
            rule: "make all".into(),
            command: "make all `host said ok`".into(),
            call_id: None,
        };
        assert_eq!(
            [ReportedIn::Record, ReportedIn::Output, ReportedIn::Files]
                .map(|from| policy().denial_event(&record, from)),
            [
                "the hook's record file, which the job could write, reports:",
                "the engine's output, which the job could write, reports:",
                "the engine's session files, which the job could write, report:",
            ]
            .map(|words| EventBody::Policy {
                rule: "make all".into(),
                message: format!(
                    "{words} denied `make all `host said ok`` (host profile `box`, deny_commands)"
                ),
            })
        );
    }

    #[test]
    fn hook_command_fails_closed() {
        let policy = policy();
        let meta = tempfile::tempdir().unwrap();
        let got = policy
            .engine_policy(
                EngineKind::Codex,
                Some(Path::new("/opt/pad dock/paddock")),
                meta.path(),
            )
            .unwrap()
            .unwrap();
        let m = meta.path().display();
        assert_eq!(
            got,
            EnginePolicy {
                profile_id: "box".into(),
                deny_commands: vec!["make all".into()],
                hook_command: format!("'/opt/pad dock/paddock' hook pre-tool-use --profile {m}/profile.json --record {m}/denials.jsonl || exit 2"),
                // The engine's 60 s and a minute: the hook outlasts it.
                hook_timeout_secs: 120,
            }
        );
        // Without the executable there is no hook, so no job.
        assert!(matches!(
            policy.engine_policy(EngineKind::Claude, None, meta.path()),
            Err(JobPolicyError::NoHookExecutable { .. })
        ));
    }
}
