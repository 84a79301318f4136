//! The job's own certificate authority for the hosts its credentials are
//! for: an ECDSA P-256 key made by `rcgen` when the proxy is configured,
//! held in the broker's memory only (never written anywhere, never in a
//! record), valid for the job's lifetime and a margin, and name-constrained
//! to the credential hosts (permitted DNS subtrees), so that even where the
//! job trusts it, it vouches for nothing else. Its certificate is what the
//! job's CA bundle adds to the system's roots; the proxy signs one leaf
//! certificate per credential host with it (docs/egress.md).

use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, GeneralSubtree, IsCa,
    KeyPair, KeyUsagePurpose, NameConstraints, PKCS_ECDSA_P256_SHA256,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Why the job's CA or a leaf could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    #[error("the job's egress CA: cannot make its key: {0}")]
    Key(rcgen::Error),
    #[error("the job's egress CA: cannot make its certificate: {0}")]
    Ca(rcgen::Error),
    #[error("the job's egress CA: cannot make the certificate for {host}: {source}")]
    Leaf { host: String, source: rcgen::Error },
}

/// A job's CA: its certificate and (in memory only) its key.
pub struct JobCa {
    key: KeyPair,
    cert: rcgen::Certificate,
    validity: (time::OffsetDateTime, time::OffsetDateTime),
    der: CertificateDer<'static>,
    pem: String,
}

impl JobCa {
    /// A CA for `job_id`, allowed to vouch for `hosts` only, valid from an
    /// hour ago (clock skew) for `valid_for`.
    pub fn new(job_id: &str, hosts: &[String], valid_for: Duration) -> Result<JobCa, CaError> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(CaError::Key)?;
        let mut params = CertificateParams::default();
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.distinguished_name.push(
            DnType::CommonName,
            format!("Paddock egress CA for job {job_id}"),
        );
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.name_constraints = Some(NameConstraints {
            permitted_subtrees: hosts
                .iter()
                .map(|h| GeneralSubtree::DnsName(h.clone()))
                .collect(),
            excluded_subtrees: Vec::new(),
        });
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::hours(1);
        params.not_after = now + valid_for;
        let validity = (params.not_before, params.not_after);
        let cert = params.self_signed(&key).map_err(CaError::Ca)?;
        Ok(JobCa {
            der: cert.der().clone(),
            pem: cert.pem(),
            validity,
            key,
            cert,
        })
    }

    /// The CA's certificate, PEM.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// A leaf certificate for `host` signed by the CA (with the CA after
    /// it) and the leaf's key, for the proxy's TLS server side.
    pub fn leaf(
        &self,
        host: &str,
    ) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), CaError> {
        let fail = |source| CaError::Leaf {
            host: host.to_string(),
            source,
        };
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(fail)?;
        let mut params = CertificateParams::new(vec![host.to_string()]).map_err(fail)?;
        params.distinguished_name.push(DnType::CommonName, host);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        (params.not_before, params.not_after) = self.validity;
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .map_err(fail)?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        Ok((vec![cert.der().clone(), self.der.clone()], key))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_ca_is_constrained_to_its_hosts_and_signs_their_leaves() {
        let ca = JobCa::new(
            "j1",
            &["npm.corp.example".into()],
            Duration::from_secs(3600),
        )
        .unwrap();
        assert!(ca.pem().starts_with("-----BEGIN CERTIFICATE-----"));
        // A verifier trusting only the CA accepts the leaf for its host
        // and refuses it for another name.
        let (chain, _key) = ca.leaf("npm.corp.example").unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.der.clone()).unwrap();
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            std::sync::Arc::new(roots),
            std::sync::Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap();
        let now = rustls::pki_types::UnixTime::now();
        let verify = |name: &str| {
            rustls::client::danger::ServerCertVerifier::verify_server_cert(
                verifier.as_ref(),
                &chain[0],
                &chain[1..],
                &rustls::pki_types::ServerName::try_from(name.to_string()).unwrap(),
                &[],
                now,
            )
            .is_ok()
        };
        assert_eq!(
            (verify("npm.corp.example"), verify("evil.example")),
            (true, false)
        );
        // A leaf the CA signs for a name outside its constraint (the
        // permitted DNS subtree) is refused by the verifier even though
        // the CA signed it.
        let (outside, _) = ca.leaf("evil.example").unwrap();
        let v = rustls::client::danger::ServerCertVerifier::verify_server_cert(
            verifier.as_ref(),
            &outside[0],
            &outside[1..],
            &rustls::pki_types::ServerName::try_from("evil.example".to_string()).unwrap(),
            &[],
            now,
        );
        assert!(v.is_err(), "{v:?}");
    }
}
