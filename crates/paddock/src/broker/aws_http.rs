//! The HTTP client the AWS credential chain (`aws-config`) talks through:
//! the broker's own `reqwest` client (rustls with ring), adapted to the
//! Smithy runtime's `HttpClient` trait, so that the chain's calls (STS for
//! assume-role and web identity, SSO, the container and instance metadata
//! endpoints) need no second TLS stack. Bodies are small JSON or XML
//! documents: each is read whole, up to [`MAX_ANSWER`] bytes.

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;

/// The most of one answer read (credential documents are a few kilobytes).
pub const MAX_ANSWER: usize = 1 << 20;

/// `reqwest` as the AWS SDK's HTTP client.
#[derive(Debug, Clone)]
pub struct ReqwestHttpClient {
    client: reqwest::Client,
}

impl ReqwestHttpClient {
    pub fn new(client: reqwest::Client) -> ReqwestHttpClient {
        ReqwestHttpClient { client }
    }
}

impl HttpClient for ReqwestHttpClient {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        _components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(Connector {
            client: self.client.clone(),
            timeout: settings.read_timeout(),
        })
    }
}

#[derive(Debug)]
struct Connector {
    client: reqwest::Client,
    timeout: Option<std::time::Duration>,
}

impl HttpConnector for Connector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let client = self.client.clone();
        let timeout = self.timeout;
        HttpConnectorFuture::new(async move {
            let method = reqwest::Method::from_bytes(request.method().as_bytes())
                .map_err(|e| ConnectorError::other(Box::new(e), None))?;
            let mut builder = client.request(method, request.uri());
            for (name, value) in request.headers() {
                builder = builder.header(name, value);
            }
            if let Some(t) = timeout {
                builder = builder.timeout(t);
            }
            let body = request
                .body()
                .bytes()
                .map(<[u8]>::to_vec)
                .unwrap_or_default();
            let resp = builder
                .body(body)
                .send()
                .await
                .map_err(|e| ConnectorError::io(Box::new(e.without_url())))?;
            let status = resp.status().as_u16();
            let headers = resp.headers().clone();
            let bytes = super::bounded::read(resp, MAX_ANSWER)
                .await
                .map_err(|e| ConnectorError::io(Box::new(e)))?;
            let mut out = HttpResponse::new(
                status
                    .try_into()
                    .map_err(|e| ConnectorError::other(Box::new(e), None))?,
                SdkBody::from(bytes),
            );
            for (name, value) in &headers {
                if let Ok(v) = value.to_str() {
                    out.headers_mut()
                        .append(name.as_str().to_string(), v.to_string());
                }
            }
            Ok(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_smithy_runtime_api::client::runtime_components::RuntimeComponentsBuilder;

    /// A credentials endpoint that never stops answering is read up to
    /// [`MAX_ANSWER`] only.
    #[tokio::test]
    async fn an_endless_answer_is_an_error_not_a_hang() {
        let addr = paddock_test_support::endless::serve().await;
        let client = ReqwestHttpClient::new(reqwest::Client::builder().no_proxy().build().unwrap());
        let components = RuntimeComponentsBuilder::for_tests().build().unwrap();
        let connector =
            client.http_connector(&HttpConnectorSettings::builder().build(), &components);
        let request = HttpRequest::try_from(
            http::Request::builder()
                .uri(format!("http://{addr}/latest/api/token"))
                .body(SdkBody::empty())
                .unwrap(),
        )
        .unwrap();
        let got = tokio::time::timeout(std::time::Duration::from_secs(20), connector.call(request))
            .await
            .expect("the call ends")
            .unwrap_err();
        assert_eq!(
            std::error::Error::source(&got).map(ToString::to_string),
            Some("the answer is longer than 1048576 bytes".to_string())
        );
    }
}
