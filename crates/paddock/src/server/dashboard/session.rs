//! How a browser presents a bearer token: it does not. The login form takes
//! the token once (`POST /login`), the server checks it as the API does
//! (`auth::Authenticator`) and answers with a cookie holding a fresh random
//! session id: `HttpOnly` (no script reads it), `SameSite=Strict` (no other
//! site's page sends it), `Path=/`. The server keeps, per session, only the
//! SHA-256 of that id, the token's public id and its stored hash, the scope,
//! a CSRF token and the expiry. Every request re-reads the token's row: a
//! revoked token (or one whose row changed) ends its sessions at once. Every
//! POST (cancel, logout) must carry the session's CSRF token as a form field;
//! the login POST, which has no session yet, must carry the login form's own
//! token, which `GET /login` also set as the `paddock_login` cookie (a double
//! submit: another site's page can neither read nor set that cookie, so it
//! cannot sign a browser in to an attacker's token). Every POST is also
//! refused when the browser says it came from elsewhere: an `Origin` that is
//! not this server's host (or more than one), a `Sec-Fetch-Site` other than
//! `same-origin`. Sessions live in memory: a restart logs everyone out.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::http::{header, HeaderMap, HeaderValue};
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

use super::super::auth::{AuthError, Authenticator};
use crate::api_token::Scope;
use crate::store::{SharedStore, StoreError};

/// The session cookie's name.
pub const COOKIE: &str = "paddock_session";
/// The login form's cookie: the token its form also carries.
pub const LOGIN_COOKIE: &str = "paddock_login";
/// How long a session lasts.
const LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// The most sessions one token has at once: a login past it ends the
/// token's oldest session (logging in again and again grows nothing).
const SESSIONS_PER_TOKEN: usize = 32;
/// How long a login form may be sent after it was fetched.
const LOGIN_FORM_LIFETIME: Duration = Duration::from_secs(3600);

/// A logged-in browser: the token it logged in with, and its CSRF token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Viewer {
    pub token_id: String,
    pub scope: Scope,
    /// The token's name as the store has it now (a cancel names it).
    pub token_name: Option<String>,
    pub csrf: String,
}

#[derive(Debug, Clone)]
struct Session {
    token_id: String,
    token_hash: String,
    scope: Scope,
    csrf: String,
    expires: Instant,
}

/// Why a browser request was refused.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("not logged in")]
    NoSession,
    #[error("the session's token {token_id} was revoked or changed")]
    TokenGone { token_id: String },
    #[error("look up API token {token_id}")]
    Lookup {
        token_id: String,
        #[source]
        source: StoreError,
    },
    #[error("log in: {0}")]
    Login(#[from] AuthError),
    #[error("a form without this session's CSRF token, or from another origin")]
    Csrf,
    #[error("this needs a token of scope {needed}; the session's token {token_id} has {has}")]
    Forbidden {
        token_id: String,
        has: Scope,
        needed: Scope,
    },
}

/// The sessions of this server.
#[derive(Debug, Clone)]
pub struct Sessions {
    auth: Authenticator,
    store: SharedStore,
    live: Arc<Mutex<HashMap<String, Session>>>,
}

fn hashed(id: &str) -> String {
    hex::encode(Sha256::digest(id.as_bytes()))
}

fn random_hex() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}

impl Sessions {
    pub fn new(store: SharedStore) -> Sessions {
        Sessions {
            auth: Authenticator::new(store.clone()),
            store,
            live: Arc::default(),
        }
    }

