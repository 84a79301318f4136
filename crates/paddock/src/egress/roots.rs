//! The trust roots a terminated tunnel's upstream certificate is verified
//! against: the system's CA bundle (the first of the usual files that
//! exists), and, per credential, the host profile's `upstream_ca` (a
//! private registry's CA). Loaded by the host and passed in, never a
//! switch that skips verification. The same system bundle, with the job's
//! CA appended, is the job's CA bundle.

use std::path::{Path, PathBuf};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

/// Where the system's CA bundle is looked for, in order.
pub const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// Why the roots could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RootsError {
    #[error("no system CA bundle (looked for {})", SYSTEM_BUNDLES.join(", "))]
    NoSystemBundle,
    #[error("cannot read the CA bundle {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the CA bundle {path} holds no certificate")]
    Empty { path: PathBuf },
}

/// A CA bundle: its PEM text and its certificates.
#[derive(Clone)]
pub struct Roots {
    pub pem: String,
    pub certs: Vec<CertificateDer<'static>>,
}

impl Roots {
    /// The system's bundle.
    pub fn system() -> Result<Roots, RootsError> {
        let path = SYSTEM_BUNDLES
            .iter()
            .map(Path::new)
            .find(|p| p.is_file())
            .ok_or(RootsError::NoSystemBundle)?;
        Roots::read(path)
    }

    /// The certificates of the PEM file at `path` (at least one).
    pub fn read(path: &Path) -> Result<Roots, RootsError> {
        let pem = std::fs::read_to_string(path).map_err(|source| RootsError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let certs: Vec<_> = CertificateDer::pem_slice_iter(pem.as_bytes())
            .filter_map(Result::ok)
            .collect();
        if certs.is_empty() {
            return Err(RootsError::Empty {
                path: path.to_path_buf(),
            });
        }
        Ok(Roots { pem, certs })
    }
}
