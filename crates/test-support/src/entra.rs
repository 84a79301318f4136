//! A stand-in Microsoft Entra ID token endpoint: the OAuth 2.0
//! client-credentials grant of `login.microsoftonline.com`
//! (`POST /{tenant}/oauth2/v2.0/token`), checking the client id, the secret
//! and the Cognitive Services scope, answering with numbered access tokens
//! or Entra's own `invalid_client` error.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// `a=b&c=d` form fields, percent-decoded.
pub fn form(body: &str) -> HashMap<String, String> {
    let decode = |v: &str| {
        let v = v.replace('+', " ");
        let bytes = v.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            match (bytes[i], v.get(i + 1..i + 3)) {
                (b'%', Some(hex)) if u8::from_str_radix(hex, 16).is_ok() => {
                    out.push(u8::from_str_radix(hex, 16).unwrap());
                    i += 3;
                }
                (b, _) => {
                    out.push(b);
                    i += 1;
                }
            }
        }
        String::from_utf8(out).unwrap()
    };
    body.split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

/// The app a stand-in endpoint serves.
#[derive(Debug, Clone)]
pub struct App {
    pub tenant: String,
    pub client_id: String,
    pub secret: String,
}

/// Starts the token endpoint of `app`: a client-credentials request from
/// its client id with its secret and the Cognitive Services scope gets the
/// access token `{token}-N` (its `N`th request) valid for `expires_in`
/// seconds; a wrong secret gets Entra's `invalid_client` answer. Returns
/// the authority to configure and the request count.
pub async fn token_endpoint(app: App, token: String, expires_in: u64) -> (String, Arc<AtomicU64>) {
    let hits = Arc::new(AtomicU64::new(0));
    let counter = hits.clone();
    let path = format!("/{}/oauth2/v2.0/token", app.tenant);
    let router = axum::Router::new().route(
        &path,
        axum::routing::post(move |body: String| {
            let (app, token, counter) = (app.clone(), token.clone(), counter.clone());
            async move {
                let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
                let f = form(&body);
                assert_eq!(
                    (
                        f["grant_type"].as_str(),
                        f["client_id"].as_str(),
                        f["scope"].as_str()
                    ),
                    (
                        "client_credentials",
                        app.client_id.as_str(),
                        "https://cognitiveservices.azure.com/.default"
                    )
                );
                if f["client_secret"] != app.secret {
                    return (
                        http::StatusCode::UNAUTHORIZED,
                        r#"{"error":"invalid_client","error_description":"AADSTS7000215: Invalid client secret provided."}"#
                            .to_string(),
                    );
                }
                (
                    http::StatusCode::OK,
                    serde_json::json!({"token_type": "Bearer", "expires_in": expires_in,
                        "ext_expires_in": expires_in, "access_token": format!("{token}-{n}")})
                    .to_string(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let authority = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (authority, hits)
}
