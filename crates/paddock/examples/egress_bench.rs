//! The egress proxy's cost (issue #15), run by `scripts/bench-egress`:
//! added latency per request (a plain HTTP request, and a CONNECT tunnel's
//! set-up with its ClientHello and a request inside) and the throughput of
//! one large download through a tunnel, against the same loopback server
//! reached directly, through Paddock's proxy on TCP, through the sandbox's
//! forwarder in front of Paddock's proxy on a Unix socket (the sandbox
//! rung's path: the forwarder hands each connection to the proxy, which
//! relays it once), and through srt's proxy when the script started one
//! (`--srt`), and through other relays the script started (`--relay`:
//! the floor, a minimal C `splice(2)` relay). Rounds interleave the paths
//! so the machine's load hits all alike; the load average is printed
//! before and after. Besides the rates, the CPU time spent per GiB
//! downloaded on each path: this process's threads (the server, the
//! client, Paddock's proxy and the forwarder all run here) plus the
//! external relay's process; the direct path's figure is what the server
//! and the client cost, so a path's CPU minus direct's is its relay's
//! cost, the figure that does not depend on how busy the machine is.
//! Last, real HTTPS requests (reqwest and rustls against a loopback
//! HTTPS server with its own CA) directly, through an ordinary spliced
//! tunnel, and through a tunnel the proxy terminates for a credential
//! (its own TLS both ways, the header substituted, the answer scanned),
//! with the proxy's kept upstream connection and without one (its pool
//! emptied before each request: a job's first tunnel to the host): each
//! on a new connection and on a kept one, which is what a credential
//! costs per request. The download also goes through the proxy with
//! fixed socket buffers (`ProxyLimits::socket_buffer`, 1 and 4 MiB) and
//! with its socket to the job sending with the host's own congestion
//! control (`ProxyLimits::unpaced_loopback` off) beside its default. Prints Markdown for BENCHMARKS.md.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use paddock::egress::credential::roots_of;
use paddock::egress::{
    Allowlist, Credentials, DenyList, EgressConfig, EgressProxy, PhaseLists, ProxyLimits, Resolver,
};
use paddock_protocol::{CredentialSpec, EgressPhase, KeyRef};
use paddock_test_support::bench::loadavg;
use paddock_test_support::git_http::{GitHttpServer, HttpsWrites};
use paddock_test_support::tls::client_hello;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const SMALL_ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok";

struct Args {
    requests: usize,
    mb: usize,
    runs: usize,
    /// srt's proxy, started by `scripts/bench-egress`, and its pid when
    /// given (`--srt ADDR[/PID]`).
    srt: Option<(SocketAddr, Option<u32>)>,
    /// Other relays, CONNECT only (no plain HTTP): name, address, and the
    /// pid whose CPU time counts as theirs (`--relay NAME=ADDR/PID`).
    relays: Vec<(String, SocketAddr, u32)>,
    /// Only one part (`--only https`: the HTTPS requests, `requests` of
    /// each; `--only shaped`: the downloads over shaped links; `--only
    /// download`: the loopback downloads, no latency rows).
    only: Option<String>,
}

fn args() -> Args {
    let mut a = Args {
        requests: 2000,
        mb: 100,
        runs: 5,
        srt: None,
        relays: Vec::new(),
        only: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_default();
        let number = || value.parse().expect("a number");
        match flag.as_str() {
            "--requests" => a.requests = number(),
            "--mb" => a.mb = number(),
            "--runs" => a.runs = number(),
            "--srt" => {
                let (addr, pid) = match value.split_once('/') {
                    Some((addr, pid)) => (addr, Some(pid.parse().expect("--srt's pid"))),
                    None => (value.as_str(), None),
                };
                a.srt = Some((addr.parse().expect("--srt HOST:PORT[/PID]"), pid));
            }
            "--only" if ["https", "shaped", "download"].contains(&value.as_str()) => {
                a.only = Some(value)
            }
            "--relay" => {
                let (name, rest) = value.split_once('=').expect("--relay NAME=ADDR/PID");
                let (addr, pid) = rest.split_once('/').expect("--relay NAME=ADDR/PID");
                a.relays.push((
                    name.to_string(),
                    addr.parse().expect("--relay's address"),
                    pid.parse().expect("--relay's pid"),
                ));
            }
            _ => {
                println!(
                    "usage: egress_bench [--requests N] [--mb MB] [--runs N] [--srt HOST:PORT[/PID]] [--relay NAME=HOST:PORT/PID]... [--only https|shaped|download]"
                );
                std::process::exit(2);
            }
        }
    }
    a
}

