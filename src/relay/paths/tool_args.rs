//! What the relay remembers of a modern server's tools: which arguments each mirrors into
//! `Mcp-Param-*` headers. Learned from every `tools/list` answer that passes, and refreshed
//! by the relay itself when a call names a tool it has not seen (or the server says -32020).

use bytes::Bytes;
use http::HeaderMap;
use serde_json::{Map, Value};

use crate::era::paging::{Pages, with_cursor};
use crate::era::request::request_line;
use crate::era::tools::{MAX_LIST_PAGES, values};
use crate::jsonrpc::message::IdKey;
use crate::relay::call::{Aside, Outgoing, call};
use crate::relay::context::Ctx;
use crate::relay::detect::{insert, modern_headers};
use crate::relay::gate::Failure;
use crate::relay::link::session::Wire;

/// The envelope keys of a request's `_meta`, for the relay's own requests made on its
/// behalf (no progress token: that belongs to the host's request).
pub fn envelope_only(params: Option<&Map<String, Value>>) -> Map<String, Value> {
    let mut meta = params
        .and_then(|p| p.get("_meta"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    meta.retain(|key, _| key.starts_with("io.modelcontextprotocol/"));
    meta
}

/// Reads every page of `tools/list` with `meta` as the envelope, learning the tools.
pub async fn refresh(ctx: &Ctx, version: &str, meta: &Map<String, Value>) -> Result<(), Failure> {
    let mut pages = Pages::new(MAX_LIST_PAGES);
    while let Some(cursor) = pages.next_page() {
        let mut params = Map::new();
        params.insert("_meta".into(), Value::Object(meta.clone()));
        let params = with_cursor(params, cursor);
        let id_text = ctx.next_upstream_id("tools");
        let raw_id = serde_json::to_string(&id_text).expect("a string serializes");
        let headers = modern_headers(version, "tools/list", Some(&params))?;
        let request = Outgoing {
            body: Bytes::from(request_line(&raw_id, "tools/list", &params)),
            id: &IdKey::Str(id_text),
            raw_id: &raw_id,
            wire: Wire::Modern {
                headers: &headers,
                long_lived: false,
            },
            replay_safe: true,
        };
        let answer = call(ctx, request, &mut |_, _| Aside::Ignore).await?;
        let mut answer: Value = serde_json::from_slice(&answer)
            .map_err(|_| Failure::upstream("the upstream's tools/list answer is not JSON"))?;
        let Some(result) = answer.get_mut("result") else {
            return Err(Failure::upstream("the upstream refused tools/list"));
        };
        ctx.tools.filter_result(result);
        pages.after(result);
    }
    if !pages.complete() {
        tracing::warn!(pages = MAX_LIST_PAGES, "stopped reading tools/list pages");
    }
    Ok(())
}

/// Adds a `tools/call`'s `Mcp-Param-*` headers for tool `name`, listing the tools first
/// (with the envelope `meta` gives) if the relay has not seen this one.
pub async fn add_param_headers(
    ctx: &Ctx,
    version: &str,
    name: Option<&str>,
    arguments: Option<&serde_json::value::RawValue>,
    meta: impl FnOnce() -> Map<String, Value>,
    headers: &mut HeaderMap,
) -> Result<(), Failure> {
    let Some(name) = name else {
        return Ok(());
    };
    let known = match ctx.tools.get(name) {
        Some(known) => known,
        None => {
            if let Err(failure) = refresh(ctx, version, &meta()).await {
                tracing::debug!(problem = %failure.message, "could not list the tools for their x-mcp-header annotations");
            }
            ctx.tools.get(name).unwrap_or_default()
        }
    };
    if known.is_empty() {
        return Ok(()); // the common case: nothing to mirror, nothing to parse
    }
    let arguments = arguments.and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok());
    for (header, value) in values(&known, arguments.as_ref()) {
        insert(headers, &header, &value)?;
    }
    Ok(())
}
