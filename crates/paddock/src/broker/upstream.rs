//! Where the broker forwards a job's calls: the upstream's base URL and its
//! [`Provider`], and which request and response headers cross the broker
//! (the provider adds its credentials per attempt).

use http::{HeaderMap, HeaderName};

use super::provider::Provider;

#[derive(Debug, Clone)]
pub struct Upstream {
    /// The base the request path after `/v1` is appended to, e.g.
    /// `https://api.openai.com/v1`. It may carry a query (Azure's
    /// `?api-version=…`), which every request keeps.
    pub base: String,
    pub provider: Provider,
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
    /// credentials, hop-by-hop and length/encoding headers. `anthropic-*`
    /// and `openai-*` headers pass byte for byte (a call choosing the
    /// key's organization or project, or asking a cloud provider's
    /// option in a header, was refused before:
    /// `provider_state::refused_header`).
    pub fn request_headers(incoming: &HeaderMap) -> HeaderMap {
        let mut out = HeaderMap::new();
        for (name, value) in incoming {
            if forwardable_request_header(name) {
                out.append(name.clone(), value.clone());
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
    use crate::broker::meter::Api;
    use crate::broker::provider::AzureAuth;
    use crate::broker::Secret;

    fn pairs(h: &HeaderMap) -> Vec<(String, String)> {
        let mut p: Vec<(String, String)> = h
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string()))
            .collect();
        p.sort();
        p
    }

    #[tokio::test]
    async fn azure_style_base_keeps_its_query_and_takes_api_key() {
        let up = Upstream {
            base: "https://res.openai.azure.com/openai/v1?api-version=preview".into(),
            provider: Provider::Azure(AzureAuth::ApiKey(Secret::new("azure-key".into()))),
        };
        assert_eq!(
            up.url("/v1/chat/completions", Some("x=1")),
            "https://res.openai.azure.com/openai/v1/chat/completions?api-version=preview&x=1"
        );
        let mut h = HeaderMap::new();
        h.insert("authorization", "Bearer pdk-job-token".parse().unwrap());
        h.insert("api-key", "pdk-job-token".parse().unwrap());
        let out = up
            .provider
            .credentials(Api::Chat, "", b"", Upstream::request_headers(&h))
            .await
            .unwrap();
        assert_eq!(pairs(&out), vec![("api-key".into(), "azure-key".into())]);
    }

    #[test]
    fn urls_keep_path_and_query() {
        let up = Upstream {
            base: "https://api.anthropic.com/v1/".into(),
            provider: Provider::Scripted,
        };
        assert_eq!(
            up.url("/v1/messages", Some("beta=true")),
            "https://api.anthropic.com/v1/messages?beta=true"
        );
    }

    #[tokio::test]
    async fn credentials_are_replaced_and_anthropic_headers_kept() {
        let provider = Provider::Anthropic {
            key: Secret::new("sk-ant-real".into()),
        };
        let mut h = HeaderMap::new();
        h.insert("x-api-key", "pdk-job-token".parse().unwrap());
        h.insert("authorization", "Bearer pdk-job-token".parse().unwrap());
        h.insert("anthropic-beta", "a-2025,b-2026".parse().unwrap());
        h.insert("anthropic-version", "2023-06-01".parse().unwrap());
        h.insert("accept-encoding", "gzip".parse().unwrap());
        h.insert("content-length", "12".parse().unwrap());
        let out = provider
            .credentials(Api::Messages, "", b"", Upstream::request_headers(&h))
            .await
            .unwrap();
        assert_eq!(
            pairs(&out),
            vec![
                ("anthropic-beta".into(), "a-2025,b-2026".into()),
                ("anthropic-version".into(), "2023-06-01".into()),
                ("x-api-key".into(), "sk-ant-real".into()),
            ]
        );
    }

    #[tokio::test]
    async fn openai_key_goes_in_bearer() {
        let provider = Provider::OpenAi {
            key: Secret::new("sk-real".into()),
        };
        let mut h = HeaderMap::new();
        h.insert("authorization", "Bearer pdk-job-token".parse().unwrap());
        let out = provider
            .credentials(Api::Responses, "", b"", Upstream::request_headers(&h))
            .await
            .unwrap();
        assert_eq!(
            pairs(&out),
            vec![("authorization".into(), "Bearer sk-real".into())]
        );
    }
}