/// Every name of the bench → one address.
struct ResolveTo(IpAddr);

#[async_trait::async_trait]
impl Resolver for ResolveTo {
    async fn resolve(&self, _host: &str) -> std::io::Result<Vec<IpAddr>> {
        Ok(vec![self.0])
    }
}

/// Answers each request head with a two-byte body.
async fn small_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut c, _) = l.accept().await.unwrap();
            let _ = c.set_nodelay(true);
            tokio::spawn(async move {
                let mut got = Vec::new();
                let mut buf = [0u8; 4096];
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match c.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = c.write_all(SMALL_ANSWER).await;
                let _ = c.shutdown().await;
            });
        }
    });
    addr
}

/// Sends `mb` MiB after the first bytes arrive.
async fn bulk_server(mb: usize) -> SocketAddr {
    bulk_serve(TcpListener::bind("127.0.0.1:0").await.unwrap(), mb).0
}

/// Serves `mb` MiB on `l` to each connection after its first bytes.
fn bulk_serve(l: TcpListener, mb: usize) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let addr = l.local_addr().unwrap();
    let task = tokio::spawn(async move {
        loop {
            let (mut c, _) = l.accept().await.unwrap();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                if c.read(&mut buf).await.unwrap_or(0) == 0 {
                    return;
                }
                let chunk = vec![7u8; 1 << 20];
                for _ in 0..mb {
                    if c.write_all(&chunk).await.is_err() {
                        return;
                    }
                }
                let _ = c.shutdown().await;
            });
        }
    });
    (addr, task)
}

async fn read_all(mut s: TcpStream) -> Vec<u8> {
    let mut buf = vec![0u8; 1 << 16];
    let mut got = Vec::new();
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return got,
            Ok(k) => got.extend_from_slice(&buf[..k]),
        }
    }
}

async fn count_all(mut s: TcpStream) -> usize {
    let mut buf = vec![0u8; 1 << 16];
    let mut n = 0;
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return n,
            Ok(k) => n += k,
        }
    }
}

/// An answer of the small server, whoever relayed it (srt's proxy
/// rewrites the head of a plain HTTP answer).
fn small_answer(got: &[u8]) -> bool {
    got.starts_with(b"HTTP/1.1 200") && got.ends_with(b"\r\n\r\nok")
}

