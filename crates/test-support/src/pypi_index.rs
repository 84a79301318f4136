//! A stand-in for a Python package index (PyPI's "simple" repository API,
//! PEP 503) on loopback, serving one real wheel it builds itself: `GET
//! /simple/` lists the project, `GET /simple/<project>/` links the wheel
//! with its `#sha256=` fragment (pip checks it), `GET /files/<wheel>` serves
//! its bytes. Every request's path is recorded, so a test sees what a real
//! `pip download` fetched.

use std::sync::{Arc, Mutex};

use axum::body::Body;
use http::{Request, StatusCode};

/// The project the index serves.
pub const PYPI_PROJECT: &str = "paddock-standin";
/// Its one version.
pub const PYPI_VERSION: &str = "1.0.0";
/// The wheel's file name (PEP 427: the project name's `-` as `_`).
pub const PYPI_WHEEL: &str = "paddock_standin-1.0.0-py3-none-any.whl";

/// The running index.
#[derive(Clone)]
pub struct PypiIndexStandIn {
    /// The loopback port it listens on.
    pub port: u16,
    /// The wheel it serves, byte for byte.
    pub wheel: Arc<Vec<u8>>,
    seen: Arc<Mutex<Vec<String>>>,
}

impl PypiIndexStandIn {
    /// Builds the wheel and serves the index on an ephemeral loopback port.
    pub async fn start() -> PypiIndexStandIn {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let index = PypiIndexStandIn {
            port: listener.local_addr().unwrap().port(),
            wheel: Arc::new(wheel()),
            seen: Arc::default(),
        };
        let served = index.clone();
        let router = axum::Router::new().fallback(move |req: Request<Body>| {
            let index = served.clone();
            async move { index.answer(req) }
        });
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        index
    }

    /// `http://127.0.0.1:PORT/simple/`, for pip's `--index-url`.
    pub fn index_url(&self) -> String {
        format!("http://127.0.0.1:{}/simple/", self.port)
    }

    /// The path of every request, in order.
    pub fn requests(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    fn answer(&self, req: Request<Body>) -> http::Response<Body> {
        let path = req.uri().path().to_string();
        self.seen.lock().unwrap().push(path.clone());
        let html = |body: String| {
            http::Response::builder()
                .header("content-type", "text/html")
                .body(Body::from(body))
                .unwrap()
        };
        if path == "/simple/" {
            return html(format!(
                "<!DOCTYPE html><html><body><a href=\"/simple/{PYPI_PROJECT}/\">{PYPI_PROJECT}</a></body></html>\n"
            ));
        }
        if path == format!("/simple/{PYPI_PROJECT}/") {
            let sha = crate::npm_registry::hex(
                ring::digest::digest(&ring::digest::SHA256, &self.wheel).as_ref(),
            );
            return html(format!(
                "<!DOCTYPE html><html><body><a href=\"/files/{PYPI_WHEEL}#sha256={sha}\">{PYPI_WHEEL}</a></body></html>\n"
            ));
        }
        if path == format!("/files/{PYPI_WHEEL}") {
            return http::Response::builder()
                .header("content-type", "application/octet-stream")
                .body(Body::from(self.wheel.as_ref().clone()))
                .unwrap();
        }
        http::Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(Body::from("not found\n"))
            .unwrap()
    }
}

/// The wheel: a zip (stored, not compressed) holding a module, the
/// `.dist-info` METADATA, WHEEL, entry_points.txt (a console script) and
/// RECORD files (PEP 427 and 376).
fn wheel() -> Vec<u8> {
    let info = "paddock_standin-1.0.0.dist-info";
    let mut files: Vec<(String, Vec<u8>)> = vec![
        (
            "paddock_standin/__init__.py".to_string(),
            b"GREETING = \"hello from the stand-in index\"\n\n\ndef main():\n    print(GREETING)\n"
                .to_vec(),
        ),
        // A console script: pip writes `bin/paddock-standin`, whose first
        // line names the environment's Python by its absolute path.
        (
            format!("{info}/entry_points.txt"),
            format!("[console_scripts]\n{PYPI_PROJECT} = paddock_standin:main\n").into_bytes(),
        ),
        (
            format!("{info}/METADATA"),
            format!("Metadata-Version: 2.1\nName: {PYPI_PROJECT}\nVersion: {PYPI_VERSION}\n")
                .into_bytes(),
        ),
        (
            format!("{info}/WHEEL"),
            b"Wheel-Version: 1.0\nGenerator: paddock-test-support\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
                .to_vec(),
        ),
    ];
    let mut record = String::new();
    for (name, data) in &files {
        let digest = ring::digest::digest(&ring::digest::SHA256, data);
        record.push_str(&format!(
            "{name},sha256={},{}\n",
            base64::Engine::encode(
                &base64::engine::general_purpose::URL_SAFE_NO_PAD,
                digest.as_ref()
            ),
            data.len()
        ));
    }
    record.push_str(&format!("{info}/RECORD,,\n"));
    files.push((format!("{info}/RECORD"), record.into_bytes()));
    zip_stored(&files)
}

/// A zip archive of `files`, each stored uncompressed (method 0).
fn zip_stored(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in files {
        let offset = out.len() as u32;
        let crc = crc32(data);
        let size = data.len() as u32;
        let name_len = name.len() as u16;
        // Local file header.
        out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        out.extend_from_slice(&20u16.to_le_bytes()); // version needed
        out.extend_from_slice(&0u16.to_le_bytes()); // flags
        out.extend_from_slice(&0u16.to_le_bytes()); // method: stored
        out.extend_from_slice(&0u16.to_le_bytes()); // time
        out.extend_from_slice(&0x21u16.to_le_bytes()); // date: 1980-01-01
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&name_len.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes()); // extra
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(data);
        // Central directory entry.
        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        central.extend_from_slice(&0x031eu16.to_le_bytes()); // made by: unix
        central.extend_from_slice(&20u16.to_le_bytes());
        central.extend_from_slice(&0u16.to_le_bytes());
        central.extend_from_slice(&0u16.to_le_bytes());
        central.extend_from_slice(&0u16.to_le_bytes());
        central.extend_from_slice(&0x21u16.to_le_bytes());
        central.extend_from_slice(&crc.to_le_bytes());
        central.extend_from_slice(&size.to_le_bytes());
        central.extend_from_slice(&size.to_le_bytes());
        central.extend_from_slice(&name_len.to_le_bytes());
        central.extend_from_slice(&0u16.to_le_bytes()); // extra
        central.extend_from_slice(&0u16.to_le_bytes()); // comment
        central.extend_from_slice(&0u16.to_le_bytes()); // disk
        central.extend_from_slice(&0u16.to_le_bytes()); // internal attrs
        central.extend_from_slice(&(0o100644u32 << 16).to_le_bytes());
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
    }
    let central_offset = out.len() as u32;
    let count = files.len() as u16;
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&central_offset.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// CRC-32 (IEEE 802.3, as zip uses it).
fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xffff_ffffu32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    #[test]
    fn crc32_of_the_check_string() {
        assert_eq!(super::crc32(b"123456789"), 0xcbf4_3926);
    }
}
