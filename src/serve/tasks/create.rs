//! A handshake-era child's answer to a call the gateway sent as a task: the task is held
//! for the client (under the gateway's id, counted against its principal, its
//! `tasks/result` held open) and the client gets the flat 2026-07-28 `CreateTaskResult`.

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use serde_json::{Value, json};

use super::held::{Holding, cancel_in_child, hold};
use crate::era::MISSING_CLIENT_CAPABILITY;
use crate::era::tasks::{
    CallPlan, EXTENSION, TaskSupport, create_result_to_modern, missing_capability_data, opted_in,
    plan_call,
};
use crate::jsonrpc::error::{INTERNAL_ERROR, error_response};
use crate::serve::gateway::Gateway;
use crate::serve::pool::Backend;
use crate::serve::task_table::{Full, NewTask};

/// The answer for the client when `line` (the child's answer to a call sent as a task) is
/// a `CreateTaskResult`; `None` when it is not (an error, or a plain result).
pub fn adopt(
    gateway: &Arc<Gateway>,
    backend: &Arc<Backend>,
    principal: Option<String>,
    raw_id: &str,
    line: &[u8],
) -> Option<(Vec<u8>, StatusCode)> {
    let answer: Value = serde_json::from_slice(line).ok()?;
    let result = answer.get("result")?;
    let child_id = result["task"]["taskId"].as_str()?.to_owned();
    let child_ttl = result["task"]["ttl"]
        .as_u64()
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis);
    let ttl = child_ttl.map_or(gateway.config.task_ttl, |t| t.min(gateway.config.task_ttl));
    let refuse = |message: &str, status: StatusCode| {
        // Nobody will read it: the child is told to stop it.
        cancel_in_child(backend, &child_id, &gateway.pool.next_id());
        Some((
            error_response(raw_id, INTERNAL_ERROR, message, None),
            status,
        ))
    };
    let inserted = gateway.tasks.insert(NewTask {
        principal,
        child_id: child_id.clone(),
        backend: Arc::downgrade(backend),
        ttl,
    });
    let task = match inserted {
        Ok(task) => task,
        Err(Full::Principal(max)) => {
            return refuse(&full_message(max), StatusCode::TOO_MANY_REQUESTS);
        }
    };
    let holding = Holding {
        tasks: gateway.tasks.clone(),
        upstream_id: gateway.pool.next_id(),
        send_wait: gateway.config.response_timeout,
    };
    if hold(holding, backend.clone(), task.clone()).is_err() {
        // Only an id already in use refuses a held request (ids are fresh): not expected.
        gateway.tasks.remove(&task.id);
        return refuse(
            "the gateway could not follow the task in the MCP server; call again",
            StatusCode::OK,
        );
    }
    let mut flat = create_result_to_modern(result, &task.id)?;
    flat["ttlMs"] = json!(task.ttl_ms);
    let line = format!(r#"{{"jsonrpc":"2.0","id":{raw_id},"result":{flat}}}"#).into_bytes();
    Some((line, StatusCode::OK))
}

/// The refusal past `--max-tasks-per-principal`.
pub fn full_message(max: usize) -> String {
    format!(
        "Too Many Requests: you hold --max-tasks-per-principal ({max}) tasks that are running or whose end you have not read; read an ended one with tasks/get (or wait for one to end or cancel it, then read it), then call again"
    )
}

/// How a 2026-07-28 client's `tools/call` goes to a child that runs tools as tasks.
pub enum Planned {
    /// As it is (no `task` parameter): its answer is the result.
    Plain,
    /// With this `task` parameter: its answer is a task, held for the client.
    AsTask(Value),
    /// Not at all: this answer instead (the tool runs only as a task and the client did
    /// not opt in, or the principal holds all the tasks it may).
    Refused(Vec<u8>, StatusCode),
}

/// The plan for a call to a tool with `support` from a client with `capabilities`.
pub fn plan(
    gateway: &Gateway,
    principal: Option<&str>,
    raw_id: &str,
    capabilities: &Value,
    support: TaskSupport,
) -> Planned {
    match plan_call(support, opted_in(capabilities)) {
        CallPlan::Plain => Planned::Plain,
        CallPlan::MissingCapability => Planned::Refused(
            error_response(
                raw_id,
                MISSING_CLIENT_CAPABILITY,
                &format!(
                    "Missing required client capability: this tool runs only as a task; declare {EXTENSION} in clientCapabilities.extensions"
                ),
                Some(missing_capability_data()),
            ),
            StatusCode::BAD_REQUEST,
        ),
        CallPlan::AsTask => match gateway.tasks.room_for(principal) {
            Err(Full::Principal(max)) => Planned::Refused(
                error_response(raw_id, INTERNAL_ERROR, &full_message(max), None),
                StatusCode::TOO_MANY_REQUESTS,
            ),
            Ok(()) => {
                let ttl: u64 = gateway
                    .config
                    .task_ttl
                    .as_millis()
                    .try_into()
                    .unwrap_or(u64::MAX);
                Planned::AsTask(json!({ "ttl": ttl }))
            }
        },
    }
}
