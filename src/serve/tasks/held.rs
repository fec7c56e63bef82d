//! The gateway's own `tasks/result` for each task it holds, open from the task's creation
//! to its end. A 2025-11-25 server may release its questions tied to a task only while a
//! `tasks/result` for it is open (the TypeScript SDK's task message queue does), and the
//! 2026-07-28 client never sends one: so the gateway keeps one open, collects the child's
//! questions as the task's pending `inputRequests`, and keeps the result or error for
//! `tasks/get`. It is not a client's call: no `--timeout-response`, no cancellation when
//! a client goes away; it ends with the task (the answer, the ttl, the child's end), and
//! it keeps the child busy (not reaped as idle) while it runs. It is bounded by the tasks
//! table (`--max-tasks-per-principal`), not by `--max-requests-per-session`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::view::announce;
use crate::jsonrpc::error::{METHOD_NOT_FOUND, error_response};
use crate::jsonrpc::message::{IdKey, Kind, parse};
use crate::serve::backend::{Conflict, Event};
use crate::serve::pool::Backend;
use crate::serve::task_table::{Outcome, Question, Task, Tasks};

/// What the holder needs of the gateway.
pub struct Holding {
    pub tasks: Arc<Tasks>,
    /// A fresh upstream id for the held request.
    pub upstream_id: String,
    /// How long the child's stdin may stay full before the request is given up.
    pub send_wait: std::time::Duration,
}

/// Opens the held `tasks/result` for `task` in `backend`'s child and follows it until the
/// task ends, then keeps the task until its ttl is up. `Err` when the child cannot take
/// one more request now (the task is then dropped).
pub fn hold(holding: Holding, backend: Arc<Backend>, task: Arc<Task>) -> Result<(), Conflict> {
    let key = IdKey::Str(holding.upstream_id.clone());
    let mut params = Map::new();
    params.insert("taskId".into(), Value::String(task.child_id.clone()));
    let line = Bytes::from(crate::era::request::request_line(
        &serde_json::to_string(&holding.upstream_id).expect("a string"),
        "tasks/result",
        &params,
    ));
    let session = backend.session.clone();
    let (tx, rx) = mpsc::channel(64);
    session
        .backend
        .register_tied(key.clone(), &line, &task.child_id, tx)?;
    session.busy.fetch_add(1, Ordering::Relaxed);
    tokio::spawn(async move {
        let sent = session.backend.send(line, holding.send_wait).await;
        let followed = sent.is_ok() && follow(&backend, &task, rx).await;
        session.backend.forget(&key);
        session.busy.fetch_sub(1, Ordering::Relaxed);
        session.touch();
        if !followed {
            // Dropped before its end (ttl, eviction), or never followed: the child is told
            // to stop it, and the client that it is lost.
            cancel_in_child(&backend, &task.child_id, &holding.upstream_id);
            task.settle(lost());
            announce(&backend, &task);
        }
        // The task is kept (its result readable) until its ttl is up.
        tokio::select! {
            _ = tokio::time::sleep_until(task.expires) => holding.tasks.remove(&task.id),
            _ = task.dropped.cancelled() => {}
        }
    });
    Ok(())
}

/// Follows the held request until the task ends (true) or is dropped (false).
async fn follow(backend: &Backend, task: &Task, mut rx: mpsc::Receiver<Event>) -> bool {
    loop {
        let event = tokio::select! {
            event = rx.recv() => event,
            _ = tokio::time::sleep_until(task.expires) => return false,
            _ = task.dropped.cancelled() => return false,
        };
        match event {
            Some(Event::Message(line)) => {
                on_message(backend, task, &line);
                announce(backend, task);
            }
            Some(Event::Answer(line)) => {
                task.settle(outcome_of(&line));
                announce(backend, task);
                return true;
            }
            // The child is gone (its reason stays in the gateway's log).
            Some(Event::Failed(_)) | None => {
                task.settle(lost());
                announce(backend, task);
                return true;
            }
        }
    }
}

/// The error of a task whose child is gone or that was dropped before its end.
fn lost() -> Outcome {
    Outcome::Error(json!({"code": crate::jsonrpc::error::INTERNAL_ERROR,
        "message": "the task is lost: the MCP server exited or stopped taking requests, or the task's ttl was up"}))
}

/// The held request's answer as the task's outcome.
fn outcome_of(line: &[u8]) -> Outcome {
    let value: Value = serde_json::from_slice(line).unwrap_or_default();
    match (value.get("result"), value.get("error")) {
        (Some(result), _) => Outcome::Result(result.clone()),
        (None, Some(error)) => Outcome::Error(error.clone()),
        _ => Outcome::Error(
            json!({"code": crate::jsonrpc::error::INTERNAL_ERROR, "message": "the MCP server's answer is not JSON-RPC"}),
        ),
    }
}

/// Something the child said tied to the task: a question becomes a pending input request;
/// a status notification is the child's latest word on the task.
fn on_message(backend: &Backend, task: &Task, line: &[u8]) {
    let Ok(message) = parse(line) else { return };
    let method = message.method.as_deref().unwrap_or_default();
    let params: Value = message
        .params
        .and_then(|p| serde_json::from_str(p.get()).ok())
        .unwrap_or_else(|| json!({}));
    match message.kind {
        Kind::Notification if method == crate::era::tasks::LEGACY_STATUS_NOTIFICATION => {
            task.progress.lock().expect("task lock").last = Some(params);
        }
        Kind::Request => {
            let asker_raw_id = message.id.map_or("null", |i| i.get()).to_owned();
            if method == "ping" {
                let pong = format!(r#"{{"jsonrpc":"2.0","id":{asker_raw_id},"result":{{}}}}"#);
                backend.session.backend.send_now(Bytes::from(pong));
                return;
            }
            if !matches!(
                method,
                "elicitation/create" | "sampling/createMessage" | "roots/list"
            ) {
                let refusal = error_response(
                    &asker_raw_id,
                    METHOD_NOT_FOUND,
                    &format!("a task's client cannot be asked {method}"),
                    None,
                );
                backend.session.backend.send_now(Bytes::from(refusal));
                return;
            }
            let mut progress = task.progress.lock().expect("task lock");
            // `--max-task-questions` (each up to `--max-message-size`): more are refused.
            let most = task.max_questions;
            if progress.questions.len() >= most {
                drop(progress);
                let refusal = error_response(
                    &asker_raw_id,
                    crate::jsonrpc::error::INTERNAL_ERROR,
                    &format!("a task may wait on {most} questions at once (--max-task-questions)"),
                    None,
                );
                backend.session.backend.send_now(Bytes::from(refusal));
                return;
            }
            progress.asked += 1;
            let key = format!("{}-{}", input_key(method), progress.asked);
            let params = crate::era::tasks::without_related_task(&params);
            progress.questions.insert(
                key,
                Question {
                    asker_raw_id,
                    method: method.to_owned(),
                    params,
                },
            );
        }
        _ => {}
    }
}

/// The start of a question's key in `inputRequests` (a number makes it unique).
fn input_key(method: &str) -> &'static str {
    match method {
        "elicitation/create" => "elicitation",
        "sampling/createMessage" => "sampling",
        _ => "roots",
    }
}

/// Tells the child to stop a task nobody will read (best effort).
pub fn cancel_in_child(backend: &Backend, child_id: &str, id_base: &str) {
    let line = crate::era::request::request_line(
        &serde_json::to_string(&format!("{id_base}-cancel")).expect("a string"),
        "tasks/cancel",
        &json!({"taskId": child_id})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    );
    backend.session.backend.send_now(Bytes::from(line));
}