/// Opens a tunnel to `authority` through `proxy`.
async fn tunnel(proxy: SocketAddr, authority: &str) -> TcpStream {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.set_nodelay(true).unwrap();
    s.write_all(format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut byte).await.unwrap(), 1, "the proxy hung up");
        head.push(byte[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 200"), "tunnel refused");
    s
}

/// How a request reaches the server: directly, or through a proxy at
/// this address (Paddock's on TCP, the sandbox's forwarder in front of
/// Paddock's on a Unix socket, srt's).
#[derive(Clone, Copy)]
enum Path {
    Direct,
    Via(SocketAddr),
}

async fn one_plain(path: Path, server: SocketAddr) -> Duration {
    let t = Instant::now();
    let (to, req) = match path {
        Path::Direct => (
            server,
            "GET / HTTP/1.1\r\nHost: web.bench\r\nConnection: close\r\n\r\n".to_string(),
        ),
        Path::Via(proxy) => (
            proxy,
            format!(
                "GET http://web.bench:{p}/ HTTP/1.1\r\nHost: web.bench:{p}\r\nConnection: close\r\n\r\n",
                p = server.port()
            ),
        ),
    };
    let mut s = TcpStream::connect(to).await.unwrap();
    s.set_nodelay(true).unwrap();
    s.write_all(req.as_bytes()).await.unwrap();
    assert!(small_answer(&read_all(s).await), "not the small answer");
    t.elapsed()
}

async fn one_tunnel(path: Path, server: SocketAddr, hello: &[u8]) -> Duration {
    let t = Instant::now();
    let mut s = match path {
        Path::Direct => {
            let s = TcpStream::connect(server).await.unwrap();
            s.set_nodelay(true).unwrap();
            s
        }
        Path::Via(proxy) => tunnel(proxy, &format!("web.bench:{}", server.port())).await,
    };
    let mut first = hello.to_vec();
    first.extend_from_slice(b"GET / HTTP/1.1\r\nHost: web.bench\r\n\r\n");
    s.write_all(&first).await.unwrap();
    assert_eq!(read_all(s).await, SMALL_ANSWER, "not the small answer");
    t.elapsed()
}

async fn one_download(path: Path, server: SocketAddr, hello: &[u8]) -> (usize, Duration) {
    let t = Instant::now();
    let mut s = match path {
        Path::Direct => TcpStream::connect(server).await.unwrap(),
        Path::Via(proxy) => tunnel(proxy, &format!("bulk.bench:{}", server.port())).await,
    };
    s.write_all(hello).await.unwrap();
    let n = count_all(s).await;
    (n, t.elapsed())
}

/// The CPU time of every thread of process `pid` so far, in nanoseconds
/// (`/proc/PID/task/*/schedstat`'s first field).
fn cpu_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn config(small: SocketAddr, bulk: SocketAddr) -> EgressConfig {
    config_with(small, bulk, ProxyLimits::default())
}

fn config_with(small: SocketAddr, bulk: SocketAddr, limits: ProxyLimits) -> EgressConfig {
    EgressConfig {
        lists: PhaseLists {
            setup: Allowlist::default(),
            agent: Allowlist::parse(&[
                format!("web.bench:{}", small.port()),
                format!("bulk.bench:{}", bulk.port()),
            ])
            .unwrap(),
        },
        deny: DenyList::new([], [small, bulk]),
        resolver: Arc::new(ResolveTo(Ipv4Addr::LOCALHOST.into())),
        limits,
        phase: EgressPhase::Agent,
        credentials: None,
        in_force: Default::default(),
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let a = args();
    let load_before = loadavg();
    match a.only.as_deref() {
        Some("https") => {
            println!("egress proxy bench, HTTPS requests only: {} per path; load average before: {load_before}", a.requests);
            https_hosts(a.requests).await;
            println!("\nload average after: {}", loadavg());
            return;
        }
        Some("shaped") => {
            println!("egress proxy bench, downloads over shaped links only; load average before: {load_before}");
            shaped_downloads(a.mb, a.runs).await;
            println!("\nload average after: {}", loadavg());
            return;
        }
        _ => {}
    }
    let downloads_only = a.only.is_some();
    let small = small_server().await;
    let bulk = bulk_server(a.mb).await;
    let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
    tokio::spawn(async move { while rx.recv().await.is_some() {} });
    // Paddock's proxy on loopback TCP (the `process` rung).
    let proxy = EgressProxy::bind(
        "127.0.0.1:0".parse().unwrap(),
        config(small, bulk),
        tx.clone(),
    )
    .await
    .unwrap();
    // The same proxy with its socket to the job sending with the host's
    // default congestion control (an A/B of `ProxyLimits::unpaced_loopback`,
    // on by default: size 0), and with fixed socket buffers on both legs
    // (an A/B of `ProxyLimits::socket_buffer`; the default leaves the
    // kernel's own sizing).
    let mut buffered = Vec::new();
    for size in [0usize, 1 << 20, 4 << 20] {
        let limits = ProxyLimits {
            socket_buffer: (size > 0).then_some(size),
            unpaced_loopback: size != 0,
            ..ProxyLimits::default()
        };
        let p = EgressProxy::bind(
            "127.0.0.1:0".parse().unwrap(),
            config_with(small, bulk, limits),
            tx.clone(),
        )
        .await
        .unwrap();
        buffered.push((size, p));
    }
    // The `sandbox` rung's path: the sandbox's forwarder (a thread of the
    // helper, here of this process) handing each loopback TCP connection
    // to the proxy's Unix socket, which serves it directly.
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("egress.sock");
    let _unix_proxy = EgressProxy::bind_unix(&sock, config(small, bulk), tx).unwrap();
    let forwarder = paddock_sandbox::net::bind_forwarder(0, &sock).unwrap();
    let forwarded = forwarder.local_addr().unwrap();
    paddock_sandbox::net::serve_handoff(forwarder, sock.clone());

    // Each path, the external process whose CPU time is its relay's, and
    // whether it relays plain HTTP.
    let mut paths: Vec<(String, Path, Option<u32>, bool)> = vec![
        ("direct".into(), Path::Direct, None, true),
        (
            "Paddock proxy".into(),
            Path::Via(proxy.local_addr().expect("a TCP proxy")),
            None,
            true,
        ),
        (
            "forwarder + Paddock proxy".into(),
            Path::Via(forwarded),
            None,
            true,
        ),
    ];
    for (size, p) in &buffered {
        paths.push((
            if *size == 0 {
                "Paddock proxy, job leg with the host's congestion control".to_string()
            } else {
                format!("Paddock proxy, SO_RCVBUF/SO_SNDBUF {} MiB", size >> 20)
            },
            Path::Via(p.local_addr().expect("a TCP proxy")),
            None,
            true,
        ));
    }
    if let Some((srt, pid)) = a.srt {
        paths.push(("srt proxy".into(), Path::Via(srt), pid, true));
    }
    for (name, addr, pid) in &a.relays {
        paths.push((name.clone(), Path::Via(*addr), Some(*pid), false));
    }
    let me = std::process::id();
    let hello = client_hello(Some("web.bench"), &[], 16384);
    let bulk_hello = client_hello(Some("bulk.bench"), &[], 16384);

    println!("egress proxy bench: {} requests per path, a {} MiB download × {} runs, paths interleaved; load average before: {load_before}\n", a.requests, a.mb, a.runs);
    println!("| request | path | p50 | added p50 | p99 |");
    println!("| --- | --- | ---: | ---: | ---: |");
    let kinds: &[&str] = if downloads_only {
        &[]
    } else {
        &["plain HTTP", "CONNECT + TLS hello"]
    };
    for &kind in kinds {
        let mut times: Vec<Vec<Duration>> = vec![Vec::new(); paths.len()];
        for _ in 0..a.requests {
            for (i, (_, path, _, plain)) in paths.iter().enumerate() {
                if kind == "plain HTTP" && !plain {
                    continue;
                }
                let t = match kind {
                    "plain HTTP" => one_plain(*path, small).await,
                    _ => one_tunnel(*path, small, &hello).await,
                };
                times[i].push(t);
            }
        }
        for t in &mut times {
            t.sort();
        }
        let direct = micros(percentile(&times[0], 0.5));
        for (i, (name, _, _, _)) in paths.iter().enumerate() {
            if times[i].is_empty() {
                continue;
            }
            let p50 = micros(percentile(&times[i], 0.5));
            println!(
                "| {kind} | {name} | {p50:.0} µs | {:.0} µs | {:.0} µs |",
                p50 - direct,
                micros(percentile(&times[i], 0.99)),
            );
        }
    }
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); paths.len()];
    // CPU nanoseconds per GiB, this process's and the external relay's.
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); paths.len()];
    for _ in 0..a.runs {
        for (i, (_, path, pid, _)) in paths.iter().enumerate() {
            let cpu_before = cpu_ns(me) + pid.map_or(0, cpu_ns);
            let (n, t) = one_download(*path, bulk, &bulk_hello).await;
            let spent = (cpu_ns(me) + pid.map_or(0, cpu_ns)).saturating_sub(cpu_before);
            assert_eq!(n, a.mb << 20, "a short download");
            rates[i].push(n as f64 / (1 << 20) as f64 / t.as_secs_f64());
            cpu[i].push(spent as f64 / (n as f64 / (1u64 << 30) as f64));
        }
    }
    let medians: Vec<f64> = rates.iter_mut().map(|r| median(r)).collect();
    let cpu: Vec<f64> = cpu.iter_mut().map(|c| median(c) / 1e6).collect();
    println!(
        "\n| {} MiB download through a tunnel, median of {} | MiB/s | / direct | CPU ms per GiB (all) | the relay's CPU ms per GiB (all − direct) |",
        a.mb, a.runs
    );
    println!("| --- | ---: | ---: | ---: | ---: |");
    for (i, (name, _, _, _)) in paths.iter().enumerate() {
        println!(
            "| {name} | {:.0} | {:.0} % | {:.0} | {:.0} |",
            medians[i],
            100.0 * medians[i] / medians[0],
            cpu[i],
            cpu[i] - cpu[0],
        );
    }
    if !downloads_only {
        shaped_downloads(a.mb, a.runs).await;
        https_hosts(a.requests / 4).await;
    }
    println!("\nload average after: {}", loadavg());
}

