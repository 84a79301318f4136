//! Stand-ins for Google's token sources: an OAuth token endpoint for the
//! JWT bearer grant (RFC 7523), as a service-account key's `token_uri`,
//! which verifies the assertion's RS256 signature with the account's public
//! key and its claims; one for the refresh-token grant of an
//! `authorized_user` file; and a GCE metadata server. Each answers with
//! numbered access tokens. Keys are made with `openssl`.

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

/// A 2048-bit RSA key pair made by `openssl` in `dir` (PEM private key,
/// PEM public key); `None` without `openssl` (a test then skips locally
/// and fails in CI, [`crate::in_ci`]).
pub fn key_pair(dir: &std::path::Path) -> Option<(String, String)> {
    let (private, public) = rsa_key(&dir.join("sa.pem"))?;
    Some((std::fs::read_to_string(private).ok()?, public))
}

/// A 2048-bit RSA private key made by `openssl` at `private` (PEM): its
/// path and the public key (PEM); `None` without `openssl`.
pub fn rsa_key(private: &std::path::Path) -> Option<(std::path::PathBuf, String)> {
    openssl(&[
        "genpkey",
        "-algorithm",
        "RSA",
        "-pkeyopt",
        "rsa_keygen_bits:2048",
        "-out",
        private.to_str()?,
    ])?;
    let public = openssl(&["pkey", "-in", private.to_str()?, "-pubout"])?;
    Some((private.to_path_buf(), public))
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

/// Starts a Google OAuth token endpoint for the refresh-token grant (an
/// `authorized_user` file's `token_uri`): a form with `client_id`,
/// `client_secret` and `refresh_token` equal to the given ones gets the
/// access token `{token}-N` (its `N`th request), valid for `expires_in`
/// seconds; anything else gets Google's `invalid_grant` answer. Returns its
/// URL and the request count.
pub async fn refresh_endpoint(
    client_id: String,
    client_secret: String,
    refresh_token: String,
    token: String,
    expires_in: u64,
) -> (String, Arc<AtomicU64>) {
    let hits = Arc::new(AtomicU64::new(0));
    let counter = hits.clone();
    let want = Arc::new((client_id, client_secret, refresh_token));
    let app = axum::Router::new().route(
        "/token",
        axum::routing::post(move |body: String| {
            let (want, token, counter) = (want.clone(), token.clone(), counter.clone());
            async move {
                let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
                let f = crate::entra::form(&body);
                let got = (
                    f.get("grant_type").cloned().unwrap_or_default(),
                    f.get("client_id").cloned().unwrap_or_default(),
                    f.get("client_secret").cloned().unwrap_or_default(),
                    f.get("refresh_token").cloned().unwrap_or_default(),
                );
                if got
                    != (
                        "refresh_token".to_string(),
                        want.0.clone(),
                        want.1.clone(),
                        want.2.clone(),
                    )
                {
                    return (
                        http::StatusCode::BAD_REQUEST,
                        r#"{"error":"invalid_grant","error_description":"Bad Request"}"#
                            .to_string(),
                    );
                }
                (
                    http::StatusCode::OK,
                    token_answer(&format!("{token}-{n}"), expires_in),
                )
            }
        }),
    );
    serve(app, "/token").await.map(|url| (url, hits)).unwrap()
}

/// Starts a stand-in GCE metadata server: `GET
/// /computeMetadata/v1/instance/service-accounts/default/token` with
/// `Metadata-Flavor: Google` gets the access token `{token}-N`, valid for
/// `expires_in` seconds; without the header, 403 as the real one answers.
/// Returns its `host:port` (what `GCE_METADATA_HOST` names) and the request
/// count.
pub async fn metadata_server(token: String, expires_in: u64) -> (String, Arc<AtomicU64>) {
    let hits = Arc::new(AtomicU64::new(0));
    let counter = hits.clone();
    let app = axum::Router::new().route(
        "/computeMetadata/v1/instance/service-accounts/default/token",
        axum::routing::get(move |headers: http::HeaderMap| {
            let (token, counter) = (token.clone(), counter.clone());
            async move {
                if headers.get("metadata-flavor").and_then(|v| v.to_str().ok()) != Some("Google") {
                    return (
                        http::StatusCode::FORBIDDEN,
                        "Missing Metadata-Flavor:Google header.".to_string(),
                    );
                }
                let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
                (
                    http::StatusCode::OK,
                    token_answer(&format!("{token}-{n}"), expires_in),
                )
            }
        }),
    );
    let url = serve(app, "").await.unwrap();
    (url.trim_start_matches("http://").to_string(), hits)
}

/// Google's token answer.
fn token_answer(access_token: &str, expires_in: u64) -> String {
    serde_json::json!({"access_token": access_token, "expires_in": expires_in, "token_type": "Bearer"})
        .to_string()
}

/// Serves `app` on a loopback port; its URL with `path`.
async fn serve(app: axum::Router, path: &str) -> std::io::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}{path}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Ok(url)
}
