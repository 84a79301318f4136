//! A refused request's answer: an HTTP response the job (and the model
//! reading its tool's output) can read, naming the rule that refused it
//! and how to ask for the destination, never a bare reset. The reason is
//! in the status line too: the answer to a `CONNECT` is all a client gets
//! of a refused HTTPS request, and clients print its status line (npm,
//! pip, Python) but never its body. After a tunnel's `200` (a ClientHello
//! refused) no answer can be written: the connection is closed.

use paddock_protocol::EgressPhase;

/// The rules of a request to an allowed destination that the proxy could
/// not reach (no address, no connection, its TLS or its answer failed):
/// no spec field asks for it, so where refusals are listed with how to ask
/// for them, these are listed apart.
pub const UNREACHED_RULES: &[&str] = &["resolve", "connect", "upstream_tls", "upstream_timeout"];

/// `items` (egress records, or what was kept of them) split by their
/// rule (`rule_of`) into those refused, which a spec field asks for, and
/// those allowed but not reached ([`UNREACHED_RULES`]), each in order:
/// the one split the closeout's lists and a failed setup's reason make.
pub fn split_unreached<T>(
    items: impl IntoIterator<Item = T>,
    rule_of: fn(&T) -> Option<&str>,
) -> (Vec<T>, Vec<T>) {
    items
        .into_iter()
        .partition(|item| !rule_of(item).is_some_and(|rule| UNREACHED_RULES.contains(&rule)))
}

/// Whether a refusal's `rule` is about the address its destination
/// resolved to (`deny_list:<range>`), not about the destination: no spec
/// field asks for such an address; only a host profile opens one,
/// `address:port` at a time (`network.open_addresses`), which is what its
/// advice says ([`InForce::opens`]) where a list refusal's names the
/// spec's field.
pub fn by_address(rule: &str) -> bool {
    rule.starts_with("deny_list:")
}

/// What bounds the job's lists, as a refused request's advice words it:
/// the host profile the job runs under and whether its `[network]`
/// section sets a maximum, or no profile at all (then no profile is
/// named, and none is said to open an address).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum InForce {
    /// The job runs under no host profile.
    #[default]
    NoProfile,
    /// A host profile without a `[network]` section: no maximum.
    Unbounded { profile: String },
    /// A host profile whose `[network]` section is the lists' maximum.
    Maximum { profile: String },
}

impl InForce {
    /// What bounds a list whose maximum is the profile's `max` (a field of
    /// its `[network]`), as advice words it after the spec's field: within
    /// that maximum, or that there is none.
    pub fn bound(&self, max: &str) -> String {
        match self {
            InForce::Maximum { profile } => {
                format!(", within host profile `{profile}`'s `{max}` (docs/egress.md)")
            }
            InForce::Unbounded { profile } => {
                format!(" (docs/egress.md; the job's host profile `{profile}` sets no maximum)")
            }
            InForce::NoProfile => {
                " (docs/egress.md; the job runs under no host profile)".to_string()
            }
        }
    }

    /// How an address refused by the deny list is opened, as the advice
    /// of a refusal [`by_address`] words it: the ranges closed to jobs,
    /// and that only the job's host profile (or a host profile, and the
    /// job runs under none) opens one.
    pub fn opens(&self) -> String {
        let how = "one `address:port` at a time (`network.open_addresses`, docs/egress.md)";
        let opens = match self {
            InForce::Maximum { profile } | InForce::Unbounded { profile } => {
                format!("only the job's host profile (`{profile}`) can open one, {how}")
            }
            InForce::NoProfile => {
                format!("only a host profile can open one, {how}, and the job runs under none")
            }
        };
        format!("Loopback, private, link-local, metadata and other special-purpose addresses and this host's own are closed to jobs; {opens}.")
    }

    /// What is in force for a job under `profile`.
    pub fn of(profile: Option<&paddock_protocol::HostProfile>) -> InForce {
        match profile {
            None => InForce::NoProfile,
            Some(p) if p.network.is_none() => InForce::Unbounded {
                profile: p.id.clone(),
            },
            Some(p) => InForce::Maximum {
                profile: p.id.clone(),
            },
        }
    }
}

/// The longest reason phrase an answer's status line carries.
pub const MAX_PHRASE: usize = 400;

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The HTTP status of the answer; `None` when none can be written.
    pub status: Option<u16>,
    /// `allowlist`, `ip_literal`, `deny_list:<range>`, `sni_mismatch`, ...
    pub rule: String,
    pub reason: String,
}

impl Refusal {
    pub fn new(status: u16, rule: impl Into<String>, reason: impl Into<String>) -> Refusal {
        Refusal {
            status: Some(status),
            rule: rule.into(),
            reason: reason.into(),
        }
    }

    /// A refusal after the tunnel opened: no answer, the connection closes.
    pub fn silent(rule: impl Into<String>, reason: impl Into<String>) -> Refusal {
        Refusal {
            status: None,
            rule: rule.into(),
            reason: reason.into(),
        }
    }