/// The real value the HTTPS server demands (`Bearer REAL`).
const REAL: &str = "bench-real-token-5e8c2a9f4d7b1036";

/// [`https_latency`] against a host that sets `TCP_NODELAY` (as most
/// do) and against one that leaves Nagle on.
async fn https_hosts(requests: usize) {
    for (host, writes) in [
        ("host sets TCP_NODELAY", HttpsWrites::default()),
        (
            "host without TCP_NODELAY",
            HttpsWrites {
                nodelay: false,
                max_write: None,
            },
        ),
    ] {
        https_latency(requests, host, writes).await;
    }
}

/// A real HTTPS request (`GET /echo-headers`, its answer the request's
/// headers) directly, through a spliced tunnel, and through a terminated
/// one with the header substituted; `requests` of each, interleaved,
/// each on a new connection and then on one kept connection, against a
/// host writing as `writes` says.
async fn https_latency(requests: usize, host: &str, writes: HttpsWrites) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repos");
    std::fs::create_dir_all(&root).unwrap();
    let (server, ca) =
        GitHttpServer::start_https_writing(&root, &format!("Bearer {REAL}"), writes).await;
    let port = server.port();
    eprintln!("HTTPS host ({host}) on 127.0.0.1:{port}");
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let secret = dir.path().join("token");
    std::fs::write(&secret, REAL).unwrap();
    let spec = CredentialSpec {
        name: "bench".into(),
        host: format!("localhost:{port}"),
        header: "authorization".into(),
        value: "Bearer {secret}".into(),
        secret: KeyRef::File(secret),
        env: "BENCH_TOKEN".into(),
        phases: vec![EgressPhase::Agent],
        upstream_ca: None,
        methods: Vec::new(),
        paths: Vec::new(),
    };
    let creds = Arc::new(
        Credentials::build("bench", &[spec], &roots_of(&ca), Duration::from_secs(3600)).unwrap(),
    );
    let placeholder = creds.list[0].placeholder.clone();
    let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
    tokio::spawn(async move { while rx.recv().await.is_some() {} });
    let config = |credentials: Option<Arc<Credentials>>| EgressConfig {
        lists: PhaseLists {
            setup: Allowlist::default(),
            agent: Allowlist::parse(&[format!("localhost:{port}")]).unwrap(),
        },
        deny: DenyList::new([], [addr]),
        resolver: Arc::new(ResolveTo(Ipv4Addr::LOCALHOST.into())),
        limits: ProxyLimits::default(),
        phase: EgressPhase::Agent,
        credentials,
        in_force: Default::default(),
    };
    let spliced = EgressProxy::bind("127.0.0.1:0".parse().unwrap(), config(None), tx.clone())
        .await
        .unwrap();
    let terminated = EgressProxy::bind(
        "127.0.0.1:0".parse().unwrap(),
        config(Some(creds.clone())),
        tx.clone(),
    )
    .await
    .unwrap();
    // The same, its kept connections closed before each request (a phase
    // switch there and back): every tunnel makes its own connection and
    // handshake to the server, as a job's first tunnel to a host does.
    let unkept = EgressProxy::bind(
        "127.0.0.1:0".parse().unwrap(),
        config(Some(creds.clone())),
        tx,
    )
    .await
    .unwrap();
    // name, proxy, the CA bundle the client trusts, the token it sends.
    let paths = [
        ("direct", None, ca.clone(), REAL.to_string()),
        (
            "spliced tunnel",
            spliced.local_addr(),
            ca.clone(),
            REAL.to_string(),
        ),
        (
            "terminated tunnel (credential substituted, answer scanned)",
            terminated.local_addr(),
            creds.bundle.clone(),
            placeholder.clone(),
        ),
        (
            "terminated tunnel, no kept upstream connection (a job's first tunnel to the host)",
            unkept.local_addr(),
            creds.bundle.clone(),
            placeholder,
        ),
    ];
    let url = format!("https://localhost:{port}/echo-headers");
    println!(
        "\n| HTTPS request (reqwest + rustls, `GET /echo-headers`), {requests} each, interleaved, {host} | path | p50 | added p50 | p99 |"
    );
    println!("| --- | --- | ---: | ---: | ---: |");
    for kept in [false, true] {
        let clients: Vec<reqwest::Client> = paths
            .iter()
            .map(|(_, proxy, bundle, _)| {
                let mut b = reqwest::Client::builder()
                    .tls_built_in_root_certs(false)
                    .no_proxy();
                if !kept {
                    b = b.pool_max_idle_per_host(0);
                }
                if let Some(p) = proxy {
                    b = b.proxy(reqwest::Proxy::all(format!("http://{p}")).unwrap());
                }
                for cert in reqwest::Certificate::from_pem_bundle(bundle.as_bytes()).unwrap() {
                    b = b.add_root_certificate(cert);
                }
                b.build().unwrap()
            })
            .collect();
        let mut times: Vec<Vec<Duration>> = vec![Vec::new(); paths.len()];
        // One unmeasured request each: a kept connection is open after it.
        for round in 0..=requests {
            for (i, (client, (_, _, _, token))) in clients.iter().zip(&paths).enumerate() {
                if i == 3 && !kept {
                    unkept.switch(EgressPhase::Setup);
                    unkept.switch(EgressPhase::Agent);
                }
                let t = Instant::now();
                let resp = client
                    .get(&url)
                    .header("authorization", format!("Bearer {token}"))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(resp.status().as_u16(), 200, "{}", paths[i].0);
                let body = resp.bytes().await.unwrap();
                assert!(!body.windows(REAL.len()).any(|w| w == REAL.as_bytes()) || i < 2);
                if round > 0 {
                    times[i].push(t.elapsed());
                }
            }
        }
        for t in &mut times {
            t.sort();
        }
        let direct = micros(percentile(&times[0], 0.5));
        let how = if kept {
            "kept connection"
        } else {
            "new connection"
        };
        for (i, (name, _, _, _)) in paths.iter().enumerate() {
            let p50 = micros(percentile(&times[i], 0.5));
            println!(
                "| {how} | {name} | {p50:.0} µs | {:.0} µs | {:.0} µs |",
                p50 - direct,
                micros(percentile(&times[i], 0.99)),
            );
        }
    }
}

