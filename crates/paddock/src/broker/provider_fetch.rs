//! Calls that would have the model provider itself connect to a server
//! the job names: a Responses remote MCP tool (`tools[].type = "mcp"`,
//! its `server_url` any URL), a Messages request's `mcp_servers`, the
//! Messages `web_fetch` server tool (the model fetches a URL it chooses,
//! query string and all), Azure's On Your Data `data_sources`, or an image
//! or file given by URL anywhere in the request (`image_url` and
//! `file_url` other than a `data:` URL, a Messages `source` of type `url`),
//! which the provider fetches. The provider's connection never passes the
//! job's egress proxy, so such a call would carry whatever the job put in
//! its prompt to any host, past the job's network policy ("nothing but
//! the broker"). The broker refuses them; the engines use none (their
//! MCP and web fetch tools run in the job, through its proxy). Web search
//! (`web_search`, both engines' own: the provider searches and opens the
//! pages the model picks) is found by [`web_search`] and refused unless
//! the job's `[network] web_search` turns it on.

use serde_json::Value;

use super::json_walk::Entry;
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
    let listed = |field: &str| {
        request
            .get(field)
            .is_some_and(|v| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()))
    };
    let found = match api {
        Api::Responses => {
            has_tool(&|t| t == "mcp").then_some("a remote MCP tool (`tools[].type` `mcp`)")
        }
        Api::Messages if listed("mcp_servers") => Some("an MCP server (`mcp_servers`)"),
        Api::Messages => has_tool(&|t| t.starts_with("web_fetch"))
            .then_some("the web fetch server tool (`tools[].type` `web_fetch_…`)"),
        Api::Chat => listed("data_sources").then_some("a data source (`data_sources`)"),
    };
    found.or_else(|| fetched_content(request))
}

/// The model provider's web search in `request` (a call to `api`), as
/// the refusal says it; `None`: none. A tool whose type starts with
/// `web_search` (Responses' `web_search`, `web_search_preview…`; the
/// Messages server tool `web_search_2025…`), or Chat Completions'
/// `web_search_options`.
pub(super) fn web_search(api: Api, request: &Value) -> Option<&'static str> {
    let tool = request
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|tools| {
            tools.iter().any(|t| {
                t.get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| t.starts_with("web_search"))
            })
        });
    if tool {
        return Some("the provider's web search tool (`tools[].type` `web_search…`)");
    }
    match api {
        Api::Chat => request
            .get("web_search_options")
            .is_some_and(|v| !v.is_null())
            .then_some("the provider's web search (`web_search_options`)"),
        Api::Responses | Api::Messages => None,
    }
}

/// Whether `model` searches the web by itself, whatever the request asks
/// (OpenAI's `…-search-preview…` and `…-search-api…` Chat Completions
/// models, a name ending in `-search`): refused with web search.
pub(super) fn searching_model(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    m.contains("-search-preview") || m.contains("-search-api") || m.ends_with("-search")
}

/// An image or file the request gives by URL, which the provider fetches
/// (any depth: content sits in messages, tool results, instructions): an
/// `image_url` or `file_url` that is not a `data:` URL (a string, or an
/// object's `url`), or a `source` object of type `url`.
fn fetched_content(request: &Value) -> Option<&'static str> {
    let remote = |v: &Value| {
        let url = v.as_str().or_else(|| v.get("url").and_then(Value::as_str));
        url.is_some_and(|u| {
            !u.trim_start()
                .get(..5)
                .is_some_and(|s| s.eq_ignore_ascii_case("data:"))
        })
    };
    super::json_walk::find(request, |_, key, value| {
        let fetched = match key {
            "image_url" | "file_url" => remote(value),
            "source" => value.get("type").and_then(Value::as_str) == Some("url"),
            _ => false,
        };
        match fetched {
            true => Entry::Found(
                "an image or file given by URL (`image_url`, `file_url`, a `url` source)",
            ),
            false => Entry::Enter,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The models that search by themselves, by their names as the price
    /// table has them; the engines' models and a name merely containing
    /// `search` do not.
    #[test]
    fn models_that_search_by_themselves_are_found() {
        let got: Vec<bool> = [
            "gpt-4o-search-preview",
            "gpt-4o-mini-search-preview-2025-03-11",
            "GPT-5-Search-API",
            "sonar-search",
            "gpt-5.5",
            "claude-sonnet-4-6",
            "research-model",
            "searchlight-1",
        ]
        .iter()
        .map(|m| searching_model(m))
        .collect();
        assert_eq!(got, [true, true, true, true, false, false, false, false]);
    }

    /// Web search on each API, as the engines and the APIs spell it; the
    /// engines' other tools, a null `web_search_options`, or another
    /// API's field are none.
    #[test]
    fn the_providers_web_search_is_found() {
        const TOOL: &str = "the provider's web search tool (`tools[].type` `web_search…`)";
        let cases = [
            (
                Api::Responses,
                json!({"tools": [{"type": "function", "name": "exec_command"}, {"type": "web_search"}]}),
            ),
            (
                Api::Responses,
                json!({"tools": [{"type": "web_search_preview_2025_03_11"}]}),
            ),
            (
                Api::Messages,
                json!({"tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 8}]}),
            ),
            (
                Api::Messages,
                json!({"tools": [{"name": "WebSearch", "input_schema": {}}, {"name": "WebFetch", "input_schema": {}}]}),
            ),
            (
                Api::Chat,
                json!({"model": "gpt-4o-search-preview", "web_search_options": {}}),
            ),
            (Api::Chat, json!({"web_search_options": null})),
            (Api::Responses, json!({"web_search_options": {}})),
            (
                Api::Responses,
                json!({"tools": [{"type": "function", "name": "web_search"}]}),
            ),
        ];
        let got: Vec<Option<&str>> = cases.iter().map(|(api, r)| web_search(*api, r)).collect();
        assert_eq!(
            got,
            vec![
                Some(TOOL),
                Some(TOOL),
                Some(TOOL),
                None,
                Some("the provider's web search (`web_search_options`)"),
                None,
                None,
                None,
            ]
        );
    }

    /// What is refused on each API, and what is not: web search, the
    /// engines' own function tools, an empty `mcp_servers`, another API's
    /// field.
    #[test]
    fn calls_naming_a_server_for_the_provider_are_found() {
        const URL: &str = "an image or file given by URL (`image_url`, `file_url`, a `url` source)";
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
            (
                Api::Chat,
                json!({"data_sources": [{"type": "azure_search", "parameters": {"endpoint": "https://evil.example"}}]}),
            ),
            (
                Api::Responses,
                json!({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "https://evil.example/?leak"}]}]}),
            ),
            (
                Api::Responses,
                json!({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "data:image/png;base64,AAAA"}, {"type": "input_file", "file_url": " DATA:text/plain,x"}]}]}),
            ),
            (
                Api::Chat,
                json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://evil.example/?leak"}}]}]}),
            ),
            (
                Api::Messages,
                json!({"messages": [{"role": "user", "content": [{"type": "tool_result", "content": [{"type": "document", "source": {"type": "url", "url": "https://evil.example/?leak"}}]}]}]}),
            ),
            (
                Api::Messages,
                json!({"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]}]}),
            ),
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
                Some("a data source (`data_sources`)"),
                Some(URL),
                None,
                Some(URL),
                Some(URL),
                None,
            ]
        );
    }
}
