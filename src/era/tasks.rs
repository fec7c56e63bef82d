//! Tasks in both eras, and the pure translation between them: the 2025-11-25 tasks
//! (SEP-1686: `capabilities.tasks`, a `task` parameter on `tools/call`, a nested
//! `CreateTaskResult`, `ttl` and `pollInterval`, `tasks/result` and `tasks/list`,
//! `notifications/tasks/status`, task-tied requests marked with `related-task` `_meta`) and
//! the 2026-07-28 extension (SEP-2663: opt-in per request in `clientCapabilities.extensions`,
//! server-directed creation, a flat `CreateTaskResult` with `resultType: "task"`, `ttlMs`
//! and `pollIntervalMs`, `tasks/get` inlining the result, the error or the pending
//! `inputRequests`, `tasks/update`, an idempotent `tasks/cancel`, `notifications/tasks`).
//! No I/O: serve and the relay hold the tasks and call these to reshape what passes.

use serde_json::{Map, Value, json};

/// The extension's identifier (in `capabilities.extensions` and the per-request opt-in).
pub const EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// The 2025-11-25 `_meta` key that ties a message to a task.
pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// The 2026-07-28 status notification, and the 2025-11-25 one.
pub const STATUS_NOTIFICATION: &str = "notifications/tasks";
pub const LEGACY_STATUS_NOTIFICATION: &str = "notifications/tasks/status";

/// What a 2026-07-28 client is told of a task id when the server behind the gateway is a
/// handshake-era one: its 2025-11-25 tasks are not offered (its calls run to their end), so
/// no id the client holds is one of ours (-32602).
pub const UNKNOWN_TASK: &str =
    "Invalid params: unknown task (this server's tasks are not offered to 2026-07-28 clients)";

/// The refusal a 2026-07-28 request for a tasks method gets when the server is a
/// handshake-era one: the removed methods are unknown (-32601), the others need the
/// opt-in (-32021 with the capability) and then name no task of ours (-32602). The code,
/// the message and the data.
pub fn hidden_tasks_refusal(
    method: &str,
    client_capabilities: &Value,
) -> (i64, String, Option<Value>) {
    if !matches!(method, "tasks/get" | "tasks/update" | "tasks/cancel") {
        return (-32601, format!("Method not found: {method}"), None);
    }
    if !opted_in(client_capabilities) {
        return (
            super::MISSING_CLIENT_CAPABILITY,
            format!(
                "{method} needs the tasks extension: declare {EXTENSION} in clientCapabilities.extensions"
            ),
            Some(missing_capability_data()),
        );
    }
    (-32602, UNKNOWN_TASK.to_owned(), None)
}

/// A task's states in both eras.
const TERMINAL: &[&str] = &["completed", "failed", "cancelled"];

/// Whether a status is final (no more changes, nothing more to ask).
pub fn is_terminal(status: &str) -> bool {
    TERMINAL.contains(&status)
}

/// A tool's `execution.taskSupport` (2025-11-25): whether a call may, must or must not be
/// a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskSupport {
    Forbidden,
    Optional,
    Required,
}

impl TaskSupport {
    /// Read from a tool's definition; absent or unknown means forbidden (the spec's
    /// default).
    pub fn of_tool(tool: &Value) -> TaskSupport {
        match tool["execution"]["taskSupport"].as_str() {
            Some("optional") => TaskSupport::Optional,
            Some("required") => TaskSupport::Required,
            _ => TaskSupport::Forbidden,
        }
    }
}

/// What a gateway does with a 2026-07-28 client's `tools/call` to a 2025-11-25 server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallPlan {
    /// Send it with a `task` parameter: the answer is a task.
    AsTask,
    /// Send it without one (a stray `task` from the client removed): the answer is the
    /// result.
    Plain,
    /// Refuse it with -32021: the tool runs only as a task and the client did not opt in.
    MissingCapability,
}

/// The plan for a call to a tool with `support`, from a client that did or did not opt in.
/// The server directs creation in 2026-07-28, so an opted-in client gets a task wherever
/// the tool allows one.
pub fn plan_call(support: TaskSupport, opted_in: bool) -> CallPlan {
    match (support, opted_in) {
        (TaskSupport::Forbidden, _) => CallPlan::Plain,
        (_, true) => CallPlan::AsTask,
        (TaskSupport::Optional, false) => CallPlan::Plain,
        (TaskSupport::Required, false) => CallPlan::MissingCapability,
    }
}

/// Whether a request's client capabilities (`_meta`'s `clientCapabilities`) opt in.
pub fn opted_in(client_capabilities: &Value) -> bool {
    offers_extension(client_capabilities)
}

/// The `data` of the -32021 a request without the opt-in gets.
pub fn missing_capability_data() -> Value {
    json!({"requiredCapabilities": {"extensions": {EXTENSION: {}}}})
}

/// Whether a 2025-11-25 server's capabilities say its tools may run as tasks.
pub fn legacy_server_runs_tool_tasks(capabilities: &Value) -> bool {
    capabilities["tasks"]["requests"]["tools"]["call"].is_object()
}