/// A veth pair from this network namespace to one the bench makes, the
/// namespace's end shaped by `tc` (a token bucket at `mbit` Mbit/s), for
/// a server that sits behind a real link rather than on loopback. Only
/// what the bench made is touched: the namespace (its name carries the
/// bench's pid) is deleted when this is dropped, which removes the pair.
struct ShapedLink {
    netns: String,
    /// The server's address inside the namespace.
    server_ip: Ipv4Addr,
}

/// Runs one `ip`/`tc` command; what it said when it failed.
fn run(args: &[&str]) -> Result<(), String> {
    let out = std::process::Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Why the shaped links cannot be made here, if they cannot.
fn shaped_unavailable() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("not root (a network namespace, a veth pair and tc need it)".into());
    }
    for tool in ["ip", "tc"] {
        if which::which(tool).is_err() {
            return Some(format!("`{tool}` is not installed (iproute2)"));
        }
    }
    None
}

impl ShapedLink {
    /// The `n`th link, shaped to `mbit`.
    fn make(n: u8, mbit: u64) -> Result<ShapedLink, String> {
        let pid = std::process::id();
        let netns = format!("paddock-bench-{pid}-{n}");
        run(&["ip", "netns", "add", &netns])?;
        // From here on, dropping it deletes what was made.
        let link = ShapedLink {
            netns,
            server_ip: Ipv4Addr::new(10, 231, 200 + n, 2),
        };
        let (outer, inner) = (format!("pbo{pid}x{n}"), format!("pbi{pid}x{n}"));
        let ns = link.netns.as_str();
        let host_cidr = format!("10.231.{}.1/30", 200 + n);
        let server_cidr = format!("{}/30", link.server_ip);
        // tbf needs a bucket of at least what one timer tick sends (HZ
        // 100 at worst): twice that.
        let burst = format!("{}", mbit * 1_000_000 / 8 / 100 * 2);
        let rate = format!("{mbit}mbit");
        for cmd in [
            vec![
                "ip", "link", "add", &outer, "type", "veth", "peer", "name", &inner, "netns", ns,
            ],
            vec!["ip", "addr", "add", &host_cidr, "dev", &outer],
            vec!["ip", "link", "set", &outer, "up"],
            vec!["ip", "-n", ns, "addr", "add", &server_cidr, "dev", &inner],
            vec!["ip", "-n", ns, "link", "set", &inner, "up"],
            vec!["ip", "-n", ns, "link", "set", "lo", "up"],
            vec![
                "tc", "-n", ns, "qdisc", "add", "dev", &inner, "root", "tbf", "rate", &rate,
                "burst", &burst, "latency", "50ms",
            ],
        ] {
            run(&cmd)?;
        }
        Ok(link)
    }

