//! A credential for an allowed host, configured in the host profile only
//! (`[[network.credentials]]`): the job holds a placeholder in an
//! environment variable, and the job's egress proxy puts the real value
//! into one request header, on requests to one exact `name:port`, over a
//! TLS connection it terminated with a per-job CA and re-made upstream
//! itself (docs/egress.md, "Credentials for allowed hosts"). Parsing and
//! validation only; the proxy side is `paddock::egress::credential`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::egress::EgressPhase;
use crate::network::{first_outside, parse_list, Destination, HostPattern};
use crate::spec::KeyRef;

/// Where the real value goes in the header's `value`.
pub const SECRET_SLOT: &str = "{secret}";

/// Headers a credential may not be put into: the proxy frames requests
/// by them, rewrites them, or they are hop-by-hop.
pub const RESERVED_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "expect",
    "accept-encoding",
    "proxy-authorization",
    "proxy-connection",
];

/// Variables the job's environment already gives a meaning to; a
/// credential's placeholder may not take one of them.
pub const RESERVED_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TERM", "TMPDIR",
];

/// The proxy variables a job's environment gets (each also in lower
/// case) when its egress goes through the broker.
pub const PROXY_VARIABLES: &[&str] = &["HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"];

/// The variables clients read their trust roots from: each points at the
/// job's CA bundle when a credential's host is terminated.
pub const CA_VARIABLES: &[&str] = &[
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "PIP_CERT",
    "NODE_EXTRA_CA_CERTS",
    "GIT_SSL_CAINFO",
    "CURL_CA_BUNDLE",
    "CARGO_HTTP_CAINFO",
];

/// Whether the job's environment already gives variable `name` a meaning
/// (case-insensitively): [`RESERVED_ENV`], the proxy and the CA variables.
pub fn is_reserved_env(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    [RESERVED_ENV, PROXY_VARIABLES, CA_VARIABLES]
        .iter()
        .any(|list| list.contains(&upper.as_str()))
}

/// One `[[network.credentials]]` entry of the host profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialSpec {
    /// How records and the job refer to it (`a-z`, `0-9`, `-`, `_`; at
    /// most 32).
    pub name: String,
    /// The one exact `name:port` (port 443 unless given) it is used for;
    /// inside the profile's `network.allow` or `network.setup_allow` for
    /// each of its phases.
    pub host: String,
    /// The one request header its value goes into (`authorization`).
    pub header: String,
    /// The header's value, `{secret}` standing for the real value
    /// (`Bearer {secret}`).
    pub value: String,
    /// Where the broker reads the real value (`env:NAME`, `file:PATH`).
    pub secret: KeyRef,
    /// The job's environment variable holding the placeholder.
    pub env: String,
    /// The phases it is used in (default: both).
    #[serde(default = "both_phases")]
    pub phases: Vec<EgressPhase>,
    /// A PEM file of CA certificates trusted, besides the system's roots,
    /// for this host's upstream certificate (a private registry's CA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_ca: Option<PathBuf>,
    /// The request methods the value is put into (`GET`); empty: every
    /// method.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<String>,
    /// Path prefixes (`/v2/`) the value is put into requests for, compared
    /// with the request's path as sent (before `?`); empty: every path.
    /// A path with a `.` or `..` segment, a percent-encoded `.`, `/` or
    /// `\\`, or a request target not in origin form never matches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
}

/// Whether `path` (a request target's path, before `?`) is one the
/// prefixes of a credential's `paths` may be compared with: origin form,
/// no segment a server reads as `.` or `..` ([`dot_segment`]), no
/// percent-encoded `.`, `/`, `\\` or `;` (which a server could decode into
/// another path than the text shows).
pub fn plain_path(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    path.starts_with('/')
        && !path.contains('\\')
        && !["%2e", "%2f", "%5c", "%3b"]
            .iter()
            .any(|e| lower.contains(e))
        && !path.split('/').any(dot_segment)
        && !path.chars().any(|c| c.is_control() || c == ' ' || c == '#')
}

/// Whether a path segment is one a server may read as `.` or `..`: the
/// segment itself, or with path parameters after a `;` (`..;x`, `..;`),
/// which Tomcat, Spring and servers behind them drop before resolving
/// the segment (RFC 3986 3.3's parameters): `/v2/..;/admin` is
/// `/admin` there.
fn dot_segment(segment: &str) -> bool {
    let name = segment.split(';').next().unwrap_or(segment);
    name == "." || name == ".."
}