/// The 2025-11-25 server capability a handshake-era host is shown for a 2026-07-28
/// server that offers the extension: tool calls as tasks, listed and cancellable (the
/// relay answers `tasks/list` itself).
pub fn legacy_capability() -> Value {
    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

/// Whether capabilities (a server's or a client's) carry the extension.
pub fn offers_extension(capabilities: &Value) -> bool {
    capabilities["extensions"]
        .as_object()
        .is_some_and(|extensions| extensions.contains_key(EXTENSION))
}

/// Adds the extension to capabilities (a server's it is offered in, or a request's that
/// opts in). Anything in the way that is not an object (a peer's `extensions: true`) is
/// replaced, never indexed into.
pub fn declare_extension(capabilities: &mut Value) {
    if !capabilities.is_object() {
        *capabilities = json!({});
    }
    if !capabilities["extensions"].is_object() {
        capabilities["extensions"] = json!({});
    }
    capabilities["extensions"][EXTENSION] = json!({});
}

/// A 2025-11-25 `Task` as the 2026-07-28 extension shows it, under the id `task_id` (the
/// gateway's own, which the client uses from now on): `ttl` becomes `ttlMs` (always
/// present; `null` for unlimited), `pollInterval` becomes `pollIntervalMs`.
fn task_to_modern(task: &Value, task_id: &str) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("taskId".into(), Value::String(task_id.to_owned()));
    for key in ["status", "statusMessage", "createdAt", "lastUpdatedAt"] {
        if let Some(value) = task.get(key).filter(|v| !v.is_null()) {
            out.insert(key.into(), value.clone());
        }
    }
    let positive = |v: &Value| v.as_u64().filter(|n| *n > 0).map(Value::from);
    out.insert(
        "ttlMs".into(),
        task.get("ttl").and_then(positive).unwrap_or(Value::Null),
    );
    if let Some(poll) = task.get("pollInterval").and_then(positive) {
        out.insert("pollIntervalMs".into(), poll);
    }
    out
}

/// A 2025-11-25 `CreateTaskResult` (`{task: {…}}`) as the flat 2026-07-28 one.
pub fn create_result_to_modern(result: &Value, task_id: &str) -> Option<Value> {
    let task = result.get("task")?;
    let mut flat = task_to_modern(task, task_id);
    flat.insert("resultType".into(), Value::String("task".into()));
    Some(Value::Object(flat))
}

/// The 2026-07-28 `tasks/get` answer for a task in `task` (a 2025-11-25 `Task`) with, by
/// its status, the inlined `result` (its `related-task` `_meta` removed, its `resultType`
/// added), `error` or pending `input_requests`.
pub fn detailed_task(
    task: &Value,
    task_id: &str,
    result: Option<&Value>,
    error: Option<&Value>,
    input_requests: Option<&Map<String, Value>>,
) -> Value {
    let mut detailed = task_to_modern(task, task_id);
    match task["status"].as_str() {
        Some("completed") => {
            if let Some(result) = result {
                // A 2026-07-28 `CallToolResult` requires its `resultType`; a 2025-11-25
                // result has none (the TypeScript SDK v2 client refuses it without one).
                let mut result = without_related_task(result);
                if let Some(object) = result.as_object_mut() {
                    object
                        .entry("resultType")
                        .or_insert_with(|| Value::String("complete".into()));
                }
                detailed.insert("result".into(), result);
            }
        }
        Some("failed") => {
            if let Some(error) = error {
                detailed.insert("error".into(), error.clone());
            }
        }
        Some("input_required") => {
            let pending = input_requests.cloned().unwrap_or_default();
            detailed.insert("inputRequests".into(), Value::Object(pending));
        }
        _ => {}
    }
    detailed.insert("resultType".into(), Value::String("complete".into()));
    Value::Object(detailed)
}

/// The 2025-11-25 `Task` for a 2026-07-28 one (a `CreateTaskResult` or a `tasks/get`
/// answer): the renamed fields back, the inlined parts and `resultType` left out.
pub fn task_to_legacy(task: &Value) -> Value {
    let mut out = Map::new();
    for key in [
        "taskId",
        "status",
        "statusMessage",
        "createdAt",
        "lastUpdatedAt",
    ] {
        if let Some(value) = task.get(key).filter(|v| !v.is_null()) {
            out.insert(key.into(), value.clone());
        }
    }
    // 2025-11-25 requires `ttl`: null is "unlimited" there too.
    out.insert(
        "ttl".into(),
        task.get("ttlMs").cloned().unwrap_or(Value::Null),
    );
    if let Some(poll) = task.get("pollIntervalMs").filter(|v| v.is_u64()) {
        out.insert("pollInterval".into(), poll.clone());
    }
    Value::Object(out)
}

/// A flat 2026-07-28 `CreateTaskResult` as the nested 2025-11-25 one; `None` when the
/// answer is not a task.
pub fn create_result_to_legacy(result: &Value) -> Option<Value> {
    (result["resultType"] == "task").then(|| json!({"task": task_to_legacy(result)}))
}

/// A result with the 2025-11-25 `related-task` `_meta` removed (the 2026-07-28 inlined
/// result carries none), `_meta` dropped when nothing else is in it.
pub fn without_related_task(result: &Value) -> Value {
    let mut result = result.clone();
    if let Some(meta) = result.get_mut("_meta").and_then(Value::as_object_mut) {
        meta.remove(RELATED_TASK);
        if meta.is_empty()
            && let Some(object) = result.as_object_mut()
        {
            object.remove("_meta");
        }
    }
    result
}

/// The task a 2025-11-25 message is tied to (its `related-task` `_meta`), if any.
pub fn related_task(params: &Value) -> Option<&str> {
    params["_meta"][RELATED_TASK]["taskId"].as_str()
}

/// `params` tied to `task_id` (for a 2025-11-25 host): the `related-task` `_meta` added.
pub fn tied_to(params: &Value, task_id: &str) -> Value {
    let mut params = params.clone();
    if !params.is_object() {
        params = json!({});
    }
    let object = params.as_object_mut().expect("made an object");
    let meta = object.entry("_meta").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    meta.as_object_mut()
        .expect("made an object")
        .insert(RELATED_TASK.into(), json!({"taskId": task_id}));
    params
}

#[cfg(test)]
mod tests;