    /// A listener on the server's address, inside the namespace (made on
    /// a thread of its own that enters the namespace; the socket stays in
    /// it).
    fn listen(&self) -> std::io::Result<std::net::TcpListener> {
        let path = format!("/run/netns/{}", self.netns);
        let ip = self.server_ip;
        std::thread::spawn(move || {
            let ns = std::fs::File::open(&path)?;
            nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(std::io::Error::from)?;
            std::net::TcpListener::bind((ip, 0))
        })
        .join()
        .expect("the namespace's thread")
    }
}

impl Drop for ShapedLink {
    fn drop(&mut self) {
        if let Err(e) = run(&["ip", "netns", "del", &self.netns]) {
            eprintln!("egress_bench: {e}");
        }
    }
}

/// The proxy's configuration for the bulk server at `bulk` (reached by
/// the name `bulk.bench`, its address opened).
fn bulk_config(bulk: SocketAddr) -> EgressConfig {
    EgressConfig {
        lists: PhaseLists {
            setup: Allowlist::default(),
            agent: Allowlist::parse(&[format!("bulk.bench:{}", bulk.port())]).unwrap(),
        },
        deny: DenyList::new([], [bulk]),
        resolver: Arc::new(ResolveTo(bulk.ip())),
        limits: ProxyLimits::default(),
        phase: EgressPhase::Agent,
        credentials: None,
        in_force: Default::default(),
    }
}

