//! The host profile's credentials as the job's proxy holds them
//! (docs/egress.md, "Credentials for allowed hosts"): each one's real
//! value (a [`Secret`], read by the broker from its reference), the job's
//! placeholder (`paddock-cred-<name>-<32 random hex>`, made per job), the
//! TLS configurations of its terminated tunnels (a leaf of the job's CA
//! toward the job, ALPN `http/1.1` only; the system's roots and its
//! `upstream_ca` toward the host), the one header it goes into, and what
//! the response scan looks for.

use std::sync::Arc;
use std::time::Duration;

use paddock_protocol::{CredentialSpec, EgressPhase, Host};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::CertificateDer;

use super::ca::{CaError, JobCa};
use super::roots::{Roots, RootsError};
use crate::secret::{Secret, SecretError, SecretKind};

/// The one application protocol a terminated tunnel speaks.
pub const ALPN_HTTP1: &[u8] = b"http/1.1";

/// Why the job's credentials could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    #[error("network.credentials `{name}`: {source}")]
    Secret { name: String, source: SecretError },
    #[error("network.credentials `{name}`: {field}: {reason}")]
    Invalid {
        name: String,
        field: &'static str,
        reason: String,
    },
    #[error("network.credentials `{name}`: upstream_ca: {source}")]
    UpstreamCa { name: String, source: RootsError },
    #[error("network.credentials: the system's trust roots: {0}")]
    SystemRoots(RootsError),
    #[error("network.credentials `{name}`: {source}")]
    Ca { name: String, source: CaError },
    #[error("network.credentials `{name}`: the TLS configuration: {reason}")]
    Tls { name: String, reason: String },
}

/// Headers by which a server takes a request for another method than its
/// request line's (`X-HTTP-Method-Override: DELETE` on a `GET` or `POST`:
/// Google's APIs, ASP.NET Web API, Express's and Rack's method-override,
/// Symfony) or for another path (`X-Original-URL`, `X-Rewrite-URL`: IIS's
/// URL Rewrite, Symfony, Zend, Drupal): a request carrying one is out of
/// a credential's `methods` and `paths`, whatever its request line says.
pub const OVERRIDE_HEADERS: &[&str] = &[
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
    "x-original-url",
    "x-rewrite-url",
];

/// The parameter by which a server takes a `POST` for another method
/// (`_method=DELETE` in a form body, or in the query: Rails and every Rack
/// app (`Rack::MethodOverride`), Laravel and Symfony, Spring's
/// `HiddenHttpMethodFilter`, ASP.NET Core's `UseHttpMethodOverride`,
/// CakePHP). A `POST` naming it is out of a credential's `methods`.
pub const METHOD_PARAMETER: &[u8] = b"_method";

/// The most of a `POST`'s body the proxy holds to look for
/// [`METHOD_PARAMETER`] (1 MiB) before the request goes on: a form body
/// longer than this, or chunked, is out of a credential's `methods` unread.
pub const MAX_SCANNED_BODY: u64 = 1 << 20;

/// Whether `text` (a query or a request body, as sent) may name
/// [`METHOD_PARAMETER`]: it holds `_method`, in any case, as it is or once
/// percent-decoded (`%5Fmethod`, a multipart part's
/// `name*=UTF-8''%5Fmethod`). Read as bytes, not parsed: a form, a
/// multipart body and a JSON body (Express's method-override reading
/// `req.body._method`) alike, a false alarm only costing the substitution.
pub fn names_method_parameter(text: &[u8]) -> bool {
    let finder = memchr::memmem::Finder::new(METHOD_PARAMETER);
    let lower = text.to_ascii_lowercase();
    if finder.find(&lower).is_some() {
        return true;
    }
    let decoded: Vec<u8> = percent_encoding::percent_decode(&lower).collect();
    finder.find(&decoded.to_ascii_lowercase()).is_some()
}

