//! What the relay remembers of a modern server's tools: which arguments each mirrors into
//! `Mcp-Param-*` headers. Learned from every `tools/list` answer that passes, and refreshed
//! by the relay itself when a call names a tool it has not seen (or the server says -32020).

use std::collections::HashMap;
use std::sync::Mutex;

use bytes::Bytes;
use http::HeaderMap;
use serde_json::{Map, Value};

use super::Relay;
use super::call::{Aside, Outgoing, call};
use super::detect::{insert, modern_headers};
use super::gate::Failure;
use super::upstream::Wire;
use crate::era::envelope::request_line;
use crate::era::tools::{MAX_LIST_PAGES, ParamHeader, filter_list, values};
use crate::jsonrpc::message::IdKey;

#[derive(Default)]
pub struct ToolHeaders {
    known: Mutex<HashMap<String, Vec<ParamHeader>>>,
}

impl ToolHeaders {
    fn learn(&self, kept: Vec<(String, Vec<ParamHeader>)>) {
        let mut known = self.known.lock().expect("tools lock");
        for (name, params) in kept {
            known.insert(name, params);
        }
    }

    fn get(&self, name: &str) -> Option<Vec<ParamHeader>> {
        self.known.lock().expect("tools lock").get(name).cloned()
    }

    /// Filters the tools of a `tools/list` result in place (tools with invalid
    /// `x-mcp-header` annotations are dropped, with a warning) and learns the rest.
    /// Returns whether anything was dropped.
    pub fn filter_result(&self, result: &mut Value) -> bool {
        let (kept, dropped) = filter_list(result);
        self.learn(kept);
        for (name, reason) in &dropped {
            tracing::warn!(tool = %name, %reason, "dropped a tool whose x-mcp-header annotation is invalid");
        }
        !dropped.is_empty()
    }

    /// Like [`ToolHeaders::filter_result`] on a whole answer line; the line is returned
    /// unchanged (byte for byte) when no tool was dropped.
    pub fn filter_answer(&self, line: Vec<u8>) -> Vec<u8> {
        let Ok(mut answer) = serde_json::from_slice::<Value>(&line) else {
            return line;
        };
        let Some(result) = answer.get_mut("result") else {
            return line;
        };
        if self.filter_result(result) {
            serde_json::to_vec(&answer).unwrap_or(line)
        } else {
            line
        }
    }
}

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
pub async fn refresh(
    relay: &Relay,
    version: &str,
    meta: &Map<String, Value>,
) -> Result<(), Failure> {
    let mut cursor: Option<Value> = None;
    for _ in 0..MAX_LIST_PAGES {
        let mut params = Map::new();
        params.insert("_meta".into(), Value::Object(meta.clone()));
        if let Some(cursor) = cursor.take() {
            params.insert("cursor".into(), cursor);
        }
        let id_text = relay.next_upstream_id("tools");
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
        let answer = call(relay, request, &mut |_, _| Aside::Ignore).await?;
        let mut answer: Value = serde_json::from_slice(&answer)
            .map_err(|_| Failure::upstream("the upstream's tools/list answer is not JSON"))?;
        let Some(result) = answer.get_mut("result") else {
            return Err(Failure::upstream("the upstream refused tools/list"));
        };
        relay.tools.filter_result(result);
        match result.get("nextCursor") {
            Some(next @ Value::String(_)) => cursor = Some(next.clone()),
            _ => return Ok(()),
        }
    }
    tracing::warn!(pages = MAX_LIST_PAGES, "stopped reading tools/list pages");
    Ok(())
}

/// A call's arguments, as the caller has them.
pub enum Arguments<'a> {
    Raw(Option<&'a serde_json::value::RawValue>),
    Parsed(Option<&'a Value>),
}

/// Adds a `tools/call`'s `Mcp-Param-*` headers for tool `name`, listing the tools first
/// (with the envelope `meta` gives) if the relay has not seen this one.
pub async fn add_param_headers(
    relay: &Relay,
    version: &str,
    name: Option<&str>,
    arguments: Arguments<'_>,
    meta: impl FnOnce() -> Map<String, Value>,
    headers: &mut HeaderMap,
) -> Result<(), Failure> {
    let Some(name) = name else {
        return Ok(());
    };
    let known = match relay.tools.get(name) {
        Some(known) => known,
        None => {
            if let Err(failure) = refresh(relay, version, &meta()).await {
                tracing::debug!(problem = %failure.message, "could not list the tools for their x-mcp-header annotations");
            }
            relay.tools.get(name).unwrap_or_default()
        }
    };
    if known.is_empty() {
        return Ok(()); // the common case: nothing to mirror, nothing to parse
    }
    let parsed;
    let arguments = match arguments {
        Arguments::Parsed(arguments) => arguments,
        Arguments::Raw(raw) => {
            parsed = raw.and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok());
            parsed.as_ref()
        }
    };
    for (header, value) in values(&known, arguments) {
        insert(headers, &header, &value)?;
    }
    Ok(())
}
