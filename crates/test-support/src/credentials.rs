//! Stand-ins for the cloud-credential tests: a provider that answers only
//! calls carrying its key, a mock model provider recording each request's
//! `authorization` header, and a broker for one credential.

use std::path::Path;

use crate::home::Home;

/// A stand-in provider on loopback that replays `scenario` only to calls
/// carrying `key` (it answers 401 otherwise): OpenAI's wire for Codex,
/// Anthropic's for Claude Code.
pub struct KeyedProvider {
    pub server: crate::MockUpstream,
    /// `openai` or `anthropic`.
    pub name: &'static str,
    /// The base URL in the convention of the provider's spec field.
    pub base: String,
}

impl KeyedProvider {
    pub async fn start(home: &Home, engine: &str, scenario: &str, key: &str) -> KeyedProvider {
        use paddock::scripted::{RenderContext, Scenario};
        let scenario = Scenario::from_toml(scenario, Path::new("provider.toml")).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = crate::MockUpstream::start(
            listener,
            std::sync::Arc::new(scenario),
            RenderContext {
                workdir: home.path().to_path_buf(),
            },
            Some(paddock::broker::Secret::new(key.to_string())),
        )
        .unwrap();
        let (name, base) = match engine {
            "codex" => ("openai", server.base.clone()),
            // ANTHROPIC_BASE_URL convention: without `/v1`.
            _ => ("anthropic", server.base.trim_end_matches("/v1").to_string()),
        };
        KeyedProvider { server, name, base }
    }

    /// The spec's provider lines (without the `[upstream]` header); the key
    /// is read from `PADDOCK_E2E_KEY`.
    pub fn spec_lines(&self) -> String {
        format!(
            "provider = \"{}\"\nkey = \"env:PADDOCK_E2E_KEY\"\nbase_url = \"{}\"",
            self.name, self.base
        )
    }
}

/// Two turns for the cloud-provider tests: a shell command that saves the
/// engine's own environment into the checkout (the key scan reads it), all
/// four token kinds metered, then a closing message.
pub const PROVIDER_PROBE: &str = r#"
[[turn]]
usage = { input = 10, cached = 20, cache_write = 30, output = 5 }
[[turn.action]]
type = "shell"
command = "tr '\\0' '\\n' < /proc/$PPID/environ > engine-env.txt; echo probed"

[[turn]]
text = "Probed."
usage = { input = 12, output = 3 }
"#;

/// A mock model provider on loopback for the credential tests: answers every
/// POST with one whole (non-streamed) answer in the wire of the path
/// (Anthropic Messages for Vertex and Bedrock paths, Chat Completions
/// otherwise) and records each request's `authorization` header (`-` when
/// absent). Returns its base URL (without `/v1`) and the record.
pub async fn mock_upstream() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
        let record = record.clone();
        async move {
            let auth = req
                .headers()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("-")
                .to_string();
            record.lock().unwrap().push(auth);
            let body = if req.uri().path().contains("/chat/completions") {
                serde_json::json!({"id": "chatcmpl-1", "object": "chat.completion",
                    "model": "gpt-5.5", "choices": [{"index": 0, "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "ok"}}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}})
            } else {
                serde_json::json!({"id": "msg_1", "type": "message", "role": "assistant",
                    "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": "ok"}],
                    "stop_reason": "end_turn", "usage": {"input_tokens": 3, "output_tokens": 1}})
            };
            (
                [(http::header::CONTENT_TYPE, "application/json")],
                body.to_string(),
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, seen)
}

/// A broker for a credential test: `provider` at `base`, no budget, the
/// shipped prices.
pub async fn credential_broker(
    base: String,
    provider: paddock::broker::Provider,
) -> paddock::broker::BrokerHandle {
    paddock::broker::start(
        tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
        paddock::broker::BrokerConfig {
            job_id: "job-credentials".into(),
            attempt: 1,
            upstream: paddock::broker::Upstream { base, provider },
            prices: std::sync::Arc::new(paddock::broker::PriceTable::vendored().unwrap()),
            ceilings: vec![],
            allowlist: paddock::broker::ModelAllowlist::any(),
            allow_unpriced: false,
            web_search: false,
            retry: paddock::broker::RetryPolicy::default(),
            max_upstream_event_bytes: 16 << 20,
            ledger: std::sync::Arc::new(paddock::broker::ledger::MemoryLedger::default()),
        },
    )
    .unwrap()
}
