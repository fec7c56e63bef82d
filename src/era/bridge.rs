//! Translation between the eras' shapes (§4.18): `initialize` answered from `server/discover`
//! and back, capabilities, and the fields a modern host expects on every result.

use serde_json::{Map, Value, json};

use super::{LATEST_LEGACY_VERSION, LEGACY_VERSIONS, META_SERVER_INFO, MODERN_VERSION};

/// Capabilities a legacy host declared in `initialize`, as a modern request declares them:
/// only what both eras define (no `roots.listChanged`, no legacy `tasks`), so the relay
/// never claims a capability the host lacks.
pub fn capabilities_for_modern(legacy: &Value) -> Value {
    let mut modern = Map::new();
    let Value::Object(legacy) = legacy else {
        return Value::Object(modern);
    };
    for key in ["experimental", "sampling", "elicitation", "extensions"] {
        if let Some(value) = legacy.get(key).filter(|v| v.is_object()) {
            modern.insert(key.into(), value.clone());
        }
    }
    if legacy.get("roots").is_some_and(Value::is_object) {
        modern.insert("roots".into(), json!({}));
    }
    Value::Object(modern)
}

/// The `initialize` result a legacy host gets from the relay in front of a modern server:
/// the host's version when the relay speaks it, the server's capabilities (without the
/// modern-only `extensions`), its identity and instructions.
pub fn initialize_result(discover: Option<&Value>, requested: Option<&str>) -> Value {
    let version = requested
        .filter(|v| LEGACY_VERSIONS.contains(v))
        .unwrap_or(LATEST_LEGACY_VERSION);
    let mut capabilities = discover
        .and_then(|d| d.get("capabilities"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    capabilities.remove("extensions");
    let server_info = discover
        .and_then(|d| {
            d.get("_meta")
                .and_then(|m| m.get(META_SERVER_INFO))
                .or_else(|| d.get("serverInfo"))
        })
        .filter(|info| info.is_object())
        .cloned()
        .unwrap_or_else(|| json!({"name": "unknown server (via mcp-stdio)", "version": "0"}));
    let mut result = json!({
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": server_info,
    });
    if let Some(instructions) = discover
        .and_then(|d| d.get("instructions"))
        .filter(|i| i.is_string())
    {
        result["instructions"] = instructions.clone();
    }
    result
}

/// The `server/discover` result a modern host gets from the relay in front of a legacy
/// server: built from the server's `initialize` result, never cached across hosts.
/// A handshake-era server's capabilities as a 2026-07-28 client is shown them: 2025-11-25's
/// `tasks` entry left out (2026-07-28 has no such capability, and the server's tasks are
/// not offered through the extension).
fn discover_capabilities(initialize: &Value) -> Value {
    let mut capabilities = initialize
        .get("capabilities")
        .cloned()
        .unwrap_or_else(|| json!({}));
    if let Some(object) = capabilities.as_object_mut() {
        object.remove("tasks");
    }
    capabilities
}

pub fn discover_result(initialize: &Value) -> Value {
    let mut result = json!({
        "resultType": "complete",
        "supportedVersions": [MODERN_VERSION],
        "capabilities": discover_capabilities(initialize),
        "ttlMs": 0,
        "cacheScope": "private",
    });
    if let Some(instructions) = initialize.get("instructions").filter(|i| i.is_string()) {
        result["instructions"] = instructions.clone();
    }
    if let Some(info) = initialize.get("serverInfo").filter(|i| i.is_object()) {
        result["_meta"] = json!({ META_SERVER_INFO: info });
    }
    result
}

/// The notifications a `subscriptions/listen` stream carries (§4.11).
pub fn is_change_notification(method: &str) -> bool {
    matches!(
        method,
        "notifications/tools/list_changed"
            | "notifications/prompts/list_changed"
            | "notifications/resources/list_changed"
            | "notifications/resources/updated"
    )
}

/// Methods whose complete results carry cache hints in 2026-07-28.
pub fn is_cacheable(method: &str) -> bool {
    matches!(
        method,
        "server/discover"
            | "tools/list"
            | "prompts/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
    )
}

/// Gives a legacy server's result the fields a modern host requires: `resultType`, and
/// for cacheable methods `ttlMs: 0` (immediately stale) with `cacheScope: "private"`.
pub fn decorate_result(method: &str, result: &mut Value) {
    let Value::Object(result) = result else {
        return;
    };
    result
        .entry("resultType")
        .or_insert_with(|| "complete".into());
    if is_cacheable(method) {
        result.entry("ttlMs").or_insert_with(|| 0.into());
        result
            .entry("cacheScope")
            .or_insert_with(|| "private".into());
    }
}

/// A legacy server's error code as a modern host may receive it: `-32002` (resource not
/// found) became `-32602`; nothing in `-32020..-32099` may reach a modern host unless the
/// spec defines it for that era, and a legacy server's codes there mean something else.
pub fn error_code_for_modern(code: i64) -> i64 {
    match code {
        -32002 => -32602,
        -32099..=-32020 => -32603,
        other => other,
    }
}

/// A legacy answer as a 2026-07-28 client must see it: under the client's id (`client_raw_id`,
/// raw JSON), results with `resultType` and cache hints, error codes the modern era allows.
/// `None` if the answer is not JSON.
pub fn answer_for_modern(method: &str, client_raw_id: &str, answer: &[u8]) -> Option<Vec<u8>> {
    reanswer(method, client_raw_id, answer, error_code_for_modern)
}

/// A 2026-07-28 server's answer as a 2026-07-28 client must see it: as
/// [`answer_for_modern`], but the modern error codes (`-32020..-32022`) keep their meaning.
pub fn modern_answer_for_modern(
    method: &str,
    client_raw_id: &str,
    answer: &[u8],
) -> Option<Vec<u8>> {
    reanswer(method, client_raw_id, answer, modern_code_for_modern_host)
}

fn reanswer(
    method: &str,
    client_raw_id: &str,
    answer: &[u8],
    code_for: fn(i64) -> i64,
) -> Option<Vec<u8>> {
    let mut answer: Value = serde_json::from_slice(answer).ok()?;
    answer["id"] = serde_json::from_str(client_raw_id).unwrap_or(Value::Null);
    if let Some(result) = answer.get_mut("result") {
        decorate_result(method, result);
    } else if let Some(code) = answer.pointer("/error/code").and_then(Value::as_i64) {
        answer["error"]["code"] = code_for(code).into();
    }
    Some(serde_json::to_vec(&answer).expect("JSON serializes"))
}

/// A 2026-07-28 server's error code as the relay passes it to a modern host: the codes
/// the spec defines pass, the retired ones (`-32002`, `-32042`) and undefined ones in
/// `-32020..-32099` are replaced, since the relay must not emit them either.
pub fn modern_code_for_modern_host(code: i64) -> i64 {
    match code {
        -32022..=-32020 => code,
        other => error_code_for_modern(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_capabilities_never_widen() {
        let legacy =
            json!({"roots":{"listChanged":true},"sampling":{},"tasks":{"list":{}},"weird":1});
        assert_eq!(
            capabilities_for_modern(&legacy),
            json!({"sampling":{},"roots":{}})
        );
        assert_eq!(capabilities_for_modern(&json!({})), json!({}));
    }

    #[test]
    fn initialize_is_answered_from_discover() {
        let discover = json!({"resultType":"complete","supportedVersions":["2026-07-28"],
            "capabilities":{"tools":{"listChanged":true},"extensions":{"a/b":{}}},
            "instructions":"be nice","ttlMs":1,"cacheScope":"public",
            "_meta":{"io.modelcontextprotocol/serverInfo":{"name":"S","version":"2"}}});
        let result = initialize_result(Some(&discover), Some("2025-06-18"));
        assert_eq!(result["protocolVersion"], "2025-06-18");
        assert_eq!(
            result["capabilities"],
            json!({"tools":{"listChanged":true}})
        );
        assert_eq!(result["serverInfo"]["name"], "S");
        assert_eq!(result["instructions"], "be nice");
        let unknown = initialize_result(None, Some("1999-01-01"));
        assert_eq!(unknown["protocolVersion"], LATEST_LEGACY_VERSION);
    }

    #[test]
    fn discover_is_answered_from_initialize() {
        let init = json!({"protocolVersion":"2025-11-25","capabilities":{"tools":{}},
            "serverInfo":{"name":"L","version":"1"},"instructions":"hi"});
        let result = discover_result(&init);
        assert_eq!(result["supportedVersions"], json!(["2026-07-28"]));
        assert_eq!(result["_meta"][META_SERVER_INFO]["name"], "L");
        assert_eq!(result["cacheScope"], "private");
        assert_eq!(result["resultType"], "complete");
    }

    #[test]
    fn results_get_result_type_and_cache_hints() {
        let mut list = json!({"tools":[]});
        decorate_result("tools/list", &mut list);
        assert_eq!(
            list,
            json!({"tools":[],"resultType":"complete","ttlMs":0,"cacheScope":"private"})
        );
        let mut call = json!({"content":[],"resultType":"complete"});
        decorate_result("tools/call", &mut call);
        assert_eq!(call, json!({"content":[],"resultType":"complete"}));
    }

    #[test]
    fn retired_codes_never_reach_a_modern_host() {
        assert_eq!(error_code_for_modern(-32002), -32602);
        assert_eq!(error_code_for_modern(-32042), -32603);
        assert_eq!(error_code_for_modern(-32601), -32601);
        assert_eq!(error_code_for_modern(-32000), -32000);
        assert_eq!(error_code_for_modern(42), 42);
        assert_eq!(modern_code_for_modern_host(-32022), -32022);
        assert_eq!(modern_code_for_modern_host(-32020), -32020);
        assert_eq!(modern_code_for_modern_host(-32050), -32603);
        assert_eq!(modern_code_for_modern_host(-32002), -32602);
    }
}
