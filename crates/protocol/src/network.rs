//! Network destinations a job may reach through its broker's egress proxy:
//! the spec's `[network]` (the agent phase) and `[setup]` (the setup phase:
//! commands, their destinations, their timeout), the host profile's
//! `[network]` maximum, and the destination pattern all of them are written
//! in (`host:port`, `*.suffix:port`, the port 443 unless given). Parsing and
//! validation only; the proxy that enforces them is `paddock::egress`, the
//! format is documented in `docs/egress.md`.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Serialize};

/// The port of a pattern written without one.
pub const DEFAULT_PORT: u16 = 443;

/// `setup.network`'s name for no destination at all (any case).
pub const PRESET_NONE: &str = "none";

/// The presets a destination list may name instead of a pattern (any
/// case, like host names).
pub const PRESETS: &[(&str, &[&str])] = &[(
    "registries",
    &[
        // npm
        "registry.npmjs.org",
        "registry.yarnpkg.com",
        // PyPI
        "pypi.org",
        "files.pythonhosted.org",
        // crates.io
        "index.crates.io",
        "static.crates.io",
        "crates.io",
        // Go
        "proxy.golang.org",
        "sum.golang.org",
        // Debian
        "deb.debian.org",
        "security.debian.org",
    ],
)];

/// The one single-label name a destination may be (a loopback stand-in
/// named as clients name it, opened by the host profile).
const LOCALHOST: &str = "localhost";

/// The presets' names, as an error lists them (`` `registries` ``).
fn preset_names() -> String {
    PRESETS
        .iter()
        .map(|(name, _)| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A host name (or IP literal) pattern: `name`, or `*.suffix` for every
/// name strictly below `suffix`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HostPattern {
    /// Exactly this name (lowercase, no trailing dot).
    Exact(String),
    /// Every name ending in `.suffix` (not `suffix` itself).
    Suffix(String),
    /// Exactly this address; only an explicit literal allows an IP host.
    Address(IpAddr),
}

/// One allowed destination: a host pattern and a port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Destination {
    pub host: HostPattern,
    pub port: u16,
}

impl Destination {
    /// Parses `host`, `host:port`, `*.suffix[:port]`, `1.2.3.4[:port]` or
    /// `[::1][:port]`; the reason when it is none of them.
    pub fn parse(text: &str) -> Result<Destination, String> {
        let t = text.trim();
        if t.is_empty() {
            return Err(format!(
                "`{text}`: an empty entry is no destination: remove it (an empty list allows nothing)"
            ));
        }
        if let Some((scheme, rest)) = t.split_once("://") {
            let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
            let suggested = match (
                scheme.to_ascii_lowercase().as_str(),
                authority.contains(':'),
            ) {
                ("http", false) => format!("{authority}:80"),
                _ => authority.to_string(),
            };
            return Err(format!(
                "`{text}`: a destination is `host[:port]`, not a URL: write `{suggested}`"
            ));
        }
        if PRESET_NONE.eq_ignore_ascii_case(t) {
            return Err(format!(
                "`{text}` is not a destination: an empty list (the default) allows nothing"
            ));
        }
        let (host, port) = split_port(t)?;
        let port_given = port.is_some();
        let port = match port {
            None => DEFAULT_PORT,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => n,
                _ => return Err(format!("`{text}`: the port must be 1 to 65535")),
            },
        };
        if port_given_to_preset(host, t) {
            return Err(format!(
                "`{text}`: the preset `{}` takes no port (its hosts are on {DEFAULT_PORT}): list the hosts you need with the port instead",
                host.to_ascii_lowercase()
            ));
        }
        let unbracketed = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if let Ok(ip) = unbracketed.parse::<IpAddr>() {
            if ip.is_ipv6() && !host.starts_with('[') {
                return Err(format!("`{text}`: write an IPv6 address in brackets"));
            }
            return Ok(Destination {
                host: HostPattern::Address(ip),
                port,
            });
        }
        let (wild, name) = match host.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, host),
        };
        // A fully qualified name's one trailing dot, as a request's host.
        let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
        if !name.is_ascii() {
            return Err(format!(
                "`{text}`: write an internationalized name in its ASCII form (`xn--…`, as `idn2 NAME` prints it)"
            ));
        }
        check_name(&name).map_err(|why| format!("`{text}`: {why}"))?;
        // A request naming such a host is refused as an address
        // (`Host::parse`): the entry could never match.
        if numeric(&name) {
            return Err(format!(
                "`{text}`: `{name}` is an address in a numeric spelling, never a host name: write the address as `a.b.c.d` (or `[v6]`)"
            ));
        }
        if wild && !name.contains('.') {
            return Err(format!(
                "`{text}`: a wildcard needs a suffix of two labels at least (`*.example.com`)"
            ));
        }
        // One label without a port is a misspelt preset (`registrys`,
        // `pypi`) far more often than a host; a host of one label (an
        // internal registry the broker's host reaches through its search
        // domains, `nexus:8081`) is written with its port, which no
        // preset takes.
        if !wild && !name.contains('.') && !port_given && name != LOCALHOST {
            return Err(format!(
                "`{text}`: `{name}` is neither a preset ({}) nor a full host name: write the \
                 name with its domain (`{name}.example.com`), or a host of one label with its \
                 port (`{name}:{DEFAULT_PORT}`)",
                preset_names()
            ));
        }
        if let Some(section) = wild.then(|| public_suffix(&name)).flatten() {
            return Err(format!(
                "`{text}`: `{name}` is a public suffix ({section}): the names below it belong \
                 to unrelated owners, any of whom the wildcard would allow; list the hosts you \
                 need, or a wildcard below a domain one owner holds (`*.example.{name}`)"
            ));
        }
        Ok(Destination {
            host: if wild {
                HostPattern::Suffix(name)
            } else {
                HostPattern::Exact(name)
            },
            port,
        })
    }

    /// Whether this pattern allows `host` (lowercase) at `port`.
    pub fn allows(&self, host: &Host, port: u16) -> bool {
        if port != self.port {
            return false;
        }
        match (&self.host, host) {
            (HostPattern::Exact(p), Host::Name(h)) => p == h,
            (HostPattern::Suffix(s), Host::Name(h)) => h
                .strip_suffix(s.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            (HostPattern::Address(p), Host::Address(a)) => p == a,
            _ => false,
        }
    }

    /// Whether every destination this pattern allows is allowed by `wider`
    /// (a job's entry within the host profile's maximum).
    pub fn within(&self, wider: &Destination) -> bool {
        if self.port != wider.port {
            return false;
        }
        match (&self.host, &wider.host) {
            (HostPattern::Exact(h), _) => wider.allows(&Host::Name(h.clone()), self.port),
            (HostPattern::Address(a), _) => wider.allows(&Host::Address(*a), self.port),
            (HostPattern::Suffix(s), HostPattern::Suffix(w)) => {
                s == w
                    || s.strip_suffix(w.as_str())
                        .is_some_and(|head| head.ends_with('.'))
            }
            (HostPattern::Suffix(_), _) => false,
        }
    }
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostPattern::Exact(h) => write!(f, "{h}:{}", self.port),
            HostPattern::Suffix(s) => write!(f, "*.{s}:{}", self.port),
            HostPattern::Address(a) => write!(f, "{}", SocketAddr::new(*a, self.port)),
        }
    }
}

