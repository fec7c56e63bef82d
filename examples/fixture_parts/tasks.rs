//! `FIXTURE_TASKS=1`: tasks in the fixture's own era. Handshake era: 2025-11-25's `tasks`
//! capability (a gateway must not show it to a 2026-07-28 client). `FIXTURE_ERA=modern`:
//! the 2026-07-28 extension in `server/discover`, and `tasks/get` knowing one task,
//! `t-known` (any other id is `-32602`), for a gateway that passes the extension through.

use serde_json::{Value, json};

pub fn on() -> bool {
    std::env::var("FIXTURE_TASKS").as_deref() == Ok("1")
}

/// `capabilities` with 2025-11-25's tasks entry added when tasks are on.
pub fn legacy_capabilities(mut capabilities: Value) -> Value {
    if on() {
        capabilities["tasks"] =
            json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}});
    }
    capabilities
}

/// The 2026-07-28 capabilities, with the extension when tasks are on.
pub fn modern_capabilities() -> Value {
    if on() {
        json!({"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}})
    } else {
        json!({"tools": {}})
    }
}

/// A 2026-07-28 `tasks/get` answer: the result, or the error, for `params`.
pub fn get(params: &Value) -> Result<Value, Value> {
    if params["taskId"] != "t-known" {
        return Err(json!({"code": -32602, "message": "Invalid params: unknown task"}));
    }
    Ok(
        json!({"resultType": "complete", "taskId": "t-known", "status": "working",
              "createdAt": "2026-12-06T10:00:00Z", "lastUpdatedAt": "2026-12-06T10:00:00Z",
              "ttlMs": null, "pollIntervalMs": 500}),
    )
}

/// A handshake-era `tools/call` with a `task` parameter, when tasks are on: the nested
/// 2025-11-25 `CreateTaskResult` (so a gateway that lets the parameter through is seen).
pub fn created(params: &Value) -> Option<Value> {
    (on() && params.get("task").is_some()).then(|| {
        json!({"task": {"taskId": "legacy-1", "status": "working", "ttl": 60000,
                        "createdAt": "2026-12-06T10:00:00Z", "lastUpdatedAt": "2026-12-06T10:00:00Z"}})
    })
}
