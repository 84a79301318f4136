//! The auth middleware on a real loopback server: every way in and out,
//! and the log it writes, which must never hold a token.

use std::sync::{Arc, Mutex};

use axum::routing::get;
use axum::{Extension, Router};
use time::macros::datetime;

use super::*;
use crate::store::SqliteStore;

/// A log sink for one test (a `tracing` writer into a shared buffer).
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

async fn whoami(Extension(caller): Extension<Caller>) -> String {
    format!("{} {}", caller.token_id, caller.scope)
}

/// A server with `/read`, `/submit` and `/admin`, each needing its scope.
async fn serve(store: SharedStore) -> String {
    let auth = Authenticator::new(store);
    let guarded = |needed| {
        Router::new()
            .route("/", get(whoami))
            .route_layer(axum::middleware::from_fn_with_state(
                Gate {
                    auth: auth.clone(),
                    needed,
                },
                require,
            ))
    };
    let app = Router::new()
        .nest("/read", guarded(Scope::Read))
        .nest("/submit", guarded(Scope::Submit))
        .nest("/admin", guarded(Scope::Admin));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

/// What a response came to: status, `WWW-Authenticate`, and the body
/// (the problem's code, or the route's text).
async fn call(
    base: &str,
    path: &str,
    authorization: Option<&str>,
) -> (u16, Option<String>, String) {
    let mut request = reqwest::Client::new().get(format!("{base}{path}"));
    // `A | B` sends two Authorization headers.
    for a in authorization.into_iter().flat_map(|a| a.split(" | ")) {
        request = request.header("authorization", a);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned());
    let problem = response
        .headers()
        .get("content-type")
        .is_some_and(|v| v == "application/problem+json");
    let body = response.text().await.unwrap();
    let body = if problem {
        let value: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(value["status"], status, "{body}");
        value["code"].as_str().unwrap().to_owned()
    } else {
        body
    };
    (status, challenge, body)
}

#[tokio::test]
async fn tokens_are_checked_by_presence_hash_revocation_and_scope() {
    let log = Captured::default();
    let sink = log.clone();
    let _guard = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(move || sink.clone())
            .finish(),
    );
    let store: SharedStore = Arc::new(SqliteStore::open_in_memory().await.unwrap());
    let now = datetime!(2026-12-01 02:30:00 UTC);
    let read = api_token::issue(Scope::Read, None, now);
    let submit = api_token::issue(Scope::Submit, Some("orchestrator".into()), now);
    let admin = api_token::issue(Scope::Admin, None, now);
    let revoked = api_token::issue(Scope::Admin, None, now);
    for t in [&read, &submit, &admin, &revoked] {
        store.insert_api_token(&t.stored).await.unwrap();
    }
    store
        .revoke_api_token(&revoked.stored.id, now)
        .await
        .unwrap();
    let base = serve(store).await;
    let bearer = |t: &api_token::Issued| format!("Bearer {}", t.token.expose());
    // A real token's id with another secret, and a well-formed unknown one.
    let (read_id, _) = api_token::split(read.token.expose()).unwrap();
    let forged = format!("Bearer pdk-api-{read_id}-{}", "0".repeat(64));
    let unknown = format!("Bearer pdk-api-000000000000-{}", "0".repeat(64));
    let basic = format!("Basic {}", admin.token.expose());

    let missing = Some(r#"Bearer realm="paddock""#.to_owned());
    let invalid = Some(r#"Bearer realm="paddock", error="invalid_token""#.to_owned());
    let scope = Some(r#"Bearer realm="paddock", error="insufficient_scope""#.to_owned());
    let unauthorized = |c: &Option<String>| (401, c.clone(), "unauthorized".to_owned());
    let forbidden = (403, scope, "forbidden".to_owned());
    let ok = |t: &api_token::Issued| (200, None, format!("{} {}", t.stored.id, t.stored.scope));
    let cases = [
        ("/read", None, unauthorized(&missing)),
        ("/read", Some(basic.clone()), unauthorized(&invalid)),
        ("/read", Some("Bearer".to_owned()), unauthorized(&invalid)),
        ("/read", Some(forged.clone()), unauthorized(&invalid)),
        ("/read", Some(unknown.clone()), unauthorized(&invalid)),
        ("/read", Some(bearer(&revoked)), unauthorized(&invalid)),
        ("/read", Some(bearer(&read)), ok(&read)),
        ("/submit", Some(bearer(&read)), forbidden.clone()),
        ("/admin", Some(bearer(&read)), forbidden.clone()),
        ("/read", Some(bearer(&submit)), ok(&submit)),
        ("/submit", Some(bearer(&submit)), ok(&submit)),
        ("/admin", Some(bearer(&submit)), forbidden.clone()),
        ("/read", Some(bearer(&admin)), ok(&admin)),
        ("/submit", Some(bearer(&admin)), ok(&admin)),
        ("/admin", Some(bearer(&admin)), ok(&admin)),
        (
            "/admin",
            Some(format!("bearer {}", admin.token.expose())),
            ok(&admin),
        ),
        // Two Authorization headers are refused whichever comes first
        // (a proxy may have checked the other one).
        (
            "/read",
            Some(format!("{} | {}", bearer(&read), bearer(&admin))),
            unauthorized(&invalid),
        ),
        (
            "/read",
            Some(format!("{} | {}", bearer(&admin), unknown)),
            unauthorized(&invalid),
        ),
    ];
    let mut got = Vec::new();
    let mut want = Vec::new();
    for (path, authorization, expected) in cases {
        got.push((path, call(&base, path, authorization.as_deref()).await));
        want.push((path, expected));
    }
    assert_eq!(got, want);

    let log = log.text();
    assert!(log.contains("refused a request"), "{log}");
    for t in [&read, &submit, &admin, &revoked] {
        let value = t.token.expose();
        let (_, secret) = api_token::split(value).unwrap();
        assert!(!log.contains(secret), "{log}");
    }
}

#[test]
fn auth_errors_never_show_the_token() {
    let issued = api_token::issue(Scope::Read, None, datetime!(2026-12-01 02:30:00 UTC));
    let mut headers = HeaderMap::new();
    headers.insert(
        AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {}", issued.token.expose())).unwrap(),
    );
    let presented = bearer(&headers).unwrap();
    assert_eq!(presented.expose(), issued.token.expose());
    assert!(!format!("{presented:?} {presented}").contains(issued.token.expose()));
}