/// A host as a request names it: a name (lowercase, no trailing dot) or
/// an IP literal.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Host {
    Name(String),
    Address(IpAddr),
}

impl Host {
    /// Parses a request's host (`name`, `1.2.3.4`, `[::1]`): lowercased,
    /// one trailing dot dropped; the reason when it is not a host.
    pub fn parse(text: &str) -> Result<Host, String> {
        let unbracketed = text
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(text);
        if let Ok(ip) = unbracketed.parse::<IpAddr>() {
            return Ok(Host::Address(ip));
        }
        let name = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
        check_name(&name)?;
        // A name of digits and dots only is an IPv4 literal in another
        // spelling (`2130706433`, `0x7f.1`, `127.1`) that resolvers read as
        // an address: never a name.
        if numeric(&name) {
            return Err(format!("`{text}` is an address in a numeric spelling"));
        }
        Ok(Host::Name(name))
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Address(IpAddr::V6(a)) => write!(f, "[{a}]"),
            Host::Address(a) => write!(f, "{a}"),
        }
    }
}

/// Whether `name` (lowercase) is an IPv4 address in a numeric spelling
/// (`2130706433`, `0x7f.1`, `127.1`): digits, hex digits and `x` only, its
/// last label starting with a digit.
fn numeric(name: &str) -> bool {
    name.split('.')
        .all(|l| l.chars().all(|c| c.is_ascii_hexdigit() || c == 'x'))
        && name
            .split('.')
            .next_back()
            .is_some_and(|l| l.starts_with(|c: char| c.is_ascii_digit()))
}

/// Where `name` (lowercase) is a public suffix, a name under which
/// unrelated owners register theirs (`co.uk`, `github.io`), by Mozilla's
/// Public Suffix List (the `psl` crate, compiled in): its ICANN section
/// (registries) or its private one (names an operator lets anyone take);
/// `None` for a name one owner holds (`example.co.uk`).
fn public_suffix(name: &str) -> Option<&'static str> {
    use psl::Psl as _;
    let suffix = psl::List.suffix(name.as_bytes())?;
    (suffix.as_bytes() == name.as_bytes()).then_some(match suffix.typ() {
        Some(psl::Type::Icann) => "the Public Suffix List's ICANN section",
        Some(psl::Type::Private) => "the Public Suffix List's private section",
        None => "a top-level name",
    })
}

/// Whether `entry` is a preset's name with a port (`registries:80`),
/// which would otherwise read as a host called `registries`.
fn port_given_to_preset(host: &str, entry: &str) -> bool {
    host.len() < entry.len() && PRESETS.iter().any(|(p, _)| p.eq_ignore_ascii_case(host))
}

/// `host` and the text after its last `:` (outside brackets).
fn split_port(t: &str) -> Result<(&str, Option<&str>), String> {
    if t.starts_with('[') {
        return match t.find(']') {
            Some(end) if end + 1 == t.len() => Ok((t, None)),
            Some(end) => match t[end + 1..].strip_prefix(':') {
                Some(port) => Ok((&t[..=end], Some(port))),
                None => Err(format!("`{t}`: expected `[address]:port`")),
            },
            None => Err(format!("`{t}`: an unclosed `[`")),
        };
    }
    match t.rsplit_once(':') {
        Some((host, _))
            if host.contains(':')
                && !t.contains("::")
                && t.parse::<std::net::Ipv6Addr>().is_err() =>
        {
            Err(format!(
                "`{t}`: a destination is `host[:port]`, with one `:` before its port"
            ))
        }
        Some((host, _)) if host.contains(':') => Err(format!(
            "`{t}`: write an IPv6 address in brackets, `[addr]:port`"
        )),
        Some((host, port)) => Ok((host, Some(port))),
        None => Ok((t, None)),
    }
}