    fn live(&self) -> MutexGuard<'_, HashMap<String, Session>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Checks `token` as the API would for scope `read`; the new session's
    /// `Set-Cookie` value.
    pub async fn login(&self, token: &str) -> Result<HeaderValue, SessionError> {
        let mut headers = HeaderMap::new();
        let bearer = HeaderValue::from_str(&format!("Bearer {}", token.trim()))
            .map_err(|_| SessionError::Login(AuthError::NotBearer))?;
        headers.insert(header::AUTHORIZATION, bearer);
        let caller = self.auth.authorize(&headers, Scope::Read).await?;
        let row = self.row(&caller.token_id).await?;
        let id = random_hex();
        let now = Instant::now();
        let mut live = self.live();
        live.retain(|_, s| s.expires > now);
        let mut own: Vec<(Instant, String)> = live
            .iter()
            .filter(|(_, s)| s.token_id == row.id)
            .map(|(key, s)| (s.expires, key.clone()))
            .collect();
        own.sort();
        let excess = (own.len() + 1).saturating_sub(SESSIONS_PER_TOKEN);
        for (_, key) in own.into_iter().take(excess) {
            live.remove(&key);
        }
        live.insert(
            hashed(&id),
            Session {
                token_id: row.id,
                token_hash: row.hash,
                scope: row.scope,
                csrf: random_hex(),
                expires: now + LIFETIME,
            },
        );
        HeaderValue::from_str(&format!(
            "{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
            LIFETIME.as_secs()
        ))
        .map_err(|_| SessionError::NoSession)
    }

    /// Ends the session `headers` carry; the `Set-Cookie` value that clears it.
    pub fn logout(&self, headers: &HeaderMap) -> HeaderValue {
        if let Some(id) = cookie(headers) {
            self.live().remove(&hashed(&id));
        }
        HeaderValue::from_static("paddock_session=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0")
    }

    async fn row(&self, token_id: &str) -> Result<crate::api_token::StoredToken, SessionError> {
        self.store
            .api_token(token_id)
            .await
            .map_err(|source| SessionError::Lookup {
                token_id: token_id.to_owned(),
                source,
            })?
            .ok_or_else(|| SessionError::TokenGone {
                token_id: token_id.to_owned(),
            })
    }

    /// The viewer of the session `headers` carry, while its token stands.
    pub async fn viewer(&self, headers: &HeaderMap) -> Result<Viewer, SessionError> {
        let id = cookie(headers).ok_or(SessionError::NoSession)?;
        let key = hashed(&id);
        let session = {
            let mut live = self.live();
            match live.get(&key) {
                Some(s) if s.expires > Instant::now() => s.clone(),
                Some(_) => {
                    live.remove(&key);
                    return Err(SessionError::NoSession);
                }
                None => return Err(SessionError::NoSession),
            }
        };
        let row = self.row(&session.token_id).await?;
        let same: bool = row
            .hash
            .as_bytes()
            .ct_eq(session.token_hash.as_bytes())
            .into();
        if !same || row.revoked_at.is_some() || row.scope != session.scope {
            self.live().remove(&key);
            return Err(SessionError::TokenGone {
                token_id: session.token_id,
            });
        }
        Ok(Viewer {
            token_id: session.token_id,
            scope: session.scope,
            token_name: row.name,
            csrf: session.csrf,
        })
    }
}

impl Viewer {
    /// Whether a POST of this viewer may do what `needed` allows: the
    /// form's `csrf` field is the session's, the `Origin` (when sent) is
    /// this server, the scope suffices.
    pub fn may_post(
        &self,
        headers: &HeaderMap,
        csrf: &str,
        needed: Scope,
    ) -> Result<(), SessionError> {
        let token_ok: bool = csrf.as_bytes().ct_eq(self.csrf.as_bytes()).into();
        if !token_ok || !same_origin(headers) {
            return Err(SessionError::Csrf);
        }
        if !self.scope.allows(needed) {
            return Err(SessionError::Forbidden {
                token_id: self.token_id.clone(),
                has: self.scope,
                needed,
            });
        }
        Ok(())
    }
}

