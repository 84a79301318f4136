//! Calls that would have the model provider itself connect to a server
//! the job names: a Responses remote MCP tool (`tools[].type = "mcp"`,
//! its `server_url` any URL), a Messages request's `mcp_servers`, or the
//! Messages `web_fetch` server tool (the model fetches a URL it chooses,
//! query string and all). The provider's connection never passes the
//! job's egress proxy, so such a call would carry whatever the job put in
//! its prompt to any host, past the job's network policy ("nothing but
//! the broker"). The broker refuses them; the engines use none (their
//! MCP and web fetch tools run in the job, through its proxy). Web search
//! (`web_search`, both engines' own) is not refused: docs/broker.md says
//! what it leaves open.

use serde_json::Value;

use super::wire::Api;

/// What in `request` (a call to `api`) would have the provider connect
/// to a server the job names, as the refusal says it; `None`: nothing.
pub(super) fn provider_fetch(api: Api, request: &Value) -> Option<&'static str> {
    let tools = request
        .get("tools")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let has_tool = |wanted: &dyn Fn(&str) -> bool| {
        tools
            .iter()
            .any(|t| t.get("type").and_then(Value::as_str).is_some_and(wanted))
    };
    match api {
        Api::Responses => {
            has_tool(&|t| t == "mcp").then_some("a remote MCP tool (`tools[].type` `mcp`)")
        }
        Api::Messages => {
            let servers = request
                .get("mcp_servers")
                .is_some_and(|v| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()));
            if servers {
                return Some("an MCP server (`mcp_servers`)");
            }
            has_tool(&|t| t.starts_with("web_fetch"))
                .then_some("the web fetch server tool (`tools[].type` `web_fetch_…`)")
        }
        Api::Chat => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What is refused on each API, and what is not: web search, the
    /// engines' own function tools, an empty `mcp_servers`, another API's
    /// field.
    #[test]
    fn calls_naming_a_server_for_the_provider_are_found() {
        let cases = [
            (
                Api::Responses,
                json!({"tools": [{"type": "function", "name": "shell"}, {"type": "mcp", "server_label": "x", "server_url": "https://evil.example/"}]}),
            ),
            (
                Api::Responses,
                json!({"tools": [{"type": "web_search"}, {"type": "function", "name": "shell"}]}),
            ),
            (
                Api::Responses,
                json!({"mcp_servers": [{"type": "url", "url": "https://evil.example/"}]}),
            ),
            (
                Api::Messages,
                json!({"mcp_servers": [{"type": "url", "url": "https://evil.example/", "name": "x"}]}),
            ),
            (Api::Messages, json!({"mcp_servers": []})),
            (
                Api::Messages,
                json!({"tools": [{"type": "web_fetch_20250910", "name": "web_fetch"}]}),
            ),
            (
                Api::Messages,
                json!({"tools": [{"type": "web_search_20250305", "name": "web_search"}, {"name": "Bash", "input_schema": {}}]}),
            ),
            (Api::Chat, json!({"tools": [{"type": "mcp"}]})),
        ];
        let got: Vec<Option<&str>> = cases
            .iter()
            .map(|(api, r)| provider_fetch(*api, r))
            .collect();
        assert_eq!(
            got,
            [
                Some("a remote MCP tool (`tools[].type` `mcp`)"),
                None,
                None,
                Some("an MCP server (`mcp_servers`)"),
                None,
                Some("the web fetch server tool (`tools[].type` `web_fetch_…`)"),
                None,
                None,
            ]
        );
    }
}