/// Why `name` (lowercase) is not a DNS host name.
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 253 {
        return Err("a host name must be 1 to 253 characters".into());
    }
    for label in name.split('.') {
        let ok = !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if !ok {
            return Err(format!(
                "`{name}` is not a host name (labels of letters, digits, `-`, `_`)"
            ));
        }
    }
    Ok(())
}

/// A destination list as written: patterns and preset names.
pub fn parse_list(entries: &[String]) -> Result<Vec<Destination>, (usize, String)> {
    let mut out = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        if let Some((_, hosts)) = PRESETS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(entry.trim()))
        {
            for host in *hosts {
                out.push(Destination::parse(host).map_err(|e| (i, e))?);
            }
        } else {
            out.push(Destination::parse(entry).map_err(|e| (i, e))?);
        }
    }
    Ok(out)
}

/// The key two entries of a destination list share when they name the
/// same destination, however written (`example.com`, `EXAMPLE.com:443`),
/// or the same preset (`registries`, ` REGISTRIES`): the preset's name, or
/// the destination as shown; `None` for an entry that does not parse.
fn repeat_key(entry: &str) -> Option<String> {
    match PRESETS
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(entry.trim()))
    {
        Some((name, _)) => Some((*name).to_string()),
        None => Destination::parse(entry).ok().map(|d| d.to_string()),
    }
}

/// The first entry of `entries` whose `key` an earlier one shares: (the
/// earlier index, the later one, the key). Entries without a key (that
/// do not parse) repeat nothing.
fn first_repeat_by(
    entries: &[String],
    key: impl Fn(&str) -> Option<String>,
) -> Option<(usize, usize, String)> {
    let mut seen: Vec<Option<String>> = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let k = key(entry);
        if let Some(k) = &k {
            if let Some(earlier) = seen.iter().position(|s| s.as_ref() == Some(k)) {
                return Some((earlier, i, k.clone()));
            }
        }
        seen.push(k);
    }
    None
}

/// `entries` without each entry whose `key` an earlier one shares.
fn drop_repeats_by(entries: &mut Vec<String>, key: impl Fn(&str) -> Option<String>) {
    let mut seen: Vec<String> = Vec::new();
    entries.retain(|entry| match key(entry) {
        Some(k) if seen.contains(&k) => false,
        Some(k) => {
            seen.push(k);
            true
        }
        None => true,
    });
}

/// The first entry of `entries` (a list [`parse_list`] reads) that names
/// the same destination as an earlier one, however written
/// (`example.com`, `EXAMPLE.com:443`), or the same preset: (the earlier
/// index, the later one, the destination). A repeat allows nothing more
/// and is most often a slip (a port or a host meant and mistyped), so
/// validation refuses it naming both positions. Entries that do not parse
/// are left to `parse_list`.
pub fn first_repeat(entries: &[String]) -> Option<(usize, usize, String)> {
    first_repeat_by(entries, repeat_key)
}

/// `entries` without the later of any two that [`first_repeat`] finds
/// the same: how a list stored before repeats were refused is read
/// again (`JobSpec::from_stored`, `HostProfile::from_stored_json`). A
/// repeat allows nothing more, so dropping it changes nothing the list
/// allows; refusing it there would fail a job, or a profile, that was
/// admitted under the rules of its day.
pub fn drop_repeats(entries: &mut Vec<String>) {
    drop_repeats_by(entries, repeat_key);
}

/// [`parse_list`] and [`first_repeat`] for the list in field `field`
/// (`network.allow`): the field with the failing index, and why.
pub fn check_list(field: &str, entries: &[String]) -> Result<(), (String, String)> {
    parse_list(entries).map_err(|(i, why)| (format!("{field}[{i}]"), why))?;
    no_repeat(field, first_repeat(entries))
}

/// A repeat [`first_repeat_by`] found in the list in field `field`
/// refused naming both positions: the later one's field, and why.
fn no_repeat(field: &str, repeat: Option<(usize, usize, String)>) -> Result<(), (String, String)> {
    match repeat {
        Some((earlier, later, destination)) => Err((
            format!("{field}[{later}]"),
            format!(
                "`{field}[{earlier}]` and `{field}[{later}]` are both `{destination}`; remove one"
            ),
        )),
        None => Ok(()),
    }
}

/// The key two opened addresses share when they name the same socket,
/// however written (`[::1]:443`, `[0:0::1]:443`, ` 127.0.0.1:80`, the
/// mapped `[::ffff:127.0.0.1]:80`, which the proxy opens as the same
/// address): the address as shown; `None` for one that does not parse.
fn address_key(entry: &str) -> Option<String> {
    let addr = entry.trim().parse::<SocketAddr>().ok()?;
    let ip = match addr.ip() {
        std::net::IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(std::net::IpAddr::V6(v6), std::net::IpAddr::V4),
        v4 => v4,
    };
    Some(SocketAddr::new(ip, addr.port()).to_string())
}

/// `[network]` of a job spec: what the agent may reach while it works.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkSpec {
    /// Destination patterns or presets; empty (the default): nothing but
    /// the model, through the broker.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// Whether the model provider's own web search may run for the job
    /// (Codex's `web_search` tool, Claude Code's WebSearch): the provider
    /// searches, and opens the pages the model picks, on the job's
    /// behalf, where its egress proxy never sees it. Default false: the
    /// engines are not offered it and the broker refuses a call that
    /// carries it; a host profile's `network.web_search` permits it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub web_search: bool,
}

