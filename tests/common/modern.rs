//! The 2026-07-28 request envelope, written once: the `_meta` keys every modern request
//! carries, for the relay's, serve's and the sandbox's tests.

use serde_json::{Value, json};

pub const MODERN: &str = "2026-07-28";
pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";

/// The `_meta` of a modern request that declares `capabilities`.
pub fn envelope(capabilities: Value) -> Value {
    json!({
        PROTOCOL_VERSION: MODERN,
        CLIENT_CAPABILITIES: capabilities,
        CLIENT_INFO: {"name": "modern-host", "version": "1"}
    })
}

/// `params` with the envelope added where it is missing (its own `_meta` keys win).
pub fn enveloped(mut params: Value) -> Value {
    if !params.is_object() {
        params = json!({});
    }
    let meta = params
        .as_object_mut()
        .expect("an object")
        .entry("_meta")
        .or_insert_with(|| json!({}));
    let defaults = envelope(json!({}));
    for (key, value) in defaults.as_object().expect("an object") {
        if meta.get(key).is_none() {
            meta[key] = value.clone();
        }
    }
    params
}