/// The download of `mb` MiB from a server behind a link shaped to 1 and
/// to 10 Gbit/s (a veth pair to a network namespace the bench makes; root
/// only, skipped with the reason otherwise): directly, through Paddock's
/// proxy, and through the sandbox's forwarder and the proxy, `runs`
/// rounds interleaved. What a job's download crosses in real life, where
/// loopback measures the relay against a path with no link at all.
async fn shaped_downloads(mb: usize, runs: usize) {
    if let Some(why) = shaped_unavailable() {
        println!("\nDownloads over shaped links: skipped: {why}");
        return;
    }
    println!(
        "\n| {mb} MiB download, the server behind a veth pair shaped by tc (tbf), median of {runs} | direct MiB/s | Paddock proxy / direct | forwarder + Paddock proxy / direct |"
    );
    println!("| --- | ---: | ---: | ---: |");
    let hello = client_hello(Some("bulk.bench"), &[], 16384);
    for (n, mbit) in [(0u8, 1_000u64), (1, 10_000)] {
        let link = match ShapedLink::make(n, mbit) {
            Ok(link) => link,
            Err(e) => {
                println!("| {mbit} Mbit/s | not made: {e} | | |");
                continue;
            }
        };
        let listener = link.listen().unwrap();
        listener.set_nonblocking(true).unwrap();
        let (bulk, server) = bulk_serve(TcpListener::from_std(listener).unwrap(), mb);
        let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
        tokio::spawn(async move { while rx.recv().await.is_some() {} });
        let proxy = EgressProxy::bind(
            "127.0.0.1:0".parse().unwrap(),
            bulk_config(bulk),
            tx.clone(),
        )
        .await
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("egress.sock");
        let unix_proxy = EgressProxy::bind_unix(&sock, bulk_config(bulk), tx).unwrap();
        let forwarder = paddock_sandbox::net::bind_forwarder(0, &sock).unwrap();
        let forwarded = forwarder.local_addr().unwrap();
        paddock_sandbox::net::serve_handoff(forwarder, sock.clone());
        let paths = [
            Path::Direct,
            Path::Via(proxy.local_addr().expect("a TCP proxy")),
            Path::Via(forwarded),
        ];
        let mut rates: Vec<Vec<f64>> = vec![Vec::new(); paths.len()];
        for _ in 0..runs {
            for (i, path) in paths.iter().enumerate() {
                let (got, t) = one_download(*path, bulk, &hello).await;
                assert_eq!(got, mb << 20, "a short download");
                rates[i].push(got as f64 / (1 << 20) as f64 / t.as_secs_f64());
            }
        }
        let m: Vec<f64> = rates.iter_mut().map(|r| median(r)).collect();
        println!(
            "| {} Gbit/s | {:.0} | {:.0} % ({:.0}) | {:.0} % ({:.0}) |",
            mbit as f64 / 1000.0,
            m[0],
            100.0 * m[1] / m[0],
            m[1],
            100.0 * m[2] / m[0],
            m[2]
        );
        server.abort();
        drop((proxy, unix_proxy));
        drop(link);
    }
}