impl NetworkSpec {
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && !self.web_search
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// `[setup]` of a job spec: commands run in the job's rung before the
/// engine starts, with their own destinations and timeout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetupSpec {
    /// Shell command lines, run one after the other in the work tree.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<String>,
    /// What setup may reach: a preset name, or a list of patterns and
    /// presets.
    #[serde(default, skip_serializing_if = "SetupNetwork::is_empty")]
    pub network: SetupNetwork,
    /// The most the whole setup may take, in seconds.
    #[serde(default = "SetupSpec::default_timeout_secs")]
    pub timeout_secs: u64,
    /// Whether setup's output may be restored from, and stored in, the
    /// host's setup cache (docs/egress.md#the-setup-cache); default true.
    #[serde(default = "SetupSpec::default_cache", skip_serializing_if = "is_true")]
    pub cache: bool,
}

fn is_true(b: &bool) -> bool {
    *b
}

impl SetupSpec {
    pub const DEFAULT_TIMEOUT_SECS: u64 = 600;
    /// The longest setup a spec may ask for: 2 hours.
    pub const MAX_TIMEOUT_SECS: u64 = 7200;

    fn default_timeout_secs() -> u64 {
        Self::DEFAULT_TIMEOUT_SECS
    }

    fn default_cache() -> bool {
        true
    }

    pub fn is_default(&self) -> bool {
        *self == SetupSpec::default()
    }

    /// Why the section is invalid: (field under `setup.`, reason).
    pub fn check(&self) -> Result<(), (String, String)> {
        for (i, c) in self.commands.iter().enumerate() {
            if c.trim().is_empty() {
                return Err((format!("setup.commands[{i}]"), "must not be empty".into()));
            }
            if c.contains('\0') {
                return Err((
                    format!("setup.commands[{i}]"),
                    "must not contain a NUL byte".into(),
                ));
            }
        }
        if !(1..=Self::MAX_TIMEOUT_SECS).contains(&self.timeout_secs) {
            return Err((
                "setup.timeout_secs".into(),
                format!(
                    "must be 1 to {}, got {}",
                    Self::MAX_TIMEOUT_SECS,
                    self.timeout_secs
                ),
            ));
        }
        // One preset name has no index, and nothing to repeat.
        match &self.network {
            SetupNetwork::Preset(_) => {
                parse_list(&self.network.entries())
                    .map_err(|(_, why)| ("setup.network".to_string(), why))?;
            }
            SetupNetwork::List(list) => check_list("setup.network", list)?,
        }
        if !self.network.is_empty() && self.commands.is_empty() {
            return Err((
                "setup.network".into(),
                "setup has no commands: give `setup.commands` or drop `setup.network`".into(),
            ));
        }
        Ok(())
    }
}

impl SetupSpec {
    /// `setup.network`'s list without its repeats ([`drop_repeats`]).
    pub fn drop_repeats(&mut self) {
        if let SetupNetwork::List(list) = &mut self.network {
            drop_repeats(list);
        }
    }
}

impl Default for SetupSpec {
    fn default() -> Self {
        SetupSpec {
            commands: Vec::new(),
            network: SetupNetwork::default(),
            timeout_secs: Self::DEFAULT_TIMEOUT_SECS,
            cache: true,
        }
    }
}

/// `setup.network`: one preset name (`"registries"`, `"none"`), or a list
/// of patterns and presets.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum SetupNetwork {
    Preset(String),
    List(Vec<String>),
}

/// Read by hand rather than `untagged`, whose error ("data did not match
/// any variant") says neither what the field must be nor what it got.
impl<'de> Deserialize<'de> for SetupNetwork {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = SetupNetwork;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a preset name (`registries`, `none`) or a list of destinations")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<SetupNetwork, E> {
                Ok(SetupNetwork::Preset(v.to_owned()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<SetupNetwork, A::Error> {
                let mut list = Vec::new();
                while let Some(entry) = seq.next_element::<String>()? {
                    list.push(entry);
                }
                Ok(SetupNetwork::List(list))
            }
        }
        d.deserialize_any(Visit)
    }
}

impl Default for SetupNetwork {
    fn default() -> Self {
        SetupNetwork::List(Vec::new())
    }
}

impl SetupNetwork {
    pub fn is_empty(&self) -> bool {
        match self {
            SetupNetwork::Preset(p) => PRESET_NONE.eq_ignore_ascii_case(p.trim()),
            SetupNetwork::List(l) => l.is_empty(),
        }
    }

    /// The entries as a list (`"none"` is the empty list).
    pub fn entries(&self) -> Vec<String> {
        match self {
            SetupNetwork::Preset(p) if PRESET_NONE.eq_ignore_ascii_case(p.trim()) => Vec::new(),
            SetupNetwork::Preset(p) => vec![p.clone()],
            SetupNetwork::List(l) => l.clone(),
        }
    }
}

/// The host profile's `[network]`: the most any job may reach on this host
/// (a job's lists must stay within these), and the denied addresses it
/// opens.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkLimits {
    /// The widest agent-phase list a job may ask for.
    #[serde(default)]
    pub allow: Vec<String>,
    /// The widest setup-phase list a job may ask for.
    #[serde(default)]
    pub setup_allow: Vec<String>,
    /// Addresses the proxy's deny list refuses (loopback, private ranges,
    /// link-local...) opened one `address:port` at a time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_addresses: Vec<String>,
    /// Credentials the proxy puts into requests to one allowed host each
    /// (`[[network.credentials]]`, `crate::credential`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<crate::credential::CredentialSpec>,
    /// Whether a job may turn on the model provider's web search
    /// (`[network] web_search`); default false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub web_search: bool,
}

