//! A stand-in for an npm registry on loopback, serving one real package:
//! `GET /<name>` answers its packument (the registry's JSON document of
//! versions, `dist.tarball`, `dist.shasum` as SHA-1 hex and
//! `dist.integrity` as SRI SHA-512, which npm checks), `GET
//! /<name>/-/<name>-<version>.tgz` the gzipped tarball it built with the
//! system `tar` (a `package/` directory, as `npm pack` makes it). Every
//! request's path is recorded, so a test sees what a real `npm ci` or
//! `npm install` fetched.

use std::sync::{Arc, Mutex};

use axum::body::Body;
use http::{Request, StatusCode};

/// The package the registry serves.
pub const NPM_PACKAGE: &str = "paddock-standin";
/// Its one version.
pub const NPM_VERSION: &str = "1.0.0";

/// The running registry.
#[derive(Clone)]
pub struct NpmRegistryStandIn {
    /// The loopback port it listens on.
    pub port: u16,
    /// The package's tarball, byte for byte.
    pub tarball: Arc<Vec<u8>>,
    seen: Arc<Mutex<Vec<String>>>,
}

impl NpmRegistryStandIn {
    /// Builds the tarball and serves the registry on an ephemeral loopback
    /// port.
    pub async fn start() -> NpmRegistryStandIn {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let registry = NpmRegistryStandIn {
            port: listener.local_addr().unwrap().port(),
            tarball: Arc::new(tarball()),
            seen: Arc::default(),
        };
        let served = registry.clone();
        let router = axum::Router::new().fallback(move |req: Request<Body>| {
            let registry = served.clone();
            async move { registry.answer(req) }
        });
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        registry
    }

    /// `http://127.0.0.1:PORT/`, for npm's `--registry`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// The tarball's URL, as the packument and a lockfile name it.
    pub fn tarball_url(&self) -> String {
        format!(
            "{}{NPM_PACKAGE}/-/{NPM_PACKAGE}-{NPM_VERSION}.tgz",
            self.url()
        )
    }

    /// The tarball's `dist.integrity`: `sha512-<base64>`.
    pub fn integrity(&self) -> String {
        let digest = ring::digest::digest(&ring::digest::SHA512, &self.tarball);
        format!(
            "sha512-{}",
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, digest.as_ref())
        )
    }

    /// A `package-lock.json` (lockfile version 3) for a project `name`
    /// depending on the package, for `npm ci`.
    pub fn lockfile(&self, name: &str) -> String {
        serde_json::json!({
            "name": name,
            "version": "1.0.0",
            "lockfileVersion": 3,
            "requires": true,
            "packages": {
                "": {"name": name, "version": "1.0.0", "dependencies": {NPM_PACKAGE: NPM_VERSION}},
                format!("node_modules/{NPM_PACKAGE}"): {
                    "version": NPM_VERSION,
                    "resolved": self.tarball_url(),
                    "integrity": self.integrity(),
                },
            },
        })
        .to_string()
    }

    /// The path of every request, in order.
    pub fn requests(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    fn answer(&self, req: Request<Body>) -> http::Response<Body> {
        let path = req.uri().path().to_string();
        self.seen.lock().unwrap().push(path.clone());
        if path == format!("/{NPM_PACKAGE}") {
            let shasum = hex(ring::digest::digest(
                &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
                &self.tarball,
            )
            .as_ref());
            let version = serde_json::json!({
                "name": NPM_PACKAGE,
                "version": NPM_VERSION,
                "main": "index.js",
                "dist": {
                    "tarball": self.tarball_url(),
                    "shasum": shasum,
                    "integrity": self.integrity(),
                },
            });
            let packument = serde_json::json!({
                "name": NPM_PACKAGE,
                "dist-tags": {"latest": NPM_VERSION},
                "versions": {NPM_VERSION: version},
            });
            return http::Response::builder()
                .header("content-type", "application/json")
                .body(Body::from(packument.to_string()))
                .unwrap();
        }
        if path == format!("/{NPM_PACKAGE}/-/{NPM_PACKAGE}-{NPM_VERSION}.tgz") {
            return http::Response::builder()
                .header("content-type", "application/octet-stream")
                .body(Body::from(self.tarball.as_ref().clone()))
                .unwrap();
        }
        http::Response::builder()
            .status(StatusCode::NOT_FOUND)
            .header("content-type", "application/json")
            .body(Body::from("{\"error\":\"not found\"}"))
            .unwrap()
    }
}

/// The package's tarball: `package/package.json` and `package/index.js`,
/// gzipped by the system `tar`.
fn tarball() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let package = dir.path().join("package");
    std::fs::create_dir(&package).unwrap();
    let manifest = serde_json::json!({
        "name": NPM_PACKAGE, "version": NPM_VERSION, "main": "index.js",
    });
    std::fs::write(package.join("package.json"), manifest.to_string()).unwrap();
    std::fs::write(
        package.join("index.js"),
        "module.exports = \"hello from the stand-in registry\";\n",
    )
    .unwrap();
    let out = std::process::Command::new("tar")
        .args(["--owner=0", "--group=0", "-czf", "package.tgz", "package"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "tar: {out:?}");
    std::fs::read(dir.path().join("package.tgz")).unwrap()
}

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
