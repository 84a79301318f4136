//! The proxy's own credentials on a loopback TCP listener (the `process`
//! rung): a port on `127.0.0.1` is open to every process of the host,
//! whatever its user, so without them any of them could use a job's
//! proxy: its list, the addresses its host profile opened, the
//! credentials it puts into requests. The job's proxy URL carries a
//! random token (`http://paddock:TOKEN@127.0.0.1:PORT`), which clients
//! send as `Proxy-Authorization: Basic`; a request without it, or with
//! another, gets a `407` (rule `proxy_auth`), is never forwarded and is
//! not on the job's record (it is not the job's: a client's first try
//! before it answers the challenge, as git's, or another process), only
//! logged. The header itself is never forwarded
//! (`server::DROPPED_HEADERS`).

use base64::Engine as _;

use super::head::Head;
use super::refusal::Refusal;
use crate::secret::Secret;

/// The rule of a request without the job's proxy credentials.
pub const RULE: &str = "proxy_auth";

/// The user name of the job's proxy URL.
pub const PROXY_USER: &str = "paddock";

/// What a request's `Proxy-Authorization` must be.
#[derive(Clone)]
pub struct ProxyAuth {
    /// `base64(PROXY_USER:token)`.
    expected: Secret,
}

impl ProxyAuth {
    pub fn new(token: &Secret) -> ProxyAuth {
        let basic = base64::engine::general_purpose::STANDARD
            .encode(format!("{PROXY_USER}:{}", token.expose()));
        ProxyAuth {
            expected: Secret::new(basic),
        }
    }

    /// `Ok` when `head` carries the job's credentials; compared in time
    /// independent of where a wrong one differs.
    pub fn check(&self, head: &Head) -> Result<(), Refusal> {
        let given = head
            .header("proxy-authorization")
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|v| {
                let (scheme, rest) = v.trim().split_once(' ')?;
                scheme.eq_ignore_ascii_case("basic").then_some(rest.trim())
            });
        let refuse = |why: &str| Err(Refusal::new(407, RULE, why.to_string()));
        match given {
            None => refuse("the request has no Proxy-Authorization: Basic header"),
            Some(g) if same(g.as_bytes(), self.expected.expose().as_bytes()) => Ok(()),
            Some(_) => refuse("the request's Proxy-Authorization is not this job's"),
        }
    }
}

/// Whether `a` and `b` are equal, looking at every byte of the longer.
fn same(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

/// A new random token for a job's proxy (32 hex digits).
pub fn new_token() -> Secret {
    let bytes: [u8; 16] = rand::random();
    Secret::new(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn head(auth: Option<&str>) -> Head {
        Head {
            method: "CONNECT".into(),
            target: "a.example:443".into(),
            version: 1,
            headers: auth
                .map(|a| vec![("Proxy-Authorization".to_string(), a.as_bytes().to_vec())])
                .unwrap_or_default(),
        }
    }

    #[test]
    fn only_the_jobs_basic_credentials_pass() {
        let auth = ProxyAuth::new(&Secret::new("tok".into()));
        // base64("paddock:tok")
        let right = "Basic cGFkZG9jazp0b2s=";
        let rule = |h: Head| auth.check(&h).map_err(|r| (r.status, r.rule, r.reason));
        assert_eq!(
            [
                rule(head(Some(right))),
                rule(head(Some("basic  cGFkZG9jazp0b2s= "))),
                rule(head(None)),
                rule(head(Some("Basic cGFkZG9jazp0b3g="))),
                rule(head(Some("Bearer tok"))),
            ],
            [
                Ok(()),
                Ok(()),
                Err((
                    Some(407),
                    "proxy_auth".to_string(),
                    "the request has no Proxy-Authorization: Basic header".to_string()
                )),
                Err((
                    Some(407),
                    "proxy_auth".to_string(),
                    "the request's Proxy-Authorization is not this job's".to_string()
                )),
                Err((
                    Some(407),
                    "proxy_auth".to_string(),
                    "the request has no Proxy-Authorization: Basic header".to_string()
                )),
            ]
        );
    }
}
