//! What a 2026-07-28 client is shown of a task a handshake-era child runs: the view
//! `tasks/get` answers and `notifications/tasks` carries, from the child's word on the task
//! and what the gateway holds (its outcome, its pending questions), and the telling of it
//! to listens.

use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::era::tasks::{detailed_task, is_terminal};
use crate::jsonrpc::error::INTERNAL_ERROR;
use crate::serve::pool::Backend;
use crate::serve::task_table::{Outcome, Task};

/// The 2026-07-28 view of a task from the child's word on it (`snapshot`, a 2025-11-25
/// `Task`) and what the gateway holds: the outcome decides an ended task; a running one
/// is `input_required` exactly while a question of its is in hand.
pub fn compose(task: &Task, mut snapshot: Value, outcome: Option<Outcome>) -> Value {
    snapshot["ttl"] = json!(task.ttl_ms);
    let status = snapshot["status"].as_str().unwrap_or("working").to_owned();
    if is_terminal(&status) || outcome.is_some() {
        let (status, result, error) = ended(&status, outcome);
        snapshot["status"] = json!(status);
        return detailed_task(&snapshot, &task.id, result.as_ref(), error.as_ref(), None);
    }
    let questions = task.progress.lock().expect("task lock").questions.clone();
    if questions.is_empty() {
        if status == "input_required" {
            // The child's question is on its way to the held `tasks/result`.
            snapshot["status"] = json!("working");
        }
        return detailed_task(&snapshot, &task.id, None, None, None);
    }
    snapshot["status"] = json!("input_required");
    let requests: Map<String, Value> = questions
        .into_iter()
        .map(|(key, q)| (key, json!({"method": q.method, "params": q.params})))
        .collect();
    detailed_task(&snapshot, &task.id, None, None, Some(&requests))
}

/// What a finished task shows: its status, and the result or error to inline. In
/// 2026-07-28 a tool's own error (`isError`) is a completed task with that result, and
/// `failed` is for a protocol error, inlined as `error`; so the outcome decides, whatever
/// status the child gave. A task that ended without an outcome (the child never answered
/// its `tasks/result`) failed.
fn ended(status: &str, outcome: Option<Outcome>) -> (&'static str, Option<Value>, Option<Value>) {
    match (status, outcome) {
        ("cancelled", _) => ("cancelled", None, None),
        (_, Some(Outcome::Result(result))) => ("completed", Some(result), None),
        (_, Some(Outcome::Error(error))) => ("failed", None, Some(error)),
        (_, None) => (
            "failed",
            None,
            Some(
                json!({"code": INTERNAL_ERROR, "message": "the MCP server ended the task without giving its result"}),
            ),
        ),
    }
}

/// The child's last word, when the gateway already holds the task's end.
pub fn known_end(task: &Task) -> Option<Value> {
    known_end_of(&task.progress.lock().expect("task lock"))
}

fn known_end_of(progress: &crate::serve::task_table::Progress) -> Option<Value> {
    let status = match progress.outcome.as_ref()? {
        _ if progress.cancelled => "cancelled",
        Outcome::Result(_) => "completed",
        Outcome::Error(_) => "failed",
    };
    let mut last = progress.last.clone().unwrap_or_else(|| json!({}));
    last["status"] = json!(status);
    Some(last)
}

/// Tells the client's listens (`subscriptions/listen` with `taskIds`) that the task's
/// status, or the questions it waits on, changed (`notifications/tasks`, the task as
/// `tasks/get` shows it). An end the child announced before its result reached the
/// gateway is told with the result, not before it.
pub fn announce(backend: &Backend, task: &Task) {
    let (snapshot, outcome) = {
        let progress = task.progress.lock().expect("task lock");
        let mut snapshot = match known_end_of(&progress) {
            Some(end) => end,
            None => progress
                .last
                .clone()
                .unwrap_or_else(|| json!({"status": "working"})),
        };
        if progress.outcome.is_none() && snapshot["status"].as_str().is_some_and(is_terminal) {
            snapshot["status"] = json!("working");
        }
        (snapshot, progress.outcome.clone())
    };
    let mut view = compose(task, snapshot, outcome);
    let pending: Vec<&String> = view
        .get("inputRequests")
        .and_then(Value::as_object)
        .map(|r| r.keys().collect())
        .unwrap_or_default();
    let said = format!("{}:{pending:?}", view["status"]);
    {
        let mut progress = task.progress.lock().expect("task lock");
        if progress.announced.as_deref() == Some(said.as_str()) {
            return;
        }
        progress.announced = Some(said);
    }
    if let Some(view) = view.as_object_mut() {
        view.remove("resultType");
    }
    let line =
        json!({"jsonrpc": "2.0", "method": crate::era::tasks::STATUS_NOTIFICATION, "params": view});
    backend.session.events.change(Bytes::from(line.to_string()));
}
