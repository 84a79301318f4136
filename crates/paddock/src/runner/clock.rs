//! The job's time limits, and what set them. The spec's
//! `limits.timeout_secs` (capped by the host profile's `timeout_min` at
//! admission) is the engine's own; the profile's `timeout_min` is also a
//! cap on the whole job, counted from when its host slot is held: the
//! provisioning of its workspace (a clone or fetch of its source), its
//! setup and its engine together. Provisioning past it is stopped and the
//! job fails naming it ([`ProvisioningOver`]); the setup gets what
//! provisioning left when that is less than its own timeout; the engine
//! gets what came before it left, when that is less. A timed-out job's
//! `policy` event and reason name the limit that stopped it. Publishing
//! (the push, the pull request) may go on past the cap for a grace
//! ([`publish_grace`]), then is stopped as a cancel stops it, its result
//! recorded and its bundle kept ([`PublishingOver`]); the patch before it
//! is bounded by its own steps' timeouts.

use std::time::Duration;

use paddock_protocol::EventBody;
use tokio::time::Instant;

/// What set the engine's limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Limit {
    /// The spec's `limits.timeout_secs`.
    Spec,
    /// Host profile `id`'s `timeout_min` (`min`), on an engine that
    /// started with all of it left.
    Profile { id: String, min: u64 },
    /// Host profile `id`'s `timeout_min` (`min`) on the whole job:
    /// provisioning and setup took `before_secs` of it first.
    WholeJob {
        id: String,
        min: u64,
        before_secs: u64,
    },
}

/// When the engine is stopped, and why then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Deadline {
    pub at: Instant,
    /// The engine's time, in whole seconds (as the reason says it).
    pub secs: u64,
    pub limit: Limit,
}

impl Deadline {
    /// The deadline of an engine starting at `now` with the spec's limit
    /// `engine_secs` (capped at admission), under host profile `profile`
    /// (its id and `timeout_min`, when it sets one), the job's clock
    /// having started at `began` (its host slot held; `None`: now). Less
    /// than a second before the engine counts as none.
    pub fn for_engine(
        now: Instant,
        engine_secs: u64,
        profile: Option<(&str, u64)>,
        began: Option<Instant>,
    ) -> Deadline {
        let engine = Duration::from_secs(engine_secs);
        let spec = Deadline {
            at: now + engine,
            secs: engine_secs,
            limit: Limit::Spec,
        };
        let Some((id, min)) = profile else {
            return spec;
        };
        let cap = Duration::from_secs(min.saturating_mul(60));
        let began = began
            .filter(|b| rounded(now.saturating_duration_since(*b)) > 0)
            .unwrap_or(now);
        let before = now.saturating_duration_since(began);
        let left = cap.saturating_sub(before);
        if left < engine {
            return Deadline {
                at: began + cap,
                secs: rounded(left),
                limit: Limit::WholeJob {
                    id: id.to_string(),
                    min,
                    before_secs: rounded(before),
                },
            };
        }
        if engine == cap {
            return Deadline {
                limit: Limit::Profile {
                    id: id.to_string(),
                    min,
                },
                ..spec
            };
        }
        spec
    }

    /// The `policy` event of an engine stopped at this deadline.
    pub fn event(&self) -> EventBody {
        let secs = self.secs;
        let (rule, message) = match &self.limit {
            Limit::Spec => (
                "timeout",
                format!("the job ran past its {secs} s limit and was killed"),
            ),
            Limit::Profile { id, min } => (
                "timeout_min",
                format!(
                    "the job ran past the {min} min limit of host profile `{id}` and was killed"
                ),
            ),
            Limit::WholeJob {
                id,
                min,
                before_secs,
            } => (
                "timeout_min",
                format!(
                    "the job ran past the {min} min limit of host profile `{id}`, which caps the \
                     whole job (provisioning and setup {before_secs} s, engine {secs} s), and \
                     was killed"
                ),
            ),
        };
        EventBody::Policy {
            rule: rule.to_string(),
            message,
        }
    }

    /// The reason of a job stopped at this deadline.
    pub fn reason(&self) -> String {
        let secs = self.secs;
        match &self.limit {
            Limit::Spec => format!("timed out after {secs} s (limits.timeout_secs)"),
            Limit::Profile { id, min } => format!(
                "timed out after {secs} s (the {min} min `timeout_min` of host profile `{id}`)"
            ),
            Limit::WholeJob {
                id,
                min,
                before_secs,
            } => format!(
                "timed out after {secs} s of the engine: with the {before_secs} s before it \
                 (provisioning and setup), the job reached the {min} min `timeout_min` of host \
                 profile `{id}`, which caps the whole job"
            ),
        }
    }
}

/// A job whose provisioning (its workspace: a clone or fetch of its
/// source) ran past host profile `id`'s `timeout_min` (`min`) after
/// `secs` seconds: stopped, the job failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ProvisioningOver {
    pub id: String,
    pub min: u64,
    pub secs: u64,
}

impl ProvisioningOver {
    /// The `policy` event of the stopped provisioning.
    pub fn event(&self) -> EventBody {
        let Self { id, min, secs } = self;
        EventBody::Policy {
            rule: "timeout_min".to_string(),
            message: format!(
                "the job ran past the {min} min limit of host profile `{id}`, which caps the \
                 whole job, while its workspace was provisioned ({secs} s), and was stopped"
            ),
        }
    }

