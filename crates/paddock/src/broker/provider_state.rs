//! Calls that would reach state the model provider keeps for the key's
//! account, not the job's: every job of a host (and the operator's own
//! use of the key) shares one provider account, so a stored object named
//! in a request could be another job's or the operator's. A Responses
//! `previous_response_id`, `conversation` (read and appended to) or stored
//! `prompt`; an `item_reference` input item; an uploaded file named by
//! `file_id` or `file_ids` anywhere in the request (Responses
//! `input_file` and `input_image`, a Chat `file` part, a Messages `source`
//! of type `file`, a `container_upload` block, a code interpreter's
//! container); vector stores (`vector_store_ids`, the `file_search` tool);
//! a container by id (a Responses tool's `container` string, a Messages
//! request's `container`, which also carries the account's skills). The
//! engines name none (they resend each conversation whole), so the broker
//! refuses them; the provider's other endpoints (Files, Batches,
//! retrieving a response, vector stores, containers) have no route at all.
//! The content of tool calls (a Messages `tool_use` block's `input`) is
//! the model's, not a request for stored state, and is not searched.
//! Nor may a request choose another organization or project of the key
//! than its default ([`refused_header`]: OpenAI's `OpenAI-Organization`
//! and `OpenAI-Project`, Google's `x-goog-user-project`, which bills
//! another project the server's identity may use), whose state and spend
//! are the operator's others; nor a cloud provider's option carried in a
//! header rather than the body, which no budget sees: Bedrock's
//! `X-Amzn-Bedrock-…` (its priority or flex service tier, latency-optimized
//! inference, a guardrail of the account, billed per text unit, a trace)
//! and Vertex AI's `X-Vertex-AI-…` (provisioned throughput, the priority
//! tier). The engines send none of them; before, they were forwarded, and
//! a Bedrock call asking the priority tier was metered at standard rates.

use http::HeaderMap;
use serde_json::Value;

/// The request headers that choose the account a key acts for, as the
/// refusal says them: an engine sends none (Paddock configures them none).
const ACCOUNT_HEADERS: [(&str, &str); 3] = [
    (
        "openai-organization",
        "an OpenAI organization (the `OpenAI-Organization` header)",
    ),
    (
        "openai-project",
        "an OpenAI project (the `OpenAI-Project` header)",
    ),
    (
        "x-goog-user-project",
        "a Google Cloud project to bill (the `x-goog-user-project` header)",
    ),
];

/// Header-name prefixes of a cloud provider's options, as the refusal
/// says them: every header whose name starts so is refused.
const OPTION_PREFIXES: [(&str, &str); 2] = [
    (
        "x-amzn-bedrock-",
        "a Bedrock option (a service tier, latency-optimized inference, a guardrail of the \
         account, a trace)",
    ),
    (
        "x-vertex-ai-",
        "a Vertex AI request type (provisioned throughput, a priority tier)",
    ),
];

/// A request header the broker refuses (module text), as the refusal
/// says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RefusedHeader {
    /// It chooses another organization or project of the key.
    Account(&'static str),
    /// It asks a cloud provider's option the broker does not meter:
    /// what the option is, and the header's name as sent (lower case).
    Option { what: &'static str, header: String },
}

impl RefusedHeader {
    /// The refusal's message, as the job and the ledger read it.
    pub(super) fn message(&self) -> String {
        match self {
            Self::Account(what) => format!(
                "paddock broker: {what} would choose another account than the key's own, whose \
                 state and spend are not the job's; refused"
            ),
            Self::Option { what, header } => format!(
                "paddock broker: the `{header}` header asks {what}, billed or run beyond the \
                 tokens the broker meters, which no budget would see; refused"
            ),
        }
    }
}

/// The first header of `headers` the broker refuses (module text);
/// `None`: none.
pub(super) fn refused_header(headers: &HeaderMap) -> Option<RefusedHeader> {
    if let Some((_, what)) = ACCOUNT_HEADERS
        .iter()
        .find(|(name, _)| headers.contains_key(*name))
    {
        return Some(RefusedHeader::Account(what));
    }
    headers.keys().find_map(|name| {
        OPTION_PREFIXES
            .iter()
            .find(|(prefix, _)| name.as_str().starts_with(prefix))
            .map(|(_, what)| RefusedHeader::Option {
                what,
                header: name.as_str().to_owned(),
            })
    })
}

use super::json_walk::Entry;
use super::wire::Api;

/// The top-level Responses fields that name stored state, as the refusal
/// says them.
const RESPONSES_FIELDS: [(&str, &str); 3] = [
    (
        "previous_response_id",
        "a stored response (`previous_response_id`)",
    ),
    ("conversation", "a stored conversation (`conversation`)"),
    ("prompt", "a stored prompt (`prompt`)"),
];

/// What in `request` (a call to `api`) names state the provider keeps for
/// the account, as the refusal says it; `None`: nothing.
pub(super) fn provider_state(api: Api, request: &Value) -> Option<&'static str> {
    let set = |field: &str| request.get(field).is_some_and(|v| !v.is_null());
    let top = match api {
        Api::Responses => RESPONSES_FIELDS
            .iter()
            .find(|(field, _)| set(field))
            .map(|(_, what)| *what),
        Api::Messages if set("container") => Some("a provider container (`container`)"),
        Api::Messages | Api::Chat => None,
    };
    top.or_else(|| stored_objects(request))
}