/// Whether a request `method` to `target` (as sent) is within `methods`
/// and `paths` (each empty: any).
pub fn in_scope(methods: &[String], paths: &[String], method: &str, target: &str) -> bool {
    let path = target.split('?').next().unwrap_or_default();
    (methods.is_empty() || methods.iter().any(|m| m == method))
        && (paths.is_empty()
            || (plain_path(path) && paths.iter().any(|p| path.starts_with(p.as_str()))))
}

fn both_phases() -> Vec<EgressPhase> {
    vec![EgressPhase::Setup, EgressPhase::Agent]
}

impl CredentialSpec {
    /// The host's name and port, once checked.
    pub fn destination(&self) -> Result<(String, u16), String> {
        let d = Destination::parse(&self.host)?;
        match d.host {
            HostPattern::Exact(name) => Ok((name, d.port)),
            _ => Err(format!(
                "`{}`: one exact host name and port (`npm.corp.example:443`), not a wildcard or an IP address",
                self.host
            )),
        }
    }

    /// The text around `{secret}` in `value`.
    pub fn value_parts(&self) -> Option<(&str, &str)> {
        let (before, after) = self.value.split_once(SECRET_SLOT)?;
        (!after.contains(SECRET_SLOT)).then_some((before, after))
    }

    /// Why the entry is invalid: (field under `network.credentials[i].`,
    /// reason). `allow` and `setup_allow` are the profile's lists.
    pub fn check(&self, allow: &[String], setup_allow: &[String]) -> Result<(), (String, String)> {
        let bad = |field: &str, why: String| Err((field.to_string(), why));
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 32
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if !name_ok {
            return bad(
                "name",
                format!(
                    "`{}`: 1 to 32 of `a-z`, `0-9`, `-`, `_`",
                    self.name.escape_default()
                ),
            );
        }
        if let Err(why) = self.destination() {
            return bad("host", why);
        }
        let header_ok = !self.header.is_empty()
            && self
                .header
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !header_ok {
            return bad(
                "header",
                format!("`{}` is not a header name", self.header.escape_default()),
            );
        }
        let lower = self.header.to_ascii_lowercase();
        if RESERVED_HEADERS.contains(&lower.as_str()) || lower.starts_with("proxy-") {
            return bad(
                "header",
                format!(
                    "`{lower}` frames or routes the request; a credential goes into another header"
                ),
            );
        }
        if self.value.chars().any(char::is_control) {
            return bad("value", "must not hold a control character".into());
        }
        if self.value_parts().is_none() {
            return bad(
                "value",
                format!("must hold `{SECRET_SLOT}` exactly once (`Bearer {SECRET_SLOT}`)"),
            );
        }
        let env_ok = !self.env.is_empty()
            && self
                .env
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !self.env.starts_with(|c: char| c.is_ascii_digit());
        if !env_ok {
            return bad(
                "env",
                format!(
                    "`{}`: an environment variable name is letters, digits and `_`",
                    self.env.escape_default()
                ),
            );
        }
        if is_reserved_env(&self.env) {
            return bad(
                "env",
                format!("`{}` is set by Paddock for every job", self.env),
            );
        }
        if matches!(&self.secret, KeyRef::File(p) if p.is_relative()) {
            return bad(
                "secret",
                format!("`{}`: a file is named by its absolute path", self.secret),
            );
        }
        if let Some(p) = self.upstream_ca.as_ref().filter(|p| p.is_relative()) {
            return bad(
                "upstream_ca",
                format!("`{}`: a file is named by its absolute path", p.display()),
            );
        }
        if self.phases.is_empty() {
            return bad("phases", "name `setup`, `agent` or both".into());
        }
        for (j, m) in self.methods.iter().enumerate() {
            let ok = !m.is_empty() && m.len() <= 32 && m.bytes().all(|b| b.is_ascii_uppercase());
            if !ok {
                return bad(
                    &format!("methods[{j}]"),
                    format!(
                        "`{}`: a method is 1 to 32 of `A-Z` (`GET`)",
                        m.escape_default()
                    ),
                );
            }
            if self.methods[..j].contains(m) {
                return bad(&format!("methods[{j}]"), format!("`{m}` is listed twice"));
            }
        }
        for (j, p) in self.paths.iter().enumerate() {
            if p.len() > 1024 || !plain_path(p) || p.contains('?') {
                return bad(
                    &format!("paths[{j}]"),
                    format!(
                        "`{}`: a path prefix starts with `/` and has no `?`, `#`, space, control character, `.` or `..` segment (with parameters too: `..;`) or percent-encoded `.`, `/`, `\\`, `;` (`/v2/`)",
                        p.escape_default()
                    ),
                );
            }
        }
        let host = [self.host.clone()];
        for phase in &self.phases {
            let (list, field) = match phase {
                EgressPhase::Setup => (setup_allow, "network.setup_allow"),
                EgressPhase::Agent => (allow, "network.allow"),
            };
            let max = parse_list(list).unwrap_or_default();
            if !matches!(first_outside(&host, &max), Ok(None)) {
                return bad(
                    "host",
                    format!(
                        "`{}` is used in the {} phase but is not within the profile's `{field}`",
                        self.host,
                        phase.as_str()
                    ),
                );
            }
        }
        Ok(())
    }
}

