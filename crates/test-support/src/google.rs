//! A stand-in Google OAuth token endpoint (RFC 7523 JWT bearer grant), as
//! a service-account key's `token_uri`: it verifies the assertion's RS256
//! signature with the account's public key and its claims, and answers
//! with numbered access tokens. Keys are made with `openssl`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

/// The scope Vertex AI calls ask for.
const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// `openssl ARGS`' standard output, if it ran and succeeded.
pub fn openssl(args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("openssl")
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The PKCS#1 `RSAPublicKey` DER of an RSA public key in PEM
/// (`openssl pkey -pubout`), as ring verifies with it.
pub fn public_key_der(public_pem: &str) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let pem = dir.path().join("pub.pem");
    std::fs::write(&pem, public_pem).unwrap();
    let der = dir.path().join("pub.der");
    let out = std::process::Command::new("openssl")
        .args(["rsa", "-pubin", "-in"])
        .arg(&pem)
        .args(["-RSAPublicKey_out", "-outform", "DER", "-out"])
        .arg(&der)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(der).unwrap()
}

/// Starts the token endpoint: it verifies each assertion against
/// `public_pem` (issuer `email`, audience its own URL, the Vertex scope)
/// and answers its `N`th request with the access token `{token}-N`, valid
/// for `expires_in` seconds. Returns its URL (the key's `token_uri`) and
/// the request count.
pub async fn token_endpoint(
    public_pem: String,
    token: String,
    email: String,
    expires_in: u64,
) -> (String, Arc<AtomicU64>) {
    let hits = Arc::new(AtomicU64::new(0));
    let counter = hits.clone();
    let key = Arc::new(public_key_der(&public_pem));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/token", listener.local_addr().unwrap());
    let aud = url.clone();
    let app = axum::Router::new().route(
        "/token",
        axum::routing::post(move |body: String| {
            let (key, token, email, aud, counter) =
                (key.clone(), token.clone(), email.clone(), aud.clone(), counter.clone());
            async move {
                let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
                let form: std::collections::HashMap<String, String> = body
                    .split('&')
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.replace("%3A", ":").replace("%3D", "=")))
                    .collect();
                assert_eq!(
                    form["grant_type"],
                    "urn:ietf:params:oauth:grant-type:jwt-bearer"
                );
                let jwt = &form["assertion"];
                let (signed, sig) = jwt.rsplit_once('.').unwrap();
                let sig = URL_SAFE_NO_PAD.decode(sig.trim_end_matches('=')).unwrap();
                let verifier = ring::signature::UnparsedPublicKey::new(
                    &ring::signature::RSA_PKCS1_2048_8192_SHA256,
                    key.as_slice(),
                );
                if verifier.verify(signed.as_bytes(), &sig).is_err() {
                    return (
                        http::StatusCode::UNAUTHORIZED,
                        r#"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#
                            .to_string(),
                    );
                }
                let claims: serde_json::Value = serde_json::from_slice(
                    &URL_SAFE_NO_PAD
                        .decode(signed.split_once('.').unwrap().1.trim_end_matches('='))
                        .unwrap(),
                )
                .unwrap();
                assert_eq!(claims["iss"], email.as_str());
                assert_eq!(claims["aud"], aud.as_str());
                assert_eq!(claims["scope"], SCOPE);
                (
                    http::StatusCode::OK,
                    serde_json::json!({"access_token": format!("{token}-{n}"), "expires_in": expires_in, "token_type": "Bearer"})
                        .to_string(),
                )
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, hits)
}
