//! `tasks/get`, `tasks/update` and `tasks/cancel` of a 2026-07-28 client for a task a
//! handshake-era child runs: `tasks/get` asks the child's `tasks/get` and inlines what the
//! held `tasks/result` brought (the result, the error, or the pending questions as
//! `inputRequests`); `tasks/update` answers the child's questions; `tasks/cancel` reaches
//! the child once and is acknowledged however often it comes.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::view::{announce, compose, known_end};
use crate::era::tasks::is_terminal;
use crate::jsonrpc::error::{INTERNAL_ERROR, INVALID_PARAMS, error_response};
use crate::serve::gateway::Gateway;
use crate::serve::params::ask_answer;
use crate::serve::pool::Backend;
use crate::serve::task_table::Task;

/// The longest `tasks/get` waits for the result of a task the child calls finished (the
/// held `tasks/result` brings it a moment later, or not at all if the child is broken).
const RESULT_WAIT: Duration = Duration::from_secs(5);

/// A JSON-RPC answer line for the client.
pub type Line = Vec<u8>;

/// Answers a tasks method for the task the params name, if it is the caller's.
pub async fn answer(
    gateway: &Arc<Gateway>,
    principal: Option<&str>,
    raw_id: &str,
    method: &str,
    params: &Map<String, Value>,
) -> Line {
    let Some(id) = params.get("taskId").and_then(Value::as_str) else {
        return error_response(
            raw_id,
            INVALID_PARAMS,
            "Invalid params: taskId must be the string a CreateTaskResult gave",
            None,
        );
    };
    let Some(task) = gateway.tasks.get(id, principal) else {
        return unknown(raw_id, id);
    };
    match method {
        "tasks/get" => get(gateway, raw_id, &task).await,
        "tasks/update" => update(gateway, raw_id, &task, params).await,
        _ => cancel(gateway, raw_id, &task).await,
    }
}

/// The -32602 for a task id that is not the caller's (never was, expired, another's).
pub fn unknown(raw_id: &str, id: &str) -> Line {
    let shown: String = id.chars().take(64).collect();
    error_response(
        raw_id,
        INVALID_PARAMS,
        &format!(
            "Invalid params: unknown task {shown:?} (no such task for you: it never existed, its ttl is up, or it is another caller's)"
        ),
        None,
    )
}