/// Checks every entry and that no two share a name, a host or a variable:
/// (field under `network.`, reason).
pub fn check_all(
    credentials: &[CredentialSpec],
    allow: &[String],
    setup_allow: &[String],
) -> Result<(), (String, String)> {
    for (i, c) in credentials.iter().enumerate() {
        c.check(allow, setup_allow)
            .map_err(|(field, why)| (format!("network.credentials[{i}].{field}"), why))?;
        for (field, same) in [
            ("name", credentials[..i].iter().any(|o| o.name == c.name)),
            (
                "host",
                credentials[..i]
                    .iter()
                    .any(|o| o.destination().ok() == c.destination().ok()),
            ),
            ("env", credentials[..i].iter().any(|o| o.env == c.env)),
        ] {
            if same {
                return Err((
                    format!("network.credentials[{i}].{field}"),
                    "another credential has the same one".into(),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn cred() -> CredentialSpec {
        CredentialSpec {
            name: "registry".into(),
            host: "npm.corp.example:443".into(),
            header: "Authorization".into(),
            value: "Bearer {secret}".into(),
            secret: KeyRef::Env("CORP_NPM_TOKEN".into()),
            env: "NPM_TOKEN".into(),
            phases: both_phases(),
            upstream_ca: None,
            methods: Vec::new(),
            paths: Vec::new(),
        }
    }

    #[test]
    fn each_field_is_checked_and_named() {
        let allow = vec!["*.corp.example".to_string()];
        let setup = vec!["npm.corp.example".to_string()];
        assert_eq!(cred().check(&allow, &setup), Ok(()));
        type Case = (fn(&mut CredentialSpec), &'static str, &'static str);
        let cases: Vec<Case> = vec![
            (|c| c.name = "Reg istry".into(), "name", "`Reg istry`: 1 to 32 of `a-z`, `0-9`, `-`, `_`"),
            (|c| c.host = "*.corp.example".into(), "host", "`*.corp.example`: one exact host name and port (`npm.corp.example:443`), not a wildcard or an IP address"),
            (|c| c.host = "10.0.0.1:443".into(), "host", "`10.0.0.1:443`: one exact host name and port (`npm.corp.example:443`), not a wildcard or an IP address"),
            (|c| c.host = "npm.corp.example:8443".into(), "host", "`npm.corp.example:8443` is used in the setup phase but is not within the profile's `network.setup_allow`"),
            (|c| c.host = "other.corp.example".into(), "host", "`other.corp.example` is used in the setup phase but is not within the profile's `network.setup_allow`"),
            (|c| c.header = "x bad".into(), "header", "`x bad` is not a header name"),
            (|c| c.header = "Content-Length".into(), "header", "`content-length` frames or routes the request; a credential goes into another header"),
            (|c| c.header = "Proxy-Foo".into(), "header", "`proxy-foo` frames or routes the request; a credential goes into another header"),
            (|c| c.value = "Bearer token".into(), "value", "must hold `{secret}` exactly once (`Bearer {secret}`)"),
            (|c| c.value = "{secret}{secret}".into(), "value", "must hold `{secret}` exactly once (`Bearer {secret}`)"),
            (|c| c.value = "Bearer {secret}\r\nx: y".into(), "value", "must not hold a control character"),
            (|c| c.env = "1X".into(), "env", "`1X`: an environment variable name is letters, digits and `_`"),
            (|c| c.env = "https_proxy".into(), "env", "`https_proxy` is set by Paddock for every job"),
            (|c| c.phases = vec![], "phases", "name `setup`, `agent` or both"),
            (|c| c.methods = vec!["GET".into(), "get".into()], "methods[1]", "`get`: a method is 1 to 32 of `A-Z` (`GET`)"),
            (|c| c.methods = vec!["GET".into(), "GET".into()], "methods[1]", "`GET` is listed twice"),
            (|c| c.paths = vec!["v2/".into()], "paths[0]", "`v2/`: a path prefix starts with `/` and has no `?`, `#`, space, control character, `.` or `..` segment (with parameters too: `..;`) or percent-encoded `.`, `/`, `\\`, `;` (`/v2/`)"),
            (|c| c.paths = vec!["/v2/".into(), "/a/../b".into()], "paths[1]", "`/a/../b`: a path prefix starts with `/` and has no `?`, `#`, space, control character, `.` or `..` segment (with parameters too: `..;`) or percent-encoded `.`, `/`, `\\`, `;` (`/v2/`)"),
            (|c| c.paths = vec!["/v2?x".into()], "paths[0]", "`/v2?x`: a path prefix starts with `/` and has no `?`, `#`, space, control character, `.` or `..` segment (with parameters too: `..;`) or percent-encoded `.`, `/`, `\\`, `;` (`/v2/`)"),
            (|c| c.secret = KeyRef::File("token".into()), "secret", "`file:token`: a file is named by its absolute path"),
            (|c| c.upstream_ca = Some("ca.pem".into()), "upstream_ca", "`ca.pem`: a file is named by its absolute path"),
        ];
        for (change, field, why) in cases {
            let mut c = cred();
            change(&mut c);
            assert_eq!(
                c.check(&allow, &setup),
                Err((field.to_string(), why.to_string())),
                "{field}"
            );
        }
        let mut agent_only = cred();
        agent_only.host = "git.corp.example".into();
        agent_only.phases = vec![EgressPhase::Agent];
        assert_eq!(agent_only.check(&allow, &setup), Ok(()));
    }

    #[test]
    fn two_credentials_never_share_a_name_a_host_or_a_variable() {
        let allow = vec!["*.corp.example".to_string()];
        let setup = allow.clone();
        let mut b = cred();
        b.name = "git".into();
        b.host = "git.corp.example".into();
        b.env = "GIT_TOKEN".into();
        assert_eq!(check_all(&[cred(), b.clone()], &allow, &setup), Ok(()));
        let mut same_host = b.clone();
        same_host.host = "npm.corp.example".into();
        assert_eq!(
            check_all(&[cred(), same_host], &allow, &setup),
            Err((
                "network.credentials[1].host".into(),
                "another credential has the same one".into()
            ))
        );
        let mut bad = b;
        bad.header = "host".into();
        assert_eq!(
            check_all(&[cred(), bad], &allow, &setup),
            Err((
                "network.credentials[1].header".into(),
                "`host` frames or routes the request; a credential goes into another header".into()
            ))
        );
    }

    #[test]
    fn the_value_splits_around_its_slot() {
        let mut c = cred();
        assert_eq!(c.value_parts(), Some(("Bearer ", "")));
        c.value = "token={secret};x".into();
        assert_eq!(c.value_parts(), Some(("token=", ";x")));
    }

    /// A request is in scope by its method and its path's textual prefix;
    /// a path a server could read as another (dot segments, encoded
    /// slashes or dots) or a target not in origin form never is.
    #[test]
    fn a_request_is_in_scope_by_method_and_plain_path_prefix() {
        let (m, p) = (
            vec!["GET".to_string(), "HEAD".to_string()],
            vec!["/v2/".to_string()],
        );
        let cases = [
            ("GET", "/v2/lib/manifests/1?x=/v3/", true),
            ("HEAD", "/v2/", true),
            ("PUT", "/v2/lib", false),
            ("get", "/v2/lib", false),
            ("GET", "/v2", false),
            ("GET", "/v3/lib", false),
            ("GET", "/v2/../admin", false),
            ("GET", "/v2/%2e%2e/admin", false),
            ("GET", "/v2/..%2Fadmin", false),
            ("GET", "/v2/./x", false),
            ("GET", "/v2/..;/admin", false),
            ("GET", "/v2/..;x=1/admin", false),
            ("GET", "/v2/.;/x", false),
            ("GET", "/v2/..%3b/admin", false),
            ("GET", "/v2/..%3B/admin", false),
            ("GET", "/v2/lib;v=1/x", true),
            ("GET", "/v2/...;/x", true),
            ("GET", "https://host/v2/x", false),
            ("GET", "*", false),
        ];
        let got: Vec<bool> = cases
            .iter()
            .map(|(meth, t, _)| in_scope(&m, &p, meth, t))
            .collect();
        let want: Vec<bool> = cases.iter().map(|c| c.2).collect();
        assert_eq!(got, want);
        assert!(in_scope(&[], &[], "DELETE", "https://anything"));
        assert!(in_scope(&[], &p, "DELETE", "/v2/x"));
    }
}