impl NetworkLimits {
    /// Why the section is invalid: (field under `network.`, reason).
    pub fn check(&self) -> Result<(), (String, String)> {
        check_list("network.allow", &self.allow)?;
        check_list("network.setup_allow", &self.setup_allow)?;
        self.opened()
            .map_err(|(i, why)| (format!("network.open_addresses[{i}]"), why))?;
        no_repeat(
            "network.open_addresses",
            first_repeat_by(&self.open_addresses, address_key),
        )?;
        crate::credential::check_all(&self.credentials, &self.allow, &self.setup_allow)?;
        Ok(())
    }

    /// The lists without their repeats ([`drop_repeats`]).
    pub fn drop_repeats(&mut self) {
        drop_repeats(&mut self.allow);
        drop_repeats(&mut self.setup_allow);
        drop_repeats_by(&mut self.open_addresses, address_key);
    }

    /// The opened addresses, parsed.
    pub fn opened(&self) -> Result<Vec<SocketAddr>, (usize, String)> {
        self.open_addresses
            .iter()
            .enumerate()
            .map(|(i, a)| match a.trim().parse::<SocketAddr>() {
                Ok(addr) if addr.port() == 0 => {
                    Err((i, format!("`{a}`: the port must be 1 to 65535")))
                }
                Ok(addr) => Ok(addr),
                Err(_) => Err((
                    i,
                    format!("`{a}` must be an address and port (`127.0.0.1:8443`, `[::1]:443`)"),
                )),
            })
            .collect()
    }
}

