//! Bearer-token authentication of the HTTP API: the `Authorization:
//! Bearer pdk-api-…` header is checked against the store's salted hashes
//! (crate::api_token) and the route's scope. Without a token, or with one
//! the store does not have, that does not match, or that is revoked: 401
//! `unauthorized` with `WWW-Authenticate: Bearer`; with a valid token of a
//! smaller scope than the route's: 403 `forbidden`. The middleware
//! [`require`] guards a router (`route_layer(from_fn_with_state(Gate {..},
//! require))`) and hands the route the [`Caller`] as a request extension.
//! The presented value lives only as a [`Secret`]; the log names the
//! token's public id, never its value.

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api_token::{self, Scope};
use crate::secret::Secret;
use crate::store::{SharedStore, StoreError};

use super::problem::Problem;

/// Who called: the token's public id and scope (a request extension on
/// every route behind [`require`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub token_id: String,
    pub scope: Scope,
    /// The operator's name for the token (`paddock token create --name`),
    /// any text.
    pub token_name: Option<String>,
}

impl Caller {
    /// The caller as the one who asks for a cancel.
    pub fn asker(&self) -> super::asker::Asker {
        super::asker::Asker {
            token_id: self.token_id.clone(),
            scope: self.scope,
            token_name: self.token_name.clone(),
            dashboard: false,
        }
    }
}

/// Why a request was refused.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("no bearer token: send `Authorization: Bearer <token>` (`paddock token create`)")]
    Missing,
    #[error("the Authorization header is not `Bearer <token>`")]
    NotBearer,
    #[error("more than one Authorization header: send exactly one")]
    Doubled,
    #[error("unknown or revoked bearer token")]
    Unknown,
    #[error("unknown or revoked bearer token")]
    Revoked { token_id: String },
    #[error("this route needs a token of scope {needed}; token {token_id} has scope {has}")]
    Forbidden {
        token_id: String,
        has: Scope,
        needed: Scope,
    },
    #[error("cannot look up API token {token_id}")]
    Lookup {
        token_id: String,
        #[source]
        source: StoreError,
    },
}

impl AuthError {
    pub fn problem(&self) -> Problem {
        let (status, code, title) = match self {
            AuthError::Missing
            | AuthError::NotBearer
            | AuthError::Doubled
            | AuthError::Unknown
            | AuthError::Revoked { .. } => {
                (401, "unauthorized", "a valid bearer token is required")
            }
            AuthError::Forbidden { .. } => (403, "forbidden", "the token's scope is too small"),
            AuthError::Lookup { source, .. } if source.is_transient() => {
                (503, "store_unavailable", "the store is unavailable")
            }
            AuthError::Lookup { .. } => (503, "store_lost", "the store failed"),
        };
        Problem::new(status, code, title, super::problem::chain(self))
    }
}

impl IntoResponse for AuthError {
    fn into_response(self) -> Response {
        let challenge = match &self {
            AuthError::Missing => Some(r#"Bearer realm="paddock""#),
            AuthError::NotBearer
            | AuthError::Doubled
            | AuthError::Unknown
            | AuthError::Revoked { .. } => Some(r#"Bearer realm="paddock", error="invalid_token""#),
            AuthError::Forbidden { .. } => {
                Some(r#"Bearer realm="paddock", error="insufficient_scope""#)
            }
            AuthError::Lookup { .. } => None,
        };
        let mut response = self.problem().into_response();
        if let Some(challenge) = challenge {
            response
                .headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
        }
        response
    }
}

/// Checks presented tokens against the store.
#[derive(Debug, Clone)]
pub struct Authenticator {
    store: SharedStore,
}

impl Authenticator {
    pub fn new(store: SharedStore) -> Authenticator {
        Authenticator { store }
    }

    /// The caller `headers` authenticate, if its token may do what `needed`
    /// allows.
    pub async fn authorize(&self, headers: &HeaderMap, needed: Scope) -> Result<Caller, AuthError> {
        let presented = bearer(headers)?;
        let (id, secret) = api_token::split(presented.expose()).ok_or(AuthError::Unknown)?;
        let stored = self
            .store
            .api_token(id)
            .await
            .map_err(|source| AuthError::Lookup {
                token_id: id.to_owned(),
                source,
            })?;
        // An unknown id is compared as a known one is (`api_token::verify`):
        // the answer's time does not say whether the id exists.
        let stored = api_token::verify(stored.as_ref(), secret)
            .cloned()
            .ok_or(AuthError::Unknown)?;
        if stored.revoked_at.is_some() {
            return Err(AuthError::Revoked {
                token_id: stored.id,
            });
        }
        if !stored.scope.allows(needed) {
            return Err(AuthError::Forbidden {
                token_id: stored.id,
                has: stored.scope,
                needed,
            });
        }
        Ok(Caller {
            token_id: stored.id,
            scope: stored.scope,
            token_name: stored.name,
        })
    }
}

/// The bearer token of `headers`, as a secret. Two `Authorization`
/// headers are refused, not one of them picked: a proxy in front may have
/// checked the other.
fn bearer(headers: &HeaderMap) -> Result<Secret, AuthError> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let value = values.next().ok_or(AuthError::Missing)?;
    if values.next().is_some() {
        return Err(AuthError::Doubled);
    }
    let text = value.to_str().map_err(|_| AuthError::NotBearer)?;
    let (scheme, token) = text.split_once(' ').ok_or(AuthError::NotBearer)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(AuthError::NotBearer);
    }
    Ok(Secret::new(token.trim().to_owned()))
}

/// The state of [`require`]: the authenticator and the scope the guarded
/// routes need.
#[derive(Debug, Clone)]
pub struct Gate {
    pub auth: Authenticator,
    pub needed: Scope,
}

/// Middleware: refuses the request (401/403 problem) unless its token
/// allows `gate.needed`; otherwise runs it with the [`Caller`] as an
/// extension.
pub async fn require(State(gate): State<Gate>, mut request: Request, next: Next) -> Response {
    match gate.auth.authorize(request.headers(), gate.needed).await {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(e) => {
            let path = request.uri().path();
            match &e {
                AuthError::Lookup { .. } => {
                    tracing::error!(error = ?e, path, "cannot authenticate a request")
                }
                _ => tracing::info!(reason = %e, path, "refused a request"),
            }
            e.into_response()
        }
    }
}

#[cfg(test)]
mod tests;
