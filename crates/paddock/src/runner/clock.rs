//! The engine's time limit, and what set it. The spec's
//! `limits.timeout_secs` (capped by the host profile's `timeout_min` at
//! admission) is the engine's own; the profile's `timeout_min` is also a
//! cap on the whole job, its setup and its engine together: the engine
//! gets what the setup (and the steps between it and the engine's start)
//! left of it when that is less. A timed-out job's `policy` event and
//! reason name the limit that stopped it.

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
    /// Host profile `id`'s `timeout_min` (`min`) on the whole job: the
    /// setup took `setup_secs` of it first.
    WholeJob {
        id: String,
        min: u64,
        setup_secs: u64,
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
    /// (its id and `timeout_min`, when it sets one), the job's setup
    /// having begun at `setup_began` (`None`: it has no setup).
    pub fn for_engine(
        now: Instant,
        engine_secs: u64,
        profile: Option<(&str, u64)>,
        setup_began: Option<Instant>,
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
        let began = setup_began.unwrap_or(now);
        let setup = now.saturating_duration_since(began);
        let left = cap.saturating_sub(setup);
        if left < engine {
            return Deadline {
                at: began + cap,
                secs: rounded(left),
                limit: Limit::WholeJob {
                    id: id.to_string(),
                    min,
                    setup_secs: rounded(setup),
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
                setup_secs,
            } => (
                "timeout_min",
                format!(
                    "the job ran past the {min} min limit of host profile `{id}`, which caps its \
                     setup and its engine together (setup {setup_secs} s, engine {secs} s), and \
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
                setup_secs,
            } => format!(
                "timed out after {secs} s of the engine: with the {setup_secs} s before it \
                 (setup), the job reached the {min} min `timeout_min` of host profile `{id}`, \
                 which caps setup and engine together"
            ),
        }
    }
}

/// `d` in whole seconds, to the nearest.
fn rounded(d: Duration) -> u64 {
    (d + Duration::from_millis(500)).as_secs()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a profile the spec's limit holds from the engine's start;
    /// with one, its `timeout_min` holds for setup and engine together:
    /// a setup of 45 s under a 1 min cap leaves the engine 15 s, named so;
    /// an engine with all of the cap left is stopped by the profile's
    /// limit, one asking less by its own.
    #[test]
    fn the_profile_caps_setup_and_engine_together() {
        let began = Instant::now();
        let now = began + Duration::from_secs(45);
        let got = [
            Deadline::for_engine(now, 60, None, Some(began)),
            Deadline::for_engine(now, 60, Some(("box", 1)), Some(began)),
            Deadline::for_engine(now, 60, Some(("box", 1)), None),
            Deadline::for_engine(now, 10, Some(("box", 1)), Some(began)),
        ];
        let whole = Limit::WholeJob {
            id: "box".into(),
            min: 1,
            setup_secs: 45,
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
                                  caps its setup and its engine together (setup 45 s, engine \
                                  15 s), and was killed"
                            .into(),
                    },
                    "timed out after 15 s of the engine: with the 45 s before it (setup), the \
                     job reached the 1 min `timeout_min` of host profile `box`, which caps setup \
                     and engine together"
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
