//! Credentials for allowed hosts without entering the job
//! (docs/egress.md): the proxy terminates a tunnel to a credential's host
//! with the job's own CA, puts the real value into the one header where
//! the job sent its placeholder, verifies the host's certificate itself,
//! and scans responses for the value. Against loopback HTTPS stand-ins
//! (`git http-backend` behind rustls, `paddock_test_support::git_http`),
//! real reqwest and rustls clients, and in real jobs a real `git clone`
//! on the `sandbox` and `process` rungs, followed by a key scan of
//! everything the job and Paddock left.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use paddock::egress::credential::roots_of;
use paddock::egress::{
    Allowlist, Credentials, DenyList, EgressConfig, EgressProxy, PhaseLists, ProxyLimits,
};
use paddock_protocol::{
    CredentialSpec, EgressMethod, EgressPhase, EgressRecord, EventBody, KeyRef,
};
use paddock_test_support::dns::MockResolver;
use paddock_test_support::egress_record::{egress_record, next_record};
use paddock_test_support::git_http::GitHttpServer;
use paddock_test_support::prelude::*;
use paddock_test_support::tls;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(20);

/// A credential spec for `localhost:port`, its value in `dir/name`.
fn credential(dir: &Path, name: &str, port: u16, value: &str) -> CredentialSpec {
    let file = dir.join(name);
    std::fs::write(&file, value).unwrap();
    CredentialSpec {
        name: name.into(),
        host: format!("localhost:{port}"),
        header: "authorization".into(),
        value: "Bearer {secret}".into(),
        secret: KeyRef::File(file),
        env: format!("{}_TOKEN", name.to_ascii_uppercase()),
        phases: vec![EgressPhase::Agent],
        upstream_ca: None,
        methods: Vec::new(),
        paths: Vec::new(),
    }
}

fn port_of(url: &str) -> u16 {
    url.rsplit(':').next().unwrap().parse().unwrap()
}

/// Five loopback stand-ins behind one agent-phase proxy:
/// `alpha` and `beta` (HTTPS, each demanding its own real token, each a
/// credential whose CA the proxy trusts), `gamma` (HTTPS, a credential, its
/// CA not trusted), `delta` (plain HTTP, a credential), `other` (HTTPS, no
/// credential: an ordinary spliced tunnel).
struct Rig {
    proxy: EgressProxy,
    records: mpsc::Receiver<EgressRecord>,
    creds: Arc<Credentials>,
    alpha: GitHttpServer,
    beta: GitHttpServer,
    gamma: GitHttpServer,
    delta: GitHttpServer,
    other: GitHttpServer,
    other_ca: String,
    _dir: tempfile::TempDir,
}

const ALPHA: &str = "alpha-real-token-7f3a9c1e5b";
const BETA: &str = "beta-real-token-0d2e4f6a8c";
const DELTA: &str = "delta-real-token-1b3d5f7e9a";

impl Rig {
    async fn start() -> Rig {
        Rig::start_with(|_| {}).await
    }