    /// The answer's bytes for `destination` (`host:port`) in `phase`,
    /// its advice worded by what is `in_force`.
    pub fn answer(
        &self,
        destination: &str,
        phase: EgressPhase,
        in_force: &InForce,
    ) -> Option<Vec<u8>> {
        let status = self.status?;
        let text = match status {
            400 => "Bad Request",
            403 => "Forbidden",
            407 => "Proxy Authentication Required",
            408 => "Request Timeout",
            431 => "Request Header Fields Too Large",
            504 => "Gateway Timeout",
            _ => "Bad Gateway",
        };
        // A timeout is not the proxy's refusal: the host took the request.
        let what = if status == 504 {
            "timed out"
        } else {
            "refused"
        };
        let body = format!(
            "paddock egress proxy: {destination} {what} in the {} phase: {}\nrule: {}\n{}\n",
            phase.as_str(),
            self.reason,
            self.rule,
            self.how_to_ask(destination, phase, in_force)
        );
        Some(
            format!(
                "HTTP/1.1 {status} {}\r\ncontent-type: text/plain; charset=utf-8\r\n\
                 content-length: {}\r\nconnection: close\r\nx-paddock-egress-rule: {}\r\n{}\r\n{body}",
                self.phrase(text, phase),
                body.len(),
                self.rule,
                if status == 407 {
                    "proxy-authenticate: Basic realm=\"paddock egress proxy\"\r\n"
                } else {
                    ""
                }
            )
            .into_bytes(),
        )
    }

    /// The status line's reason phrase: the status's own text, then why,
    /// the rule and for a destination not on the list the spec's field
    /// that would allow it; printable ASCII only (anything else is `?`),
    /// at most [`MAX_PHRASE`] bytes.
    fn phrase(&self, text: &str, phase: EgressPhase) -> String {
        let ask = match (self.rule.as_str(), phase) {
            ("allowlist" | "ip_literal", EgressPhase::Setup) => {
                "; the spec's `setup.network` must list it"
            }
            ("allowlist" | "ip_literal", EgressPhase::Agent) => {
                "; the spec's `network.allow` must list it"
            }
            _ => "",
        };
        let full = format!(
            "{text} (paddock egress proxy: {}; rule {}{ask})",
            self.reason, self.rule
        );
        let mut phrase: String = full
            .chars()
            .map(|c| {
                if c == ' ' || c.is_ascii_graphic() {
                    c
                } else {
                    '?'
                }
            })
            .collect();
        if phrase.len() > MAX_PHRASE {
            phrase.truncate(MAX_PHRASE - 4);
            phrase.push_str("...)");
        }
        phrase
    }