    /// The reason of the failed job.
    pub fn reason(&self) -> String {
        let Self { id, min, secs } = self;
        format!(
            "provisioning the workspace (cloning or fetching the source) was still running after \
             {secs} s, when the {min} min `timeout_min` of host profile `{id}`, which caps the \
             whole job, ran out; it was stopped and the engine was not started"
        )
    }
}

/// How long publishing may go on past the whole job's cap (a tenth of
/// it, 10 s to 2 min): its result is then still recorded, its push and
/// pull request stopped (the bundle kept for `paddock publish`).
pub(super) fn publish_grace(min: u64) -> Duration {
    Duration::from_secs(min.saturating_mul(6).clamp(10, 120))
}

/// A job whose publishing ran past host profile `id`'s `timeout_min`
/// (`min`) and its grace of `grace_secs`: stopped, the job failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PublishingOver {
    pub id: String,
    pub min: u64,
    pub grace_secs: u64,
}

impl PublishingOver {
    /// The `policy` event of the stopped publishing.
    pub fn event(&self) -> EventBody {
        let Self {
            id,
            min,
            grace_secs,
        } = self;
        EventBody::Policy {
            rule: "timeout_min".to_string(),
            message: format!(
                "the job ran past the {min} min limit of host profile `{id}`, which caps the \
                 whole job, and the {grace_secs} s it leaves for publishing, and its publishing \
                 was stopped"
            ),
        }
    }

    /// What stopped the publishing, as its failure and closeout name it
    /// (`results::StopCause`: "it was stopped when …").
    pub fn cause(&self) -> String {
        let Self {
            id,
            min,
            grace_secs,
        } = self;
        format!(
            "its {grace_secs} s grace past the {min} min `timeout_min` of host profile `{id}` ran \
             out"
        )
    }

    /// The reason of the failed job, ending with why publishing failed.
    pub fn reason(&self, failure: &str) -> String {
        let Self {
            id,
            min,
            grace_secs,
        } = self;
        format!(
            "publishing was still running when the {min} min `timeout_min` of host profile \
             `{id}`, which caps the whole job, and its {grace_secs} s grace for publishing ran \
             out; it was stopped: {failure}"
        )
    }
}

/// `d` in whole seconds, to the nearest.
pub(super) fn rounded(d: Duration) -> u64 {
    (d + Duration::from_millis(500)).as_secs()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a profile the spec's limit holds from the engine's start;
    /// with one, its `timeout_min` holds for the whole job: 45 s of
    /// provisioning and setup under a 1 min cap leave the engine 15 s,
    /// named so; an engine with all of the cap left (or less than a
    /// second gone) is stopped by the profile's limit, one asking less by
    /// its own.
    #[test]
    fn the_profile_caps_setup_and_engine_together() {
        let began = Instant::now();
        let now = began + Duration::from_secs(45);
        let got = [
            Deadline::for_engine(now, 60, None, Some(began)),
            Deadline::for_engine(now, 60, Some(("box", 1)), Some(began)),
            Deadline::for_engine(
                now,
                60,
                Some(("box", 1)),
                Some(now - Duration::from_millis(400)),
            ),
            Deadline::for_engine(now, 10, Some(("box", 1)), Some(began)),
        ];
        let whole = Limit::WholeJob {
            id: "box".into(),
            min: 1,
            before_secs: 45,
        };
        let profile = Limit::Profile {
            id: "box".into(),
            min: 1,
        };
        assert_eq!(
            got.clone().map(|d| (d.at, d.secs, d.limit)),
            [
                (now + Duration::from_secs(60), 60, Limit::Spec),
                (began + Duration::from_secs(60), 15, whole),
                (now + Duration::from_secs(60), 60, profile),
                (now + Duration::from_secs(10), 10, Limit::Spec),
            ]
        );
        assert_eq!(
            got.map(|d| (d.event(), d.reason())),
            [
                (
                    EventBody::Policy {
                        rule: "timeout".into(),
                        message: "the job ran past its 60 s limit and was killed".into(),
                    },
                    "timed out after 60 s (limits.timeout_secs)".to_string(),
                ),
                (
                    EventBody::Policy {
                        rule: "timeout_min".into(),
                        message: "the job ran past the 1 min limit of host profile `box`, which \
                                  caps the whole job (provisioning and setup 45 s, engine 15 s), \
                                  and was killed"
                            .into(),
                    },
                    "timed out after 15 s of the engine: with the 45 s before it (provisioning \
                     and setup), the job reached the 1 min `timeout_min` of host profile `box`, \
                     which caps the whole job"
                        .to_string(),
                ),
                (
                    EventBody::Policy {
                        rule: "timeout_min".into(),
                        message: "the job ran past the 1 min limit of host profile `box` and was \
                                  killed"
                            .into(),
                    },
                    "timed out after 60 s (the 1 min `timeout_min` of host profile `box`)"
                        .to_string(),
                ),
                (
                    EventBody::Policy {
                        rule: "timeout".into(),
                        message: "the job ran past its 10 s limit and was killed".into(),
                    },
                    "timed out after 10 s (limits.timeout_secs)".to_string(),
                ),
            ]
        );
    }

    /// A setup that took the whole cap leaves the engine nothing: it is
    /// stopped at once.
    #[test]
    fn a_setup_that_took_the_cap_leaves_the_engine_nothing() {
        let began = Instant::now();
        let now = began + Duration::from_secs(61);
        let d = Deadline::for_engine(now, 60, Some(("box", 1)), Some(began));
        assert_eq!((d.at, d.secs), (began + Duration::from_secs(60), 0));
    }
}