    /// The rig with its credential specs changed by `adjust` first.
    async fn start_with(adjust: impl FnOnce(&mut Vec<CredentialSpec>)) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repos");
        std::fs::create_dir_all(&root).unwrap();
        let (alpha, alpha_ca) =
            GitHttpServer::start_https_requiring(&root, &format!("Bearer {ALPHA}")).await;
        let (beta, beta_ca) =
            GitHttpServer::start_https_requiring(&root, &format!("Bearer {BETA}")).await;
        let (gamma, _untrusted) = GitHttpServer::start_https(&root).await;
        let delta = GitHttpServer::start(&root, &format!("Bearer {DELTA}")).await;
        let (other, other_ca) = GitHttpServer::start_https(&root).await;
        let ports = [&alpha, &beta, &gamma, &delta, &other].map(|s| port_of(&s.url));
        let specs = vec![
            credential(dir.path(), "alpha", ports[0], ALPHA),
            credential(dir.path(), "beta", ports[1], BETA),
            credential(dir.path(), "gamma", ports[2], "gamma-real-token-2c4e6a8b0d"),
            credential(dir.path(), "delta", ports[3], DELTA),
        ];
        let mut specs = specs;
        adjust(&mut specs);
        // The trust roots the proxy verifies upstreams against: alpha's
        // and beta's CAs only (in place of the system's).
        let roots = roots_of(&format!("{alpha_ca}{beta_ca}"));
        let creds = Arc::new(
            Credentials::build("j-cred", &specs, &roots, Duration::from_secs(3600)).unwrap(),
        );
        let list: Vec<String> = ports.iter().map(|p| format!("localhost:{p}")).collect();
        let opened: Vec<SocketAddr> = ports
            .iter()
            .map(|p| SocketAddr::from(([127, 0, 0, 1], *p)))
            .collect();
        let (tx, records) = mpsc::channel(64);
        let config = EgressConfig {
            lists: PhaseLists {
                setup: Allowlist::default(),
                agent: Allowlist::parse(&list).unwrap(),
            },
            deny: DenyList::of_this_host(opened).unwrap(),
            resolver: Arc::new(MockResolver::new().with("localhost", &["127.0.0.1"])),
            limits: ProxyLimits::default(),
            phase: EgressPhase::Agent,
            credentials: Some(creds.clone()),
            in_force: Default::default(),
        };
        let proxy = EgressProxy::bind("127.0.0.1:0".parse().unwrap(), config, tx)
            .await
            .unwrap();
        Rig {
            proxy,
            records,
            creds,
            alpha,
            beta,
            gamma,
            delta,
            other,
            other_ca,
            _dir: dir,
        }
    }

    fn placeholder(&self, name: &str) -> String {
        self.creds
            .list
            .iter()
            .find(|c| c.name == name)
            .unwrap()
            .placeholder
            .clone()
    }

    /// A client as a job has one: the proxy, the job's CA bundle (and the
    /// `other` stand-in's CA, as a job trusting its own server would), no
    /// connection kept (so each record comes at once).
    fn client(&self) -> reqwest::Client {
        let bundle = format!("{}{}", self.creds.bundle, self.other_ca);
        tls::job_client(self.proxy.local_addr().unwrap(), &bundle, WAIT)
    }

    /// `GET url` with `authorization: Bearer <token>`: status and body.
    async fn get(&self, url: &str, token: &str) -> (u16, String) {
        let resp = self
            .client()
            .get(url)
            .header("authorization", format!("Bearer {token}"))
            .send()
            .await
            .unwrap();
        (resp.status().as_u16(), resp.text().await.unwrap())
    }

    async fn record(&mut self) -> EgressRecord {
        EgressRecord {
            bytes_up: 0,
            bytes_down: 0,
            ..next_record(&mut self.records, WAIT).await
        }
    }
}

fn https(server: &GitHttpServer, path: &str) -> String {
    format!("https://localhost:{}{path}", port_of(&server.url))
}