/// Whether nothing the browser says of the request's origin names another
/// site: the `Origin` (at most one), when sent, is this server's host, and
/// `Sec-Fetch-Site`, when sent, is `same-origin`. A browser too old to send
/// either is left to the form's CSRF token, which every POST needs too.
pub fn same_origin(headers: &HeaderMap) -> bool {
    let mut fetch_sites = headers.get_all("sec-fetch-site").iter();
    let site_ok = match (fetch_sites.next(), fetch_sites.next()) {
        (None, _) => true,
        (Some(site), None) => site.as_bytes() == b"same-origin",
        (Some(_), Some(_)) => false,
    };
    let mut origins = headers.get_all(header::ORIGIN).iter();
    let origin_ok = match (origins.next(), origins.next()) {
        (None, _) => true,
        (Some(origin), None) => {
            let mut hosts = headers.get_all(header::HOST).iter();
            let host = match (hosts.next(), hosts.next()) {
                (Some(h), None) => h.to_str().ok(),
                _ => None,
            };
            let origin = origin.to_str().ok().and_then(|o| {
                o.strip_prefix("http://")
                    .or_else(|| o.strip_prefix("https://"))
            });
            matches!((origin, host), (Some(o), Some(h)) if o.eq_ignore_ascii_case(h))
        }
        (Some(_), Some(_)) => false,
    };
    site_ok && origin_ok
}

/// A fresh login form token: the value its form carries, and the
/// `Set-Cookie` value that sets it as the `paddock_login` cookie.
pub fn login_form_token() -> Result<(String, HeaderValue), SessionError> {
    let token = random_hex();
    let cookie = HeaderValue::from_str(&format!(
        "{LOGIN_COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/login; Max-Age={}",
        LOGIN_FORM_LIFETIME.as_secs()
    ))
    .map_err(|_| SessionError::Csrf)?;
    Ok((token, cookie))
}

/// The `Set-Cookie` value that clears the login form's cookie.
pub fn login_form_cleared() -> HeaderValue {
    HeaderValue::from_static("paddock_login=; HttpOnly; SameSite=Strict; Path=/login; Max-Age=0")
}

/// Whether a login POST is the login form of this browser: it comes from
/// this origin (`same_origin`) and its `csrf` field is the `paddock_login`
/// cookie `GET /login` set (compared in constant time).
pub fn login_form_ok(headers: &HeaderMap, csrf: &str) -> Result<(), SessionError> {
    let expected = named_cookie(headers, LOGIN_COOKIE).ok_or(SessionError::Csrf)?;
    let token_ok: bool = csrf.as_bytes().ct_eq(expected.as_bytes()).into();
    if !token_ok || expected.len() != 64 || !same_origin(headers) {
        return Err(SessionError::Csrf);
    }
    Ok(())
}

/// The session id in the request's cookies.
fn cookie(headers: &HeaderMap) -> Option<String> {
    named_cookie(headers, COOKIE)
}

