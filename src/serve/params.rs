//! `Mcp-Param-*` headers of a 2026-07-28 `tools/call`, checked against the tool's
//! `x-mcp-header` annotations (SEP-2243). A stdio child never sees HTTP headers, so the
//! gateway checks them: it learns the annotations from the child's `tools/list` once and
//! forgets them when the child says its tools changed.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::gateway::Gateway;
use super::pool::Backend;
use super::tool_cache::AnnotatedParams;
use crate::era::paging::{Pages, with_cursor};
use crate::era::tools::{MAX_LIST_PAGES, check_values, param_headers};
use crate::era::{META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, MODERN_VERSION};
use crate::jsonrpc::message::IdKey;

/// Checks the call's headers; `Err` says which header is wrong and why.
pub async fn check(
    gateway: &Arc<Gateway>,
    backend: &Backend,
    params: &Map<String, Value>,
    header: impl Fn(&str) -> Option<String>,
) -> Result<(), String> {
    let Some(tool) = params.get("name").and_then(Value::as_str) else {
        return Ok(());
    };
    let mut cache = backend.tool_headers.lock().await;
    if cache.stale() {
        cache.known = Some(list(gateway, backend).await);
    }
    let Some(declared) = cache.known.as_ref().and_then(|k| k.get(tool)) else {
        return Ok(());
    };
    check_values(declared, params.get("arguments"), header)
}

/// The child's tools' annotations (a tool whose annotations break the rules has none).
async fn list(gateway: &Arc<Gateway>, backend: &Backend) -> AnnotatedParams {
    let mut found = AnnotatedParams::new();
    let mut pages = Pages::new(MAX_LIST_PAGES);
    while let Some(cursor) = pages.next_page() {
        let mut params = Map::new();
        if backend.modern {
            params.insert(
                "_meta".into(),
                json!({META_PROTOCOL_VERSION: MODERN_VERSION, META_CLIENT_CAPABILITIES: {}}),
            );
        }
        let params = with_cursor(params, cursor);
        let Some(result) = ask(gateway, backend, "tools/list", params).await else {
            break;
        };
        for tool in result
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let (Some(name), Some(schema)) = (
                tool.get("name").and_then(Value::as_str),
                tool.get("inputSchema"),
            ) else {
                continue;
            };
            if let Ok(headers) = param_headers(schema)
                && !headers.is_empty()
            {
                found.insert(name.to_owned(), headers);
            }
        }
        pages.after(&result);
    }
    found
}

/// One request of the gateway's own to the child; its result, if it gave one in time.
pub async fn ask(
    gateway: &Arc<Gateway>,
    backend: &Backend,
    method: &str,
    params: Map<String, Value>,
) -> Option<Value> {
    let id = gateway.pool.next_id();
    let line = Bytes::from(crate::era::request::request_line(
        &serde_json::to_string(&id).expect("a string"),
        method,
        &params,
    ));
    let wait = gateway.config.response_timeout;
    let answer = super::backend::ask(&*backend.session.backend, IdKey::Str(id), line, wait)
        .await
        .ok()?;
    let mut value: Value = serde_json::from_slice(&answer).ok()?;
    value.get_mut("result").map(Value::take)
}
