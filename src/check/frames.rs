//! What the probe's requests say: the `initialize` it sends, the 2026-07-28 envelope, and
//! headers set from strings that may not be valid (then left out).

use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

use crate::era;

/// The 2026-07-28 per-request envelope of the probe.
pub(super) fn envelope(version: &str) -> Value {
    json!({
        era::META_PROTOCOL_VERSION: version,
        era::META_CLIENT_CAPABILITIES: {},
        era::META_CLIENT_INFO: era::relay_info(),
    })
}

pub(super) fn initialize_request(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": era::LATEST_LEGACY_VERSION,
        "capabilities": {},
        "clientInfo": era::relay_info(),
    }})
}

pub(super) fn insert(headers: &mut HeaderMap, name: &str, value: &str) {
    if let (Ok(name), Ok(value)) = (
        HeaderName::from_bytes(name.as_bytes()),
        HeaderValue::from_str(value),
    ) {
        headers.insert(name, value);
    }
}