/// The value of the cookie `name` in the request's cookies.
fn named_cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, value)| value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                *k,
                HeaderValue::from_str(v).unwrap_or(HeaderValue::from_static("")),
            );
        }
        h
    }

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let h = headers(&[("cookie", "a=1; paddock_session=abc; b=2")]);
        assert_eq!(cookie(&h), Some("abc".to_owned()));
        assert_eq!(cookie(&headers(&[("cookie", "paddock_sessionx=1")])), None);
    }

    #[test]
    fn a_foreign_origin_is_refused_and_a_missing_one_allowed() {
        let host = ("host", "127.0.0.1:8012");
        assert_eq!(
            [
                same_origin(&headers(&[host, ("origin", "http://127.0.0.1:8012")])),
                same_origin(&headers(&[host, ("origin", "http://evil.example")])),
                same_origin(&headers(&[host, ("origin", "null")])),
                same_origin(&headers(&[host])),
            ],
            [true, false, false, true]
        );
    }

    #[test]
    fn a_cross_site_fetch_or_a_doubled_origin_is_refused() {
        let host = ("host", "127.0.0.1:8012");
        let ours = ("origin", "http://127.0.0.1:8012");
        assert_eq!(
            [
                same_origin(&headers(&[host, ("sec-fetch-site", "same-origin")])),
                same_origin(&headers(&[host, ("sec-fetch-site", "cross-site")])),
                same_origin(&headers(&[host, ("sec-fetch-site", "same-site")])),
                same_origin(&headers(&[host, ("sec-fetch-site", "none")])),
                same_origin(&headers(&[host, ours, ("sec-fetch-site", "cross-site")])),
                same_origin(&headers(&[host, ours, ("origin", "http://evil.example")])),
                same_origin(&headers(&[host, ("host", "evil.example"), ours])),
            ],
            [true, false, false, false, false, false, false]
        );
    }

    #[test]
    fn a_login_post_needs_the_login_form_s_cookie_and_field() {
        let (token, set) = login_form_token().unwrap();
        let pair = set.to_str().unwrap().split(';').next().unwrap().to_owned();
        let with_cookie = headers(&[("cookie", pair.as_str())]);
        let verdicts = [
            login_form_ok(&with_cookie, &token).is_ok(),
            login_form_ok(&with_cookie, &"0".repeat(64)).is_ok(),
            login_form_ok(&with_cookie, "").is_ok(),
            login_form_ok(&headers(&[]), &token).is_ok(),
            login_form_ok(&headers(&[("cookie", "paddock_login=")]), "").is_ok(),
            login_form_ok(
                &headers(&[("cookie", pair.as_str()), ("sec-fetch-site", "cross-site")]),
                &token,
            )
            .is_ok(),
        ];
        assert_eq!(verdicts, [true, false, false, false, false, false]);
    }

    /// Probe: a token logging in again and again holds at most
    /// SESSIONS_PER_TOKEN sessions; the oldest go, the newest open.
    #[tokio::test]
    async fn logging_in_again_and_again_keeps_at_most_the_newest_sessions() {
        let store: SharedStore =
            std::sync::Arc::new(crate::store::SqliteStore::open_in_memory().await.unwrap());
        let now = time::OffsetDateTime::now_utc();
        let mine = crate::api_token::issue(Scope::Read, None, now);
        let other = crate::api_token::issue(Scope::Read, None, now);
        store.insert_api_token(&mine.stored).await.unwrap();
        store.insert_api_token(&other.stored).await.unwrap();
        let sessions = Sessions::new(store);
        let theirs = sessions.login(other.token.expose()).await.unwrap();
        let mut cookies = Vec::new();
        for _ in 0..SESSIONS_PER_TOKEN + 8 {
            cookies.push(sessions.login(mine.token.expose()).await.unwrap());
            std::thread::sleep(Duration::from_millis(1));
        }
        let opens = |set: HeaderValue| {
            let pair = set.to_str().unwrap().split(';').next().unwrap().to_owned();
            let sessions = sessions.clone();
            async move {
                sessions
                    .viewer(&headers(&[("cookie", pair.as_str())]))
                    .await
                    .is_ok()
            }
        };
        let mut open = Vec::new();
        for c in cookies.iter().cloned() {
            open.push(opens(c).await);
        }
        let kept = sessions.live().len();
        let mut want = vec![false; 8];
        want.extend(vec![true; SESSIONS_PER_TOKEN]);
        assert_eq!(
            (open, kept, opens(theirs).await),
            (want, SESSIONS_PER_TOKEN + 1, true)
        );
    }

    #[test]
    fn a_post_needs_the_session_s_csrf_token_and_the_scope() {
        let viewer = Viewer {
            token_id: "t".into(),
            scope: Scope::Read,
            token_name: None,
            csrf: "c".repeat(64),
        };
        let h = headers(&[]);
        assert!(matches!(
            viewer.may_post(&h, "wrong", Scope::Read),
            Err(SessionError::Csrf)
        ));
        assert!(matches!(
            viewer.may_post(&h, &"c".repeat(64), Scope::Submit),
            Err(SessionError::Forbidden { .. })
        ));
        assert!(viewer.may_post(&h, &"c".repeat(64), Scope::Read).is_ok());
    }
}