/// A stored object named at any depth: a file (`file_id`, `file_ids`),
/// vector stores (`vector_store_ids`), an `item_reference`, a tool's
/// container given by id.
fn stored_objects(request: &Value) -> Option<&'static str> {
    super::json_walk::find(request, |map, key, value| {
        let kind = map.get("type").and_then(Value::as_str).unwrap_or("");
        let named = !value.is_null()
            && value.as_array().is_none_or(|a| !a.is_empty())
            && value.as_str().is_none_or(|s| !s.is_empty());
        match key {
            "type" if kind == "item_reference" => Entry::Found("a stored item (`item_reference`)"),
            "file_id" | "file_ids" if named => Entry::Found("an uploaded file (`file_id`)"),
            "vector_store_ids" if named => Entry::Found("a vector store (`vector_store_ids`)"),
            "container" if value.is_string() => Entry::Found("a provider container (`container`)"),
            // The model's own tool input: not a request.
            "input" if kind.ends_with("tool_use") => Entry::Skip,
            _ => Entry::Enter,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Each way a request names the account's stored state is found, on
    /// each API, and what the engines send is not: their resent history
    /// (items with their own `id`s, `store: false`, `prompt_cache_key`),
    /// a tool input carrying a `file_id` of the model's, empty lists, a
    /// code interpreter given a fresh container.
    #[test]
    fn stored_state_of_the_account_is_found() {
        let cases = [
            (
                Api::Responses,
                json!({"model": "gpt-5.5", "previous_response_id": "resp_other_job"}),
            ),
            (
                Api::Responses,
                json!({"conversation": {"id": "conv_operator"}}),
            ),
            (
                Api::Responses,
                json!({"prompt": {"id": "pmpt_operator", "version": "2"}}),
            ),
            (
                Api::Responses,
                json!({"input": [{"type": "item_reference", "id": "msg_other_job"}]}),
            ),
            (
                Api::Responses,
                json!({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "file-operator"}]}]}),
            ),
            (
                Api::Responses,
                json!({"tools": [{"type": "file_search", "vector_store_ids": ["vs_operator"]}]}),
            ),
            (
                Api::Responses,
                json!({"tools": [{"type": "code_interpreter", "container": "cntr_other_job"}]}),
            ),
            (
                Api::Responses,
                json!({"tools": [{"type": "code_interpreter", "container": {"type": "auto", "file_ids": ["file-operator"]}}]}),
            ),
            (
                Api::Chat,
                json!({"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_id": "file-operator"}}]}]}),
            ),
            (
                Api::Messages,
                json!({"messages": [{"role": "user", "content": [{"type": "document", "source": {"type": "file", "file_id": "file_operator"}}]}]}),
            ),
            (
                Api::Messages,
                json!({"messages": [{"role": "user", "content": [{"type": "container_upload", "file_id": "file_operator"}]}]}),
            ),
            (Api::Messages, json!({"container": "container_other_job"})),
            (
                Api::Messages,
                json!({"container": {"skills": [{"type": "custom", "skill_id": "skill_operator"}]}}),
            ),
            // What the engines send, and look-alikes that are not.
            (
                Api::Responses,
                json!({"model": "gpt-5.5", "store": false, "prompt_cache_key": "01a2",
                       "previous_response_id": null,
                       "input": [{"type": "message", "id": "msg_1", "role": "user", "content": [{"type": "input_text", "text": "file_id"}]},
                                 {"type": "reasoning", "id": "rs_1", "encrypted_content": "x", "summary": []}]}),
            ),
            (
                Api::Messages,
                json!({"messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "mcp__x", "input": {"file_id": "file_x", "container": "c"}}]}]}),
            ),
            (
                Api::Responses,
                json!({"tools": [{"type": "code_interpreter", "container": {"type": "auto", "file_ids": []}}]}),
            ),
            (Api::Chat, json!({"prompt": "not a Responses field here"})),
        ];
        let got: Vec<Option<&str>> = cases
            .iter()
            .map(|(api, r)| provider_state(*api, r))
            .collect();
        let file = Some("an uploaded file (`file_id`)");
        let container = Some("a provider container (`container`)");
        assert_eq!(
            got,
            [
                Some("a stored response (`previous_response_id`)"),
                Some("a stored conversation (`conversation`)"),
                Some("a stored prompt (`prompt`)"),
                Some("a stored item (`item_reference`)"),
                file,
                Some("a vector store (`vector_store_ids`)"),
                container,
                file,
                file,
                file,
                file,
                container,
                container,
                None,
                None,
                None,
                None,
            ]
        );
    }

    /// Each header choosing another account of the key, or a cloud
    /// provider's option, is found, whatever its case; the engines' own
    /// (`anthropic-beta`, `OpenAI-Beta`, `x-stainless-…`, AWS's
    /// `x-amz-…` signature headers, which the broker replaces, Google's
    /// `x-goog-api-client`) are not.
    #[test]
    fn refused_headers_are_found() {
        let found = |name: &str| {
            let mut h = HeaderMap::new();
            h.insert(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap_or(http::header::ACCEPT),
                http::HeaderValue::from_static("x"),
            );
            refused_header(&h).map(|r| r.message())
        };
        let option = |header: &str, what: &str| {
            Some(format!(
                "paddock broker: the `{header}` header asks {what}, billed or run beyond the \
                 tokens the broker meters, which no budget would see; refused"
            ))
        };
        let account = |what: &str| {
            Some(format!(
                "paddock broker: {what} would choose another account than the key's own, whose \
                 state and spend are not the job's; refused"
            ))
        };
        let bedrock = "a Bedrock option (a service tier, latency-optimized inference, a \
                       guardrail of the account, a trace)";
        let vertex = "a Vertex AI request type (provisioned throughput, a priority tier)";
        let got: Vec<Option<String>> = [
            "OpenAI-Organization",
            "openai-project",
            "X-Goog-User-Project",
            "X-Amzn-Bedrock-Service-Tier",
            "x-amzn-bedrock-performanceconfig-latency",
            "X-Amzn-Bedrock-GuardrailIdentifier",
            "X-Amzn-Bedrock-Trace",
            "X-Vertex-AI-LLM-Request-Type",
            "x-vertex-ai-llm-shared-request-type",
            "anthropic-beta",
            "OpenAI-Beta",
            "x-stainless-lang",
            "x-amz-date",
            "x-amzn-trace-id",
            "x-goog-api-client",
        ]
        .iter()
        .map(|n| found(n))
        .collect();
        assert_eq!(
            got,
            [
                account("an OpenAI organization (the `OpenAI-Organization` header)"),
                account("an OpenAI project (the `OpenAI-Project` header)"),
                account("a Google Cloud project to bill (the `x-goog-user-project` header)"),
                option("x-amzn-bedrock-service-tier", bedrock),
                option("x-amzn-bedrock-performanceconfig-latency", bedrock),
                option("x-amzn-bedrock-guardrailidentifier", bedrock),
                option("x-amzn-bedrock-trace", bedrock),
                option("x-vertex-ai-llm-request-type", vertex),
                option("x-vertex-ai-llm-shared-request-type", vertex),
                None,
                None,
                None,
                None,
                None,
                None,
            ]
        );
    }

    /// The requests the pinned engines sent (recorded fixtures) name no
    /// stored state.
    #[test]
    fn the_engines_requests_pass() {
        let recorded = [
            (
                Api::Responses,
                include_str!("../../tests/fixtures/requests/codex-0.171.0/turn-3.json"),
            ),
            (
                Api::Messages,
                include_str!("../../tests/fixtures/requests/claude-2.1.197/turn-3.json"),
            ),
            (
                Api::Messages,
                include_str!("../../tests/fixtures/requests/claude-2.1.197/title.json"),
            ),
        ];
        let got: Vec<Option<&str>> = recorded
            .iter()
            .map(|(api, text)| {
                let request: Value = serde_json::from_str(text).unwrap_or_default();
                assert!(request.is_object());
                provider_state(*api, &request)
            })
            .collect();
        assert_eq!(got, [None, None, None]);
    }
}
