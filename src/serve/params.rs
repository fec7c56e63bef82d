//! `Mcp-Param-*` headers of a 2026-07-28 `tools/call`, checked against the tool's
//! `x-mcp-header` annotations (SEP-2243). A stdio child never sees HTTP headers, so the
//! gateway checks them: it learns the annotations from the child's `tools/list` once and
//! forgets them when the child says its tools changed.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::gateway::Gateway;
use super::pool::Backend;
use super::tool_cache::KnownTools;
use crate::era::paging::{Pages, with_cursor};
use crate::era::tasks::TaskSupport;
use crate::era::tools::{MAX_LIST_PAGES, check_values, param_headers};
use crate::era::{META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, MODERN_VERSION};
use crate::jsonrpc::message::IdKey;

/// Checks the call's headers; `Err` says which header is wrong and why. `Ok` says whether
/// the tool may run as a task.
pub async fn check(
    gateway: &Arc<Gateway>,
    backend: &Backend,
    params: &Map<String, Value>,
    header: impl Fn(&str) -> Option<String>,
) -> Result<TaskSupport, String> {
    let Some(tool) = params.get("name").and_then(Value::as_str) else {
        return Ok(TaskSupport::Forbidden);
    };
    let mut cache = backend.tool_headers.lock().await;
    if cache.stale() {
        cache.known = Some(list(gateway, backend).await);
    }
    let Some(known) = cache.known.as_ref() else {
        return Ok(TaskSupport::Forbidden);
    };
    let support = known
        .task_support
        .get(tool)
        .copied()
        .unwrap_or(TaskSupport::Forbidden);
    match known.headers.get(tool) {
        Some(declared) => check_values(declared, params.get("arguments"), header).map(|()| support),
        None => Ok(support),
    }
}

/// The child's tools' annotations (a tool whose annotations break the rules has none) and
/// task support.
async fn list(gateway: &Arc<Gateway>, backend: &Backend) -> KnownTools {
    let mut found = KnownTools::default();
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
            let support = TaskSupport::of_tool(tool);
            if support != TaskSupport::Forbidden {
                found.task_support.insert(name.to_owned(), support);
            }
            if let Ok(headers) = param_headers(schema)
                && !headers.is_empty()
            {
                found.headers.insert(name.to_owned(), headers);
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
    let mut answer = ask_answer(gateway, backend, method, params).await?;
    answer.get_mut("result").map(Value::take)
}

/// One request of the gateway's own to the child; its whole answer (result or error), if
/// it gave one in time.
pub async fn ask_answer(
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
    serde_json::from_slice(&answer).ok()
}