    fn how_to_ask(&self, destination: &str, phase: EgressPhase, in_force: &InForce) -> String {
        let (field, max) = match phase {
            EgressPhase::Setup => ("setup.network", "network.setup_allow"),
            EgressPhase::Agent => ("network.allow", "network.allow"),
        };
        match self.rule.as_str() {
            "allowlist" | "ip_literal" => {
                let bound = in_force.bound(max);
                format!(
                    "To reach it, the job's spec must list `{destination}` in `{field}`{bound}; ask whoever runs this job."
                )
            }
            r if by_address(r) => in_force.opens(),
            "proxy_auth" => "This proxy serves one job: use the proxy URL of the job's HTTPS_PROXY/HTTP_PROXY as it is (it holds the job's proxy credentials).".to_string(),
            "bad_request" => "Send `CONNECT host:port` for HTTPS, or an absolute `http://host/path` request (set HTTPS_PROXY/HTTP_PROXY).".to_string(),
            "content_encoding" => "The proxy asked the credential host for `accept-encoding: identity` so that it can scan the answer for the credential; a compressed answer is not relayed. Ask the host for an uncompressed one (docs/egress.md).".to_string(),
            "upgrade" => "A tunnel to a credential host carries HTTP/1.1 requests only: upgrades (WebSocket) are not relayed. Use plain HTTP requests to this host, or a host without a credential (docs/egress.md).".to_string(),
            "upstream_timeout" => "The destination is allowed and took the request but did not start its answer in time; the proxy closed that connection. Send the request again (docs/egress.md).".to_string(),
            _ => "The destination is allowed but could not be reached.".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_refusal_reads_as_a_whole_http_answer() {
        let r = Refusal::new(
            403,
            "allowlist",
            "evil.example:443 is not on the agent phase's list",
        );
        let body = "paddock egress proxy: evil.example:443 refused in the agent phase: evil.example:443 is not on the agent phase's list\nrule: allowlist\nTo reach it, the job's spec must list `evil.example:443` in `network.allow`, within host profile `ci-box`'s `network.allow` (docs/egress.md); ask whoever runs this job.\n";
        let in_force = InForce::Maximum {
            profile: "ci-box".into(),
        };
        assert_eq!(
            String::from_utf8(
                r.answer("evil.example:443", EgressPhase::Agent, &in_force)
                    .unwrap()
            )
            .unwrap(),
            format!(
                "HTTP/1.1 403 Forbidden (paddock egress proxy: evil.example:443 is not on the agent phase's list; rule allowlist; the spec's `network.allow` must list it)\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\nx-paddock-egress-rule: allowlist\r\n\r\n{body}",
                body.len()
            )
        );
        assert_eq!(
            Refusal::silent("sni_mismatch", "x").answer("a:1", EgressPhase::Setup, &in_force),
            None
        );
    }

    /// The split both lists use: refused (no rule counts as refused) and
    /// unreached, each in order.
    #[test]
    fn refusals_split_from_destinations_not_reached() {
        let rules = [
            Some("allowlist"),
            Some("connect"),
            None,
            Some("resolve"),
            Some("deny_list:loopback"),
        ];
        assert_eq!(
            split_unreached(rules, |r| *r),
            (
                vec![Some("allowlist"), None, Some("deny_list:loopback")],
                vec![Some("connect"), Some("resolve")]
            )
        );
    }

    /// The advice names what bounds the job's lists: its host profile's
    /// maximum, its profile setting none, or no profile at all (where it
    /// said "within the host profile's" and "only the host profile opens
    /// one" for a job under none).
    #[test]
    fn the_advice_names_what_is_in_force() {
        let advice = |r: &Refusal, phase, in_force: &InForce| {
            let answer = String::from_utf8(r.answer("a.example:443", phase, in_force).unwrap());
            answer.unwrap().lines().last().unwrap().to_string()
        };
        let listed = Refusal::new(403, "allowlist", "not on the list");
        let denied = Refusal::new(403, "deny_list:loopback", "loopback");
        let profile =
            |text: &str| paddock_protocol::HostProfile::from_toml(text, "p.toml").unwrap();
        let forces = [
            InForce::of(Some(&profile("id = \"ci-box\"\n[network]\n"))),
            InForce::of(Some(&profile("id = \"wide\"\n"))),
            InForce::of(None),
        ];
        assert_eq!(
            forces
                .iter()
                .map(|f| [
                    advice(&listed, EgressPhase::Setup, f),
                    advice(&denied, EgressPhase::Agent, f)
                ])
                .collect::<Vec<_>>(),
            vec![
                [
                    "To reach it, the job's spec must list `a.example:443` in `setup.network`, within host profile `ci-box`'s `network.setup_allow` (docs/egress.md); ask whoever runs this job.".to_string(),
                    "Loopback, private, link-local, metadata and other special-purpose addresses and this host's own are closed to jobs; only the job's host profile (`ci-box`) can open one, one `address:port` at a time (`network.open_addresses`, docs/egress.md).".to_string(),
                ],
                [
                    "To reach it, the job's spec must list `a.example:443` in `setup.network` (docs/egress.md; the job's host profile `wide` sets no maximum); ask whoever runs this job.".to_string(),
                    "Loopback, private, link-local, metadata and other special-purpose addresses and this host's own are closed to jobs; only the job's host profile (`wide`) can open one, one `address:port` at a time (`network.open_addresses`, docs/egress.md).".to_string(),
                ],
                [
                    "To reach it, the job's spec must list `a.example:443` in `setup.network` (docs/egress.md; the job runs under no host profile); ask whoever runs this job.".to_string(),
                    "Loopback, private, link-local, metadata and other special-purpose addresses and this host's own are closed to jobs; only a host profile can open one, one `address:port` at a time (`network.open_addresses`, docs/egress.md), and the job runs under none.".to_string(),
                ],
            ]
        );
    }

    /// The status line carries the reason, printable and bounded: what
    /// a client that prints only the status line shows.
    #[test]
    fn the_status_line_says_why_printable_and_bounded() {
        let status_line = |r: &Refusal, phase| {
            let answer =
                String::from_utf8(r.answer("x:1", phase, &InForce::NoProfile).unwrap()).unwrap();
            answer.lines().next().unwrap().to_string()
        };
        let setup = Refusal::new(
            403,
            "allowlist",
            "a.example:443 is not on the setup phase's list",
        );
        let hostile = Refusal::new(400, "bad_request", "`\u{1b}[31m\r\nx: y` caf\u{e9}");
        let long = Refusal::new(502, "connect", "z".repeat(1000));
        let long_line = status_line(&long, EgressPhase::Agent);
        assert_eq!(
            (
                status_line(&setup, EgressPhase::Setup),
                status_line(&hostile, EgressPhase::Agent),
                long_line.len(),
                long_line.ends_with("zzz...)"),
            ),
            (
                "HTTP/1.1 403 Forbidden (paddock egress proxy: a.example:443 is not on the setup phase's list; rule allowlist; the spec's `setup.network` must list it)".to_string(),
                "HTTP/1.1 400 Bad Request (paddock egress proxy: `?[31m??x: y` caf?; rule bad_request)".to_string(),
                "HTTP/1.1 502 ".len() + MAX_PHRASE,
                true
            )
        );
    }
}
