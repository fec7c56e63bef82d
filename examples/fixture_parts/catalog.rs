//! The fixture's lists beyond its tools, for the aggregate endpoint's tests:
//! `FIXTURE_CATALOG=full` adds a resource, a resource template, a prompt, completion,
//! logging and a tool whose result links the resource; `FIXTURE_PAGE_SIZE=N` pages every
//! list N items at a time; `FIXTURE_EXTRA_TOOL=NAME` lists one more tool, and
//! `FIXTURE_EXTRA_ITEMS=N` N more prompts and resources.

use serde_json::{Value, json};

fn full() -> bool {
    std::env::var("FIXTURE_CATALOG").as_deref() == Ok("full")
}

pub fn capabilities() -> Value {
    if full() {
        json!({"tools": {"listChanged": true}, "prompts": {}, "resources": {"subscribe": true},
            "completions": {}, "logging": {}})
    } else {
        json!({"tools": {"listChanged": true}})
    }
}

/// `tools/list` with the extra tools, one page at the cursor (`"page:OFFSET"`).
pub fn paged(tools: Value, params: &Value) -> Value {
    let mut tools = tools.as_array().cloned().unwrap_or_default();
    if full() {
        tools.push(json!({"name": "link", "inputSchema": {"type": "object"}}));
    }
    if let Ok(extra) = std::env::var("FIXTURE_EXTRA_TOOL") {
        tools.push(json!({"name": extra, "inputSchema": {"type": "object"}}));
    }
    let extra = std::env::var("FIXTURE_EXTRA_TOOLS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok());
    for n in 1..=extra.unwrap_or(0) {
        tools.push(
            json!({"name": format!("extra-{n}"), "description": "one of many",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}),
        );
    }
    page("tools", tools, params)
}

/// One page of `items` under `key` at the cursor (`"page:OFFSET"`), `FIXTURE_PAGE_SIZE` long.
fn page(key: &str, items: Vec<Value>, params: &Value) -> Value {
    let size = std::env::var("FIXTURE_PAGE_SIZE")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(usize::MAX);
    let start = params["cursor"]
        .as_str()
        .and_then(|c| c.strip_prefix("page:"))
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(0)
        .min(items.len());
    let end = start.saturating_add(size).min(items.len());
    let mut result = json!({ key: items[start..end] });
    if end < items.len() {
        result["nextCursor"] = Value::String(format!("page:{end}"));
    }
    result
}

/// `FIXTURE_EXTRA_ITEMS` more of a list, made by `make` from 1, 2, …
fn extra_items(make: impl Fn(usize) -> Value) -> impl Iterator<Item = Value> {
    let count = std::env::var("FIXTURE_EXTRA_ITEMS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(0);
    (1..=count).map(make)
}

/// The answer to a request of the full catalog, if it is one.
pub fn answer(method: &str, params: &Value) -> Option<Value> {
    if !full() {
        return None;
    }
    Some(match method {
        "resources/list" => {
            let resources = std::iter::once(json!({"uri": "fixture://note", "name": "note"}))
                .chain(extra_items(
                    |n| json!({"uri": format!("fixture://doc/{n}"), "name": format!("doc {n}")}),
                ))
                .collect();
            page("resources", resources, params)
        }
        "resources/templates/list" => {
            json!({"resourceTemplates": [{"uriTemplate": "fixture://notes/{id}", "name": "notes"}]})
        }
        "resources/read" => {
            let uri = params["uri"].as_str().unwrap_or_default();
            json!({"contents": [{"uri": uri, "text": format!("read {uri}")}]})
        }
        "resources/subscribe" | "resources/unsubscribe" | "logging/setLevel" => json!({}),
        "prompts/list" => {
            let prompts = std::iter::once(json!({"name": "greet"}))
                .chain(extra_items(|n| json!({"name": format!("prompt-{n}")})))
                .collect();
            page("prompts", prompts, params)
        }
        "prompts/get" => json!({"messages": [{"role": "user", "content": {"type": "text",
            "text": format!("hello from {}", params["name"].as_str().unwrap_or_default())}}]}),
        "completion/complete" => json!({"completion": {"values": [format!("{}", params["ref"])]}}),
        "tools/call" if params["name"] == "link" => json!({"content": [
            {"type": "resource_link", "uri": "fixture://note", "name": "note"}]}),
        _ => return None,
    })
}
