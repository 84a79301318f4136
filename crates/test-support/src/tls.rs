//! TLS as a job's client speaks it, for tests of the egress proxy: a
//! minimal but well-formed ClientHello with a chosen server name and
//! extensions, framed in records of a chosen size; a real HTTPS client
//! set up as a job's is ([`job_client`]); and a TLS client's configuration
//! trusting a job's CA alone ([`client_config`]).

/// A minimal ClientHello (TLS 1.2 record framing) with `sni` and the
/// extra extensions `(type, data)`, split into records of `record_len`
/// bytes: what tests send through a tunnel.
pub fn client_hello(sni: Option<&str>, extra: &[(u16, Vec<u8>)], record_len: usize) -> Vec<u8> {
    let mut exts = Vec::new();
    let mut push = |kind: u16, data: &[u8]| {
        exts.extend_from_slice(&kind.to_be_bytes());
        exts.extend_from_slice(&(data.len() as u16).to_be_bytes());
        exts.extend_from_slice(data);
    };
    if let Some(name) = sni {
        let mut entry = vec![0u8];
        entry.extend_from_slice(&(name.len() as u16).to_be_bytes());
        entry.extend_from_slice(name.as_bytes());
        let mut list = (entry.len() as u16).to_be_bytes().to_vec();
        list.extend_from_slice(&entry);
        push(0u16, &list);
    }
    for (kind, data) in extra {
        push(*kind, data);
    }
    let mut body = vec![3, 3];
    body.extend_from_slice(&[7; 32]);
    body.push(0);
    body.extend_from_slice(&[0, 2, 0x13, 0x01]);
    body.extend_from_slice(&[1, 0]);
    body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
    body.extend_from_slice(&exts);
    let mut handshake = vec![1u8];
    handshake.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    handshake.extend_from_slice(&body);
    let mut out = Vec::new();
    for part in handshake.chunks(record_len) {
        out.extend_from_slice(&[22, 3, 1]);
        out.extend_from_slice(&(part.len() as u16).to_be_bytes());
        out.extend_from_slice(part);
    }
    out
}

/// A TLS client's configuration trusting only `roots` (a job's CA bundle
/// as read: the proxy's CA), offering the protocols `alpn`.
pub fn client_config(
    roots: Vec<rustls::pki_types::CertificateDer<'static>>,
    alpn: &[&[u8]],
) -> rustls::ClientConfig {
    let mut store = rustls::RootCertStore::empty();
    store.add_parsable_certificates(roots);
    let mut config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(store)
    .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config
}

/// A real HTTPS client as a job has one: every request through the proxy
/// at `proxy`, trusting only the certificates of `pem_bundle` (the job's
/// CA bundle, with whatever else the test trusts), no connection kept
/// between requests (each one a new tunnel, so its record comes at once),
/// each request given `timeout`.
pub fn job_client(
    proxy: std::net::SocketAddr,
    pem_bundle: &str,
    timeout: std::time::Duration,
) -> reqwest::Client {
    let mut b = reqwest::Client::builder()
        .proxy(reqwest::Proxy::all(format!("http://{proxy}")).expect("proxy URL"))
        .tls_built_in_root_certs(false)
        .pool_max_idle_per_host(0)
        .timeout(timeout);
    for cert in reqwest::Certificate::from_pem_bundle(pem_bundle.as_bytes()).expect("PEM bundle") {
        b = b.add_root_certificate(cert);
    }
    b.build().expect("HTTPS client")
}