/// Whether a body of `content_type` (`None`: none sent) is read as a form
/// by the servers [`METHOD_PARAMETER`] names: `application/x-www-form-urlencoded`,
/// `multipart/form-data`, or none at all (Rack parses a `POST` without one
/// as a form).
pub fn read_as_form(content_type: Option<&[u8]>) -> bool {
    let Some(ct) = content_type else {
        return true;
    };
    let essence = ct.split(|b| *b == b';').next().unwrap_or(b"").trim_ascii();
    essence.is_empty()
        || essence.eq_ignore_ascii_case(b"application/x-www-form-urlencoded")
        || essence.eq_ignore_ascii_case(b"multipart/form-data")
}

/// One credential of a job's proxy.
pub struct Credential {
    pub name: String,
    pub host: String,
    pub port: u16,
    /// The header it goes into, lowercase.
    pub header: String,
    pub phases: Vec<EgressPhase>,
    /// The job's environment variable holding the placeholder.
    pub env: String,
    pub placeholder: String,
    /// The header's value as the job sends it (the placeholder in place of
    /// `{secret}`).
    job_value: String,
    /// The methods and path prefixes the value is put into requests for
    /// (each empty: any).
    methods: Vec<String>,
    paths: Vec<String>,
    /// The header's value sent upstream.
    real_value: Secret,
    /// What the response scan replaces, longest first.
    needles: Vec<Secret>,
    /// The job's other credentials: (name, placeholder), set once all
    /// are made.
    others: std::sync::OnceLock<Vec<(String, String)>>,
    /// Toward the job: a leaf of the job's CA for the host.
    pub server: Arc<rustls::ServerConfig>,
    /// Toward the host: its certificate verified against the roots.
    pub client: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("name", &self.name)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("header", &self.header)
            .field("real_value", &self.real_value)
            .finish_non_exhaustive()
    }
}

impl Credential {
    /// Whether a CONNECT to `host:port` in `phase` is terminated for it.
    pub fn applies(&self, host: &Host, port: u16, phase: EgressPhase) -> bool {
        matches!(host, Host::Name(h) if *h == self.host)
            && port == self.port
            && self.phases.contains(&phase)
    }

    /// The real header value for a value the job sent, when it is exactly
    /// the job's form (the placeholder in the template).
    pub fn substitute(&self, value: &[u8]) -> Option<&Secret> {
        (value == self.job_value.as_bytes()).then_some(&self.real_value)
    }