/// A job's destination list checked against a maximum: the first entry
/// (index, text) no entry of `max` covers.
pub fn first_outside<'a>(
    asked: &'a [String],
    max: &[Destination],
) -> Result<Option<(usize, &'a str)>, (usize, String)> {
    for (i, entry) in asked.iter().enumerate() {
        let parsed = parse_list(std::slice::from_ref(entry)).map_err(|(_, why)| (i, why))?;
        if !parsed.iter().all(|d| max.iter().any(|m| d.within(m))) {
            return Ok(Some((i, entry.as_str())));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn name(n: &str) -> Host {
        Host::Name(n.into())
    }

    #[test]
    fn patterns_parse_with_their_default_port() {
        let cases: Vec<(&str, Result<Destination, String>)> = vec![
            (
                "API.github.com",
                Ok(Destination {
                    host: HostPattern::Exact("api.github.com".into()),
                    port: 443,
                }),
            ),
            (
                "*.pythonhosted.org:8443",
                Ok(Destination {
                    host: HostPattern::Suffix("pythonhosted.org".into()),
                    port: 8443,
                }),
            ),
            (
                "127.0.0.1:80",
                Ok(Destination {
                    host: HostPattern::Address("127.0.0.1".parse().unwrap()),
                    port: 80,
                }),
            ),
            (
                "[::1]",
                Ok(Destination {
                    host: HostPattern::Address("::1".parse().unwrap()),
                    port: 443,
                }),
            ),
            (
                "::1",
                Err("`::1`: write an IPv6 address in brackets, `[addr]:port`".into()),
            ),
            ("a.b:0", Err("`a.b:0`: the port must be 1 to 65535".into())),
            ("a.b:x", Err("`a.b:x`: the port must be 1 to 65535".into())),
            (
                "*.com",
                Err(
                    "`*.com`: a wildcard needs a suffix of two labels at least (`*.example.com`)"
                        .into(),
                ),
            ),
            (
                "a*.b.com",
                Err("`a*.b.com`: `a*.b.com` is not a host name (labels of letters, digits, `-`, `_`)".into()),
            ),
            (
                "",
                Err("``: an empty entry is no destination: remove it (an empty list allows nothing)".into()),
            ),
            (
                "  ",
                Err("`  `: an empty entry is no destination: remove it (an empty list allows nothing)".into()),
            ),
            (
                ":443",
                Err("`:443`: a host name must be 1 to 253 characters".into()),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(Destination::parse(text), want, "{text}");
        }
    }

    /// The odd forms a user writes: each allows what it says or is refused
    /// saying what to write instead.
    #[test]
    fn odd_forms_work_or_say_what_to_write() {
        let exact = |h: &str, port| {
            Ok(Destination {
                host: HostPattern::Exact(h.into()),
                port,
            })
        };
        let cases: Vec<(&str, Result<Destination, String>)> = vec![
            ("Example.COM.", exact("example.com", 443)),
            ("example.com.:8443", exact("example.com", 8443)),
            (
                "*.Example.com.",
                Ok(Destination {
                    host: HostPattern::Suffix("example.com".into()),
                    port: 443,
                }),
            ),
            ("\t api.github.com:443 \n", exact("api.github.com", 443)),
            ("xn--bcher-kva.example", exact("xn--bcher-kva.example", 443)),
            (
                "[::1]:443",
                Ok(Destination {
                    host: HostPattern::Address("::1".parse().unwrap()),
                    port: 443,
                }),
            ),
            (
                "example.com..",
                Err("`example.com..`: `example.com.` is not a host name (labels of letters, digits, `-`, `_`)".into()),
            ),
            (
                "https://api.github.com/repos",
                Err("`https://api.github.com/repos`: a destination is `host[:port]`, not a URL: write `api.github.com`".into()),
            ),
            (
                "http://mirror.example",
                Err("`http://mirror.example`: a destination is `host[:port]`, not a URL: write `mirror.example:80`".into()),
            ),
            (
                "HTTP://mirror.example:8080/simple",
                Err("`HTTP://mirror.example:8080/simple`: a destination is `host[:port]`, not a URL: write `mirror.example:8080`".into()),
            ),
            (
                "bücher.example",
                Err("`bücher.example`: write an internationalized name in its ASCII form (`xn--…`, as `idn2 NAME` prints it)".into()),
            ),
            (
                "None",
                Err("`None` is not a destination: an empty list (the default) allows nothing".into()),
            ),
            ("a.b:65536", Err("`a.b:65536`: the port must be 1 to 65535".into())),
            (
                "[::1]:0",
                Err("`[::1]:0`: the port must be 1 to 65535".into()),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(Destination::parse(text), want, "{text}");
        }
    }

    /// Entries no request could ever match are refused, not kept as dead
    /// entries: a name in a numeric spelling (a request naming it is
    /// refused as an address), a preset with a port (it would be a host
    /// called `registries`), a port with a sign.
    #[test]
    fn entries_that_could_never_match_are_refused() {
        let cases: Vec<(&str, Result<Destination, String>)> = vec![
            (
                "127.1:80",
                Err("`127.1:80`: `127.1` is an address in a numeric spelling, never a host name: write the address as `a.b.c.d` (or `[v6]`)".into()),
            ),
            (
                "2130706433",
                Err("`2130706433`: `2130706433` is an address in a numeric spelling, never a host name: write the address as `a.b.c.d` (or `[v6]`)".into()),
            ),
            (
                "*.0x7f.1",
                Err("`*.0x7f.1`: `0x7f.1` is an address in a numeric spelling, never a host name: write the address as `a.b.c.d` (or `[v6]`)".into()),
            ),
            (
                "Registries:80",
                Err("`Registries:80`: the preset `registries` takes no port (its hosts are on 443): list the hosts you need with the port instead".into()),
            ),
            ("a.b:+443", Err("`a.b:+443`: the port must be 1 to 65535".into())),
            (
                "1password.com",
                Ok(Destination {
                    host: HostPattern::Exact("1password.com".into()),
                    port: 443,
                }),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(Destination::parse(text), want, "{text}");
        }
    }

    /// A misspelt preset (`registrys`, `pypi`), in a list or as
    /// `setup.network`'s one name, is refused naming the presets, where it
    /// was taken for a host of one label on port 443 and the job ran
    /// without what it asked for; `localhost` (a stand-in the profile
    /// opens) stays, and so does a host of one label written with its
    /// port (`nne:8443`: an internal host the broker's search domains
    /// reach; no preset takes a port). A second `:` is named as such, not
    /// as an IPv6 address without brackets.
    #[test]
    fn a_misspelt_preset_is_refused_naming_the_presets() {
        let neither = |entry: &str, name: &str| {
            Err::<(), _>(format!(
                "`{entry}`: `{name}` is neither a preset (`registries`) nor a full host name: \
                 write the name with its domain (`{name}.example.com`), or a host of one label \
                 with its port (`{name}:443`)"
            ))
        };
        let setup = SetupSpec {
            commands: vec!["npm ci".into()],
            network: SetupNetwork::Preset("registry".into()),
            ..SetupSpec::default()
        };
        assert_eq!(
            (
                [
                    "registrys",
                    "PyPI.",
                    "nne:8443",
                    "localhost:8443",
                    "example.com:443:443"
                ]
                .map(|e| Destination::parse(e).map(|_| ())),
                parse_list(&["registries".into(), "Registry".into()]).map(|_| ()),
                setup.check(),
            ),
            (
                [
                    neither("registrys", "registrys"),
                    neither("PyPI.", "pypi"),
                    Ok(()),
                    Ok(()),
                    Err(
                        "`example.com:443:443`: a destination is `host[:port]`, with one `:` \
                         before its port"
                            .into()
                    ),
                ],
                Err((1, neither("Registry", "registry").unwrap_err())),
                Err((
                    "setup.network".into(),
                    neither("registry", "registry").unwrap_err()
                )),
            )
        );
    }

    /// A wildcard over a public suffix (a registry's, `co.uk`, or a name
    /// an operator lets anyone take, `github.io`) would allow every
    /// unrelated owner below it: refused, naming the suffix and the
    /// list's section. A wildcard below one owner's domain, or over a
    /// suffix the list does not know (`corp.example`), stays; so does an
    /// exact public suffix (one host). Before, `*.co.uk` was accepted.
    #[test]
    fn wildcards_over_a_public_suffix_are_refused() {
        let refused = |entry: &str, name: &str, section: &str| {
            Err(format!(
                "`{entry}`: `{name}` is a public suffix (the Public Suffix List's {section} \
                 section): the names below it belong to unrelated owners, any of whom the \
                 wildcard would allow; list the hosts you need, or a wildcard below a domain \
                 one owner holds (`*.example.{name}`)"
            ))
        };
        let suffix = |name: &str| {
            Ok(Destination {
                host: HostPattern::Suffix(name.into()),
                port: 443,
            })
        };
        let got = [
            "*.co.uk",
            "*.CO.UK.:8443",
            "*.com.au",
            "*.github.io",
            "*.githubusercontent.com",
            "*.example.co.uk",
            "*.corp.example",
            "*.pythonhosted.org",
        ]
        .map(Destination::parse);
        assert_eq!(
            got,
            [
                refused("*.co.uk", "co.uk", "ICANN"),
                refused("*.CO.UK.:8443", "co.uk", "ICANN"),
                refused("*.com.au", "com.au", "ICANN"),
                refused("*.github.io", "github.io", "private"),
                refused(
                    "*.githubusercontent.com",
                    "githubusercontent.com",
                    "private",
                ),
                suffix("example.co.uk"),
                suffix("corp.example"),
                suffix("pythonhosted.org"),
            ]
        );
        assert_eq!(
            Destination::parse("co.uk"),
            Ok(Destination {
                host: HostPattern::Exact("co.uk".into()),
                port: 443,
            })
        );
        // In a list, the entry's index, for the field the error names.
        assert_eq!(
            parse_list(&["api.github.com".into(), "*.co.uk".into()]).map(|_| ()),
            Err((1, refused("*.co.uk", "co.uk", "ICANN").unwrap_err()))
        );
    }

    /// `setup.network` of the wrong type says what it must be and what it
    /// got.
    #[test]
    fn setup_network_of_the_wrong_type_says_what_it_must_be() {
        let err = toml::from_str::<SetupSpec>("commands = [\"true\"]\nnetwork = 5\n")
            .unwrap_err()
            .message()
            .to_string();
        assert_eq!(
            err,
            "invalid type: integer `5`, expected a preset name (`registries`, `none`) or a list of destinations"
        );
        let list: SetupSpec =
            toml::from_str("commands = [\"true\"]\nnetwork = [\"registries\"]\n").unwrap();
        let preset: SetupSpec =
            toml::from_str("commands = [\"true\"]\nnetwork = \"registries\"\n").unwrap();
        assert_eq!(
            (list.network, preset.network),
            (
                SetupNetwork::List(vec!["registries".into()]),
                SetupNetwork::Preset("registries".into())
            )
        );
    }

    /// A preset's name in any case is the preset (names are compared
    /// lowercase), never a host called `registries`; so is `"none"`.
    #[test]
    fn preset_names_are_read_in_any_case() {
        let registries = parse_list(&["registries".into()]).unwrap();
        assert_eq!(
            (
                parse_list(&["Registries".into()]),
                parse_list(&[" REGISTRIES ".into()]),
                SetupNetwork::Preset("None".into()).entries(),
                SetupNetwork::Preset("NONE".into()).is_empty(),
            ),
            (
                Ok(registries.clone()),
                Ok(registries),
                Vec::<String>::new(),
                true
            )
        );
    }

    #[test]
    fn suffixes_match_names_below_them_only() {
        let d = Destination::parse("*.example.com").unwrap();
        assert_eq!(
            [
                d.allows(&name("a.example.com"), 443),
                d.allows(&name("a.b.example.com"), 443),
                d.allows(&name("example.com"), 443),
                d.allows(&name("badexample.com"), 443),
                d.allows(&name("a.example.com"), 80),
                d.allows(&Host::Address("1.2.3.4".parse().unwrap()), 443),
            ],
            [true, true, false, false, false, false]
        );
    }

    #[test]
    fn request_hosts_are_names_or_literals_never_numeric_spellings() {
        assert_eq!(Host::parse("Example.COM."), Ok(name("example.com")));
        assert_eq!(
            Host::parse("[::ffff:127.0.0.1]"),
            Ok(Host::Address("::ffff:127.0.0.1".parse().unwrap()))
        );
        for odd in ["2130706433", "0x7f.1", "127.1", "0177.0.0.1"] {
            assert!(Host::parse(odd).is_err(), "{odd}");
        }
        assert!(Host::parse("a b").is_err());
        assert_eq!(Host::parse("1password.com"), Ok(name("1password.com")));
    }

    #[test]
    fn a_job_list_stays_within_the_maximum() {
        let max = parse_list(&["*.example.com".into(), "api.github.com".into()]).unwrap();
        let asked: Vec<String> = vec![
            "a.example.com".into(),
            "*.b.example.com".into(),
            "*.example.com".into(),
            "api.github.com:443".into(),
        ];
        assert_eq!(first_outside(&asked, &max), Ok(None));
        for (wide, _) in [
            ("example.com", ()),
            ("*.com.example.org", ()),
            ("api.github.com:22", ()),
            ("registries", ()),
            ("10.0.0.1:443", ()),
        ] {
            let list = vec![wide.to_string()];
            assert_eq!(first_outside(&list, &max), Ok(Some((0, wide))), "{wide}");
        }
    }

    /// `cache` defaults to on, reads `false`, and is written only when off.
    #[test]
    fn setup_cache_switch_parses_and_round_trips() {
        let on: SetupSpec = toml::from_str("commands = [\"npm ci\"]\n").unwrap();
        let off: SetupSpec = toml::from_str("commands = [\"npm ci\"]\ncache = false\n").unwrap();
        assert_eq!(
            (
                on.cache,
                off.cache,
                serde_json::to_value(&on).unwrap().get("cache").cloned(),
                serde_json::to_value(&off).unwrap().get("cache").cloned(),
            ),
            (true, false, None, Some(serde_json::Value::Bool(false)))
        );
    }

    #[test]
    fn setup_is_validated_naming_the_field() {
        let mut s = SetupSpec {
            commands: vec!["npm ci".into(), " ".into()],
            ..SetupSpec::default()
        };
        assert_eq!(
            s.check(),
            Err(("setup.commands[1]".into(), "must not be empty".into()))
        );
        s.commands.pop();
        s.timeout_secs = 0;
        assert_eq!(
            s.check(),
            Err((
                "setup.timeout_secs".into(),
                "must be 1 to 7200, got 0".into()
            ))
        );
        s.timeout_secs = 60;
        s.network = SetupNetwork::List(vec!["registries".into(), "bad host".into()]);
        assert_eq!(
            s.check(),
            Err((
                "setup.network[1]".into(),
                "`bad host`: `bad host` is not a host name (labels of letters, digits, `-`, `_`)"
                    .into()
            ))
        );
        s.network = SetupNetwork::List(vec![
            "pypi.org".into(),
            "registries".into(),
            "PyPI.org:443".into(),
            "Registries".into(),
        ]);
        assert_eq!(
            s.check(),
            Err((
                "setup.network[2]".into(),
                "`setup.network[0]` and `setup.network[2]` are both `pypi.org:443`; remove one"
                    .into()
            ))
        );
        s.network = SetupNetwork::List(vec!["registries".into(), " REGISTRIES".into()]);
        assert_eq!(
            s.check(),
            Err((
                "setup.network[1]".into(),
                "`setup.network[0]` and `setup.network[1]` are both `registries`; remove one"
                    .into()
            ))
        );
        // A preset and a host it holds are two entries, not a repeat.
        s.network = SetupNetwork::List(vec!["registries".into(), "pypi.org".into()]);
        assert_eq!(s.check(), Ok(()));
        s.network = SetupNetwork::Preset("registries".into());
        assert_eq!(s.check(), Ok(()));
        s.commands.clear();
        assert_eq!(
            s.check(),
            Err((
                "setup.network".into(),
                "setup has no commands: give `setup.commands` or drop `setup.network`".into()
            ))
        );
    }

    #[test]
    fn profile_limits_are_validated_naming_the_field() {
        let zero = NetworkLimits {
            open_addresses: vec!["[::1]:443".into(), " 127.0.0.1:0".into()],
            ..NetworkLimits::default()
        };
        assert_eq!(
            zero.check(),
            Err((
                "network.open_addresses[1]".into(),
                "` 127.0.0.1:0`: the port must be 1 to 65535".into()
            ))
        );
        let l = NetworkLimits {
            open_addresses: vec!["127.0.0.1:8443".into(), "localhost:1".into()],
            ..NetworkLimits::default()
        };
        assert_eq!(
            l.check(),
            Err((
                "network.open_addresses[1]".into(),
                "`localhost:1` must be an address and port (`127.0.0.1:8443`, `[::1]:443`)".into()
            ))
        );
        let repeated = |allow: &[&str], setup_allow: &[&str]| NetworkLimits {
            allow: allow.iter().map(|e| e.to_string()).collect(),
            setup_allow: setup_allow.iter().map(|e| e.to_string()).collect(),
            ..NetworkLimits::default()
        };
        assert_eq!(
            [
                repeated(&["*.github.com", "a.example", "*.GitHub.com:443"], &[]).check(),
                repeated(
                    &["[::1]:8443"],
                    &["10.0.0.1:80", "[::1]:8443", "10.0.0.1:80"]
                )
                .check(),
                repeated(&["a.example:80", "a.example"], &["a.example"]).check(),
            ],
            [
                Err((
                    "network.allow[2]".into(),
                    "`network.allow[0]` and `network.allow[2]` are both `*.github.com:443`; \
                     remove one"
                        .into()
                )),
                Err((
                    "network.setup_allow[2]".into(),
                    "`network.setup_allow[0]` and `network.setup_allow[2]` are both \
                     `10.0.0.1:80`; remove one"
                        .into()
                )),
                Ok(()),
            ]
        );
    }

    /// The same opened address twice, however written (`[::1]:443` and
    /// `[0:0::1]:443`, `127.0.0.1:80` and its mapped IPv6 spelling), is refused naming both positions
    /// as a repeated destination is; the same address on two ports is
    /// two. Before, `network.open_addresses` took repeats silently.
    #[test]
    fn a_repeated_opened_address_is_refused_naming_both_positions() {
        let opened = |addresses: &[&str]| NetworkLimits {
            open_addresses: addresses.iter().map(|e| e.to_string()).collect(),
            ..NetworkLimits::default()
        };
        assert_eq!(
            [
                opened(&["[::1]:443", "127.0.0.1:80", "[0:0::1]:443"]).check(),
                opened(&["127.0.0.1:80", " [::ffff:127.0.0.1]:80"]).check(),
                opened(&["127.0.0.1:80", "127.0.0.1:8080", "[::1]:80"]).check(),
            ],
            [
                Err((
                    "network.open_addresses[2]".into(),
                    "`network.open_addresses[0]` and `network.open_addresses[2]` are both \
                     `[::1]:443`; remove one"
                        .into()
                )),
                Err((
                    "network.open_addresses[1]".into(),
                    "`network.open_addresses[0]` and `network.open_addresses[1]` are both \
                     `127.0.0.1:80`; remove one"
                        .into()
                )),
                Ok(()),
            ]
        );
        let mut stored = opened(&["[::1]:443", "127.0.0.1:80", "[0:0::1]:443"]);
        stored.drop_repeats();
        assert_eq!(stored, opened(&["[::1]:443", "127.0.0.1:80"]));
    }
}
