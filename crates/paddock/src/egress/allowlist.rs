//! The destinations a phase may reach: the job's list for the setup phase
//! and the one for the agent phase, checked by host name and port (an IP
//! host only against an explicit literal of the list).

use paddock_protocol::network::parse_list;
use paddock_protocol::{Destination, EgressPhase, Host};

/// One phase's destinations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowlist {
    entries: Vec<Destination>,
}

impl Allowlist {
    pub fn new(entries: Vec<Destination>) -> Allowlist {
        Allowlist { entries }
    }

    /// A list as written in a spec (patterns and presets); the first bad
    /// entry (index, reason).
    pub fn parse(list: &[String]) -> Result<Allowlist, (usize, String)> {
        parse_list(list).map(Allowlist::new)
    }

    pub fn allows(&self, host: &Host, port: u16) -> bool {
        self.entries.iter().any(|d| d.allows(host, port))
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The lists of both phases.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PhaseLists {
    pub setup: Allowlist,
    pub agent: Allowlist,
}

impl PhaseLists {
    pub fn of(&self, phase: EgressPhase) -> &Allowlist {
        match phase {
            EgressPhase::Setup => &self.setup,
            EgressPhase::Agent => &self.agent,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn each_phase_checks_its_own_list() {
        let lists = PhaseLists {
            setup: Allowlist::parse(&["registries".into()]).unwrap(),
            agent: Allowlist::parse(&["api.github.com".into(), "10.0.0.7:8080".into()]).unwrap(),
        };
        let npm = Host::Name("registry.npmjs.org".into());
        let github = Host::Name("api.github.com".into());
        let ip = Host::Address("10.0.0.7".parse().unwrap());
        assert_eq!(
            [
                lists.of(EgressPhase::Setup).allows(&npm, 443),
                lists.of(EgressPhase::Agent).allows(&npm, 443),
                lists.of(EgressPhase::Agent).allows(&github, 443),
                lists.of(EgressPhase::Agent).allows(&github, 80),
                lists.of(EgressPhase::Agent).allows(&ip, 8080),
                lists.of(EgressPhase::Setup).allows(&ip, 8080),
            ],
            [true, false, true, false, true, false]
        );
    }
}
