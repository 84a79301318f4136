//! Where the broker forwards a job's calls, and how: the upstream's base URL,
//! the provider label for the ledger, the real key (if any) and how it is
//! injected, and which request and response headers cross the broker.

use http::{HeaderMap, HeaderName};

use super::meter::Api;
use super::secret::Secret;

/// The default OpenAI API base (the path after `/v1` is appended).
pub const OPENAI_BASE: &str = "https://api.openai.com/v1";
/// The default Anthropic API base (the path after `/v1` is appended).
pub const ANTHROPIC_BASE: &str = "https://api.anthropic.com/v1";

/// How the real key is sent upstream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum KeyHeader {
    /// The API's own convention: `Authorization: Bearer` for OpenAI's APIs,
    /// `x-api-key` for Anthropic Messages.
    #[default]
    ByApi,
    /// `api-key: KEY`, as Azure OpenAI and Azure AI Foundry expect.
    ApiKey,
}

#[derive(Debug, Clone)]
pub struct Upstream {
    /// The ledger's provider label: `openai`, `anthropic`, `scripted`.
    pub provider: String,
    /// The base the request path after `/v1` is appended to, e.g.
    /// `https://api.openai.com/v1`. It may carry a query (Azure's
    /// `?api-version=…`), which every request keeps.
    pub base: String,
    pub key: Option<Secret>,
    pub key_header: KeyHeader,
}

impl Upstream {
    /// The upstream URL for an incoming path such as `/v1/messages` and its
    /// query (after the base's own query, if any).
    pub fn url(&self, path: &str, query: Option<&str>) -> String {
        let rest = path.strip_prefix("/v1").unwrap_or(path);
        let (base, base_query) = match self.base.split_once('?') {
            Some((b, q)) => (b, Some(q)),
            None => (self.base.as_str(), None),
        };
        let mut url = format!("{}{}", base.trim_end_matches('/'), rest);
        let queries: Vec<&str> = [base_query, query]
            .into_iter()
            .flatten()
            .filter(|q| !q.is_empty())
            .collect();
        if !queries.is_empty() {
            url.push('?');
            url.push_str(&queries.join("&"));
        }
        url
    }

    /// Request headers for the upstream: the engine's own headers minus
    /// credentials, hop-by-hop and length/encoding headers, plus the real key
    /// in the header the API expects. `anthropic-*` and `openai-*` headers
    /// pass byte for byte.
    pub fn request_headers(&self, api: Api, incoming: &HeaderMap) -> HeaderMap {
        let mut out = HeaderMap::new();
        for (name, value) in incoming {
            if forwardable_request_header(name) {
                out.append(name.clone(), value.clone());
            }
        }
        if let Some(key) = &self.key {
            let header = match (self.key_header, api) {
                (KeyHeader::ApiKey, _) => {
                    (HeaderName::from_static("api-key"), key.expose().to_string())
                }
                (KeyHeader::ByApi, Api::Responses | Api::Chat) => (
                    http::header::AUTHORIZATION,
                    format!("Bearer {}", key.expose()),
                ),
                (KeyHeader::ByApi, Api::Messages) => (
                    HeaderName::from_static("x-api-key"),
                    key.expose().to_string(),
                ),
            };
            if let Ok(mut v) = http::HeaderValue::from_str(&header.1) {
                v.set_sensitive(true);
                out.insert(header.0, v);
            }
        }
        out
    }
}

fn forwardable_request_header(name: &HeaderName) -> bool {
    !matches!(
        name.as_str(),
        "authorization"
            | "x-api-key"
            | "api-key"
            | "host"
            | "content-length"
            | "accept-encoding"
            | "connection"
            | "keep-alive"
            | "proxy-authorization"
            | "proxy-connection"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "cookie"
    )
}

/// Response headers passed back to the engine.
pub fn forwardable_response_header(name: &HeaderName) -> bool {
    !matches!(
        name.as_str(),
        "content-length"
            | "connection"
            | "keep-alive"
            | "transfer-encoding"
            | "te"
            | "trailer"
            | "upgrade"
            | "set-cookie"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn azure_style_base_keeps_its_query_and_takes_api_key() {
        let up = Upstream {
            provider: "openai".into(),
            base: "https://res.openai.azure.com/openai/v1?api-version=preview".into(),
            key: Some(Secret::new("azure-key".into())),
            key_header: KeyHeader::ApiKey,
        };
        assert_eq!(
            up.url("/v1/chat/completions", Some("x=1")),
            "https://res.openai.azure.com/openai/v1/chat/completions?api-version=preview&x=1"
        );
        let mut h = HeaderMap::new();
        h.insert("authorization", "Bearer pdk-job-token".parse().unwrap());
        h.insert("api-key", "pdk-job-token".parse().unwrap());
        let out = up.request_headers(Api::Chat, &h);
        let pairs: Vec<(String, String)> = out
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string()))
            .collect();
        assert_eq!(pairs, vec![("api-key".into(), "azure-key".into())]);
    }

    #[test]
    fn urls_keep_path_and_query() {
        let up = Upstream {
            provider: "anthropic".into(),
            base: "https://api.anthropic.com/v1/".into(),
            key: None,
            key_header: KeyHeader::ByApi,
        };
        assert_eq!(
            up.url("/v1/messages", Some("beta=true")),
            "https://api.anthropic.com/v1/messages?beta=true"
        );
    }

    #[test]
    fn credentials_are_replaced_and_anthropic_headers_kept() {
        let up = Upstream {
            provider: "anthropic".into(),
            base: ANTHROPIC_BASE.into(),
            key: Some(Secret::new("sk-ant-real".into())),
            key_header: KeyHeader::ByApi,
        };
        let mut h = HeaderMap::new();
        h.insert("x-api-key", "pdk-job-token".parse().unwrap());
        h.insert("authorization", "Bearer pdk-job-token".parse().unwrap());
        h.insert("anthropic-beta", "a-2025,b-2026".parse().unwrap());
        h.insert("anthropic-version", "2023-06-01".parse().unwrap());
        h.insert("accept-encoding", "gzip".parse().unwrap());
        h.insert("content-length", "12".parse().unwrap());
        let out = up.request_headers(Api::Messages, &h);
        let mut pairs: Vec<(String, String)> = out
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string()))
            .collect();
        pairs.sort();
        assert_eq!(
            pairs,
            vec![
                ("anthropic-beta".into(), "a-2025,b-2026".into()),
                ("anthropic-version".into(), "2023-06-01".into()),
                ("x-api-key".into(), "sk-ant-real".into()),
            ]
        );
    }

    #[test]
    fn openai_key_goes_in_bearer() {
        let up = Upstream {
            provider: "openai".into(),
            base: OPENAI_BASE.into(),
            key: Some(Secret::new("sk-real".into())),
            key_header: KeyHeader::ByApi,
        };
        let mut h = HeaderMap::new();
        h.insert("authorization", "Bearer pdk-job-token".parse().unwrap());
        let out = up.request_headers(Api::Responses, &h);
        assert_eq!(out.get("authorization").unwrap(), "Bearer sk-real");
        assert_eq!(out.len(), 1);
    }
}