    /// Whether a request `method` to `target` (as sent) with headers
    /// named `headers` gets the value: within the credential's `methods`
    /// and `paths`, and, when either is given, carrying none of the
    /// [`OVERRIDE_HEADERS`] by which a server takes the request for
    /// another method or path than its request line says.
    pub fn in_scope<'a>(
        &self,
        method: &str,
        target: &str,
        mut headers: impl Iterator<Item = &'a str>,
    ) -> bool {
        let scoped = !self.methods.is_empty() || !self.paths.is_empty();
        paddock_protocol::credential_in_scope(&self.methods, &self.paths, method, target)
            && !(scoped
                && headers.any(|name| {
                    OVERRIDE_HEADERS
                        .iter()
                        .any(|o| name.eq_ignore_ascii_case(o))
                }))
    }

    /// Whether the credential is scoped by `methods`: a `POST` may then
    /// name another method in its query or body ([`METHOD_PARAMETER`]).
    pub fn scoped_by_method(&self) -> bool {
        !self.methods.is_empty()
    }

    /// The names of the job's other credentials whose placeholder `value`
    /// holds (sent to this one's host: never substituted).
    pub fn others_in(&self, value: &[u8]) -> Vec<&str> {
        self.others
            .get()
            .map(|others| {
                others
                    .iter()
                    .filter(|(_, p)| memchr::memmem::find(value, p.as_bytes()).is_some())
                    .map(|(n, _)| n.as_str())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// What the response scan looks for.
    pub fn needles(&self) -> &[Secret] {
        &self.needles
    }

    /// What a match of `len` bytes becomes: the placeholder, cut or padded
    /// with `*` to the same length, so that the response's framing
    /// (`content-length`, chunk sizes) stays true.
    pub fn mask(&self, len: usize) -> Vec<u8> {
        let mut out: Vec<u8> = self.placeholder.bytes().take(len).collect();
        out.resize(len, b'*');
        out
    }

    /// The real value, for the tests' key scans.
    pub fn real_value(&self) -> &Secret {
        &self.real_value
    }
}

/// Every credential of one job's proxy, and the job's CA.
pub struct Credentials {
    pub list: Vec<Arc<Credential>>,
    /// The job's CA bundle: the system's roots and the job's CA, PEM.
    pub bundle: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("list", &self.list)
            .finish_non_exhaustive()
    }
}

impl Credentials {
    /// The credentials of `specs` for `job_id`: each value read from its
    /// reference, a placeholder made, the job's CA made for their hosts
    /// (valid for `valid_for`), upstream TLS verified against `system`'s
    /// roots and each one's `upstream_ca`.
    pub fn build(
        job_id: &str,
        specs: &[CredentialSpec],
        system: &Roots,
        valid_for: Duration,
    ) -> Result<Credentials, CredentialError> {
        let mut hosts = Vec::new();
        let mut parsed = Vec::new();
        for spec in specs {
            let invalid = |field, reason| CredentialError::Invalid {
                name: spec.name.clone(),
                field,
                reason,
            };
            let (host, port) = spec.destination().map_err(|r| invalid("host", r))?;
            let (before, after) = spec
                .value_parts()
                .ok_or_else(|| invalid("value", "must hold `{secret}` exactly once".to_string()))?;
            let secret =
                Secret::resolve(SecretKind::Credential, &spec.secret).map_err(|source| {
                    CredentialError::Secret {
                        name: spec.name.clone(),
                        source,
                    }
                })?;
            hosts.push(host.clone());
            parsed.push((spec, host, port, before, after, secret));
        }
        let first = specs.first().map(|s| s.name.clone()).unwrap_or_default();
        let ca = JobCa::new(job_id, &hosts, valid_for).map_err(|source| CredentialError::Ca {
            name: first,
            source,
        })?;
        let mut list = Vec::new();
        for (spec, host, port, before, after, secret) in parsed {
            let name = spec.name.clone();
            let tls = |e: rustls::Error| CredentialError::Tls {
                name: name.clone(),
                reason: e.to_string(),
            };
            let (chain, key) = ca.leaf(&host).map_err(|source| CredentialError::Ca {
                name: name.clone(),
                source,
            })?;
            let mut server = rustls::ServerConfig::builder_with_provider(provider())
                .with_safe_default_protocol_versions()
                .map_err(tls)?
                .with_no_client_auth()
                .with_single_cert(chain, key)
                .map_err(tls)?;
            server.alpn_protocols = vec![ALPN_HTTP1.to_vec()];
            let mut roots = rustls::RootCertStore::empty();
            roots.add_parsable_certificates(system.certs.iter().cloned());
            if let Some(path) = &spec.upstream_ca {
                let extra = Roots::read(path).map_err(|source| CredentialError::UpstreamCa {
                    name: name.clone(),
                    source,
                })?;
                roots.add_parsable_certificates(extra.certs);
            }
            let mut client = rustls::ClientConfig::builder_with_provider(provider())
                .with_safe_default_protocol_versions()
                .map_err(tls)?
                .with_root_certificates(roots)
                .with_no_client_auth();
            client.alpn_protocols = vec![ALPN_HTTP1.to_vec()];
            let placeholder = format!(
                "paddock-cred-{name}-{}",
                hex::encode(rand::random::<[u8; 16]>())
            );
            let real_value = Secret::new(format!("{before}{}{after}", secret.expose()));
            list.push(Arc::new(Credential {
                needles: super::forms::forms(&secret, &spec.value),
                job_value: format!("{before}{placeholder}{after}"),
                methods: spec.methods.clone(),
                paths: spec.paths.clone(),
                real_value,
                header: spec.header.to_ascii_lowercase(),
                phases: spec.phases.clone(),
                env: spec.env.clone(),
                placeholder,
                host,
                port,
                name,
                server: Arc::new(server),
                client: Arc::new(client),
                others: std::sync::OnceLock::new(),
            }));
        }
        for c in &list {
            let others = list
                .iter()
                .filter(|o| o.name != c.name)
                .map(|o| (o.name.clone(), o.placeholder.clone()))
                .collect();
            let _ = c.others.set(others);
        }
        let mut bundle = system.pem.clone();
        if !bundle.ends_with('\n') {
            bundle.push('\n');
        }
        bundle.push_str(ca.pem());
        Ok(Credentials { list, bundle })
    }

    /// The credential a CONNECT to `host:port` in `phase` is terminated
    /// for.
    pub fn find(&self, host: &Host, port: u16, phase: EgressPhase) -> Option<&Arc<Credential>> {
        self.list.iter().find(|c| c.applies(host, port, phase))
    }

    /// The credentials whose placeholder one of `values` holds (a plain
    /// request's headers: never substituted, only named in its record).
    pub fn placeholders_in<'a>(&self, values: impl Iterator<Item = &'a [u8]> + Clone) -> Vec<&str> {
        self.list
            .iter()
            .filter(|c| {
                values
                    .clone()
                    .any(|v| memchr::memmem::find(v, c.placeholder.as_bytes()).is_some())
            })
            .map(|c| c.name.as_str())
            .collect()
    }

    /// The job's environment for them: each placeholder in its variable.
    pub fn placeholders(&self) -> Vec<(String, String)> {
        self.list
            .iter()
            .map(|c| (c.env.clone(), c.placeholder.clone()))
            .collect()
    }

    /// Every real value and form the scan looks for (for the job's
    /// redactor).
    pub fn secrets(&self) -> impl Iterator<Item = &Secret> {
        self.list.iter().flat_map(|c| c.needles.iter())
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The trust roots of the PEM certificates `pem` only (a test's
/// stand-in CA, in place of the system's roots).
pub fn roots_of(pem: &str) -> Roots {
    Roots {
        pem: pem.to_string(),
        certs: CertificateDer::pem_slice_iter(pem.as_bytes())
            .filter_map(Result::ok)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use paddock_protocol::KeyRef;

    fn spec(value: &str, secret_file: &std::path::Path) -> CredentialSpec {
        CredentialSpec {
            name: "git".into(),
            host: "git.corp.example".into(),
            header: "Authorization".into(),
            value: value.into(),
            secret: KeyRef::File(secret_file.to_path_buf()),
            env: "GIT_TOKEN".into(),
            phases: vec![EgressPhase::Setup],
            upstream_ca: None,
            methods: Vec::new(),
            paths: Vec::new(),
        }
    }

    #[test]
    fn only_the_exact_placeholder_value_in_its_own_phase_and_host_is_substituted() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "s3cr3t-token-value\n").unwrap();
        let creds = Credentials::build(
            "j1",
            &[spec("Bearer {secret}", &file)],
            &roots_of(""),
            Duration::from_secs(60),
        )
        .unwrap();
        let c = &creds.list[0];
        let p = &c.placeholder;
        assert!(
            p.starts_with("paddock-cred-git-") && p.len() == 17 + 32,
            "{p}"
        );
        assert_eq!(creds.placeholders(), vec![("GIT_TOKEN".into(), p.clone())]);
        let sub = |v: &str| c.substitute(v.as_bytes()).map(|s| s.expose().to_string());
        assert_eq!(
            [
                sub(&format!("Bearer {p}")),
                sub(&format!("Bearer {p} ")),
                sub(&format!("bearer {p}")),
                sub(p),
                sub("Bearer s3cr3t-token-value"),
            ],
            [
                Some("Bearer s3cr3t-token-value".to_string()),
                None,
                None,
                None,
                None
            ]
        );
        let host = Host::Name("git.corp.example".into());
        assert_eq!(
            [
                creds.find(&host, 443, EgressPhase::Setup).is_some(),
                creds.find(&host, 443, EgressPhase::Agent).is_some(),
                creds.find(&host, 8443, EgressPhase::Setup).is_some(),
                creds
                    .find(&Host::Name("other.example".into()), 443, EgressPhase::Setup)
                    .is_some(),
            ],
            [true, false, false, false]
        );
        assert!(creds.bundle.contains("-----BEGIN CERTIFICATE-----"));
        // Debug never shows the value.
        assert!(!format!("{creds:?}").contains("s3cr3t"));
        // Every job gets another placeholder.
        let again = Credentials::build(
            "j2",
            &[spec("Bearer {secret}", &file)],
            &roots_of(""),
            Duration::from_secs(60),
        )
        .unwrap();
        assert_ne!(again.list[0].placeholder, *p);
    }

    #[test]
    fn a_value_that_cannot_be_read_names_the_credential_and_its_reference() {
        let dir = tempfile::tempdir().unwrap();
        let mut missing = spec("Bearer {secret}", &dir.path().join("absent"));
        missing.secret = KeyRef::Env("PADDOCK_TEST_NO_SUCH_CREDENTIAL".into());
        let e = Credentials::build("j1", &[missing], &roots_of(""), Duration::from_secs(60))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "network.credentials `git`: secret env:PADDOCK_TEST_NO_SUCH_CREDENTIAL: environment variable is not set"
        );
    }

    #[test]
    fn a_basic_credential_is_scanned_for_in_every_form() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        // base64 of `user:pa55word-long`
        std::fs::write(&file, "dXNlcjpwYTU1d29yZC1sb25n").unwrap();
        let creds = Credentials::build(
            "j1",
            &[spec("Basic {secret}", &file)],
            &roots_of(""),
            Duration::from_secs(60),
        )
        .unwrap();
        let forms: Vec<String> = creds.list[0]
            .needles()
            .iter()
            .map(|s| s.expose().to_string())
            .collect();
        assert_eq!(
            forms,
            [
                // hex of the value, both cases; of the pair
                "64584E6C636A707759545531643239795A4331736232356E",
                "64584e6c636a707759545531643239795a4331736232356e",
                "757365723A70613535776F72642D6C6F6E67",
                "757365723a70613535776f72642d6c6f6e67",
                // base64 of the value, whole and at offsets 1 and 2
                "ZFhObGNqcHdZVFUxZDI5eVpDMXNiMjVu",
                "RYTmxjanB3WVRVMWQyOXlaQzFzYjI1b",
                "kWE5sY2pwd1lUVTFkMjl5WkMxc2IyNW",
                // hex of the password
                "70613535776F72642D6C6F6E67",
                "70613535776f72642d6c6f6e67",
                // the value itself (base64 of the pair), and that at offsets 1 and 2
                "dXNlcjpwYTU1d29yZC1sb25n",
                "VzZXI6cGE1NXdvcmQtbG9uZ",
                "1c2VyOnBhNTV3b3JkLWxvbm",
                // the pair percent-encoded, and as it is
                "user%3apa55word-long",
                "user%3Apa55word-long",
                "user:pa55word-long",
                // the password's base64, whole, then its core at offsets 0, 1, 2
                "cGE1NXdvcmQtbG9uZw",
                "cGE1NXdvcmQtbG9uZ",
                "wYTU1d29yZC1sb25n",
                "BhNTV3b3JkLWxvbm",
                "pa55word-long",
            ]
            .map(str::to_string)
            .to_vec()
        );
        assert_eq!(creds.list[0].mask(4), b"padd".to_vec());
        let long = creds.list[0].mask(60);
        assert_eq!((long.len(), long.ends_with(b"***")), (60, true));
    }
}