fn row(
    port: u16,
    method: EgressMethod,
    credential: Option<&str>,
    substituted: Option<u64>,
) -> EgressRecord {
    EgressRecord {
        method: Some(method),
        address: Some(format!("127.0.0.1:{port}")),
        credential: credential.map(str::to_string),
        substituted,
        ..egress_record("localhost", port)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_real_value_reaches_its_host_and_an_echo_of_it_comes_back_masked() {
    let mut rig = Rig::start().await;
    let p = rig.placeholder("alpha");
    let (status, body) = rig.get(&https(&rig.alpha, "/echo-headers"), &p).await;
    let cred = rig.creds.list.iter().find(|c| c.name == "alpha").unwrap();
    let mask = String::from_utf8(cred.mask(ALPHA.len())).unwrap();
    assert_eq!(
        (
            status,
            body.contains(&format!("authorization: Bearer {mask}\n")),
            body.contains(ALPHA),
            // What the host was asked for plain bytes.
            body.contains("accept-encoding: identity\n"),
        ),
        (200, true, false, true),
        "{body}"
    );
    assert_eq!(
        rig.alpha.authorizations(),
        vec![Some(format!("Bearer {ALPHA}"))]
    );
    let port = port_of(&rig.alpha.url);
    assert_eq!(
        rig.record().await,
        row(port, EgressMethod::Connect, Some("alpha"), Some(1))
    );
}

/// A host that pauses 200 ms in the middle of echoing the value (two
/// chunks, the value cut between them) still gets it masked whole: the
/// scan holds back what could start the value until the body's next
/// bytes, whatever the timing. A host that answers `content-encoding:
/// gzip` though asked for `identity` gets the job a readable `502`
/// (rule `content_encoding`) in place of its answer, and the record says
/// why the tunnel ended.
#[tokio::test(flavor = "multi_thread")]
async fn a_paused_echo_is_masked_and_a_compressed_answer_is_refused() {
    let mut rig = Rig::start().await;
    let p = rig.placeholder("alpha");
    let (status, body) = rig.get(&https(&rig.alpha, "/echo-slowly"), &p).await;
    let cred = rig.creds.list.iter().find(|c| c.name == "alpha").unwrap();
    let mask = String::from_utf8(cred.mask(ALPHA.len())).unwrap();
    assert_eq!(
        (
            status,
            body.contains(&format!("authorization: Bearer {mask}\n")),
            body.contains(&ALPHA[..ALPHA.len() / 2]),
            body.contains(&ALPHA[ALPHA.len() / 2..]),
        ),
        (200, true, false, false),
        "{body}"
    );
    let port = port_of(&rig.alpha.url);
    assert_eq!(
        rig.record().await,
        row(port, EgressMethod::Connect, Some("alpha"), Some(1))
    );
    let (status, body) = rig.get(&https(&rig.alpha, "/echo-gzip"), &p).await;
    let dest = format!("localhost:{port}");
    assert_eq!(
        (status, body.contains(ALPHA), body.lines().take(2).map(str::to_string).collect::<Vec<_>>()),
        (
            502,
            false,
            vec![
                format!("paddock egress proxy: {dest} refused in the agent phase: the credential host answered with content-encoding `gzip` though asked for `identity`: a coded answer could hide the credential from the proxy's scan, so it is not relayed"),
                "rule: content_encoding".to_string(),
            ]
        )
    );
    assert_eq!(
        rig.record().await,
        EgressRecord {
            rule: Some("content_encoding".into()),
            reason: Some("the credential host answered with content-encoding `gzip` though asked for `identity`: a coded answer could hide the credential from the proxy's scan, so it is not relayed".into()),
            ..row(port, EgressMethod::Connect, Some("alpha"), Some(1))
        }
    );
}

/// A placeholder sent where it does not belong stays a placeholder: to an
/// ordinary tunnel, to another credential's terminated host, and over
/// plain HTTP; the last two records name the credential whose placeholder
/// went out (an ordinary tunnel's TLS the proxy does not read).
#[tokio::test(flavor = "multi_thread")]
async fn a_placeholder_elsewhere_stays_a_placeholder() {
    let mut rig = Rig::start().await;
    let alpha = rig.placeholder("alpha");
    let delta = rig.placeholder("delta");
    // To another allowed host (an ordinary tunnel): the placeholder.
    let (status, _) = rig.get(&https(&rig.other, "/echo-headers"), &alpha).await;
    assert_eq!(status, 200);
    assert_eq!(
        rig.other.authorizations(),
        vec![Some(format!("Bearer {alpha}"))]
    );
    let other = port_of(&rig.other.url);
    assert_eq!(
        rig.record().await,
        row(other, EgressMethod::Connect, None, None)
    );
    // A's placeholder to B's host (terminated for B): unchanged, refused.
    let (status, _) = rig.get(&https(&rig.beta, "/echo-headers"), &alpha).await;
    assert_eq!(status, 401);
    assert_eq!(
        rig.beta.authorizations(),
        vec![Some(format!("Bearer {alpha}"))]
    );
    let beta = port_of(&rig.beta.url);
    assert_eq!(
        rig.record().await,
        EgressRecord {
            reason: Some("the tunnel's requests carried the placeholder of credential `alpha`, which belongs to another host, sent as it is (not substituted)".into()),
            ..row(beta, EgressMethod::Connect, Some("beta"), Some(0))
        }
    );
    // Plain HTTP to a credential's host: never substituted.
    let d = port_of(&rig.delta.url);
    let (status, _) = rig
        .get(&format!("http://localhost:{d}/echo-headers"), &delta)
        .await;
    assert_eq!(status, 401);
    assert_eq!(
        rig.delta.authorizations(),
        vec![Some(format!("Bearer {delta}"))]
    );
    // The record says which placeholder went out as it is.
    let carried = |name: &str| {
        EgressRecord {
        reason: Some(format!("the request carried the placeholder of credential `{name}` to localhost:{d} over plain HTTP, sent as it is: a credential's value goes only into HTTPS requests to its own host")),
        ..row(d, EgressMethod::Http, None, None)
    }
    };
    assert_eq!(rig.record().await, carried("delta"));
    // Another credential's placeholder to that host: the same.
    let (status, _) = rig
        .get(&format!("http://localhost:{d}/echo-headers"), &alpha)
        .await;
    assert_eq!(status, 401);
    assert_eq!(
        rig.delta.authorizations(),
        vec![
            Some(format!("Bearer {delta}")),
            Some(format!("Bearer {alpha}"))
        ]
    );
    assert_eq!(rig.record().await, carried("alpha"));
}

/// `methods` and `paths` with real clients: reqwest, and curl with
/// `--path-as-is` for a target a client would otherwise normalise. Only a
/// `GET` under `/echo-h` gets the value; a `POST` there, a `GET`
/// elsewhere, and a path that reaches `/echo-h` only textually (a `..`
/// segment, its percent-encoded form) reach the host with the
/// placeholder, as sent, and the host refuses them.
#[tokio::test(flavor = "multi_thread")]
async fn a_credential_reaches_only_its_methods_and_paths() {
    let mut rig = Rig::start_with(|specs| {
        specs[0].methods = vec!["GET".into()];
        specs[0].paths = vec!["/echo-h".into()];
    })
    .await;
    let p = rig.placeholder("alpha");
    let port = port_of(&rig.alpha.url);
    let bearer = format!("Bearer {p}");
    let send = |method: reqwest::Method, path: &str| {
        rig.client()
            .request(method, https(&rig.alpha, path))
            .header("authorization", &bearer)
            .send()
    };
    let get = send(reqwest::Method::GET, "/echo-headers").await.unwrap();
    let post = send(reqwest::Method::POST, "/echo-headers").await.unwrap();
    let elsewhere = send(reqwest::Method::GET, "/echo-slowly").await.unwrap();
    let mut statuses = vec![
        get.status().as_u16(),
        post.status().as_u16(),
        elsewhere.status().as_u16(),
    ];
    let mut records = Vec::new();
    for _ in 0..3 {
        records.push(rig.record().await);
    }
    // The three tunnels end in no set order (each when its connection
    // closes); which request got the value the host's log says, in order.
    records.sort_by_key(|r| format!("{r:?}"));
    // curl, the target sent as written.
    let bundle = rig._dir.path().join("bundle.pem");
    std::fs::write(&bundle, &rig.creds.bundle).unwrap();
    // A path a server reads as another (dot segments, encoded or with
    // path parameters: Tomcat and Spring read `..;` as `..`), and a GET
    // a server takes for a POST or for another path by a header.
    let tries = [
        ("/echo-h/../echo-headers", "x-probe: 1"),
        ("/echo-h/%2e%2e/echo-headers", "x-probe: 1"),
        ("/echo-h/..;/echo-headers", "x-probe: 1"),
        ("/echo-h/x", "X-HTTP-Method-Override: POST"),
        ("/echo-h/x", "X-Original-URL: /echo-headers"),
    ];
    for (path, header) in tries {
        let out = std::process::Command::new("curl")
            .args([
                "-sS",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--path-as-is",
            ])
            .arg("--proxy")
            .arg(format!("http://{}", rig.proxy.local_addr().unwrap()))
            .arg("--cacert")
            .arg(&bundle)
            .args(["-H", &format!("authorization: {bearer}"), "-H", header])
            .arg(https(&rig.alpha, path))
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .env_remove("NO_PROXY")
            .env_remove("no_proxy")
            .output()
            .expect("curl (a Debian package .ci/run installs)");
        assert!(out.status.success(), "{out:?}");
        statuses.push(String::from_utf8(out.stdout).unwrap().parse().unwrap());
        records.push(rig.record().await);
    }
    assert_eq!(statuses, vec![200, 401, 401, 401, 401, 401, 401, 401]);
    let real = Some(format!("Bearer {ALPHA}"));
    let held = Some(bearer.clone());
    let mut want = vec![real];
    want.resize(8, held);
    assert_eq!(rig.alpha.authorizations(), want);
    let terminated = |n| row(port, EgressMethod::Connect, Some("alpha"), Some(n));
    let mut first = vec![terminated(1), terminated(0), terminated(0)];
    first.sort_by_key(|r| format!("{r:?}"));
    first.extend((0..5).map(|_| terminated(0)));
    assert_eq!(records, first);
}

/// A WebSocket handshake (a real reqwest client sending the upgrade
/// request) to a credential host that accepts it: the `101` is not
/// relayed; the job reads a `502` saying why (rule `upgrade`), and the
/// record names the rule.
#[tokio::test(flavor = "multi_thread")]
async fn a_websocket_upgrade_on_a_credential_tunnel_is_refused_readably() {
    let mut rig = Rig::start().await;
    let p = rig.placeholder("alpha");
    let resp = rig
        .client()
        .get(https(&rig.alpha, "/echo-upgrade"))
        .header("authorization", format!("Bearer {p}"))
        .header("connection", "upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let body = resp.text().await.unwrap();
    let port = port_of(&rig.alpha.url);
    let record = rig.record().await;
    assert_eq!(
        (status, body.lines().nth(1).map(str::to_string)),
        (502, Some("rule: upgrade".to_string())),
        "{body}"
    );
    // The host took the handshake with the real value.
    assert_eq!(
        rig.alpha.authorizations(),
        vec![Some(format!("Bearer {ALPHA}"))]
    );
    assert_eq!(
        record,
        EgressRecord {
            rule: Some("upgrade".into()),
            reason: record.reason.clone(),
            ..row(port, EgressMethod::Connect, Some("alpha"), Some(1))
        }
    );
    assert!(record.reason.is_some_and(|r| r.contains("101")));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_certificate_not_from_the_trusted_roots_gets_the_job_a_readable_502() {
    let mut rig = Rig::start().await;
    let p = rig.placeholder("gamma");
    let resp = rig
        .client()
        .get(https(&rig.gamma, "/echo-headers"))
        .header("authorization", format!("Bearer {p}"))
        .send()
        .await
        .unwrap();
    let rule = resp
        .headers()
        .get("x-paddock-egress-rule")
        .map(|v| v.to_str().unwrap().to_string());
    let (status, body) = (resp.status().as_u16(), resp.text().await.unwrap());
    assert_eq!(
        (status, rule.as_deref()),
        (502, Some("upstream_tls")),
        "{body}"
    );
    assert!(
        body.contains("the host's TLS handshake failed") && body.contains("rule: upstream_tls"),
        "{body}"
    );
    // The stand-in took no request.
    assert_eq!(rig.gamma.authorizations(), Vec::<Option<String>>::new());
    let port = port_of(&rig.gamma.url);
    let rec = rig.record().await;
    assert_eq!(
        (
            rec.allowed,
            rec.rule.as_deref(),
            rec.credential.as_deref(),
            rec.substituted
        ),
        (false, Some("upstream_tls"), Some("gamma"), Some(0)),
        "{rec:?}"
    );
    assert_eq!(rec.port, port);
}

/// A raw tunnel to alpha through the proxy, then a rustls handshake
/// offering `alpn` and trusting the job's bundle: the protocol agreed on,
/// or the error.
async fn handshake(rig: &Rig, alpn: &[&[u8]]) -> Result<Option<Vec<u8>>, String> {
    let port = port_of(&rig.alpha.url);
    let mut s = tokio::net::TcpStream::connect(rig.proxy.local_addr().unwrap())
        .await
        .unwrap();
    s.write_all(
        format!("CONNECT localhost:{port} HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut head = [0u8; 39];
    s.read_exact(&mut head).await.unwrap();
    assert_eq!(&head[..], b"HTTP/1.1 200 Connection established\r\n\r\n");
    let config = tls::client_config(roots_of(&rig.creds.bundle).certs, alpn);
    let name = rustls::pki_types::ServerName::try_from("localhost".to_string()).unwrap();
    match tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, s)
        .await
    {
        Ok(tls) => Ok(tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec)),
        Err(e) => Err(e.to_string()),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_terminated_tunnel_speaks_http1_only() {
    let mut rig = Rig::start().await;
    let h2 = handshake(&rig, &[b"h2"]).await;
    assert!(h2.is_err(), "{h2:?}");
    let rec = rig.record().await;
    assert_eq!(
        (rec.allowed, rec.rule.as_deref(), rec.credential.as_deref()),
        (false, Some("tls_handshake"), Some("alpha")),
        "{rec:?}"
    );
    assert_eq!(
        handshake(&rig, &[b"h2", b"http/1.1"]).await,
        Ok(Some(b"http/1.1".to_vec()))
    );
}

/// `git clone` over HTTPS as a setup command on `rung`, from a stand-in
/// that demands the real token, the job holding only its placeholder; the
/// engine keeps its own environment in a file; then the job's directory,
/// Paddock's data (events, records, the store), its output and that
/// environment are scanned for the real value and its base64 form. The
/// profile names the value by a file, or (`by_env`) by a variable of
/// Paddock's own environment.
async fn a_git_clone_uses_a_credential_the_job_never_holds(rung: &str, by_env: bool) {
    if !program_available("git", &["--version"], "git") {
        return;
    }
    let remotes = tempfile::tempdir().unwrap();
    let dep = paddock_test_support::git::repo(remotes.path());
    std::fs::write(dep.join("hello.txt"), "hello with a credential\n").unwrap();
    git(&dep, &["add", "."]);
    git(&dep, &["commit", "-q", "-m", "hello"]);
    git(
        remotes.path(),
        &["clone", "-q", "--bare", dep.to_str().unwrap(), "dep.git"],
    );
    let token = format!("ghp_paddockRealToken{}x9Q", std::process::id());
    let (server, ca_pem) =
        GitHttpServer::start_https_requiring(remotes.path(), &format!("Bearer {token}")).await;
    let port = port_of(&server.url);
    // The value and the stand-in's CA, where only the host reads them.
    let secrets = tempfile::tempdir().unwrap();
    std::fs::write(secrets.path().join("token"), &token).unwrap();
    std::fs::write(secrets.path().join("server-ca.pem"), &ca_pem).unwrap();
    let home = Home::new();
    let at = format!("localhost:{port}");
    let reference = if by_env {
        "env:PADDOCK_TEST_CRED_TOKEN".to_string()
    } else {
        format!("file:{}", secrets.path().join("token").display())
    };
    std::fs::write(
        home.path().join("profile.toml"),
        format!(
            "id = \"egress-cred\"\n[network]\nsetup_allow = [\"{at}\"]\n\
             open_addresses = [\"127.0.0.1:{port}\", \"[::1]:{port}\"]\n\
             [[network.credentials]]\nname = \"git\"\nhost = \"{at}\"\nheader = \"authorization\"\n\
             value = \"Bearer {{secret}}\"\nsecret = \"{reference}\"\nenv = \"GIT_TOKEN\"\nphases = [\"setup\"]\n\
             upstream_ca = \"{}\"\n",
            secrets.path().join("server-ca.pem").display()
        ),
    )
    .unwrap();
    let agent = "cat \"$HOME/dep/hello.txt\" > \"$HOME/seen\"\n\
                 tr '\\0' '\\n' < /proc/self/environ > \"$HOME/engine-environ\"";
    let spec = fake_codex_job(&home, rung, agent, 120);
    let text = std::fs::read_to_string(&spec).unwrap();
    // git trusts the job's bundle through GIT_SSL_CAINFO, which the job's
    // environment sets; the header carries the placeholder.
    let clone = format!(
        "NO_PROXY= no_proxy= git -c http.extraHeader=\"Authorization: Bearer $GIT_TOKEN\" clone -q {}/dep.git \"$HOME/dep\"",
        server.url
    );
    std::fs::write(
        &spec,
        format!(
            "{text}\n[setup]\ncommands = ['''{clone}''']\nnetwork = [\"{at}\"]\ntimeout_secs = 60\n\n[policy]\nprofile = \"profile.toml\"\naccept_degraded = [\"network\"]\n"
        ),
    )
    .unwrap();
    let env: Vec<(&str, &str)> = if by_env {
        vec![("PADDOCK_TEST_CRED_TOKEN", token.as_str())]
    } else {
        vec![]
    };
    let out = home
        .paddock(&["run", "--json", "--keep", spec.to_str().unwrap()], &env)
        .await;
    let rec = record(&out);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    );
    assert_eq!(
        (rec.status, rec.reason.as_deref()),
        (
            paddock_protocol::JobStatus::Failed,
            Some("the engine exited without finishing its turn")
        ),
        "{stderr}"
    );
    let job_home = home.jobs().join(&rec.id).join("home");
    let read = |name: &str| std::fs::read_to_string(job_home.join(name)).unwrap_or_default();
    let environ = read("engine-environ");
    let placeholder = environ
        .lines()
        .find_map(|l| l.strip_prefix("GIT_TOKEN="))
        .unwrap_or_default()
        .to_string();
    let bundle = job_home.join(".paddock/egress-ca.pem");
    assert_eq!(
        (
            read("seen"),
            placeholder.starts_with("paddock-cred-git-"),
            environ.contains(&format!("GIT_SSL_CAINFO={}\n", bundle.display())),
            environ.contains(&format!("SSL_CERT_FILE={}\n", bundle.display())),
        ),
        ("hello with a credential\n".to_string(), true, true, true),
        "{environ}"
    );
    // The stand-in got the real value on every request, nothing else.
    let seen = server.authorizations();
    assert!(!seen.is_empty());
    assert_eq!(seen, vec![Some(format!("Bearer {token}")); seen.len()]);
    // The record names the credential and counts, never the value.
    let store = home.store().await;
    // The job's own DNS queries aside (`egress_record::is_own_dns`).
    let rows: Vec<EgressRecord> = store
        .egress(&rec.id)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| !paddock_test_support::egress_record::is_own_dns(r))
        .collect();
    assert!(
        rows.iter().all(|r| r.credential.as_deref() == Some("git")
            && r.allowed
            && r.phase == EgressPhase::Setup),
        "{rows:#?}"
    );
    assert_eq!(
        rows.iter().filter_map(|r| r.substituted).sum::<u64>(),
        seen.len() as u64
    );
    let events = store.events(&rec.id, 0).await.unwrap();
    assert!(events.iter().any(
        |e| matches!(&e.body, EventBody::Network(r) if r.credential.as_deref() == Some("git"))
    ));
    // The key scan: the value, its base64 form, nowhere.
    let b64 = base64::engine::general_purpose::STANDARD.encode(&token);
    for needle in [token.as_str(), b64.trim_end_matches('=')] {
        for e in &events {
            let json = serde_json::to_string(e).unwrap();
            assert!(!json.contains(needle), "{json}");
        }
        for r in &rows {
            assert!(!format!("{r:?}").contains(needle));
        }
        for dir in [home.data(), home.jobs()] {
            assert_eq!(
                files_containing(&dir, needle.as_bytes()),
                Vec::<std::path::PathBuf>::new(),
                "{needle}"
            );
        }
        assert!(!environ.contains(needle));
        assert!(!stdout.contains(needle) && !stderr.contains(needle));
    }
    // The placeholder is in the record of nothing but the job's own files.
    for e in &events {
        assert!(!serde_json::to_string(e).unwrap().contains(&placeholder));
    }
    std::fs::remove_dir_all(home.jobs().join(&rec.id)).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn sandbox_a_git_clone_uses_a_credential_the_job_never_holds() {
    if !sandbox_available() {
        return;
    }
    a_git_clone_uses_a_credential_the_job_never_holds("sandbox", false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn process_a_git_clone_uses_a_credential_the_job_never_holds() {
    a_git_clone_uses_a_credential_the_job_never_holds("process", true).await;
}

/// A host profile stored with `paddock profile add` whose credential names
/// its value by `env:` (read from the store after `paddock run`'s threads
/// exist): `paddock run` executes itself again without the variable, its
/// value handed over in a sealed memory file, before the job starts. While
/// the job runs, `/proc/<paddock pid>/environ` (the same pid) holds neither
/// the variable nor the value, and the job's `git clone` through the proxy
/// still reaches the host with the real value. Reading another process's
/// `environ` needs root here (`paddock` is non-dumpable): as anyone else
/// that half is skipped with the reason, and with `CI=true` it fails.
#[tokio::test(flavor = "multi_thread")]
async fn a_stored_profiles_env_credential_leaves_paddocks_environment() {
    const VAR: &str = "PADDOCK_TEST_STORED_CRED";
    if !program_available("git", &["--version"], "git") {
        return;
    }
    let root = nix::unistd::Uid::effective().is_root();
    if !root {
        assert!(!in_ci(), "reading paddock's /proc/<pid>/environ needs root");
        eprintln!("skipping: reading paddock's /proc/<pid>/environ needs root");
        return;
    }
    let remotes = tempfile::tempdir().unwrap();
    let dep = paddock_test_support::git::repo(remotes.path());
    std::fs::write(dep.join("hello.txt"), "hello from a stored profile\n").unwrap();
    git(&dep, &["add", "."]);
    git(&dep, &["commit", "-q", "-m", "hello"]);
    git(
        remotes.path(),
        &["clone", "-q", "--bare", dep.to_str().unwrap(), "dep.git"],
    );
    let token = format!("ghp_paddockStoredToken{}x7Z", std::process::id());
    let (server, ca_pem) =
        GitHttpServer::start_https_requiring(remotes.path(), &format!("Bearer {token}")).await;
    let port = port_of(&server.url);
    let secrets = tempfile::tempdir().unwrap();
    std::fs::write(secrets.path().join("server-ca.pem"), &ca_pem).unwrap();
    let home = Home::new();
    let at = format!("localhost:{port}");
    let profile = home.path().join("stored.toml");
    std::fs::write(
        &profile,
        format!(
            "id = \"stored-cred\"\n[network]\nsetup_allow = [\"{at}\"]\n\
             open_addresses = [\"127.0.0.1:{port}\", \"[::1]:{port}\"]\n\
             [[network.credentials]]\nname = \"git\"\nhost = \"{at}\"\nheader = \"authorization\"\n\
             value = \"Bearer {{secret}}\"\nsecret = \"env:{VAR}\"\nenv = \"GIT_TOKEN\"\nphases = [\"setup\"]\n\
             upstream_ca = \"{}\"\n",
            secrets.path().join("server-ca.pem").display()
        ),
    )
    .unwrap();
    let added = home
        .paddock(&["profile", "add", profile.to_str().unwrap()], &[])
        .await;
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    // The engine holds the job open until the test has looked.
    let agent = "cat \"$HOME/dep/hello.txt\" > \"$HOME/seen.tmp\" && mv \"$HOME/seen.tmp\" \"$HOME/seen\"\n\
                 i=0; while [ ! -e \"$HOME/go\" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done";
    let spec = fake_codex_job(&home, "process", agent, 120);
    let text = std::fs::read_to_string(&spec).unwrap();
    let clone = format!(
        "NO_PROXY= no_proxy= git -c http.extraHeader=\"Authorization: Bearer $GIT_TOKEN\" clone -q {}/dep.git \"$HOME/dep\"",
        server.url
    );
    std::fs::write(
        &spec,
        format!(
            "{text}\n[setup]\ncommands = ['''{clone}''']\nnetwork = [\"{at}\"]\ntimeout_secs = 60\n\n[policy]\nprofile = \"stored-cred\"\naccept_degraded = [\"network\"]\n"
        ),
    )
    .unwrap();
    // The spec on stdin, which the re-executed paddock cannot read again:
    // it is handed over with the value.
    let mut run = home
        .command(&["run", "--json", "-"])
        .current_dir(home.path())
        .env(VAR, &token)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = run.stdin.take().unwrap();
    stdin
        .write_all(std::fs::read_to_string(&spec).unwrap().as_bytes())
        .await
        .unwrap();
    drop(stdin);
    let pid = run.id().unwrap();
    // The job's home, once its engine has read the cloned file.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let job_home = loop {
        let found = std::fs::read_dir(home.jobs())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path().join("home"))
            .find(|h| h.join("seen").exists());
        if let Some(h) = found {
            break h;
        }
        assert!(std::time::Instant::now() < deadline, "the job never ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    std::fs::write(job_home.join("go"), "").unwrap();
    let seen = std::fs::read_to_string(job_home.join("seen")).unwrap();
    let out = run.wait_with_output().await.unwrap();
    let rec = record(&out);
    let names: Vec<String> = environ
        .split(|b| *b == 0)
        .filter_map(|e| {
            let e = String::from_utf8_lossy(e);
            e.split_once('=').map(|(k, _)| k.to_string())
        })
        .filter(|k| k == VAR || k == paddock::env_handover::HANDOVER_FD)
        .collect();
    let seen_auth = server.authorizations();
    assert_eq!(
        (
            rec.status,
            seen,
            seen_auth.is_empty(),
            seen_auth
                .iter()
                .all(|a| a.as_deref() == Some(&*format!("Bearer {token}"))),
            names,
            environ.windows(token.len()).any(|w| w == token.as_bytes()),
            String::from_utf8_lossy(&out.stderr).contains(&token),
        ),
        (
            paddock_protocol::JobStatus::Failed,
            "hello from a stored profile\n".to_string(),
            false,
            true,
            // The new image's environment: the handover's descriptor, not
            // the credential's variable.
            vec![paddock::env_handover::HANDOVER_FD.to_string()],
            false,
            false,
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A credential scoped to `GET` and `POST` under `/echo-h`: a form `POST`
/// gets the value; one a server takes for a `DELETE` by a `_method`
/// parameter (Rails and Rack, Laravel and Symfony, Spring, ASP.NET Core)
/// in its urlencoded or multipart body, or in its query, reaches the
/// host with the placeholder (curl through the proxy, as a job sends
/// them). Before, each got the real value: `POST` was in scope and the
/// body was not read.
#[tokio::test(flavor = "multi_thread")]
async fn a_method_named_in_a_form_body_is_out_of_the_methods_scope() {
    let mut rig = Rig::start_with(|specs| {
        specs[0].methods = vec!["GET".into(), "POST".into()];
        specs[0].paths = vec!["/echo-h".into()];
    })
    .await;
    let p = rig.placeholder("alpha");
    let bearer = format!("Bearer {p}");
    let bundle = rig._dir.path().join("bundle.pem");
    std::fs::write(&bundle, &rig.creds.bundle).unwrap();
    let tries: [(&str, &[&str]); 5] = [
        ("/echo-headers", &["-d", "name=x"]),
        ("/echo-headers", &["-d", "name=x&_method=DELETE"]),
        ("/echo-headers", &["--data-urlencode", "_method=DELETE"]),
        ("/echo-headers", &["-F", "_method=DELETE"]),
        ("/echo-headers?_method=DELETE", &["-X", "POST"]),
    ];
    let mut statuses = Vec::new();
    for (path, args) in tries {
        let out = std::process::Command::new("curl")
            .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}"])
            .arg("--proxy")
            .arg(format!("http://{}", rig.proxy.local_addr().unwrap()))
            .arg("--cacert")
            .arg(&bundle)
            .args(["-H", &format!("authorization: {bearer}")])
            .args(args)
            .arg(https(&rig.alpha, path))
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .env_remove("NO_PROXY")
            .env_remove("no_proxy")
            .output()
            .expect("curl (a Debian package .ci/run installs)");
        assert!(out.status.success(), "{out:?}");
        statuses.push(
            String::from_utf8(out.stdout)
                .unwrap()
                .parse::<u16>()
                .unwrap(),
        );
        rig.record().await;
    }
    let mut want = vec![Some(format!("Bearer {ALPHA}"))];
    want.resize(5, Some(bearer.clone()));
    assert_eq!(
        (statuses, rig.alpha.authorizations()),
        (vec![200, 401, 401, 401, 401], want)
    );
}