fn complete(raw_id: &str, result: Value) -> Line {
    format!(r#"{{"jsonrpc":"2.0","id":{raw_id},"result":{result}}}"#).into_bytes()
}

/// `tasks/get`: the child's word on the task, with what the gateway holds inlined.
async fn get(gateway: &Arc<Gateway>, raw_id: &str, task: &Arc<Task>) -> Line {
    let snapshot = match child_task(gateway, task).await {
        Ok(snapshot) => snapshot,
        Err(Lost::Forgotten) => {
            gateway.tasks.remove(&task.id);
            return unknown(raw_id, &task.id);
        }
        Err(Lost::Gone) => {
            json!({"status": "failed", "statusMessage": "the MCP server exited; the task is lost"})
        }
    };
    let terminal = snapshot["status"].as_str().is_some_and(is_terminal);
    let outcome = if terminal {
        let outcome = task
            .outcome_within(RESULT_WAIT.min(gateway.config.response_timeout))
            .await;
        task.progress.lock().expect("task lock").delivered = true;
        outcome
    } else {
        task.progress.lock().expect("task lock").outcome.clone()
    };
    complete(raw_id, compose(task, snapshot, outcome))
}

/// Why the child could not say how the task is.
enum Lost {
    /// It does not know the task (its ttl, a restart it survived).
    Forgotten,
    /// It is gone.
    Gone,
}

/// The child's `tasks/get` for the task.
async fn child_task(gateway: &Arc<Gateway>, task: &Task) -> Result<Value, Lost> {
    let Some(backend) = task.live_backend() else {
        return known_end(task).ok_or(Lost::Gone);
    };
    let params = json!({"taskId": task.child_id});
    let answer = ask_answer(gateway, &backend, "tasks/get", as_map(params)).await;
    match answer {
        Some(answer) if answer["result"].is_object() => Ok(answer["result"].clone()),
        // The child says it has no such task: over and forgotten (the gateway may have
        // kept its end), or lost.
        Some(answer) if answer["error"].is_object() => known_end(task).ok_or(Lost::Forgotten),
        // No answer in time (a busy child): the gateway's last word on it, not a verdict.
        _ => Ok(known_end(task).unwrap_or_else(|| last_word(task))),
    }
}

/// The child's last status notification on the task, or `working`, while it runs.
fn last_word(task: &Task) -> Value {
    let progress = task.progress.lock().expect("task lock");
    progress
        .last
        .clone()
        .unwrap_or_else(|| json!({"status": "working"}))
}

/// `tasks/update`: each answer that matches a pending question goes to the child; keys
/// it does not know are ignored (the question may have been answered already).
async fn update(
    gateway: &Arc<Gateway>,
    raw_id: &str,
    task: &Task,
    params: &Map<String, Value>,
) -> Line {
    let Some(responses) = params.get("inputResponses").and_then(Value::as_object) else {
        return error_response(
            raw_id,
            INVALID_PARAMS,
            "Invalid params: inputResponses must be an object keyed like the task's inputRequests",
            None,
        );
    };
    let answers: Vec<(String, String)> = {
        let progress = task.progress.lock().expect("task lock");
        if let Some((key, q)) = responses
            .iter()
            .filter_map(|(key, r)| {
                progress
                    .questions
                    .get(key)
                    .map(|q| (key, q))
                    .filter(|_| !r.is_object())
            })
            .next()
        {
            let why = format!(
                "Invalid params: inputResponses.{key} must be the result object of {}",
                q.method
            );
            return error_response(raw_id, INVALID_PARAMS, &why, None);
        }
        responses
            .iter()
            .filter_map(|(key, response)| {
                let question = progress.questions.get(key)?;
                let answer = format!(
                    r#"{{"jsonrpc":"2.0","id":{},"result":{response}}}"#,
                    question.asker_raw_id
                );
                Some((key.clone(), answer))
            })
            .collect()
    };
    let Some(backend) = task.live_backend() else {
        return complete(raw_id, json!({"resultType": "complete"}));
    };
    for (key, answer) in answers {
        let sent = backend
            .session
            .backend
            .send(Bytes::from(answer), gateway.config.response_timeout)
            .await;
        if sent.is_err() {
            // Still pending: the client may send it again.
            return error_response(
                raw_id,
                INTERNAL_ERROR,
                "the MCP server is not taking messages; the answer was not delivered, send it again",
                None,
            );
        }
        task.progress
            .lock()
            .expect("task lock")
            .questions
            .remove(&key);
    }
    announce(&backend, task);
    complete(raw_id, json!({"resultType": "complete"}))
}

/// `tasks/cancel`: the child is told until it acknowledges; a task already ended (or whose
/// cancel the child took) is acknowledged as it is.
async fn cancel(gateway: &Arc<Gateway>, raw_id: &str, task: &Task) -> Line {
    let ack = || complete(raw_id, json!({"resultType": "complete"}));
    {
        let mut progress = task.progress.lock().expect("task lock");
        // The client is done with it: an ended task may make room first.
        progress.delivered = true;
        if progress.cancelled || progress.outcome.is_some() {
            return ack();
        }
    }
    let Some(backend) = task.live_backend() else {
        return ack();
    };
    let params = as_map(json!({"taskId": task.child_id}));
    let Some(answer) = ask_answer(gateway, &backend, "tasks/cancel", params).await else {
        return error_response(
            raw_id,
            INTERNAL_ERROR,
            "the MCP server did not take the cancellation in time; send tasks/cancel again",
            None,
        );
    };
    // A child that calls the task already finished (-32602) raced the client: the cancel
    // is acknowledged all the same (it is idempotent in 2026-07-28), and the task shows
    // how it really ended.
    if answer["result"].is_object() {
        let questions = {
            let mut progress = task.progress.lock().expect("task lock");
            progress.cancelled = true;
            std::mem::take(&mut progress.questions)
        };
        // Its questions are refused, so nothing in the child waits on them.
        for question in questions.values() {
            let refusal = error_response(
                &question.asker_raw_id,
                INTERNAL_ERROR,
                "the task was cancelled",
                None,
            );
            backend.session.backend.send_now(Bytes::from(refusal));
        }
    }
    ack()
}

fn as_map(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Whether the backend's child runs tools as 2025-11-25 tasks (then serve offers the
/// extension to 2026-07-28 clients).
pub fn child_runs_tool_tasks(backend: &Backend) -> bool {
    !backend.modern
        && crate::era::tasks::legacy_server_runs_tool_tasks(&backend.initialize["capabilities"])
}
